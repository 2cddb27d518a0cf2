"""The MEMOIR chapter's figures, drawn from the tables its fits produce.

Each function draws one figure, saves it under ``path`` when given and returns it (the
notebook shows it).
"""
from __future__ import annotations

import numpy as np

__all__ = ["COLORS", "plot_convergence", "plot_oracles", "plot_margin_error",
           "plot_time_vs_K", "plot_fig1"]

#: one colour per oracle, in every figure
COLORS = {"exact": "C0", "SimpleLSH": "C1", "HNSW": "C2"}


def _done(fig, path):
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=90)
    return fig


def plot_convergence(runs, base, alphas, n_classes, batches, path=None):
    """Test accuracy and training hinge against batches, per real set (columns, titled
    with its ``n_classes`` and ``alphas``): the mean of the seeds of each oracle with a
    min–max band, the baselines as lines."""
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(runs.dataset))
    fig, axes = plt.subplots(2, len(names), figsize=(4.2 * len(names), 6.4), sharex=True,
                             squeeze=False)
    for j, name in enumerate(names):
        for label, g in runs[runs.dataset == name].groupby("oracle", sort=False):
            x = np.concatenate([[0], g.batches.iloc[0]])
            for i, col in enumerate(["accuracy", "hinge"]):
                Y = np.stack(g[col].values)
                start = 1.0 if col == "hinge" else np.nan   # W = 0: hinge 1
                mean = np.concatenate([[start], Y.mean(0)])
                axes[i, j].plot(x, mean, color=COLORS[label],
                                label=f"MEMOIR, {label} margin")
                axes[i, j].fill_between(x[1:], Y.min(0), Y.max(0), color=COLORS[label],
                                        alpha=0.25)
        styles = {"majority": ":", "LIBLINEAR CS": "--", "LIBLINEAR OVR": "-."}
        for who, ls in styles.items():
            if (name, who) in base:
                axes[0, j].axhline(base[name, who]["accuracy"], color="k", ls=ls, lw=1,
                                   label=who)
        axes[1, j].axhline(1.0, color="gray", lw=1, label="W = 0 (hinge 1)")
        axes[1, j].axhline(base[name, "LIBLINEAR CS"]["hinge"], color="k", ls="--", lw=1,
                           label="LIBLINEAR CS ($C_{LL}$ = 1)")
        axes[0, j].set_title(f"{name} (K = {n_classes[name]}, α = {alphas[name]:g})")
        axes[1, j].set_xlabel("batches")
    axes[0, 0].set_ylabel("test accuracy")
    axes[1, 0].set_ylabel("training hinge (eq. 10)")
    axes[0, 0].legend(fontsize=7)
    axes[1, 0].legend(fontsize=7)
    fig.suptitle(f"MEMOIR, {batches} batches: mean of three seeds, band = min–max")
    return _done(fig, path)


def plot_oracles(oracle_df, path=None):
    """Recall@1, work per query and µs per query of every oracle against K; the dotted
    line: SimpleLSH's 64-bit Hamming tests per query."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for name, g in oracle_df.groupby("oracle", sort=False):
        axes[0].plot(g.K, g.recall, "o-", label=name)
        axes[1].plot(g.K, g.ip_per_query, "o-", label=name)
        axes[2].plot(g.K, g.us_per_query, "o-", label=name)
    lsh = oracle_df[oracle_df.oracle == "SimpleLSH 64 bits"]
    hamming, = axes[1].plot(lsh.K, lsh.hamming_per_query, "k:",
                            label="SimpleLSH: 64-bit Hamming tests")
    axes[0].set_ylabel("recall@1 (score) on training queries")
    axes[1].set_ylabel("work / query")
    axes[2].set_ylabel("µs / query (one thread, warm)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("K")
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    # one legend for the oracles (same colours in every panel), one for the dotted line
    axes[0].legend(fontsize=7)
    axes[1].legend(handles=[hamming], fontsize=7)
    fig.suptitle("MIPS oracles on the queries MEMOIR makes (prototype data, D = 1000)")
    return _done(fig, path)


def plot_margin_error(eps, K, path=None):
    """Histogram of the positive margin errors ε of the tracked queries, the largest
    marked."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    ax.hist(eps[eps > 1e-12], bins=40)
    ax.axvline(eps.max(), color="k", ls="--",
               label=f"largest: ερ = {eps.max():.2f} (ρ = 1)")
    ax.set_xlabel(r"margin error $\max_{r\neq y} w_r^\top x - w_{\hat r}^\top x$")
    ax.set_ylabel("queries")
    ax.legend(fontsize=7)
    ax.set_title(f"MEMOIR-LSH, K = {K}: ε > 0 only "
                 f"(ε = 0 for {np.mean(eps <= 1e-12):.0%} of {eps.size} queries)")
    return _done(fig, path)


def plot_time_vs_K(curve, path=None):
    """Seconds per batch against K, one line per oracle."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    for label, g in curve.groupby("oracle", sort=False):
        ax.plot(g.K, g.s_per_batch, "o-", color=COLORS[label], label=f"{label} margin")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("K")
    ax.set_ylabel("seconds per batch of 100√K pairs")
    ax.set_title("MEMOIR: training time against K (D = 1000)", fontsize=10)
    ax.legend(fontsize=7)
    return _done(fig, path)


#: label offsets of the four α of Figure 1 (points close in memory: apart)
FIG1_OFFSETS = [(4, 10), (4, -14), (-44, -16), (4, -14)]


def plot_fig1(fig1, title, path=None):
    """Test accuracy and macro-F1 against the memory of W, one point per α."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.plot(fig1.memory_MB, fig1.accuracy, "o-", label="accuracy")
    ax.plot(fig1.memory_MB, fig1.macro_f1, "s--", label="macro-F1")
    for (alpha, r), off in zip(fig1.iterrows(), FIG1_OFFSETS):
        ax.annotate(f"α={alpha:g}", (r.memory_MB, r.accuracy), xytext=off,
                    textcoords="offset points", fontsize=7,
                    arrowprops=dict(arrowstyle="-", lw=0.5, color="gray"))
    ax.set_xlabel("memory of W (MB)")
    ax.set_ylabel("test score")
    ax.legend()
    ax.set_title(title)
    return _done(fig, path)
