"""The prologue's measurements (xclib.book.prologue), on tiny data."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from xclib import SoftmaxRegression  # noqa: E402
from xclib.book import prologue  # noqa: E402
from xclib.book.report import Report  # noqa: E402
from xclib.exact import softmax_objective  # noqa: E402


def _data(n=120, d=6, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.argmax(X[:, :k] + 0.3 * rng.normal(size=(n, k)), axis=1)
    return sp.csr_matrix(X), y


def test_time_gradient_times_at_weights_drawn_from_the_generator():
    X, y = _data()
    rng, twin = np.random.default_rng(1), np.random.default_rng(1)
    seconds = prologue.time_gradient(X, y, 3, budget=0.0, rng=rng, mu=1.0)
    assert 0 < seconds < 5
    twin.standard_normal((3, X.shape[1]))  # one draw of W, then the generators agree
    assert rng.standard_normal() == twin.standard_normal()


def test_record_cost_and_plot_cost():
    cost = pd.DataFrame(dict(K=[10, 100, 1000], seconds=[0.001, 0.01, 0.2],
                             nnz=[400, 400, 400]))
    report = Report(glue=False)
    prologue.record_cost(report, cost, slope=1.15, top_slope=1.3, n=100, d=50)
    v = report.values
    assert v["cost_top_k_from"] == 100 and v["cost_nnz"] == 4.0
    assert v["cost_ratio_k10000_k10"] == pytest.approx(200.0)
    assert (v["cost_seconds_k10"], v["cost_seconds_k10000"]) == (0.001, 0.2)
    plt.close("all")
    prologue.plot_cost(cost, 1.15, -3.0, 1.3, title="t")
    ax = plt.gcf().axes[0]
    assert len(ax.lines) == 4 and ax.get_title() == "t"
    plt.close("all")


def test_measure_datasets_measures_what_is_found_and_not_skipped(monkeypatch):
    manifest = pd.DataFrame(dict(name=["a", "b", "c"], split=["train"] * 3, n=[9, 9, 9],
                                 d=[9, 9, 9], K=[9, 9, 9], nnz=[None] * 3,
                                 density=[None] * 3,
                                 found=["XCLIB_DATA", "XCLIB_DATA", "missing"]))
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0], [0.0, 0.0]]))
    monkeypatch.setattr(prologue.datasets, "describe", lambda: manifest.copy())
    monkeypatch.setattr(prologue.datasets, "load",
                        lambda name, split: (X, np.array([0, 1, 1, 4])))
    table = prologue.measure_datasets(skip=("b",))
    assert table.loc[0, ["n", "d", "K", "nnz"]].tolist() == [4, 2, 3, 4]
    assert table.loc[0, "density"] == 0.5
    assert table.loc[1, "n"] == 9 and pd.isna(table.loc[1, "nnz"])  # skipped
    assert pd.isna(table.loc[2, "density"])  # missing
    assert str(table["nnz"].dtype) == "Int64"


def test_class_sizes_are_sorted_and_leave_out_empty_classes(monkeypatch):
    y = np.array([0, 0, 0, 2, 3, 3, 5])
    monkeypatch.setattr(prologue.datasets, "load", lambda name, split: (None, y))
    sizes = prologue.class_sizes(["x", "z"])
    assert list(sizes) == ["x", "z"]
    assert sizes["x"].tolist() == [3, 2, 1, 1]
    plt.close("all")
    prologue.plot_class_sizes(sizes)
    assert len(plt.gcf().axes) == 2
    plt.close("all")


def test_compare_optima_scores_both_models_on_the_known_test_classes():
    X, y = _data(seed=0)
    Xt, yt = _data(n=40, seed=1)
    yt[:5] = 7  # a class never seen in training
    mu = 1.0
    ours = SoftmaxRegression(alpha=mu / X.shape[0]).fit(X, y)
    skl = LogisticRegression(C=1 / mu, fit_intercept=False, tol=1e-8, max_iter=5000)
    skl.fit(X, y)
    row = prologue.compare_optima(ours, skl, (X, y), (Xt, yt), mu=mu)
    assert (row["n_train"], row["K"], row["n_test"], row["test_rows_dropped"]) == \
        (120, 3, 35, 5)
    assert row["max_prob_diff"] < 1e-4
    assert row["optimum_test_loss"] == pytest.approx(row["sklearn_test_loss"], abs=1e-4)
    ridge = 0.5 * mu * np.sum(ours.coef_ ** 2) / X.shape[0]
    assert row["ridge_share"] == pytest.approx(ridge / ours.objective_)
    assert not any(isinstance(v, np.generic) for v in row.values())
    row["sklearn_seconds"] = 0.1
    table = prologue.optima_table({"tiny": row})
    assert table.loc["tiny", "K"] == 3 and "max_prob_diff" in table.columns


def test_full_batch_gd_descends_towards_the_optimum_and_stops_when_it_diverges():
    X, y = _data()
    mu = 1.0
    h = prologue.full_batch_gd(X, y, 3, rate=1.0, n_epochs=30, mu=mu)
    f = np.array(h["objective"])
    assert not h["diverged"] and h["epoch"] == list(range(1, 31))
    assert np.all(np.diff(f) < 0)
    optimum = SoftmaxRegression(alpha=mu / X.shape[0]).fit(X, y).objective_
    assert f.min() >= optimum - 1e-9 and f[0] < np.log(3)
    fast = prologue.full_batch_gd(X, y, 3, rate=1.0, n_epochs=30, momentum=0.9, mu=mu)
    assert fast["objective"][-1] < f[-1]
    start = softmax_objective(np.zeros((3, 6)), X, y, mu, with_grad=False) / X.shape[0]
    assert start == pytest.approx(np.log(3))
    wild = prologue.full_batch_gd(X, y, 3, rate=1e6, n_epochs=30, mu=mu)
    assert wild["diverged"] and len(wild["objective"]) < 30


def test_sweep_table_and_record_sweep():
    sweep = {"gradient descent": {1.0: dict(objective=[0.9, 0.6], diverged=False),
                                  10.0: dict(objective=[0.8], diverged=True)},
             "Nesterov (0.9)": {1.0: dict(objective=[0.7, 0.55], diverged=False),
                                10.0: dict(objective=[], diverged=True)}}
    gd = prologue.sweep_table(sweep, optimum=0.5)
    assert len(gd) == 4 and gd.gap.iloc[0] == pytest.approx(0.1)
    assert np.isnan(gd.final.iloc[3]) and gd.lowest.iloc[3] == np.inf
    report = Report(glue=False)
    prologue.record_sweep(report, gd, optimum=0.5, start=1.5)
    v = report.values
    assert v["gd_best_method"] == "Nesterov (0.9)" and v["gd_best_rate"] == 1.0
    assert v["gd_best_gap_fraction"] == pytest.approx(0.05)
    assert v["gd_n_diverged"] == 2 and v["gd_never_below_optimum"] is True
    assert v["gd_final_objective_gradient"] == {"1": 0.6}
    assert v["gd_final_objective_nesterov"] == {"1": 0.55}
    assert v["gd_lowest_minus_optimum"] == pytest.approx(0.05)


def test_odp_estimate_scales_the_time_per_row():
    report = Report(glue=False)
    frame = prologue.odp_estimate(report, 2.0, rows=100, n=1000, d=10, k=5)
    assert report.values["odp_gradient_seconds"] == pytest.approx(20.0)
    assert report.values["odp_model_gb"] == pytest.approx(400 / 1e9)
    assert frame["value"].iloc[0] == 2.0


@pytest.mark.parametrize("odp, status", [(700.0, "reproduced"), (5.0, "not reproduced")])
def test_claims_follow_the_recorded_values(odp, status):
    report = Report(glue=False)
    for key, value in dict(max_prob_diff=1e-6, cost_slope=0.95, cost_slope_top=1.2,
                           gd_best_gap_fraction=0.05, gd_never_below_optimum=True,
                           odp_gradient_seconds=odp, odp_seconds_per_row=1e-3,
                           odp_model_gb=355.0).items():
        report.record(key, value)
    prologue.claims(report)
    assert [c["status"] for c in report.claims] == ["reproduced"] * 3 + [status]
    assert [c["holds"] for c in report.claims] == [True] * 3 + [status == "reproduced"]
