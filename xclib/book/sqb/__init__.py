"""The SQB chapter's data, fits on a common protocol, figures and tables.

The page shows each experiment (the estimators and their settings); what is here loads the
datasets, fits an estimator on one of them with the test set as ``eval_set`` (:func:`fit`),
and turns histories into figures, tables and recorded numbers. The rankings of Figure 1 and
the claims are in :mod:`.claims`.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .claims import (KEYS, add_claims, ahead, passes_to, ranking, ranking_table,
                     record_fig1, settings_table)

__all__ = ["STANDS_IN", "KEYS", "load_a9a", "load_covtype", "split_90_10", "load_20news",
           "load_mnist_eo", "protocol_card", "fit", "excess", "passes_to", "tuning_run",
           "tuning_table", "seed_run", "setting_run", "plot_bound", "plot_log2cosh",
           "plot_schedules", "plot_fig1", "record_fig1", "ahead", "ranking",
           "ranking_table", "settings_table", "add_claims", "plot_curves", "plot_l_sweep",
           "plot_one_step", "what_it_buys"]

#: the paper's dataset each of ours stands for
STANDS_IN = {"a9a": "adult", "covtype": "covtype", "20news": "rcv1", "mnist_eo": "quantum"}
#: the 20 Newsgroups, in the order xclib codes them
NEWSGROUPS = sorted([
    "alt.atheism", "comp.graphics", "comp.os.ms-windows.misc", "comp.sys.ibm.pc.hardware",
    "comp.sys.mac.hardware", "comp.windows.x", "misc.forsale", "rec.autos",
    "rec.motorcycles", "rec.sport.baseball", "rec.sport.hockey", "sci.crypt",
    "sci.electronics", "sci.med", "sci.space", "soc.religion.christian",
    "talk.politics.guns", "talk.politics.mideast", "talk.politics.misc",
    "talk.religion.misc"])


def _split(X, y, perm):
    n_tr = int(0.9 * len(perm))
    tr, te = np.sort(perm[:n_tr]), np.sort(perm[n_tr:])
    return dict(Xtr=X[tr], ytr=y[tr], Xte=X[te], yte=y[te])


def load_a9a(rng):
    """a9a (LIBSVM's adult), split 90/10 by a permutation drawn from ``rng``."""
    from xclib import datasets

    X, y = datasets.load("a9a")
    return _split(X, y, rng.permutation(X.shape[0]))


def load_covtype(fraction, seed):
    """covtype.binary's 90/10 split, each part an optional seeded subsample, min-max
    scaled to [0, 1] with the training rows' ranges."""
    from xclib import datasets

    Xtr, ytr = datasets.load("covtype_binary", "train", fraction=fraction, random_state=seed)
    Xte, yte = datasets.load("covtype_binary", "test", fraction=fraction, random_state=seed)
    lo = np.asarray(Xtr.min(axis=0).todense()).ravel()
    hi = np.asarray(Xtr.max(axis=0).todense()).ravel()
    span = np.where(hi > lo, hi - lo, 1.0)

    def scale_(X):
        return sp.csr_matrix(np.clip((X.toarray() - lo) / span, 0.0, 1.0))

    return dict(Xtr=scale_(Xtr), ytr=ytr, Xte=scale_(Xte), yte=yte)


def split_90_10(X, y, fraction, seed):
    """Pooled rows -> optional seeded subsample -> seeded 90/10 train/test split."""
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    if fraction is not None:
        perm = perm[:max(10, round(fraction * X.shape[0]))]
    return _split(X, y, perm)


def load_20news(fraction, seed, max_features):
    """Stand-in for rcv1: 20 Newsgroups (train + test), comp.* + sci.* (y = 1)."""
    from xclib import datasets

    parts = [datasets.load("20newsgroups", s, max_features=max_features)
             for s in ("train", "test")]
    positive = np.array([g.startswith(("comp.", "sci.")) for g in NEWSGROUPS])
    X = sp.vstack([X_ for X_, _ in parts], format="csr")
    y = positive[np.concatenate([y_ for _, y_ in parts])].astype(np.int64)
    return split_90_10(X, y, fraction, seed)


def load_mnist_eo(fraction, seed):
    """Stand-in for quantum: MNIST (train + test), unit-norm rows, even digits = 1."""
    from xclib import datasets

    parts = [datasets.load("mnist", s, normalize=True) for s in ("train", "test")]
    X = sp.vstack([X_ for X_, _ in parts], format="csr")
    y = (np.concatenate([y_ for _, y_ in parts]) % 2 == 0).astype(np.int64)
    return split_90_10(X, y, fraction, seed)


#: the paper's data (T before its split, d, split) and its SQB settings (l, γ_μ, γ_Σ, step)
PAPER_DATA = {"adult": (32561, 123, "90/10"), "covtype": (581012, 54, "90/10"),
              "rcv1": (20242, 47236, "90/10"), "quantum": (50000, 78, "90/10")}
PAPER_GAMMA = {"adult": (5, 0.05, 0.001, 1), "covtype": (10, 0.0005, 0.0003, 0.1),
               "rcv1": (5, 0.005, 0.0003, 0.1), "quantum": (5, 0.001, 0.0008, 0.1)}


def protocol_card(data, fractions, n_passes, sgd_grid, n_seeds):
    """The paper's experiment (Section 5, Figure 1) beside this page's, a row each;
    ``fractions``: the subsample of each dataset (None: all of it)."""
    card = []
    for name in ("a9a", "covtype", "20news", "mnist_eo"):
        paper_name = STANDS_IN[name]
        T, D, split = PAPER_DATA[paper_name]
        l, g_mu, g_sigma, a = PAPER_GAMMA[paper_name]
        batches = f"b¹ = 5, γ_μ = {g_mu}, γ_Σ = {g_sigma}, caps T and 200"
        grid = f"SQB l = {l}, step {a}; SGD/ASGD steps tuned"
        card.append({"dataset": paper_name, "run by": "the paper",
                     "N (train)": f"{T} before the {split} split", "K": 2,
                     "D": D, "passes": "Figure 1's x-axis", "grid": grid,
                     "batch sizes": batches, "seeds": "one run shown"})
        d, frac = data[name], fractions.get(name)
        ours = name if name in ("a9a", "covtype") else f"{name} (for {paper_name})"
        card.append({"dataset": ours,
                     "run by": "this page",
                     "N (train)": f"{d['Xtr'].shape[0]}" + (
                         "" if frac is None else f" ({frac:.0%} subsample)"),
                     "K": 2, "D": d["Xtr"].shape[1], "passes": n_passes,
                     "grid": f"the paper's; SGD/ASGD steps {sgd_grid} (+1 on stand-ins)",
                     "batch sizes": batches + "; γ read as rows and as γ·T rows",
                     "seeds": f"{n_seeds} for SQB, one for the baselines"})
    return pd.DataFrame(card).style.hide(axis="index")


def fit(est, d, n_passes, seed=0, timed=False, trim=True):
    """Fit ``est`` on d's training set with ``alpha = d["alpha"]``, the test set as
    eval_set: L-BFGS for ``n_passes`` iterations, the others for ``n_passes`` epochs with
    ``random_state=seed``. ``timed``: warm kernels, the seconds in ``est.seconds_``. With
    ``trim`` the history keeps the rounds within ``n_passes`` effective passes (an L-BFGS
    iteration may take several, an SQB round ends on a whole step)."""
    from xclib.book import time_fit
    from xclib.sqb import LogisticLBFGS

    if isinstance(est, LogisticLBFGS):
        est.set_params(max_iter=n_passes, tol=0.0, alpha=d["alpha"])
    else:
        est.set_params(n_epochs=n_passes, random_state=seed, alpha=d["alpha"])
    args = (d["Xtr"], d["ytr"])
    if timed:
        est, est.seconds_ = time_fit(est, *args, eval_set=(d["Xte"], d["yte"]))
    else:
        est.fit(*args, eval_set=(d["Xte"], d["yte"]))
    if trim:
        keep = sum(p <= n_passes + 1e-9 for p in est.history_["passes"])
        est.history_ = {k: v[:keep] for k, v in est.history_.items()}
    return est


def excess(h, d):
    """The training cost of each round of history ``h`` above the optimum ``d["f_star"]``."""
    return np.asarray(h["train_loss"]) - d["f_star"]


def _quiet():
    from xclib.base import DivergenceWarning

    warnings.simplefilter("ignore", DivergenceWarning)  # a worker: kept in diverged_


def tuning_run(est, d, n_passes, seed):
    """The final excess cost of one grid point (inf if it diverged)."""
    _quiet()
    h = fit(est, d, n_passes, seed).history_
    return excess(h, d)[-1] if len(h["train_loss"]) == n_passes else np.inf


def tuning_table(grid_final, paper_steps):
    """``{(data, method, step): final excess}`` -> the best step of each (data, method), and
    the table of every grid point beside the paper's step."""
    tuned, rows = {}, []
    for name, label in dict.fromkeys(key[:2] for key in grid_final):
        final = {r: v for (n, m, r), v in grid_final.items() if (n, m) == (name, label)}
        best = tuned[name, label] = min(final, key=final.get)
        rows.append(dict(data=name, method=label, tuned_step=best,
                         paper_step=paper_steps[name][label],
                         **{f"excess@{r:g}": v for r, v in final.items()}))
    return tuned, pd.DataFrame(rows)


def seed_run(est, d, n_passes, seed):
    """An untimed fit (in a worker): its history with ``diverged``."""
    _quiet()
    est = fit(est, d, n_passes, seed)
    return dict(est.history_, diverged=est.diverged_)


def setting_run(est, d, n_passes, seed):
    """An untimed fit (in a worker): its history."""
    _quiet()
    return fit(est, d, n_passes, seed).history_


def plot_bound(cases, s):
    """log Z and the quadratic bound along ``anchor + s v``, one panel per case
    ``(F, log_h, anchor, v, title)``."""
    import matplotlib.pyplot as plt
    from scipy.special import logsumexp

    from xclib.sqb import bound_stats

    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 3.4))
    for ax, (F, log_h, anchor, v, title) in zip(axes, cases):
        log_z, r, S = bound_stats(F, log_h, anchor)
        true = np.array([logsumexp(log_h + F @ (anchor + t * v)) for t in s])
        bound = log_z + 0.5 * s**2 * (v @ S @ v) + s * (v @ r)
        ax.plot(s, true, label=r"$\log Z(\tilde\theta + s v)$")
        ax.plot(s, bound, "--", label="quadratic bound")
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlabel("s")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    return fig


def plot_log2cosh(u, c, s2, g, tangent, u0):
    """Left: the bound curvature c(u) against the logistic Hessian; right: log 2cosh(√s/2)
    and its tangent at s = u0²."""
    import matplotlib.pyplot as plt
    from scipy.special import expit

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    axes[0].plot(u, c, label=r"bound curvature $c(u)=\tanh(u/2)/(2u)$")
    axes[0].plot(u, expit(u) * (1 - expit(u)), "--",
                 label=r"Hessian $\sigma(u)(1-\sigma(u))$")
    axes[0].set_xlabel(r"$u=\tilde\theta^\top x$")
    axes[0].legend(fontsize=8)
    axes[1].plot(s2, g, label=r"$g(s)=\log 2\cosh(\sqrt{s}/2)$")
    axes[1].plot(s2, tangent, "--", label=rf"tangent at $s=\tilde u^2={u0**2:g}$")
    axes[1].set_xlabel(r"$s=u^2$")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_schedules(settings, sizes, max_passes=50):
    """Batch sizes against effective passes (LSQR's row products charged) for each
    ``(name, T)`` of ``sizes``, with γ read as rows (solid) and as γ·T rows (dashed)."""
    import matplotlib.pyplot as plt

    from xclib.sqb import batch_schedule

    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 3.2))
    for ax, (name, T) in zip(axes, sizes):
        p = settings[name]
        k = np.arange(1, 2_000_001)
        for per, ls in ((1.0, "-"), (T, "--")):
            bm = batch_schedule(k, 5, T, p["gamma_mu"] * per)
            bs = batch_schedule(k, 5, 200, p["gamma_sigma"] * per)
            passes = np.cumsum(bm + bs + (2 * p["n_inner"] + 1) * bs) / T
            keep = passes <= max_passes
            reading = "γ rows" if per == 1.0 else "γ·T rows"
            ax.plot(passes[keep], bm[keep], ls, color="C0",
                    label=rf"gradient batch $|\mathcal{{T}}|$, {reading}")
            ax.plot(passes[keep], bs[keep], ls, color="C1",
                    label=rf"curvature batch $|\mathcal{{S}}|$, {reading}")
        ax.set_yscale("log")
        ax.set_xlabel("effective passes (row products / T)")
        ax.set_title(f"{name} (T = {T})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _diverged_cross(ax, h, key, shift, color):
    ax.plot(h["passes"][-1], h[key][-1] - shift, "x", ms=8, mew=2, color=color)


def plot_fig1(data, runs, sqb_seeds, readings, stands_in, eps):
    """Figure 1: excess training cost, test cost and test error against effective passes,
    a row per dataset; SQB as the median of its seeds and the band from min to max, a cross
    at the last point of a run stopped as diverged."""
    import matplotlib.pyplot as plt

    unit_of = {v: k for k, v in readings.items()}
    fig, axes = plt.subplots(len(data), 3, figsize=(13, 3.4 * len(data)), squeeze=False)
    for row, (name, d) in zip(axes, data.items()):
        for (n, label), h in runs.items():
            if n != name:
                continue
            unit = unit_of.get(label)
            if unit:  # three seeds: the median and the band from min to max
                seeds = sqb_seeds[name, unit]
                k = min(len(g["passes"]) for g in seeds)
                x = np.asarray(h["passes"][:k])
                panels = [(row[0], "train_loss", d["f_star"]),
                          (row[1], "eval_loss", 0.0), (row[2], "eval_error", 0.0)]
                for ax, key, shift in panels:
                    ys = np.array([np.asarray(g[key][:k]) - shift for g in seeds])
                    line, = ax.plot(x, np.median(ys, axis=0), label=f"{label}, 3 seeds")
                    ax.fill_between(x, ys.min(axis=0), ys.max(axis=0), alpha=0.25,
                                    color=line.get_color())
                    for g in seeds:
                        if g["diverged"]:
                            _diverged_cross(ax, g, key, shift, line.get_color())
                continue
            row[0].plot(h["passes"], np.maximum(excess(h, d), 1e-12), label=label)
            row[1].plot(h["passes"], h["eval_loss"], label=label)
            row[2].plot(h["passes"], h["eval_error"], label=label)
            if h["diverged"]:
                for ax, key in zip(row, ("train_loss", "eval_loss", "eval_error")):
                    shift = d["f_star"] if key == "train_loss" else 0.0
                    _diverged_cross(ax, h, key, shift, "k")
        row[0].set_yscale("log")
        row[0].axhline(eps, color="grey", ls=":", lw=0.8)
        row[0].set_ylabel(f"{name} (for {stands_in[name]})\n"
                          r"training cost $-$ $\mathcal{L}(\theta^*)$")
        row[1].set_yscale("log")
        row[1].set_ylabel("test cost (log scale)")
        row[1].axhline(d["f_test_star"], color="k", ls="--", lw=0.8,
                       label=r"at $\theta^*$ (optimum, $\alpha = 1/T$)")
        row[1].axhline(np.log(2), color="grey", ls=":", lw=0.8,
                       label=r"log 2 ($\theta = 0$)")
        row[2].axhline(d["err_star"], color="k", ls="--", lw=0.8, label=r"at $\theta^*$")
        row[2].set_ylabel("test error")
        for ax in row:
            ax.set_xlabel("effective passes")
    axes[0, 0].plot([], [], "kx", label="diverged (stopped)")
    axes[0, 0].legend(fontsize=7)
    axes[0, 1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_curves(curves, ylabel, eps=None, title=None, size=(5.8, 3.4), fontsize=8,
                xlabel="effective passes", logx=False):
    """Curves on a log y-axis: ``{label: (x, ys)}`` with ``ys`` one curve, or a 2-d array of
    curves (the median drawn, and the band from min to max); ``{label: (x, y, fmt)}`` for a
    line format (else a line with dots). A dotted line at ``eps``."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    for label, (x, ys, *fmt) in curves.items():
        ys = np.asarray(ys)
        if ys.ndim == 2:
            line, = ax.plot(x, np.median(ys, axis=0), *fmt, label=label)
            ax.fill_between(x, ys.min(axis=0), ys.max(axis=0), alpha=0.25,
                            color=line.get_color())
        elif fmt:
            ax.plot(x, ys, *fmt, label=label)
        else:
            ax.plot(x, ys, marker=".", label=label)
    if eps is not None:
        ax.axhline(eps, color="grey", ls=":", lw=0.8, label=f"ε = {eps:g}")
    ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=fontsize)
    fig.tight_layout()
    return fig


def plot_one_step(one_step, start_excess, dim):
    """The excess after one exact step against the curvature batch |S| (median of the draws
    and their band), with the start's excess and the dimension d marked."""
    import matplotlib.pyplot as plt

    sizes = list(one_step)
    ys = np.array([one_step[m] for m in sizes])
    fig, ax = plt.subplots(figsize=(5.5, 3.3))
    ax.plot(sizes, np.median(ys, axis=1), marker="o", label="median of 3 draws of S")
    ax.fill_between(sizes, ys.min(axis=1), ys.max(axis=1), alpha=0.25)
    ax.axhline(start_excess, color="grey", ls=":", lw=0.8, label=r"$\theta = 0$ (the start)")
    ax.axvline(dim, color="k", ls="--", lw=0.6, label=f"d = {dim}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"curvature batch $|\mathcal{S}|$")
    ax.set_ylabel(r"excess over $\mathcal{L}(\theta^*)$ after one step")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_l_sweep(fits, d):
    """The excess of SQB on a9a for each ``(learning_rate, l): estimator`` of ``fits``, a
    panel per step, a cross where a run diverged and was stopped; returns the figure and
    the table of final excesses."""
    import matplotlib.pyplot as plt

    rates = list(dict.fromkeys(rate for rate, _ in fits))
    fig, axes = plt.subplots(1, len(rates), figsize=(11, 3.4), sharey=True)
    rows = []
    for (rate, l), est in fits.items():
        ax = axes[rates.index(rate)]
        ex, x = excess(est.history_, d), est.history_["passes"]
        line, = ax.plot(x, ex, marker="." if len(x) < 5 else None, label=f"l = {l}")
        if est.diverged_:  # the run was stopped: mark its last point
            ax.plot(x[-1:], ex[-1:], "x", ms=10, mew=2, color=line.get_color())
        rows.append(dict(learning_rate=rate, l=l, final_excess=ex[-1],
                         passes_run=x[-1], diverged=est.diverged_))
    for ax, rate in zip(axes, rates):
        ax.set_yscale("log")
        ax.set_title(f"SQB on a9a, learning_rate = {rate}")
        ax.set_xlabel("effective passes")
    axes[0].set_ylabel(r"training cost $-$ $\mathcal{L}(\theta^*)$, $\alpha = 1/T$")
    axes[-1].plot([], [], "kx", label="diverged (stopped)")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    return fig, pd.DataFrame(rows)


def what_it_buys(rows, d, eps):
    """Passes and seconds to ε, final excess and test error on ``d``, a row per
    ``(method, history, seconds)`` of ``rows`` (a dict row is taken as it is); "seconds to
    ε" is the run's seconds times the share of its passes spent before reaching ε."""
    buys = []
    for row in rows:
        if isinstance(row, dict):
            buys.append(row)
            continue
        label, h, seconds = row
        p = passes_to(h, d["f_star"], eps)
        t = seconds * p / h["passes"][-1] if np.isfinite(p) else np.inf
        buys.append({"method": label, "passes to ε": p, "seconds to ε": t,
                     "final excess": excess(h, d)[-1], "test error": h["eval_error"][-1]})
    return pd.DataFrame(buys).style.hide(axis="index").format(
        {"passes to ε": "{:g}", "seconds to ε": "{:.3g}", "final excess": "{:.2e}",
         "test error": "{:.4f}"}, na_rep="—")
