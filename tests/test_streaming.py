"""Streaming fits (``partial_fit``) and warm starts (``warm_start``) of the iterative
estimators: a stream of chunks equals the in-memory fit, a warm start continues the model."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import xclib
from xclib.datasets.synthetic import make_softmax_data
from xclib.streaming import row_log_losses
from xclib.unbiased import optimal_u

N, D, K = 1200, 40, 12


@pytest.fixture(scope="module")
def data():
    X, y = make_softmax_data(N, D, K, random_state=0)[:2]
    return sp.csr_matrix(X), np.asarray(y)


#: (estimator, parameters at which one pass over a stream equals one epoch of fit)
STREAMING = [
    (xclib.VanillaSGD, dict(learning_rate=0.05, alpha=0.0)),
    (xclib.UMax, dict(learning_rate=0.05, alpha=0.0)),
    (xclib.VanillaSGD, dict(learning_rate=0.05, alpha=0.0, formulation="raman")),
    (xclib.VanillaSGD, dict(learning_rate=0.05, alpha=0.0, n_sampled=3)),
    (xclib.ImplicitSGD, dict(learning_rate=1.0, alpha=0.0)),
    (xclib.OVE, dict(learning_rate=1.0, alpha=1e-3)),
    (xclib.NCE, dict(learning_rate=1.0, alpha=1e-3, batch_size=50)),
    (xclib.ImportanceSampling, dict(learning_rate=1.0, alpha=1e-3, fit_intercept=True)),
]


def _stream(est, X, y, sizes, classes):
    start = 0
    for n in sizes:
        est.partial_fit(X[start:start + n], y[start:start + n], classes=classes)
        classes = None
        start += n
    return est


@pytest.mark.parametrize("cls, params", STREAMING)
def test_a_stream_of_chunks_equals_one_epoch_of_fit(data, cls, params):
    X, y = data
    kw = dict(n_epochs=1, tol=None, shuffle="fixed", random_state=7, **params)
    whole = cls(**kw).fit(X, y)
    stream = _stream(cls(**kw), X, y, [300, 500, 400], np.unique(y))
    np.testing.assert_allclose(stream.coef_, whole.coef_, rtol=1e-10, atol=1e-13)
    if whole.intercept_ is not None:
        np.testing.assert_allclose(stream.intercept_, whole.intercept_, rtol=1e-10,
                                   atol=1e-13)
    assert stream.t_ == N and stream.n_epochs_ == 3 and len(stream.history_["train_loss"]) == 3
    assert np.all(np.isfinite(stream.history_["train_loss"]))


def test_two_passes_over_a_stream_equal_two_epochs_without_decay(data):
    X, y = data
    kw = dict(n_epochs=2, tol=None, shuffle="fixed", random_state=3, decay=1.0,
              learning_rate=1.0, alpha=1e-3)
    whole = xclib.OVE(**kw).fit(X, y)
    stream = xclib.OVE(**kw)
    for _ in range(2):
        _stream(stream, X, y, [600, 600], np.unique(y))
    np.testing.assert_allclose(stream.coef_, whole.coef_, rtol=1e-10, atol=1e-13)


def test_the_ridge_class_weights_of_a_stream_are_its_chunks(data):
    """With alpha > 0 the double-sum methods weight the ridge by the class counts they see
    (β_j): one chunk holding the whole set is the fit exactly, smaller chunks are close."""
    X, y = data
    kw = dict(n_epochs=1, tol=None, shuffle="fixed", random_state=1, learning_rate=0.5,
              alpha=1e-2)
    whole = xclib.ImplicitSGD(**kw).fit(X, y)
    one = _stream(xclib.ImplicitSGD(**kw), X, y, [N], np.unique(y))
    np.testing.assert_allclose(one.coef_, whole.coef_, rtol=1e-12, atol=1e-14)
    chunks = _stream(xclib.ImplicitSGD(**kw), X, y, [400] * 3, np.unique(y))
    gap = np.linalg.norm(chunks.coef_ - whole.coef_) / np.linalg.norm(whole.coef_)
    assert 0 < gap < 0.05


def test_partial_fit_continues_a_fit_and_learns(data):
    X, y = data
    est = xclib.ImplicitSGD(learning_rate=1.0, alpha=1e-4, random_state=0)
    classes = np.unique(y)
    losses = []
    for _ in range(4):
        _stream(est, X, y, [400] * 3, classes)
        losses.append(xclib.metrics.softmax_log_loss(est.coef_, X, np.searchsorted(classes, y)))
    assert losses[-1] < losses[0] < np.log(K)
    fitted = xclib.ImplicitSGD(learning_rate=1.0, alpha=1e-4, n_epochs=2, tol=None,
                               random_state=0).fit(X, y)
    before = fitted.coef_.copy()
    fitted.partial_fit(X[:100], y[:100])
    assert fitted.t_ == 100 and not np.allclose(fitted.coef_, before)


def test_a_chunk_may_miss_classes_the_first_call_names(data):
    X, y = data
    rare = y == np.max(y)
    est = xclib.OVE(random_state=0).partial_fit(X[~rare], y[~rare], classes=np.unique(y))
    assert est.coef_.shape == (K, D) and est.classes_.shape == (K,)
    est.partial_fit(X[rare], y[rare])
    assert np.all(np.isfinite(est.coef_))


def test_auto_step_and_scale_come_from_the_first_chunk(data):
    X, y = data
    big = X * 2.0 ** 20  # the same problem at alpha = 0, in other units
    a = _stream(xclib.ImplicitSGD(alpha=0.0, random_state=0, shuffle="fixed"), X, y,
                [600, 600], np.unique(y))
    b = _stream(xclib.ImplicitSGD(alpha=0.0, random_state=0, shuffle="fixed"), big, y,
                [600, 600], np.unique(y))
    assert b.row_scale_ == a.row_scale_ * 2.0 ** 20
    np.testing.assert_allclose(b.coef_ * 2.0 ** 20, a.coef_, rtol=1e-12, atol=1e-15)
    assert b.learning_rate_ == pytest.approx(a.learning_rate_ / 2.0 ** 40)


@pytest.mark.parametrize("cls", [xclib.VanillaSGD, xclib.ImplicitSGD, xclib.OVE])
def test_partial_fit_rejects_bad_streams(data, cls):
    X, y = data
    with pytest.raises(ValueError, match="classes="):
        cls().partial_fit(X[:50], y[:50])
    est = cls(random_state=0).partial_fit(X[:50], y[:50], classes=np.unique(y))
    with pytest.raises(ValueError, match="differs from the classes"):
        est.partial_fit(X[:50], y[:50], classes=np.arange(K + 1))
    with pytest.raises(ValueError, match="not seen in training"):
        est.partial_fit(X[:50], np.full(50, 99))
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(X[:50, :-1], y[:50])
    with pytest.raises(ValueError, match="at least 2 classes"):
        cls().partial_fit(X[:50], y[:50], classes=[3])


def test_a_diverging_chunk_warns_and_keeps_the_weights_before_it(data):
    X, y = data
    est = xclib.VanillaSGD(learning_rate=0.01, alpha=0.0, random_state=0)
    est.partial_fit(X, y, classes=np.unique(y))
    before = est.coef_.copy()
    est.set_params(learning_rate=1e12)
    with pytest.warns(xclib.base.DivergenceWarning):
        est.partial_fit(X * 1e3, y)
    assert est.diverged_
    np.testing.assert_array_equal(est.coef_, before)


# -- warm starts ------------------------------------------------------------------------------
#: every iterative estimator, at a setting where a short fit moves the weights
WARM = [
    xclib.VanillaSGD(n_epochs=2, tol=None, random_state=0),
    xclib.UMax(n_epochs=2, tol=None, random_state=0),
    xclib.UMax(n_epochs=2, tol=None, random_state=0, formulation="raman"),
    xclib.ImplicitSGD(n_epochs=2, tol=None, random_state=0),
    xclib.MinibatchImplicitSGD(n_epochs=2, tol=None, random_state=0),
    xclib.OVE(n_epochs=2, tol=None, random_state=0, fit_intercept=True),
    xclib.NCE(n_epochs=2, tol=None, random_state=0),
    xclib.ImportanceSampling(n_epochs=2, tol=None, random_state=0),
    xclib.AugmentReduce(n_epochs=2, tol=None, random_state=0),
    xclib.DSMLR(n_epochs=2, n_workers=2, backend="threads", random_state=0),
    xclib.MultinomialSQB(n_epochs=2, random_state=0),
    xclib.SQB(n_epochs=2, random_state=0),
    xclib.LogisticSGD(n_epochs=2, random_state=0),
    xclib.LogisticASGD(n_epochs=2, random_state=0),
    xclib.LogisticSAG(n_epochs=2, random_state=0),
]


def _zero_rounds(est):
    name = "max_iter" if "max_iter" in est.get_params() else "n_epochs"
    return {name: 0}


@pytest.mark.parametrize("est", WARM, ids=lambda e: repr(e)[:40])
def test_a_warm_fit_of_zero_epochs_returns_the_fitted_weights(data, est):
    X, y = data
    if not est.__sklearn_tags__().classifier_tags.multi_class:
        y = (y == 0).astype(int)  # the binary logistic models
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.set_params(warm_start=False).fit(X, y)
        coef, intercept = est.coef_.copy(), est.intercept_
        est.set_params(warm_start=True, **_zero_rounds(est)).fit(X, y)
    np.testing.assert_allclose(est.coef_, coef, rtol=1e-13, atol=1e-15)
    if intercept is not None:
        np.testing.assert_allclose(est.intercept_, intercept, rtol=1e-13, atol=1e-15)
    est.set_params(warm_start=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    assert not np.allclose(est.coef_, coef) or not np.any(coef)


@pytest.mark.parametrize("cls", [xclib.UMax, xclib.ImplicitSGD])
def test_a_warm_start_puts_each_u_at_its_optimum(data, cls):
    X, y = data
    est = cls(n_epochs=2, tol=None, random_state=0).fit(X, y)
    est.set_params(warm_start=True, n_epochs=0).fit(X[:500], y[:500])
    Xs = X[:500] / est.row_scale_
    np.testing.assert_allclose(est.u_, optimal_u(est.coef_ * est.row_scale_, Xs.toarray(),
                                                 y[:500]), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(row_log_losses(est.coef_, X[:500], y[:500]),
                               optimal_u(est.coef_, X[:500].toarray(), y[:500]), rtol=1e-10,
                               atol=1e-13)


def test_a_warm_start_continues_from_where_the_fit_stopped(data):
    """Five epochs, then five more warm at the decayed step, end where ten epochs end (the
    draws differ: close, not equal); the warm fit's first epoch is far below a cold one's."""
    X, y = data
    kw = dict(learning_rate=0.2, alpha=1e-3, tol=None, random_state=0)
    ten = xclib.ImplicitSGD(n_epochs=10, **kw).fit(X, y).history_["train_loss"]
    est = xclib.ImplicitSGD(n_epochs=5, **kw).fit(X, y)
    five = est.history_["train_loss"][-1]
    est.set_params(warm_start=True, learning_rate=0.2 * 0.9 ** 5).fit(X, y)
    assert est.history_["train_loss"][0] < min(five + 0.01, ten[0] - 0.2)
    assert est.history_["train_loss"][-1] == pytest.approx(ten[-1], abs=0.05)


def test_a_warm_memoir_starts_from_its_weights(data):
    """One batch at a negligible step from the fitted weights keeps them (a cold start would
    begin at W = 0)."""
    X, y = data
    est = xclib.Memoir(max_iter=20, random_state=0).fit(X, y)
    coef = est.coef_.copy()
    est.set_params(warm_start=True, learning_rate=1e-12, max_iter=1).fit(X, y)
    np.testing.assert_allclose(est.coef_, coef, rtol=1e-6, atol=1e-12)
    assert np.any(coef)


@pytest.mark.parametrize("cls", [xclib.LogisticLBFGS, xclib.DataParallelLBFGS])
def test_lbfgs_warm_started_at_its_optimum_stays_there_binary_and_multinomial(data, cls):
    X, y = data
    if cls is xclib.LogisticLBFGS:
        y = (y == 0).astype(int)
    est = cls(alpha=1e-2, max_iter=200, tol=1e-8).fit(X, y)
    coef, cold = est.coef_.copy(), est.n_iter_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.set_params(warm_start=True).fit(X, y)
    assert est.n_iter_ <= 2 < cold
    np.testing.assert_allclose(est.coef_, coef, rtol=1e-4, atol=1e-6)  # tol = 1e-8


def test_warm_start_rejects_other_classes_or_features(data):
    X, y = data
    est = xclib.OVE(n_epochs=1, tol=None, warm_start=True).fit(X, y)
    with pytest.raises(ValueError, match="warm_start=True continues a model of 12 classes"):
        est.fit(X[y < 5], y[y < 5])
    with pytest.raises(ValueError, match="features"):
        est.fit(X[:, :-1], y)
    dsmlr = xclib.DSMLR(n_epochs=1).fit(X, y)
    dsmlr.set_params(warm_start=True, backend="dask")
    with pytest.raises(ValueError, match="backend='dask'"):
        dsmlr.fit(X, y)
