"""The prologue's measurements: the time of one exact gradient, the sizes of the data, the
exact optimum beside scikit-learn's, full-batch gradient descent, and their claims.

The page shows the data, the estimators and their settings; what is here times, tabulates,
plots and records what those runs return.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

from xclib import datasets
from xclib.exact import softmax_objective
from xclib.metrics import softmax_error, softmax_log_loss

__all__ = ["time_gradient", "record_cost", "plot_cost", "measure_datasets", "class_sizes",
           "plot_class_sizes", "compare_optima", "optima_table", "full_batch_gd",
           "sweep_table", "record_sweep", "odp_estimate", "claims"]


def time_gradient(X, y, K, budget, rng, mu=1.0):
    """Seconds of the fastest of repeated calls of ``softmax_objective`` (value and
    gradient) at random weights ``0.01·N(0, 1)`` of shape ``(K, D)`` drawn from ``rng``:
    one untimed call first, then at least 2 and at most 50 timed calls, until ``budget``
    seconds are spent. On a shared machine the minimum is the least disturbed call."""
    W = 0.01 * rng.standard_normal((K, X.shape[1]))
    softmax_objective(W, X, y, mu)  # once untimed: first touch of the arrays
    times = []
    while len(times) < 2 or (sum(times) < budget and len(times) < 50):
        t0 = time.perf_counter()
        softmax_objective(W, X, y, mu)
        times.append(time.perf_counter() - t0)
    return min(times)


def record_cost(report, cost, slope, top_slope, n, d):
    """Record the cost figure's numbers: ``cost`` has columns ``K, seconds, nnz`` (one row
    per K, in increasing K), measured on ``n`` rows of ``d`` features."""
    report.record("cost_slope", float(slope))
    report.record("cost_slope_top", float(top_slope))
    report.record("cost_top_k_from", int(cost.K.iloc[-2]))
    report.record("cost_seconds_k10", float(cost.seconds.iloc[0]))
    report.record("cost_seconds_k10000", float(cost.seconds.iloc[-1]))
    report.record("cost_ratio_k10000_k10",
                  float(cost.seconds.iloc[-1] / cost.seconds.iloc[0]))
    report.record("cost_n", n)
    report.record("cost_d", d)
    report.record("cost_nnz", float(cost.nnz.mean() / n))


def plot_cost(cost, slope, intercept, top_slope, title):
    """Seconds per gradient against K (log-log): the measured points, the fitted line over
    K ≥ 100, the top segment and a line of slope 1 through the last point."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.loglog(cost.K, cost.seconds, "o", label="measured (fastest call)")
    kk = np.logspace(2, 4, 50)
    ax.loglog(kk, 10 ** intercept * kk ** slope, "-",
              label=f"fit, K ≥ 100: slope {slope:.2f}")
    ax.loglog(cost.K.iloc[-2:], cost.seconds.iloc[-2:], "-", color="C3",
              label=f"top segment: slope {top_slope:.2f}")
    ax.loglog(kk, cost.seconds.iloc[-1] * kk / kk[-1], ":", color="gray", label="slope 1")
    ax.set_xlabel("number of classes $K$")
    ax.set_ylabel("seconds per exact gradient")
    ax.set_title(title)
    ax.legend()
    plt.show()


def measure_datasets(skip=()):
    """:func:`xclib.datasets.describe` with ``n, d, K, nnz, density`` measured from the files
    as loaded, except for the names in ``skip`` and the sets not found (those keep the
    manifest's sizes; nnz and density not measured: <NA>)."""
    table = datasets.describe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # delicious: rows without a label are dropped
        for i, row in table.iterrows():
            if row["name"] in skip or row["found"] == "missing":
                continue
            X, y = datasets.load(row["name"], row["split"])
            table.loc[i, ["n", "d", "K", "nnz", "density"]] = [
                X.shape[0], X.shape[1], np.unique(y).size, X.nnz,
                X.nnz / (X.shape[0] * X.shape[1])]
    for column in ("n", "d", "K", "nnz"):  # integers; not measured: <NA>
        table[column] = pd.to_numeric(table[column], errors="coerce").astype("Int64")
    table["density"] = pd.to_numeric(table["density"], errors="coerce")
    return table


def class_sizes(names):
    """``{name: training examples per class}`` of each set, largest first, empty classes
    left out."""
    sizes = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # delicious: rows without a label are dropped
        for name in names:
            _, y = datasets.load(name, "train")
            counts = np.bincount(y)
            sizes[name] = np.sort(counts[counts > 0])[::-1]
    return sizes


def plot_class_sizes(sizes):
    """One bar chart per set of :func:`class_sizes` (log scale), side by side."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sizes), figsize=(3.2 * len(sizes), 3.0), squeeze=False)
    for ax, (name, s) in zip(axes[0], sizes.items()):
        ax.bar(np.arange(1, len(s) + 1), s, width=1.0, color="C0")
        ax.set_yscale("log")
        ax.set_ylim(0.7, 2 * s.max())  # same kind of range for all: MNIST looks flat
        ax.set_title(f"{name} (K = {len(s)})")
        ax.set_xlabel("class, largest first")
    axes[0, 0].set_ylabel("training examples")
    fig.suptitle("Class sizes of the multi-class training sets (log scale)")
    fig.tight_layout()
    plt.show()


def compare_optima(ours, skl, train, test, mu):
    """The row of the optimum table for two fitted models of the same problem: ``ours``
    (a fitted ``SoftmaxRegression``) and ``skl`` (scikit-learn's), on ``train = (X, y)``
    and ``test = (X, y)``; test rows of classes never seen in training are dropped and
    counted. ``mu`` is the ridge on the sum over rows."""
    X, y = train
    Xt, yt = test
    known = np.isin(yt, ours.classes_)  # test classes never seen in training: dropped
    Xt, yt = Xt[known], yt[known]
    codes = np.searchsorted(ours.classes_, yt)
    p_ours, p_skl = ours.predict_proba(Xt), skl.predict_proba(Xt)
    ridge = 0.5 * mu * float(np.sum(ours.coef_ ** 2)) / X.shape[0]
    train_codes = np.searchsorted(ours.classes_, y)
    row = {
        "n_train": X.shape[0], "K": len(ours.classes_), "n_test": Xt.shape[0],
        "test_rows_dropped": int((~known).sum()),
        "optimum_objective": ours.objective_,  # -L(W*)/N
        "optimum_train_loss": softmax_log_loss(ours.coef_, X, train_codes),
        "ridge_share": ridge / ours.objective_,
        "optimum_test_loss": softmax_log_loss(ours.coef_, Xt, codes),
        "optimum_test_error": softmax_error(ours.coef_, Xt, codes),
        "sklearn_test_loss": softmax_log_loss(skl.coef_, Xt, codes),
        "sklearn_test_error": softmax_error(skl.coef_, Xt, codes),
        "max_prob_diff": float(np.max(np.abs(p_ours - p_skl))),
        "lbfgs_iterations": ours.n_iter_, "seconds": ours.fit_time_,
    }
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in row.items()}


def optima_table(fits):
    """The optimum table: one row per set of ``fits`` (``{label: row}``)."""
    return pd.DataFrame(fits).T[[
        "n_train", "K", "lbfgs_iterations", "seconds", "sklearn_seconds",
        "optimum_objective", "ridge_share", "optimum_test_loss", "sklearn_test_loss",
        "optimum_test_error", "max_prob_diff"]].astype(
            {"n_train": int, "K": int, "lbfgs_iterations": int})


def full_batch_gd(X, y, n_classes, rate, n_epochs, momentum=0.0, mu=1.0):
    """Gradient descent (``momentum`` > 0: Nesterov) on -L(W)/N from W = 0, with the ridge
    ``mu`` on the sum over rows; the history per epoch. A run diverges (and stops) when its
    objective is not finite or exceeds ten times its start."""
    n = X.shape[0]
    W = np.zeros((n_classes, X.shape[1]))
    V = np.zeros_like(W)
    start = softmax_objective(W, X, y, mu, with_grad=False) / n
    history = {"epoch": [], "objective": [], "diverged": False}
    for epoch in range(1, n_epochs + 1):
        _, grad, _ = softmax_objective(W + momentum * V, X, y, mu)
        V = momentum * V - (rate / n) * grad
        W = W + V
        value = softmax_objective(W, X, y, mu, with_grad=False) / n
        if not np.isfinite(value) or value > 10 * start:
            history["diverged"] = True
            break
        history["epoch"].append(epoch)
        history["objective"].append(value)
    return history


def sweep_table(sweep, optimum):
    """One row per run of a sweep (``{method: {rate: history}}``): whether it diverged, its
    last and lowest objective, and its last objective's gap to ``optimum``."""
    rows = []
    for method, runs in sweep.items():
        for rate, h in runs.items():
            final = h["objective"][-1] if len(h["objective"]) else np.nan
            rows.append(dict(method=method, rate=rate, diverged=h["diverged"], final=final,
                             gap=final - optimum,
                             lowest=np.min(h["objective"], initial=np.inf)))
    return pd.DataFrame(rows)


def record_sweep(report, gd, optimum, start):
    """Record what the prose says of the sweep ``gd`` (:func:`sweep_table`): each method's
    last objectives, the best run (and its gap as a fraction of ``start - optimum``, the gap
    at W = 0), the diverged runs, and whether any run went below ``optimum``."""
    stable = gd[~gd.diverged]
    best = stable.loc[stable.gap.idxmin()]
    for method in dict.fromkeys(gd.method):
        s = stable[stable.method == method]
        report.record(f"gd_final_objective_{method.split()[0].lower()}",
                      {f"{r:g}": v for r, v in zip(s.rate, s.final)})
    report.record("gd_best_method", best.method)
    try:  # a name for the prose, without the quotes of a str glue
        from IPython.display import Markdown
        from myst_nb import glue

        glue("gd_best_method_md", Markdown(best.method), display=False)
    except ImportError:
        pass
    report.record("gd_best_rate", float(best.rate))
    report.record("gd_best_gap", float(best.gap))
    report.record("gd_best_gap_fraction", float(best.gap / (start - optimum)))
    report.record("gd_lowest_minus_optimum", float(stable.lowest.min() - optimum))
    report.record("gd_n_diverged", int(gd.diverged.sum()))
    report.record("gd_never_below_optimum", bool(stable.lowest.min() >= optimum - 1e-9))


def odp_estimate(report, seconds, rows, n, d, k):
    """Scale ``seconds`` for one gradient on ``rows`` synthetic rows at ``k`` classes to
    ``n`` rows; record it, with the size of a dense ``k × d`` float64 W; return the table."""
    report.record("odp_rows", rows)
    report.record("odp_seconds_per_row", seconds / rows)
    report.record("odp_gradient_seconds", seconds / rows * n)
    report.record("odp_model_gb", k * d * 8 / 1e9)
    return pd.Series({"seconds for the synthetic rows": seconds,
                      "seconds per row": seconds / rows,
                      "one gradient at ODP's N (s, lower bound)": seconds / rows * n,
                      "dense W at ODP's K × D (GB)": k * d * 8 / 1e9}).to_frame("value")


def claims(report):
    """The prologue's reproduction check, from the values recorded above."""
    v = report.values
    report.claim(
        "SoftmaxRegression and scikit-learn's LogisticRegression find the same optimum "
        "(max |Δp| on held-out MNIST and Bibtex < 1e-4)",
        status="reproduced", holds=v["max_prob_diff"] < 1e-4,
        ours=["max_prob_diff"], paper="same objective")
    linear = v["cost_slope"] >= 0.9
    report.claim(
        "One exact gradient costs O(NKD): from K = 100 on, its time grows at least "
        "linearly in K (log-log slope ≥ 0.9)",
        status="reproduced" if linear else "not reproduced", holds=linear,
        ours=["cost_slope", "cost_slope_top"], paper=1.0,
        why="the cost figure: the fit over K ≥ 100, and the top segment on its own, where "
            "the scores and weights outgrow the caches")
    report.claim(
        "Full-batch gradient descent approaches the exact optimum: the best run closes "
        "≥ 90% of the gap from W = 0 and no iterate goes below the optimum",
        status="reproduced",
        holds=v["gd_best_gap_fraction"] <= 0.1 and v["gd_never_below_optimum"],
        ours=["gd_best_gap_fraction", "gd_never_below_optimum"], paper="convex problem")
    odp_holds = v["odp_gradient_seconds"] > 600
    report.claim(
        "The exact optimum needs a full O(NKD) pass per L-BFGS iteration, prohibitive at "
        "the papers' largest K (ODP: K = 105 034): one exact gradient at ODP's K and N "
        "takes over ten minutes here",
        status="reproduced" if odp_holds else "not reproduced", holds=odp_holds,
        ours=["odp_gradient_seconds", "odp_seconds_per_row", "odp_model_gb"],
        paper="K up to 105 034 (ODP)",
        why="the section 'One exact gradient at ODP's K' (synthetic rows, time per row "
            "scaled to ODP's N)")
