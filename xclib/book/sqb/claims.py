"""The SQB chapter's Figure 1 records, rankings and reproduction claims."""
from __future__ import annotations

import numpy as np
import pandas as pd

#: each method's name in the recorded keys
KEYS = {"SQB (γ rows)": "sqb", "SQB (γ·T rows)": "sqbfrac", "SGD": "sgd",
        "ASGD": "asgd", "SAG": "sag", "SAGls": "sagls", "L-BFGS": "lbfgs"}
YES_NO = {True: "yes", False: "no"}.get


def passes_to(h, f_star, eps):
    """The effective passes at which history ``h`` first comes within ``eps`` of
    ``f_star`` (inf if it never does)."""
    ex = np.asarray(h["train_loss"]) - f_star
    hit = np.nonzero(ex <= eps)[0]
    return float(h["passes"][hit[0]]) if hit.size else np.inf


def _excess(h, d):
    return np.asarray(h["train_loss"]) - d["f_star"]


def record_fig1(report, data, runs, sqb_seeds, readings, stands_in, eps):
    """Record Figure 1's numbers: for SQB (``sqb_seeds[name, unit]``: three seeds' histories)
    the final excess and test error over the seeds, its best passes to ε and its diverged
    runs; for every method of ``runs[name, label]`` its final excess, passes to ε and test
    error. Returns the table of every method's run."""
    summary = []
    for name, d in data.items():
        for unit, label in readings.items():
            key, seeds = f"{name}_{KEYS[label]}", sqb_seeds[name, unit]
            finals = [_excess(g, d)[-1] for g in seeds]
            report.record(f"{key}_final_excess_seeds", finals)
            report.record(f"{key}_final_excess_median", float(np.median(finals)))
            report.record(f"{key}_final_excess_spread", float(max(finals) / min(finals)))
            report.record(f"{key}_best_seed_passes_to_eps", min(
                passes_to(g, d["f_star"], eps) for g in seeds))
            report.record(f"{key}_test_error_median",
                          float(np.median([g["eval_error"][-1] for g in seeds])))
        report.record(f"{name}_sqb_runs_diverged", sum(
            g["diverged"] for unit in readings for g in sqb_seeds[name, unit]))
        for (n, label), h in runs.items():
            if n != name:
                continue
            p = passes_to(h, d["f_star"], eps)
            key = f"{name}_{KEYS[label]}"
            report.record(f"{key}_final_excess", _excess(h, d)[-1])
            report.record(f"{key}_passes_to_eps", p if np.isfinite(p) else "inf")
            report.record(f"{key}_final_test_error", h["eval_error"][-1])
            summary.append(dict(data=name, paper_dataset=stands_in[name], method=label,
                                final_excess=_excess(h, d)[-1], passes_to_eps=p,
                                final_test_error=h["eval_error"][-1],
                                seconds=h["seconds"]))
    return pd.DataFrame(summary)


def ahead(p_a, f_a, p_b, f_b):
    """a before b: reaches ε in fewer passes or, neither reaching it, ends lower."""
    if np.isfinite(p_a) or np.isfinite(p_b):
        return p_a < p_b
    return f_a < f_b


def ranking(d, seeds, baselines, eps):
    """Figure 1's ranking of SQB's runs (``seeds``: histories) among the ``baselines``
    (``{"SGD"|"ASGD"|"SAG"|"L-BFGS": history}``) on the dataset ``d``."""
    best = min(passes_to(g, d["f_star"], eps) for g in seeds)
    final = float(np.median([_excess(g, d)[-1] for g in seeds]))
    base = {m: (passes_to(baselines[m], d["f_star"], eps), _excess(baselines[m], d)[-1])
            for m in ("SGD", "ASGD", "SAG", "L-BFGS")}
    error = float(np.median([g["eval_error"][-1] for g in seeds]))
    # a difference the test set cannot resolve: two binomial standard errors, or 0.01
    close = max(0.01, 2 * np.sqrt(d["err_star"] * (1 - d["err_star"]) / len(d["yte"])))
    return {"passes to ε (best seed)": best, "final excess (median)": final,
            "ahead of SGD and ASGD": all(ahead(best, final, *base[m])
                                         for m in ("SGD", "ASGD")),
            "within 2× SAG/L-BFGS passes": bool(
                best <= 2 * min(base["SAG"][0], base["L-BFGS"][0])),
            "test error (median)": error, "θ* test error": d["err_star"],
            "test error close to θ*'s": abs(error - d["err_star"]) <= close}


def ranking_table(report, data, fig1, readings):
    """Record how many datasets rank SQB as Figure 1 does under some reading of γ, and where
    its test error falls against the optimum's; returns the ranking table."""
    report.record("fig1_datasets_ranked", sum(
        any(fig1[n, u]["ahead of SGD and ASGD"]
            and fig1[n, u]["within 2× SAG/L-BFGS passes"] for u in readings) for n in data))
    for name, d in data.items():
        report.record(f"{name}_n_test", d["Xte"].shape[0])
        below = [fig1[name, u]["test error (median)"] < d["err_star"] for u in readings]
        report.record(f"{name}_sqb_test_error_vs_opt",
                      "below" if all(below) else "above" if not any(below) else
                      "below under one reading of γ and not under the other")
    return pd.DataFrame([{"data": n, "γ read as": u, **r} for (n, u), r in fig1.items()]
                        ).style.hide(axis="index").format(
        {"passes to ε (best seed)": "{:.3g}", "final excess (median)": "{:.2e}",
         "test error (median)": "{:.4f}", "θ* test error": "{:.4f}"}).format(
        YES_NO, subset=["ahead of SGD and ASGD", "within 2× SAG/L-BFGS passes",
                        "test error close to θ*'s"])


def settings_table(report, rankings):
    """``{(unit, cap, step): ranking}`` -> the table of which settings recover Figure 1
    (ahead of SGD and ASGD and within twice the passes of SAG or L-BFGS), recorded."""
    rows = []
    for (unit, cap, rate), r in rankings.items():
        recovers = r["ahead of SGD and ASGD"] and r["within 2× SAG/L-BFGS passes"]
        rows.append({"γ read as": unit, "|S| cap": "T" if cap is None else cap,
                     "step": rate, "final excess (median)": r["final excess (median)"],
                     "passes to ε (best seed)": r["passes to ε (best seed)"],
                     "ahead of SGD and ASGD": r["ahead of SGD and ASGD"],
                     "within 2× SAG/L-BFGS": r["within 2× SAG/L-BFGS passes"],
                     "recovers Figure 1": recovers})
    table = pd.DataFrame(rows)
    report.record("a9a_settings_recovering_figure1", int(table["recovers Figure 1"].sum()))
    report.record("a9a_settings_tried", len(table))
    return table.style.hide(axis="index").format(
        {"final excess (median)": "{:.2e}", "passes to ε (best seed)": "{:.3g}",
         "step": "{:g}"}).format(YES_NO, subset=[
            "ahead of SGD and ASGD", "within 2× SAG/L-BFGS", "recovers Figure 1"])


def _decide(table, text, holds, ours, paper, why):
    """A claim whose status is its measured outcome (why: the evidence if it fails)."""
    table.claim(text, status="reproduced" if holds else "not reproduced",
                holds=bool(holds), ours=ours, paper=paper, why=None if holds else why)


WHY_FIG1 = ("fails with γ read as rows and as a fraction of T (Figure 1's ranking "
            "table); "
            "the exact full-batch bound method reaches the optimum, and one exact step "
            "with a small curvature batch multiplies unseen directions by T (section "
            "'The method as specified')")


def _paper_claims(table, v, names, fig1, readings):
    _decide(table, "The quadratic bound (eq. 3) lies above log Z at every point "
            "tried (200 a9a rows, 150 points around each anchor)",
            v["bound_worst_violation"] <= 1e-9, "bound_worst_violation",
            "Z(θ) ≤ bound for all θ", "a point where log Z exceeds the bound")
    _decide(table, "μ_T is an unbiased gradient estimate (Lemma 1): the mean of "
            "20000 batch gradients is the full gradient (relative error < 0.05)",
            v["lemma1_relative_error"] < 0.05, "lemma1_relative_error", "E[μ_T] = μ",
            "the mean of the batch gradients is not the full gradient")
    for name in names:
        keys = [f"{name}_{k}_best_seed_passes_to_eps" for k in ("sqb", "sqbfrac")]
        _decide(table, f"{name}: SQB is ahead of tuned SGD and ASGD (fewer passes to "
                "ε, or a lower final excess when none reaches it)",
                any(fig1[name, u]["ahead of SGD and ASGD"] for u in readings),
                keys + [f"{name}_{k}_final_excess_median" for k in ("sqb", "sqbfrac")]
                + [f"{name}_{m}_{q}" for m in ("sgd", "asgd")
                   for q in ("passes_to_eps", "final_excess")],
                "holds (Figure 1)", WHY_FIG1)
        _decide(table, f"{name}: SQB is competitive with SAG and L-BFGS: it reaches "
                "ε within twice the passes of the better of them",
                any(fig1[name, u]["within 2× SAG/L-BFGS passes"] for u in readings),
                keys + [f"{name}_sag_passes_to_eps", f"{name}_lbfgs_passes_to_eps"],
                "comparable (Figure 1)", WHY_FIG1)
        _decide(table, f"{name}: SQB's final test error is as low as the optimum's "
                "(Figure 1's test-error panel): within two standard errors of the test "
                "set, and at least 0.01",
                any(fig1[name, u]["test error close to θ*'s"] for u in readings),
                [f"{name}_{k}_test_error_median" for k in ("sqb", "sqbfrac")]
                + [f"{name}_opt_test_error"], "comparable (Figure 1)",
                "SQB's test error stays farther from θ*'s under both readings")
    _decide(table, "The bound method with full batches and an exact solve never "
            "increases the cost on a9a and reaches the optimum (excess ≤ 1e-10 after 150 "
            "iterations)", v["a9a_exact_bound_max_increase"] <= 1e-12
            and abs(v["a9a_exact_bound_excess_150"]) <= 1e-10,
            ["a9a_exact_bound_max_increase", "a9a_exact_bound_excess_10",
             "a9a_exact_bound_excess_50", "a9a_exact_bound_excess_150"],
            "majorisation: monotone (Jebara & Choromanska; Theorem 2's regime)",
            "the cost rose, or the run stopped short of the optimum")


def _our_checks(table, report, data, runs, setting_runs, fast_runs, msqb, seeds, readings,
                eps):
    v = report.values
    _decide(table, "The bound majorises because log 2cosh(u/2) is concave in u²: no "
            "positive second difference, never above its tangent",
            max(v["log2cosh_max_second_difference"], v["log2cosh_max_above_tangent"])
            <= 1e-12, ["log2cosh_max_second_difference", "log2cosh_max_above_tangent"],
            "—", "a positive second difference or a point above the tangent")
    for name in data:
        _decide(table, f"{name}: every solver shares one objective (scikit-learn's sag "
                "reaches our L-BFGS optimum)", v[f"{name}_sklearn_sag_gap"] < 1e-6,
                f"{name}_sklearn_sag_gap", "—", "scikit-learn's optimum is another cost")
    _decide(table, "SAG reaches ε on every dataset within the run (the baselines are "
            "sound)", all(np.isfinite(passes_to(runs[n, "SAG"], data[n]["f_star"], eps))
                          for n in data),
            [f"{n}_sag_passes_to_eps" for n in data], "—", "SAG stopped short of ε")
    steps = {}
    for unit, key in (("rows", "sqb"), ("fraction", "sqbfrac")):
        for rate in (1.0, 0.1):
            finals = [_excess(setting_runs[unit, 200, rate, s], data["a9a"])[-1]
                      for s in seeds]
            steps[unit, rate] = max(finals)
            report.record(f"a9a_{key}_l5_lr{rate:g}_final_excess_seeds", finals)
    either = {u: max(steps[u, 1.0], steps[u, 0.1]) < 1e-2 for u in readings}
    _decide(table, "a9a: SQB with l = 5 works with either of the paper's steps, 1 and "
            "0.1: final excess < 1e-2 for both, in each of three seeds, under one reading "
            "of γ at least", any(either.values()),
            [f"a9a_{k}_l5_lr{r}_final_excess_seeds" for k in ("sqb", "sqbfrac")
             for r in ("1", "0.1")], "step 1 or 0.1, minimal tuning (Section 4.3)",
            "some seed ends above 1e-2 at one of the steps under both readings")
    _decide(table, "One exact step with 5 curvature rows and α = 1/T overshoots: its "
            "excess is above the start's (log 2 − L*) and over 100 times that with 200 "
            "rows", v["a9a_one_step_excess_S5"] > np.log(2) - v["a9a_f_star"]
            and v["a9a_one_step_excess_S5"] > 100 * v["a9a_one_step_excess_S200"],
            ["a9a_one_step_excess_S5", "a9a_one_step_excess_S50",
             "a9a_one_step_excess_S200", "a9a_one_step_excess_full"], "—",
            "the step with five rows did not overshoot as stated")
    _decide(table, "LSQR reaches the exact solve after |S| + 1 iterations, one more in "
            "floating point (|S| = 5: relative error > 0.5 at l = 5, < 1e-6 at l = 7), so "
            "l = 10 and l = 20 take the same steps (iterates within 1e-6 after ten)",
            v["lsqr_rel_error_l7"] < 1e-6 and v["lsqr_rel_error_l5"] > 0.5
            and v["a9a_l10_l20_iterate_rel_diff"] < 1e-6,
            ["lsqr_rel_error_l5", "lsqr_rel_error_l6", "lsqr_rel_error_l7",
             "a9a_l10_l20_iterate_rel_diff"], "l chosen from {5, 10, 20}",
            "LSQR was not exact by then, or the iterates differ")
    _decide(table, "a9a: neither one batch (S = T, Lemma 4) nor two independent "
            "batches (Theorem 1) reaches ε in any of three seeds (which of them ends lower "
            "depends on the seed)",
            min(v["a9a_sqb_same_final_excess_seeds"]) > eps
            and min(v["a9a_sqb_independent_final_excess_seeds"]) > eps,
            ["a9a_sqb_same_final_excess_seeds", "a9a_sqb_independent_final_excess_seeds"],
            "experiments: independent batches; Theorem 1 needs them",
            "a seed reached ε")
    _decide(table, "The batch bound method (both batches all rows, CG l = 50) never "
            "increases the cost on a9a", np.diff(fast_runs[
                "both batches at the full data, CG l = 50"]["train_loss"]).max() <= 1e-12,
            "a9a_sqb_both_final_excess", "majorisation: monotone decrease",
            "the cost rose at some step")
    _decide(table, "a9a: SQB(alpha=1e-4) (full batches, CG l = 10, step 1, 10 "
            "iterations) is within 0.01 of the test error of scikit-learn's "
            "LogisticRegression at the same α (C = 1/(αN))",
            abs(v["a9a_sqb_same_alpha_test_error"]
                - v["a9a_sklearn_same_alpha_test_error"]) <= 0.01,
            ["a9a_sqb_same_alpha_test_error", "a9a_sklearn_same_alpha_test_error"],
            "—", "the test errors differ by more than 0.01")
    _decide(table, "Multinomial SQB with the paper's small curvature batches stays "
            "above ε on MNIST at both steps, and lowers the cost at step 1",
            min(msqb[1.0][-1], msqb[0.1][-1]) > eps and msqb[1.0][-1] < msqb[1.0][0],
            ["mnist_msqb_lr1_final_excess", "mnist_msqb_lr0.1_final_excess"], "—",
            "it reached ε, or did not lower the cost")


def add_claims(report, data, fig1, runs, setting_runs, fast_runs, msqb, seeds, readings,
               eps):
    """The paper's claims and our own checks (claims of no paper), decided from
    ``report.values`` and the runs; two tables that share ``report``'s values, whose claims
    become ``report``'s. Returns ``(paper_claims, our_checks)``."""
    from xclib.book.report import Report

    paper, ours = Report(glue=False), Report(glue=False)
    paper.values = ours.values = report.values
    _paper_claims(paper, report.values, list(data), fig1, readings)
    _our_checks(ours, report, data, runs, setting_runs, fast_runs, msqb, seeds, readings,
                eps)
    report.claims = paper.claims + ours.claims
    return paper, ours
