"""Tests of xclib.sampled: the OVE / NCE / IS surrogates and their minibatch SGD kernel."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from xclib.base import DivergenceWarning
from xclib.sampled import (
    NCE, OVE, ImportanceSampling, Surrogate, sampled_coefficients, sampled_epoch,
)

KINDS = list(Surrogate)
OVE_LOSS, NCE_LOSS, IS_LOSS = Surrogate.OVE, Surrogate.NCE, Surrogate.IS
ESTIMATORS = [OVE, NCE, ImportanceSampling]


def _loss_np(kind, y, s_y, s, classes, K):
    """Plain NumPy transcription of the three surrogates (module docstring)."""
    m = len(s)
    w = K / m
    other = classes != y
    if kind == OVE_LOSS:
        return float(np.sum(w * np.logaddexp(0.0, s[other] - s_y)))
    if kind == NCE_LOSS:
        shift = np.log(m / K)
        return float(np.logaddexp(0.0, -(s_y - shift)) + np.sum(np.logaddexp(0.0, s - shift)))
    return float(np.logaddexp.reduce(np.r_[s_y, s[other] + np.log(w)]) - s_y)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(5))
def test_coefficients_are_the_gradient_of_the_surrogate(kind, seed):
    rng = np.random.default_rng(seed)
    K, m, y = 12, 5, 3
    classes = rng.integers(0, K, m)
    classes[0] = y  # a sampled class equal to the label must be handled
    s_y = rng.normal() * 3
    s = rng.normal(size=m) * 3
    out = np.empty(m + 1)
    loss = sampled_coefficients(kind, y, s_y, s, classes, K, out)
    assert loss == pytest.approx(_loss_np(kind, y, s_y, s, classes, K), rel=1e-12)
    h = 1e-6
    num_y = (_loss_np(kind, y, s_y + h, s, classes, K) - _loss_np(kind, y, s_y - h, s, classes, K)) / (2 * h)
    assert out[0] == pytest.approx(num_y, rel=1e-6, abs=1e-8)
    for j in range(m):
        e = np.zeros(m); e[j] = h
        num = (_loss_np(kind, y, s_y, s + e, classes, K) - _loss_np(kind, y, s_y, s - e, classes, K)) / (2 * h)
        assert out[1 + j] == pytest.approx(num, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("kind", KINDS)
def test_coefficients_do_not_overflow(kind):
    out = np.empty(3)
    loss = sampled_coefficients(kind, 0, -800.0, np.array([900.0, -900.0]), np.array([1, 2]), 5, out)
    assert np.all(np.isfinite(out)) and np.isfinite(loss)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("lr,alpha,bs,intercept", [
    (0.7, 0.0, 5, False), (0.7, 0.3, 5, True), (5.0, 2.0, 2, True),  # the last refolds s < 1e-6
])
def test_epoch_matches_numpy_transcription(kind, lr, alpha, bs, intercept):
    """Each step: W ← (W − η·mean gradient)/(1 + η·alpha), b ← b − η·mean gradient (no ridge)."""
    rng = np.random.default_rng(0)
    N, D, K, m = 23, 7, 6, 3
    X = sp.random(N, D, density=0.5, random_state=1, format="csr")
    y = rng.integers(0, K, N)
    order = rng.integers(0, N, N)
    classes = rng.integers(0, K, ((N + bs - 1) // bs, m))
    W = rng.normal(size=(K, D)) * 0.3
    b = rng.normal(size=K) * 0.3
    W_ref, b_ref = W.copy(), b.copy()
    sampled_epoch(int(kind), X.indptr, X.indices, X.data, y, W, b, order, classes, lr, alpha,
                  bs, intercept)
    Xd = X.toarray()
    for t in range(classes.shape[0]):
        rows = order[t * bs:(t + 1) * bs]
        G, g = np.zeros_like(W_ref), np.zeros(K)
        for i in rows:
            out = np.empty(m + 1)
            sc = W_ref @ Xd[i] + b_ref
            sampled_coefficients(kind, y[i], sc[y[i]], sc[classes[t]], classes[t], K, out)
            G[y[i]] += out[0] * Xd[i]
            g[y[i]] += out[0]
            for j in range(m):
                G[classes[t, j]] += out[1 + j] * Xd[i]
                g[classes[t, j]] += out[1 + j]
        W_ref = (W_ref - lr * G / len(rows)) / (1 + lr * alpha)
        if intercept:
            b_ref = b_ref - lr * g / len(rows)
    np.testing.assert_allclose(W, W_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b, b_ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("Est", [OVE, NCE, ImportanceSampling])
def test_learns_separable_data_and_is_reproducible(Est):
    rng = np.random.default_rng(0)
    K, D, N = 4, 6, 400
    centers = rng.normal(size=(K, D)) * 3
    y = rng.integers(0, K, N)
    X = centers[y] + rng.normal(size=(N, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    a = Est(learning_rate=5.0, tol=None, n_epochs=15, batch_size=20, random_state=0).fit(X, y)
    b = Est(learning_rate=5.0, tol=None, n_epochs=15, batch_size=20, random_state=0).fit(sp.csr_matrix(X), y)
    assert a.score(X, y) > 0.9
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.history_["train_loss"][-1] < a.history_["train_loss"][0]


def test_biases_only_model_on_a_constant_feature():
    y = np.repeat([0, 1, 2], [60, 30, 10])
    est = OVE(learning_rate=1.0, tol=None, n_epochs=30, batch_size=10, random_state=0)
    est.fit(np.ones((100, 1)), y)
    b = est.coef_[:, 0]
    assert np.argmax(b) == 0 and np.argmin(b) == 2


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # noise features
def test_intercept_is_fitted():
    """Features of pure noise, classes of frequencies 0.6, 0.3, 0.1: the intercepts carry
    what there is to learn, the most frequent class's the largest."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)); y = rng.choice(3, 200, p=[0.6, 0.3, 0.1])
    est = OVE(tol=None, n_epochs=2, fit_intercept=True, random_state=0).fit(X, y)
    assert est.coef_.shape == (3, 3) and est.intercept_.shape == (3,)
    assert np.argmax(est.intercept_) == 0 and np.argmin(est.intercept_) == 2


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_ridge_shrinks_towards_its_fixed_point(Est):
    """A larger alpha gives smaller weights (the kernel's exactness is tested above)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5)); y = rng.integers(0, 3, 300)
    X[np.arange(300), y] += 2.0
    norms = [np.linalg.norm(Est(alpha=a, tol=None, n_epochs=5, random_state=0).fit(X, y).coef_)
             for a in (0.0, 0.1, 1.0)]
    assert norms[0] > norms[1] > norms[2] > 0


@pytest.mark.parametrize("bad,name", [
    (dict(learning_rate=-1.0), "learning_rate"), (dict(shuffle="sometimes"), "shuffle"),
    (dict(decay=0.0), "decay"), (dict(batch_size=0), "batch_size"),
    (dict(n_sampled=0), "n_sampled"), (dict(alpha=-1e-3), "alpha"),
    (dict(tol=None, n_epochs=2.5), "n_epochs"), (dict(fit_intercept="yes"), "fit_intercept"),
])
def test_bad_parameters_raise_naming_them(bad, name):
    X = np.eye(4); y = np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match=name):
        OVE(**bad).fit(X, y)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_huge_learning_rate_is_reported_as_divergence(Est):
    """At learning_rate=1e12 the loss reaches ~1e11: a DivergenceWarning."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6)); y = rng.integers(0, 4, 400)
    X[np.arange(400), y] += 1.0
    with pytest.warns(DivergenceWarning):
        m = Est(learning_rate=1e12, alpha=0.0, tol=None, n_epochs=5, random_state=0).fit(X, y)
    assert m.diverged_ and m.n_epochs_ < 5
    assert np.all(np.isfinite(m.coef_))


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_fitted_model_pickles_without_data_or_state(Est):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 20)); y = rng.integers(0, 5, 2000)
    m = Est(tol=None, n_epochs=2, random_state=0).fit(X, y)
    assert not hasattr(m, "_state")
    assert len(pickle.dumps(m)) < 4 * m.coef_.nbytes + 20_000 < X.nbytes


