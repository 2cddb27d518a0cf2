"""The book's oracle: the exact minimum of the ridge-regularised softmax loss.

Fagan & Iyengar eq. (2), written as a mean (the book's one scale for the ridge, ``alpha``):

    f(W) = (1/N) Σ_i [ log Σ_k exp(x_iᵀ w_k) − x_iᵀ w_{y_i} ] + (α/2) ‖W‖²_F ,

that is −L(W)/N with the paper's μ = α·N. :class:`SoftmaxRegression` minimises it with L-BFGS
(``scipy.optimize``) on exact, vectorised gradients computed block by block (never more than a
bounded N × K block in memory). It agrees with
``sklearn.linear_model.LogisticRegression(C=1/(α·N), fit_intercept=False)``, which minimises
the same objective.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from .base import ALPHA, FIT_INTERCEPT, MAX_ITER, TOL, LinearSoftmaxClassifier, as_csr
from .metrics import BLOCK_ENTRIES

__all__ = ["SoftmaxRegression", "row_scale", "softmax_objective"]


def softmax_objective(coef, X, y, mu=0.0, intercept=None, with_grad=True):
    """Negative of eq. (2) on the sum scale, ``−L(W)``, and its gradient in ``W`` (and ``b``).

    Parameters
    ----------
    coef : (K, D) ; X : CSR or dense (N, D) ; y : int (N,) in 0..K-1
    mu : float ≥ 0, the paper's ridge on this sum scale (``alpha·N`` of the estimators)
    intercept : (K,) or None. The intercept is never penalised.

    Returns
    -------
    value, grad_coef, grad_intercept (None without intercept) ; or just value.
    """
    k = coef.shape[0]
    n = X.shape[0]
    rows = max(1, BLOCK_ENTRIES // k)
    value = 0.5 * mu * float(np.sum(coef * coef))
    g = mu * coef if with_grad else None
    gb = np.zeros(k) if (with_grad and intercept is not None) else None
    coef_t = np.ascontiguousarray(coef.T)  # once, not once per block
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        Xb = X if (start == 0 and stop == n) else X[start:stop]
        s = np.asarray(Xb @ coef_t)
        if intercept is not None:
            s += intercept
        yb = y[start:stop]
        rows_b = np.arange(stop - start)
        # log-sum-exp by hand: scipy.special.logsumexp costs ~10x more here (array-API layer)
        m = s.max(axis=1)
        e = np.exp(s - m[:, None])
        sum_e = e.sum(axis=1)
        lse = m + np.log(sum_e)
        value += float(np.sum(lse) - np.sum(s[rows_b, yb]))
        if with_grad:
            p = e
            p /= sum_e[:, None]
            p[rows_b, yb] -= 1.0
            g += np.asarray(Xb.T @ p).T
            if gb is not None:
                gb += p.sum(axis=0)
    if with_grad:
        return value, g, gb
    return value


class SoftmaxRegression(LinearSoftmaxClassifier):
    """Exact ridge-regularised softmax regression by L-BFGS: the book's reference optimum.

    Parameters
    ----------
    alpha : float, default 1e-4
        Ridge: the objective is the mean log-loss + (alpha/2)·‖W‖². Fagan & Iyengar's μ of
        eq. (2) (a sum over rows) is ``alpha·N``; scikit-learn's ``C`` is ``1/(alpha·N)``. With
        ``alpha=0`` the optimum may not exist (separable data): L-BFGS then stops at
        ``max_iter`` with a :class:`~sklearn.exceptions.ConvergenceWarning`.
    fit_intercept : bool, default False
        Add an unpenalised bias per class.
    tol : float, default 1e-8
        Stop when the largest entry of the gradient of the mean objective falls below ``tol``.
    max_iter : int, default 1000
        L-BFGS iterations at most; stopping there warns ``ConvergenceWarning``.
    warm_start : bool, default False
        Start from the previous fit's weights when their shape matches.

    Notes
    -----
    When the largest row norm ``s`` of ``X`` is far from 1 (above 1e4 or below 1e-4), the
    problem is solved in the scaled variables ``V = s·W`` (rows ``x/s``, ridge ``alpha/s²``):
    the same minimiser, but L-BFGS's first steps are well scaled whatever the units of the
    features (features of size 1e50 otherwise stop it at iteration 0). Rows of ordinary size
    are left as they are, so the iterates are those of the plain problem.

    Attributes
    ----------
    coef_ (K, D), intercept_ (K,) or None, classes_, n_iter_, objective_ (the mean objective
    at the end), converged_ (bool), fit_time_ (seconds).
    """

    _parameter_constraints = {
        "alpha": ALPHA,
        "fit_intercept": FIT_INTERCEPT,
        "tol": TOL,
        "max_iter": MAX_ITER,
        "warm_start": ["boolean"],
    }

    def __init__(self, alpha=1e-4, fit_intercept=False, tol=1e-8, max_iter=1000,
                 warm_start=False):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def fit(self, X, y):
        """Minimise the mean objective on ``(X, y)``."""
        self._validate_params()
        old = getattr(self, "coef_", None) if self.warm_start else None
        old_b = getattr(self, "intercept_", None) if self.warm_start else None
        X, y_enc = self._validate_fit(X, y)
        n, d = X.shape
        k = self.classes_.shape[0]
        size = k * d
        scale = row_scale(X)
        Xs = X * (1.0 / scale) if scale != 1.0 else X
        mu_s = float(self.alpha) * n / scale / scale  # the sum-scale ridge in V = s·W
        x0 = np.zeros(size + (k if self.fit_intercept else 0))
        if old is not None and old.shape == (k, d):
            x0[:size] = old.ravel() * scale
            if self.fit_intercept and old_b is not None:
                x0[size:] = old_b

        def fun(theta):
            coef = theta[:size].reshape(k, d)
            b = theta[size:] if self.fit_intercept else None
            v, g, gb = softmax_objective(coef, Xs, y_enc, mu_s, b)
            grad = g.ravel() if gb is None else np.concatenate([g.ravel(), gb])
            return v / n, grad / n

        t0 = time.perf_counter()
        # the W-gradient is s times the V-gradient: stop when max |∇_W f| < tol
        res = minimize(
            fun, x0, jac=True, method="L-BFGS-B",
            options={"maxiter": int(self.max_iter), "gtol": float(self.tol) / scale,
                     "ftol": 1e3 * np.finfo(float).eps, "maxcor": 20},
        )
        self.fit_time_ = time.perf_counter() - t0
        self.coef_ = res.x[:size].reshape(k, d) / scale
        self.intercept_ = res.x[size:].copy() if self.fit_intercept else None
        self.n_iter_ = int(res.nit)
        self.objective_ = float(res.fun)
        self.converged_ = bool(res.success)
        if not self.converged_:
            warnings.warn(
                f"SoftmaxRegression stopped after {self.n_iter_} L-BFGS iterations without "
                f"reaching tol={self.tol:g} ({res.message}); raise max_iter or alpha",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def log_likelihood(self, X, y):
        """L(W) of eq. (2) on ``(X, y)``: a sum over rows, ridge ``(alpha·N/2)·‖W‖²`` included."""
        X = as_csr(self._validate_X(X))
        y = self._encode(y)
        mu = float(self.alpha) * X.shape[0]
        return -softmax_objective(self.coef_, X, y, mu, self.intercept_, with_grad=False)


def row_scale(X):
    """Largest row L2 norm of CSR ``X`` when it lies outside [1e-4, 1e4], else 1.0."""
    if X.nnz == 0:
        return 1.0
    m = float(np.max(np.abs(X.data)))
    if not (np.isfinite(m) and m > 0.0):
        return 1.0
    v = X.data / m  # no overflow for features near the float range
    sq = np.add.reduceat(v * v, X.indptr[:-1][np.diff(X.indptr) > 0])
    s = m * float(np.sqrt(sq.max()))
    if not (np.isfinite(s) and s > 0.0) or 1e-4 <= s <= 1e4:
        return 1.0
    return s
