"""The plumbing of chapter 1 (Fagan & Iyengar, U-max and Implicit SGD).

The chapter's cells show each experiment (the estimator, its settings, the data); what they
share lives here: the paper's numbers set beside ours (:data:`PAPER_T1`, :data:`PAPER_T2`,
:data:`PAPER_T3`, the authors' result files :data:`AUTHORS`); the protocol's steps (the
first-label view of a set, the tuning subsample, the grid search that widens at an edge, the
run that steps its rate down when it overflows, a run's final log-loss, ``inf`` when it
diverged); the IS baseline with the four switches that separate it from the authors'
TensorFlow run (:func:`sampled_softmax_sgd`); the cost per step of the double-sum kernels
(:func:`time_kernels`); the distance to a regularised optimum, epoch by epoch
(:func:`distance_tracker`); the chapter's tables and figures, and :func:`decide`, a claim
whose status is its measured outcome.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pandas as pd
import scipy.sparse as sp
from numba import njit
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import normalize

from .. import datasets
from ..base import DivergenceWarning
from ..metrics import ranking_metrics, softmax_log_loss
from .._numba import csr_arrays
from ..unbiased import implicit_epoch, optimal_u, sgd_epoch
from . import time_fit, warm_up

__all__ = [
    "PAPER_T1", "PAPER_T2", "PAPER_T3", "AUTHORS", "BATCH", "SAMPLED", "DOUBLE", "METHODS",
    "encode", "load_first_label", "protocol_card", "subsample", "final_loss", "to_paper_scale",
    "exp10", "paper_grid", "tune_rate", "table2", "fit_reference", "reference_summary",
    "fit_stepping_down", "fit_quietly", "table3", "best_rate", "is_surrogate_epoch",
    "sampled_softmax_sgd", "time_kernels", "time_to", "label_metrics", "distance_tracker",
    "mean_step", "loglog_slope", "decide", "plot_step_sizes", "plot_figure1", "plot_figure2",
    "plot_cost", "plot_minibatch", "plot_convergence"]

#: n of the sampled baselines (OVE, NCE, IS): their rate on the sum of the losses is ours / n
BATCH = 100
SAMPLED = ("OVE", "NCE", "IS")
DOUBLE = ("Vanilla", "U-max", "Implicit")
METHODS = SAMPLED + DOUBLE

#: the paper's Table 1: N, K (labels of the multi-label set in brackets), D
PAPER_T1 = {"MNIST": (60000, "10", 780), "Bibtex": (4880, "147 (159)", 1836),
            "Delicious": (12920, "350 (983)", 500)}
#: the paper's Table 2 (tuned η₀ on the authors' scale), for the three sets we have
PAPER_T2 = {
    "MNIST": {"OVE": 10, "NCE": 10, "IS": 10, "Vanilla": 1e-2, "U-max": 10, "Implicit": 0.1},
    "Bibtex": {"OVE": 100, "NCE": 100, "IS": 100, "Vanilla": 1e-2, "U-max": 0.1,
               "Implicit": 10},
    "Delicious": {"OVE": 10, "NCE": 1000, "IS": 1000, "Vanilla": 1e-3, "U-max": 1e-2,
                  "Implicit": 1e-2}}
#: the paper's Table 3: final log-loss relative to Implicit SGD's, in the order of METHODS
PAPER_T3 = {"MNIST": [5.73, 6.05, 5.74, 1.43, 1.56, 1.00],
            "Bibtex": [29.03, 28.52, 32.71, 15.18, 9.77, 1.00],
            "Delicious": [1.90, 1.91, 1.89, 1.25, 1.11, 1.00]}
#: the authors' result files: final train log-loss after 50 epochs, read from the pickles of
#: francoisfagan/Log-tricks, Results/Complete/Tuned/ (commits 001e154 and 7b8fde4)
AUTHORS = {
    "MNIST": {"Implicit": 0.295, "U-max": 0.414, "Vanilla": 0.388, "NCE": 1.639,
              "OVE": 1.552, "IS": 1.554},
    "Bibtex": {"Implicit": 0.333, "U-max": 1.414, "Vanilla": 2.202, "NCE": 4.137,
               "OVE": 4.211, "IS": 4.157},
    "Delicious": {"Implicit": 3.203, "U-max": 3.307, "Vanilla": 3.714, "NCE": 5.691,
                  "OVE": 5.658, "IS": 5.644}}


def encode(y):
    """Labels as codes 0..K-1 (int64), in the order of their values."""
    return np.unique(y, return_inverse=True)[1].astype(np.int64)


def load_first_label(name, *, drop_empty=False, **load_options):
    """``(X, y, labels)``: a set with each row's first label as its class (codes 0..K-1).

    ``labels`` is ``(Y, columns)`` for a multi-label set (the rows' full label sets and the
    label column of each class code, for P@k), else None. ``drop_empty`` drops the rows
    without a non-zero feature (Delicious has some)."""
    X, y = datasets.load(name, **load_options)
    keep = (np.asarray(X.getnnz(axis=1)) > 0 if drop_empty
            else np.ones(X.shape[0], dtype=bool))
    X, y = X[keep], y[keep]
    labels = None
    if "labels" in datasets.DATASETS[name].options:
        labels = (datasets.load(name, labels="all")[1][keep],
                  datasets.label_columns(name, np.unique(y)))
    return X, encode(y), labels


def protocol_card(data, cfg, seed):
    """The protocol card: the paper's N, K, D and settings beside ours, one column a set."""
    card = []
    for name, (X, y) in data.items():
        pn, pk, pd_ = PAPER_T1.get(name, ("–", "–", "–"))
        grid = cfg["grid"] if name in PAPER_T2 else "10^{-3..3}"
        card.append({"dataset": name, "N (paper)": pn, "N (ours)": X.shape[0],
                     "K (paper)": pk, "K (ours)": int(y.max() + 1),
                     "D (paper)": pd_, "D (ours)": X.shape[1],
                     "epochs (paper / ours)": f"50 / {cfg['n_epochs']}",
                     "tuning (paper / ours)": f"10^{{-3..3}}, 10 %, 50 ep. / {grid}, "
                     f"{cfg['tune_fraction']:.0%}, {cfg['tune_epochs']} ep.",
                     "batch n, classes m (paper = ours)": "OVE/NCE/IS 100, 5; others 1, 1",
                     "seeds (paper / ours)": f"1 / {seed} ({len(cfg['seeds'])} on Bibtex)"})
    return pd.DataFrame(card).set_index("dataset").T


def subsample(X, y, fraction):
    """The first ``fraction`` of the rows, as the authors' tuning took them."""
    n = max(1, int(fraction * X.shape[0]))
    return X[:n], y[:n]


def final_loss(est, n_epochs=None):
    """The train log-loss after the last epoch (of any ``eval_every``); +inf for a run that
    diverged or stopped before ``n_epochs`` (default: the estimator's)."""
    n_epochs = est.n_epochs if n_epochs is None else n_epochs
    h, epochs = est.history_["train_loss"], est.history_["epoch"]
    return h[-1] if (not est.diverged_ and h and epochs[-1] == n_epochs) else np.inf


def to_paper_scale(method, lr):
    """Our rate on the authors' scale: the sampled baselines' step is their sum over the
    minibatch, ours its mean."""
    return lr / BATCH if method in SAMPLED else lr


def exp10(v):
    """``v`` as its nearest power of ten, e.g. ``1e+02``."""
    return f"1e{int(round(math.log10(v))):+d}"


def paper_grid(centre, method, full=False):
    """Three decades centred on the paper's tuned rate (on our scale); the paper's seven
    decades 10^-3..10^3 when ``full`` or without a paper rate."""
    if centre is None or full:
        return [10.0 ** p for p in range(-3, 4)]
    c = round(math.log10(centre * (BATCH if method in SAMPLED else 1)))
    return [10.0 ** p for p in (c - 1, c, c + 1)]


def tune_rate(fit, grid, n_epochs, lowest=1e-7, highest=1e7):
    """Grid search: ``fit(lr)`` (a fitted estimator) at each rate of ``grid``, widened by a
    decade while the best final log-loss sits at an edge. Returns ``(best rate, {rate:
    history_})``, rates in increasing order."""
    runs = {}
    while True:
        for lr in grid:
            if lr not in runs:
                runs[lr] = fit(lr)
        best = best_rate({lr: final_loss(e, n_epochs) for lr, e in runs.items()})
        lo, hi = min(runs), max(runs)
        if best == lo and lo > lowest:
            grid = [lo / 10]
        elif best == hi and hi < highest:
            grid = [hi * 10]
        else:
            return best, {lr: runs[lr].history_ for lr in sorted(runs)}


def table2(tuned, sets):
    """Tuned η₀ beside the paper's Table 2, both on the paper's scale (powers of ten)."""
    return pd.DataFrame({
        (m, who): {n: exp10(to_paper_scale(m, tuned[(n, m)]) if who == "ours"
                            else PAPER_T2[n][m]) for n in sets}
        for m in METHODS for who in ("ours", "paper")})


def fit_reference(estimator, X, y):
    """``(estimator, seconds)``: the exact solver's timed fit, its iteration cap expected."""
    warnings.simplefilter("ignore", ConvergenceWarning)
    return time_fit(estimator, X, y)


def reference_summary(fit, seconds, X, y):
    """The exact solver's log-loss, seconds, accuracy and top-5 classes on ``(X, y)``."""
    return {"loss": softmax_log_loss(fit.coef_, X, y), "seconds": seconds,
            "accuracy": float(np.mean(fit.predict(X) == y)), "top5": fit.predict_topk(X, 5)}


def fit_stepping_down(make_at, X, y, tuned, decades=3):
    """``(estimator, rate)``: ``make_at(rate)`` fitted at the ``tuned`` rate, then a decade
    lower at a time (at most ``decades``) while the run overflows or ends at or above log K,
    as the paper did for vanilla SGD. Kernels are compiled first."""
    warnings.simplefilter("ignore", DivergenceWarning)  # kept in diverged_
    lr, log_k = tuned, math.log(int(y.max() + 1))
    warm_up(make_at(lr), X, y)  # a fresh worker compiles (or loads) its kernels
    est = make_at(lr).fit(X, y)
    while final_loss(est) >= log_k and lr > tuned / 10 ** decades:
        lr /= 10
        est = make_at(lr).fit(X, y)
    return est, lr


def fit_quietly(est, X, y, warm=False):
    """``est.fit(X, y)`` with divergence kept in ``diverged_`` only (no warning), after
    compiling its kernels when ``warm``."""
    warnings.simplefilter("ignore", DivergenceWarning)
    if warm:
        warm_up(est, X, y)
    return est.fit(X, y)


def table3(final, data):
    """Final log-loss relative to Implicit SGD's, ours beside the paper's Table 3."""
    t3 = final.div(final["Implicit"], axis=0)
    cols = {("log K", ""): {n: math.log(int(y.max() + 1)) for n, (_, y) in data.items()}}
    for m in METHODS:
        cols[(m, "ours")] = {n: t3.loc[n, m] for n in data}
        cols[(m, "paper")] = {n: PAPER_T3[n][METHODS.index(m)] if n in PAPER_T3 else np.nan
                              for n in data}
    return pd.DataFrame(cols).rename_axis("dataset")


def best_rate(losses):
    """The rate of the lowest final log-loss in ``{rate: loss}``."""
    return min(losses, key=losses.get)


@njit(cache=True)
def is_surrogate_epoch(indptr, indices, data, y, W, order, samples, eta, log_w, leave_out,
                       batch):
    """One epoch of minibatch SGD on the IS surrogate: per minibatch, the logits of the
    label and of the shared sampled classes at the step's start, then W -= eta·gradient.
    ``leave_out``: a sampled label is left out (ours); else counted again (TF)."""
    m = samples.shape[1]
    c = np.empty((batch, m + 1), dtype=W.dtype)
    for b in range(samples.shape[0]):
        rows = order[b * batch:(b + 1) * batch]
        S = samples[b]
        for r in range(rows.shape[0]):
            i = rows[r]
            z = np.empty(m + 1, dtype=W.dtype)
            for j in range(m + 1):
                k = y[i] if j == 0 else S[j - 1]
                acc = W.dtype.type(0.0)
                for p in range(indptr[i], indptr[i + 1]):
                    acc += data[p] * W[k, indices[p]]
                z[j] = acc if j == 0 else acc + log_w
                if j > 0 and leave_out and S[j - 1] == y[i]:
                    z[j] = -np.inf
            zmax = z.max()
            e = np.exp(z - zmax)
            e /= e.sum()
            e[0] -= 1.0
            c[r] = e
        for r in range(rows.shape[0]):
            i = rows[r]
            for j in range(m + 1):
                k = y[i] if j == 0 else S[j - 1]
                g = eta * c[r, j]
                for p in range(indptr[i], indptr[i + 1]):
                    W[k, indices[p]] -= g * data[p]


def sampled_softmax_sgd(X, y, n_classes, lr, n_epochs, tf_logq=False, distinct=False,
                        float32=False, step="mean", batch=100, m=5, seed=0):
    """Minibatch SGD on the importance-sampled softmax (IS) with four switches towards
    the authors' TensorFlow run: ``tf_logq`` (TF's log Q correction, which with a
    uniform sampler cancels: a plain softmax over the label and the m samples, a
    sampled label counted again), ``distinct`` (m distinct classes, TF's
    ``unique=True``; otherwise with replacement), ``float32`` weights and rows, ``step``
    "sum" (TF: the gradient of the summed losses) or "mean". Otherwise as
    ``ImportanceSampling``: the m classes are shared by the minibatch, W = 0 at the
    start, η_t = η₀·0.9^t. Returns W (float64), or None once it stops being finite."""
    dt = np.float32 if float32 else np.float64
    rng = np.random.default_rng(seed)
    W = np.zeros((n_classes, X.shape[1]), dtype=dt)
    n_batches = -(-X.shape[0] // batch)
    for epoch in range(n_epochs):
        order = rng.permutation(X.shape[0])
        samples = (np.array([rng.choice(n_classes, m, replace=False)
                             for _ in range(n_batches)]) if distinct
                   else rng.integers(0, n_classes, (n_batches, m)))
        eta = dt(lr * 0.9 ** epoch / (1 if step == "sum" else batch))
        is_surrogate_epoch(X.indptr, X.indices, X.data.astype(dt), y, W, order, samples,
                           eta, dt(0.0 if tf_logq else math.log(n_classes / m)),
                           not tf_logq, batch)
        if not np.all(np.isfinite(W)):
            return None
    return W.astype(np.float64)


def time_kernels(K, seed=0, n=20000, d=100, reps=3):
    """Microseconds per step of each double-sum kernel (best of ``reps`` epochs) on ``n``
    synthetic unit-norm rows with 10 non-zeros of ``d``, ``K`` classes, ``W = 0``."""
    rng = np.random.default_rng(seed)
    X = normalize(sp.random(n, d, density=10 / d, format="csr", random_state=seed))
    y = rng.integers(0, K, n)
    rows = rng.integers(0, n, n)
    r = rng.integers(0, K - 1, n)
    ks = r + (r >= y[rows])
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    beta = np.ones(K)
    csr = csr_arrays(X)

    def sgd(lr, delta):  # alpha = 0: no ridge, no projection
        return lambda W, u: sgd_epoch(csr, sq, y, W, u, rows, ks, lr, False, delta, 0.0,
                                      beta, np.inf, np.inf)

    def implicit(newton):
        return lambda W, u: implicit_epoch(csr, sq, y, W, u, rows, ks, 1.0, 0.0, beta,
                                           1e-10, newton)
    out = {}
    for name, fn in {"Vanilla": sgd(1e-3, np.inf), "U-max": sgd(1e-1, 1.0),
                     "Implicit (bisection)": implicit(False),
                     "Implicit (default)": implicit(True)}.items():
        best = np.inf
        for _ in range(reps):
            W = np.full((K, d), 0.0)  # np.full touches every page
            u = np.full(n, math.log(K))
            t = time.perf_counter()
            fn(W, u)
            best = min(best, time.perf_counter() - t)
        out[name] = best / n * 1e6
    return out


def time_to(history, target):
    """Training seconds at the first epoch whose log-loss is at most ``target`` (NaN: never)."""
    hit = [t for t, v in zip(history["time"], history["train_loss"]) if v <= target]
    return hit[0] if hit else np.nan


def label_metrics(labels, top):
    """P@1/3/5, nDCG@3/5 of the top-5 class codes ``top`` against the rows' full label sets
    (``labels`` from :func:`load_first_label`); {} for a single-label set (None)."""
    if labels is None:
        return {}
    Y, columns = labels
    got = ranking_metrics(Y, columns[top], ks=(1, 3, 5))
    return {key: got[key] for key in ("P@1", "P@3", "P@5", "nDCG@3", "nDCG@5")}


def distance_tracker(cls, W_opt, W_start=None):
    """``cls`` whose history records ‖W − W*‖ after each epoch in place of the log-loss
    (O(KD) instead of a pass over the data), started at ``W_start`` (None: W = 0; the
    double sums then start u at its optimum for ``W_start``)."""
    class Tracked(cls):
        _divergence_factor = 1e6  # a distance, not a loss: only non-finite W diverges

        def _history_metrics(self, coef, intercept, X, y):
            return float(np.linalg.norm(coef - W_opt)), np.nan

        def _init_state(self, X, y, rng):
            state = super()._init_state(X, y, rng)
            if W_start is not None:
                state.W[:] = W_start
                if hasattr(state, "u"):
                    state.u[:] = optimal_u(W_start, X, y)
            return state
    Tracked.__name__ = cls.__name__
    return Tracked


def mean_step(distances, lr, steps_per_epoch):
    """‖W_t − W*‖ / (η · steps): the norm of the mean stochastic gradient at W* after each
    epoch of a run started at W* with the constant rate ``lr``."""
    d = np.asarray(distances, dtype=float)
    return d / (lr * steps_per_epoch * np.arange(1, len(d) + 1))


def loglog_slope(g):
    """Slope of log g against log t (t = 1..len(g)), from the first entry to the last."""
    return float(np.log(g[-1] / g[0]) / np.log(len(g)))


def decide(table, text, holds, ours, paper, why):
    """Record a claim in ``table`` (a Report) with the status its measured outcome gives:
    ``reproduced`` when ``holds``, else ``not reproduced``; ``why`` names the cell or figure
    that tests it."""
    table.claim(text, status="reproduced" if holds else "not reproduced",
                holds=bool(holds), ours=ours, paper=paper, why=why)


def _ax(figsize):
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize)


def plot_step_sizes(gaps, vanilla, implicit):
    """Proposition 2's figure: the two step sizes against the gap, log scale."""
    fig, ax = _ax((6, 3.5))
    ax.semilogy(gaps, vanilla, label="vanilla SGD: $\\eta(K-1)e^{gap}$")
    ax.semilogy(gaps, implicit, label="Implicit SGD: $a/(2\\|x\\|)$")
    ax.set_xlabel("$x_i^T(w_k - w_{y_i}) - u_i$")
    ax.set_ylabel("step size in $w$")
    ax.set_title("Proposition 2: exponential vs linear step sizes")
    ax.legend()
    return fig


def plot_figure1(runs, data, ref, ref_label):
    """Figure 1: train log-loss against epochs, one panel a set, with log K and the exact
    solver's line."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(data), figsize=(4.2 * len(data), 3.4))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, data):
        for m, mk in zip(METHODS, "os^vDx"):  # distinct markers: runs that coincide show
            h = runs[(name, m)].history_
            ax.plot(h["epoch"], h["train_loss"], label=m, ls="--" if m in SAMPLED else "-",
                    marker=mk, markevery=max(1, (7 + METHODS.index(m) % 3) * len(h["epoch"])
                                             // 50), ms=4, mfc="none")
        ax.axhline(math.log(int(data[name][1].max() + 1)), color="grey", ls=":", lw=1,
                   label="log K (W = 0)")
        ax.axhline(ref[name]["loss"], color="k", ls="--", lw=1, label=ref_label)
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("epoch")
    axes[0].set_ylabel("train log-loss")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside
    fig.tight_layout()
    return fig


def plot_figure2(rates, losses, log_k, n_epochs):
    """Figure 2: final log-loss against η₀ for each formulation (``losses[(form, rate)]``);
    a diverged run is marked × at the top."""
    fig, ax = _ax((5.5, 3.5))
    top = max(v for v in losses.values() if np.isfinite(v)) * 1.5
    marked = False
    for form, mk in (("proposed", "o"), ("raman", "s")):
        ax.loglog(rates, [losses[(form, lr)] for lr in rates], marker=mk, label=form)
        gone = [lr for lr in rates if not np.isfinite(losses[(form, lr)])]
        if gone:
            ax.scatter(gone, [top] * len(gone), marker="x", color="C3", zorder=3,
                       label=None if marked else "diverged")
            marked = True
    ax.set_xlabel("learning rate $\\eta_0$")
    ax.set_ylabel(f"log-loss after {n_epochs} epochs")
    ax.axhline(log_k, color="grey", ls=":", lw=1, label="log K (W = 0)")
    ax.set_title("U-max on Bibtex: double-sum formulations")
    ax.legend()
    return fig


def plot_cost(cost):
    """Microseconds per step against K, one line a kernel (``cost``: K by kernel)."""
    fig, ax = _ax((5.5, 3.4))
    for c in cost.columns:
        ax.loglog(cost.index, cost[c], marker="o", label=c)
    ax.set_xlabel("K")
    ax.set_ylabel("µs per step")
    ax.set_title("Cost per step (nnz = 10, D = 100)")
    ax.legend(fontsize=8)
    return fig


def plot_minibatch(fits, log_k):
    """Train log-loss against epochs of each minibatch shape ``{"n, m": estimator}``."""
    fig, ax = _ax((5.5, 3.5))
    for key, est in fits.items():
        h = est.history_
        ax.plot(h["epoch"], h["train_loss"], marker="o",
                label=f"(n, m) = ({key}), η₀ = {est.learning_rate:g}")
    ax.axhline(log_k, color="grey", ls=":", lw=1, label="log K (W = 0)")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("train log-loss")
    ax.set_title("Implicit SGD on Bibtex: minibatches")
    ax.legend(fontsize=7)
    return fig


def plot_convergence(sets, methods, from_zero, rate, drift, drift_lr):
    """Left: ‖W − W*‖/‖W*‖ from W = 0 (``from_zero[(set, method)]`` at ``rate[(set,
    method)]``); right: the mean step at W* (``drift[(set, method)]``) against t^(-1/2)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(sets), 2, figsize=(10, 3.4 * len(sets)), squeeze=False)
    for (ax0, ax1), name in zip(axes, sets):
        for m, mk in zip(methods, "os^vD"):
            style = dict(marker=mk, ms=4, ls="--" if m in SAMPLED else "-")
            d = from_zero[(name, m)]
            ax0.semilogy(np.arange(1, len(d) + 1), d, markevery=5,
                         label=f"{m}, η₀ = {rate[(name, m)]:g}", **style)
            g = drift[(name, m)]
            ax1.loglog(np.arange(1, len(g) + 1), g, label=m, **style)
        g = drift[(name, "Implicit")]
        t = np.arange(1, len(g) + 1)
        ax1.loglog(t, g[0] / np.sqrt(t), color="grey", ls=":", lw=1, label="∝ t^(-1/2)")
        ax0.set(title=f"{name}: from W = 0 (η₀·0.9^t)", xlabel="epoch",
                ylabel="‖W − W*‖ / ‖W*‖")
        ax1.set(title=f"{name}: mean step at W* (η = {drift_lr:g})", xlabel="epochs t",
                ylabel="‖W_t − W*‖ / (η · steps)")
        ax0.legend(fontsize=7)
        ax1.legend(fontsize=7)
    fig.tight_layout()
    return fig
