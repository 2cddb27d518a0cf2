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
