"""The book's oracle: the exact maximum of the regularised softmax log-likelihood.

Fagan & Iyengar eq. (2):

    L(W) = Σ_i [ x_iᵀ w_{y_i} − log Σ_k exp(x_iᵀ w_k) ] − (μ/2) ‖W‖²_F .

:class:`SoftmaxRegression` maximises it with L-BFGS (``scipy.optimize``) on exact, vectorised
gradients computed block by block (never more than a bounded N × K block in memory). It agrees
with ``sklearn.linear_model.LogisticRegression(C=1/μ, fit_intercept=False)``, which minimises
the same objective.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize

from .base import LinearSoftmaxClassifier, as_csr
from .metrics import BLOCK_ENTRIES

__all__ = ["SoftmaxRegression", "softmax_objective"]


def softmax_objective(coef, X, y, mu=0.0, intercept=None, with_grad=True):
    """Negative of eq. (2), ``−L(W)``, and its gradient with respect to ``W`` (and ``b``).

    Parameters
    ----------
    coef : (K, D) ; X : CSR or dense (N, D) ; y : int (N,) in 0..K-1 ; mu : float ≥ 0
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
    """Exact maximum-likelihood softmax regression by L-BFGS: the book's reference optimum.

    Parameters
    ----------
    mu : float, default 0.0
        Ridge parameter μ of eq. (2) (scikit-learn's ``C = 1/μ``). With ``mu=0`` the optimum
        may not exist (separable data); L-BFGS then stops at ``max_iter``.
    fit_intercept : bool, default False
        Add an unpenalised bias per class.
    tol : float, default 1e-8
        Stop when the largest gradient entry, divided by N, falls below ``tol``.
    max_iter : int, default 1000
    warm_start : bool, default False

    Attributes
    ----------
    coef_ (K, D), intercept_ (K,) or None, classes_, n_iter_, objective_ (−L(W)/N at the end),
    fit_time_ (seconds).
    """

    def __init__(self, mu=0.0, fit_intercept=False, tol=1e-8, max_iter=1000, warm_start=False):
        self.mu = mu
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def fit(self, X, y):
        """Maximise eq. (2) on ``(X, y)``."""
        if not (np.isfinite(self.mu) and self.mu >= 0):
            raise ValueError(f"mu must be a finite number >= 0, got {self.mu!r}")
        old = getattr(self, "coef_", None) if self.warm_start else None
        X, y_enc = self._validate_fit(X, y)
        X = as_csr(X)
        n, d = X.shape
        k = self.classes_.shape[0]
        size = k * d
        x0 = np.zeros(size + (k if self.fit_intercept else 0))
        if old is not None and old.shape == (k, d):
            x0[:size] = old.ravel()
            if self.fit_intercept and getattr(self, "intercept_", None) is not None:
                x0[size:] = self.intercept_

        def fun(theta):
            coef = theta[:size].reshape(k, d)
            b = theta[size:] if self.fit_intercept else None
            v, g, gb = softmax_objective(coef, X, y_enc, self.mu, b)
            grad = g.ravel() if gb is None else np.concatenate([g.ravel(), gb])
            return v / n, grad / n

        t0 = time.perf_counter()
        res = minimize(
            fun, x0, jac=True, method="L-BFGS-B",
            options={"maxiter": int(self.max_iter), "gtol": float(self.tol),
                     "ftol": 1e3 * np.finfo(float).eps, "maxcor": 20},
        )
        self.fit_time_ = time.perf_counter() - t0
        self.coef_ = res.x[:size].reshape(k, d).copy()
        self.intercept_ = res.x[size:].copy() if self.fit_intercept else None
        self.n_iter_ = int(res.nit)
        self.objective_ = float(res.fun)
        self.converged_ = bool(res.success)
        return self

    def log_likelihood(self, X, y):
        """L(W) of eq. (2) on ``(X, y)`` (sum over rows, ridge term included)."""
        X = as_csr(self._validate_X(X))
        y = self._encode(y)
        return -softmax_objective(self.coef_, X, y, self.mu, self.intercept_, with_grad=False)
