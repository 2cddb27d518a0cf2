"""The DS-MLR chapter's tables, records and claims (xclib.book.dsmlr), on tiny inputs."""
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest
import scipy.sparse as sp

from xclib.book import dsmlr as page
from xclib.book.report import Report

matplotlib.use("Agg")


def _fit(time, objective, epoch=None, **extra):
    history = {"time": list(time), "objective": list(objective),
               "epoch": list(epoch or range(1, len(time) + 1)), **extra}
    return SimpleNamespace(history_=history)


def test_time_to_is_the_first_time_below_the_target_or_nan():
    assert page.time_to([1, 2, 3], [5.0, 2.0, 1.0], 2.0) == 2
    assert np.isnan(page.time_to([1, 2, 3], [5.0, 2.0, 1.0], 0.5))


def _clef_runs(opt=1.0):
    runs = {"clef": {"L-BFGS": _fit([0.1, 0.2], [1.5, 1.0]),
                     "DS-MLR sync": _fit([1, 2, 3, 4], [1.5, 1.02, 1.005, 1.0005]),
                     "DS-MLR async": _fit([1, 2], [1.2, 1.1]),
                     "LC": _fit([0.5, 1.5, 9.0], [1.3, 1.009, 1.0],
                                passes=[3, 30, 200])}}
    runs["news20"] = {k: v for k, v in runs["clef"].items() if k != "LC"}
    return runs


def test_record_fig4_times_gaps_and_the_equal_work_comparison():
    report = Report(glue=False)
    runs = _clef_runs()
    y = np.arange(4)
    data = {"clef": (None, y), "news20": (None, y)}
    page.record_fig4(report, runs, {"clef": 1.0, "news20": 1.0}, data, epochs=20,
                     oracle=SimpleNamespace(objective_=1.001))
    v = report.values
    assert v["clef_sync_final_gap"] == pytest.approx(5e-4)
    assert v["clef_sync_time_1pct"] == 3 and v["clef_sync_time_01pct"] == 4
    assert v["clef_sync_epochs_1pct"] == 3 and v["clef_async_time_1pct"] == "nan"
    assert v["fig4_epoch_seconds"]["news20_sync"] == [1.0, 1.0, 1.0, 1.0]
    assert v["clef_lc_time_1pct"] == 1.5 and v["clef_lc_passes_1pct"] == 30
    # DS-MLR ends at 4 s: LC's last objective by then is 1.009; with 60 units of work too
    assert v["clef_lc_gap_at_dsmlr_end"] == pytest.approx(0.009)
    assert v["clef_sync_work"] == 60 and v["clef_lc_gap_at_equal_work"] == pytest.approx(0.009)
    assert v["clef_oracle_vs_lbfgs"] == pytest.approx(1e-3)
    fig = page.plot_fig4(runs, {"clef": 1.0, "news20": 1.0}, data,
                         {"clef": 1e-3, "news20": 1e-4}, 2)
    assert len(fig.axes) == 4


def test_b_update_records_mean_spread_and_the_per_seed_verdict():
    report = Report(glue=False)
    runs = {"exact": [{"objective": [2.0, 1.1]}, {"objective": [2.0, 1.3]}],
            "stochastic": [{"objective": [2.0, 1.2]}, {"objective": [2.0, 1.2]}]}
    page.record_b_update(report, runs, 1.0)
    v = report.values
    assert v["exact_b_gap"] == pytest.approx(0.2)
    assert v["exact_b_gap_spread"] == pytest.approx(0.2)
    assert v["stochastic_b_gap_spread"] == pytest.approx(0.0)
    assert v["exact_b_wins_every_seed"] is False  # the second seed loses


def test_what_it_buys_scores_each_fit_on_the_labels_it_knows():
    Xt = sp.csr_matrix(np.eye(3))
    yt = np.array([0, 1, 5])  # label 5 never seen in training: not scored
    est = _fit([1, 2], [2.0, 1.005])
    est.coef_, est.classes_ = np.eye(3)[:2], np.array([0, 1])
    buy = page.what_it_buys({"clef": {"L-BFGS": est}}, {"clef": (None, None, Xt, yt)},
                            {"clef": 1.0})
    row = buy.loc[("clef", "L-BFGS")]
    assert row["test accuracy"] == 1.0 and row["s to 1 %"] == 2
    assert np.isnan(row["s to 0.1 %"]) and row["final gap"] == pytest.approx(0.005)


def test_scaling_records_speedups_and_whether_the_backends_agree():
    seconds = {("serial", "sync", 1): [4.0, 4.0], ("serial", "sync", 2): [2.0, 2.0],
               ("threads", "sync", 1): [4.0], ("threads", "async", 1): [2.0],
               ("threads", "sync", 2): [1.0], ("threads", "async", 2): [1.0],
               ("dask", "sync", 1): [5.0], ("dask", "sync", 2): [3.0],
               ("dask", "async", 2): [2.5]}
    w = np.ones((2, 2))
    models = {key: SimpleNamespace(coef_=w, history_={"objective": [1.0]})
              for key in seconds}
    models["threads", "async", 2] = SimpleNamespace(coef_=w, history_={"objective": [1.1]})
    table = page.scaling_table(seconds, 10, 3)
    assert table.loc[("serial", "sync", 2), "(row, class) updates per s per worker"] == 7.5
    report = Report(glue=False)
    T = page.record_scaling(report, table, models, seconds)
    v = report.values
    assert T["threads", "sync", 2] == 1.0
    assert v["speedup_threads"] == 4 and v["blocking_gain"] == 2 and v["parallel_gain"] == 2
    assert v["dask_overhead_per_inner_epoch"] == 0.5
    assert v["dask_async_vs_threads_objective"] == pytest.approx(1 / 11)
    assert v["backends_identical"] is True
    assert v["scaling_epoch_seconds"]["serial_sync_P2"] == [2.0, 2.0]
    models["dask", "sync", 2] = SimpleNamespace(coef_=2 * w)
    page.record_scaling(report, table, models, seconds)
    assert report.values["backends_identical"] is False


def test_external_record_reads_the_table_and_the_model_check_calibrates_on_p1(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "run.md").write_text(
        "# A run\n\ntext\n- Machine: 16 cores\n\n| schedule | P = 1 | 2 | 16 | speed-up |\n"
        "|---|---|---|---|---|\n| sync | 32 | 16 | 2 | 16× |\n| async | 8 | 4 | 1 | 8× |\n")
    ext = page.external_record("m/run.md", roots=[tmp_path])
    assert ext["P"] == [1, 2, 16] and ext["seconds"]["async"] == [8.0, 4.0, 1.0]
    assert ext["header"] == "> # A run\n> - Machine: 16 cores"
    assert page.external_record("m/none.md", roots=[tmp_path])["file"] is None
    rng = np.random.default_rng(0)
    there = {s: dict(zip(ext["P"], t)) for s, t in ext["seconds"].items()}
    rows = page.model_check(there, 1000, 20, 50, rng, "synthetic, 16 cores")
    assert len(rows) == 6
    # one worker: the model is calibrated there, so it reproduces the measured time
    assert rows[0]["simulated_s"] == pytest.approx(32.0, rel=0.01)
    report = Report(glue=False)
    table = page.record_ext16(report, rows)
    assert report.values["ext16_sync_measured_speedup"] == 16
    assert table.loc[("synthetic, 16 cores", "async", 2), "measured speed-up"] == 2


def test_simulation_records_speedups_and_the_link_floor():
    rng = np.random.default_rng(0)
    size = dict(N=1000, D=500, K=100, nnz_row=10)
    sim = page.simulate(size, [1, 2, 16, 64], 1e-9, 1e-9, rng, bandwidth=1e9, latency=1e-6)
    assert set(sim.method) == {"sync", "async", "lbfgs"} and len(sim) == 12
    report = Report(glue=False)
    table = page.record_simulation(report, sim, 1e9)
    v = report.values
    assert v["sim_async64_link_bound_s"] == pytest.approx(v["sim_async64_GB"])
    # the simulated iteration is never shorter than its bytes over the bandwidth
    assert 0 < v["sim_async64_link_share"] <= 1 + 1e-9
    assert table.shape == (4, 6)
    assert len(page.plot_simulation(sim, 1e9).axes) == 3


def test_memory_tables_fall_with_p():
    rng = np.random.default_rng(0)
    X = sp.random(40, 30, density=0.2, format="csr", random_state=0)
    y = rng.integers(4, size=40)
    assert page.csr_bytes(X) == X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    blocks = page.block_memory(X, y, 4, [1, 2, 4], 0)
    total = blocks["largest data block (MB)"] + blocks["DS-MLR W block + b (MB)"]
    assert total.iloc[0] > total.iloc[1] > total.iloc[2]
    assert blocks.loc[2, "ND/P (MB)"] == pytest.approx(page.csr_bytes(X) / 2e6)
    workers = page.worker_memory({1: 4e6, 2: 2e6, 4: 1e6}, X, 4)
    report = Report(glue=False)
    page.record_memory(report, blocks, workers)
    assert report.values["dask_mem_ratio_P4"] == pytest.approx(0.25)
    assert report.values["dask_mem_ratio_P2"] == pytest.approx(0.5)
    assert report.values["mem_ratio_P2"] < 1


def test_claims_follow_the_recorded_values():
    v = dict(news20_sync_final_gap=0.01, clef_sync_final_gap=0.01, bibtex_sync_final_gap=0.01,
             news20_async_final_gap=0.01, identity_gap=0.0, news20_lbfgs_time_01pct=1.0,
             news20_sync_time_01pct=np.nan, clef_lbfgs_time_01pct=1.0,
             clef_sync_time_01pct=2.0, clef_lc_gap_at_equal_work=0.005, clef_sync_work=60.0,
             clef_lc_passes_1pct=30, exact_b_wins_every_seed=True, exact_b_gap=0.0,
             exact_b_gap_spread=0.0, stochastic_b_gap=0.0, stochastic_b_gap_spread=0.0,
             others_cores=1.0, n_cpus=2, speedup_threads=1.5, speedup_threads_async=1.5,
             backends_identical=True, dask_mem_ratio_P2=0.5, dask_mem_ratio_P4=0.3,
             dask_mem_vs_formula_P4=1.5, dask_async_vs_threads_objective=0.0,
             news20_top_quarter=0.95, bibtex_top_quarter=0.5, sim_speedup16_async=10.0,
             sim_speedup16_sync=8.0, sim_async64_link_bound_s=1.0)
    report = Report(glue=False)
    for k, x in v.items():
        report.record(k, x)
    page.add_claims(report, 20, ["news20", "bibtex"])
    by_text = {c["claim"]: c for c in report.claims}
    lc = next(c for t, c in by_text.items() if "same work" in t)
    assert lc["status"] == "not reproduced" and "LC is 0.50%" in lc["why"]
    two = next(c for t, c in by_text.items() if "Two workers" in t)
    assert two["status"] == "not testable"  # one other core busy of two: none free
    bib = next(c for t, c in by_text.items() if t.startswith("bibtex: the top K/4"))
    assert bib["status"] == "not reproduced" and bib["why"] == page.claims.TOPK_WHY
    assert not any(page.claims.TOPK_WHY == c["why"] for c in report.claims
                   if c["claim"].startswith("news20"))
    report.check()  # every outcome agrees with its status


def test_protocol_card_and_rank_figure():
    rng = np.random.default_rng(0)
    X, y = sp.csr_matrix(rng.normal(size=(20, 3))), np.arange(20) % 3
    data = {"clef": (X, y, X, y)}
    card = page.protocol_card(data, {"clef": 1e-3},
                              dict(fig4_sets=["clef"], epochs=5, seeds=[0]), 7)
    assert card.loc["ours N, D, K", "clef"] == "20, 3, 3"
    assert card.loc["ours runs", "clef"] == "L-BFGS, sync, async, LC"
    assert card.loc["seeds", "clef"] == 7
    perfect = SimpleNamespace(coef_=np.eye(3), classes_=np.arange(3))
    wrong = SimpleNamespace(coef_=-np.eye(3), classes_=np.arange(3))
    report = Report(glue=False)
    page.rank_figure(report, {"clef": [(wrong, "--", "DS-MLR, 5 epochs"),
                                       (perfect, "-", "DS-MLR, end")]},
                     {"clef": (None, None, np.eye(3)[y], y)})
    assert report.values["clef_test_top1"] == 1.0
    assert report.values["clef_top_quarter_5ep"] == 0.0
