"""The DS-MLR chapter's tables, figures and claims (the fits themselves stay on the page).

Every function here turns what the page fitted or measured (estimators, histories, timings)
into a table, a figure, the numbers a :class:`Report` records, or the claims (:mod:`.claims`);
none fits a model. :func:`cpu_seconds_per_op` times the kernels for the network model.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .claims import add_claims

__all__ = ["PAPER", "protocol_card", "save_figure", "time_to", "record_fig4", "plot_fig4",
           "record_b_update", "plot_b_update", "rank_figure", "scaling_table",
           "record_scaling", "external_record", "model_check", "record_ext16",
           "cpu_seconds_per_op", "simulate", "plot_simulation", "record_simulation",
           "csr_bytes", "block_memory", "worker_memory", "record_memory",
           "record_explorer", "what_it_buys", "add_claims"]

#: Table 3 of the paper: its data sizes, ridge λ, step η and worker grid
PAPER = {
    "news20": dict(N=11_260, D=53_975, K=20, lam="8.881e-05", eta="1e4", P="1×1×1"),
    "bibtex": dict(N=4_463, D=51_033, K=1_139, lam="2.2406e-07", eta="1e4",
                   P="1×1×1 (LSHTC1-small)"),
    "delicious": dict(N=4_463, D=51_033, K=1_139, lam="2.2406e-07", eta="1e4",
                      P="— (LSHTC1-small stand-in)"),
    "clef": dict(N=10_000, D=80, K=63, lam="0.001", eta="1e2", P="1×1×1"),
}


def protocol_card(data, alpha, cfg, seed):
    """The paper's settings beside the page's, one column per dataset of ``data``
    (``{name: (X, y, Xt, yt)}``)."""
    rows = []
    for name, (X, y, Xt, yt) in data.items():
        p = PAPER[name]
        K = len(np.unique(y))
        fig4 = name in cfg["fig4_sets"]
        rows.append({
            "dataset": name, "paper N, D, K": f"{p['N']:,}, {p['D']:,}, {p['K']:,}",
            "ours N, D, K": f"{X.shape[0]:,}, {X.shape[1]:,}, {K:,}",
            "paper λ, η": f"{p['lam']}, {p['eta']}",
            "ours alpha, η₀": f"{alpha[name]:.3g}, 1/K",
            "paper epochs": "to a time limit (Fig. 4)",
            "ours epochs": cfg["epochs"],
            "ours runs": ("L-BFGS, sync, async" if fig4 else "sync (Fig. 6 only)")
            + (", LC" if name == "clef" else ""),
            "batch": "one (row, class) pair", "paper P": p["P"], "ours P": 2,
            "seeds": ", ".join(map(str, cfg["seeds"])) if name == "news20" else seed,
        })
    return pd.DataFrame(rows).set_index("dataset").T


def save_figure(fig, results_path, name):
    """Keep a PNG of a figure next to the results JSON (to check a build by eye)."""
    if results_path:
        os.makedirs(os.path.dirname(os.path.abspath(results_path)), exist_ok=True)
        fig.savefig(os.path.splitext(results_path)[0] + f"_{name}.png", dpi=80,
                    bbox_inches="tight")


def time_to(hist_t, hist_o, target):
    """First time (or epoch) at which the objective is below ``target``; NaN if never."""
    for t, o in zip(hist_t, hist_o):
        if o <= target:
            return t
    return np.nan


def _gap_at(xs, objectives, limit, log_k, opt):
    """Relative gap of the last objective reached with ``x <= limit`` (log K before any)."""
    then = [o for x, o in zip(xs, objectives) if x <= limit]
    return ((then[-1] if then else log_k) - opt) / opt


def record_fig4(report, runs, opt, data, epochs, oracle):
    """Record Figure 4's numbers: final gaps, times to 1 % and 0.1 % of the optimum, epoch
    times, and LC against DS-MLR on CLEF in seconds and in work (multiply-adds in units of
    nnz(X)·K: LC 2 per evaluation of a class problem, 1 per b update; DS-MLR sync 3 per
    outer iteration)."""
    epoch_s = {}
    for name in runs:
        report.record(f"{name}_opt", opt[name])
        for m in ["sync", "async"]:
            h = runs[name][f"DS-MLR {m}"].history_
            report.record(f"{name}_{m}_final_gap",
                          (h["objective"][-1] - opt[name]) / opt[name])
            epoch_s[f"{name}_{m}"] = np.diff([0.0] + h["time"]).tolist()
        for key, label in [("lbfgs", "L-BFGS"), ("sync", "DS-MLR sync"),
                           ("async", "DS-MLR async")]:
            h = runs[name][label].history_
            for tag, f in [("1pct", 1.01), ("01pct", 1.001)]:
                report.record(f"{name}_{key}_time_{tag}",
                              time_to(h["time"], h["objective"], f * opt[name]))
        h = runs[name]["DS-MLR sync"].history_
        report.record(f"{name}_sync_total_time", h["time"][-1])
        report.record(f"{name}_sync_epochs_1pct",
                      time_to(h["epoch"], h["objective"], 1.01 * opt[name]))
    report.record("fig4_epoch_seconds", epoch_s)
    report.record("news20_sync_median_epoch", float(np.median(epoch_s["news20_sync"])))
    lc, o = runs["clef"]["LC"].history_, opt["clef"]
    for tag, f in [("1pct", 1.01), ("01pct", 1.001)]:
        report.record(f"clef_lc_time_{tag}", time_to(lc["time"], lc["objective"], f * o))
    report.record("clef_lc_final_gap", (lc["objective"][-1] - o) / o)
    report.record("clef_lc_total_time", lc["time"][-1])
    log_k = math.log(len(np.unique(data["clef"][1])))
    t_ds = runs["clef"]["DS-MLR sync"].history_["time"][-1]
    report.record("clef_lc_gap_at_dsmlr_end",
                  _gap_at(lc["time"], lc["objective"], t_ds, log_k, o))
    report.record("clef_lc_passes_1pct", time_to(lc["passes"], lc["objective"], 1.01 * o))
    work_ds = 3.0 * epochs  # DS-MLR sync's whole run, in the same units
    report.record("clef_sync_work", work_ds)
    report.record("clef_lc_gap_at_equal_work",
                  _gap_at(lc["passes"], lc["objective"], work_ds, log_k, o))
    report.record("clef_oracle_vs_lbfgs", abs(oracle.objective_ - o) / o)


def plot_fig4(runs, opt, data, alpha, n_workers):
    """Figure 4: the gap to the L-BFGS optimum against seconds (top) and epochs (bottom)."""
    import matplotlib.pyplot as plt

    sets = list(runs)
    fig, axes = plt.subplots(2, len(sets), figsize=(4.2 * len(sets), 6.4), squeeze=False)
    for j, name in enumerate(sets):
        K = len(np.unique(data[name][1]))
        zero_gap = (math.log(K) - opt[name]) / opt[name]
        for label, est in runs[name].items():
            h = est.history_
            rel = (np.array(h["objective"]) - opt[name]) / opt[name]
            x_epoch = next(h[k] for k in ("iteration", "epoch", "outer") if k in h)
            for ax, x in [(axes[0, j], h["time"]), (axes[1, j], x_epoch)]:
                ax.semilogy(x, np.maximum(rel, 1e-10), marker=".", label=label)
        for ax in axes[:, j]:
            ax.axhline(zero_gap, color="k", lw=0.8, ls=":", label="W = 0 (log K)")
            ax.axhline(0.01, color="grey", lw=0.5, ls="--", label="1 %")
        axes[0, j].set_title(f"{name}: gap to the DataParallelLBFGS\n"
                             f"(alpha={alpha[name]:.2g}) optimum, P={n_workers}", fontsize=9)
        axes[0, j].set_xlabel("seconds (warm kernels)")
        axes[1, j].set_xlabel("epochs (DS-MLR) / iterations (L-BFGS) / rounds (LC)")
    axes[0, 0].set_ylabel("(L1 − L1*) / L1*")
    axes[1, 0].set_ylabel("(L1 − L1*) / L1*")
    axes[0, -1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _b_gaps(histories, opt):
    return {bu: [float((h["objective"][-1] - opt) / opt) if len(h["objective"]) else np.inf
                 for h in hs] for bu, hs in histories.items()}


def record_b_update(report, histories, opt):
    """Record the final gaps of ``{"exact"|"stochastic": [history per seed]}``."""
    gaps = _b_gaps(histories, opt)
    for bu, g in gaps.items():
        key = "exact_b_gap" if bu == "exact" else "stochastic_b_gap"
        report.record(key, float(np.mean(g)))
        report.record(key + "_seeds", g)
        report.record(key + "_spread", float(np.max(g) - np.min(g)))
    report.record("exact_b_wins_every_seed",
                  bool(all(e < s for e, s in zip(gaps["exact"], gaps["stochastic"]))))


def plot_b_update(histories, opt, title):
    """The gap per epoch of each seed, exact b in C0 and stochastic b in C1."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for bu, colour in [("exact", "C0"), ("stochastic", "C1")]:
        for i, h in enumerate(histories[bu]):
            rel = (np.array(h["objective"]) - opt) / opt
            ax.semilogy(h["epoch"], rel, color=colour, lw=0.8,
                        label=f"b {bu}" if i == 0 else None)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("epoch")
    ax.set_ylabel("(L1 − L1*) / L1*")
    ax.legend()
    fig.tight_layout()
    return fig


def rank_figure(report, curves, data):
    """Figure 6: the CDF of the true label's rank on the test rows of each set, for
    ``curves = {name: [(estimator, line style, label), ...]}``; records the share of test
    labels in the top K/4 and at rank 1 (end of the run) and in the top K/4 after 5 epochs."""
    import matplotlib.pyplot as plt

    from xclib.metrics import true_label_rank

    fig, axes = plt.subplots(1, len(curves), figsize=(3.8 * len(curves), 3.3),
                             squeeze=False)
    for j, (name, lines) in enumerate(curves.items()):
        Xt, yt = data[name][2:]
        classes = lines[0][0].classes_
        K = classes.shape[0]
        keep = np.isin(yt, classes)  # labels never seen in training cannot be ranked
        yt_enc = np.searchsorted(classes, yt[keep])
        for est, ls, lab in lines:
            r = true_label_rank(est.coef_, Xt[keep], yt_enc)
            ks = np.arange(1, K + 1)
            cdf = np.searchsorted(np.sort(r), ks, side="right") / r.shape[0]
            axes[0, j].plot(ks, cdf, ls, label=lab)
            top = float(np.mean(r <= max(1, K // 4)))
            if lab == "DS-MLR, end":
                report.record(f"{name}_top_quarter", top)
                report.record(f"{name}_test_top1", float(np.mean(r == 1)))
            if lab == "DS-MLR, 5 epochs":
                report.record(f"{name}_top_quarter_5ep", top)
        axes[0, j].set_xscale("log")
        axes[0, j].set_title(f"{name} (test rows)")
        axes[0, j].set_xlabel("rank k")
        axes[0, j].axvline(K / 4, color="grey", lw=0.5)
    axes[0, 0].set_ylabel("P(rank of true label ≤ k)")
    axes[0, 0].legend()
    fig.tight_layout()
    return fig


def scaling_table(epoch_seconds, n_rows, n_classes):
    """``{(backend, schedule, P): [seconds per outer iteration]}`` -> median seconds and
    (row, class) updates per second per worker, one row per configuration."""
    rows = []
    for (backend, sched, P), ts in epoch_seconds.items():
        t = float(np.median(ts))
        rows.append({"backend": backend, "schedule": sched, "P": P,
                     "s per outer iteration (median)": t,
                     "(row, class) updates per s per worker": n_rows * n_classes / t / P})
    return pd.DataFrame(rows).set_index(["backend", "schedule", "P"])


def record_scaling(report, table, models, epoch_seconds):
    """Record the epoch times, the speed-ups of the scaling table and whether the backends
    agree; returns ``{(backend, schedule, P): median seconds}``."""
    report.record("scaling_epoch_seconds", {f"{b}_{s}_P{P}": ts for (b, s, P), ts
                                            in epoch_seconds.items()})
    T = table["s per outer iteration (median)"].to_dict()
    report.record("speedup_threads", T[("threads", "sync", 1)] / T[("threads", "sync", 2)])
    report.record("speedup_threads_async",
                  T[("threads", "async", 1)] / T[("threads", "async", 2)])
    report.record("speedup_dask", T[("dask", "sync", 1)] / T[("dask", "sync", 2)])
    report.record("speedup_dask_async", T[("dask", "sync", 1)] / T[("dask", "async", 2)])
    # the 2-thread speed-up = (smaller blocks, one core) × (two blocks at a time)
    report.record("blocking_gain", T[("serial", "sync", 1)] / T[("serial", "sync", 2)])
    report.record("parallel_gain", T[("serial", "sync", 2)] / T[("threads", "sync", 2)])
    report.record("sync_over_async_P1",
                  T[("threads", "sync", 1)] / T[("threads", "async", 1)])
    report.record("dask_overhead_per_inner_epoch",
                  (T[("dask", "sync", 2)] - T[("threads", "sync", 2)]) / (2 * 2))
    coef = {key: m.coef_ for key, m in models.items()}
    same = np.array_equal(coef[("serial", "sync", 1)], coef[("dask", "sync", 1)])
    same2 = np.array_equal(coef[("threads", "sync", 2)], coef[("dask", "sync", 2)])
    same2 = same2 and np.array_equal(coef[("serial", "sync", 2)], coef[("dask", "sync", 2)])
    report.record("dask_async_vs_threads_objective", abs(
        models[("dask", "async", 2)].history_["objective"][-1]
        / models[("threads", "async", 2)].history_["objective"][-1] - 1))
    report.record("backends_identical", bool(same and same2))
    return T


def external_record(name, roots=None):
    """The saved record of a run on another machine, next to the shared data (or in
    ``roots``): ``{"file", "text", "header", "P", "seconds": {schedule: [s per P]}}``;
    ``file`` is None and the rest empty when it is not on this machine."""
    if roots is None:
        roots = [Path(os.environ["XCLIB_DATA"]).parent] if os.environ.get("XCLIB_DATA") else []
        roots += [Path("..", "..", "shared"), Path("..", "shared")]
    path = next((Path(r) / name for r in roots if (Path(r) / name).exists()), None)
    text = "" if path is None else path.read_text()
    seconds, P = {}, None
    for line in text.splitlines():  # | schedule | P = 1 | 2 | ... | speed-up |
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "schedule":
            P = [int(c.replace("P =", "")) for c in cells[1:-1]]
        elif cells[0] in ("sync", "async"):
            seconds[cells[0]] = [float(c) for c in cells[1:-1]]
    header = [line for line in text.splitlines() if line.startswith(("#", "- "))]
    header = "> " + "\n> ".join(header)
    return {"file": path, "text": text, "header": header, "P": P, "seconds": seconds}


def model_check(measured, nnz_blocks, n_classes, n_features, rng, source, **link):
    """Simulated against measured seconds per outer iteration, the model calibrated on the
    first P (P = 1) of each schedule. ``measured = {schedule: {P: seconds}}``; a worker's block
    holds a multinomial share of the ``nnz_blocks`` non-zeros."""
    from xclib import dsmlr

    rows = []
    for sched, by_p in measured.items():
        c = next(iter(by_p.values())) / (1.5 * nnz_blocks * n_classes)
        for P, t_meas in by_p.items():
            blk = rng.multinomial(nnz_blocks, np.ones(P) / P)
            sim_t = dsmlr.simulate_schedules(blk, n_classes, n_features, c, c, **link)[sched]
            rows.append(dict(source=source, schedule=sched, P=P, measured_s=t_meas,
                             simulated_s=sim_t["time"]))
    return rows


def record_ext16(report, rows):
    """The model check's table (speed-ups against each series' first P), recording the
    16-core run's measured and simulated speed-ups at P = 16."""
    check = pd.DataFrame(rows)
    by = check.groupby(["source", "schedule"])
    check["measured_speedup"] = by.measured_s.transform("first") / check.measured_s
    check["simulated_speedup"] = by.simulated_s.transform("first") / check.simulated_s
    ext = check[check.source == "synthetic, 16 cores"].set_index(["schedule", "P"])
    for sched in ["sync", "async"]:
        for kind in ("measured", "simulated"):
            report.record(f"ext16_{sched}_{kind}_speedup",
                          ext.loc[(sched, 16), f"{kind}_speedup"] if len(ext) else np.nan)
    return check.set_index(["source", "schedule", "P"]).rename(columns={
        "measured_s": "measured s / iteration", "simulated_s": "simulated s / iteration",
        "measured_speedup": "measured speed-up", "simulated_speedup": "simulated speed-up",
    })


def cpu_seconds_per_op(X, y, n_classes, alpha, seed):
    """CPU seconds per (non-zero × class) of the kernels of one sync outer iteration at
    P = 1 (the (13) steps, then the partial sums of (9)), and of one exact gradient: CPU
    time, so that other jobs on the machine do not inflate the cost the model extrapolates.
    Each is called once first, so that no compilation is timed."""
    from xclib import dsmlr
    from xclib.base import as_csr
    from xclib.exact import softmax_objective

    K = n_classes
    B1 = dsmlr.Blocks(as_csr(X), y, K, 1, np.random.default_rng(seed))
    W1 = np.zeros((K, X.shape[1]))
    rows1, cls1 = np.arange(X.shape[0]), np.arange(K)
    args1 = (B1.X[0], B1.y[0], B1.b[0])
    dsmlr.schedules.sgd_call(*args1, rows1[:10], W1, cls1, 0, 0.5 / K, alpha, K, 0.0)
    t0 = time.process_time()
    dsmlr.schedules.sgd_call(*args1, rows1, W1, cls1, 0, 0.5 / K, alpha, K, 0.0)
    dsmlr.schedules.lse_call(B1.X[0], W1)
    c_ds = (time.process_time() - t0) / (1.5 * X.nnz * K)
    W0 = np.zeros((K, X.shape[1]))
    softmax_objective(W0, X, y, 0.0)  # warm
    t0 = time.process_time()
    for _ in range(3):
        softmax_objective(W0, X, y, 0.0)
    c_lb = (time.process_time() - t0) / 3 / (X.nnz * K)   # one exact gradient
    return c_ds, c_lb


def simulate(size, Ps, c_ds, c_lb, rng, **link):
    """The network model at ``size = dict(N, D, K, nnz_row)`` for each P of ``Ps`` (rows
    dealt at random: a multinomial share of the non-zeros per worker): seconds and GB sent
    per worker per outer iteration, one row per (P, method)."""
    from xclib import dsmlr

    rows = []
    for P in Ps:
        blk = rng.multinomial(int(size["N"] * size["nnz_row"]), np.ones(P) / P)
        r = dsmlr.simulate_schedules(blk, size["K"], size["D"], c_ds, c_lb, **link)
        for meth, v in r.items():
            rows.append(dict(P=P, method=meth, seconds=v["time"],
                             GB_sent_per_worker=v["bytes"] / 1e9))
    return pd.DataFrame(rows)


def plot_simulation(sim, bandwidth):
    """Simulated seconds, speed-up and GB sent per worker against P, with the async
    schedule's floor (bytes over bandwidth) and the linear speed-up."""
    import matplotlib.pyplot as plt

    Ps = sorted(sim.P.unique())
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.4))
    for meth, g in sim.groupby("method"):
        ax[0].loglog(g.P, g.seconds, marker="o", label=meth)
        ax[1].semilogx(g.P, g.seconds.iloc[0] / g.seconds, marker="o", label=meth)
        ax[2].semilogx(g.P, g.GB_sent_per_worker, marker="o", label=meth)
    link_s = sim.query("method == 'async'").GB_sent_per_worker * 1e9 / bandwidth
    ax[0].plot(Ps, link_s, "k--", lw=0.8, label="async bytes / bandwidth")
    ax[1].plot(Ps, Ps, "k:", lw=0.8, label="linear")
    ax[0].set_ylabel("simulated s per outer iteration")
    ax[1].set_ylabel("simulated speed-up")
    ax[2].set_ylabel("simulated GB sent per worker / iteration")
    for a in ax:
        a.set_xlabel("P (workers)")
    ax[0].legend(fontsize=8)
    ax[0].set_title(f"SIMULATED (LSHTC1-large size, {bandwidth / 1e9:g} GB/s)")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def record_simulation(report, sim, bandwidth):
    """Record the simulated speed-ups (P = 16 and the largest P against P = 1) and the async
    schedule's bytes and link floor at P = 64; returns the table of seconds and GB."""
    piv = sim.pivot(index="P", columns="method", values="seconds")
    gb = sim.pivot(index="P", columns="method", values="GB_sent_per_worker")
    report.record("sim_bandwidth_GBps", bandwidth / 1e9)
    for meth in ["sync", "async", "lbfgs"]:
        report.record(f"sim_speedup64_{meth}",
                      float(piv[meth].iloc[0] / piv[meth].iloc[-1]))
        report.record(f"sim_speedup16_{meth}", float(piv[meth].loc[1] / piv[meth].loc[16]))
    report.record("sim_async64_seconds", float(piv["async"].loc[64]))
    report.record("sim_async64_GB", float(gb["async"].loc[64]))
    link_bound = float(gb["async"].loc[64] * 1e9 / bandwidth)
    report.record("sim_async64_link_bound_s", link_bound)
    report.record("sim_async64_link_share", link_bound / float(piv["async"].loc[64]))
    return sim.pivot(index="P", columns="method",
                     values=["seconds", "GB_sent_per_worker"])


def csr_bytes(A):
    """Bytes of a CSR matrix's three arrays."""
    return A.data.nbytes + A.indices.nbytes + A.indptr.nbytes


def block_memory(X, y, n_classes, Ps, seed):
    """What one worker stores as ``DSMLR`` deals the blocks (the largest data block in CSR,
    the largest parameter block and its b block) for each P, against L-BFGS (a full W and a
    full gradient) and the predictions ND/P and (KD + N)/P, in MB."""
    from xclib import dsmlr
    from xclib.base import as_csr

    K, (N, D) = n_classes, X.shape
    rows = []
    for P in Ps:
        blocks = dsmlr.Blocks(as_csr(X), y, K, P, np.random.default_rng(seed))
        data_b = max(csr_bytes(b) for b in blocks.X)
        kq = int(np.max(np.diff(blocks.cb)))
        par_ds = kq * D * 8 + max(b.nbytes for b in blocks.b)
        rows.append({"P": P, "largest data block (MB)": data_b / 1e6,
                     "DS-MLR W block + b (MB)": par_ds / 1e6,
                     "L-BFGS W + gradient (MB)": 2 * K * D * 8 / 1e6,
                     "ND/P (MB)": csr_bytes(X) / P / 1e6,
                     "(KD + N)/P (MB)": (K * D + N) * 8 / P / 1e6})
    return pd.DataFrame(rows).set_index("P")


def worker_memory(peaks, X, n_classes):
    """The measured peak per worker of running fits (``{P: bytes}``) against ND/P (CSR rows,
    int64 labels, float64 b) and KD/P (a parameter block), in MB."""
    rows = []
    for P, peak in peaks.items():
        data_pred = (csr_bytes(X) + 16 * X.shape[0]) / P
        par_pred = n_classes * X.shape[1] * 8 / P
        rows.append({"P": P, "measured peak per worker (MB)": peak / 1e6,
                     "ND/P: data block (MB)": data_pred / 1e6,
                     "KD/P: parameter block (MB)": par_pred / 1e6,
                     "measured / (ND/P + KD/P)": peak / (data_pred + par_pred)})
    return pd.DataFrame(rows).set_index("P")


def record_memory(report, blocks, workers):
    """Record how the per-worker memory falls with P: the dealt blocks (:func:`block_memory`)
    and the peaks of running fits (:func:`worker_memory`, P = 1, 2, 4)."""
    peak = workers["measured peak per worker (MB)"]
    report.record("dask_mem_ratio_P4", peak.loc[4] / peak.loc[1])
    report.record("dask_mem_vs_formula_P4",
                  float(workers.loc[4, "measured / (ND/P + KD/P)"]))
    total = blocks["largest data block (MB)"] + blocks["DS-MLR W block + b (MB)"]
    report.record("mem_ratio_P2", float(total.iloc[1] / total.iloc[0]))
    pred = blocks["ND/P (MB)"] + blocks["(KD + N)/P (MB)"]
    report.record("mem_ratio_P16_vs_pred", float(total.iloc[-1] / pred.iloc[-1]))
    report.record("dask_mem_ratio_P2", peak.loc[2] / peak.loc[1])


def record_explorer(report, sweep, rates, methods, n_epochs):
    """Record the explorer's frames without a converging line, the largest rate at which
    every line converges and the smallest at which one diverges."""
    from xclib.book.explorer import is_diverged

    frames = {r: sum(not is_diverged(sweep[m][r], "objective", n_epochs) for m in methods)
              for r in rates}
    stable = [r for r in rates if frames[r] == len(methods)]
    report.record("explorer_empty_frames", sum(v == 0 for v in frames.values()))
    report.record("explorer_largest_stable_rate", max(stable))
    report.record("explorer_smallest_diverging_rate",
                  min([r for r in rates if r not in stable], default=float("nan")))


def what_it_buys(runs, data, opt):
    """Seconds to 1 % and 0.1 % of the optimum, the final gap and the test accuracy of each
    fit of ``runs = {dataset: {method: estimator}}``."""
    buy = []
    for name in runs:
        Xt, yt = data[name][2:]
        for label in ["L-BFGS", "DS-MLR sync", "DS-MLR async", "LC"]:
            if label not in runs[name]:
                continue
            est = runs[name][label]
            h = est.history_
            classes = getattr(est, "classes_", np.arange(est.coef_.shape[0]))
            keep = np.isin(yt, classes)
            pred = classes[np.argmax(np.asarray(Xt[keep] @ est.coef_.T), axis=1)]
            buy.append({"dataset": name, "method": label,
                        "s to 1 %": time_to(h["time"], h["objective"], 1.01 * opt[name]),
                        "s to 0.1 %": time_to(h["time"], h["objective"], 1.001 * opt[name]),
                        "final gap": (h["objective"][-1] - opt[name]) / opt[name],
                        "test accuracy": float(np.mean(pred == yt[keep]))})
    return pd.DataFrame(buy).set_index(["dataset", "method"])
