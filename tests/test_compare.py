"""Unit tests of xclib.book.compare: the plumbing of the closing chapter's comparison."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import xclib
from xclib.book.compare import (PROB_FLOOR, epochs_for, load_synthetic, loglog_slope,
                                objective_history, prob_log_loss, regularised_objective,
                                run_lbfgs, run_traced, time_to_target, traced,
                                tune_learning_rate, validation_split)


@pytest.fixture(scope="module")
def data():
    return load_synthetic(600, 200, 50, 8, random_state=0, zipf_exponent=0.0)


def test_time_to_target_first_hit_and_never():
    s = [0.0, 1.0, 2.0, 3.0]
    assert time_to_target(s, [5.0, 3.0, 1.0, 0.5], 1.0) == 2.0
    assert time_to_target(s, [5.0, 3.0, 2.0, 1.5], 1.0) == np.inf
    assert time_to_target(s, [np.nan, 0.5, 0.4, 0.3], 1.0) == 1.0  # NaN is no hit


def test_loglog_slope_recovers_power_law():
    K = np.array([1e3, 1e4, 1e5])
    assert loglog_slope(K, 3.0 * K**0.7) == pytest.approx(0.7)
    assert loglog_slope(K, np.full(3, 2.0)) == pytest.approx(0.0, abs=1e-12)


def test_validation_split_is_seeded_and_keeps_seen_classes(data):
    a = validation_split(data["X"], data["y"], 0.1, random_state=3)
    b = validation_split(data["X"], data["y"], 0.1, random_state=3)
    assert a[0].shape[0] + a[2].shape[0] <= data["X"].shape[0]
    assert abs(a[2].shape[0] - 60) <= 2
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[3], b[3])
    assert np.isin(a[3], a[1]).all()


def test_prob_log_loss_floors_zero_probabilities():
    assert prob_log_loss([1.0, 1.0]) == 0.0
    assert prob_log_loss([0.0]) == pytest.approx(-np.log(PROB_FLOOR))
    assert prob_log_loss([0.5, 0.25]) == pytest.approx(np.log(8) / 2)


def test_epochs_for_fills_budget_within_bounds():
    assert epochs_for(1.0, 0.1, 40) == 10
    assert epochs_for(1.0, 0.001, 40) == 40
    assert epochs_for(1.0, 5.0, 40) == 1
    assert epochs_for(1.0, np.nan, 40) == 40


def test_traced_keeps_parameters_and_pickles():
    est = xclib.ImplicitSGD(alpha=1e-3, n_epochs=3, random_state=1)
    t = traced(est)
    assert isinstance(t, xclib.ImplicitSGD)
    assert t.get_params() == est.get_params()
    assert type(pickle.loads(pickle.dumps(t))) is type(t)


def test_objective_history_matches_the_objective_of_the_weights(data):
    alpha = 1e-3
    est = traced(xclib.ImplicitSGD(alpha=alpha, n_epochs=4, tol=None, random_state=0))
    est.fit(data["X"], data["y"])
    obj = objective_history(est, alpha)
    assert obj.shape == (4,) and len(est.sq_norms_) == 5
    y = np.searchsorted(est.classes_, data["y"])
    final = regularised_objective(est.coef_, data["X"], y, alpha, est.intercept_)
    assert final == pytest.approx(obj[-1], rel=1e-9)  # coef_: the last epoch's weights


def test_run_traced_starts_at_log_k_and_records_every_epoch(data):
    tr = run_traced("IS", xclib.ImportanceSampling(alpha=1e-3, n_epochs=3, tol=None,
                                                   random_state=0), data, 1e-3)
    K = np.unique(data["y"]).size
    assert tr.seconds.shape == tr.objective.shape == tr.test_loss.shape == (4,)
    assert tr.objective[0] == pytest.approx(np.log(K))
    assert np.all(np.diff(tr.seconds) >= 0)
    assert 0 <= tr.accuracy <= 1 and tr.extra["n_epochs"] == 3


def test_run_lbfgs_ends_at_the_exact_optimum(data):
    alpha = 1e-2
    tr = run_lbfgs("exact", lambda m: xclib.SoftmaxRegression(alpha=alpha, max_iter=m,
                                                              tol=1e-8),
                   data, alpha, [2, 1000])
    ref = xclib.SoftmaxRegression(alpha=alpha, tol=1e-8).fit(data["X"], data["y"])
    assert tr.objective[-1] == pytest.approx(ref.objective_, rel=1e-9)
    assert tr.objective[1] > tr.objective[2]
    assert time_to_target(tr.seconds, tr.objective, 1.01 * ref.objective_) == tr.seconds[-1] \
        or tr.objective[1] <= 1.01 * ref.objective_


def test_tune_learning_rate_keeps_the_lowest_validation_loss(data):
    Xf, yf, Xv, yv = validation_split(data["X"], data["y"], 0.2, random_state=0)
    est = xclib.OVE(alpha=1e-3, tol=None, random_state=0)
    best, scores, spe = tune_learning_rate(est, Xf, yf, Xv, yv, (0.25, 1.0, 4.0), 2)
    assert len(scores) == 3 and best in scores
    assert scores[best] == min(scores.values())
    steps = sorted(scores)
    assert steps[1] / steps[0] == pytest.approx(4.0) and steps[2] / steps[1] == pytest.approx(4)
    assert spe > 0


def test_peers_on_a_separable_toy():
    pytest.importorskip("napkinxc")
    pytest.importorskip("vowpalwabbit")
    from napkinxc.models import HSM

    from xclib.book.compare import run_napkinxc, run_vw

    d = load_synthetic(800, 200, 30, 4, random_state=0, zipf_exponent=0.0, scale=20.0)
    hsm = run_napkinxc("HSM", lambda out: HSM(out, seed=0, threads=1), d, top_k=4)
    vw = run_vw("oaa", "--oaa 4 --loss_function logistic", d, probabilities=True)
    lr = xclib.SoftmaxRegression(alpha=1e-4).fit(d["X"], d["y"])
    acc = lr.score(d["X_test"], d["y_test"])
    for tr in (hsm, vw):
        assert tr.accuracy > acc - 0.15
        assert 0 < tr.test_loss[-1] < np.log(4)
        assert tr.fit_seconds > 0


# the closing chapter's tables, figures and findings (xclib.book.compare.tables)

def _trace(method, seconds, objective, test_loss, accuracy, diverged=False):
    from xclib.book.compare import Trace

    return Trace(method, np.asarray(seconds, float), np.asarray(objective, float),
                 np.asarray(test_loss, float), accuracy, float(seconds[-1]), 1.0, diverged)


def _set_traces():
    return {"SoftmaxRegression (exact)": _trace("exact", [0, 1, 2], [3, 1.5, 1.0],
                                                [3, 1.2, 1.1], 0.8),
            "LogisticRegression (sklearn)": _trace("lr", [0, 2, 4], [3, 1.1, 1.005],
                                                   [3, 1.3, 1.1], 0.8),
            "VanillaSGD": _trace("sgd", [0, 1, 2], [3, 2, 1.5], [3, 2, 1.6], 0.7, True),
            "DS-MLR (threads, P=2)": _trace("ds", [0, 8], [3, 1.0], [3, 1.1], 0.8),
            "napkinXC HSM": _trace("hsm", [0, 0.5], [np.nan, np.nan], [np.nan, 1.2], 0.75),
            "VW oaa": _trace("vw", [0, 0.2], [np.nan, np.nan], [np.nan, 2.0], 0.9)}


OPT1 = dict(objective=1.0, test_loss=1.1, accuracy=0.8, seconds=2.0)


def test_time_to_target_table_and_shown():
    from xclib.book.compare.tables import shown, time_to_target_table

    df = time_to_target_table(_set_traces(), OPT1, dict(accuracy=0.5, seconds=3.0))
    assert df.loc["SoftmaxRegression (exact)", "objective"] == 2.0
    assert df.loc["LogisticRegression (sklearn)", "objective"] == 4.0
    assert df.loc["VanillaSGD", "objective"] == np.inf
    assert df.loc["SoftmaxRegression (exact)", "obj. time / sklearn"] == 0.5
    # at least as accurate as 0.8: VW oaa only (0.2 s); as 0.5: HSM (0.5 s) and VW oaa
    assert df.loc["DS-MLR (threads, P=2)", "seconds / fastest peer as accurate"] == 40
    assert df.loc["Memoir (accuracy only)", "seconds / fastest peer as accurate"] == 15
    assert df.loc["VW oaa", "obj. time / sklearn"] == np.inf     # no objective: never
    out = shown(df)
    assert out.loc["SoftmaxRegression (exact)", "objective"] == "2 ★"
    assert out.loc["VanillaSGD", "objective"] == "never"
    assert out.loc["VanillaSGD", "accuracy"] == "0.700 (diverged)"
    assert out.loc["Memoir (accuracy only)", "objective"] == "" and "diverged" not in out


def test_cost_slopes_tables_and_target():
    from xclib.book.compare.tables import cost_slopes, cost_tables, cost_target

    tr = _trace("m", [0, 1, 2], [3, 2, 1], [3, 2, 1], 0.5)
    assert cost_target(tr, 2.0) == 1.0 and cost_target(tr, 0.5) == np.inf
    assert np.isnan(cost_target(tr, np.nan))
    cost = {(m, K): dict(per_epoch=c * K ** s, target=np.nan)
            for m, c, s in (("SoftmaxRegression (exact)", 1e-3, 1.0), ("OVE", 0.1, 0.0))
            for K in (100, 1000)}
    slopes = cost_slopes(cost, {100: 100, 1000: 990}, ["SoftmaxRegression (exact)", "OVE"])
    assert slopes["OVE"] == pytest.approx(0.0, abs=1e-12)
    assert slopes["SoftmaxRegression (exact)"] == pytest.approx(1.0, abs=0.01)
    per_epoch, to_target = cost_tables(cost, {100: 100, 1000: 990}, slopes)
    assert list(per_epoch.index) == ["SoftmaxRegression (exact)", "OVE"]
    assert per_epoch.loc["OVE", "s/epoch, K = 990"] == pytest.approx(0.1)
    assert per_epoch.loc["OVE", "derived slope"] == "O(mD) per row: 0"
    assert to_target is None
    cost["OVE", 1000]["target"] = np.inf
    to_target = cost_tables(cost, {100: 100, 1000: 990}, slopes)[1]
    assert to_target.loc["OVE", "s to 1 % of F(W*), K = 1,000"] == "never"


def _chart_inputs():
    from xclib.book.compare.tables import time_to_target_table

    ttt = {"A": time_to_target_table(_set_traces(), OPT1, dict(accuracy=0.5, seconds=3.0))}
    data = {"A": dict(X=np.zeros((50, 3)), y=np.arange(50) % 7)}
    methods = ["SoftmaxRegression (exact)", "DS-MLR (threads, P=2)"]
    cost = {(m, K): dict(per_epoch=1.0, target=t)
            for K, ts in ((10, (5.0, 16.0)), (100, (np.nan, np.nan)))
            for m, t in zip(methods, ts)}
    syn = dict(Ks=[10, 100], n_train=30)
    return ttt, data, cost, syn, methods


def test_winner_chart_places_real_and_synthetic_sets():
    from xclib.book.compare.tables import winner_chart

    ttt, data, cost, syn, methods = _chart_inputs()
    chart = winner_chart(ttt, data, cost, syn, {10: 9, 100: 90}, methods)
    assert list(chart.index) == ["A", "synthetic K=10"]     # no W* at K = 100: no point
    assert chart.loc["A", "winner"] == "SoftmaxRegression (exact)"
    assert chart.loc["A", "K"] == 7 and chart.loc["A", "N"] == 50
    assert chart.loc["A", "DS-MLR at P=16 (extrapolated)"] == 1.0
    assert chart.loc["synthetic K=10", "family"] == "exact (L-BFGS)"
    assert chart.loc["synthetic K=10", "K"] == 9


def test_findings_record_and_statuses():
    from xclib.book.compare.tables import check_findings, record_findings, winner_chart
    from xclib.book.report import Report

    ttt, data, cost, syn, methods = _chart_inputs()
    chart = winner_chart(ttt, data, cost, syn, {10: 9, 100: 90}, methods)
    report = Report(glue=False)
    record_findings(report, ttt, {"A": OPT1}, {"A": dict(accuracy=0.5)}, chart)
    v = report.values
    assert v["A_hsm_speedup"] == 4.0 and v["A_hsm_accuracy_gap"] == pytest.approx(-0.05)
    assert v["A_exact_vs_sklearn"] == 0.5 and v["A_unbiased_reached"] == 0
    assert v["A_papers_reached"] == 1 and v["winners_exact"] == 2
    for key, slope in (("A&R", 0.1), ("OVE", 0.9), ("DS-MLR", 0.9),
                       ("SoftmaxRegression", 1.0)):
        report.record(f"slope_{key}", slope)
    check_findings(report, real=["A"], large_k=["A"])
    status = {c["claim"][:20]: c["status"] for c in report.claims}
    assert list(status.values()).count("not reproduced") == 2   # HSM's gap; winners: 2 ≠ 1
    assert status["On the sets with K >"] == "not reproduced"
    report.check()


def test_compare_figures_draw():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from xclib.book.compare.tables import plot_objective_gap, plot_which_method, winner_chart

    fig = plot_objective_gap({"A": _set_traces()}, {"A": OPT1}, {"A": 7})
    assert fig.axes[0].get_title() == "A (K = 7)"
    assert len(fig.axes[0].lines) == 5          # 4 methods with an objective, the target
    ttt, data, cost, syn, methods = _chart_inputs()
    fig = plot_which_method(winner_chart(ttt, data, cost, syn, {10: 9, 100: 90}, methods))
    assert len(fig.axes[0].texts) == 2
    plt.close("all")


def test_evaluation_seconds_is_a_positive_time(data):
    from xclib.book.compare import evaluation_seconds

    s = evaluation_seconds(data, repeats=2)
    assert isinstance(s, float) and 0 < s < 10
