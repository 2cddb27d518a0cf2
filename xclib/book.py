"""Small helpers the chapter notebooks share: settings by scale, source listings, warm timings.

Numba compiles a kernel the first time it is called with new argument types, and that first
call can cost a second or more: a time measured around it measures the compiler. Every time a
chapter reports therefore comes from :func:`time_fit` (or :func:`warm_up` then a timer), which
first fits a copy of the estimator for one round on a few rows of the same data, so the kernels
the timed fit calls are already compiled.
"""
from __future__ import annotations

import inspect
import time
from contextlib import contextmanager

import numpy as np
from sklearn.base import clone

__all__ = ["by_scale", "show_source", "warm_up", "time_fit", "timer"]

SCALES = ("book", "full")


def by_scale(scale, book, full=None):
    """The settings of ``scale``: ``book`` (the paper's protocol on the data we have, within the
    build's budget) or ``full`` (``book`` updated with what did not fit)."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    settings = dict(book)
    if scale == "full":
        settings.update(full or {})
    return settings


def show_source(*objects):
    """Display the source of functions or classes as a Python code block."""
    from IPython.display import Markdown, display

    text = "\n\n".join(inspect.getsource(obj).rstrip() for obj in objects)
    display(Markdown(f"```python\n{text}\n```"))


def _small_budget(estimator):
    params = estimator.get_params()
    budget = {}
    for name in ("n_epochs", "max_iter"):
        if name in params and params[name] is not None:
            budget[name] = 1
    if "eval_every" in params and params["eval_every"] is not None:
        budget["eval_every"] = 1
    return budget


def warm_up(estimator, X, y, n_rows=64):
    """Fit a copy of ``estimator`` for one round on a few rows of ``(X, y)`` (every class's
    first row among them), so that its numba kernels are compiled for these argument types."""
    y = np.asarray(y)
    _, first = np.unique(y, return_index=True)
    rows = np.union1d(first, np.arange(min(n_rows, y.shape[0])))
    copy = clone(estimator).set_params(**_small_budget(estimator))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        copy.fit(X[rows], y[rows])
    return copy


@contextmanager
def timer():
    """``with timer() as t: ...`` then ``t["seconds"]``: wall-clock seconds of the block."""
    out = {"seconds": np.nan}
    t0 = time.perf_counter()
    try:
        yield out
    finally:
        out["seconds"] = time.perf_counter() - t0


def time_fit(estimator, X, y, **fit_params):
    """Fit ``estimator`` after :func:`warm_up`; return ``(estimator, seconds)`` of the fit
    alone (no compilation inside)."""
    warm_up(estimator, X, y)
    with timer() as t:
        estimator.fit(X, y, **fit_params)
    return estimator, t["seconds"]
