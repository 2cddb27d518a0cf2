"""The quadratic bound on a partition function (Jebara & Choromanska 2012).

Algorithm 1 of Aravkin et al. (subroutine "Bound Computation"): for
``Z(θ) = Σ_y h(y) exp(θᵀ f(y))`` and any anchor ``θ̃`` it finds ``z, r, S`` with

    Z(θ) ≤ z · exp(½ (θ−θ̃)ᵀ S (θ−θ̃) + (θ−θ̃)ᵀ r)        (eq. 3)

:func:`bound_factors` runs the loop over Ω on the log scale and :func:`bound_stats` forms
``S``; :func:`softmax_bound_row` is the same loop for the multinomial features
``f_x(y) = e_y ⊗ x``, where ``S = M ⊗ xxᵀ`` with a K × K matrix M.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import logaddexp, sigmoid

__all__ = ["curvature_weight", "bound_factors", "bound_stats", "softmax_bound_row",
           "softmax_bound_weights", "softmax_bound_matvec"]


@njit(cache=True, nogil=True)
def curvature_weight(t):
    """Bound weight ``tanh(t/2) / (2t)`` of Algorithm 1, ``t = log(α/z)``.

    Equals ¼ at ``t = 0`` (series ``¼ − t²/48``), tends to 0 as ``|t| → ∞`` and is exactly 0
    for the first term of the loop (``z → 0⁺``, ``t = +∞``).
    """
    at = abs(t)
    if at == np.inf:
        return 0.0
    if at < 1e-4:
        return 0.25 - t * t / 48.0
    return math.tanh(0.5 * t) / (2.0 * t)


@njit(cache=True, nogil=True)
def bound_factors(F, log_h, theta):
    """Quadratic bound on ``Z(θ) = Σ_y h(y) exp(θᵀf(y))`` at ``θ̃ = theta``, factored.

    Algorithm 1 (Jebara & Choromanska 2012) on the log scale (``z`` and ``α`` overflow for
    large scores, their logarithms do not)::

        z → 0⁺, r = 0, S = 0
        for y in Ω:  α = h(y) exp(θ̃ᵀ f(y));  l = f(y) − r
                     S += tanh(½ log(α/z)) / (2 log(α/z)) · l lᵀ
                     r += α / (z + α) · l;   z += α

    Parameters
    ----------
    F : (n, d) float64, rows ``f(y)`` for the n elements y of Ω.
    log_h : (n,) float64, ``log h(y)`` (``-inf`` allowed for h = 0).
    theta : (d,) float64, the anchor θ̃.

    Returns
    -------
    log_z : float, ``log z = log Z(θ̃)``.
    r : (d,) float64, ``E_{p_θ̃}[f]`` (the gradient of log Z at θ̃).
    L : (n, d) float64, the vectors ``l_y`` (Lemma 4: ``S = Lᵀ diag(D) L``).
    D : (n,) float64, the weights ``tanh(½ log(α/z)) / (2 log(α/z))``.
    """
    n, d = F.shape
    log_z = -np.inf
    r = np.zeros(d)
    L = np.empty((n, d))
    D = np.empty(n)
    for y in range(n):
        log_a = log_h[y]
        for i in range(d):
            log_a += F[y, i] * theta[i]
        for i in range(d):
            L[y, i] = F[y, i] - r[i]
        if log_a == -np.inf:  # h(y) = 0 adds nothing
            D[y] = 0.0
            continue
        t = np.inf if log_z == -np.inf else log_a - log_z
        D[y] = curvature_weight(t)
        p = sigmoid(t)  # α / (z + α)
        for i in range(d):
            r[i] += p * L[y, i]
        log_z = logaddexp(log_z, log_a)
    return log_z, r, L, D


@njit(cache=True, nogil=True)
def bound_stats(F, log_h, theta):
    """``(log z, r, S)`` of the bound (eq. 3), ``S = Lᵀ diag(D) L`` formed (small d only)."""
    log_z, r, L, D = bound_factors(F, log_h, theta)
    n, d = L.shape
    S = np.zeros((d, d))
    for y in range(n):
        w = D[y]
        if w == 0.0:
            continue
        for a in range(d):
            la = w * L[y, a]
            for b in range(d):
                S[a, b] += la * L[y, b]
    return log_z, r, S


@njit(cache=True, nogil=True)
def softmax_bound_row(scores, M):
    """Algorithm 1 for one row of multinomial logistic regression: Ω = {0..K−1},
    ``f_x(y) = e_y ⊗ x``, ``h = 1``. Fills the K × K matrix ``M`` and returns ``p``.

    With ``α_y = e^{s_y}`` (``s = Wx``) the loop keeps ``r = p̂ ⊗ x``, so every
    ``l_y = (e_y − p̂) ⊗ x`` and ``S = M ⊗ xxᵀ`` with ``M = Σ_y D_y a_y a_yᵀ``,
    ``a_y = e_y − p̂`` (p̂ before the update). At the end ``p̂ = softmax(s)``: ``r = E_p[f]``.
    O(K²) per row, on the log scale.
    """
    K = scores.shape[0]
    p = np.zeros(K)
    a = np.empty(K)
    M[:, :] = 0.0
    log_z = -np.inf
    for y in range(K):
        for k in range(K):
            a[k] = -p[k]
        a[y] += 1.0
        t = np.inf if log_z == -np.inf else scores[y] - log_z
        w = curvature_weight(t)
        if w != 0.0:
            for k in range(K):
                for kk in range(K):
                    M[k, kk] += w * a[k] * a[kk]
        q = sigmoid(t)
        for k in range(K):
            p[k] += q * a[k]
        log_z = logaddexp(log_z, scores[y])
    return p


@njit(cache=True, nogil=True)
def softmax_bound_weights(scores, wq):
    """The factors of :func:`softmax_bound_row`'s ``M`` in O(K): ``wq[0, y] = D_y`` (the
    curvature weight of step y) and ``wq[1, y] = q_y = e^{s_y} / Z_{y+1}`` (the share of
    class y in the running normaliser ``Z_{y+1} = Σ_{k≤y} e^{s_k}``). Returns ``p``.

    The running ``p̂`` before step y is the softmax of the first y scores, so
    ``a_y = e_y − p̂`` needs no storage: :func:`softmax_bound_matvec` applies ``M`` from
    these 2K numbers in O(K) instead of forming its K² entries.
    """
    K = scores.shape[0]
    log_z = -np.inf
    for y in range(K):
        t = np.inf if log_z == -np.inf else scores[y] - log_z
        wq[0, y] = curvature_weight(t)
        wq[1, y] = sigmoid(t)
        log_z = logaddexp(log_z, scores[y])
    p = np.empty(K)
    for k in range(K):
        p[k] = math.exp(scores[k] - log_z)
    return p


@njit(cache=True, nogil=True)
def softmax_bound_matvec(wq, v, out):
    """``out = M v`` for ``M = Σ_y D_y a_y a_yᵀ`` of :func:`softmax_bound_row`, in O(K).

    With ``m_y = p̂ᵀv`` (p̂ before step y) and ``c_y = D_y (v_y − m_y) = D_y a_yᵀv``,
    ``(Mv)_k = c_k − e^{s_k} Σ_{y>k} c_y / Z_y``. Both sums run as recursions whose factors
    lie in [0, 1], so no exponential can overflow whatever the scores:
    ``m_{y+1} = (1 − q_y) m_y + q_y v_y`` forward, and ``R_k = c_{k+1} + (1 − q_{k+1}) R_{k+1}``
    backward, with ``e^{s_k} Σ_{y>k} c_y / Z_y = q_k R_k``.
    """
    K = v.shape[0]
    m = 0.0
    for y in range(K):
        out[y] = wq[0, y] * (v[y] - m)  # c_y
        m = (1.0 - wq[1, y]) * m + wq[1, y] * v[y]
    r = 0.0
    for k in range(K - 1, -1, -1):
        c = out[k]
        out[k] = c - wq[1, k] * r
        r = c + (1.0 - wq[1, k]) * r
