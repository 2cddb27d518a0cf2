"""SoftmaxRegression (the book's oracle) against scikit-learn and finite differences."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import approx_fprime
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

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
    mu = 0.5
    ours = SoftmaxRegression(mu=mu, fit_intercept=fit_intercept).fit(Xtr, ytr)
    ref = LogisticRegression(C=1 / mu, fit_intercept=fit_intercept, tol=1e-10, max_iter=10_000).fit(Xtr, ytr)
    assert ours.converged_
    np.testing.assert_allclose(ours.predict_proba(Xte), ref.predict_proba(Xte), atol=1e-5)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)


def test_log_likelihood_is_eq2_at_the_optimum():
    X, y = _data(n=200)
    m = SoftmaxRegression(mu=1.0).fit(X, y)
    L = m.log_likelihood(X, y)
    assert L == pytest.approx(-m.objective_ * X.shape[0], rel=1e-10)
    # the optimum beats a perturbed point
    m2 = SoftmaxRegression(mu=1.0)
    m2.__dict__.update(m.__dict__)
    m2.coef_ = m.coef_ + 1e-3
    assert m2.log_likelihood(X, y) < L


def test_string_labels_and_errors():
    X, y = _data(n=100)
    labels = np.array(["a", "b", "c", "d", "e", "f"])[y]
    m = SoftmaxRegression(mu=1.0).fit(X, labels)
    assert set(m.predict(X)) <= set(labels)
    with pytest.raises(ValueError, match="not seen in training"):
        m.log_likelihood(X, np.full(100, "zzz"))
    with pytest.raises(ValueError, match="mu"):
        SoftmaxRegression(mu=-1).fit(X, y)
    Xn = X.toarray()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SoftmaxRegression().fit(Xn, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        SoftmaxRegression().fit(X, np.zeros(100))


@parametrize_with_checks([SoftmaxRegression(mu=1.0)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
