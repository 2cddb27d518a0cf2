"""The objectives of DS-MLR in NumPy: eq. (2), eqs. (10)–(12) and the exact ``b`` of eq. (9).

For the chapter's checks and the tests (dense N × K scores), not for training. ``alpha`` is
Raman et al.'s λ: their eq. (2) is already a mean over rows plus ``λ/2 ‖W‖²``, the book's scale.
"""
from __future__ import annotations

import numpy as np

from ..base import as_csr
from ..exact import softmax_objective
from ..metrics import row_logsumexp

__all__ = ["exact_b", "primal_objective", "ds_objective"]


def exact_b(W, X):
    """Eq. (9) with β_i = 1: ``b_i = −log Σ_k exp(w_kᵀx_i)``, shape (N,)."""
    s = np.asarray(X @ W.T)
    return -row_logsumexp(s)


def primal_objective(W, X, y, alpha):
    """``L1(W)`` of eq. (2): mean log-loss + (alpha/2)‖W‖² (``alpha`` = the paper's λ).

    Equals ``softmax_objective(W, X, y, alpha·N) / N`` (the sum-scale function of
    :mod:`xclib.exact`).
    """
    n = X.shape[0]
    return softmax_objective(W, as_csr(X), y, alpha * n, with_grad=False) / n


def ds_objective(W, b, X, y, alpha, with_grad=False):
    """``L2(W, b) = Σ_i Σ_k f_ki(w_k, b_i)`` of eqs. (10)–(12), and its gradients.

    Parameters
    ----------
    W : (K, D) ; b : (N,) ; X : (N, D) ; y : (N,) int labels in [0, K)
    alpha : float, the paper's λ
    with_grad : bool

    Returns
    -------
    ``value`` or ``(value, grad_W (K, D), grad_b (N,))``.
    """
    X = as_csr(X)
    n = X.shape[0]
    s = np.asarray(X @ W.T)
    e = np.exp(s + b[:, None])
    value = (0.5 * alpha * np.sum(W * W) - np.sum(s[np.arange(n), y]) / n
             + (np.sum(e) - np.sum(b) - n) / n)
    if not with_grad:
        return value
    r = e.copy()
    r[np.arange(n), y] -= 1.0
    grad_W = alpha * W + np.asarray(X.T @ r).T / n
    grad_b = (e.sum(axis=1) - 1.0) / n
    return value, grad_W, grad_b
