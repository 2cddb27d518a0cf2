"""Tests of xclib.sqb: the quadratic bound, the batch statistics, the inexact solvers, SQB and
its baselines (all on the same ℓ2-regularised logistic objective)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, lsqr
from scipy.special import expit, logsumexp
from sklearn.linear_model import LogisticRegression

from xclib import datasets
from xclib.base import DivergenceWarning
from xclib.sqb import (
    SQB, LogisticASGD, LogisticLBFGS, LogisticSAG, LogisticSGD, MultinomialSQB, Solver,
    asgd_epoch, batch_curvature, batch_curvature_multinomial, batch_mu, batch_mu_multinomial,
    batch_schedule, bound_factors, bound_stats, cg_sigma, curvature_weight, logistic_objective,
    logistic_optimum, lsqr_sigma, sag_epoch, sgd_epoch, sigma_matvec, softmax_bound_matvec,
    softmax_bound_row, softmax_bound_weights,
    sqb_iterations,
)
from xclib.exact import SoftmaxRegression, softmax_objective

#: The paper's semistochastic schedule (Section 5, adult), as parameters of SQB.
PAPER = dict(solver="lsqr", n_inner=5, b1_mu=5, b1_sigma=5, gamma_mu=0.05, gamma_sigma=0.001,
             cap_mu=None, cap_sigma=200, learning_rate=1.0)


def _omega(seed, n=6, d=4, scale=1.0):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, d)) * scale
    log_h = rng.normal(size=n)
    return F, log_h, rng


def _log_z(F, log_h, theta):
    return logsumexp(log_h + F @ theta)


def _data(seed=0, n=60, d=5, sparse=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)
    w = rng.normal(size=d)
    y = (rng.random(n) < expit(X @ w)).astype(np.int64)
    return (sp.csr_matrix(X) if sparse else X), y


# -- the bound (Algorithm 1, eq. 3) -----------------------------------------------------------
def test_curvature_weight_limits():
    assert curvature_weight(0.0) == 0.25
    assert curvature_weight(np.inf) == 0.0
    for t in (1e-6, 1e-3, 0.5, -2.0, 30.0):
        assert curvature_weight(t) == pytest.approx(np.tanh(t / 2) / (2 * t), rel=1e-12)
    assert curvature_weight(5e-5) == pytest.approx(np.tanh(2.5e-5) / 1e-4, rel=1e-14)


@pytest.mark.parametrize("seed", range(5))
def test_bound_holds_everywhere_and_is_tight_at_anchor(seed):
    F, log_h, rng = _omega(seed, scale=1.5)
    anchor = rng.normal(size=F.shape[1])
    log_z, r, S = bound_stats(F, log_h, anchor)
    # tight: value and gradient (r = E_p[f]) at θ̃
    p = np.exp(log_h + F @ anchor - _log_z(F, log_h, anchor))
    assert log_z == pytest.approx(_log_z(F, log_h, anchor), rel=1e-12)
    np.testing.assert_allclose(r, p @ F, rtol=1e-10, atol=1e-12)
    # holds at many random θ, near and far
    for scale in (0.01, 0.3, 1.0, 5.0):
        for _ in range(200):
            theta = anchor + scale * rng.normal(size=F.shape[1])
            delta = theta - anchor
            bound = log_z + 0.5 * delta @ S @ delta + delta @ r
            assert _log_z(F, log_h, theta) <= bound + 1e-10


@pytest.mark.parametrize("seed", range(5))
def test_bound_curvature_dominates_covariance(seed):
    F, log_h, rng = _omega(seed, n=8, d=3)
    anchor = rng.normal(size=3)
    _, r, S = bound_stats(F, log_h, anchor)
    p = np.exp(log_h + F @ anchor - _log_z(F, log_h, anchor))
    cov = (F - r).T @ ((F - r) * p[:, None])
    assert np.linalg.eigvalsh(S - cov).min() >= -1e-12


def test_bound_factors_lemma4_and_h_zero():
    F, log_h, rng = _omega(7)
    theta = rng.normal(size=F.shape[1])
    log_z, r, L, D = bound_factors(F, log_h, theta)
    _, _, S = bound_stats(F, log_h, theta)
    np.testing.assert_allclose(L.T @ (D[:, None] * L), S, rtol=1e-12, atol=1e-14)
    assert D[0] == 0.0  # the first term (z → 0⁺) adds no curvature
    # h(y) = 0 removes y from Ω
    log_h2 = np.r_[log_h, -np.inf]
    F2 = np.vstack([F, rng.normal(size=F.shape[1])])
    log_z2, r2, S2 = bound_stats(F2, log_h2, theta)
    assert log_z2 == pytest.approx(log_z)
    np.testing.assert_allclose(r2, r)
    np.testing.assert_allclose(S2, S)


def test_bound_extreme_scores_stay_finite():
    F = np.array([[0.0, 0.0], [800.0, 0.0], [0.0, -900.0]])
    log_z, r, S = bound_stats(F, np.zeros(3), np.ones(2))
    assert np.isfinite(log_z) and np.all(np.isfinite(r)) and np.all(np.isfinite(S))
    assert log_z == pytest.approx(800.0)


def test_binary_special_case_is_jaakkola_jordan():
    """Ω = {0, 1}, f(0) = 0, f(1) = x: r = σ(u) x and S = tanh(u/2)/(2u) x xᵀ (both orders)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=4)
    theta = rng.normal(size=4)
    u = x @ theta
    for F in (np.vstack([np.zeros(4), x]), np.vstack([x, np.zeros(4)])):
        log_z, r, S = bound_stats(F, np.zeros(2), theta)
        assert log_z == pytest.approx(np.logaddexp(0, u))
        np.testing.assert_allclose(r, expit(u) * x, rtol=1e-12)
        np.testing.assert_allclose(S, curvature_weight(u) * np.outer(x, x), rtol=1e-12)


# -- the batch statistics and the factored operator ------------------------------------------
def test_batch_mu_is_minibatch_gradient_and_unbiased():
    X, y = _data(1)
    theta = np.random.default_rng(0).normal(size=X.shape[1])
    alpha = 0.1
    batch = np.array([3, 7, 7, 20], dtype=np.int64)
    mu = np.empty(X.shape[1])
    batch_mu(X.indptr, X.indices, X.data, y.astype(float), theta, batch, mu)
    Xd = X.toarray()
    np.testing.assert_allclose(mu, Xd[batch].T @ (expit(Xd[batch] @ theta) - y[batch]) / 4,
                               rtol=1e-12)
    # Lemma 1: averaging μ_T over all batches of size 1 gives the full data gradient
    full = np.zeros_like(mu)
    for j in range(X.shape[0]):
        batch_mu(X.indptr, X.indices, X.data, y.astype(float), theta, np.array([j]), mu)
        full += mu / X.shape[0]
    _, g = logistic_objective(theta, X, y, alpha)
    np.testing.assert_allclose(full + alpha * theta, g, rtol=1e-10)


def test_logistic_objective_gradient_finite_differences():
    X, y = _data(2)
    theta = np.random.default_rng(1).normal(size=X.shape[1])
    f, g = logistic_objective(theta, X, y, 0.3)
    eps = 1e-6
    fd = [(logistic_objective(theta + eps * e, X, y, 0.3, False)
           - logistic_objective(theta - eps * e, X, y, 0.3, False)) / (2 * eps)
          for e in np.eye(X.shape[1])]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def _sigma(X, theta, batch, alpha):
    Xd = X.toarray()[batch]
    c = np.array([curvature_weight(u) for u in Xd @ theta]) / len(batch)
    return Xd.T @ (c[:, None] * Xd) + alpha * np.eye(X.shape[1]), c


def test_factored_operator_equals_explicit_matrix():
    X, _ = _data(3)
    theta = np.random.default_rng(2).normal(size=X.shape[1])
    batch = np.array([0, 5, 9, 11, 40], dtype=np.int64)
    A, c = _sigma(X, theta, batch, 0.05)
    w = np.empty(5)
    batch_curvature(X.indptr, X.indices, X.data, theta, batch, w)
    np.testing.assert_allclose(w, c, rtol=1e-12)
    v = np.random.default_rng(4).normal(size=X.shape[1])
    out = np.empty_like(v)
    sigma_matvec(X.indptr, X.indices, X.data, batch, w.reshape(-1, 1, 1), 0.05, v, out)
    np.testing.assert_allclose(out, A @ v, rtol=1e-12)
    # the bound of each row in the batch, summed, is the same Σ (Algorithm 1 over the batch)
    S = sum(bound_stats(np.vstack([np.zeros(X.shape[1]), X[j].toarray().ravel()]),
                        np.zeros(2), theta)[2] for j in batch) / len(batch)
    np.testing.assert_allclose(S + 0.05 * np.eye(X.shape[1]), A, rtol=1e-10)


@pytest.mark.parametrize("n_inner", [1, 2, 3, 5])
def test_lsqr_and_cg_match_scipy_and_converge(n_inner):
    X, _ = _data(4, n=80, d=8)
    theta = np.random.default_rng(5).normal(size=8)
    batch = np.arange(0, 80, 3, dtype=np.int64)
    A, c = _sigma(X, theta, batch, 0.01)
    rhs = np.random.default_rng(6).normal(size=8)
    x = np.empty(8)
    M = c.reshape(-1, 1, 1)
    lsqr_sigma(X.indptr, X.indices, X.data, batch, M, 0.01, rhs, n_inner, x)
    op = LinearOperator((8, 8), matvec=lambda v: A @ v, rmatvec=lambda v: A @ v)
    ref = lsqr(op, rhs, atol=0, btol=0, conlim=0, iter_lim=n_inner)[0]
    np.testing.assert_allclose(x, ref, rtol=1e-8, atol=1e-10)
    # CG: the Krylov minimiser of the A-norm error, compared with a dense transcription
    cg_sigma(X.indptr, X.indices, X.data, batch, M, 0.01, rhs, n_inner, x)
    K = np.column_stack([np.linalg.matrix_power(A, i) @ rhs for i in range(n_inner)])
    Q, _ = np.linalg.qr(K)
    ref_cg = Q @ np.linalg.solve(Q.T @ A @ Q, Q.T @ rhs)
    np.testing.assert_allclose(x, ref_cg, rtol=1e-6, atol=1e-9)
    # both solve the system after d iterations
    for solver in (lsqr_sigma, cg_sigma):
        solver(X.indptr, X.indices, X.data, batch, M, 0.01, rhs, 40, x)
        np.testing.assert_allclose(A @ x, rhs, rtol=1e-6, atol=1e-8)


def test_batch_schedule():
    k = np.arange(1, 8)
    np.testing.assert_array_equal(batch_schedule(k, 5, 8, 0.5), [5, 6, 6, 7, 7, 8, 8])
    np.testing.assert_array_equal(batch_schedule(k, 5, 200, 0.001), [5] * 7)


# -- the baseline kernels against NumPy transcriptions ----------------------------------------
def test_sgd_asgd_sag_kernels_match_numpy():
    X, y = _data(5, n=30)
    Xd, yf = X.toarray(), y.astype(float)
    order = np.random.default_rng(0).integers(0, 30, size=50)
    alpha, a = 0.05, 0.3
    th = np.zeros(5)
    sgd_epoch(X.indptr, X.indices, X.data, yf, th, alpha, a, order)
    ref = np.zeros(5)
    avg_ref = np.zeros(5)
    for t, i in enumerate(order):
        ref = (1 - a * alpha) * ref - a * (expit(Xd[i] @ ref) - yf[i]) * Xd[i]
        avg_ref += (ref - avg_ref) / (t + 1)
    np.testing.assert_allclose(th, ref, rtol=1e-12, atol=1e-14)
    th, avg = np.zeros(5), np.zeros(5)
    assert asgd_epoch(X.indptr, X.indices, X.data, yf, th, avg, 0, alpha, a, order) == 50
    np.testing.assert_allclose(avg, avg_ref, rtol=1e-12, atol=1e-14)
    # SAG with a constant step
    sq = (Xd ** 2).sum(1)
    th, mem, seen, dsum = np.zeros(5), np.zeros(30), np.zeros(30, bool), np.zeros(5)
    sag_epoch(X.indptr, X.indices, X.data, yf, sq, th, mem, seen, dsum, 0, alpha, a, 1.0, False,
              order)
    ref, G, S = np.zeros(5), np.zeros(30), set()
    for i in order:
        G[i] = expit(Xd[i] @ ref) - yf[i]
        S.add(i)
        ref = (1 - a * alpha) * ref - a / len(S) * (G @ Xd)
    np.testing.assert_allclose(th, ref, rtol=1e-10, atol=1e-13)


# -- estimators reach the same optimum ---------------------------------------------------------
@pytest.fixture(scope="module")
def problem():
    X, y = _data(11, n=400, d=6)
    alpha = 1.0 / 400
    theta, fstar = logistic_optimum(X, y, alpha)
    return X, y, alpha, theta, fstar


def test_optimum_matches_sklearn(problem):
    """The paper's η = 1/T is alpha = 1/T, which is scikit-learn's C = 1/(alpha·T) = 1."""
    X, y, alpha, theta, _ = problem
    ref = LogisticRegression(C=1.0 / (alpha * X.shape[0]), fit_intercept=False, tol=1e-12,
                             max_iter=10000).fit(X, y)
    np.testing.assert_allclose(theta, ref.coef_.ravel(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("est", [
    SQB(**{**PAPER, "n_inner": 6, "gamma_mu": 40, "gamma_sigma": 40}),
    SQB(**{**PAPER, "n_inner": 6, "solver": "cg", "gamma_mu": 40, "gamma_sigma": 40,
           "cap_sigma": None}),
    SQB(),
    LogisticSAG(), LogisticSAG(line_search=True),
], ids=["sqb-paper-lsqr", "sqb-paper-cg", "sqb-default", "sag", "sagls"])
def test_estimators_reach_lbfgs_optimum(problem, est):
    X, y, alpha, theta, fstar = problem
    est.set_params(n_epochs=60, random_state=0, alpha=alpha).fit(X, y)
    assert est.history_["train_loss"][-1] - fstar < 1e-6
    np.testing.assert_allclose(est.theta_, theta, atol=2e-3)
    assert len(est.history_["passes"]) == 60 and not est.diverged_


def test_lbfgs_rounds_are_iterations(problem):
    X, y, alpha, theta, fstar = problem
    est = LogisticLBFGS(alpha=alpha, max_iter=60, tol=0.0).fit(X, y)
    assert est.history_["train_loss"][-1] - fstar < 1e-9
    np.testing.assert_allclose(est.theta_, theta, atol=1e-4)
    passes = np.array(est.history_["passes"])
    assert len(passes) == 60 and np.all(np.diff(passes) >= 0) and passes[0] >= 1
    # a run of fewer iterations is the start of the longer one
    short = LogisticLBFGS(alpha=alpha, max_iter=5, tol=0.0).fit(X, y)
    np.testing.assert_array_equal(short.history_["train_loss"], est.history_["train_loss"][:5])
    # tol stops early; the remaining rounds repeat the last iterate
    loose = LogisticLBFGS(alpha=alpha, max_iter=60, tol=1e-3).fit(X, y)
    assert loose.history_["passes"][-1] < passes[-1]
    assert loose.history_["train_loss"][-1] == loose.history_["train_loss"][-2]


def test_sgd_and_asgd_get_close(problem):
    X, y, alpha, _, fstar = problem
    for cls in (LogisticSGD, LogisticASGD):
        est = cls(learning_rate=0.05, alpha=alpha, n_epochs=30, random_state=0).fit(X, y)
        assert est.history_["train_loss"][-1] - fstar < 1e-2


def test_sqb_effective_passes_and_determinism(problem):
    X, y, alpha, *_ = problem
    params = {**PAPER, "learning_rate": 0.1, "alpha": alpha, "n_epochs": 4, "random_state": 3}
    a = SQB(**params).fit(X, y)
    b = SQB(**params).fit(X, y)
    assert not a.diverged_
    np.testing.assert_array_equal(a.coef_, b.coef_)
    passes = np.array(a.history_["passes"])
    assert np.all(passes >= np.arange(1, 5)) and np.all(passes < np.arange(1, 5) + 0.1)
    assert a.n_iter_ > 4
    # both batches all rows (the default's) at the step 1: one iteration, two passes, a round
    d = SQB(learning_rate=1.0, n_epochs=4).fit(X, y)
    assert d.history_["passes"] == [2.0, 4.0, 6.0, 8.0] and d.n_iter_ == 4


def test_default_sqb_is_monotone_majorization(problem):
    """Full batches + CG: every step lowers a majorizer, so the cost never increases."""
    X, y, alpha, _, fstar = problem
    est = SQB(alpha=alpha, n_inner=2, n_epochs=30).fit(X, y)
    loss = np.r_[logistic_objective(np.zeros(X.shape[1]), X, y, alpha, False),
                 est.history_["train_loss"]]
    assert np.all(np.diff(loss) <= 1e-12)
    assert loss[-1] - fstar < 1e-6


def test_solver_codes_in_the_kernel(problem):
    """sqb_iterations reads a Solver code: LSQR and CG give the same exact-solve step."""
    X, y, alpha, *_ = problem
    n = X.shape[0]
    full = np.array([n], dtype=np.int64)
    empty = np.empty(0, dtype=np.int64)
    steps = []
    for solver in (Solver.LSQR, Solver.CG):
        theta = np.zeros(X.shape[1])
        sqb_iterations(X.indptr, X.indices, X.data, y.astype(float), theta, alpha, 1.0, 40,
                       int(solver), full, full, empty, empty)
        steps.append(theta)
    np.testing.assert_allclose(steps[0], steps[1], rtol=1e-8, atol=1e-12)
    assert np.linalg.norm(steps[0]) > 0


def test_predict_proba_is_logistic(problem):
    X, y, *_ = problem
    est = LogisticSAG(n_epochs=3, random_state=0).fit(X, y)
    p = est.predict_proba(X)
    np.testing.assert_allclose(p[:, 1], expit(X @ est.theta_), rtol=1e-10)
    assert est.coef_.shape == (2, X.shape[1]) and np.all(est.coef_[0] == 0)


@pytest.mark.parametrize("est", [SQB(), MultinomialSQB(), LogisticSGD(), LogisticASGD(),
                                 LogisticSAG(), LogisticLBFGS()],
                         ids=lambda e: type(e).__name__)
def test_fitted_model_pickles_small(est):
    """No training data in a fitted model: the pickle does not grow with the rows."""
    import pickle

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 20))
    y = (X[:, 0] + rng.normal(size=5000) > 0).astype(int)
    est.fit(X, y)
    size = len(pickle.dumps(est))
    assert size < 4 * est.coef_.nbytes + 8000, size  # X alone is 800 kB
    assert not hasattr(est, "_state")


def test_bad_input():
    X, y = _data(0)
    with pytest.raises(ValueError, match="Only binary"):
        SQB(n_epochs=1).fit(X, np.arange(X.shape[0]) % 3)
    cases = [
        (SQB(solver="qr"), r"'solver' parameter of SQB must be a str among"),
        (SQB(n_inner=0), r"'n_inner' parameter of SQB must be an int in the range \[1, inf\)"),
        # negative growth rates or caps would raise IndexError deep in a fit; cap_mu=0 learns nothing
        (SQB(gamma_mu=-0.1), r"'gamma_mu' parameter .* range \[0(\.0)?, inf\)"),
        (SQB(gamma_sigma=-1), r"'gamma_sigma' parameter .* range \[0(\.0)?, inf\)"),
        (SQB(cap_mu=-5), r"'cap_mu' parameter .* range \[1, inf\) or None"),
        (SQB(cap_mu=0), r"'cap_mu' parameter .* range \[1, inf\) or None"),
        (SQB(cap_sigma=0), r"'cap_sigma' parameter .* range \[1, inf\) or None"),
        (SQB(b1_sigma=0), r"'b1_sigma' parameter .* range \[1, inf\) or None"),
        (MultinomialSQB(alpha=-1.0), r"'alpha' parameter of MultinomialSQB .* \[0(\.0)?, inf\)"),
        (LogisticSGD(alpha=-1.0), r"'alpha' parameter of LogisticSGD"),
        (LogisticSGD(learning_rate=0.0), r"'learning_rate' parameter .* \(0(\.0)?, inf\)"),
        (LogisticSAG(learning_rate=-1.0), r"'learning_rate' parameter of LogisticSAG"),
        (LogisticLBFGS(max_iter=0), r"'max_iter' parameter .* \[1, inf\)"),
    ]
    for est, msg in cases:
        with pytest.raises(ValueError, match=msg):
            est.fit(X, y)


# -- divergence (unchecked, SQB on X·1e50 climbs from 4.5e3 to 6.7e7 with diverged_ False) ----
def test_divergence_on_huge_features_is_flagged_or_prevented():
    X, y = _data(12, n=300, d=10, sparse=False)
    X = X * 1e50
    # the paper's schedule (5-row curvature batches) blows up: flagged, and the best weights kept
    paper = SQB(**PAPER, n_epochs=10, random_state=0)
    with pytest.warns(DivergenceWarning, match="SQB diverged"):
        paper.fit(X, y)
    assert paper.diverged_ and paper.n_epochs_ < 10
    start = logistic_objective(np.zeros(X.shape[1]), X, y, paper.alpha, False)
    assert logistic_objective(paper.theta_, X, y, paper.alpha, False) <= start
    # the default (batch bound method) is invariant to the scale of X up to the ridge: it
    # converges as on the unscaled data, and its cost never increases
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        default = SQB(alpha=0.0, random_state=0).fit(X, y)
        ref = SQB(alpha=0.0, random_state=0).fit(X / 1e50, y)
    assert not default.diverged_
    assert np.all(np.diff(default.history_["train_loss"]) <= 1e-12)
    np.testing.assert_allclose(default.history_["train_loss"], ref.history_["train_loss"],
                               rtol=1e-6)


# -- the defaults: SQB() on a9a gets scikit-learn's test error --------------------------------
def test_default_sqb_matches_sklearn_on_a9a():
    try:
        Xtr, ytr = datasets.load("a9a", "train")
        Xte, yte = datasets.load("a9a", "test")
    except (FileNotFoundError, OSError, RuntimeError) as exc:  # offline without the data
        pytest.skip(f"a9a not available: {exc}")
    sk_error = 1.0 - LogisticRegression(max_iter=1000).fit(Xtr, ytr).score(Xte, yte)
    est = SQB(random_state=0).fit(Xtr, ytr)
    error = 1.0 - est.score(Xte, yte)
    assert not est.diverged_
    assert abs(error - sk_error) <= 0.01, (error, sk_error)


# -- multinomial SQB (beyond the paper) ---------------------------------------------------------
def test_softmax_bound_row_is_algorithm1_on_kron_features():
    rng = np.random.default_rng(8)
    K, D = 4, 3
    x = rng.normal(size=D)
    W = rng.normal(size=(K, D))
    M = np.empty((K, K))
    p = softmax_bound_row(W @ x, M)
    F = np.kron(np.eye(K), x)  # rows f(y) = e_y ⊗ x
    log_z, r, S = bound_stats(F, np.zeros(K), W.ravel())
    np.testing.assert_allclose(p, np.exp(W @ x - logsumexp(W @ x)), rtol=1e-12)
    np.testing.assert_allclose(r, np.kron(p, x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.kron(M, np.outer(x, x)), S, rtol=1e-10, atol=1e-13)


def test_multinomial_batch_statistics_and_kron_operator():
    rng = np.random.default_rng(9)
    X = sp.csr_matrix(rng.normal(size=(30, 5)) * (rng.random((30, 5)) < 0.7))
    K = 3
    y = rng.integers(0, K, 30)
    W = rng.normal(size=(K, 5))
    batch = np.array([1, 4, 4, 17, 29], dtype=np.int64)
    mu = np.empty(K * 5)
    batch_mu_multinomial(X.indptr, X.indices, X.data, y.astype(float), W.ravel(), K, batch, mu)
    _, g, _ = softmax_objective(W, X[batch], y[batch])
    np.testing.assert_allclose(mu, g.ravel() / len(batch), rtol=1e-10, atol=1e-13)
    M = np.empty((5, 2, K))
    batch_curvature_multinomial(X.indptr, X.indices, X.data, W.ravel(), K, batch, M)
    Xd = X.toarray()
    dense = np.empty((K, K))
    blocks = []
    for j in batch:
        softmax_bound_row(W @ Xd[j], dense)
        blocks.append(dense / len(batch))
    A = (sum(np.kron(Mb, np.outer(Xd[j], Xd[j])) for Mb, j in zip(blocks, batch))
         + 0.1 * np.eye(K * 5))
    v = rng.normal(size=K * 5)
    out = np.empty_like(v)
    sigma_matvec(X.indptr, X.indices, X.data, batch, M, 0.1, v, out)
    np.testing.assert_allclose(out, A @ v, rtol=1e-10, atol=1e-13)
    # the solvers run feature-major inside (_sigma_matvec_fm) and take and return W's
    # class-major layout: after K·D iterations both solve the formed system
    x = np.empty_like(v)
    for solver in (cg_sigma, lsqr_sigma):
        solver(X.indptr, X.indices, X.data, batch, M, 0.1, v, K * 5, x)
        np.testing.assert_allclose(A @ x, v, rtol=1e-7, atol=1e-9)
    # and one CG step is the exact line minimiser along the right-hand side
    cg_sigma(X.indptr, X.indices, X.data, batch, M, 0.1, v, 1, x)
    np.testing.assert_allclose(x, (v @ v) / (v @ A @ v) * v, rtol=1e-10)


@pytest.mark.parametrize("spread", [1.0, 30.0, 700.0])
def test_softmax_bound_matvec_is_the_formed_matrix(spread):
    """The O(K) product from the 2K factors equals ``M v`` with M formed by Algorithm 1, for
    scores so spread that exp(score) alone would overflow."""
    rng = np.random.default_rng(int(spread))
    for K in (2, 3, 17, 64):
        s = rng.normal(scale=spread, size=K)
        M, wq = np.empty((K, K)), np.empty((2, K))
        p = softmax_bound_row(s, M)
        np.testing.assert_allclose(softmax_bound_weights(s, wq), p, rtol=1e-9, atol=1e-12)
        for _ in range(3):
            v = rng.normal(size=K)
            out = np.empty(K)
            softmax_bound_matvec(wq, v, out)
            np.testing.assert_allclose(out, M @ v, rtol=1e-10, atol=1e-12 * np.abs(M).max())


def test_multinomial_sqb_reaches_softmax_regression_optimum():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(300, 4))
    y = np.argmax(X @ rng.normal(size=(4, 3)) + rng.gumbel(size=(300, 3)), axis=1)
    alpha = 1.0 / 300  # the same mean-scale ridge for both
    ref = SoftmaxRegression(alpha=alpha, tol=1e-12, max_iter=5000).fit(X, y)
    est = MultinomialSQB(alpha=alpha, n_inner=30, n_epochs=80, random_state=0).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=2e-4)
    f_ref = softmax_objective(ref.coef_, sp.csr_matrix(X), y, mu=alpha * 300,
                              with_grad=False) / 300
    assert est.history_["train_loss"][-1] == pytest.approx(f_ref, abs=1e-9)
    assert np.all(np.diff(est.history_["train_loss"]) <= 1e-12)  # majorization: monotone


# Every estimator with its DEFAULT parameters.


def test_same_batches_count_each_row_once(problem):
    """batches="same" (Lemma 4): S = T, so half-data batches make two iterations a pass."""
    X, y = problem[0], problem[1]
    n = X.shape[0]
    half = dict(b1_mu=n // 2, b1_sigma=n // 2, cap_mu=n // 2, cap_sigma=n // 2, n_epochs=1,
                random_state=0)
    indep = SQB(**half).fit(X, y)
    same = SQB(batches="same", **half).fit(X, y)
    assert indep.n_iter_ == 1 and same.n_iter_ == 2
    assert same.history_["passes"][-1] == pytest.approx(2 * (n // 2) / n)


def test_same_batch_step_stays_in_the_seen_span():
    """With S = T the gradient is in the range of Σ_T (Lemma 4): an exact solve with a tiny
    ridge keeps θ of order one; an independent S of the same size multiplies the part of μ_T
    it does not see by 1/alpha."""
    X, y = _data(seed=3, n=400, d=30)
    common = dict(b1_mu=5, b1_sigma=5, cap_mu=5, cap_sigma=5, n_inner=20, solver="lsqr",
                  alpha=1e-6, n_epochs=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = SQB(batches="same", **common).fit(X, y)
        indep = SQB(**common).fit(X, y)
    assert not same.diverged_ and np.linalg.norm(same.theta_) < 1e2
    assert indep.diverged_ or np.linalg.norm(indep.theta_) > 1e4


def test_gamma_as_a_fraction_of_t_is_gamma_t_rows(problem):
    """gamma_unit="fraction" grows the batches by γ·T rows an iteration: the same run as
    gamma_unit="rows" with γ·T."""
    X, y, alpha, *_ = problem
    n = X.shape[0]
    common = {**PAPER, "learning_rate": 0.1, "alpha": alpha, "n_epochs": 3,
              "random_state": 1}
    frac = SQB(**{**common, "gamma_mu": 0.05, "gamma_sigma": 0.01},
               gamma_unit="fraction").fit(X, y)
    rows = SQB(**{**common, "gamma_mu": 0.05 * n, "gamma_sigma": 0.01 * n}).fit(X, y)
    np.testing.assert_array_equal(frac.coef_, rows.coef_)
    assert frac.n_iter_ == rows.n_iter_
    assert frac.history_["passes"] == rows.history_["passes"] and not frac.diverged_
    # read as rows, the same γ grows the batches far more slowly: more, smaller steps
    slow = SQB(**{**common, "gamma_mu": 0.05, "gamma_sigma": 0.01}).fit(X, y)
    assert slow.n_iter_ > frac.n_iter_


@pytest.mark.parametrize("solver, per_step", [("cg", 2 + 3), ("lsqr", 2 + 2 * 3 + 1)])
def test_row_products_charge_the_inner_solve(problem, solver, per_step):
    """Full batches: T gradient rows, T curvature rows, and l (CG) or 2l + 1 (LSQR) products
    of Σ with a vector over all T rows, per step."""
    X, y, alpha, *_ = problem
    params = dict(alpha=alpha, solver=solver, n_inner=3, n_epochs=3, learning_rate=1.0)
    rows = SQB(**params).fit(X, y)
    products = SQB(**params, pass_unit="row_products").fit(X, y)
    assert rows.history_["passes"] == [2.0, 4.0, 6.0]
    assert rows.history_["product_passes"] == [per_step * k for k in (1.0, 2.0, 3.0)]
    assert products.history_["passes"] == rows.history_["product_passes"]
    np.testing.assert_array_equal(rows.coef_, products.coef_)  # one step a round in both


def test_row_products_of_the_paper_schedule(problem):
    """Small batches: a round ends once the charged row products reach one more pass, so
    charging the solve makes fewer iterations a round; the passes are the products / T."""
    X, y, alpha, *_ = problem
    params = {**PAPER, "learning_rate": 0.1, "alpha": alpha, "n_epochs": 4,
              "random_state": 0}
    rows = SQB(**params).fit(X, y)
    products = SQB(**params, pass_unit="row_products").fit(X, y)
    assert not rows.diverged_ and not products.diverged_
    assert products.n_iter_ < rows.n_iter_
    np.testing.assert_allclose(products.history_["passes"],
                               products.history_["product_passes"])
    assert np.all(np.array(rows.history_["product_passes"])
                  > np.array(rows.history_["passes"]))


@pytest.mark.parametrize("bad", [dict(gamma_unit="percent"), dict(pass_unit="rows")])
def test_sqb_rejects_unknown_units(problem, bad):
    X, y, *_ = problem
    with pytest.raises(ValueError, match=next(iter(bad))):
        SQB(**bad).fit(X, y)
