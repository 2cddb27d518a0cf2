"""The DS-MLR chapter's reproduction claims, decided from the numbers the page recorded."""
from __future__ import annotations

import numpy as np

TOPK_WHY = ("multi-label set reduced to its first label (Figure 6 section): the first "
            "label is often not the top-scored right answer")


def _convergence_claims(report, epochs):
    v = report.values
    for name in ["news20", "clef"]:
        report.claim(f"{name}: DS-MLR (sync) reaches the L-BFGS objective (within 2 % "
                     f"after {epochs} epochs)", status="reproduced",
                     holds=v[f"{name}_sync_final_gap"] < 0.02,
                     ours=f"{name}_sync_final_gap", paper="converges (Fig. 4)")
    report.claim("bibtex: DS-MLR (sync) within 5 % of the L-BFGS objective",
                 status="reproduced", holds=v["bibtex_sync_final_gap"] < 0.05,
                 ours="bibtex_sync_final_gap",
                 paper="LSHTC1-small: converges (Fig. 4)")
    report.claim("DS-MLR async also converges (within 2 % on NEWS20)", status="reproduced",
                 holds=v["news20_async_final_gap"] < 0.02, ours="news20_async_final_gap",
                 paper="Fig. 4")
    report.claim("With exact b (9), L2(W, b(W)) equals eq. (2)", status="reproduced",
                 holds=v["identity_gap"] < 1e-10, ours="identity_gap",
                 paper="identity (Section 4)")
    for name in ["news20", "clef"]:
        t_l = float(v[f"{name}_lbfgs_time_01pct"])
        t_d = float(v[f"{name}_sync_time_01pct"])
        report.claim(f"{name}: on small data L-BFGS reaches 0.1 % of the optimum before "
                     "DS-MLR (warm timings)", status="reproduced",
                     holds=bool(np.isfinite(t_l) and not (t_d <= t_l)),
                     ours=[f"{name}_lbfgs_time_01pct", f"{name}_sync_time_01pct"],
                     paper="L-BFGS out-performs (Section 7.1.1)")
    lc_ok = bool(v["clef_sync_final_gap"] < v["clef_lc_gap_at_equal_work"])
    report.claim("clef: with the same work (multiply-adds) DS-MLR ends closer to the "
                 "optimum than LC", holds=lc_ok,
                 status="reproduced" if lc_ok else "not reproduced",
                 ours=["clef_sync_final_gap", "clef_lc_gap_at_equal_work",
                       "clef_sync_work", "clef_lc_passes_1pct"],
                 why=None if lc_ok else (
                     f"after {v['clef_sync_work']:.0f} units of nnz(X)·K, LC is "
                     f"{v['clef_lc_gap_at_equal_work']:.2%} above the optimum, DS-MLR sync "
                     f"{v['clef_sync_final_gap']:.2%}"),
                 paper="DS-MLR faster than LC on NEWS20, LSHTC1-small, CLEF (Fig. 4)")
    report.claim("Exact b update beats a stochastic b (final gap, learning_rate = 1/K, "
                 "NEWS20, in each of three seeds)", status="reproduced",
                 holds=v["exact_b_wins_every_seed"],
                 ours=["exact_b_gap", "exact_b_gap_spread", "stochastic_b_gap",
                       "stochastic_b_gap_spread"],
                 paper="closed-form b avoids noisy updates (Section 4)")


def _parallel_claims(report):
    v = report.values
    idle = v["others_cores"] < v["n_cpus"] - 1.5   # a second core free throughout
    ours = ["speedup_threads", "speedup_threads_async", "others_cores"]
    if idle:
        report.claim("Two workers are faster than one (threads, sync)", status="reproduced",
                     holds=v["speedup_threads"] > 1.0, ours=ours,
                     paper="multi-thread close to ideal (Figs. 7–8)")
    else:
        report.claim("Two workers are faster than one (threads, sync)",
                     status="not testable", ours=ours,
                     paper="multi-thread close to ideal (Figs. 7–8)",
                     why="no free second core: other processes kept more than "
                         f"{v['n_cpus'] - 1.5:.1f} cores busy while this ran")
    report.claim("serial, threads and Dask backends give the same model (same seed)",
                 status="reproduced", holds=v["backends_identical"],
                 ours="backends_identical", paper="—")
    report.claim("Per-worker memory of a running fit falls as O(ND/P + KD/P) (Dask worker "
                 "processes: P=4 peak ≤ 0.4 × P=1; within 2× of ND/P + KD/P)",
                 status="reproduced",
                 holds=v["dask_mem_ratio_P4"] < 0.4 and v["dask_mem_vs_formula_P4"] < 2,
                 ours=["dask_mem_ratio_P2", "dask_mem_ratio_P4", "dask_mem_vs_formula_P4"],
                 paper="Table 1")
    report.claim("DS-MLR async on Dask worker processes ends within 5 % of the threads "
                 "backend's objective (same epochs)", status="reproduced",
                 holds=v["dask_async_vs_threads_objective"] < 0.05,
                 ours="dask_async_vs_threads_objective", paper="Algorithm 2")


def add_claims(report, epochs, names):
    """Every claim of the chapter, from ``report.values``: convergence (Figure 4), the exact
    b, the backends and memory (Table 1), the ranks of Figure 6 for the sets ``names``, and
    what cannot be tested on one machine. ``epochs``: the DS-MLR fits' outer iterations."""
    _convergence_claims(report, epochs)
    _parallel_claims(report)
    v = report.values
    for name in names:
        ok = v[f"{name}_top_quarter"] >= 0.92
        status = "reproduced" if ok else "not reproduced"
        report.claim(f"{name}: the top K/4 ranks hold about 95 % of test labels (≥ 92 %, "
                     "within 3 points)",
                     status=status, holds=ok, ours=f"{name}_top_quarter",
                     paper="≈ 95 % in all datasets (Fig. 6)",
                     why=None if ok else (
                         TOPK_WHY if name in ("bibtex", "delicious")
                         else f"{v[name + '_top_quarter']:.1%} of test rows"))
    report.claim("Scaling over machines (YouTube8M-Video on 1, 2, 4, 8, 16 machines)",
                 status="not testable",
                 ours=["sim_speedup16_async", "sim_speedup16_sync",
                       "sim_async64_link_bound_s"],
                 paper="some slowdown with 8 and 10 workers (Fig. 7, Section 7.3)",
                 why="needs up to 16 networked machines; this machine has "
                     f"{v['n_cpus']} cores (the simulation above is a model, not a test)")
    report.claim("Reddit-Full / ODP / YouTube8M (data and model beyond one machine)",
                 status="not testable", paper="Figs. 1b, 5",
                 why="the data sets are not available here, nor a cluster to hold them")
