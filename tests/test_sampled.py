"""Tests of xclib.sampled: the OVE / NCE / IS surrogates and their minibatch SGD kernel."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from xclib.sampled import (
    IS_LOSS, NCE_LOSS, OVE_LOSS, NCE, OVE, ImportanceSampling, sampled_coefficients,
    sampled_epoch,
)

KINDS = [OVE_LOSS, NCE_LOSS, IS_LOSS]


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
def test_epoch_matches_numpy_transcription(kind):
    rng = np.random.default_rng(0)
    N, D, K, m, bs = 23, 7, 6, 3, 5
    X = sp.random(N, D, density=0.5, random_state=1, format="csr")
    y = rng.integers(0, K, N)
    order = rng.integers(0, N, N)
    classes = rng.integers(0, K, ((N + bs - 1) // bs, m))
    W = rng.normal(size=(K, D)) * 0.3
    W_ref = W.copy()
    sampled_epoch(kind, X.indptr, X.indices, X.data, y, W, order, classes, 0.7, bs)
    Xd = X.toarray()
    for t in range(classes.shape[0]):
        rows = order[t * bs:(t + 1) * bs]
        G = np.zeros_like(W_ref)
        for i in rows:
            out = np.empty(m + 1)
            sc = W_ref @ Xd[i]
            sampled_coefficients(kind, y[i], sc[y[i]], sc[classes[t]], classes[t], K, out)
            G[y[i]] += out[0] * Xd[i]
            for j in range(m):
                G[classes[t, j]] += out[1 + j] * Xd[i]
        W_ref -= 0.7 * G / len(rows)
    np.testing.assert_allclose(W, W_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("Est", [OVE, NCE, ImportanceSampling])
def test_learns_separable_data_and_is_reproducible(Est):
    rng = np.random.default_rng(0)
    K, D, N = 4, 6, 400
    centers = rng.normal(size=(K, D)) * 3
    y = rng.integers(0, K, N)
    X = centers[y] + rng.normal(size=(N, D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    a = Est(learning_rate=5.0, n_epochs=15, batch_size=20, random_state=0).fit(X, y)
    b = Est(learning_rate=5.0, n_epochs=15, batch_size=20, random_state=0).fit(sp.csr_matrix(X), y)
    assert a.score(X, y) > 0.9
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.history_["train_loss"][-1] < a.history_["train_loss"][0]


def test_biases_only_model_on_a_constant_feature():
    y = np.repeat([0, 1, 2], [60, 30, 10])
    est = OVE(learning_rate=1.0, n_epochs=30, batch_size=10, random_state=0)
    est.fit(np.ones((100, 1)), y)
    b = est.coef_[:, 0]
    assert np.argmax(b) == 0 and np.argmin(b) == 2


def test_intercept_is_fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)); y = rng.integers(0, 3, 200)
    est = OVE(n_epochs=2, fit_intercept=True, random_state=0).fit(X, y)
    assert est.coef_.shape == (3, 3) and est.intercept_.shape == (3,)
    assert np.any(est.intercept_ != 0)


@pytest.mark.parametrize("bad", [dict(learning_rate=-1.0), dict(shuffle="sometimes"),
                                 dict(decay=0.0), dict(batch_size=0)])
def test_bad_parameters_raise(bad):
    X = np.eye(4); y = np.array([0, 1, 0, 1])
    with pytest.raises(ValueError):
        OVE(**bad).fit(X, y)


@parametrize_with_checks([OVE(n_epochs=3), NCE(n_epochs=3), ImportanceSampling(n_epochs=3)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
