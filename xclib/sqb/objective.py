"""The objective every estimator of the chapter minimises, its optimum, and their shared base.

``L(θ) = (1/T) Σ_j [log(1 + exp(θᵀx_j)) − y_j θᵀx_j] + (α/2) ‖θ‖²``,  y_j ∈ {0, 1},

eq. (4) of Aravkin et al. for binary logistic regression. The paper writes the ridge as η on
this same mean scale, so **the paper's η is** ``alpha`` **exactly** (its experiments use
η = 1/T, i.e. ``alpha=1/T``; scikit-learn's ``LogisticRegression(C=1)`` is the same problem).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.optimize
from sklearn.utils.multiclass import type_of_target

from ..base import IterativeSoftmaxEstimator, as_csr
from ..metrics import softmax_loss_and_error

__all__ = ["logistic_objective", "logistic_optimum"]


def logistic_objective(theta, X, y01, alpha, with_grad=True):
    """``L(θ) = mean(log(1 + e^u) − y u) + (α/2)‖θ‖²``, ``u = Xθ`` (eq. 4), and its gradient.

    Parameters
    ----------
    theta : (D,) ; X : (T, D) CSR or dense ; y01 : (T,) labels in {0, 1}
    alpha : float ≥ 0, the ridge (the paper's η).
    with_grad : bool, also return ``∇L(θ)``.
    """
    u = np.asarray(X @ theta).ravel()
    f = float(np.mean(np.logaddexp(0.0, u) - y01 * u) + 0.5 * alpha * theta @ theta)
    if not with_grad:
        return f
    p = 0.5 * (1.0 + np.tanh(0.5 * u))  # σ(u) without overflow
    g = np.asarray(X.T @ (p - y01)).ravel() / X.shape[0] + alpha * theta
    return f, g


def logistic_optimum(X, y01, alpha, tol=1e-10, max_iter=5000):
    """θ* and L(θ*) by L-BFGS to a projected-gradient norm ``tol`` (the excess-cost reference)."""
    X = as_csr(X)
    y01 = np.asarray(y01, dtype=np.float64)
    res = scipy.optimize.minimize(
        logistic_objective, np.zeros(X.shape[1]), args=(X, y01, alpha), jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "maxfun": 2 * max_iter, "gtol": tol, "ftol": 0.0,
                 "maxcor": 20},
    )
    return res.x, float(res.fun)


def lipschitz_constant(X, alpha):
    """Squared row norms and ``L = max_i ‖x_i‖²/4 + alpha``, the largest Lipschitz constant
    of one row's gradient (the step ``1/L`` of SAG, and the default step of SGD)."""
    sqnorm = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return sqnorm, 0.25 * float(sqnorm.max()) + float(alpha)


@dataclass
class LogisticState:
    """What every estimator of the chapter keeps during ``fit``.

    theta : the iterate (D,), or W as a K·D vector for the multinomial model.
    arrays : ``(indptr, indices, data, y)`` of the training set, y as float64.
    n : rows T. passes : effective passes after each round.
    """

    theta: np.ndarray
    arrays: tuple
    n: int
    passes: list = field(default_factory=list)

    @classmethod
    def start(cls, X, y, n_weights=None, **extra):
        """State at θ = 0 for CSR ``X`` and encoded labels ``y``."""
        big = float(np.max(np.abs(X.data))) if X.nnz else 0.0
        if big > 1e150:  # ‖x‖² and every step's curvature overflow float64
            raise ValueError(
                f"X has entries up to {big:.3g}: their squares overflow float64, so no step "
                "or curvature of the logistic cost can be computed; rescale X (for instance "
                "with sklearn.preprocessing.StandardScaler)")
        arrays = (X.indptr, X.indices, X.data, y.astype(np.float64))
        size = X.shape[1] if n_weights is None else n_weights
        return cls(theta=np.zeros(size), arrays=arrays, n=X.shape[0], **extra)


class _RidgeLogistic(IterativeSoftmaxEstimator):
    """Shared parts of this chapter's estimators: the history records the *cost*
    ``L(θ)`` (the paper's "training cost"/"testing cost": log-loss + (α/2)‖coef‖²) and the
    effective passes (``history_["passes"]``, the paper's x-axis)."""

    def _history_metrics(self, coef, intercept, X, y):
        loss, err = softmax_loss_and_error(coef, X, y, intercept)
        return loss + 0.5 * float(self.alpha) * float(np.sum(coef * coef)), err

    def _finalize(self, state):
        self.history_["passes"] = [float(p) for p in state.passes[: self.n_epochs_]]

    def _set_weights(self, state, coef, intercept):
        """``warm_start``: θ from the fitted ``coef_`` (W as a vector; ``coef_[1] − coef_[0]``
        for the binary model, whose ``coef_`` is ``[0, θ]``)."""
        state.theta[:] = (coef[1] - coef[0]) if self._n_weight_rows() == 1 else coef.ravel()

    def _n_weight_rows(self):
        return 1


class _BinaryLogistic(_RidgeLogistic):
    """Binary logistic estimators: K = 2 rows, ``coef_ = [0, θ]`` (the softmax of ``(0, θᵀx)``
    is the logistic model), so the cost is ``L(θ)``; ``theta_`` is θ."""

    def _validate_fit(self, X, y):
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type not in ("binary", "unknown") and np.unique(np.asarray(y)).shape[0] > 2:
            raise ValueError(
                f"Only binary classification is supported ({type(self).__name__} is binary "
                f"logistic regression). The type of the target is {y_type}."
            )
        return super()._validate_fit(X, y)

    def _theta(self, state):
        """The model's θ in ``state`` (the iterate; ASGD's is the average)."""
        return state.theta

    def _coef(self, state):
        theta = self._theta(state)
        return np.vstack([np.zeros_like(theta), theta]), None

    def _finalize(self, state):
        super()._finalize(state)
        self.theta_ = self.coef_[1]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags
