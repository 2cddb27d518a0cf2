"""Unit tests of xclib.book.unbiased: the plumbing of chapter 1 (U-max and Implicit SGD)."""
from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator

from xclib.book import unbiased as ch1
from xclib.book.report import Report
from xclib.exact import SoftmaxRegression
from xclib.metrics import softmax_log_loss
from xclib.unbiased import ImplicitSGD, UMax

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def tiny():
    """120 unit-norm sparse rows, 12 features, 4 classes a linear model separates well."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, 12)) * 3
    X = sp.random(120, 12, density=0.5, format="csr", random_state=1)
    X = sp.csr_matrix(X.multiply(1 / np.sqrt(X.multiply(X).sum(axis=1) + 1e-12)))
    y = np.asarray(np.argmax(X @ W.T, axis=1)).ravel().astype(np.int64)
    return X, y


class _Fake(BaseEstimator):
    """A stand-in estimator whose final loss is ``loss(learning_rate)`` (None: diverges)."""

    def __init__(self, learning_rate=1.0, n_epochs=3, loss=None):
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.loss = loss

    def fit(self, X, y):
        value = self.loss(self.learning_rate)
        self.diverged_ = value is None
        n = 1 if value is None else self.n_epochs
        self.history_ = {"train_loss": [9.0] * (n - 1) + [9.0 if value is None else value],
                         "time": list(np.arange(1.0, n + 1)), "epoch": list(range(1, n + 1))}
        return self


def test_encode_gives_codes_in_the_order_of_the_labels():
    assert ch1.encode(np.array([7, 3, 7, 10])).tolist() == [1, 0, 1, 2]
    assert ch1.encode(np.array(["b", "a"])).dtype == np.int64


def test_load_first_label_drops_empty_rows_and_keeps_full_label_sets(monkeypatch):
    X = sp.csr_matrix(np.array([[1.0, 0], [0, 0], [0, 2.0]]))
    Y = sp.csr_matrix(np.array([[1, 1], [0, 1], [1, 0]]))

    def load(name, labels="first", **kw):
        return (X, np.array([5, 9, 7])) if labels == "first" else (X, Y)

    monkeypatch.setattr(ch1.datasets, "load", load)
    monkeypatch.setattr(ch1.datasets, "label_columns", lambda name, codes: codes + 10)
    Xk, y, (Yk, columns) = ch1.load_first_label("bibtex", drop_empty=True)
    assert Xk.shape[0] == 2 and y.tolist() == [0, 1]
    assert Yk.toarray().tolist() == [[1, 1], [1, 0]]
    assert columns.tolist() == [15, 17]  # the codes of the labels that remain
    Xa, ya, none = ch1.load_first_label("mnist")  # single-label: every row, no label sets
    assert Xa.shape[0] == 3 and ya.tolist() == [0, 2, 1] and none is None


def test_subsample_takes_the_first_rows():
    X, y = np.arange(20).reshape(10, 2), np.arange(10)
    Xs, ys = ch1.subsample(X, y, 0.3)
    assert ys.tolist() == [0, 1, 2] and Xs.shape == (3, 2)
    assert ch1.subsample(X, y, 0.01)[1].tolist() == [0]  # at least one row


def test_final_loss_is_inf_for_a_diverged_or_short_run():
    ok = _Fake(n_epochs=3, loss=lambda lr: 0.5).fit(None, None)
    assert ch1.final_loss(ok) == 0.5 and ch1.final_loss(ok, 3) == 0.5
    assert ch1.final_loss(ok, 4) == np.inf
    assert ch1.final_loss(_Fake(loss=lambda lr: None).fit(None, None)) == np.inf


def test_rates_on_the_papers_scale_and_grids():
    assert ch1.to_paper_scale("OVE", 1000.0) == 10.0
    assert ch1.to_paper_scale("Implicit", 0.1) == 0.1
    assert ch1.exp10(0.01) == "1e-2" and ch1.exp10(1000) == "1e+3"
    assert ch1.paper_grid(10, "OVE") == pytest.approx([100.0, 1000.0, 1e4])
    assert ch1.paper_grid(0.1, "U-max") == pytest.approx([0.01, 0.1, 1.0])
    assert ch1.paper_grid(0.1, "U-max", full=True) == [10.0 ** p for p in range(-3, 4)]
    assert len(ch1.paper_grid(None, "U-max")) == 7


def test_tune_rate_widens_the_grid_while_the_best_rate_is_at_an_edge():
    fitted = []

    def fit(lr):  # the loss falls towards 1e-3 and diverges above 10
        fitted.append(lr)
        return _Fake(lr, 3, lambda r: None if r > 10 else abs(math.log10(r) + 3)).fit(0, 0)

    best, histories = ch1.tune_rate(fit, [0.1, 1.0, 10.0], 3)
    assert best == pytest.approx(1e-3)
    assert sorted(histories) == sorted(fitted) and list(histories) == sorted(histories)
    assert min(histories) == pytest.approx(1e-4)  # one decade past the best, then stop
    best, _ = ch1.tune_rate(fit, [1e-3], 3, lowest=1e-3)  # the floor ends the widening
    assert best == 1e-3


def test_fit_stepping_down_lowers_the_rate_until_below_log_k(tiny):
    X, y = tiny  # log K = log 4 ≈ 1.39

    def make_at(lr):
        return _Fake(lr, 3, lambda r: None if r > 1 else 3.0 if r > 0.05 else 0.2)

    est, lr = ch1.fit_stepping_down(make_at, X, y, 10.0)
    assert lr == pytest.approx(0.01) and ch1.final_loss(est) == 0.2
    est, lr = ch1.fit_stepping_down(lambda r: _Fake(r, 3, lambda _: 5.0), X, y, 10.0)
    assert lr == pytest.approx(0.01)  # at most three decades down, then it stops


def test_tables_set_ours_beside_the_paper(tiny):
    tuned = {("Bibtex", m): 1.0 for m in ch1.METHODS}
    t2 = ch1.table2(tuned, ["Bibtex"])
    assert t2.at["Bibtex", ("OVE", "ours")] == "1e-2"  # 1.0 / BATCH
    assert t2.at["Bibtex", ("OVE", "paper")] == "1e+2"
    import pandas as pd
    final = pd.DataFrame({m: {"Bibtex": 2.0, "Toy": 1.0} for m in ch1.METHODS})
    final.loc["Bibtex", "Implicit"] = 0.5
    t3 = ch1.table3(final, {"Bibtex": tiny, "Toy": tiny})
    assert t3.at["Bibtex", ("OVE", "ours")] == 4.0
    assert t3.at["Bibtex", ("OVE", "paper")] == ch1.PAPER_T3["Bibtex"][0]
    assert np.isnan(t3.at["Toy", ("OVE", "paper")])
    assert t3.at["Toy", ("log K", "")] == pytest.approx(math.log(4))
    assert ch1.best_rate({0.1: 3.0, 1.0: 2.0, 10.0: np.inf}) == 1.0


def test_sampled_softmax_sgd_learns_is_seeded_and_reports_overflow(tiny):
    X, y = tiny
    log_k = math.log(4)
    W = ch1.sampled_softmax_sgd(X, y, 4, 10.0, 5, batch=20, m=2, seed=3)
    assert softmax_log_loss(W, X, y) < 0.9 * log_k
    assert np.array_equal(W, ch1.sampled_softmax_sgd(X, y, 4, 10.0, 5, batch=20, m=2,
                                                     seed=3))
    W32 = ch1.sampled_softmax_sgd(X, y, 4, 10.0, 5, batch=20, m=2, seed=3, float32=True)
    assert W32.dtype == np.float64 and np.allclose(W32, W, atol=1e-4)
    tf = ch1.sampled_softmax_sgd(X, y, 4, 10.0, 5, batch=20, m=2, seed=3, tf_logq=True,
                                 distinct=True)
    assert not np.allclose(tf, W)  # the switches change the surrogate
    assert ch1.sampled_softmax_sgd(X, y, 4, 1e308, 2, step="sum", batch=20, m=2) is None


def test_time_kernels_times_every_double_sum_kernel():
    out = ch1.time_kernels(5, seed=0, n=200, d=20, reps=1)
    assert set(out) == {"Vanilla", "U-max", "Implicit (bisection)", "Implicit (default)"}
    assert all(np.isfinite(v) and v > 0 for v in out.values())


def test_time_to_and_label_metrics():
    h = {"time": [1.0, 2.0, 3.0], "train_loss": [3.0, 1.0, 0.5]}
    assert ch1.time_to(h, 1.0) == 2.0 and np.isnan(ch1.time_to(h, 0.1))
    assert ch1.label_metrics(None, np.zeros((2, 5), dtype=int)) == {}
    Y = sp.csr_matrix(np.array([[1, 0, 0, 1, 0, 1], [0, 1, 1, 0, 1, 0]] * 2))
    columns = np.arange(6)[::-1]  # code c stands for label column 5 - c
    top = np.array([[5, 4, 3, 2, 1], [0, 4, 3, 1, 2]] * 2)  # columns 01234 and 51243
    got = ch1.label_metrics((Y, columns), top)
    assert got["P@1"] == pytest.approx(0.5)  # row 0's first column is its label, row 1's not
    assert got["P@3"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert got["P@5"] == pytest.approx((2 / 5 + 3 / 5) / 2)
    assert set(got) == {"P@1", "P@3", "P@5", "nDCG@3", "nDCG@5"}


@pytest.mark.filterwarnings("ignore:.*learned nothing useful")  # a step of 1e-6 at W*
def test_distance_tracker_records_the_distance_to_the_optimum(tiny):
    X, y = tiny
    W_opt = SoftmaxRegression(alpha=0.1, tol=1e-10, max_iter=500).fit(X, y).coef_
    cls = ch1.distance_tracker(ImplicitSGD, W_opt)
    assert cls.__name__ == "ImplicitSGD"
    est = cls(learning_rate=0.1, n_epochs=3, tol=None, alpha=0.1, random_state=0).fit(X, y)
    d = est.history_["train_loss"]
    assert len(d) == 3 and d[-1] == pytest.approx(np.linalg.norm(est.coef_ - W_opt))
    start = ch1.distance_tracker(UMax, W_opt, W_opt)
    near = start(learning_rate=1e-6, n_epochs=2, tol=None, alpha=0.1, decay=1.0,
                 random_state=0).fit(X, y).history_["train_loss"]
    assert max(near) < 1e-3 * np.linalg.norm(W_opt) < d[0]  # it started at W*


def test_mean_step_and_loglog_slope():
    g = ch1.mean_step([2.0, 4.0, 6.0], 0.5, 4)
    assert g.tolist() == [1.0, 1.0, 1.0]
    t = np.arange(1, 17)
    assert ch1.loglog_slope(3.0 / np.sqrt(t)) == pytest.approx(-0.5)
    assert ch1.loglog_slope(np.full(16, 2.0)) == pytest.approx(0.0)


def test_decide_takes_the_status_from_the_outcome():
    table = Report(glue=False)
    table.values = {"a": 1.0}
    ch1.decide(table, "holds", True, ["a"], "paper", "cell")
    ch1.decide(table, "fails", 0 > 1, ["a"], "paper", "cell")
    assert [c["status"] for c in table.claims] == ["reproduced", "not reproduced"]
    table.check()  # outcome and status agree: no error
    with pytest.raises(ValueError, match="never recorded"):
        ch1.decide(table, "unknown", True, ["b"], "paper", "cell")


def test_the_figures_draw_what_they_are_given(tiny):
    import matplotlib.pyplot as plt

    fig = ch1.plot_step_sizes(np.arange(3.0), np.ones(3), np.ones(3))
    assert len(fig.axes[0].lines) == 2
    losses = {(f, lr): (np.inf if (f, lr) == ("raman", 10.0) else 1.0)
              for f in ("proposed", "raman") for lr in (0.1, 10.0)}
    fig = ch1.plot_figure2([0.1, 10.0], losses, 1.4, 5)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()].count("diverged") == 1
    import pandas as pd
    fig = ch1.plot_cost(pd.DataFrame({"a": [1.0, 2.0], "b": [1.0, 1.0]}, index=[10, 100]))
    assert len(fig.axes[0].lines) == 2
    runs = {("Toy", m): _Fake(1.0, 3, lambda r: 0.5).fit(0, 0) for m in ch1.METHODS}
    fig = ch1.plot_figure1(runs, {"Toy": tiny}, {"Toy": {"loss": 0.4}}, "exact")
    assert len(fig.axes[0].lines) == len(ch1.METHODS) + 2
    est = _Fake(0.1, 3, lambda r: 0.5).fit(0, 0)
    fig = ch1.plot_minibatch({"1, 1": est, "10, 5": est}, 1.4)
    assert len(fig.axes[0].lines) == 3
    curves = {("Toy", m): np.linspace(1, 0.5, 5) for m in ("Implicit", "OVE")}
    fig = ch1.plot_convergence(["Toy"], ["Implicit", "OVE"], curves,
                               {k: 0.1 for k in curves}, curves, 1e-5)
    assert len(fig.axes) == 2 and len(fig.axes[1].lines) == 3
    plt.close("all")
