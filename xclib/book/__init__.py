"""Small helpers the chapter notebooks share: settings by scale, source listings, warm timings.

Numba compiles a kernel the first time it is called with new argument types, and that first
call can cost a second or more: a time measured around it measures the compiler. Every time a
chapter reports therefore comes from :func:`time_fit` (or :func:`warm_up` then a timer), which
first fits a copy of the estimator for one round on a few rows of the same data, so the kernels
the timed fit calls are already compiled.

Independent fits whose results (losses, accuracies), not their speed, a chapter reports can run
side by side, one per core (:func:`one_per_core`); a time they record then shares the machine
with the neighbouring fit, and the chapter says so where it shows one.
"""
from __future__ import annotations

import inspect
import time
from contextlib import contextmanager

import numpy as np
from sklearn.base import clone

__all__ = ["by_scale", "show_source", "warm_up", "time_fit", "timer", "one_per_core",
           "others_load"]

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


def one_per_core(fn, jobs, n_jobs=None):
    """``[fn(*job) for job in jobs]``, computed in worker processes, one per core.

    joblib's ``loky`` backend: ``fn`` and the jobs are pickled, and each worker's BLAS is
    limited to one thread, so two workers on two cores do not oversubscribe them. Arrays are
    copied to the workers, not memory-mapped: a read-only memory map is another type for
    numba, whose kernels would then compile again inside the first timed epoch, after
    :func:`warm_up` compiled them for writable arrays. With one core, or one job, the jobs run
    here in turn. Results come back in the order of ``jobs``; they do not depend on where a
    job ran.
    """
    import os

    jobs = [tuple(job) for job in jobs]
    n = min(n_jobs or os.cpu_count() or 1, len(jobs))
    if n <= 1:
        return [fn(*job) for job in jobs]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n, backend="loky", max_nbytes=None)(
        delayed(fn)(*job) for job in jobs)


def _busy_seconds():
    """Seconds all CPUs spent busy since boot (``/proc/stat``), or None off Linux."""
    import os

    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal ...
    busy = sum(int(fields[i]) for i in (1, 2, 3, 6, 7, 8) if i < len(fields))
    return busy / os.sysconf("SC_CLK_TCK")


@contextmanager
def others_load():
    """``with others_load() as load: ...`` then ``load["cores"]``: how many cores, on average
    over the block, other processes kept busy (the machine's busy time, from ``/proc/stat``,
    minus the CPU time of this process and of the children it waited for), and
    ``load["own"]``: the cores this process and those children used. A speed-up from P
    workers is only a measurement of the method when ``load["cores"]`` is well below
    ``os.cpu_count() − P + 1``. Off Linux, ``cores`` is the 1-minute load average at the end,
    which includes this process.
    """
    import os

    out = {"cores": np.nan, "own": np.nan}
    busy0, cpu0, wall0 = _busy_seconds(), _own_cpu_seconds(), time.perf_counter()
    try:
        yield out
    finally:
        wall = time.perf_counter() - wall0
        busy1 = _busy_seconds()
        mine = _own_cpu_seconds() - cpu0
        out["own"] = mine / wall if wall > 0 else np.nan
        if busy0 is None or busy1 is None or wall <= 0:
            out["cores"] = float(os.getloadavg()[0])
        else:
            out["cores"] = max(0.0, (busy1 - busy0 - mine) / wall)


def _own_cpu_seconds():
    """CPU seconds of this process and of its children that have ended (a benchmark run by
    ``subprocess.run`` inside the block is this process's work, not another's)."""
    import os

    t = os.times()
    return time.process_time() + t.children_user + t.children_system
