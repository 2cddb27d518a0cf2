"""Tests of xclib.unbiased: double sums, vanilla SGD / U-max kernels, the Implicit SGD step."""
import math
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from xclib.base import DivergenceWarning
from xclib.exact import SoftmaxRegression
from xclib.metrics import softmax_log_loss
from xclib._numba import csr_arrays
from xclib.unbiased import (
    ImplicitSGD, UMax, VanillaSGD, class_weights, double_sum_coefficients,
    double_sum_objective, implicit_epoch, implicit_step, optimal_u, sgd_epoch, umax_bounds,
    umax_increase,
)


def _problem(seed=0, N=6, D=4, K=5, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = np.r_[np.arange(K), rng.integers(0, K, N - K)] if N >= K else rng.integers(0, K, N)
    W = rng.normal(size=(K, D)) * scale
    return X, y, W, rng


# -- the double sum ---------------------------------------------------------------------------
@pytest.mark.parametrize("formulation", ["proposed", "raman"])
def test_double_sum_at_optimal_u_is_log_loss_plus_one(formulation):
    X, y, W, _ = _problem(1)
    alpha = 0.3
    u = optimal_u(W, X, y, formulation)
    f = double_sum_objective(u, W, X, y, formulation, alpha=alpha)
    assert f == pytest.approx(softmax_log_loss(W, X, y) + 0.5 * alpha * np.sum(W * W) + 1,
                              rel=1e-12)
    # and it is the minimum over u
    for eps in (1e-3, -1e-3):
        assert double_sum_objective(u + eps, W, X, y, formulation, alpha=alpha) > f


def _exact_grad(u, W, X, y, formulation, alpha, h=1e-6):
    """Central finite differences of F(u, W)."""
    gu = np.zeros_like(u)
    for i in range(u.size):
        e = np.zeros_like(u); e[i] = h
        gu[i] = (double_sum_objective(u + e, W, X, y, formulation, alpha)
                 - double_sum_objective(u - e, W, X, y, formulation, alpha)) / (2 * h)
    gW = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        E = np.zeros_like(W); E[idx] = h
        gW[idx] = (double_sum_objective(u, W + E, X, y, formulation, alpha)
                   - double_sum_objective(u, W - E, X, y, formulation, alpha)) / (2 * h)
    return gu, gW


@pytest.mark.parametrize("formulation", ["proposed", "raman"])
@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_stochastic_gradients_are_unbiased(formulation, alpha):
    """Σ over all (i, k ≠ y_i) with probability 1/(N(K−1)) of ∇f_ik = ∇F (eqs. 6-8, β_j)."""
    X, y, W, rng = _problem(2, N=7, K=4)
    N, K = len(y), W.shape[0]
    u = rng.uniform(0.2, 2.0, N)
    beta = class_weights(y, K)
    gu = np.zeros(N); gW = np.zeros_like(W)
    p = 1.0 / (N * (K - 1))
    for i in range(N):
        for k in range(K):
            if k == y[i]:
                continue
            s_y, s_k = X[i] @ W[y[i]], X[i] @ W[k]
            c_k, c_y, g_u = double_sum_coefficients(formulation == "raman", s_y, s_k, u[i], K)
            gW[k] += p * (c_k * X[i] + alpha * beta[k] * W[k])
            gW[y[i]] += p * (c_y * X[i] + alpha * beta[y[i]] * W[y[i]])
            gu[i] += p * g_u * N  # ∂_{u_i} F = (1/N) E_k[∂ f_ik] : f_ik touches u_i w.p. 1/N
    gu_ex, gW_ex = _exact_grad(u, W, X, y, formulation, alpha)
    np.testing.assert_allclose(gW, gW_ex, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gu / N, gu_ex, rtol=1e-6, atol=1e-8)


def test_paper_beta_is_biased_ours_is_not():
    """The printed β_j = N/(n_j + (N − n_j)(K − 1)) does not give E[ridge] = (α/2)‖W‖²."""
    y = np.array([0, 0, 0, 1, 2, 2])
    N, K = len(y), 3
    nj = np.bincount(y, minlength=K)
    prob = nj / N + (N - nj) / (N * (K - 1))  # P(class j touched by a draw (i, k))
    np.testing.assert_allclose(class_weights(y, K) * prob, 1.0)
    paper = N / (nj + (N - nj) * (K - 1))
    assert not np.allclose(paper * prob, 1.0)


# -- U-max -------------------------------------------------------------------------------------
@pytest.mark.parametrize("delta", [0.1, 1.0, 3.0])
def test_umax_bounds_the_gradient(delta):
    """After the u-increase rule ‖∇_w f_ik‖ ≤ (K−1) e^δ ‖x_i‖ (the paper's N(K−1)e^δ‖x_i‖, our scale)."""
    rng = np.random.default_rng(3)
    K = 50
    for _ in range(2000):
        s_y, s_k = rng.normal(size=2) * rng.choice([1, 10, 300])
        u = rng.uniform(0, 30)
        x_norm = rng.uniform(0.1, 3)
        u2 = umax_increase(False, s_y, s_k, u, delta)
        assert u2 >= u
        c_k, c_y, _ = double_sum_coefficients(False, s_y, s_k, u2, K)
        assert abs(c_k) * x_norm <= (K - 1) * math.exp(delta) * x_norm * (1 + 1e-12)
        assert abs(c_y) == abs(c_k)


def test_umax_bounds_follow_appendix_a():
    X, y, W, _ = _problem(4)
    assert umax_bounds(X, 5, 0.0) == (np.inf, np.inf)
    bw, bu = umax_bounds(X, 5, 0.5)
    assert bw == pytest.approx(math.sqrt(2 * math.log(5) / 0.5))
    bx = np.max(np.linalg.norm(X, axis=1))
    assert bu == pytest.approx(math.log(1 + 4 * math.exp(2 * bx * bw)))
    # Lemma 1 at our scale: the exact optimum with the same alpha is inside
    opt = SoftmaxRegression(alpha=0.5).fit(X, y)
    assert np.linalg.norm(opt.coef_) <= bw


def test_raman_umax_rule_is_ours_under_the_change_of_variables():
    """With ū = u + x·w_y (which maps u* onto ū*), Raman's u-increase rule is exactly ours, and
    both double sums give the same first step from W = 0, u = ū = log K."""
    rng = np.random.default_rng(12)
    for _ in range(2000):
        s_y, s_k = rng.normal(size=2) * rng.choice([0.1, 1, 10, 100])
        u = rng.uniform(0, 20)
        ours = umax_increase(False, s_y, s_k, u, 1.0)
        raman = umax_increase(True, s_y, s_k, u + s_y, 1.0)
        assert raman == pytest.approx(ours + s_y, rel=1e-12, abs=1e-12)
    K = 7
    for raman in (False, True):
        c_k, c_y, g_u = double_sum_coefficients(raman, 0.0, 0.0, math.log(K), K)
        assert (c_k, c_y, g_u) == pytest.approx(((K - 1) / K, -(K - 1) / K, 0.0), abs=1e-15)


def _sgd_numpy(X, y, W, u, rows, ks, lr, raman, delta, alpha, beta, b_u, b_w):
    """Plain NumPy transcription of Algorithm 1 (vanilla SGD when delta = inf), with the ridge
    as the proximal shrink w_j ← w_j / (1 + η α β_j) after the gradient step."""
    K = W.shape[0]
    for i, k in zip(rows, ks):
        x, yi = X[i], y[i]
        s_y, s_k = x @ W[yi], x @ W[k]
        ui = u[i]
        if np.isfinite(delta):
            t = np.logaddexp(s_y, s_k) if raman else np.logaddexp(0, s_k - s_y)
            ui = t if ui < t - delta else ui
        if raman:
            c_k = (K - 1) * np.exp(s_k - ui); c_y = np.exp(s_y - ui) - 1; g_u = 1 - np.exp(s_y - ui) - c_k
        else:
            c_k = (K - 1) * np.exp(s_k - s_y - ui); c_y = -c_k; g_u = 1 - np.exp(-ui) - c_k
        wk = (W[k] - lr * c_k * x) / (1 + lr * alpha * beta[k])
        wy = (W[yi] - lr * c_y * x) / (1 + lr * alpha * beta[yi])
        W[k], W[yi] = wk, wy
        ui = ui - lr * g_u
        if not raman:
            ui = min(max(ui, 0.0), b_u)
        for j in (k, yi):
            nrm = np.linalg.norm(W[j])
            if nrm > b_w:
                W[j] *= b_w / nrm
        u[i] = ui


@pytest.mark.parametrize("raman", [False, True])
@pytest.mark.parametrize("delta,alpha,lr", [
    (np.inf, 0.0, 0.05), (1.0, 0.0, 0.05), (0.5, 0.2, 0.05), (1.0, 30.0, 1.0),  # last: refolds
])
def test_sgd_epoch_matches_numpy(raman, delta, alpha, lr):
    X, y, W, rng = _problem(5, N=12, D=5, K=4, scale=0.5)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Xs = sp.csr_matrix(X)
    u = rng.uniform(0, 2, len(y))
    rows = rng.integers(0, len(y), 40)
    r = rng.integers(0, 3, 40); ks = r + (r >= y[rows])
    beta = class_weights(y, 4)
    b_w, b_u = umax_bounds(X, 4, alpha)
    if 0 < alpha < 1:
        b_w = 0.8  # a binding bound, to exercise the projection
    sq = np.sum(X * X, axis=1)
    W1, u1, W2, u2 = W.copy(), u.copy(), W.copy(), u.copy()
    sgd_epoch(csr_arrays(Xs), sq, y, W1, u1, rows, ks, lr, raman, delta, alpha,
              beta, b_u, b_w)
    _sgd_numpy(X, y, W2, u2, rows, ks, lr, raman, delta, alpha, beta, b_u, b_w)
    assert np.all(np.isfinite(W1)) and not np.array_equal(W1, W)
    np.testing.assert_allclose(W1, W2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(u1, u2, rtol=1e-10, atol=1e-12)


# -- Implicit SGD --------------------------------------------------------------------------------
def _extreme_states(n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        z = rng.choice([1, 10, 100, 1e3, 1e5]) * rng.normal()
        u = rng.choice([0.0, rng.uniform(0, 5), rng.uniform(0, 1e3)])
        xx = 10 ** rng.uniform(-3, 1.5)
        lr = 10 ** rng.uniform(-4, 4)
        K = int(rng.choice([2, 10, 1000, 100000]))
        yield z, u, xx, lr, K


@pytest.mark.parametrize("newton", [False, True])
def test_implicit_step_satisfies_its_defining_equation(newton):
    """θ⁺ = θ − η∇f_ik(θ⁺): for w via a e^a = 2η(K−1)‖x‖² e^{z−u⁺} (eqs. 11, 13), for u exactly."""
    for z, u, xx, lr, K in _extreme_states(3000, 6):
        a, A, u_new, _ = implicit_step(z, u, xx, lr, K, 1e-12, newton)
        assert np.isfinite(a) and np.isfinite(u_new) and a >= 0 and u_new >= 0
        assert A == pytest.approx(a / (2 * xx), rel=1e-15)
        # w-part: A = η(K−1) e^{z⁺ − u⁺} with z⁺ = z − a (the new x·(w_k − w_y)), on the log scale
        log_rhs = math.log(lr * (K - 1)) + (z - a) - u_new
        if a > 1e-300:
            assert math.log(A) == pytest.approx(log_rhs, abs=1e-8 * max(1.0, abs(log_rhs)))
        else:
            assert log_rhs < -680
        # u-part: u⁺ = ũ − η(1 − e^{−u⁺} − (K−1)e^{z⁺ − u⁺})
        grad_u = 1 - math.exp(-u_new) - A / lr
        scale = 1 + abs(u) + abs(u_new) + lr * (1 + math.exp(-u_new)) + A
        assert abs(u_new - (u - lr * grad_u)) <= 1e-8 * scale


@pytest.mark.parametrize("alpha", [0.0, 0.3])
def test_implicit_step_on_vectors_is_the_implicit_update(alpha):
    """One step of the epoch kernel equals θ − η∇f_ik(θ⁺) computed from θ⁺ with eq. (7) and the
    ridge (α/2)(β_y‖w_y‖² + β_k‖w_k‖²) of eq. (6)."""
    X, y, W, rng = _problem(7, N=3, D=6, K=5, scale=2.0)
    Xs = sp.csr_matrix(X)
    sq = np.sum(X * X, axis=1)
    beta = np.array([1.0, 2.5, 4.0, 0.5, 3.0])
    for lr in (1e-3, 1.0, 1e3):
        u = np.array([0.5, 3.0, 0.0])
        W1, u1 = W.copy(), u.copy()
        implicit_epoch(csr_arrays(Xs), sq, y, W1, u1, np.array([1]),
                       np.array([(y[1] + 1) % 5]), lr, alpha, beta, 1e-13, False)
        k, yi, x = (y[1] + 1) % 5, y[1], X[1]
        c_k, c_y, g_u = double_sum_coefficients(False, x @ W1[yi], x @ W1[k], u1[1], 5)
        np.testing.assert_allclose(W1[k], W[k] - lr * (c_k * x + alpha * beta[k] * W1[k]),
                                   rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(W1[yi], W[yi] - lr * (c_y * x + alpha * beta[yi] * W1[yi]),
                                   rtol=1e-9, atol=1e-12)
        assert u1[1] == pytest.approx(u[1] - lr * g_u, rel=1e-8, abs=1e-10)
        np.testing.assert_array_equal(np.delete(W1, [k, yi], 0), np.delete(W, [k, yi], 0))


def test_implicit_epoch_ridge_zero_is_the_plain_update():
    """alpha = 0: the kernel with β is bit-for-bit the α = 0 update (same root of (16))."""
    X, y = _blobs(3, N=60)
    Xs = sp.csr_matrix(X); sq = np.sum(X * X, axis=1)
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 60, 200); r = rng.integers(0, 4, 200); ks = r + (r >= y[rows])
    out = []
    for beta in (np.ones(5), class_weights(y, 5) * 7.0):
        W, u = np.zeros((5, 8)), np.full(60, math.log(5))
        implicit_epoch(csr_arrays(Xs), sq, y, W, u, rows, ks, 3.0, 0.0, beta,
                       1e-12, True)
        out.append((W, u))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


def test_bisection_needs_at_most_proposition_4_evaluations():
    for z, u, xx, lr, K in _extreme_states(2000, 8):
        tol = 1e-10
        _, _, u_new, n = implicit_step(z, u, xx, lr, K, tol, False)
        width = abs(z - u) + 2 * lr * xx + math.log(2 * (K - 1)) + 1
        assert n <= math.log2(width / tol) + 3


@pytest.mark.parametrize("tol", [1e-10, 1e-13])
def test_newton_and_bisection_find_the_same_root(tol):
    """The default solver (safeguarded Halley) and the paper's bisection: same root to ~ε."""
    for z, u, xx, lr, K in _extreme_states(3000, 9):
        r1 = implicit_step(z, u, xx, lr, K, tol, False)[2]
        r2 = implicit_step(z, u, xx, lr, K, tol, True)[2]
        assert abs(r1 - r2) <= 3 * tol * (1 + abs(r1))


def test_default_solver_needs_few_evaluations():
    """On the states an SGD run meets (moves of u up to ~1), Halley needs 1-2 evaluations."""
    rng = np.random.default_rng(10)
    n = []
    for _ in range(2000):
        z = rng.normal(0, 1)
        u = math.log(1000) + rng.normal(0, 0.5)
        lr = 10 ** rng.uniform(-3, 1)
        n.append(implicit_step(z, u, rng.uniform(0.5, 1.0), lr, 1000, 1e-10, True)[3])
    assert np.mean(n) <= 2 and max(n) <= 6


def test_warm_started_lambert_w_matches_scipy():
    """The log-scale W₀(e^L) of the implicit step, from its cold start and warm-started."""
    from scipy.special import lambertw
    from xclib._numba import lambertw_exp
    from xclib.unbiased.implicit import _w_refine, _w_start
    rng = np.random.default_rng(11)
    for L in np.r_[np.linspace(-30, 30, 601), rng.normal(0, 300, 200), -700.0, 700.0, 1e6]:
        b0, a0 = _w_start(L)
        assert a0 == pytest.approx(lambertw_exp(L), rel=0.05) and a0 == pytest.approx(math.exp(b0))
        b, a = _w_refine(L, b0, a0)
        assert a == pytest.approx(lambertw_exp(L), rel=1e-14)
        assert abs(a + b - L) <= 1e-15 * max(1.0, abs(L)) * 4
        if abs(L) < 700:
            assert a == pytest.approx(lambertw(math.exp(L)).real, rel=1e-14)
        for dL in (1e-9, -1e-6, 1e-3, -0.3, 5.0, -200.0):  # warm starts, near and far
            b2, a2 = _w_refine(L + dL, b, a)
            assert a2 == pytest.approx(lambertw_exp(L + dL), rel=1e-14)


def test_implicit_sgd_solvers_give_the_same_fit():
    X, y = _blobs(3, N=150)
    fits = [ImplicitSGD(learning_rate=lr, tol=None, n_epochs=3, solver=s, random_state=0).fit(X, y)
            for lr in (0.1, 100.0) for s in ("newton", "bisection")]
    for f1, f2 in (fits[:2], fits[2:]):
        np.testing.assert_allclose(f1.coef_, f2.coef_, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(f1.u_, f2.u_, rtol=1e-7, atol=1e-9)
        assert np.mean(f1.n_evals_) < np.mean(f2.n_evals_) / 5


def test_zero_row_is_handled():
    a, A, u_new, _ = implicit_step(0.0, 1.0, 0.0, 1.0, 5, 1e-12, False)
    assert a == 0.0
    assert u_new == pytest.approx(1.0 - (1 - math.exp(-u_new) - 4 * math.exp(-u_new)), abs=1e-9)


# -- estimators --------------------------------------------------------------------------------
def _blobs(seed=0, N=300, D=8, K=5):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(K, D)) * 2
    y = rng.integers(0, K, N)
    X = centers[y] + rng.normal(size=(N, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, y


def test_implicit_sgd_is_stable_for_every_learning_rate():
    X, y = _blobs()
    logK = math.log(5)
    for lr in 10.0 ** np.arange(-4, 5):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DivergenceWarning)
            m = ImplicitSGD(learning_rate=lr, tol=None, n_epochs=3, random_state=0).fit(X, y)
        assert not m.diverged_ and np.all(np.isfinite(m.coef_))
        assert m.history_["train_loss"][-1] < logK + 2


def test_implicit_sgd_approaches_the_exact_optimum():
    X, y = _blobs(1, N=200)
    opt = softmax_log_loss(SoftmaxRegression(alpha=0.0).fit(X, y).coef_, X, y)
    m = ImplicitSGD(learning_rate=1.0, tol=None, n_epochs=40, decay=0.95, alpha=0.0,
                    random_state=0).fit(X, y)
    assert m.history_["train_loss"][-1] - opt < 0.05
    assert m.history_["train_loss"][-1] < m.history_["train_loss"][0]


def _ridge_objective(W, X, y, alpha):
    return softmax_log_loss(W, X, y) + 0.5 * alpha * np.sum(W * W)


@pytest.mark.parametrize("Est,kw", [
    (ImplicitSGD, dict(learning_rate=1.0)), (UMax, dict(learning_rate=0.5)),
    (VanillaSGD, dict(learning_rate=0.5)),
])
def test_ridge_converges_to_the_exact_ridge_optimum(Est, kw):
    """With β_j the stochastic ridge is unbiased: the fit approaches SoftmaxRegression(alpha)."""
    X, y = _blobs(1, N=200)
    alpha = 0.05
    opt = SoftmaxRegression(alpha=alpha).fit(X, y).coef_
    m = Est(alpha=alpha, tol=None, n_epochs=40, decay=0.93, random_state=0, **kw).fit(X, y)
    gap = _ridge_objective(m.coef_, X, y, alpha) - _ridge_objective(opt, X, y, alpha)
    assert 0 <= gap < 0.01
    free = Est(alpha=0.0, tol=None, n_epochs=40, decay=0.93, random_state=0, **kw).fit(X, y)
    assert _ridge_objective(free.coef_, X, y, alpha) - _ridge_objective(opt, X, y, alpha) > 3 * gap
    assert np.linalg.norm(m.coef_ - opt) < 0.2 * np.linalg.norm(opt)


def test_vanilla_sgd_overflows_at_a_large_learning_rate_and_says_so():
    X, y = _blobs(2)
    with pytest.warns(DivergenceWarning):
        m = VanillaSGD(learning_rate=1e4, tol=None, n_epochs=5, random_state=0).fit(X, y)
    assert m.diverged_ and np.all(np.isfinite(m.coef_))
    assert m.n_epochs_ == len(m.history_["train_loss"]) < 5


@pytest.mark.parametrize("Est", [VanillaSGD, UMax, ImplicitSGD])
def test_same_seed_same_weights_dense_or_sparse(Est):
    X, y = _blobs(3)
    a = Est(tol=None, n_epochs=2, random_state=4).fit(X, y)
    b = Est(tol=None, n_epochs=2, random_state=4).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.u_, b.u_)


@pytest.mark.parametrize("shuffle", ["uniform", "reshuffle", "fixed"])
def test_umax_learns(shuffle):
    X, y = _blobs(4)
    m = UMax(learning_rate=0.5, tol=None, n_epochs=10, shuffle=shuffle, random_state=0).fit(X, y)
    assert m.score(X, y) > 0.9
    assert np.all(m.u_ >= 0)


def test_umax_with_ridge_stays_in_the_bounds():
    X, y = _blobs(5)
    m = UMax(learning_rate=0.5, tol=None, n_epochs=3, alpha=0.5, random_state=0).fit(X, y)
    bw, bu = umax_bounds(X, 5, 0.5)
    assert np.all(np.linalg.norm(m.coef_, axis=1) <= bw * (1 + 1e-12))
    assert np.all((m.u_ >= 0) & (m.u_ <= bu))


@pytest.mark.parametrize("est,name", [
    (VanillaSGD(formulation="other"), "formulation"), (UMax(delta=0.0), "delta"),
    (UMax(alpha=-1.0), "alpha"), (ImplicitSGD(solver="brent"), "solver"),
    (ImplicitSGD(solver_tol=-1e-10), "solver_tol"), (ImplicitSGD(tol=np.nan), "tol"),
    (ImplicitSGD(learning_rate=0.0), "learning_rate"), (ImplicitSGD(shuffle="never"), "shuffle"),
    (ImplicitSGD(u_init=-1.0), "u_init"), (VanillaSGD(decay=1.5), "decay"),
    (UMax(tol=None, n_epochs=-1), "n_epochs"), (UMax(delta=np.nan), "delta"),
])
def test_bad_parameters_raise_naming_them(est, name):
    X, y = _blobs(6, N=20)
    with pytest.raises(ValueError, match=name):
        est.fit(X, y)


@pytest.mark.parametrize("Est", [VanillaSGD, UMax, ImplicitSGD])
def test_u_init_that_learns_nothing_is_rejected_with_its_range(Est):
    """u_init=1e6 would make every gradient e^{-1e6} = 0; it is rejected, naming [0, log K]."""
    X, y = _blobs(6, N=50)
    with pytest.raises(ValueError, match=r"u_init must be None \(log K\) or in \[0, log K\]"):
        Est(u_init=1e6).fit(X, y)
    Est(u_init=math.log(5), tol=None, n_epochs=1).fit(X, y)  # the boundary is accepted
    Est(u_init=0.0, tol=None, n_epochs=1).fit(X, y)


def test_umax_blow_up_is_reported_as_divergence():
    """U-max at learning_rate=1e3 runs up to losses in the thousands (5457 → 4075 →
    2961): it warns, sets diverged_ and keeps the best weights."""
    X, y = _blobs(2)
    with pytest.warns(DivergenceWarning, match="UMax diverged"):
        m = UMax(learning_rate=1e3, alpha=0.0, tol=None, n_epochs=5, random_state=0).fit(X, y)
    assert m.diverged_ and m.n_epochs_ < 5
    assert softmax_log_loss(m.coef_, X, y) <= 10 * math.log(5)


@pytest.mark.parametrize("Est", [VanillaSGD, UMax, ImplicitSGD])
def test_defaults_fit_standardised_data(Est):
    from sklearn.datasets import make_blobs
    from sklearn.preprocessing import StandardScaler
    X, y = make_blobs(n_samples=600, n_features=40, centers=4, cluster_std=4.0, random_state=1)
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = Est(random_state=0).fit(X, y)
    assert not m.diverged_ and m.score(X, y) >= 0.95
    assert m.history_["train_loss"][-1] < 0.2 * math.log(4)


@pytest.mark.parametrize("Est", [VanillaSGD, UMax, ImplicitSGD])
def test_fitted_model_pickles_without_data_or_state(Est):
    X, y = _blobs(3, N=2000, D=30)
    m = Est(tol=None, n_epochs=2, random_state=0).fit(X, y)
    assert not hasattr(m, "_state")
    # coef_, u_ (a fitted parameter: one per row) and the history; the data is 2000 × 30 × 8
    assert len(pickle.dumps(m)) < 4 * m.coef_.nbytes + 2 * m.u_.nbytes + 20_000 < X.nbytes




# -- m classes per step (Algorithm 1 with m ≥ 1; the authors' code ran m = 5) -----------------
def _sgd_sampled_numpy(X, y, W, u, rows, ks, lr, delta, alpha, beta, b_u, b_w):
    """NumPy transcription of a step with the classes ``C = {k ∈ ks[t], k ≥ 0}``:
    f = u + e^{−u} + ((K−1)/|C|) Σ_C e^{z_k − u}, U-max rule on log(1 + Σ_C e^{z_k})."""
    K = W.shape[0]
    for i, S in zip(rows, ks):
        x, yi, C = X[i], y[i], [k for k in S if k >= 0]
        ui = u[i]
        if C:
            z = np.array([x @ (W[k] - W[yi]) for k in C])
            if np.isfinite(delta):
                t = np.logaddexp.reduce(np.r_[0.0, z])
                ui = t if ui < t - delta else ui
            c = (K - 1) / len(C) * np.exp(z - ui)
            for k, ck in zip(C, c):
                W[k] = (W[k] - lr * ck * x) / (1 + lr * alpha * beta[k])
            W[yi] = (W[yi] + lr * c.sum() * x) / (1 + lr * alpha * beta[yi])
            for j in C + [yi]:
                nrm = np.linalg.norm(W[j])
                if nrm > b_w:
                    W[j] *= b_w / nrm
            g_u = 1 - np.exp(-ui) - c.sum()
        else:
            g_u = 1 - np.exp(-ui)
        u[i] = min(max(ui - lr * g_u, 0.0), b_u)


@pytest.mark.parametrize("sampling,m", [("others", 1), ("others", 3), ("all", 1), ("all", 4)])
@pytest.mark.parametrize("delta,alpha,lr", [(np.inf, 0.0, 0.05), (1.0, 0.0, 0.3),
                                            (0.5, 0.2, 0.05), (1.0, 30.0, 1.0)])
def test_sgd_epoch_sampled_matches_numpy(sampling, m, delta, alpha, lr):
    from xclib.unbiased import draw_class_sets, sgd_epoch_sampled

    K = 6
    X, y, W, rng = _problem(7, N=14, D=5, K=K, scale=0.5)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    Xs = sp.csr_matrix(X)
    u = rng.uniform(0, 2, len(y))
    rows = rng.integers(0, len(y), 60)
    ks = draw_class_sets(rng, y[rows], K, m, sampling)
    beta = class_weights(y, K, m, sampling)
    b_w, b_u = umax_bounds(X, K, alpha)
    if 0 < alpha < 1:
        b_w = 0.8  # binding
    sq = np.sum(X * X, axis=1)
    W1, u1, W2, u2 = W.copy(), u.copy(), W.copy(), u.copy()
    sgd_epoch_sampled(csr_arrays(Xs), sq, y, W1, u1, rows, ks, lr, delta, alpha,
                      beta, b_u, b_w)
    _sgd_sampled_numpy(X, y, W2, u2, rows, ks, lr, delta, alpha, beta, b_u, b_w)
    assert np.all(np.isfinite(W1)) and not np.array_equal(W1, W)
    np.testing.assert_allclose(W1, W2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(u1, u2, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("delta,alpha", [(np.inf, 0.0), (1.0, 0.0), (0.5, 0.2)])
def test_one_sampled_class_is_the_single_class_kernel(delta, alpha):
    from xclib.unbiased import sgd_epoch_sampled

    X, y, W, rng = _problem(8, N=12, D=5, K=4, scale=0.5)
    Xs = sp.csr_matrix(X / np.linalg.norm(X, axis=1, keepdims=True))
    sq = np.asarray(Xs.multiply(Xs).sum(axis=1)).ravel()
    u = rng.uniform(0, 2, len(y))
    rows = rng.integers(0, len(y), 50)
    r = rng.integers(0, 3, 50); ks = r + (r >= y[rows])
    beta = class_weights(y, 4)
    b_w, b_u = umax_bounds(Xs, 4, alpha)
    W1, u1, W2, u2 = W.copy(), u.copy(), W.copy(), u.copy()
    csr = (csr_arrays(Xs), sq, y)
    sgd_epoch(*csr, W1, u1, rows, ks, 0.1, False, delta, alpha, beta, b_u, b_w)
    sgd_epoch_sampled(*csr, W2, u2, rows, ks[:, None].copy(), 0.1, delta, alpha, beta, b_u, b_w)
    np.testing.assert_allclose(W1, W2, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(u1, u2, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("sampling", ["others", "all"])
def test_class_sets_are_uniform_and_weights_unbiased(sampling):
    from xclib.unbiased import draw_class_sets

    K, m, T = 7, 3, 60_000
    rng = np.random.default_rng(0)
    y = rng.integers(0, K, T)
    S = draw_class_sets(rng, y, K, m, sampling)
    for row, yi in zip(S[:500], y[:500]):
        kept = row[row >= 0]
        assert len(set(kept)) == len(kept) and yi not in kept
    # each class other than the label is drawn with probability m/(K−1) ("others") or m/K
    p = m / (K - 1) if sampling == "others" else m / K
    hits = np.zeros(K); chances = np.zeros(K)
    for j in range(K):
        rows = y != j
        hits[j] = np.sum(S[rows] == j); chances[j] = rows.sum()
    np.testing.assert_allclose(hits / chances, p, rtol=0.03)
    if sampling == "all":
        np.testing.assert_allclose(np.mean(S == -1), 1 / K, rtol=0.03)
    # β_j · P(j touched by a step) = 1: the ridge of a step is unbiased
    yy = np.array([0, 0, 0, 1, 2, 2, 3, 4, 5, 6, 6, 6])
    beta = class_weights(yy, K, m, sampling)
    n = len(yy)
    for j in range(K):
        nj = np.sum(yy == j)
        assert beta[j] * (nj / n + (1 - nj / n) * p) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("Est", [VanillaSGD, UMax])
def test_m_classes_per_step_learn_and_check_their_parameters(Est):
    X, y = _blobs(4)
    m = Est(learning_rate=0.1, tol=None, n_epochs=10, n_sampled=3, random_state=0).fit(X, y)
    assert m.score(X, y) > 0.9 and np.all(m.u_ >= 0)
    a = Est(tol=None, n_epochs=2, n_sampled=2, class_sampling="all", random_state=3).fit(X, y)
    b = Est(tol=None, n_epochs=2, n_sampled=2, class_sampling="all", random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    with pytest.raises(ValueError, match="n_sampled"):
        Est(n_sampled=5).fit(X, y)  # K = 5: four other classes
    Est(n_sampled=5, class_sampling="all", tol=None, n_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="n_sampled"):
        Est(n_sampled=6, class_sampling="all").fit(X, y)
    with pytest.raises(ValueError, match="formulation"):
        Est(n_sampled=2, formulation="raman").fit(X, y)
    with pytest.raises(ValueError, match="class_sampling"):
        Est(class_sampling="some").fit(X, y)


def test_both_newton_solvers_are_exercised_and_agree():
    """The w-space Halley (the default, ``a ≤ 8``) and the u-space Halley it hands over to
    (large ``a``) each solve many of the extreme states, to the bisection's root."""
    from xclib.unbiased.implicit import _implicit_step_u, _implicit_step_w
    took = {True: 0, False: 0}
    for z, u, xx, lr, K in _extreme_states(3000, 12):
        ok = _implicit_step_w(z, u, xx, lr, math.log(K - 1), 1e-13)[4]
        took[ok] += 1
        r_newton = implicit_step(z, u, xx, lr, K, 1e-13, True)[2]
        r_u = _implicit_step_u(z, u, xx, lr, K, 1e-13, True, 0)[2]
        r_bis = implicit_step(z, u, xx, lr, K, 1e-13, False)[2]
        assert abs(r_newton - r_bis) <= 3e-13 * (1 + abs(r_bis))
        assert abs(r_u - r_bis) <= 3e-13 * (1 + abs(r_bis))
    assert took[True] > 300 and took[False] > 300


def test_small_exponential_matches_math_exp():
    from xclib.unbiased.implicit import _exp_small
    for x in np.r_[np.linspace(-1e-2, 1e-2, 4001), 0.0, 1e-300, -1e-300]:
        assert abs(_exp_small(x) - math.exp(x)) <= 4e-16 * math.exp(x)


# -- Implicit SGD in batches (xclib.unbiased.implicit_epoch._implicit_epoch_batched) ----------------
def _batch_problem(K, n=600, d=40, seed=0, n_classes_drawn=None):
    """Rows of unit norm (as the chapter's data) and one empty row (‖x‖ = 0)."""
    from sklearn.preprocessing import normalize
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=seed)
    X.data = rng.standard_normal(X.data.size)
    X.data[X.indptr[3]:X.indptr[4]] = 0.0
    X.eliminate_zeros()
    X = normalize(X)
    y = rng.integers(0, n_classes_drawn or K, n)
    rows = rng.integers(0, n, 4 * n)
    r = rng.integers(0, (n_classes_drawn or K) - 1, rows.size)
    ks = r + (r >= y[rows])
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return X, y, rows, ks, sq


@pytest.mark.parametrize("lr", [0.1, 1.0, 30.0])
@pytest.mark.parametrize("drawn", [None, 3, "ids above the bit sets"])
def test_batched_implicit_epoch_is_the_step_by_step_epoch(lr, drawn):
    """Without a ridge and with K ≥ _BATCH_MIN_CLASSES the epoch goes in batches (their
    solves side by side) and makes the same updates in the same order as one step at a time:
    with K = 1000 classes, and with the labels and classes drawn from 3 of them (batches cut
    short at every shared class or datapoint), also as ids 5, 5 + _SEEN_BITS and 7000 of
    K = 8000 (two of them share a bit; every shared class must still end a batch); at
    lr = 30 most lanes are not finished and the epoch goes on one step at a time. With a
    ridge it goes one step at a time."""
    from xclib.unbiased.implicit_epoch import (
        _BATCH_MIN_CLASSES, _SEEN_BITS, _implicit_epoch_batched, _implicit_epoch_steps)
    K = 8000 if drawn == "ids above the bit sets" else 1000
    assert K >= _BATCH_MIN_CLASSES
    if drawn == "ids above the bit sets":
        X, y, rows, ks, sq = _batch_problem(3)
        ids = np.array([5, 5 + _SEEN_BITS, 7000])
        y, ks = ids[y], ids[ks]
    else:
        X, y, rows, ks, sq = _batch_problem(K, n_classes_drawn=drawn)
    # the batches do the work at lr ≤ 1 (no early stop), and hand over at lr = 30
    _, t = _implicit_epoch_batched(X.indptr, X.indices, X.data, sq, y, np.zeros((K, X.shape[1])),
                                   np.full(X.shape[0], math.log(K)), rows, ks, lr, 1e-10)
    assert (t == rows.size) == (lr <= 1.0)
    for alpha in (0.0, 1e-3):
        beta = class_weights(y, K)
        out = []
        steps = (lambda X, *args: _implicit_epoch_steps(*X, *args))
        for epoch in (implicit_epoch, steps):
            W = np.zeros((K, X.shape[1]))
            u = np.full(X.shape[0], math.log(K))
            ev = sum(epoch(csr_arrays(X), sq, y, W, u, rows, ks, lr, alpha, beta, 1e-10, True)
                     for _ in range(2))
            out.append((W, u, ev))
        (W1, u1, ev1), (W2, u2, ev2) = out
        assert np.all(np.isfinite(W1)) and np.abs(W1).max() > 0
        if alpha > 0:
            assert np.array_equal(W1, W2) and np.array_equal(u1, u2) and ev1 == ev2
        np.testing.assert_allclose(W1, W2, rtol=1e-9, atol=1e-11 * np.abs(W2).max())
        np.testing.assert_allclose(u1, u2, rtol=1e-9, atol=1e-11)
        assert ev1 <= 1.05 * ev2  # a lane's start may finish where the scalar one needs two


def test_lane_solves_agree_with_the_scalar_solver_where_done():
    """Each finished lane is the scalar solver's root to within its tolerance: on the states
    of an SGD run on rows of unit norm (after an epoch; nearly all finished) and on extreme
    ones (the rest go to the scalar solver, checked above)."""
    from xclib.unbiased.implicit_epoch import _implicit_epoch_steps, _lane_solves
    K = 1000
    X, y, rows, ks, sq = _batch_problem(K)
    cases = []
    for lr in (0.01, 0.1, 1.0):
        W = np.zeros((K, X.shape[1]))
        u = np.full(X.shape[0], math.log(K))
        _implicit_epoch_steps(X.indptr, X.indices, X.data, sq, y, W, u, rows, ks, lr, 0.0,
                              np.ones(K), 1e-10, True)
        keep = sq[rows] > 0
        z = np.array([X[i].dot(W[k] - W[y[i]])[0] for i, k in zip(rows, ks)])[keep]
        cases.append((z, u[rows][keep], sq[rows][keep], lr, K, True))
    for z, u, xx, lr, K_ in (s[:5] for s in _extreme_states(300, 8)):
        cases.append((np.array([z]), np.array([u]), np.array([xx]), lr, K_, False))
    for z, u, xx, lr, K_, sgd in cases:
        a, un, done = np.empty(z.size), np.empty(z.size), np.zeros(z.size, dtype=bool)
        _lane_solves(z, u, xx, lr, K_ - 1.0, 1e-10, a, un, done)
        for j in np.flatnonzero(done):
            ref = implicit_step(z[j], u[j], xx[j], lr, int(K_), 1e-10, True)
            assert abs(un[j] - ref[2]) <= 2e-10 * (1 + abs(ref[2]))
            assert abs(a[j] - ref[0]) <= 1e-9 * (1 + ref[0])
        if sgd:
            assert done.mean() > 0.95, (lr, done.mean())
