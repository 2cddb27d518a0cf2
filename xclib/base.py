"""The estimator contract every chapter shares.

:class:`LinearSoftmaxClassifier` holds a fitted linear model (``coef_`` of shape (K, D),
``intercept_``, ``classes_``) and predicts with it. :class:`IterativeSoftmaxEstimator` adds
the epoch loop of the stochastic methods: parameter validation, input validation and label
encoding, a ``numpy.random.Generator`` from ``random_state``, ``history_`` per epoch, a ``tqdm``
progress bar and divergence detection. A chapter's estimator declares its parameters and
writes three methods (a fourth when it has fitted attributes of its own)::

    _parameter_constraints          {name: [constraint, ...]}, checked before every fit
    _init_state(X, y, rng)        -> state (a dataclass: whatever the kernels need)
    _run_epoch(state, X, y, epoch, rng) -> None (run one epoch of numba kernels)
    _coef(state)                  -> (coef (K, D), intercept (K,) or None)
    _finalize(state)              -> None (optional: set extra fitted attributes, e.g. ``u_``)
    _set_weights(state, coef, b)  -> None (optional: where the weights live, for warm starts)
    _warm_rows(state, X, y)       -> None (optional: per-row variables for warm starts)

Everything else (what ``fit`` returns, what happens on NaN or a blow-up, how the history is
recorded, which attributes a fitted model holds) is the same for all of them. The state is
dropped at the end of ``fit``: a fitted model holds fitted attributes only, so a pickle carries
no training data.

The vocabulary
--------------
Every estimator names the same concept with the same keyword (scikit-learn's), and each
paper's symbol is mapped to it in the estimator's docstring:

``alpha``          ridge: the objective is mean over rows of the loss + (alpha/2)·‖W‖²_F
                   (scikit-learn's ``SGDClassifier`` scale; ``LogisticRegression``'s
                   ``C = 1/(alpha·N)``)
``learning_rate``  the initial step size (a float), or ``"auto"``: see
                   :meth:`IterativeSoftmaxEstimator._resolve_step`
``decay``          the step schedule's factor (the step after t decays is learning_rate·decay^t),
                   or ``"adaptive"``: see :meth:`IterativeSoftmaxEstimator._step_at`
``n_epochs``       passes over the data of a stochastic method
``max_iter``       iterations of a deterministic solver (L-BFGS) or number of batches
``tol``            stopping tolerance (with ``n_iter_no_change``: see *Stopping* below)
``random_state``   None, an int or a ``numpy.random.Generator``; same seed, same numbers
``verbose``        a ``tqdm`` progress bar when true
``fit_intercept``  an unpenalised bias per class

The constraints of these shared keywords are :data:`ALPHA`, :data:`LEARNING_RATE`, … below;
an estimator's ``_parameter_constraints`` uses them so that one keyword accepts the same
values everywhere.
"""
from __future__ import annotations

import time
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
# scikit-learn's constraint language is private to it: imported here only (and the version
# bounded in pyproject.toml); the modules of xclib take it from this module.
from sklearn.utils._param_validation import (  # noqa: F401 (re-exported)
    HasMethods, Interval, StrOptions,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import predict as _predict
from . import streaming as _streaming
from .fitloop import (  # DivergenceWarning and HISTORY_KEYS re-exported (__all__)
    HISTORY_KEYS, DivergenceWarning,
    StepCuts, StopRule, Watch, copy_weights, divide_rows, finish_fit, finite, progress_bar,
    record_round,
)
from .metrics import softmax_loss_and_error
from .steps import StepRules, max_row_norm, pow2_row_scale  # noqa: F401 (re-exported)

__all__ = [
    "ALPHA",
    "DECAY",
    "DECAY_ADAPTIVE",
    "EVAL_EVERY",
    "EvalEvery",
    "FIT_INTERCEPT",
    "HasMethods",
    "Interval",
    "LEARNING_RATE",
    "LEARNING_RATE_AUTO",
    "N_ITER_NO_CHANGE",
    "STOP_TOL",
    "MAX_ITER",
    "N_EPOCHS",
    "RANDOM_STATE",
    "StrOptions",
    "TOL",
    "VERBOSE",
    "WARM_START",
    "VOCABULARY",
    "DivergenceWarning",
    "as_generator",
    "max_row_norm",
    "pow2_row_scale",
    "as_csr",
    "LinearSoftmaxClassifier",
    "IterativeSoftmaxEstimator",
    "HISTORY_KEYS",
    "StepRules",
]



#: The shared keywords and the constraint each accepts (scikit-learn's constraint language:
#: :class:`~sklearn.utils._param_validation.Interval`, ``"boolean"``, ``"random_state"``, ...).
ALPHA = [Interval(Real, 0, None, closed="left")]
LEARNING_RATE = [Interval(Real, 0, None, closed="neither")]
#: ``learning_rate`` of the stochastic estimators: a number, or ``"auto"`` (see
#: :meth:`IterativeSoftmaxEstimator._resolve_step`)
LEARNING_RATE_AUTO = [*LEARNING_RATE, StrOptions({"auto"})]
DECAY = [Interval(Real, 0, 1, closed="right")]
#: ``decay`` of the stochastic estimators that stop on ``tol``: a number, ``"adaptive"`` or
#: ``"auto"`` (see :meth:`IterativeSoftmaxEstimator._step_at`)
DECAY_ADAPTIVE = [*DECAY, StrOptions({"adaptive", "auto"})]
N_EPOCHS = [Interval(Integral, 0, None, closed="left")]
MAX_ITER = [Interval(Integral, 1, None, closed="left")]
TOL = [Interval(Real, 0, None, closed="left")]
#: ``tol`` of the stochastic estimators' stopping rule: a number, or None (run every epoch)
STOP_TOL = [*TOL, None]
N_ITER_NO_CHANGE = [Interval(Integral, 1, None, closed="left")]
EVAL_EVERY = [Interval(Integral, 1, None, closed="left")]
RANDOM_STATE = ["random_state", np.random.Generator]
VERBOSE = ["verbose"]
FIT_INTERCEPT = ["boolean"]
#: ``warm_start``: start ``fit`` from the fitted weights (:mod:`xclib.streaming`)
WARM_START = ["boolean"]

#: Concept -> the one keyword every estimator uses for it, and the names it replaces.
VOCABULARY = {
    "ridge": ("alpha", ("lam", "mu", "eta", "lambda_", "reg")),
    "step": ("learning_rate", ("eta0", "step_size", "lr")),
    "passes": ("n_epochs", ("n_passes",)),
    "iterations": ("max_iter", ("n_iter", "n_iterations", "maxiter")),
    "tolerance": ("tol", ("gtol", "eps")),
    "seed": ("random_state", ("seed", "rng")),
}


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

    def _weights(self):
        return self.coef_, getattr(self, "intercept_", None)

    def _full_scores(self, X, method):
        """The (N, K) scores of ``method``'s output, filled tile by tile."""
        X = self._validate_X(X)
        coef, intercept = self._weights()
        return _predict.full_scores(coef, X, intercept,
                                    what=f"{type(self).__name__}.{method}")

    def scores(self, X):
        """All K scores ``X @ coef_.T + intercept_``, shape (N, K), also for K = 2.

        Computed in bounded tiles (:mod:`xclib.predict`); an output above 1 GiB warns
        (:class:`~xclib.predict.LargeOutputWarning`), one above the physical memory raises.
        """
        return self._full_scores(X, "scores")

    def decision_function(self, X):
        """scikit-learn's convention: the (N, K) scores, or for K = 2 the (N,) margin of
        ``classes_[1]`` over ``classes_[0]``. Use :meth:`scores` for all K columns."""
        s = self._full_scores(X, "decision_function")
        return s[:, 1] - s[:, 0] if s.shape[1] == 2 else s

    def predict(self, X):
        """Class of the largest score (ties: the first in ``classes_``), in bounded memory:
        no N × K array is formed (:func:`xclib.predict.argmax_scores`)."""
        X = self._validate_X(X)
        coef, intercept = self._weights()
        return self.classes_[_predict.argmax_scores(coef, X, intercept)[0]]

    def predict_topk(self, X, k, oracle=None):
        """The k classes of largest score per row, in decreasing score: (N, k) labels.

        Parameters
        ----------
        X : (N, D) array or sparse matrix
        k : int in [1, K]
        oracle : None, a MIPS oracle of :mod:`xclib.mips` or its name
            None: the exact blocked scan (bounded memory; equal scores: the class first in
            ``classes_`` first). ``"exact"``, ``"simple_lsh"``, ``"hnsw"`` or an instance
            (:class:`~xclib.mips.ExactMIPS`, :class:`~xclib.mips.SimpleLSH`,
            :class:`~xclib.mips.HNSWMIPS`): the oracle's k best classes, re-scored exactly and
            sorted. An instance is built on this model at its first use and reused while
            ``coef_`` is the same array; :func:`xclib.predict.topk_recall` measures what an
            approximate oracle misses.
        """
        X = self._validate_X(X)
        coef, intercept = self._weights()
        k = _predict.check_k(k, coef.shape[0])
        if oracle is None:
            idx = _predict.topk_scores(coef, X, k, intercept)[0]
        else:
            idx = _predict.oracle_topk(oracle, coef, X, k, intercept)[0]
        return self.classes_[idx]

    @available_if(lambda self: self._has_proba)
    def predict_proba(self, X):
        """Softmax probabilities, shape (N, K), columns in the order of ``classes_``;
        computed in bounded blocks (an output above 1 GiB warns, see :meth:`scores`)."""
        return _predict.softmax_rows(self._full_scores(X, "predict_proba"))

    @available_if(lambda self: self._has_proba)
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, computed stably (in bounded blocks)."""
        return _predict.log_softmax_rows(self._full_scores(X, "predict_log_proba"))

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


class IterativeSoftmaxEstimator(StepRules, _streaming.WarmStart, LinearSoftmaxClassifier):
    """Base of the stochastic methods: the epoch loop, history, progress bar, divergence.

    Subclasses define ``__init__`` (storing each parameter under its own name, nothing
    else), a ``_parameter_constraints`` table covering every parameter, and implement
    ``_init_state``, ``_run_epoch`` and ``_coef`` (and ``_finalize`` for extra fitted
    attributes). ``_n_rounds`` is the number of loop rounds (``n_epochs`` by default). The
    step, the stopping rule and the warnings of a fit that learned nothing: :class:`StepRules`;
    warm starts (``warm_start``, a parameter of every subclass): :mod:`xclib.streaming`.

    Divergence
    ----------
    After each round the loss of ``_history_metrics`` is compared with its value at the
    starting weights, ``L0``. The fit is declared diverged, with a :class:`DivergenceWarning`,
    ``diverged_ = True`` and the history stopped there, when

    * the weights or the loss stop being finite, or
    * the loss exceeds ``_divergence_factor · max(|L0|, 1)`` for ``_divergence_patience``
      consecutive rounds, or in the last round of the fit, or
    * (at the end) the loss exceeded that limit in some round and never went below ``L0``.

    A loss exactly ``L0`` in every round (weights that never moved) warns, keeping them.
    (10× and 2 rounds by default: the softmax loss at W = 0 is log K, so a loss ten times
    that is worse than predicting nothing.) ``coef_`` then holds the weights of the round with
    the lowest loss (the starting weights if no round improved on them).

    Fitted attributes
    -----------------
    coef_ : (K, D) ; intercept_ : (K,) or None ; classes_ : (K,)
    history_ : dict of lists keyed by :data:`HISTORY_KEYS`, one entry per finished round;
        ``time`` is cumulative training seconds (evaluation excluded).
    diverged_ : bool, True when the fit stopped on a blow-up (see Divergence).
    n_epochs_ : int, rounds completed. row_scale_, learning_rate_ : see :class:`StepRules`.
    """

    _divergence_factor = 10.0
    _divergence_patience = 2

    def _history_metrics(self, coef, intercept, X, y):
        """(loss, error) recorded in the history; the softmax log-loss unless overridden."""
        return softmax_loss_and_error(coef, X, y, intercept)

    def _n_rounds(self):  # rounds of the fit loop, each followed by one history entry
        return int(self.n_epochs)

    def _round_epochs(self, rnd):  # the epochs of round rnd (EvalEvery: several)
        return range(rnd, rnd + 1)

    def fit(self, X, y, eval_set=None):
        """Fit on ``(X, y)``; ``eval_set=(X_eval, y_eval)`` adds held-out columns to ``history_``."""
        self._validate_params()
        warm = _streaming.warm_weights(self)  # before the new y resets classes_
        X, y_enc = self._validate_fit(X, y)
        self._fit_scale, self._fit_step = self._resolve_step(X)
        X = divide_rows(X, self._fit_scale)
        evaluate = _eval_arrays(self, eval_set) if eval_set is not None else None
        n_rounds = self._n_rounds()
        rng = as_generator(getattr(self, "random_state", None))  # deterministic: none
        state = self._init_state(X, y_enc, rng)
        _streaming.start_warm(self, state, X, y_enc, warm)
        self.history_ = {k: [] for k in HISTORY_KEYS}
        self.diverged_ = False
        self.n_epochs_ = 0
        coef, intercept, start_loss, _ = self._round_metrics(state, X, y_enc)
        watch = Watch(self, start_loss, self._keep_best(state, coef, intercept))
        cuts = StepCuts(self) if self._adaptive() else None
        stop = StopRule(self, cuts) if self._stops_on_tol else None
        elapsed = 0.0
        bar = progress_bar(n_rounds, type(self).__name__, self.verbose)
        try:
            for epoch in range(n_rounds):
                t0 = time.perf_counter()
                with np.errstate(over="ignore", invalid="ignore"):
                    for e in self._round_epochs(epoch):
                        self._run_epoch(state, X, y_enc, e, rng)
                elapsed += time.perf_counter() - t0
                coef, intercept, loss, err = self._round_metrics(state, X, y_enc)
                if cuts is not None and cuts.recover(state, X, y_enc, watch, loss):
                    coef, intercept, loss, err = self._round_metrics(state, X, y_enc)
                if watch.diverged(epoch, loss, epoch + 1 == n_rounds):
                    break
                watch.keep(state, coef, intercept, loss)
                held_out = self._history_metrics(coef, intercept, *evaluate) \
                    if evaluate is not None else (np.nan, np.nan)
                record_round(self, e, elapsed, loss, err, *held_out)  # e: its last epoch
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.4g}")
                if stop is not None and stop.done(loss):
                    break
        finally:
            if bar is not None:
                bar.close()
        watch.settle(y_enc)
        finish_fit(self, state, watch.best, stop, n_rounds)
        return self

    def _round_metrics(self, state, X, y):
        """(coef, intercept, loss, error) after a round (NaN: non-finite weights); a hook."""
        coef, intercept = self._coef(state)
        loss, err = self._history_metrics(coef, intercept, X, y) \
            if finite(coef, intercept) else (np.nan, np.nan)
        return coef, intercept, loss, err

    def _keep_best(self, state, coef, intercept):  # kept as coef_ if the fit diverges later
        return copy_weights(coef, intercept)

    # -- to implement ---------------------------------------------------------------------
    def _init_state(self, X, y, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _run_epoch(self, state, X, y, epoch, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _coef(self, state):  # pragma: no cover - abstract
        raise NotImplementedError

    def _finalize(self, state):
        """Set fitted attributes beyond ``coef_``/``intercept_`` from the final state."""


class EvalEvery:
    """``eval_every``: rounds of that many epochs (the last one shorter), the training loss
    evaluated once a round. The loss is what the history, the divergence rules, the best
    weights and the stopping rule read (``n_iter_no_change`` then counts rounds); the step
    of each epoch is the epoch's own. The loss is one exact pass, O(N·K·nnz): at large K it
    costs more than an epoch of O(D) steps (ALOI, N = 97,200, K = 1,000: 0.8 s, against
    0.06 s for an epoch of Implicit SGD), and ``eval_every`` spreads it over that many
    epochs. ``history_["epoch"]`` and ``n_epochs_`` count epochs."""

    def _n_rounds(self):
        return -(-int(self.n_epochs) // int(self.eval_every))

    def _round_epochs(self, rnd):
        every = int(self.eval_every)
        return range(rnd * every, min((rnd + 1) * every, int(self.n_epochs)))


def _eval_arrays(est, eval_set):
    """``eval_set`` validated: rows divided as the fit's, labels encoded with its classes."""
    if not isinstance(eval_set, (tuple, list)) or len(eval_set) != 2:
        raise ValueError("eval_set must be a pair (X_eval, y_eval)")
    Xe, ye = eval_set
    Xe = validate_data(est, Xe, accept_sparse="csr", dtype=np.float64, reset=False)
    Xe = divide_rows(as_csr(Xe), est._fit_scale)
    ye = est._encode(ye, "eval_set labels")
    if Xe.shape[0] != ye.shape[0]:
        raise ValueError(f"eval_set has {Xe.shape[0]} rows but {ye.shape[0]} labels")
    return Xe, ye
