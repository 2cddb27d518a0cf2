"""SoftmaxRegression (the book's oracle) against scikit-learn and finite differences."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import approx_fprime
from sklearn.exceptions import ConvergenceWarning
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


@parametrize_with_checks([SoftmaxRegression()])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
