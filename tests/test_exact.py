"""SoftmaxRegression (the book's oracle) against scikit-learn and finite differences."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import approx_fprime
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from xclib import SoftmaxRegression
from xclib.exact import softmax_objective


def _data(n=600, d=30, k=6, seed=0, sparse=True):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(k, d)) * 2
    X = sp.random(n, d, density=0.3, format="csr", random_state=np.random.RandomState(seed))
    s = X @ W.T
    g = rng.gumbel(size=s.shape)
    y = np.argmax(s + g, axis=1)
    return (X if sparse else X.toarray()), y


def test_objective_gradient_matches_finite_differences():
    X, y = _data(n=50, d=6, k=4)
    rng = np.random.default_rng(1)
    W, b = rng.normal(size=(4, 6)), rng.normal(size=4)

    def f(theta):
        return softmax_objective(theta[:24].reshape(4, 6), X, y, 0.3, theta[24:], with_grad=False)

    _, g, gb = softmax_objective(W, X, y, 0.3, b)
    theta = np.concatenate([W.ravel(), b])
    num = approx_fprime(theta, f, 1e-6)
    np.testing.assert_allclose(np.concatenate([g.ravel(), gb]), num, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_matches_sklearn_on_held_out_data(sparse, fit_intercept):
    X, y = _data(sparse=sparse)
    Xtr, ytr, Xte = X[:400], y[:400], X[400:]
    alpha = 0.5 / 400
    ours = SoftmaxRegression(alpha=alpha, fit_intercept=fit_intercept).fit(Xtr, ytr)
    ref = LogisticRegression(C=1 / (alpha * 400), fit_intercept=fit_intercept, tol=1e-10,
                             max_iter=10_000).fit(Xtr, ytr)
    assert ours.converged_
    np.testing.assert_allclose(ours.predict_proba(Xte), ref.predict_proba(Xte), atol=1e-5)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)


def test_log_likelihood_is_eq2_at_the_optimum():
    X, y = _data(n=200)
    m = SoftmaxRegression(alpha=1.0 / 200).fit(X, y)
    L = m.log_likelihood(X, y)
    assert L == pytest.approx(-m.objective_ * X.shape[0], rel=1e-10)
    # the optimum beats a perturbed point
    m2 = SoftmaxRegression(alpha=1.0 / 200)
    m2.__dict__.update(m.__dict__)
    m2.coef_ = m.coef_ + 1e-3
    assert m2.log_likelihood(X, y) < L


def test_string_labels_and_errors():
    X, y = _data(n=100)
    labels = np.array(["a", "b", "c", "d", "e", "f"])[y]
    m = SoftmaxRegression().fit(X, labels)
    assert set(m.predict(X)) <= set(labels)
    with pytest.raises(ValueError, match="not seen in training"):
        m.log_likelihood(X, np.full(100, "zzz"))
    for bad in (dict(alpha=-1), dict(alpha=np.nan), dict(alpha="0.1"), dict(tol=np.nan),
                dict(max_iter=0), dict(max_iter=-1), dict(max_iter=2.5)):
        with pytest.raises((ValueError, TypeError), match=f"'{next(iter(bad))}' parameter"):
            SoftmaxRegression(**bad).fit(X, y)
    Xn = X.toarray()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SoftmaxRegression().fit(Xn, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        SoftmaxRegression().fit(X, np.zeros(100))


def test_stopping_short_warns_and_says_so():
    X, y = _data(n=200)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        m = SoftmaxRegression(max_iter=2).fit(X, y)
    assert not m.converged_ and m.n_iter_ == 2


@pytest.mark.parametrize("factor", [1e-40, 1e50])
def test_feature_units_do_not_stop_it_at_iteration_0(factor):
    # the same problem in other units: W·x unchanged with W/factor, ridge alpha·factor²,
    # gradient in W/factor is factor times larger
    X, y = _data(n=200)
    ref = SoftmaxRegression(alpha=1e-2).fit(X, y)
    m = SoftmaxRegression(alpha=1e-2 * factor**2, tol=1e-8 * factor).fit(X * factor, y)
    assert m.converged_ and m.n_iter_ > 1
    np.testing.assert_allclose(m.coef_ * factor, ref.coef_, atol=1e-5)


def test_warm_start_starts_at_the_previous_optimum():
    X, y = _data(n=200)
    m = SoftmaxRegression(alpha=1e-2, warm_start=True).fit(X, y)
    first = m.coef_.copy()
    m.fit(X, y)
    assert m.n_iter_ <= 2
    np.testing.assert_allclose(m.coef_, first, atol=1e-5)




# --- the two gradient paths and the L-BFGS of the oracle -------------------------------------


def _many_classes(n=300, d=40, k=40, seed=3):
    """K ≥ FUSED_MIN_K classes: sparse X takes the fused numba pass."""
    from xclib.exact import FUSED_MIN_K
    X, y = _data(n=n, d=d, k=k, seed=seed)
    assert k >= FUSED_MIN_K and len(np.unique(y)) > 1
    return X, y


@pytest.mark.parametrize("with_b", [False, True])
def test_fused_and_blocked_paths_agree(with_b, monkeypatch):
    import xclib.exact
    X, y = _many_classes()
    rng = np.random.default_rng(2)
    W = rng.normal(size=(40, 40))
    b = rng.normal(size=40) if with_b else None
    calls, real = [], xclib.exact._objective_fused
    monkeypatch.setattr(xclib.exact, "_objective_fused", lambda *a: calls.append(1) or real(*a))
    fused = softmax_objective(W, X, y, 0.7, b)
    assert calls  # the fused pass did run
    assert softmax_objective(W, X, y, 0.7, b, with_grad=False) == pytest.approx(fused[0],
                                                                                   rel=1e-12)
    csc = softmax_objective(W, X.tocsc(), y, 0.7, b)  # fused too, after a conversion
    assert csc[0] == pytest.approx(fused[0], rel=1e-12)
    dense = softmax_objective(W, X.toarray(), y, 0.7, b)  # blocked, BLAS
    monkeypatch.setattr(xclib.exact, "FUSED_MIN_K", 10**9)
    blocked = softmax_objective(W, X, y, 0.7, b)  # blocked, SciPy's CSR kernels
    for other in (dense, blocked):
        assert fused[0] == pytest.approx(other[0], rel=1e-12)
        np.testing.assert_allclose(fused[1], other[1], rtol=1e-12,
                                   atol=1e-12 * np.abs(other[1]).max())
        if with_b:
            np.testing.assert_allclose(fused[2], other[2], rtol=1e-12,
                                       atol=1e-12 * np.abs(other[2]).max())
        else:
            assert fused[2] is None and other[2] is None


def test_fused_path_checks_what_numba_would_not():
    X, y = _many_classes(n=50)
    W = np.zeros((40, 40))
    for bad_y in (np.full(50, 40), np.full(50, -1), y[:-1]):
        with pytest.raises(ValueError, match="labels|do not match"):
            softmax_objective(W, X, bad_y)
    with pytest.raises(ValueError, match="do not match"):
        softmax_objective(np.zeros((40, 41)), X, y)
    with pytest.raises(ValueError, match="do not match"):
        softmax_objective(W, X, y, intercept=np.zeros(39))


def test_fused_gradient_matches_finite_differences():
    X, y = _many_classes(n=60, d=5, k=33)
    rng = np.random.default_rng(4)
    W, b = rng.normal(size=(33, 5)), rng.normal(size=33)

    def f(theta):
        return softmax_objective(theta[:165].reshape(33, 5), X, y, 0.3, theta[165:],
                                 with_grad=False)

    _, g, gb = softmax_objective(W, X, y, 0.3, b)
    num = approx_fprime(np.concatenate([W.ravel(), b]), f, 1e-6)
    np.testing.assert_allclose(np.concatenate([g.ravel(), gb]), num, rtol=1e-5, atol=1e-5)


def test_many_classes_match_sklearn():
    X, y = _many_classes(n=400)
    alpha = 1.0 / 400
    ours = SoftmaxRegression(alpha=alpha).fit(X, y)
    ref = LogisticRegression(C=1 / (alpha * 400), fit_intercept=False, tol=1e-10,
                             max_iter=10_000).fit(X, y)
    assert ours.converged_ and ours.n_fev_ >= ours.n_iter_
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-5)
    v = softmax_objective(ours.coef_, X, np.searchsorted(ours.classes_, y), alpha * 400,
                          with_grad=False)
    assert ours.objective_ == pytest.approx(v / 400, rel=1e-12)


def test_lbfgs_minimises_rosenbrock_and_reports_why_it_stopped():
    from scipy.optimize import rosen, rosen_der

    from xclib.exact import lbfgs

    def fun(x):
        return rosen(x), rosen_der(x)

    x0 = np.array([-1.2, 1.0, -0.5, 0.8])
    res = lbfgs(fun, x0, gtol=1e-10, ftol=0.0, max_iter=500)
    assert res["success"] and "gradient" in res["message"]
    np.testing.assert_allclose(res["x"], 1.0, atol=1e-8)
    assert res["nfev"] >= res["nit"] > 0
    short = lbfgs(fun, x0, gtol=1e-10, max_iter=3)
    assert not short["success"] and short["nit"] == 3 and "max_iter" in short["message"]
    at_min = lbfgs(fun, np.ones(4), gtol=1e-10)
    assert at_min["success"] and at_min["nit"] == 0 and at_min["nfev"] == 1


def test_lbfgs_matches_a_quadratic_minimiser():
    from xclib.exact import lbfgs
    rng = np.random.default_rng(5)
    A = rng.normal(size=(30, 30))
    H = A @ A.T + np.diag(np.logspace(-2, 3, 30))  # condition number ~1e5
    c = rng.normal(size=30)

    def fun(x):
        g = H @ x - c
        return 0.5 * x @ (g - c), g

    res = lbfgs(fun, np.zeros(30), gtol=1e-6, ftol=0.0, max_iter=5000)
    assert res["success"] and np.abs(res["jac"]).max() <= 1e-6
    # ‖x − x*‖ ≤ ‖g‖ / λ_min(H)
    err = np.linalg.norm(res["x"] - np.linalg.solve(H, c))
    assert err <= np.linalg.norm(res["jac"]) / np.linalg.eigvalsh(H)[0] * (1 + 1e-6)


def _correlated_counts(n=800, d=40, k=5, seed=3):
    """Non-negative, row-normalised features with a dominant mean direction (like pixels or
    word counts): the second moment has a few large eigenvalues and a long tail."""
    rng = np.random.default_rng(seed)
    base = rng.gamma(2.0, 1.0, size=d)
    X = rng.poisson(base * rng.gamma(5.0, 0.2, size=(n, 1)) * rng.uniform(0.5, 1.5, (n, d)))
    X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    W = rng.normal(size=(k, d)) * 4
    y = np.argmax(X @ W.T + rng.gumbel(size=(n, k)), axis=1)
    return sp.csr_matrix(X), y


@pytest.mark.parametrize("intercept", [False, True])
def test_top_eigenpairs_match_a_dense_eigendecomposition(intercept):
    from xclib.exact import top_eigenpairs
    rng = np.random.default_rng(4)
    n, d = 500, 40  # a spectrum decaying by 0.6 a step: the subspace iteration converges fast
    U = np.linalg.qr(rng.normal(size=(n, d)))[0]
    V = np.linalg.qr(rng.normal(size=(d, d)))[0]
    A = (U * 0.6 ** np.arange(d)) @ V.T * np.sqrt(n)
    X = sp.csr_matrix(A)
    if intercept:
        A = np.hstack([A, np.ones((n, 1))])
    lam_ref, vec_ref = np.linalg.eigh(A.T @ A / n)
    lam_ref, vec_ref = lam_ref[::-1], vec_ref[:, ::-1]
    lam, Q = top_eigenpairs(X, 4, intercept=intercept)
    assert lam.shape == (5,) and Q.shape == (A.shape[1], 4)
    np.testing.assert_allclose(lam, lam_ref[:5], rtol=1e-6)
    np.testing.assert_allclose(np.abs(Q.T @ vec_ref[:, :4]), np.eye(4), atol=1e-5)
    X, _ = _correlated_counts()
    # the whole space: exact (rank clipped to width − 1)
    lam_all, Q_all = top_eigenpairs(X[:, :6], 10)
    ref6 = np.linalg.eigvalsh((X[:, :6].T @ X[:, :6]).toarray() / X.shape[0])[::-1]
    assert Q_all.shape == (6, 5)
    np.testing.assert_allclose(lam_all, ref6, rtol=1e-10)


@pytest.mark.parametrize("intercept", [False, True])
def test_feature_preconditioner_is_the_inverse_of_its_matrix(intercept):
    from xclib.exact import feature_preconditioner, top_eigenpairs
    X, _ = _correlated_counts(d=12)
    k, d, alpha = 3, 12, 1e-3
    apply = feature_preconditioner(X, k, alpha, intercept=intercept, rank=4)
    lam, Q = top_eigenpairs(X, 4, intercept=intercept)
    tau = 2.0 * k * alpha
    width = d + intercept
    M = Q @ np.diag(lam[:-1] + tau) @ Q.T + (lam[-1] + tau) * (np.eye(width) - Q @ Q.T)
    v = np.random.default_rng(0).normal(size=k * width)
    # θ = [W.ravel(), b]: per class the weights of the augmented row [x, 1]
    V = v[:k * d].reshape(k, d)
    if intercept:
        V = np.hstack([V, v[k * d:, None]])
    ref = np.linalg.solve(M, V.T).T
    want = np.concatenate([ref[:, :d].ravel(), ref[:, d]]) if intercept else ref.ravel()
    np.testing.assert_allclose(apply(v), want, rtol=1e-10, atol=1e-12)
    assert feature_preconditioner(sp.csr_matrix((5, 4)), 2, 1e-3) is None  # C = 0


@pytest.mark.parametrize("intercept", [False, True])
def test_curvature_at_zero_is_the_hessian_quadratic_form(intercept):
    from xclib.exact import _curvature_at_zero
    X, y = _correlated_counts(n=60, d=7, k=4)
    k, d, n, alpha = 4, 7, 60, 0.05
    size = k * d
    curvature = _curvature_at_zero(X, k, alpha)
    direction = np.random.default_rng(2).normal(size=size + (k if intercept else 0))

    def grad(theta):
        b = theta[size:] if intercept else None
        _, g, gb = softmax_objective(theta[:size].reshape(k, d), X, y, alpha * n, b)
        return np.concatenate([g.ravel(), gb]) / n if intercept else g.ravel() / n

    eps = 1e-5
    fd = direction @ (grad(eps * direction) - grad(-eps * direction)) / (2 * eps)
    assert curvature(direction) == pytest.approx(fd, rel=1e-7)


def test_lbfgs_with_the_exact_hessian_as_preconditioner_takes_newton_steps():
    from xclib.exact import lbfgs
    rng = np.random.default_rng(5)
    A = rng.normal(size=(30, 30))
    H = A @ A.T + np.diag(np.logspace(-2, 3, 30))
    c = rng.normal(size=30)

    def fun(x):
        g = H @ x - c
        return 0.5 * x @ (g - c), g

    res = lbfgs(fun, np.zeros(30), gtol=1e-8, ftol=0.0,
                precondition=lambda v: np.linalg.solve(H, v), curvature=lambda d: d @ H @ d)
    assert res["success"] and res["nit"] == 1 and res["nfev"] == 1 + 1
    np.testing.assert_allclose(res["x"], np.linalg.solve(H, c), rtol=1e-10)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_preconditioned_fit_reaches_the_same_optimum_in_fewer_evaluations(monkeypatch,
                                                                           fit_intercept):
    import xclib.exact as exact
    X, y = _correlated_counts()
    alpha = 1.0 / X.shape[0]
    ours = SoftmaxRegression(alpha=alpha, fit_intercept=fit_intercept, tol=1e-8).fit(X, y)
    monkeypatch.setattr(exact, "feature_preconditioner", lambda *a, **kw: None)
    monkeypatch.setattr(exact, "_curvature_at_zero", lambda *a, **kw: None)
    plain = SoftmaxRegression(alpha=alpha, fit_intercept=fit_intercept, tol=1e-8).fit(X, y)
    assert ours.converged_ and plain.converged_
    assert ours.objective_ == pytest.approx(plain.objective_, rel=1e-10)
    np.testing.assert_allclose(ours.predict_proba(X), plain.predict_proba(X), atol=1e-5)
    assert ours.n_fev_ < 0.7 * plain.n_fev_, (ours.n_fev_, plain.n_fev_)
