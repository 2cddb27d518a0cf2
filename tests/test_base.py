"""The shared estimator contract, exercised through a trivial estimator built on it."""
import pickle
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from xclib.base import (
    LEARNING_RATE, N_EPOCHS, RANDOM_STATE, VERBOSE, DivergenceWarning,
    IterativeSoftmaxEstimator, as_csr, as_generator,
)
from xclib.exact import softmax_objective


@dataclass
class _GDState:
    W: np.ndarray
    X_seen: object = None  # a reference to the training data: must not survive fit


class FullBatchGD(IterativeSoftmaxEstimator):
    """Gradient descent on -L(W)/N: the smallest possible estimator on the base."""

    _parameter_constraints = {
        "learning_rate": LEARNING_RATE, "n_epochs": N_EPOCHS,
        "random_state": RANDOM_STATE, "verbose": VERBOSE,
    }

    def __init__(self, learning_rate=1.0, n_epochs=5, random_state=None, verbose=0):
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose

    def _init_state(self, X, y, rng):
        W = rng.normal(scale=1e-3, size=(self.classes_.shape[0], X.shape[1]))
        return _GDState(W=W, X_seen=X)

    def _run_epoch(self, state, X, y, epoch, rng):
        _, g, _ = softmax_objective(state.W, X, y)
        state.W -= self.learning_rate * g / X.shape[0]

    def _coef(self, state):
        return state.W, None

    def _finalize(self, state):
        self.norm_ = float(np.sqrt(np.sum(state.W[np.isfinite(state.W)] ** 2)))


class _Scripted(FullBatchGD):
    """Weights that follow a script: a finite blow-up the NaN check alone would miss."""

    def __init__(self, learning_rate=1.0, n_epochs=5, random_state=None, verbose=0):
        super().__init__(learning_rate, n_epochs, random_state, verbose)

    def _run_epoch(self, state, X, y, epoch, rng):
        state.W[:] = 0.0
        state.W[0, :] = self.learning_rate * (epoch + 1)


def _data():
    rng = np.random.default_rng(0)
    X = sp.random(200, 10, density=0.5, format="csr", random_state=np.random.RandomState(0))
    y = rng.integers(0, 3, size=200)
    return X, y


def test_history_and_fit_contract():
    X, y = _data()
    m = FullBatchGD(n_epochs=4, random_state=0).fit(X, y, eval_set=(X[:50], y[:50]))
    assert m.n_epochs_ == 4 and not m.diverged_
    assert m.history_["epoch"] == [1, 2, 3, 4]
    assert np.all(np.diff(m.history_["train_loss"]) < 0)
    assert np.all(np.diff(m.history_["time"]) >= 0)
    assert len(m.history_["eval_loss"]) == 4 and np.isfinite(m.history_["eval_error"]).all()
    assert m.coef_.shape == (3, 10)


def test_same_seed_same_numbers():
    X, y = _data()
    a = FullBatchGD(random_state=3).fit(X, y).coef_
    b = FullBatchGD(random_state=3).fit(X, y).coef_
    np.testing.assert_array_equal(a, b)
    assert as_generator(np.random.RandomState(1)).integers(100) == as_generator(np.random.RandomState(1)).integers(100)


def test_divergence_keeps_last_finite_weights():
    X, y = _data()
    with pytest.warns(DivergenceWarning, match="diverged in round"):
        m = FullBatchGD(learning_rate=1e308, n_epochs=6, random_state=0).fit(X, y)
    assert m.diverged_
    assert np.all(np.isfinite(m.coef_))
    assert m.n_epochs_ < 6 and len(m.history_["train_loss"]) == m.n_epochs_


def test_finite_blow_up_is_divergence_and_keeps_the_best_weights():
    X, y = _data()
    # loss grows without bound but stays finite: W[0] = 300·t gives a loss ≈ 300·t·|x| ≫ log 3
    with pytest.warns(DivergenceWarning, match="above"):
        m = _Scripted(learning_rate=300.0, n_epochs=6).fit(X, y)
    assert m.diverged_ and m.n_epochs_ < 2
    assert np.all(np.abs(m.coef_) < 1e-2)  # the starting weights had the lowest loss
    # a mild rise (2× its start) is not divergence
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        m = _Scripted(learning_rate=0.05, n_epochs=3).fit(X, y)
    assert not m.diverged_ and m.n_epochs_ == 3


def test_one_round_that_ends_far_above_its_start_is_divergence():
    X, y = _data()
    with pytest.warns(DivergenceWarning):
        m = _Scripted(learning_rate=300.0, n_epochs=1).fit(X, y)
    assert m.diverged_


def test_fitted_model_holds_fitted_attributes_only():
    X, y = _data()
    m = FullBatchGD(n_epochs=2).fit(X, y)
    assert not hasattr(m, "_state")
    assert m.norm_ > 0  # set by the _finalize hook
    assert len(pickle.dumps(m)) < 4 * m.coef_.nbytes + 4000
    assert not any(v is X for v in vars(m).values())


def test_clear_errors_on_bad_input():
    X, y = _data()
    m = FullBatchGD()
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        m.fit(X, y[:10])
    with pytest.raises(ValueError, match="0 sample"):
        m.fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="not seen in training"):
        m.fit(X, y, eval_set=(X[:5], np.array([0, 1, 2, 7, 9])))
    m.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(sp.random(3, 11, format="csr"))
    for bad in (dict(n_epochs=-1), dict(n_epochs=np.nan), dict(n_epochs=2.5),
                dict(learning_rate="0.1"), dict(learning_rate=0.0), dict(learning_rate=np.inf)):
        name = next(iter(bad))
        with pytest.raises((ValueError, TypeError), match=f"'{name}' parameter"):
            FullBatchGD(**bad).fit(X, y)


def test_as_csr_is_canonical():
    X = sp.csr_matrix((np.ones(3), np.array([2, 0, 2]), np.array([0, 3])), shape=(1, 3))
    C = as_csr(X)
    assert C.has_canonical_format and C.dtype == np.float64
    np.testing.assert_array_equal(C.toarray(), [[1.0, 0.0, 2.0]])


def test_progress_bar_runs():
    X, y = _data()
    FullBatchGD(n_epochs=2, verbose=1).fit(X, y)


@parametrize_with_checks([FullBatchGD()])
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        check(estimator)


class _Swinging(FullBatchGD):
    """A script of weights: zero (the start's loss, log K), a blow-up, zero again."""

    def __init__(self, learning_rate=1.0, n_epochs=3, random_state=None, verbose=0,
                 script=(0.0, 1e3, 0.0)):
        super().__init__(learning_rate, n_epochs, random_state, verbose)
        self.script = script

    def _init_state(self, X, y, rng):
        return _GDState(W=np.zeros((self.classes_.shape[0], X.shape[1])))

    def _run_epoch(self, state, X, y, epoch, rng):
        state.W[:] = 0.0
        state.W[0, :] = self.script[epoch]


def test_a_fit_that_never_beats_its_start_warns():
    X, y = _data()
    # a single blow-up between two rounds at the start: the 2-round patience misses it, the
    # end-of-fit check does not (the weights learned nothing)
    with pytest.warns(DivergenceWarning, match="never below its start"):
        m = _Swinging().fit(X, y)
    assert m.diverged_ and np.all(m.coef_ == 0.0)
    # no blow-up, no progress: the weights are kept, with a warning
    from sklearn.exceptions import ConvergenceWarning
    with pytest.warns(ConvergenceWarning, match="stayed exactly"):
        m = _Swinging(script=(0.0, 0.0, 0.0)).fit(X, y)
    assert not m.diverged_ and m.n_epochs_ == 3
    # an ordinary fit: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = FullBatchGD(n_epochs=3, random_state=0).fit(X, y)
    assert not m.diverged_
