"""Every method of the book on one protocol: the plumbing of the closing chapter.

The chapter (``notebooks/07_which_method.ipynb``) fits every estimator of ``xclib`` and the
practitioners' tools on the same rows, with the same ridge ``alpha`` per set, and measures how
fast each approaches the exact regularised optimum. This module holds what is not the
experiment itself:

* :func:`traced`: a copy of a stochastic estimator whose fit also records, after each epoch,
  the squared norm of its weights, so that the regularised objective
  ``mean log-loss + (alpha/2)·‖W‖²`` is known epoch by epoch (``objective_history``), next
  to ``history_``'s cumulative training seconds (evaluation excluded) and test log-loss;
* :func:`run_traced` and :func:`run_lbfgs`: one timed run, after an untimed warm-up, as a
  :class:`Trace` (seconds, objective, test log-loss, accuracy, peak memory);
* :func:`time_to_target`: the first second at which a trace is within a relative gap of the
  optimum's objective (or an absolute gap of its test log-loss); ``inf`` for never;
* :func:`run_napkinxc` and :func:`run_vw`: napkinXC's and Vowpal Wabbit's models on the same
  rows, with their probabilities where they give them;
* :func:`loglog_slope`: the slope of a cost against K on log-log axes, and
  :func:`evaluation_seconds`: the cost of one evaluation of the exact objective.

Its tables, figures and findings are in :mod:`xclib.book.compare.tables`.
"""
from __future__ import annotations

import os
import tempfile
import time
import tracemalloc
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone

from ...base import as_csr
from .. import warm_up
from ...metrics import softmax_loss_and_error

__all__ = ["Trace", "traced", "objective_history", "run_traced", "run_lbfgs",
           "time_to_target", "run_napkinxc", "run_vw", "loglog_slope", "validation_split",
           "prob_log_loss", "regularised_objective", "tune_learning_rate", "epochs_for",
           "choose_alpha", "load_real", "load_synthetic", "evaluation_seconds"]

#: floor of a probability when a tool's predicted probability of the true class is 0 (or the
#: class is missing from its top list): log-loss of such a row is -log(1e-15) ≈ 34.5, as in
#: scikit-learn's ``log_loss`` clipping
PROB_FLOOR = 1e-15


@dataclass
class Trace:
    """One run: ``seconds[i]`` training seconds at the i-th record, ``objective[i]`` the
    regularised training objective there (NaN when the model has none), ``test_loss[i]`` the
    test log-loss (NaN without probabilities); final test ``accuracy``, ``fit_seconds``
    (the whole fit, evaluation excluded), ``peak_mb`` (tracemalloc peak of the fit)."""

    method: str
    seconds: np.ndarray
    objective: np.ndarray
    test_loss: np.ndarray
    accuracy: float
    fit_seconds: float
    peak_mb: float = np.nan
    diverged: bool = False
    extra: dict = field(default_factory=dict)


def regularised_objective(coef, X, y, alpha, intercept=None):
    """``mean log-loss + (alpha/2)·‖coef‖²`` (intercept unpenalised) of encoded labels."""
    loss, _ = softmax_loss_and_error(coef, as_csr(X), y, intercept)
    return float(loss + 0.5 * alpha * float(np.sum(coef * coef)))


class _NormTrace:
    """Mixin recording ``‖W‖²`` (in the units of the user's ``X``) after every round."""

    def fit(self, X, y, **kw):
        self.sq_norms_ = []  # the start, then one entry per round
        return super().fit(X, y, **kw)

    def _round_metrics(self, state, X, y):
        out = super()._round_metrics(state, X, y)
        coef = out[0]
        s = float(getattr(self, "_fit_scale", 1.0))
        self.sq_norms_.append(np.nan if coef is None else float(np.sum(coef * coef)) / s / s)
        return out


_TRACED = {}


def traced(estimator):
    """A copy of ``estimator`` (same parameters) whose fit records ``sq_norms_``."""
    cls = type(estimator)
    if cls not in _TRACED:
        sub = type(cls.__name__, (_NormTrace, cls), {"__module__": __name__,
                                                     "__qualname__": f"_traced_{cls.__name__}"})
        globals()[f"_traced_{cls.__name__}"] = sub  # importable: picklable for workers
        _TRACED[cls] = sub
    return _TRACED[cls](**estimator.get_params())


def objective_history(model, alpha):
    """The regularised objective after each epoch of a :func:`traced` fit."""
    loss = np.asarray(model.history_["train_loss"], dtype=float)
    sq = np.asarray(model.sq_norms_[1:1 + loss.size], dtype=float)
    if "passes" in model.history_:  # SQB's history already holds the cost
        return loss
    return loss + 0.5 * float(alpha) * sq


def _accuracy(model, X, y):
    return float(np.mean(model.predict(X) == y))


@dataclass
class _Memory:
    peak_mb: float = np.nan


class _peak:
    """``with _peak() as m:`` then ``m.peak_mb``: tracemalloc's peak over the block (the
    arrays numpy allocates; numba kernels allocate none inside)."""

    def __enter__(self):
        self.out = _Memory()
        self.was = tracemalloc.is_tracing()
        if not self.was:
            tracemalloc.start()
        tracemalloc.reset_peak()
        return self.out

    def __exit__(self, *exc):
        self.out.peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
        if not self.was:
            tracemalloc.stop()
        return False


def run_traced(method, estimator, data, alpha):
    """Warm up, then one timed :func:`traced` fit of ``estimator`` on ``data`` (a dict with
    ``X, y, X_test, y_test``); the trajectory of its epochs as a :class:`Trace` (the first
    point is the start, W = 0, at 0 s)."""
    est = traced(estimator)
    warm_up(est, data["X"], data["y"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _peak() as mem:
            t0 = time.perf_counter()
            est.fit(data["X"], data["y"], eval_set=(data["X_test"], data["y_test"]))
            wall = time.perf_counter() - t0
    h = est.history_
    k = len(est.classes_)
    obj = objective_history(est, alpha)
    seconds = np.r_[0.0, np.asarray(h["time"], dtype=float)]
    test = np.r_[np.log(k), np.asarray(h["eval_loss"], dtype=float)]
    obj = np.r_[np.log(k), obj]
    return Trace(method, seconds, obj, test, _accuracy(est, data["X_test"], data["y_test"]),
                 float(seconds[-1]), mem.peak_mb, bool(getattr(est, "diverged_", False)),
                 {"wall_seconds": wall, "n_epochs": int(est.n_epochs_)})


def run_lbfgs(method, make, data, alpha, max_iters, loss_of=None, stop_at=None):
    """A deterministic solver's trajectory: one timed fit per ``max_iter`` in ``max_iters``
    (each from W = 0), each giving one point (its seconds, objective, test log-loss), until
    the objective is at most ``stop_at`` (None: every cap). ``make(max_iter)`` returns the
    estimator; ``loss_of(model)`` its ``(coef, intercept)`` (default ``coef_``,
    ``intercept_``). Warnings of the short fits (not converged) are silenced: stopping early
    is the point."""
    pts, model = [], None
    y_enc = np.searchsorted(np.unique(data["y"]), data["y"])
    yt_enc = np.searchsorted(np.unique(data["y"]), data["y_test"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make(max_iters[0]).fit(data["X"][:64], data["y"][:64])  # compile, untimed
        for m in max_iters:
            est = make(m)
            with _peak() as mem:  # the last fit's peak is kept
                t0 = time.perf_counter()
                est.fit(data["X"], data["y"])
                s = time.perf_counter() - t0
            coef, b = (est.coef_, getattr(est, "intercept_", None)) if loss_of is None \
                else loss_of(est)
            b = None if b is None or not np.any(b) else np.asarray(b, dtype=float)
            obj = regularised_objective(coef, data["X"], y_enc, alpha, b)
            test, _ = softmax_loss_and_error(coef, as_csr(data["X_test"]), yt_enc, b)
            pts.append((s, obj, float(test)))
            model = est
            if stop_at is not None and obj <= stop_at:
                break
    k = len(np.unique(data["y"]))
    arr = np.array([(0.0, np.log(k), np.log(k))] + pts)
    return Trace(method, arr[:, 0], arr[:, 1], arr[:, 2],
                 _accuracy(model, data["X_test"], data["y_test"]), float(arr[-1, 0]),
                 mem.peak_mb, False, {"model": model})


def time_to_target(seconds, values, target):
    """First entry of ``seconds`` where ``values <= target`` (``inf``: never)."""
    seconds, values = np.asarray(seconds, float), np.asarray(values, float)
    hit = np.flatnonzero(np.isfinite(values) & (values <= target))
    return float(seconds[hit[0]]) if hit.size else np.inf


def evaluation_seconds(data, repeats=3):
    """Seconds of one objective-and-gradient evaluation at W = 0 on ``data``'s training
    rows, an L-BFGS step's cost (the least of ``repeats``), after one on a few rows that
    compiles it."""
    from ...exact import softmax_objective

    y = np.searchsorted(np.unique(data["y"]), data["y"])
    W = np.zeros((np.unique(y).size, data["X"].shape[1]))
    softmax_objective(W, data["X"][:64], y[:64], 1.0)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        softmax_objective(W, data["X"], y, 1.0)
        times.append(time.perf_counter() - t0)
    return float(np.min(times))


def loglog_slope(x, y):
    """Least-squares slope of ``log y`` against ``log x`` (two points: their slope)."""
    x, y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    return float(np.polyfit(x, y, 1)[0])


def validation_split(X, y, fraction=0.1, random_state=0):
    """``(X_fit, y_fit, X_val, y_val)``: a seeded ``fraction`` of the rows held out, keeping
    only validation rows whose class occurs in the fitting rows."""
    rng = np.random.default_rng(random_state)
    n = X.shape[0]
    val = np.zeros(n, bool)
    val[rng.choice(n, int(round(fraction * n)), replace=False)] = True
    keep = val & np.isin(y, y[~val])
    return X[~val], y[~val], X[keep], y[keep]


def prob_log_loss(p_true):
    """Mean ``-log p`` of the true classes' predicted probabilities (floored at
    :data:`PROB_FLOOR`: a tool that gives the true class no mass pays -log 1e-15)."""
    return float(np.mean(-np.log(np.maximum(np.asarray(p_true, float), PROB_FLOOR))))


def run_napkinxc(method, make, data, top_k=None):
    """Fit a napkinXC model (``make(output_dir)``, rows as given) on ``data`` and measure the
    fit's seconds, test accuracy and, when ``top_k`` is set, the log-loss of the true class's
    probability among the ``top_k`` classes ``predict_proba`` returns (absent: floored)."""
    y = [[int(v)] for v in data["y"]]
    with tempfile.TemporaryDirectory() as out:
        model = make(out)
        t0 = time.perf_counter()
        model.fit(as_csr(data["X"]), y)
        seconds = time.perf_counter() - t0
        Xt = as_csr(data["X_test"])
        pred = np.array([p[0] if p else -1 for p in model.predict(Xt, top_k=1)])
        loss = np.nan
        if top_k:
            p_true = [dict(row).get(int(t), 0.0) for row, t in
                      zip(model.predict_proba(Xt, top_k=top_k), data["y_test"])]
            loss = prob_log_loss(p_true)
        model.unload()
    acc = float(np.mean(pred == data["y_test"]))
    return Trace(method, np.array([0.0, seconds]), np.full(2, np.nan),
                 np.array([np.nan, loss]), acc, seconds)


def _vw_lines(X, y):
    """Vowpal Wabbit text lines ``label | index:value ...`` (labels 1-based)."""
    X = as_csr(X)
    lines = []
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        feats = " ".join(f"{j}:{v:.6g}" for j, v in zip(X.indices[a:b], X.data[a:b]))
        lines.append(f"{int(y[i]) + 1} | {feats}")
    return lines


def run_vw(method, options, data, n_passes=5, probabilities=False, random_state=0):
    """Fit Vowpal Wabbit with ``options`` (e.g. ``"--oaa 146 --loss_function logistic"``)
    for ``n_passes`` passes over the training rows (a cache file, as VW's command line does)
    and measure seconds, test accuracy and, with ``probabilities`` (``--oaa`` only), test
    log-loss. Labels are encoded 0..K-1 here and 1..K for VW."""
    from vowpalwabbit import Workspace

    classes = np.unique(data["y"])
    y = np.searchsorted(classes, data["y"])
    yt = np.searchsorted(classes, data["y_test"])
    prob = " --probabilities" if probabilities else ""
    with tempfile.TemporaryDirectory() as tmp:
        train, model = os.path.join(tmp, "train.vw"), os.path.join(tmp, "model.vw")
        with open(train, "w") as f:
            f.write("\n".join(_vw_lines(data["X"], y)) + "\n")
        args = (f"--quiet -d {train} {options}{prob} --passes {n_passes} -c -k "
                f"--cache_file {train}.cache --holdout_off --random_seed {random_state} "
                f"-f {model}")
        t0 = time.perf_counter()
        vw = Workspace(args)
        vw.run_parser()
        vw.finish()
        seconds = time.perf_counter() - t0
        vw = Workspace(f"--quiet -t -i {model}{prob}")
        out = [vw.predict(line) for line in _vw_lines(data["X_test"], yt)]
        vw.finish()
    if probabilities:
        P = np.asarray(out, dtype=float)
        P = P / P.sum(axis=1, keepdims=True)
        pred, loss = np.argmax(P, axis=1), prob_log_loss(P[np.arange(yt.size), yt])
    else:
        pred, loss = np.asarray(out, dtype=int) - 1, np.nan
    return Trace(method, np.array([0.0, seconds]), np.full(2, np.nan),
                 np.array([np.nan, loss]), float(np.mean(pred == yt)), seconds)


def _val_loss(model, X, y):
    """Validation log-loss of a fitted model (inf when it diverged or is not finite)."""
    if getattr(model, "diverged_", False):
        return np.inf
    yv = np.searchsorted(model.classes_, y)
    loss, _ = softmax_loss_and_error(model.coef_, as_csr(X), yv, model.intercept_)
    return float(loss) if np.isfinite(loss) else np.inf


def _fit_val(estimator, params, X, y, X_val, y_val):
    """One untimed fit with ``params``: ``(validation log-loss, seconds per epoch, the
    resolved initial step learning_rate_)``."""
    est = clone(estimator).set_params(**params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    h = getattr(est, "history_", {})
    per_epoch = float(h["time"][-1] / len(h["time"])) if h.get("time") else np.nan
    step = getattr(est, "learning_rate_", params.get("learning_rate"))
    return _val_loss(est, X_val, y_val), per_epoch, step


def tune_learning_rate(estimator, X, y, X_val, y_val, factors=(0.25, 1.0, 4.0), n_epochs=2):
    """The one rule for every stochastic method: fit ``n_epochs`` epochs at the estimator's
    own initial step (``"auto"`` resolved, or its default number) and at ``factors`` times
    it, on ``(X, y)``; keep the step with the lowest log-loss on ``(X_val, y_val)``.

    Returns ``(best learning_rate, {learning_rate: validation log-loss}, seconds per epoch
    at the kept step)``. Steps are in the units of ``X`` (``learning_rate_``)."""
    base = clone(estimator).set_params(n_epochs=n_epochs)
    loss1, sec1, step = _fit_val(base, {}, X, y, X_val, y_val)
    scores, secs = {float(step): loss1}, {float(step): sec1}
    for f in factors:
        if f == 1.0:
            continue
        lr = float(step) * f
        scores[lr], secs[lr], _ = _fit_val(base, {"learning_rate": lr}, X, y, X_val, y_val)
    best = min(scores, key=lambda k: (scores[k], k))
    return best, scores, secs[best]


def epochs_for(seconds_budget, seconds_per_epoch, max_epochs, min_epochs=1):
    """Epochs that fill ``seconds_budget`` at ``seconds_per_epoch``, within the bounds."""
    if not np.isfinite(seconds_per_epoch) or seconds_per_epoch <= 0:
        return int(max_epochs)
    return int(np.clip(np.ceil(seconds_budget / seconds_per_epoch), min_epochs, max_epochs))


def choose_alpha(make, alphas, X, y, X_val, y_val, n_jobs=None):
    """The ridge of a set, chosen once for the exact solver: ``make(alpha)`` fitted on
    ``(X, y)`` for each of ``alphas`` (one per core), the one with the lowest validation
    log-loss kept. Returns ``(alpha, {alpha: validation log-loss})``."""
    from .. import one_per_core

    losses = one_per_core(_alpha_job, [(make(a), X, y, X_val, y_val) for a in alphas], n_jobs)
    scores = dict(zip(map(float, alphas), losses))
    return min(scores, key=scores.get), scores


def _alpha_job(est, X, y, X_val, y_val):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _val_loss(est.fit(X, y), X_val, y_val)


def _subsample(X, y, n, rng):
    if n is None or X.shape[0] <= n:
        return X, y
    rows = np.sort(rng.choice(X.shape[0], int(n), replace=False))
    return X[rows], y[rows]


def load_real(name, n_train=None, n_test=None, classes=None, random_state=0):
    """A real set of :func:`xclib.datasets.load` with rows at unit L2 norm, as a dict
    ``X, y, X_test, y_test``: the rows of the first ``classes`` class codes only (None:
    all), seeded subsamples of ``n_train`` and ``n_test`` rows (None: all), and test rows
    whose class never occurs in the training rows dropped (no model can score them)."""
    from ... import datasets

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Delicious: rows without a label are dropped there
        X, y = datasets.load(name, "train", normalize=True)
        Xt, yt = datasets.load(name, "test", normalize=True)
    if classes is not None:
        X, y, Xt, yt = X[y < classes], y[y < classes], Xt[yt < classes], yt[yt < classes]
    rng = np.random.default_rng(random_state)
    X, y = _subsample(as_csr(X), np.asarray(y), n_train, rng)
    Xt, yt = _subsample(as_csr(Xt), np.asarray(yt), n_test, rng)
    keep = np.isin(yt, y)
    return dict(X=X, y=y, X_test=Xt[keep], y_test=yt[keep])


def load_synthetic(n_train, n_test, n_features, n_classes, random_state=0, **options):
    """:func:`xclib.datasets.make_softmax_data` (unit rows) split into the first ``n_train``
    and the next ``n_test`` rows, as :func:`load_real`'s dict."""
    from ...datasets import make_softmax_data

    X, y, _ = make_softmax_data(n_train + n_test, n_features, n_classes,
                                random_state=random_state, **options)
    Xt, yt = X[n_train:], y[n_train:]
    keep = np.isin(yt, y[:n_train])
    return dict(X=X[:n_train], y=y[:n_train], X_test=Xt[keep], y_test=yt[keep])
