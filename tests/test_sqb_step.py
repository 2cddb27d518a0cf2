"""The step search of the SQB family (``learning_rate="auto"``, beyond the paper)."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import log_loss

from xclib import datasets
from xclib.sqb import SQB, MultinomialSQB, full_cost, search_step


def _set(K, seed=0, n=400, d=20):
    X, y, _ = datasets.make_softmax_data(n, d, K, random_state=seed)
    X = sp.csr_matrix(X)
    return X, np.unique(y, return_inverse=True)[1]


@pytest.mark.parametrize("K", [1, 7])
def test_full_cost_is_the_mean_log_loss_plus_the_ridge(K):
    X, y = _set(2 if K == 1 else K)
    rng = np.random.default_rng(1)
    theta = rng.normal(size=(K * X.shape[1]))
    alpha = 0.3
    scores = X @ theta.reshape(K, -1).T
    if K == 1:
        scores = np.hstack([np.zeros_like(scores), scores])
    P = np.exp(scores - scores.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    want = log_loss(y, P, labels=np.arange(P.shape[1])) + 0.5 * alpha * theta @ theta
    got = full_cost(X.indptr, X.indices, X.data, y.astype(float), theta, alpha, K)
    assert got == pytest.approx(want, rel=1e-12)


def test_search_step_takes_the_first_decreasing_step_and_falls_back_to_one():
    X, y = _set(5)
    yf = y.astype(float)
    args = (X.indptr, X.indices, X.data, yf)
    theta = np.zeros(5 * X.shape[1])
    Y = np.eye(5)[y]
    grad = ((np.full_like(Y, 0.2) - Y).T @ X.toarray() / X.shape[0]).ravel()  # ∇L at W = 0
    trial = np.empty_like(theta)
    # an ascent direction (−ξ = +grad): no step above 1 passes Armijo's test, the bound's
    # step 1 is returned
    assert search_step(*args, theta, 0.0, 5, -grad, grad, 8.0, np.nan, trial)[0] == 1.0
    # a tiny descent direction: every doubling passes, the first tried (2·last) is taken
    xi = 1e-6 * grad
    assert search_step(*args, theta, 0.0, 5, xi, grad, 4.0, np.nan, trial)[0] == 8.0
    assert search_step(*args, theta, 0.0, 5, xi, grad, 1e9, np.nan, trial)[0] == 1024.0
    # the passes: L(θ) unless given, then one per step tried; the cost reached is returned
    f0 = full_cost(*args, theta, 0.0, 5)
    a, passes, f = search_step(*args, theta, 0.0, 5, xi, grad, 4.0, np.nan, trial)
    assert passes == 2 and f == full_cost(*args, theta - 8.0 * xi, 0.0, 5) < f0
    assert search_step(*args, theta, 0.0, 5, xi, grad, 4.0, f0, trial)[1:] == (1, f)
    a, passes, f = search_step(*args, theta, 0.0, 5, -grad, grad, 8.0, f0, trial)
    assert (a, passes) == (1.0, 4) and np.isnan(f)  # 16, 8, 4, 2 tried; 1 not evaluated
    # last ≤ ½: no search, the bound's step
    assert search_step(*args, theta, 0.0, 5, xi, grad, 0.5, np.nan, trial)[0] == 1.0


@pytest.mark.parametrize("K", [2, 50])
def test_auto_step_lowers_the_cost_every_round_and_beats_the_unit_step(K):
    X, y = _set(K, n=1500, d=30)
    X = X * 7.0  # rows far from unit norm
    cls = SQB if K == 2 else MultinomialSQB
    auto = cls(n_epochs=8, random_state=0).fit(X, y)
    unit = cls(learning_rate=1.0, n_epochs=8, random_state=0).fit(X, y)
    cost = np.array(auto.history_["train_loss"])
    assert np.all(np.diff(cost) <= 1e-12)
    assert cost[-1] <= unit.history_["train_loss"][-1] + 1e-12
    assert all(s >= 1.0 for s in auto.history_["step"])
    assert "step" not in unit.history_
    if K == 50:  # the bound is loose at large K: the searched steps are longer
        assert max(auto.history_["step"]) > 1.0
        assert cost[-1] < 0.9 * unit.history_["train_loss"][-1]


def test_auto_step_with_stochastic_batches_is_the_unit_step():
    X, y = _set(2, n=600)
    kw = dict(b1_mu=20, b1_sigma=20, gamma_mu=5.0, gamma_sigma=5.0, n_epochs=3,
              random_state=0)
    a = SQB(**kw).fit(X, y)
    b = SQB(learning_rate=1.0, **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_the_bound_curvature_exceeds_the_hessian_by_up_to_k_over_2_at_uniform_scores():
    """The reason for the search (MultinomialSQB's docstring): at p = 1/K the generalised
    eigenvalues of the bound's M against diag(p) − ppᵀ (on the complement of 1) reach K/2."""
    from xclib.sqb import softmax_bound_row
    K = 100
    M = np.zeros((K, K))
    softmax_bound_row(np.zeros(K), M)
    p = np.full(K, 1.0 / K)
    H = np.diag(p) - np.outer(p, p)
    Q = np.linalg.qr(np.eye(K) - 1.0 / K)[0][:, :K - 1]
    ev = np.linalg.eigvals(np.linalg.solve(Q.T @ H @ Q, Q.T @ M @ Q)).real
    assert ev.max() == pytest.approx(K / 2, rel=1e-9)
    assert 10 < ev.min() < 12


def test_the_search_passes_are_charged():
    """Each round of the default is one iteration: T gradient and T curvature rows, plus one
    pass per step tried, and one for L(θ) when the previous round fell back to the step 1
    (after an accepted step its cost is known)."""
    X, y = _set(6, n=500)
    auto = MultinomialSQB(n_epochs=5, random_state=0).fit(X, y)
    extra = np.diff(np.r_[0.0, auto.history_["passes"]]) - 2.0
    assert extra[0] >= 2.0 and np.all(extra >= 1.0) and np.all(extra == np.round(extra))
    np.testing.assert_allclose(np.diff(np.r_[0.0, auto.history_["product_passes"]]),
                               extra + 2.0 + 10.0)  # + l = 10 CG products
