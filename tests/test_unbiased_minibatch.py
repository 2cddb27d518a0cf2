"""Tests of xclib.unbiased.minibatch: the minibatch Implicit SGD step of Appendix F.3."""
import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.datasets import make_blobs
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import InvalidParameterError

from xclib._numba import csr_arrays
from xclib.metrics import softmax_log_loss
from xclib.unbiased import (
    MinibatchImplicitSGD, class_weights, double_sum_objective, implicit_epoch,
)
from xclib.unbiased.minibatch import (
    Batches, batch_factors, batch_labels, batch_objective, draw_batch_classes, inner_gradient,
    inner_hvp, inner_objective, minibatch_class_weights, minibatch_epoch,
)


def _step(X, y, W, u, bptr, brows, order, classes, lr, alpha, beta, tol=1e-12):
    """Run the kernel on copies; return the new (W, u)."""
    X = sp.csr_matrix(X)
    W, u = W.copy(), u.copy()
    B, M, rank = batch_factors(X, bptr, brows)
    omega = (bptr.shape[0] - 1) / X.shape[0]
    minibatch_epoch(csr_arrays(X), y, W, u, np.asarray(order, np.int64),
                    np.asarray(classes, np.int64), Batches(bptr, brows, B, M, rank), lr, omega,
                    alpha, beta, tol, 200)
    return W, u


@pytest.mark.parametrize("alpha", [0.0, 0.3])
@pytest.mark.parametrize("lr", [0.05, 1.0, 30.0])
def test_one_by_one_is_the_single_datapoint_step(alpha, lr):
    rng = np.random.default_rng(0)
    N, D, K = 8, 5, 6
    X = sp.csr_matrix(rng.normal(size=(N, D)))
    y = rng.integers(0, K, N)
    W0, u0 = rng.normal(size=(K, D)), rng.uniform(0, 3, N)
    beta = class_weights(y, K)
    rows = rng.integers(0, N, 20)
    ks = (rng.integers(0, K - 1, 20) + 0).astype(np.int64)
    ks = ks + (ks >= y[rows])
    W1, u1 = W0.copy(), u0.copy()
    implicit_epoch(csr_arrays(X), np.asarray(X.multiply(X).sum(1)).ravel(), y,
                   W1, u1, rows, ks, lr, alpha, beta, 1e-14, True)
    bptr, brows = np.arange(N + 1), np.arange(N)
    W2, u2 = _step(X, y, W0, u0, bptr, brows, rows, ks[:, None], lr, alpha, beta)
    np.testing.assert_allclose(W2, W1, atol=1e-8, rtol=1e-8)
    np.testing.assert_allclose(u2, u1, atol=1e-8, rtol=1e-8)
    # and n = m = 1 gives ImplicitSGD's β
    np.testing.assert_allclose(minibatch_class_weights(batch_labels(y, bptr, brows), K, 1),
                               beta, rtol=1e-12)


@pytest.mark.parametrize("case", ["distinct", "shared label", "duplicate row", "zero row"])
@pytest.mark.parametrize("alpha,lr", [(0.0, 0.7), (0.4, 3.0), (0.1, 40.0)])
def test_step_solves_the_proximal_problem(case, alpha, lr):
    """n = 3, m = 2, D = 4, K = 7: the step against BFGS on the full proximal objective
    2η f_{j,C}(u, W) + ‖u − ũ‖² + ‖W − W̃‖² in (u_S, W_{j,C})."""
    rng = np.random.default_rng(1)
    N, D, K = 6, 4, 7
    X = rng.normal(size=(N, D))
    y = np.array([0, 1, 2, 3, 4, 5])
    if case == "shared label":
        y[1] = 0
    if case == "duplicate row":
        X[2] = X[0]
    if case == "zero row":
        X[1] = 0.0
    W0, u0 = rng.normal(size=(K, D)), rng.uniform(0, 2, N)
    bptr, brows = np.array([0, 3, 6]), np.arange(N)
    beta = rng.uniform(0.5, 3.0, K)
    C = [c for c in range(K) if c not in set(y[:3])][-2:]
    W2, u2 = _step(X, y, W0, u0, bptr, brows, [0], [C], lr, alpha, beta)
    rows = np.arange(3)
    T = np.r_[np.unique(y[rows]), C]
    omega = 2 / N

    def obj(v):
        u, W = u0.copy(), W0.copy()
        u[rows] = v[:3]
        W[T] = v[3:].reshape(len(T), D)
        return (2 * lr * batch_objective(u, W, X, y, rows, C, beta, alpha, omega)
                + np.sum((u - u0) ** 2) + np.sum((W - W0) ** 2))

    v0 = np.r_[u0[rows], W0[T].ravel()]
    res = minimize(obj, v0, method="BFGS", options={"gtol": 1e-10, "maxiter": 10000})
    np.testing.assert_allclose(u2[rows], res.x[:3], atol=1e-6)
    np.testing.assert_allclose(W2[T], res.x[3:].reshape(len(T), D), atol=1e-6)
    untouched = np.setdiff1d(np.arange(K), T)
    np.testing.assert_array_equal(W2[untouched], W0[untouched])
    np.testing.assert_array_equal(u2[3:], u0[3:])


def _inner_problem(seed=2, nb=4, t=6, q=3):
    rng = np.random.default_rng(seed)
    Sb = rng.normal(size=(nb, t)) * 2
    Bs = rng.normal(size=(nb, q))
    yloc = rng.integers(0, 3, nb)
    logc = np.where(np.arange(t) < 3, 0.0, math.log(2.5)) * np.ones((nb, 1))
    logc[np.arange(nb), yloc] = -np.inf
    logk = rng.normal(size=nb)
    rho1 = 1 + rng.uniform(0, 1, t)
    return Sb, Bs, yloc, logc, logk, rho1, rng


def test_gradient_and_hessian_of_eq21_by_finite_differences():
    Sb, Bs, yloc, logc, logk, rho1, rng = _inner_problem()
    nb, t = Sb.shape
    P, Pi = np.empty(nb), np.empty((nb, t))

    def f(A):
        return inner_objective(A, Sb, Bs, yloc, logc, logk, rho1, P, Pi)

    def grad(A):
        f(A)
        return inner_gradient(A, Bs, yloc, rho1, P, Pi)

    A = rng.normal(size=(t, Bs.shape[1]))
    g = grad(A)
    h = 1e-6
    fd = np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        E = np.zeros_like(A)
        E[idx] = h
        fd[idx] = (f(A + E) - f(A - E)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    V = rng.normal(size=A.shape)
    f(A)
    hv = inner_hvp(V, Bs, yloc, rho1, P.copy(), Pi.copy())
    fd_hv = (grad(A + h * V) - grad(A - h * V)) / (2 * h)
    np.testing.assert_allclose(hv, fd_hv, rtol=1e-5, atol=1e-6)
    # Φ is convex: Vᵀ H V ≥ 2 min(1 + ρ)‖V‖²
    assert np.sum(V * hv) >= 2 * rho1.min() * np.sum(V * V) - 1e-9


def test_class_weights_and_objective_are_unbiased_by_enumeration():
    """Exact expectation over j (uniform on the J batches) and C (uniform m-subsets outside
    L_j): E[1{k ∈ L_j ∪ C}] β_k = 1 and E[f_{j,C}] = F(u, W) (our scale)."""
    rng = np.random.default_rng(3)
    N, D, K, m, alpha = 7, 3, 6, 2, 0.4
    X = rng.normal(size=(N, D))
    y = np.array([0, 0, 1, 2, 3, 1, 4])  # batch 0 shares a label, batch 2 has one row
    bptr, brows = np.array([0, 3, 6, 7]), np.array([0, 1, 2, 3, 4, 5, 6])
    W, u = rng.normal(size=(K, D)), rng.uniform(0, 2, N)
    beta = minibatch_class_weights(batch_labels(y, bptr, brows), K, m)
    J = 3
    touch, f = np.zeros(K), 0.0
    for j in range(J):
        rows = brows[bptr[j]:bptr[j + 1]]
        lab = set(y[rows].tolist())
        rest = [c for c in range(K) if c not in lab]
        subsets = list(itertools.combinations(rest, min(m, len(rest))))
        for C in subsets:
            for k in lab | set(C):
                touch[k] += 1 / (J * len(subsets))
            f += batch_objective(u, W, X, y, rows, list(C), beta, alpha, J / N) / (
                J * len(subsets))
    np.testing.assert_allclose(touch * beta, 1.0, rtol=1e-12)
    assert f == pytest.approx(double_sum_objective(u, W, X, y, alpha=alpha), rel=1e-12)


def test_drawn_classes_are_distinct_and_outside_the_labels():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 9, 40)
    bptr, brows = np.r_[np.arange(0, 40, 6), 40], rng.permutation(40)
    order = rng.permutation(bptr.shape[0] - 1)
    labels = batch_labels(y, bptr, brows)
    for j in range(bptr.shape[0] - 1):
        want = np.unique(y[brows[bptr[j]:bptr[j + 1]]])
        np.testing.assert_array_equal(labels[1][labels[0][j]:labels[0][j + 1]], want)
    C = draw_batch_classes(rng, labels, order, 9, 20)
    for t, j in enumerate(order):
        lab = set(y[brows[bptr[j]:bptr[j + 1]]].tolist())
        got = C[t][C[t] >= 0]
        assert len(set(got.tolist())) == len(got) == 9 - len(lab)  # clipped to what exists
        assert not lab & set(got.tolist())


def test_drawn_class_sets_are_uniform():
    """Every m-subset of the classes outside L_j equally likely (Floyd's algorithm): the
    counts of the C(4, 2) = 6 pairs outside L = {1, 4} over 60,000 draws, by chi-square."""
    from scipy.stats import chisquare
    y = np.array([4, 1, 4])
    bptr, brows = np.array([0, 3]), np.arange(3)
    order = np.zeros(60_000, dtype=np.int64)
    C = draw_batch_classes(np.random.default_rng(7), batch_labels(y, bptr, brows), order, 6, 2)
    pairs = {}
    for a, b in np.sort(C, axis=1).tolist():
        pairs[(a, b)] = pairs.get((a, b), 0) + 1
    assert set(pairs) == set(itertools.combinations([0, 2, 3, 5], 2))
    assert chisquare(list(pairs.values())).pvalue > 1e-3


def test_converges_to_the_multinomial_logistic_regression_optimum():
    rng = np.random.default_rng(5)
    N, D, K, alpha = 300, 6, 12, 1e-2
    X = rng.normal(size=(N, D))
    y = np.argmax(X @ rng.normal(size=(D, K)) + rng.gumbel(size=(N, K)), axis=1)
    lr = LogisticRegression(C=1 / (alpha * N), fit_intercept=False, tol=1e-12, max_iter=5000)
    W_ref = lr.fit(X, y).coef_
    est = MinibatchImplicitSGD(learning_rate=2.0, batch_size=5, n_sampled=2, alpha=alpha,
                               tol=None, n_epochs=300, decay=0.985, random_state=0).fit(X, y)

    def obj(W):
        return softmax_log_loss(W, X, y) + 0.5 * alpha * np.sum(W * W)

    assert obj(est.coef_) - obj(W_ref) < 3e-3 * obj(W_ref)


def test_same_seed_same_coef_and_bad_parameters():
    rng = np.random.default_rng(6)
    X, y = rng.normal(size=(60, 4)), rng.integers(0, 4, 60)
    a = MinibatchImplicitSGD(tol=None, n_epochs=2, random_state=3).fit(X, y)
    b = MinibatchImplicitSGD(tol=None, n_epochs=2, random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.u_, b.u_)
    for name, value in [("batch_size", 0), ("n_sampled", 0), ("batch_size", 2.5),
                        ("solver_tol", -1.0), ("solver_max_iter", 0), ("learning_rate", 0.0)]:
        with pytest.raises(InvalidParameterError, match=name):
            MinibatchImplicitSGD(**{name: value}).fit(X, y)
    with pytest.raises(ValueError, match="u_init"):
        MinibatchImplicitSGD(u_init=10.0).fit(X, y)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MinibatchImplicitSGD().fit(Xn, y)


def test_any_learning_rate_is_stable():
    X, y = make_blobs(n_samples=80, n_features=5, centers=3, cluster_std=2.0, random_state=0)
    for lr in (1e-3, 1.0, 1e4):
        est = MinibatchImplicitSGD(learning_rate=lr, tol=None, n_epochs=3, batch_size=7, n_sampled=1,
                                   random_state=0).fit(X, y)
        assert np.all(np.isfinite(est.coef_)) and not est.diverged_
        assert est.history_["train_loss"][-1] < 0.9 * math.log(3)
