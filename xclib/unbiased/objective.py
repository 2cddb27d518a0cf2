"""The double sums of Fagan & Iyengar exactly (eqs. 5 and 8; O(NKD), for small problems and
checks), the class weights β of the unbiased ridge and the U-max bounds of Appendix A (see
:mod:`xclib.unbiased`)."""
from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from ..base import as_csr

__all__ = ["FORMULATIONS", "optimal_u", "double_sum_objective", "class_weights",
           "umax_bounds"]

#: the two double sums: ours (eq. 5/6) and Raman et al.'s (eq. 8)
FORMULATIONS = ("proposed", "raman")


# -- the objective, exactly (small problems only: O(NKD)) ------------------------------------
def _scores(W, X):  # dense O(NKD): for checking the stochastic methods on small problems
    s = X @ W.T
    return np.asarray(s.toarray() if hasattr(s, "toarray") else s)


def optimal_u(W, X, y, formulation="proposed"):
    """``u*(W)``: ``log(1 + Σ_{k≠y_i} e^{x_iᵀ(w_k − w_{y_i})})`` (proposed) or
    ``log Σ_k e^{x_iᵀ w_k}`` (Raman et al.)."""
    s = _scores(W, X)
    lse = logsumexp(s, axis=1)
    if formulation == "raman":
        return lse
    return lse - s[np.arange(len(y)), y]


def double_sum_objective(u, W, X, y, formulation="proposed", alpha=0.0):
    """The double sum ``F(u, W)`` of eq. (5) (``"proposed"``) or eq. (8) (``"raman"``), our scale.

    ``F(optimal_u(W), W) = mean log-loss + (α/2)‖W‖² + 1`` for both formulations.
    """
    s = _scores(W, X)
    n, K = s.shape
    sy = s[np.arange(n), y]
    mask = np.ones_like(s, dtype=bool)
    mask[np.arange(n), y] = False
    if formulation == "raman":
        # ū − x·w_y + e^{x·w_y − ū} + Σ_{k≠y} e^{x·w_k − ū}  (eq. 8 / N, averaged over i)
        per = u - sy + np.exp(sy - u) + np.sum(np.where(mask, np.exp(s - u[:, None]), 0.0), axis=1)
    elif formulation == "proposed":
        z = s - sy[:, None]
        per = u + np.exp(-u) + np.sum(np.where(mask, np.exp(z - u[:, None]), 0.0), axis=1)
    else:
        raise ValueError(f"formulation must be one of {FORMULATIONS}, got {formulation!r}")
    return float(np.mean(per) + 0.5 * alpha * np.sum(W * W))


def class_weights(y, n_classes, n_sampled=1, sampling="others"):
    """``β_j = N(K−1) / (n_j(K−1) + N − n_j)``: the inverse probability that a draw ``(i, k)``
    touches class ``j`` (see the module docstring for the paper's misprint). With m =
    ``n_sampled`` classes per draw, ``P(j touched) = n_j/N + (1 − n_j/N)·m/(K−1)``
    (``"others"``) or ``… m/K`` (``"all"``: the label is among the m draws at times)."""
    y = np.asarray(y)
    n = y.shape[0]
    nj = np.bincount(y, minlength=n_classes).astype(np.float64)
    pool = n_classes - 1 if sampling == "others" else n_classes
    return n * pool / (nj * pool + n_sampled * (n - nj))


def umax_bounds(X, n_classes, alpha):
    """Appendix A at our scale (the paper's μ/N is alpha): ``B_W = sqrt(2 log K / alpha)``
    (Lemma 1) and ``B_u = log(1 + (K−1) e^{2 B_x B_W})`` (Lemma 2); both infinite when
    ``alpha = 0``."""
    if alpha <= 0:
        return np.inf, np.inf
    bw = math.sqrt(2.0 * math.log(n_classes) / alpha)
    X = as_csr(X)
    bx = float(np.sqrt(np.max(np.asarray(X.multiply(X).sum(axis=1))))) if X.shape[0] else 0.0
    bu = float(np.logaddexp(0.0, math.log(n_classes - 1) + 2.0 * bx * bw))
    return bw, bu
