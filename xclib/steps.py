"""The step of a stochastic fit from the data (``learning_rate="auto"``), the ridge that goes
with it, and the step schedule: :class:`StepRules`, mixed into every stochastic estimator by
:class:`xclib.base.IterativeSoftmaxEstimator`."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["CUT", "StepRules", "max_row_norm", "pow2_row_scale", "row_scale"]

#: the factor each cut of ``decay="adaptive"`` divides the step by (scikit-learn's)
CUT = 5.0


def max_row_norm(X, rms=False):
    """The largest row L2 norm of CSR ``X`` (``rms``: the root mean square of the row norms),
    computed without overflow for features near the float range; None when ``X`` has no
    non-zero or the norm is not a positive finite number."""
    if X.nnz == 0:
        return None
    m = float(np.max(np.abs(X.data)))
    if not (np.isfinite(m) and m > 0.0):
        return None
    v = X.data / m
    sq = np.add.reduceat(v * v, X.indptr[:-1][np.diff(X.indptr) > 0])
    norm = m * float(np.sqrt(sq.sum() / X.shape[0] if rms else sq.max()))
    return norm if np.isfinite(norm) and norm > 0.0 else None


def row_scale(X):
    """Largest row L2 norm of CSR ``X`` when it lies outside [1e-4, 1e4], else 1.0 (the
    scale the exact solver and DS-MLR divide rows by)."""
    s = max_row_norm(X)
    return 1.0 if s is None or 1e-4 <= s <= 1e4 else s


def pow2_row_scale(X):
    """The power of two nearest the root mean square of the row L2 norms of CSR ``X`` (1.0
    for rows of norm 1, and for ``X`` without a non-zero).

    Dividing the rows by it is exact in floating point and brings the typical row norm into
    [0.71, 1.42), whatever the features' units (pixel values, counts, 1e-50 or 1e200). The
    mean, not the largest norm: on ALOI's histograms the norms run from 9 to 102 (median 19),
    and scaling by the largest left the typical row's step 40 times too small.
    """
    norm = max_row_norm(X, rms=True)
    return 1.0 if norm is None else math.ldexp(1.0, int(round(math.log2(norm))))


class StepRules:
    """The step, the ridge and the stopping rule of a stochastic fit (mixed into
    :class:`IterativeSoftmaxEstimator`).

    Stopping and collapse
    ---------------------
    An estimator with ``_stops_on_tol`` has ``tol`` and ``n_iter_no_change``: the fit stops
    once ``n_iter_no_change`` rounds in a row fail to lower the lowest training loss by
    ``tol`` (scikit-learn's ``SGDClassifier`` rule), and warns ``ConvergenceWarning`` when
    it runs out of rounds first; ``tol=None`` runs every round. Any fit that ends no better
    than its start, or predicting its training rows no better than the most frequent class,
    warns ``ConvergenceWarning`` (:func:`_warn_if_collapsed`).

    Fitted attributes: ``row_scale_``, the power of two the rows were divided by (1.0 unless
    ``learning_rate="auto"``, :meth:`_resolve_step`); ``learning_rate_``, the initial step in
    the units of X (where it is a number); ``n_step_cuts_``, the cuts of the adaptive
    schedule (:meth:`_step_at`; 0 under a numeric ``decay``).
    """

    #: the initial step ``learning_rate="auto"`` means on rows divided by
    #: :func:`pow2_row_scale` (None: no ``"auto"`` handled here)
    _auto_learning_rate = None
    #: whether ``tol`` and ``n_iter_no_change`` stop the fit (see *Stopping*)
    _stops_on_tol = False

    def _resolve_step(self, X):
        """``(s, step)``: the rows' scale and the initial step of a fit on ``X``.

        With ``learning_rate="auto"`` (and a class that sets ``_auto_learning_rate``) the fit
        runs on ``X / s``, ``s`` = :func:`pow2_row_scale` (the power of two nearest the rows'
        root-mean-square norm), with ridge ``alpha / s²`` on ``V = s·W``: the same minimiser, since
        ``W x = V (x / s)`` and ``alpha‖W‖² = (alpha / s²)‖V‖²``, and exact in floating point.
        There the step is ``_auto_learning_rate``, the one tuned for rows of norm about 1;
        in the units of ``X`` it is ``_auto_learning_rate / s²`` (``learning_rate_``). The
        step is capped at ``1 / (2 alpha / s²)``, so that the ridge's factor ``1 − step·alpha``
        stays at least 1/2 (it binds only for features so small that the ridge dominates the
        fit). A number is used as given, on ``X`` itself (``s = 1``).
        """
        lr = getattr(self, "learning_rate", None)
        if isinstance(lr, str) and lr == "auto" and self._auto_learning_rate is not None:
            s = pow2_row_scale(X)
            ridge = float(getattr(self, "alpha", 0.0)) / s / s
            step = self._auto_step(self.classes_.shape[0], X, s)
            return s, (min(step, 0.5 / ridge) if ridge > 0 else step)
        return 1.0, lr

    def _auto_step(self, n_classes, X, s):
        """The step of ``learning_rate="auto"`` on rows of norm about 1 (``X / s``)."""
        return float(self._auto_learning_rate)

    def _ridge(self):
        """The ridge of the problem the kernels solve: ``alpha / s²`` (``alpha`` when s = 1)."""
        s = getattr(self, "_fit_scale", 1.0)
        return float(self.alpha) / s / s

    def _adaptive(self):
        """Whether the step follows the adaptive schedule (:meth:`_step_at`): ``decay=
        "adaptive"``, or ``decay="auto"`` with ``learning_rate="auto"``."""
        decay = getattr(self, "decay", None)
        return decay == "adaptive" or (
            decay == "auto" and getattr(self, "learning_rate", None) == "auto")

    def _step_at(self, epoch):
        """The step of ``epoch`` (from 0), step₀ of :meth:`_resolve_step`.

        * ``decay`` a number: ``step₀ · decay^epoch``, the papers' schedule.
        * ``decay="adaptive"`` (scikit-learn's ``SGDClassifier(learning_rate="adaptive")``):
          ``step₀ / 5^c``, c the cuts so far (:class:`xclib.fitloop.StepCuts`). The step stays
          at step₀ while the training loss falls; it is divided by 5 each time
          ``n_iter_no_change`` epochs in a row fail to lower the lowest loss by ``tol``, and
          each time an epoch blows up (its loss non-finite or above twice the lowest), which
          also puts back the weights of the lowest loss. The fit stops at the
          :data:`~xclib.fitloop.MAX_CUTS`-th cut for lack of progress. A geometric decay
          bounds the distance the weights can travel (``step₀ / (1 − decay)`` in total);
          this schedule does not, so a step₀ that is too small for the data still reaches the
          optimum, and one too large backs off instead of diverging.
        * ``decay="auto"`` (the default): ``"adaptive"`` with ``learning_rate="auto"``,
          0.9 (the papers' value) with a learning rate given as a number.
        """
        if self._adaptive():
            return float(self._fit_step) * CUT ** -getattr(self, "_fit_cuts", 0)
        decay = 0.9 if self.decay == "auto" else float(self.decay)
        return float(self._fit_step) * decay ** epoch
