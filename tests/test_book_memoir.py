"""Unit tests of the MEMOIR chapter's plumbing: xclib.book.memoir, its figures and
claims modules (tiny data, no real set)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from xclib.book.memoir import claims as memoir_claims  # noqa: E402
from xclib.book.memoir import figures as memoir_figures  # noqa: E402
from xclib.book.memoir import (buys_table, liblinear_baselines, liblinear_fit,  # noqa: E402
                               lsh_squeeze, paper_table2, paper_table3, protocol_card,
                               prototype_set, query_rows, real_summary, record_aloi,
                               record_big, record_label_metrics, record_oracles,
                               record_real, record_table3, summarise_aloi, timed_query,
                               validation_split, warned_phrase)
from xclib.book.report import Report  # noqa: E402
from xclib.mips import ExactMIPS, SimpleLSH  # noqa: E402


@pytest.fixture(scope="module")
def proto():
    return prototype_set(8, 300, 60, seed=1)


def test_prototype_set_is_seeded_and_tests_only_seen_classes(proto):
    X, y, Xt, yt = proto
    again = prototype_set(8, 300, 60, seed=1)
    assert X.shape == (300, 1000) and Xt.shape[0] <= 60
    assert np.isin(yt, y).all()
    assert np.array_equal(y, again[1]) and (X != again[0]).nnz == 0
    assert not np.array_equal(y, prototype_set(8, 300, 60, seed=2)[1])


def test_validation_split_is_seeded_disjoint_and_keeps_seen_classes(proto):
    X, y = proto[0], proto[1]
    Xa, ya, Xv, yv = validation_split(X, y, frac=0.2, seed=3)
    assert Xa.shape[0] == 240 and Xv.shape[0] <= 60
    assert np.isin(yv, ya).all()
    again = validation_split(X, y, frac=0.2, seed=3)
    assert np.array_equal(ya, again[1]) and np.array_equal(yv, again[3])
    # the rows are those of the set, not copies of one another
    rows = {X[i].indices.tobytes() for i in range(X.shape[0])}
    assert {Xv[i].indices.tobytes() for i in range(Xv.shape[0])} <= rows


def test_protocol_card_lists_the_paper_then_ours_with_epochs(proto):
    card = protocol_card([("prototypes K = {K:,}", proto, 10, "α = 10⁻³", 1)],
                         batches=400, seeds=[0, 1, 2])
    assert len(card) == 6 and card.index[0] == ("paper", "LSHTC1")
    ours = card.loc[("this page", "prototypes K = 8")]
    b = int(np.ceil(100 * np.sqrt(8)))
    assert ours["batches T"] == 10 and ours["seeds"] == 1
    assert ours["epochs T·|b|/N"] == f"{10 * b / 300:.1f}"


def test_liblinear_fit_and_baselines(proto):
    X, y, Xt, yt = proto
    r = liblinear_fit(X, y, Xt, yt, "-s 4 -c 1")
    assert 0.5 < r["accuracy"] <= 1 and r["hinge"] >= 0 and r["train_s"] >= 0
    assert r["top5"].shape == (Xt.shape[0], 5) and np.isin(r["top5"], y).all()
    base, top5 = liblinear_baselines(
        {"p": proto}, {"CS": "-s 4 -c 1", "LIBLINEAR OVR": "-s 1 -c 10"}, ovr_max_K=5)
    assert set(base) == {("p", "majority"), ("p", "CS")}      # 8 classes > 5: no OVR
    assert set(top5) == {("p", "CS")} and "top5" not in base["p", "CS"]
    values, counts = np.unique(y, return_counts=True)
    assert base["p", "majority"]["accuracy"] == np.mean(yt == values[counts.argmax()])


SETS = ("bibtex", "delicious", "20newsgroups")


def _runs():
    """Two sets, two oracles, two seeds of fake MEMOIR histories."""
    rows = []
    for name in SETS:
        for label, acc in (("exact", 0.6), ("SimpleLSH", 0.5)):
            for seed in (0, 1):
                a = acc + 0.01 * seed
                rows.append(dict(dataset=name, oracle=label, seed=seed,
                                 batches=np.array([50, 100]), hinge=np.array([1.2, 0.8]),
                                 time=np.array([1.0, 2.0]), accuracy=np.array([0.1, a]),
                                 train_accuracy=a + 0.1, macro_f1=a / 2,
                                 top5=np.zeros((3, 5), int), train_s=2.0 + seed,
                                 inner_products=100))
    return pd.DataFrame(rows)


def _base():
    base = {}
    for name in SETS:
        base[name, "majority"] = dict(accuracy=0.1)
        base[name, "LIBLINEAR CS"] = dict(accuracy=0.58, macro_f1=0.3, train_s=5.0,
                                          predict_s=0.1, hinge=0.7)
    return base


def test_real_summary_and_record_real():
    runs, base = _runs(), _base()
    table = real_summary(runs, base)
    assert table.loc[("delicious", "exact"), "accuracy"] == pytest.approx(0.605)
    assert table.loc[("delicious", "SimpleLSH"), "spread"] == pytest.approx(0.01)
    assert table.loc[("20newsgroups", "LIBLINEAR CS"), "hinge"] == 0.7
    report = Report(glue=False)
    runs = pd.concat([runs, runs[runs.oracle == "exact"].assign(oracle="HNSW")])
    record_real(report, runs, base)
    v = report.values
    assert v["delicious_lsh_acc_seeds"] == [0.5, 0.51]
    assert v["real_lsh_gap"] == {"bibtex": pytest.approx(0.1),
                                 "delicious": pytest.approx(0.1),
                                 "news20": pytest.approx(0.1)}
    assert v["bibtex_lsh_over_exact_time"] == 1.0
    assert v["real_cs_minus_lsh_max"] == pytest.approx(0.58 - 0.505)
    assert v["delicious_cs_train_s"] == 5.0 and v["news20_hnsw_gap"] == 0
    assert v["delicious_fit_phrase"].startswith("yet the exact margin")
    assert v["real_warn_phrase"].startswith("no run")  # every final hinge is 0.8
    assert warned_phrase({"a runs": [1.2, 0.9], "b runs": [0.5], "c runs": [1.0, 1.1]}) \
        == "1 of the 2 a runs and all 2 c runs"
    assert warned_phrase({"a": [1.0], "b": [2.0], "c": [1.5, 0.2]}) \
        == "the a, the b and 1 of the 2 c"


def test_buys_table_times_to_a_common_target():
    runs, base = _runs(), _base()
    base["delicious", "LIBLINEAR CS"]["hinge"] = 2.0     # above the target: never
    table = buys_table(runs, base)
    row = table.loc[("delicious", "MEMOIR, exact margin")]
    assert row["target hinge"] == pytest.approx(1.1 * 0.8)
    assert row["s to target"] == 2.0 and row["accuracy"] == pytest.approx(0.605)
    assert np.isnan(table.loc[("delicious", "LIBLINEAR CS"), "s to target"])
    assert table.loc[("20newsgroups", "LIBLINEAR CS"), "s to target"] == 5.0
    assert table.loc[("20newsgroups", "majority class"), "accuracy"] == 0.1


def test_record_label_metrics_and_the_p5_gap():
    labels = {"bibtex": np.array([[1, 0, 1], [0, 1, 0]])}
    keys = ("P@1", "P@3", "P@5", "nDCG@3", "nDCG@5")
    table = pd.DataFrame(
        [dict(dataset="bibtex", model=m, **dict.fromkeys(keys, p))
         for m, p in (("MEMOIR, exact", 0.5), ("MEMOIR, SimpleLSH", 0.4))]
    ).set_index(["dataset", "model"])
    report = Report(glue=False)
    record_label_metrics(report, labels, table)
    assert report.values["bibtex_test_labels_per_row"] == 1.5
    assert report.values["bibtex_lsh_ndcg5"] == 0.4
    assert report.values["ml_lsh_p5_gap_max"] == pytest.approx(0.1)
    assert report.values["ml_lsh_p5_phrase"].endswith("by at most 0.100 on these two sets")


def test_summarise_and_record_aloi():
    runs = pd.DataFrame([dict(model=m, seed=s, accuracy=a + 0.02 * s, macro_f1=0.1,
                              train_s=1.0, predict_s=0.1, memory_MB=1.0,
                              ip_per_query=10.0, recall=r, coef=None, hinge=2 * r)
                         for m, a, r in (("exact", 0.8, 1.0), ("SimpleLSH", 0.6, 0.3),
                                         ("wide", 0.7, 0.6)) for s in (0, 1)])
    aloi = summarise_aloi(runs)
    assert aloi.loc["SimpleLSH", "spread"] == pytest.approx(0.02)
    report = Report(glue=False)
    record_aloi(report, aloi, runs, "wide", 1000)
    v = report.values
    assert v["aloi_lsh256_recall"] == 0.6 and v["aloi_exact_accuracy"] == 0.81
    assert v["aloi_lsh_gap"] == pytest.approx(0.2)
    assert v["aloi_lsh_acc_seeds"] == [0.6, 0.62]
    assert v["aloi_cand_share"] == 16 / 999
    assert v["aloi_warn_phrase"] == "all 2 exact runs and all 2 wide runs"


def test_lsh_squeeze_sees_rows_of_small_norm_near_90_degrees():
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    W = rng.standard_normal((50, 6))
    W[1:] *= 0.01                          # one long row, the others tiny
    got = lsh_squeeze(W, sp.csr_matrix(rng.standard_normal((20, 6))))
    assert got["norm_ratio"] < 0.05
    assert got["cos_median"] < 0.05 and got["cos_median"] <= got["cos_p99"] <= 1


def test_query_rows_exact_recall_and_counts():
    from xclib.memoir import make_prototype_data

    X, y = make_prototype_data(200, 50, 40, random_state=0)
    W = np.random.default_rng(1).standard_normal((40, 50))
    yq = np.searchsorted(np.unique(y), y) % 40
    r, s, seconds, ip = timed_query(ExactMIPS().build(W), X, yq)
    assert ip == 200 * 39 and seconds >= 0
    # a set of K = 50 classes whose fit saw 40: the work is counted for all 50
    rows = {row["oracle"]: row for row in query_rows(
        50, W, X, yq, {"exact again": ExactMIPS(), "lsh": SimpleLSH(n_bits=64, random_state=0)})}
    assert rows["exact again"]["recall"] == 1.0 and rows["exact again"]["mean_eps"] == 0
    assert rows["exact again"]["ip_per_query"] == 39            # measured: 40 rows
    assert rows["exact (numba)"]["ip_per_query"] == 49 and rows["lsh"]["K"] == 50
    assert rows["lsh"]["hamming_per_query"] == 50 and rows["lsh"]["ip_per_query"] < 39
    assert 0 <= rows["lsh"]["recall"] <= 1 and rows["lsh"]["mean_eps"] >= 0


def test_record_oracles():
    df = pd.DataFrame([dict(K=K, oracle=o, recall=rec, ip_per_query=ip, us_per_query=us,
                            hamming_per_query=0)
                       for K in (100, 1000)
                       for o, rec, ip, us in (("exact, batched product", 1.0, K - 1, 10.0),
                                              ("SimpleLSH 64 bits", 0.5, 16, 5.0),
                                              ("SimpleLSH 256 bits", 0.7, 16, 8.0),
                                              ("SimpleLSH 64 + top norms", 0.9, 20, 2.0),
                                              ("HNSW ef=100", 0.95, 50, 20.0))
                       if not (K == 1000 and o.startswith("HNSW"))])
    report = Report(glue=False)
    record_oracles(report, df, query_nnz=10.0, n_features=100)
    v = report.values
    assert v["oracle_K_max"] == 1000 and v["lsh_ip_factor_Kmax"] == 999 / 16
    assert v["top_speedup_vs_batched_Kmax"] == 5.0 and v["hnsw_K"] == 100
    assert v["hnsw_madd_ratio"] == pytest.approx((49 * 100 + 10) / (99 * 10))
    assert v["hnsw_over_batched_time"] == 2.0


def test_record_big_and_table3():
    eps = [np.array([0.0, 0.0, 0.5, 1.0]), np.array([0.0, 0.2])]
    runs = pd.DataFrame(
        [dict(model="MEMOIR-LSH", seed=s, inner_products=10, accuracy=0.5 + s / 10,
              macro_f1=0.2, eps=e) for s, e in zip((0, 1), eps)]
        + [dict(model="M-SVM (exact margin)", seed=s, inner_products=1000, accuracy=0.7,
                macro_f1=0.3, eps=np.zeros(0)) for s in (0, 1)])
    big = runs.groupby("model", sort=False)[["inner_products", "accuracy",
                                             "macro_f1"]].mean()
    report = Report(glue=False)
    got = record_big(report, runs, big, 500, seed=0)
    v = report.values
    assert np.array_equal(got, eps[0]) and v["eps_max"] == 1.0
    assert v["big_lsh_ip_factor"] == 100 and v["big_lsh_recall"] == pytest.approx(0.5)
    assert v["big_lsh_acc_gap_seeds"] == pytest.approx([0.2, 0.1])
    t3 = pd.DataFrame({"MEMOIR-LSH": dict(train_s=1.0, accuracy=0.5, macro_f1=0.1, nnz_W=10),
                       "MEMOIR-ℓ1-LSH": dict(train_s=1.0, accuracy=0.5, macro_f1=0.1,
                                             nnz_W=4),
                       "M-SVM (exact margin)": dict(train_s=2.0, accuracy=0.6,
                                                    macro_f1=0.1, nnz_W=10),
                       "LIBLINEAR CS": dict(train_s=8.0, accuracy=0.7, macro_f1=0.2,
                                            nnz_W=np.nan)}).T
    record_table3(report, t3)
    assert v["synth1k_cs_over_lsh_time"] == 8 and v["synth1k_cs_over_exact_time"] == 4
    assert v["synth1k_l1_over_l2_nnz"] == 0.4
    assert v["synth1k_cs_minus_lsh_acc"] == pytest.approx(0.2)


def test_paper_tables():
    assert paper_table3().loc["accuracy", "MEMOIR-LSH"] == "34.6%"
    assert list(paper_table2().loc["T"]) == [25000, 2500, 250, 25, 3]


def test_record_curve_and_reasons():
    tab = pd.DataFrame({"exact": [1.0, 4.0], "SimpleLSH": [2.0, 2.0],
                        "HNSW": [3.0, np.nan]}, index=pd.Index([100, 1000], name="K"))
    report = Report(glue=False)
    memoir_claims.record_curve(report, tab, 10)
    v = report.values
    assert v["curve_lsh_speedup"] == {"100": 0.5, "1000": 2.0}
    assert v["curve_pays_from_K"] == 1000 and v["curve_pays_phrase"] == "from K = 1,000 on"
    assert v["curve_hnsw_K"] == 100 and v["curve_hnsw_over_lsh"] == 1.5
    reasons = pd.DataFrame(
        [dict(data="K = 10⁴", penalty="l2", alpha=a, nnz=1, accuracy=acc)
         for a, acc in ((1.0, 0.1), (1e-3, 0.6))]
        + [dict(data=n, penalty=p, alpha=a, nnz=z, accuracy=0.5)
           for n in ("bibtex", "20newsgroups")
           for p, a, z in (("l2", 1e-3, 100), ("l1", 1e-6, 90), ("l1", 1e-4, 50),
                           ("l1", 1e-3, 10))])
    text = memoir_claims.record_reasons(report, reasons)
    assert v["news20_l1_nnz_ratio_0.0001"] == 0.5 and v["k1e4_acc_alpha1"] == 0.1
    assert "0.90 at α = 10⁻⁶" in text and text.startswith("At $K = 10^4$ α = 1 reaches 0.100")
    assert v["l1_fewest_kept"] == 0.1 and "0.500 below" in text
    assert "it keeps as little as 0.10 of ℓ2's non-zeros" in text  # at α = 10⁻³
    reasons.loc[reasons.penalty == "l1", "nnz"] = 95   # ℓ1 removes little
    reasons.loc[reasons.alpha == 1.0, "accuracy"] = 0.59  # λ = 1 within 3 points
    text = memoir_claims.record_reasons(report, reasons)
    assert "does not come near the paper's 0.39" in text and "holds up" in text


def _passing_values():
    v = dict(bibtex_exact_acc=0.5, bibtex_lsh_acc=0.49, delicious_exact_acc=0.3,
             delicious_lsh_acc=0.3, aloi_lsh_gap=0.01, real_lsh_gap={}, aloi_cand_share=0.01,
             aloi_lsh_recall=0.9, real_cs_minus_lsh={}, real_cs_minus_lsh_max=0.0,
             news20_hnsw_gap=0.0, news20_hnsw_acc=0.8, news20_lsh_train_s=1.0,
             news20_hnsw_train_s=2.0, big_lsh_recall=0.6, big_lsh_ip_factor=60,
             top_recall_Kmax=0.9, big_lsh_acc_gap=0.0, big_lsh_acc_gap_seeds=[0.0],
             curve_K_max=1000, curve_lsh_speedup_Kmax=2.0, curve_pays_from_K=100,
             synth1k_cs_over_lsh_time=3.0, synth1k_cs_over_exact_time=0.5,
             synth1k_exact_over_lsh_time=2.0, synth1k_cs_minus_lsh_acc=0.0,
             synth1k_exact_accuracy=0.5, synth1k_l1_over_l2_nnz=0.5, fig1_nnz_ratio=0.5,
             fig1_acc_smallest_alpha=0.5, fig1_acc_largest_alpha=0.4,
             table2_best_factor=100, l2_acc_paper_alpha=0.5, l2_acc_our_alpha=0.5,
             k1e4_acc_alpha1=0.5, **{"k1e4_acc_alpha1e-3": 0.5}, l1_fewest_kept=0.5,
             th_counter_exact=1.0, th_counter_paper=1.0, th_exact_risk=0.1,
             th_corrected=0.2, th_paper=0.15, th_eps=0.1)
    report = Report(glue=False)
    for key, value in v.items():
        report.record(key, value)
    return report


def test_check_claims_statuses_follow_the_values():
    report = _passing_values()
    memoir_claims.check_claims(report, 3000)
    assert report.counts() == {"reproduced": 16, "not reproduced": 0, "not testable": 1}
    assert report.values["real_lsh_gap_max_nontrivial"] == pytest.approx(0.01)
    report.check()
    report = _passing_values()
    report.record("aloi_lsh_gap", 0.2)                   # the inexact margin fails on ALOI
    report.record("curve_hnsw_over_lsh", 0.5)            # and HNSW wins at large K
    report.record("curve_hnsw_K", 10000)
    memoir_claims.check_claims(report, 3000)
    failed = [c for c in report.claims if c["status"] == "not reproduced"]
    assert len(failed) == 2 and "ALOI" in failed[0]["why"]
    assert len(report.claims) == 18
    report.check()


def test_figures_draw_and_save(tmp_path):
    runs, base = _runs(), _base()
    fig = memoir_figures.plot_convergence(runs, base, dict.fromkeys(SETS, 1e-3),
                                          dict(zip(SETS, (146, 352, 20))), 100,
                                          path=tmp_path / "c.png")
    assert (tmp_path / "c.png").exists() and len(fig.axes) == 6
    assert fig.axes[1].get_title() == "delicious (K = 352, α = 0.001)"
    curve = pd.DataFrame([dict(K=K, oracle=o, s_per_batch=0.1 * K)
                          for K in (10, 100) for o in ("exact", "SimpleLSH")])
    assert len(memoir_figures.plot_time_vs_K(curve).axes[0].lines) == 2
    eps = np.array([0.0, 0.1, 0.3])
    title = memoir_figures.plot_margin_error(eps, 50).axes[0].get_title()
    assert "(ε = 0 for 33% of 3 queries)" in title
    oracles = pd.DataFrame([dict(K=K, oracle=o, recall=1.0, ip_per_query=K,
                                 us_per_query=1.0, hamming_per_query=K)
                            for K in (10, 100) for o in ("exact", "SimpleLSH 64 bits")])
    assert len(memoir_figures.plot_oracles(oracles).axes[1].lines) == 3
    fig1 = pd.DataFrame(dict(memory_MB=[1, 2], accuracy=[0.5, 0.6], macro_f1=[0.2, 0.3]),
                        index=pd.Index([1e-6, 1e-2], name="alpha"))
    assert len(memoir_figures.plot_fig1(fig1, "t").axes[0].texts) == 2
    import matplotlib.pyplot as plt

    plt.close("all")
