"""The estimator contract every chapter shares.

:class:`LinearSoftmaxClassifier` holds a fitted linear model (``coef_`` of shape (K, D),
``intercept_``, ``classes_``) and predicts with it. :class:`IterativeSoftmaxEstimator` adds
the epoch loop of the stochastic methods: input validation and label encoding, a
``numpy.random.Generator`` from ``random_state``, ``history_`` per epoch, a ``tqdm`` progress bar
and divergence detection. A chapter's estimator only writes three methods::

    _init_state(X, y, rng)        -> state (whatever the kernels need)
    _run_epoch(state, X, y, epoch, rng) -> None (run one epoch of numba kernels)
    _coef(state)                  -> (coef (K, D), intercept (K,) or None)

Everything else (what ``fit`` returns, what happens on NaN, how the history is recorded) is
the same for all of them.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .metrics import softmax_loss_and_error

__all__ = [
    "DivergenceWarning",
    "as_generator",
    "as_csr",
    "LinearSoftmaxClassifier",
    "IterativeSoftmaxEstimator",
    "HISTORY_KEYS",
]

#: Columns of ``history_`` (one entry per completed epoch; ``eval_*`` are NaN without eval_set).
HISTORY_KEYS = ("epoch", "time", "train_loss", "train_error", "eval_loss", "eval_error")


class DivergenceWarning(RuntimeWarning):
    """A fit stopped because its loss or weights stopped being finite."""


def as_generator(random_state):
    """``numpy.random.Generator`` from None, an int seed, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    return np.random.default_rng(random_state)


def as_csr(X):
    """CSR float64 with sorted, canonical indices: the one layout every kernel reads."""
    X = sp.csr_matrix(X, dtype=np.float64)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
        X.sort_indices()
    return X


class LinearSoftmaxClassifier(ClassifierMixin, BaseEstimator):
    """A fitted linear multi-class model: scores ``X @ coef_.T + intercept_``.

    ``predict_proba`` is the softmax of the scores (eq. 1 of Fagan & Iyengar); models without
    a softmax likelihood (the SVMs of chapter 5) set ``_has_proba = False``.
    """

    _has_proba = True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _validate_X(self, X):
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return X

    def scores(self, X):
        """All K scores ``X @ coef_.T + intercept_``, shape (N, K), also for K = 2."""
        X = self._validate_X(X)
        s = X @ self.coef_.T
        s = np.asarray(s.toarray() if sp.issparse(s) else s)
        if getattr(self, "intercept_", None) is not None:
            s = s + self.intercept_
        return s

    def decision_function(self, X):
        """scikit-learn's convention: the (N, K) scores, or for K = 2 the (N,) margin of
        ``classes_[1]`` over ``classes_[0]``. Use :meth:`scores` for all K columns."""
        s = self.scores(X)
        return s[:, 1] - s[:, 0] if s.shape[1] == 2 else s

    def predict(self, X):
        """Class of the largest score."""
        s = self.scores(X)
        return self.classes_[np.argmax(s, axis=1)]

    @available_if(lambda self: self._has_proba)
    def predict_proba(self, X):
        """Softmax probabilities, shape (N, K), columns in the order of ``classes_``."""
        return softmax(self.scores(X), axis=1)

    @available_if(lambda self: self._has_proba)
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, computed stably."""
        s = self.scores(X)
        return s - np.logaddexp.reduce(s, axis=1, keepdims=True)

    # -- fitting helpers shared by every estimator ---------------------------------------
    def _validate_fit(self, X, y):
        """Validate ``(X, y)``, set ``classes_`` and ``n_features_in_``; return CSR X and codes."""
        X, y = validate_data(
            self, X, y, accept_sparse="csr", dtype=np.float64, reset=True,
            ensure_min_samples=1,
        )
        check_classification_targets(y)
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        if self.classes_.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 classes in y; got 1 class "
                f"({self.classes_[0]!r})"
            )
        return as_csr(X), y_enc.astype(np.int64)

    def _encode(self, y, what="y"):
        """Encode labels with the fitted ``classes_``; unknown labels are an error that names them."""
        y = np.asarray(y)
        pos = np.searchsorted(self.classes_, y)
        pos = np.clip(pos, 0, self.classes_.shape[0] - 1)
        bad = self.classes_[pos] != y
        if np.any(bad):
            unknown = np.unique(y[bad])[:5]
            raise ValueError(
                f"{what} contains labels not seen in training: {unknown.tolist()}"
                f"{' …' if np.sum(bad) > 5 else ''}"
            )
        return pos.astype(np.int64)


class IterativeSoftmaxEstimator(LinearSoftmaxClassifier):
    """Base of the stochastic methods: the epoch loop, history, progress bar, divergence.

    Subclasses define ``__init__`` with at least ``n_epochs``, ``random_state`` and
    ``verbose`` and implement ``_init_state``, ``_run_epoch`` and ``_coef``.

    Fitted attributes
    -----------------
    coef_ : (K, D) ; intercept_ : (K,) or None ; classes_ : (K,)
    history_ : dict of lists keyed by :data:`HISTORY_KEYS`, one entry per finished epoch;
        ``time`` is cumulative training seconds (evaluation excluded).
    diverged_ : bool, True when the fit stopped on a non-finite weight or loss; ``coef_`` then
        holds the last finite weights (those of the epoch before).
    n_epochs_ : int, epochs completed.
    """

    def _history_metrics(self, coef, intercept, X, y):
        """(loss, error) recorded in the history; the softmax log-loss unless overridden."""
        return softmax_loss_and_error(coef, X, y, intercept)

    def fit(self, X, y, eval_set=None):
        """Fit on ``(X, y)``; ``eval_set=(X_eval, y_eval)`` adds held-out columns to ``history_``."""
        X, y_enc = self._validate_fit(X, y)
        if eval_set is not None:
            Xe, ye = eval_set
            Xe = as_csr(self._validate_X_during_fit(Xe))
            ye = self._encode(ye, "eval_set labels")
            if Xe.shape[0] != ye.shape[0]:
                raise ValueError(f"eval_set has {Xe.shape[0]} rows but {ye.shape[0]} labels")
        n_epochs = int(self.n_epochs)
        if n_epochs < 0:
            raise ValueError(f"n_epochs must be >= 0, got {self.n_epochs}")
        rng = as_generator(self.random_state)
        state = self._init_state(X, y_enc, rng)
        self.history_ = {k: [] for k in HISTORY_KEYS}
        self.diverged_ = False
        self.n_epochs_ = 0
        coef, intercept = self._coef(state)
        good = (np.array(coef, copy=True), None if intercept is None else np.array(intercept))
        elapsed = 0.0
        bar = _progress(n_epochs, type(self).__name__, self.verbose)
        try:
            for epoch in range(n_epochs):
                t0 = time.perf_counter()
                with np.errstate(over="ignore", invalid="ignore"):
                    self._run_epoch(state, X, y_enc, epoch, rng)
                elapsed += time.perf_counter() - t0
                coef, intercept = self._coef(state)
                finite = np.all(np.isfinite(coef)) and (
                    intercept is None or np.all(np.isfinite(intercept))
                )
                if finite:
                    loss, err = self._history_metrics(coef, intercept, X, y_enc)
                    finite = np.isfinite(loss)
                if not finite:
                    self.diverged_ = True
                    warnings.warn(
                        f"{type(self).__name__} diverged in epoch {epoch + 1} (non-finite "
                        "weights or loss, typically a learning rate too large); keeping the "
                        f"weights of epoch {epoch}",
                        DivergenceWarning,
                        stacklevel=2,
                    )
                    break
                good = (np.array(coef, copy=True), None if intercept is None else np.array(intercept))
                if eval_set is not None:
                    eloss, eerr = self._history_metrics(coef, intercept, Xe, ye)
                else:
                    eloss, eerr = np.nan, np.nan
                for key, val in zip(
                    HISTORY_KEYS, (epoch + 1, elapsed, loss, err, eloss, eerr)
                ):
                    self.history_[key].append(float(val) if key != "epoch" else int(val))
                self.n_epochs_ = epoch + 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.4g}")
        finally:
            if bar is not None:
                bar.close()
        self.coef_, self.intercept_ = good
        self._state = state
        return self

    def _validate_X_during_fit(self, X):
        return validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)

    # -- to implement ---------------------------------------------------------------------
    def _init_state(self, X, y, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _run_epoch(self, state, X, y, epoch, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _coef(self, state):  # pragma: no cover - abstract
        raise NotImplementedError


def _progress(total, desc, verbose):
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="epoch")
