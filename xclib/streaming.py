"""Warm starts and streaming fits of the iterative estimators.

``warm_start=True`` (every iterative estimator)
    ``fit`` starts from the fitted ``coef_`` and ``intercept_`` instead of zero (or the
    method's random start), on data with the same classes and features, and runs its own step
    schedule from ``learning_rate`` (pass a smaller one to continue a decayed schedule). A
    method's per-row variables start at their optimum for those weights, whatever rows ``X``
    holds: the ``u_i`` of U-max and Implicit SGD (Fagan & Iyengar, eq. 5, an equality at
    ``u_i = log Σ_k e^{x_i·w_k} − x_i·w_{y_i}``) and A&R's ``log η_i`` (the same number).

``partial_fit(X, y, classes=None)`` (the per-example stochastic methods)
    One pass of the method's epoch over the chunk, with the step of the schedule's first
    epoch, continuing from the weights of the previous call (or of ``fit``). The first call
    needs ``classes``, every class of the stream, as scikit-learn's ``SGDClassifier``; the
    rows' scale and the step of ``learning_rate="auto"`` come from that first chunk and stay
    fixed (``row_scale_``, ``learning_rate_``). The random draws continue one generator across
    calls, seeded once from ``random_state``, and each chunk's rows are new datapoints to
    the method (its per-row variables start as ``fit`` starts them). Hence a stream of chunks
    in order equals one epoch of ``fit`` over their concatenation with the same seed, when
    the order is the data's (``shuffle="fixed"``) and the batches do not straddle chunks:
    exactly (tested), except where a method weights its ridge by the class counts of the
    rows it sees (Implicit SGD's and U-max's ``β_j`` with ``alpha > 0``), which a stream only
    knows a chunk at a time: there each chunk's counts are used. Several passes over a stream
    keep the first epoch's step; to lower it, set ``learning_rate`` to a number in the units
    of ``X`` (``learning_rate_`` is the one in use).
"""
from __future__ import annotations

import time

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from .metrics import score_blocks, row_logsumexp

__all__ = ["StreamingFit", "WarmStart", "warm_weights", "start_warm", "check_warm", "row_log_losses"]


def row_log_losses(coef, X, y, intercept=None):
    """``log Σ_k e^{s_ik} − s_{i,y_i}`` per row, with ``s = X coef.T (+ intercept)``, in
    bounded blocks: the log-loss of each row, which is also the optimal ``u_i`` of eq. (5)
    (``y=None``: ``log Σ_k e^{s_ik}`` alone, the optimal ``u_i`` of Raman et al.'s eq. 8)."""
    out = np.empty(X.shape[0])
    for start, stop, s in score_blocks(coef, X, intercept):
        out[start:stop] = row_logsumexp(s)
        if y is not None:
            out[start:stop] -= s[np.arange(stop - start), y[start:stop]]
    return out


def warm_weights(est):
    """``(classes_, coef_, intercept_)`` to start ``est``'s next fit from, when its
    ``warm_start`` is true and it is fitted; else None. Read before ``fit`` resets
    ``classes_``; it also ends a stream of ``partial_fit`` calls."""
    est.__dict__.pop("_stream_rng", None)  # a fit ends a stream: partial_fit then draws afresh
    if not getattr(est, "warm_start", False) or not hasattr(est, "coef_"):
        return None
    return est.classes_, est.coef_, est.intercept_


def start_warm(est, state, X, y, warm):
    """Put the weights of :func:`warm_weights` into a fit's fresh ``state`` (on the rows
    ``X`` the kernels see, divided by ``est._fit_scale``) and the per-row variables at their
    optimum for them (:func:`check_warm` first); nothing when ``warm`` is None."""
    if warm is None:
        return
    check_warm(est, X, warm)
    est._set_weights(state, warm[1] * est._fit_scale, warm[2])
    est._warm_rows(state, X, y)


def check_warm(est, X, warm):
    """An error naming the mismatch when the classes or the features of ``(X, y)`` (already
    validated: ``est.classes_`` is y's) differ from the warm model's."""
    classes, coef, _ = warm
    mismatch = classes.shape != est.classes_.shape or np.any(classes != est.classes_) \
        or coef.shape[1] != X.shape[1]
    if not mismatch:
        return
    new_classes = est.classes_
    est.classes_, est.n_features_in_ = classes, coef.shape[1]  # the model stays as it was
    if classes.shape != new_classes.shape or np.any(classes != new_classes):
        raise ValueError(
            f"warm_start=True continues a model of {classes.shape[0]} classes "
            f"{_preview(classes)}, but y has {new_classes.shape[0]} classes "
            f"{_preview(new_classes)}; set warm_start=False to fit a new model")
    raise ValueError(f"warm_start=True continues a model of {coef.shape[1]} features, but X "
                     f"has {X.shape[1]}; set warm_start=False to fit a new model")


class WarmStart:
    """Where a fit's state keeps the weights (for ``warm_start`` and ``partial_fit``), mixed
    into :class:`~xclib.base.IterativeSoftmaxEstimator`; an estimator overrides these where
    its state differs."""

    def _set_weights(self, state, coef, intercept):
        """Start ``state`` from ``coef`` (on the rows the kernels see) and ``intercept``:
        the state's own ``set_weights``, else its arrays ``W`` and ``b``."""
        if hasattr(state, "set_weights"):
            state.set_weights(coef, intercept)
            return
        state.W[...] = coef
        if intercept is not None:
            state.b[...] = intercept

    def _warm_rows(self, state, X, y):
        """Per-row variables at their optimum for the weights in ``state`` (``warm_start``)."""


def _preview(classes):
    shown = ", ".join(repr(c) for c in classes[:4].tolist())
    return f"[{shown}{', …' if classes.shape[0] > 4 else ''}]"


class StreamingFit:
    """``partial_fit`` for the per-example stochastic estimators (see the module docstring);
    mixed in before :class:`~xclib.base.IterativeSoftmaxEstimator`.

    Fitted attributes beyond ``fit``'s: ``t_``, the rows seen by ``partial_fit`` since the
    model was fitted or started; ``n_epochs_`` counts the calls (one pass over one chunk
    each) and ``history_`` has one entry per call, on that chunk.
    """

    def partial_fit(self, X, y, classes=None):
        """One pass over the chunk ``(X, y)``; ``classes`` (every class of the stream) is
        required on the first call and, when given later, must be the same."""
        # base imports this module: its names are taken at call time
        from .base import HISTORY_KEYS, as_generator
        from .fitloop import copy_weights, diverge, divide_rows, finish_fit

        self._validate_params()
        first = not hasattr(self, "coef_")
        X, y_enc = self._stream_chunk(X, y, classes, first)
        if first:
            s, step = self._resolve_step(X)
            self.history_ = {k: [] for k in HISTORY_KEYS}
            self.n_epochs_, self.t_, self._stream_rng = 0, 0, None
        else:
            s = self.row_scale_
            lr = self.learning_rate
            step = self.learning_rate_ * s * s if isinstance(lr, str) else float(lr) * s * s
        if getattr(self, "_stream_rng", None) is None:
            self._stream_rng = as_generator(getattr(self, "random_state", None))
        self._fit_scale, self._fit_step = s, step
        Xs = divide_rows(X, s)
        state = self._init_state(Xs, y_enc, self._stream_rng)
        if not first:
            self._set_weights(state, self.coef_ * s, self.intercept_)
        before = copy_weights(*self._coef(state))  # kept if this pass diverges
        t0 = time.perf_counter()
        with np.errstate(over="ignore", invalid="ignore"):
            self._run_epoch(state, Xs, y_enc, 0, self._stream_rng)
        elapsed = time.perf_counter() - t0
        _, _, loss, err = self._round_metrics(state, Xs, y_enc)
        self.diverged_ = False
        if not np.isfinite(loss):
            diverge(self, self.n_epochs_, "non-finite weights or loss on this chunk")
        self.n_epochs_ += 1
        self.t_ = getattr(self, "t_", 0) + Xs.shape[0]
        times = self.history_["time"]
        for key, val in zip(HISTORY_KEYS, (self.n_epochs_, (times[-1] if times else 0.0)
                                           + elapsed, loss, err, np.nan, np.nan)):
            self.history_[key].append(int(val) if key == "epoch" else float(val))
        finish_fit(self, state, before, None, 1)
        return self

    def _stream_chunk(self, X, y, classes, first):
        """Validate a chunk: CSR ``X`` and ``y`` encoded with ``classes_`` (set from
        ``classes`` on the first call)."""
        if first:
            if classes is None:
                raise ValueError(
                    f"{type(self).__name__}.partial_fit needs classes= on its first call: "
                    "every class the stream will hold (a chunk may miss some)")
            classes = np.unique(np.asarray(classes))
            if classes.ndim != 1 or classes.shape[0] < 2:
                raise ValueError(f"classes must hold at least 2 classes, got {classes!r}")
        elif classes is not None and not np.array_equal(np.unique(np.asarray(classes)),
                                                        self.classes_):
            raise ValueError(
                f"classes={_preview(np.unique(np.asarray(classes)))} differs from the "
                f"classes of the first partial_fit call {_preview(self.classes_)}")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=first,
                             ensure_min_samples=1)
        check_classification_targets(y)
        if first:
            self.classes_ = classes
        from .base import as_csr
        return as_csr(X), self._encode(y)
