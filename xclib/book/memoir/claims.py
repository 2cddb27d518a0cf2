"""The MEMOIR chapter's reproduction check, and the values of its last measurements that the
check rests on (training time against K, the reasons measured).

Every claim's status is computed from recorded values (``report.values``): "reproduced" when
the measurement holds, "not reproduced" (with the evidence) when it does not.
"""
from __future__ import annotations

import math

from xclib.book.memoir import SHOWN, TAG

__all__ = ["record_curve", "record_reasons", "check_claims"]


def record_curve(report, tab, batches):
    """Record the seconds per batch against K (``tab``: K × oracle): the exact margin's
    time over SimpleLSH's at every K, from which K on LSH is faster, and HNSW over LSH at
    the largest K HNSW ran."""
    ratio = tab["exact"] / tab["SimpleLSH"]
    report.record("curve_batches", batches)
    report.record("curve_K_max", int(tab.index.max()))
    report.record("curve_lsh_speedup", {str(k): float(v) for k, v in ratio.items()})
    report.record("curve_lsh_speedup_Kmax", float(ratio.iloc[-1]))
    pays = ratio.index[ratio > 1]
    report.record("curve_pays_from_K", int(pays.min()) if pays.size else -1)
    report.record("curve_pays_phrase",
                  f"from the smallest K of the grid on, K = {pays.min():,}"
                  if pays.size and pays.min() == ratio.index.min() else
                  f"from K = {pays.min():,} on" if pays.size else "at no K of the grid")
    if "HNSW" in tab:
        h = tab["HNSW"].dropna()
        report.record("curve_hnsw_K", int(h.index.max()))
        report.record("curve_hnsw_over_lsh",
                      float(h.iloc[-1] / tab["SimpleLSH"][h.index.max()]))


L1_ALPHAS = (1e-6, 1e-4, 1e-3)


def record_reasons(report, reasons):
    """Record the reasons' runs (``reasons``: data, penalty, alpha, nnz, accuracy): ℓ1's
    non-zeros over ℓ2's on each real set, the accuracy at K = 10⁴ with α = 1 and 10⁻³;
    return the sentences that report them and what they show."""
    names = ("bibtex", "20newsgroups")
    ratios = []
    for n in names:
        g = reasons[reasons.data == n].set_index(["penalty", "alpha"]).nnz
        l2 = g.xs("l2").iloc[0]
        for a in L1_ALPHAS:
            ratios.append(float(g["l1", a] / l2))
            report.record(f"{TAG[n]}_l1_nnz_ratio_{a:g}", ratios[-1])
    k4 = reasons[reasons.data == "K = 10⁴"].set_index("alpha").accuracy
    report.record("k1e4_acc_alpha1", float(k4[1.0]))
    report.record("k1e4_acc_alpha1e-3", float(k4[1e-3]))
    report.record("l1_fewest_kept", min(ratios))
    v = report.values
    gap = k4[1e-3] - k4[1.0]
    lam = ("so the paper's λ = 1 holds up where a class sees few pairs per batch"
           if gap <= 0.03 else
           f"{gap:.3f} below: the small share of pairs per class at this K does not "
           "rescue λ = 1 in the paper's 25 batches")
    l1 = ("ℓ1 does not come near the paper's 0.39 on real tf-idf rows either, even at a "
          "thousand times the paper's α: at our K the truncation removes little at every α "
          "tried, and what gave the paper its ratio at 12,294 classes is not reproduced here"
          if min(ratios) > 0.6 else
          f"ℓ1 comes within reach of the paper's ratio on real tf-idf rows: it keeps as "
          f"little as {min(ratios):.2f} of ℓ2's non-zeros")
    return (f"At $K = 10^4$ α = 1 reaches {k4[1.0]:.3f} against {k4[1e-3]:.3f} with "
            f"α = 10⁻³, {lam}. ℓ1 keeps, of ℓ2's non-zeros, " + "; ".join(
                f"{SHOWN[n]}: " + ", ".join(f"{v[f'{TAG[n]}_l1_nnz_ratio_{a:g}']:.2f} "
                                            f"at α = {_pow10(a)}" for a in L1_ALPHAS)
                for n in names) + f" (the paper: 0.39 at 10⁻⁶): {l1}.")


def _pow10(a):
    """10⁻⁶ for 1e-6."""
    e = str(round(math.log10(a)))
    return "10" + e.translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


PAPER_LSH = "LSHTC1: MEMOIR-LSH 34.6% vs M-SVM 36.4%"
WHY_FAILED = "measured on the wrong side of the threshold (values under 'ours')"
WHY_RECALL = ("SimpleLSH's 64 bits rank ALOI's 999 rows by noise: every transformed "
              "row is within a few degrees of 90° from the query (aloi_cos_median), "
              "recall aloi_lsh_recall; 256 bits and 100 candidates restore most of the "
              "accuracy (see 'Why SimpleLSH misses on ALOI')")
WHY_L1 = ("measured in the Figure 1 analogue: at α ≤ 10⁻² the threshold "
          "(K/|R_t|)·α·η_t stays below 2·10⁻³, smaller than the weights a step "
          "writes, so truncation removes little; see the text under Figure 1. On real "
          "tf-idf rows (Bibtex, 20 Newsgroups) ℓ1 keeps at least l1_fewest_kept of ℓ2's "
          "non-zeros up to α = 10⁻³ ('The reasons, measured')")


def _decider(report):
    def decide(text, holds, ours, paper, why=WHY_FAILED):
        """A claim whose status is its measured outcome (why: the evidence if it fails)."""
        holds = bool(holds)
        report.claim(text, status="reproduced" if holds else "not reproduced", holds=holds,
                     ours=ours, paper=paper, why=None if holds else why)
    return decide


def _real_claims(report, decide):
    """The claims on the real sets: the inexact margins' accuracy and speed."""
    v = report.values
    gap_max = max(v["bibtex_exact_acc"] - v["bibtex_lsh_acc"],
                  v["delicious_exact_acc"] - v["delicious_lsh_acc"], v["aloi_lsh_gap"])
    report.record("real_lsh_gap_max_nontrivial", gap_max)
    decide("On real data MEMOIR-LSH's test accuracy is within 3 points of the exact-margin "
           "M-SVM's (worst of Bibtex, Delicious and ALOI, where 16 re-scored candidates "
           "are at most 11% of the classes; mean of three seeds)", gap_max <= 0.03,
           ["real_lsh_gap", "aloi_lsh_gap", "aloi_cand_share", "aloi_lsh_recall"],
           PAPER_LSH, WHY_RECALL)
    cs = "aloi_cs_accuracy" in v     # ALOI's rows of LIBLINEAR CS and HNSW, where run
    if cs:
        report.record("aloi_cs_minus_lsh", v["aloi_cs_accuracy"] - v["aloi_lsh_accuracy"])
    cs_gap = max(v["real_cs_minus_lsh_max"], v["aloi_cs_minus_lsh"] if cs else -1.0)
    decide("On real data MEMOIR-LSH's test accuracy is within 3 points of LIBLINEAR's "
           "Crammer–Singer SVM (worst of Bibtex, Delicious, 20 Newsgroups"
           + (", ALOI)" if cs else ")"), cs_gap <= 0.03,
           ["real_cs_minus_lsh", "real_cs_minus_lsh_max"] + ["aloi_cs_minus_lsh"] * cs,
           PAPER_LSH, WHY_RECALL if cs else WHY_FAILED)
    _graph_claims(report, decide)
    if "curve_hnsw_over_lsh" in v:
        decide(f"MEMOIR-LSH trains faster than with the graph oracle at K = "
               f"{v['curve_hnsw_K']} (same batches)", v["curve_hnsw_over_lsh"] > 1,
               ["curve_hnsw_over_lsh", "curve_hnsw_K"], "LSHTC1: 655s vs 1673s")


def _graph_claims(report, decide):
    """The graph (HNSW) margin's accuracy and training time on real data: ALOI (K = 1,000,
    where it runs) and 20 Newsgroups (K = 20)."""
    v = report.values
    aloi = "aloi_hnsw_accuracy" in v
    if aloi:
        report.record("aloi_hnsw_gap", v["aloi_exact_accuracy"] - v["aloi_hnsw_accuracy"])
        report.record("aloi_hnsw_over_lsh_time",
                      v["aloi_hnsw_train_s"] / v["aloi_lsh_train_s"])
    n = int(v.get("aloi_hnsw_n_seeds", 0))
    where = (f"ALOI, K = 1,000, {n} seed{'s' * (n > 1)}; 20 Newsgroups, K = 20, three seeds"
             if aloi else "20 Newsgroups, K = 20, three seeds")
    gap = max(v["news20_hnsw_gap"], v["aloi_hnsw_gap"] if aloi else -1.0)
    decide(f"The graph (HNSW) margin is within 3 points of the exact margin ({where})",
           gap <= 0.03, ["news20_hnsw_gap", "news20_hnsw_acc"]
           + ["aloi_hnsw_gap", "aloi_hnsw_recall"] * aloi,
           "LSHTC1: MEMOIR-ℓ2 34.5% vs M-SVM 36.4%")
    decide(f"MEMOIR-LSH trains faster than MEMOIR with the graph oracle ({where}; "
           "seconds of training)", v["news20_lsh_train_s"] < v["news20_hnsw_train_s"] and (
               not aloi or v["aloi_hnsw_over_lsh_time"] > 1),
           ["news20_lsh_train_s", "news20_hnsw_train_s"] + ["aloi_hnsw_over_lsh_time"] * aloi,
           "LSHTC1: 655s vs 1673s (ℓ2), 2204s (ℓ1)")


def _large_k_claims(report, decide, K_big):
    """The claims at large K: the oracle's recall, accuracy and speed, Table 3."""
    v = report.values
    decide(f"At large K (prototypes, K = {K_big}) the LSH oracle is a good inexact margin: "
           "with (K−1)/n_cand fewer inner products it returns the exact argmax for most "
           "training queries (recall@1 ≥ 0.5, three seeds)", v["big_lsh_recall"] >= 0.5,
           ["big_lsh_recall", "big_lsh_ip_factor", "top_recall_Kmax"],
           "not stated (sublinear)",
           "with Zipf-sized classes the best wrong class is often a long head row at a "
           "wide angle, which an angle ranking misses ('Why SimpleLSH misses')")
    decide(f"At large K (K = {K_big}) MEMOIR-LSH's accuracy is within 3 points of "
           "the exact-margin M-SVM's, same batches (mean of three seeds)",
           v["big_lsh_acc_gap"] <= 0.03, ["big_lsh_acc_gap", "big_lsh_acc_gap_seeds"],
           PAPER_LSH)
    decide(f"The inexact margin trains faster than the exact margin at K = "
           f"{v['curve_K_max']:,} (same batches, seconds per batch)",
           v["curve_lsh_speedup_Kmax"] > 1, ["curve_lsh_speedup_Kmax", "curve_pays_from_K"],
           "655s vs 48313s (vs LIBLINEAR M-SVM)")
    decide("MEMOIR-LSH trains faster than LIBLINEAR Crammer–Singer at K = 1000",
           v["synth1k_cs_over_lsh_time"] > 1, "synth1k_cs_over_lsh_time",
           "LSHTC1: 48313s / 655s = 74")
    decide("... and the speed comes from the inexact margin: exact-margin MEMOIR is not "
           "faster than LIBLINEAR CS (K = 1000)", v["synth1k_cs_over_exact_time"] <= 1,
           ["synth1k_cs_over_exact_time", "synth1k_exact_over_lsh_time"],
           "LSHTC1: M-SVM 48313s, MEMOIR-ℓ2 1673s, MEMOIR-LSH 655s",
           "exact-margin MEMOIR is also faster than CS: the speed comes from the "
           "stochastic solver; the oracle's own share is synth1k_exact_over_lsh_time")
    decide("... with accuracy within 3 points of LIBLINEAR CS (K = 1000)",
           v["synth1k_cs_minus_lsh_acc"] <= 0.03,
           ["synth1k_cs_minus_lsh_acc", "synth1k_exact_accuracy"], PAPER_LSH,
           "Table 3 analogue: the exact-margin M-SVM trained by the same stochastic "
           "steps is as far from CS: the gap is the solver's, not the oracle's")


def _objective_claims(report, decide, K_big):
    """The claims on the objective: ℓ1's memory, the batch size, λ, Theorem 1."""
    v = report.values
    decide("MEMOIR-ℓ1 uses less memory than ℓ2 (ratio of nnz(W), K = 1000)",
           v["synth1k_l1_over_l2_nnz"] < 1.0, ["synth1k_l1_over_l2_nnz", "l1_fewest_kept"],
           "LSHTC1: 46M / 119M = 0.39", WHY_L1)
    decide("Larger α in MEMOIR-ℓ1 trades accuracy for memory (Figure 1: α from 10⁻⁶ to "
           "10⁻² removes at least 30% of the non-zeros)", v["fig1_nnz_ratio"] < 0.7,
           ["fig1_nnz_ratio", "fig1_acc_smallest_alpha", "fig1_acc_largest_alpha"],
           "qualitative (Figure 1)", WHY_L1)
    decide("Batch size at fixed |b|·T: an intermediate batch is best (Table 2)",
           v["table2_best_factor"] not in (0.1, 1000), "table2_best_factor",
           "100√C best on LSHTC1")
    decide("Table 4's λ = 1 trains MEMOIR-ℓ2 about as well as a smaller ridge (within 3 "
           "points of α = 10⁻³, K = 1000)",
           v["l2_acc_paper_alpha"] >= v["l2_acc_our_alpha"] - 0.03,
           ["l2_acc_paper_alpha", "l2_acc_our_alpha", "k1e4_acc_alpha1",
            "k1e4_acc_alpha1e-3"], "λ = 1 in Table 4",
           "the summed batch update against the ball of radius 1/√α: derivation in 'The "
           "summed batch update', table in 'α of MEMOIR-ℓ2'; at K = 10⁴, where a class sees "
           "fewer pairs per batch, in 'The reasons, measured'")
    decide("Theorem 1's step from the exact to the inexact margin, as printed: "
           "ℓ_ρ(m) ≤ ℓ_ρ(1+ε)(m̄) (at the counterexample m̄ = 0, m = −ερ)",
           v["th_counter_exact"] <= v["th_counter_paper"] + 1e-12,
           ["th_counter_exact", "th_counter_paper"], "Theorem 1 (proof, last step)",
           "the step needs the factor 1 + ε: ℓ_ρ(m) ≤ (1+ε)·ℓ_ρ(1+ε)(m̄); corrected in "
           "'The inexact margin', checked on the trained model ('The margin error')")
    decide("Theorem 1, corrected: R̂_ρ(m) ≤ (1+ε)·R̂_ρ(1+ε)(m̄) on a trained model's "
           f"training pairs (K = {K_big}, ρ = 1)",
           v["th_exact_risk"] <= v["th_corrected"] + 1e-12,
           ["th_exact_risk", "th_corrected", "th_paper", "th_eps"],
           "Theorem 1 (with the factor)")


def check_claims(report, K_big):
    """Every claim of the chapter, its status from the recorded values (``K_big``: the K
    of the large-K runs)."""
    decide = _decider(report)
    _real_claims(report, decide)
    _large_k_claims(report, decide, K_big)
    _objective_claims(report, decide, K_big)
    report.claim("MEMOIR at 12k–100k classes is competitive with OVR and PD-Sparse "
                 "(Table 3)", status="not testable",
                 paper="LSHTC1, DMOZ, WIKI: see Table 3",
                 why="the LSHTC1, DMOZ and WIKI datasets are not available here")
