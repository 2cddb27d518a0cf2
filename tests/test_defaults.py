"""Defaults that hold on the data users bring: the step from the rows, stopping on the loss,
and no silent collapse (:mod:`xclib.base`). The real-data table is ``test_defaults_real.py``.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

import xclib
from xclib.base import DivergenceWarning, pow2_row_scale

#: every estimator whose ``learning_rate="auto"`` divides the rows by a power of two
AUTO = [xclib.VanillaSGD, xclib.UMax, xclib.ImplicitSGD, xclib.MinibatchImplicitSGD, xclib.OVE,
        xclib.NCE, xclib.ImportanceSampling, xclib.AugmentReduce, xclib.Memoir]
#: the ones that stop on ``tol``
STOPPING = [c for c in AUTO if c is not xclib.Memoir]


def _counts(seed=0, n=600, scale=40.0):
    """Blobs of non-negative 'counts' with rows of norm ~scale (raw features, not unit rows)."""
    X, y = make_blobs(n_samples=n, n_features=20, centers=4, cluster_std=1.5,
                      random_state=seed)
    X = np.abs(X - X.min(0)) * scale / 10
    return sp.csr_matrix(X), y


def test_pow2_row_scale():
    X = sp.csr_matrix(np.array([[3.0, 4.0], [0.0, 1.0]]))  # rms of the norms 3.61 -> 4
    assert pow2_row_scale(X) == 4.0
    assert pow2_row_scale(X / 5.0) == 1.0  # rms 0.72
    assert pow2_row_scale(X * 1e200) == 2.0 ** round(np.log2(np.sqrt(13.0) * 1e200))
    assert pow2_row_scale(X * 1e-200) == 2.0 ** round(np.log2(np.sqrt(13.0) * 1e-200))
    assert pow2_row_scale(sp.csr_matrix((3, 2))) == 1.0


@pytest.mark.parametrize("Est", AUTO, ids=lambda c: c.__name__)
def test_auto_step_is_the_same_fit_whatever_the_units(Est):
    """Without a ridge, X·2^k is the same problem in other units: the same fit, exactly
    (the rows are divided by a power of two, so every number the kernels see is the same)."""
    X, y = _counts()
    kw = dict(alpha=0.0 if Est is not xclib.Memoir else 1e-3, random_state=0)
    if Est in STOPPING:
        kw.update(n_epochs=3, tol=None)
    else:
        kw.update(max_iter=20)
    a = Est(**kw).fit(X, y)
    b = Est(**kw).fit(X * 2.0 ** 40, y)
    if Est is xclib.Memoir:  # with its ridge: alpha·2^80 on W·2^-40 is the same penalty
        b = Est(**{**kw, "alpha": kw["alpha"] * 2.0 ** 80}).fit(X * 2.0 ** 40, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X * 2.0 ** 40))
    np.testing.assert_allclose(b.coef_ * 2.0 ** 40, a.coef_, rtol=1e-12, atol=1e-300)
    assert b.row_scale_ == a.row_scale_ * 2.0 ** 40
    assert b.learning_rate_ == pytest.approx(a.learning_rate_ * 2.0 ** -80)


@pytest.mark.parametrize("Est", AUTO, ids=lambda c: c.__name__)
def test_defaults_fit_raw_counts(Est):
    """Rows of norm ~40 (where the former fixed defaults overflowed): a sound fit, silently."""
    X, y = _counts(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        m = Est(random_state=0).fit(X, y)
    assert not m.diverged_ and m.score(X, y) >= 0.9


@pytest.mark.parametrize("Est", STOPPING, ids=lambda c: c.__name__)
def test_default_fit_stops_when_the_loss_stops(Est):
    X, y = _counts(seed=2)
    m = Est(random_state=0, n_epochs=300).fit(X, y)
    assert m.n_epochs_ < 300
    losses = m.history_["train_loss"]
    n = m.n_iter_no_change  # the rule that stopped it: none of the last n set a record by tol
    assert all(losses[i] > min(losses[:i]) - m.tol for i in range(len(losses) - n, len(losses)))
    fixed = Est(random_state=0, n_epochs=12, tol=None).fit(X, y)
    assert fixed.n_epochs_ == 12


def test_a_budget_too_short_to_settle_warns():
    X, y = _counts(seed=3)
    with pytest.warns(ConvergenceWarning, match="ran all 2 epochs"):
        xclib.ImplicitSGD(n_epochs=2, random_state=0).fit(X, y)


def test_a_fit_stuck_at_the_majority_class_warns():
    """A fit whose loss improved but whose predictions are all the most frequent class."""
    X, y = _counts(seed=4)
    y = np.where(np.arange(y.shape[0]) % 5 == 0, y, 0)  # class 0 is the majority
    X = sp.csr_matrix(np.ones((y.shape[0], 1)))  # no feature tells the classes apart
    with pytest.warns(ConvergenceWarning, match="most frequent class"):
        xclib.OVE(random_state=0, n_epochs=3, tol=None, fit_intercept=False).fit(X, y)


@pytest.mark.parametrize("Est", [xclib.NCE, xclib.VanillaSGD, xclib.OVE],
                         ids=lambda c: c.__name__)
def test_a_step_too_large_is_never_silent(Est):
    X, y = _counts(seed=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = Est(learning_rate=1e6, random_state=0, n_epochs=5, tol=None).fit(X, y)
    kinds = {w.category for w in caught}
    assert m.diverged_ or ConvergenceWarning in kinds or m.score(X, y) >= 0.9, kinds


def test_sqb_on_huge_features_is_the_same_model():
    """SQB's bound scales with the rows: features × 1e50 give the model of X in other units
    (no warning needed: it is right)."""
    X, y = _counts(seed=6)
    y = (y >= 2).astype(int)
    a = xclib.SQB().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = xclib.SQB().fit(X * 1e50, y)
    assert np.mean(a.predict(X) == b.predict(X * 1e50)) > 0.99


#: the estimators whose ``decay="auto"`` is the adaptive schedule with ``learning_rate="auto"``
ADAPTIVE = [c for c in STOPPING if c is not xclib.AugmentReduce]


@pytest.mark.parametrize("Est", ADAPTIVE, ids=lambda c: c.__name__)
def test_decay_auto_is_the_papers_schedule_with_a_number(Est):
    """A learning rate given as a number keeps the papers' 0.9 per epoch: the same fit as
    ``decay=0.9``, bit for bit (the book's protocols do not move)."""
    X, y = _counts()
    kw = dict(learning_rate=0.01, n_epochs=4, tol=None, random_state=0)
    a, b = Est(**kw).fit(X, y), Est(decay=0.9, **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.n_step_cuts_ == 0


def test_adaptive_step_backs_off_where_a_decaying_one_diverges():
    """Vanilla SGD at a step far too large: the 0.9 schedule diverges; the adaptive one puts
    back the best weights, cuts the step and ends below its starting loss, without a
    warning of divergence."""
    X, y = _counts(scale=10.0)
    kw = dict(learning_rate=0.03, n_epochs=30, random_state=0)
    with pytest.warns(DivergenceWarning):
        assert xclib.VanillaSGD(decay=0.9, **kw).fit(X, y).diverged_
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        est = xclib.VanillaSGD(decay="adaptive", **kw).fit(X, y)
    assert not est.diverged_ and est.n_step_cuts_ >= 1
    assert min(est.history_["train_loss"]) < np.log(4) / 2
    assert all(np.isfinite(est.history_["train_loss"]))


def test_adaptive_step_cuts_on_stalls_then_stops():
    """With a tolerance no epoch can meet (the first always improves on no loss at all),
    every ``n_iter_no_change`` epochs cut the step by 5 until ``MAX_CUTS`` are spent, and the
    fit stops at the next stall."""
    from xclib.fitloop import MAX_CUTS

    X, y = _counts()
    est = xclib.ImplicitSGD(decay="adaptive", tol=100.0, n_iter_no_change=2, n_epochs=100,
                            random_state=0).fit(X, y)
    assert est.n_step_cuts_ == MAX_CUTS
    assert est.n_epochs_ == 1 + 2 * (MAX_CUTS + 1)


def test_adaptive_step_reaches_what_a_decaying_small_step_cannot():
    """A geometric decay caps the distance the weights travel (η₀ / (1 − decay)); the adaptive
    schedule does not: from a step 100 times too small it ends at a lower loss."""
    X, y = _counts()
    kw = dict(learning_rate=1e-6, n_epochs=60, tol=1e-6, random_state=0)
    geometric = xclib.ImplicitSGD(decay=0.9, **kw).fit(X, y).history_["train_loss"][-1]
    adaptive = xclib.ImplicitSGD(decay="adaptive", **kw).fit(X, y).history_["train_loss"][-1]
    assert adaptive < geometric - 0.05
