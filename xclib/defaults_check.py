"""Every estimator at its defaults on real data as users load it, against scikit-learn.

A user who has never read the book fits ``xclib.<Estimator>()`` on their own features as they
would ``sklearn.linear_model.LogisticRegression()``. :func:`run` does that on the real sets
of :mod:`xclib.datasets` in their raw forms (pixel values in [0, 1], word counts, colour
histogram counts, integer codes, tf-idf, unscaled measurements) and measures each
estimator's test accuracy and training seconds beside ``LogisticRegression()``'s on the same
rows. The notation page of the book prints the table; ``tests/test_defaults_real.py`` checks
it: within :data:`ACCURACY_MARGIN` of scikit-learn, no divergence, at most
:data:`TIME_FACTOR` times its seconds (or :data:`TIME_FLOOR`).

Each set is cut to a seeded subsample of its rows (:data:`SETS`) so that the whole table
takes minutes: the point is the features' scale and K, not N.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from . import datasets

__all__ = ["ACCURACY_MARGIN", "TIME_FACTOR", "TIME_FLOOR", "SETS", "MULTICLASS", "BINARY", "Case",
           "load_case", "run"]

#: how far below ``LogisticRegression()``'s test accuracy a default fit may end
ACCURACY_MARGIN = 0.05
#: how many times ``LogisticRegression()``'s training seconds a default fit may take ...
TIME_FACTOR = 3.0
#: ... counting those as at least this many seconds (a fit of a second is never too slow)
TIME_FLOOR = 1.0


@dataclass(frozen=True)
class Case:
    """One set as users load it: the :func:`xclib.datasets.load` name and options, what the
    features are, and the rows kept (None: all)."""

    dataset: str
    features: str
    n_train: int | None = None
    n_test: int | None = None
    options: tuple = ()
    classes: int | None = None  # keep the rows of the first ``classes`` class codes only


#: The sets, in their raw forms (``datasets.load`` without ``normalize``), cut to a seeded
#: subsample of rows so that the table takes minutes: the point is the features' scale.
#: ALOI keeps its first 100 objects (all 1,000 would leave 5 training rows a class here).
SETS = {
    "MNIST": Case("mnist", "pixel values in [0, 1]", 5_000, 2_000),
    "Bibtex": Case("bibtex", "binary word counts, ‖x‖² up to 271", 2_500, None),
    "Delicious": Case("delicious", "binary word counts", 2_500, None),
    "ALOI": Case("aloi", "colour-histogram counts 1-9", 5_000, None, classes=100),
    "CLEF": Case("clef", "integers 0-7", 4_000, None),
    "20 Newsgroups": Case("20newsgroups", "tf-idf, 10,000 words", 5_000, 3_000),
    "a9a": Case("a9a", "binary indicators", 10_000, 5_000),
    "covtype": Case("covtype_binary", "unscaled, values up to 7,172", 50_000, 20_000),
}


def _multiclass():
    from . import (DSMLR, NCE, OVE, AugmentReduce, DataParallelLBFGS, ImplicitSGD,
                   ImportanceSampling, Memoir, MinibatchImplicitSGD, MultinomialSQB,
                   SoftmaxRegression, UMax, VanillaSGD)
    return {
        "SoftmaxRegression()": SoftmaxRegression,
        "VanillaSGD()": VanillaSGD, "UMax()": UMax, "ImplicitSGD()": ImplicitSGD,
        "MinibatchImplicitSGD()": MinibatchImplicitSGD,
        "OVE()": OVE, "NCE()": NCE, "ImportanceSampling()": ImportanceSampling,
        "AugmentReduce()": AugmentReduce,
        "Memoir()": Memoir, "Memoir(oracle='simple_lsh')": lambda: Memoir(oracle="simple_lsh"),
        "MultinomialSQB()": MultinomialSQB, "DSMLR()": DSMLR,
        "DataParallelLBFGS()": DataParallelLBFGS,
    }


def _binary():
    from . import SQB, LogisticASGD, LogisticLBFGS, LogisticSAG, LogisticSGD
    return {"LogisticSGD()": LogisticSGD, "LogisticASGD()": LogisticASGD,
            "LogisticSAG()": LogisticSAG, "LogisticLBFGS()": LogisticLBFGS, "SQB()": SQB}


#: label -> factory of every multi-class estimator at its defaults, and the paper's MEMOIR-LSH
#: (``Memoir()`` takes the exact margin up to K = 1,000; the HNSW oracle re-inserts every
#: updated row into its graph after each batch: on full Bibtex alone that takes minutes, see
#: chapter 5)
MULTICLASS = _multiclass()
#: label -> factory of the binary estimators (a9a and covtype only)
BINARY = _binary()


def load_case(name, seed=0):
    """``(X_train, y_train, X_test, y_test, dropped)`` of :data:`SETS` ``[name]``: seeded row
    subsamples; test rows whose class never occurs in the training rows are dropped (no
    model can score them) and counted in ``dropped``."""
    case = SETS[name]
    opts = dict(case.options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rows without labels (Delicious) are reported there
        Xtr, ytr = datasets.load(case.dataset, "train", **opts)
        Xte, yte = datasets.load(case.dataset, "test", **opts)
    if case.classes is not None:
        Xtr, ytr = Xtr[ytr < case.classes], ytr[ytr < case.classes]
        Xte, yte = Xte[yte < case.classes], yte[yte < case.classes]
    rng = np.random.default_rng(seed)
    Xtr, ytr = _subsample(Xtr, ytr, case.n_train, rng)
    Xte, yte = _subsample(Xte, yte, case.n_test, rng)
    keep = np.isin(yte, ytr)
    return Xtr, ytr, Xte[keep], yte[keep], int((~keep).sum())


def _subsample(X, y, n, rng):
    if n is None or X.shape[0] <= n:
        return X, y
    rows = np.sort(rng.choice(X.shape[0], n, replace=False))
    return X[rows], y[rows]


def _seeded(make, seed):
    """An estimator from ``make`` with ``random_state=seed`` where it has one."""
    est = make()
    if "random_state" in est.get_params():
        est.set_params(random_state=seed)
    return est


def _fit(make, X, y, seed):
    """``(model, seconds, warnings)``: one fit after an untimed one on a few rows (numba's
    compilation is not counted)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            _seeded(make, seed).fit(X[:60], y[:60])
        except ValueError:
            pass  # e.g. a single class in the first rows: the full fit still compiles
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        model = _seeded(make, seed).fit(X, y)
        seconds = time.perf_counter() - t0
    names = sorted({type(w.message).__name__ for w in caught
                    if issubclass(w.category, (RuntimeWarning, UserWarning))
                    and not issubclass(w.category, (DeprecationWarning, FutureWarning))})
    return model, seconds, names


def run(sets=None, estimators=None, seed=0, n_jobs=None):
    """The table: one row per (set, estimator).

    Parameters
    ----------
    sets : list of names of :data:`SETS` (default all)
    estimators : list of labels of :data:`MULTICLASS` / :data:`BINARY` (default all that fit
        the set: the binary ones on the two binary sets only)
    seed : int, the row subsamples and every estimator's ``random_state`` (the one
        parameter set away from its default, so that the table is reproducible)
    n_jobs : int or None, sets run side by side in worker processes, one per core
        (:func:`xclib.book.one_per_core`); an estimator and ``LogisticRegression()`` always
        run in the same process, one after the other, so their ratio compares like with like

    Returns
    -------
    list of dict with keys ``set, estimator, accuracy, seconds, sklearn_accuracy,
    sklearn_seconds, sklearn_warnings, gap, time_ratio, within_time, diverged, warnings,
    n_train, n_test, K`` (``warnings``, ``sklearn_warnings``: the names of the warnings
    each fit raised, e.g. ``ConvergenceWarning`` when ``LogisticRegression()`` stopped at
    its ``max_iter``).
    """
    from .book import one_per_core

    jobs = [(name, estimators, seed) for name in (sets or list(SETS))]
    return [row for rows in one_per_core(_run_set, jobs, n_jobs) for row in rows]


def _run_set(name, estimators, seed):
    """The rows of one set (a job of :func:`run`)."""
    from sklearn.linear_model import LogisticRegression

    Xtr, ytr, Xte, yte, _ = load_case(name, seed)
    K = int(np.unique(ytr).size)
    ref, ref_s, ref_warnings = _fit(LogisticRegression, Xtr, ytr, seed)
    ref_acc = float(ref.score(Xte, yte))
    table = {**(BINARY if K == 2 else {}), **MULTICLASS}
    rows = []
    for label in estimators or list(table):
        if label not in table:
            continue
        model, s, names = _fit(table[label], Xtr, ytr, seed)
        acc = float(model.score(Xte, yte))
        rows.append(dict(set=name, estimator=label, accuracy=acc, seconds=s,
                         sklearn_accuracy=ref_acc, sklearn_seconds=ref_s,
                         sklearn_warnings=ref_warnings,
                         gap=acc - ref_acc, time_ratio=s / ref_s,
                         within_time=s <= TIME_FACTOR * max(ref_s, TIME_FLOOR),
                         diverged=bool(getattr(model, "diverged_", False)),
                         warnings=names, n_train=int(Xtr.shape[0]),
                         n_test=int(Xte.shape[0]), K=K))
    return rows
