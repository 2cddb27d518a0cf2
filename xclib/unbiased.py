"""Fagan & Iyengar, *Unbiased scalable softmax optimization*: U-max and Implicit SGD.

The log-loss of the softmax is rewritten (Section 2.1, eqs. 3–5) as a double sum over
datapoints ``i`` and classes ``k ≠ y_i`` with one auxiliary variable ``u_i`` per datapoint::

    F(u, W) = (1/N) Σ_i Σ_{k≠y_i} [ (u_i + e^{−u_i})/(K−1) + e^{x_iᵀ(w_k − w_{y_i}) − u_i} ]
              + (α/2) ‖W‖²,

whose minimum over ``u`` is ``u_i*(W) = log(1 + Σ_{k≠y_i} e^{x_iᵀ(w_k − w_{y_i})})`` and
``min_u F(u, W) = (mean log-loss of W) + (α/2)‖W‖² + 1``. Sampling ``i`` uniformly and
``k`` uniformly among the other ``K − 1`` classes gives the unbiased stochastic term (eq. 6)::

    f_ik(u, W) = u_i + e^{−u_i} + (K−1) e^{x_iᵀ(w_k − w_{y_i}) − u_i}
                 + (α/2)(β_{y_i} ‖w_{y_i}‖² + β_k ‖w_k‖²).

**Symbols and scale.** The paper's ``f`` is ``N`` times ours (its eqs. 2 and 5 sum over
``i``; its ``f_ik`` carries a factor ``N``), so the paper's ridge ``μ`` is ``alpha·N`` and
``SoftmaxRegression(alpha=alpha)`` is the exact optimum of our ``F``. The authors' released
code drops the factor ``N`` from the step, and their tuned learning rates (Table 2) are for
the code: we use the code's scaling, so Table 2's ``η`` is ``learning_rate`` as printed (a
step ``η`` on the paper's N-scaled ``f_ik`` is ``learning_rate = N·η``). Every step is one
datapoint and one class (n = m = 1), so there is no minibatch sum or mean to convert.

**β.** ``β_j`` must be the inverse probability that class ``j`` is touched by a draw
``(i, k)``: ``P(j ∈ {y_i, k}) = n_j/N + (N − n_j)/(N(K − 1))``, so
``β_j = N(K−1) / (n_j(K−1) + N − n_j)``. The paper prints ``N / (n_j + (N − n_j)(K − 1))``,
which swaps the roles of ``n_j`` and ``N − n_j`` and makes the ridge term biased; the
unbiasedness test in ``tests/test_unbiased.py`` pins ours. A step's ridge touches only
``w_k``, ``w_{y_i}`` (:func:`sgd_epoch`, :func:`implicit_epoch`: O(nnz(x_i)) per step).

The module reads like the chapter: the exact double sums (for small problems), the
stochastic-gradient coefficients (eqs. 7 and 8), the U-max rule (Algorithm 1), the
Implicit SGD step (Appendix F.1: eqs. 11–16 and the bisection bracket), the epoch kernels,
then the estimators :class:`VanillaSGD`, :class:`UMax` and :class:`ImplicitSGD`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real

import numpy as np
from numba import njit
from scipy.special import logsumexp

from ._numba import (
    draw_other_classes, lambertw_exp, logaddexp, softplus, sparse_row_axpy, sparse_row_dot,
)
from .base import (
    ALPHA, DECAY, LEARNING_RATE, N_EPOCHS, RANDOM_STATE, TOL, VERBOSE, Interval,
    IterativeSoftmaxEstimator, StrOptions, as_csr,
)
from .sampled import SHUFFLE_MODES, epoch_order, fold_row_scale

__all__ = [
    "VanillaSGD", "UMax", "ImplicitSGD", "double_sum_objective", "optimal_u", "class_weights",
    "umax_bounds", "double_sum_coefficients", "umax_increase", "implicit_step",
    "implicit_u_derivative", "sgd_epoch", "implicit_epoch", "FORMULATIONS",
]

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


def class_weights(y, n_classes):
    """``β_j = N(K−1) / (n_j(K−1) + N − n_j)``: the inverse probability that a draw ``(i, k)``
    touches class ``j`` (see the module docstring for the paper's misprint)."""
    y = np.asarray(y)
    n = y.shape[0]
    nj = np.bincount(y, minlength=n_classes).astype(np.float64)
    return n * (n_classes - 1) / (nj * (n_classes - 1) + n - nj)


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


# -- eq. (7) and (8): the stochastic gradient of one (i, k) ---------------------------------
@njit(cache=True, nogil=True)
def double_sum_coefficients(raman, s_y, s_k, u_i, n_classes):
    """Coefficients of the stochastic gradient of ``f_ik`` (α = 0 part), eqs. (7) and (8).

    ``∇_{w_k} f_ik = c_k x_i``, ``∇_{w_{y_i}} f_ik = c_y x_i``, ``∂_{u_i} f_ik = g_u``.

    Proposed (eq. 7, our scale): ``c_k = (K−1)e^{s_k − s_y − u_i} = −c_y``,
    ``g_u = 1 − e^{−u_i} − c_k``. Raman et al. (eq. 8): ``c_k = (K−1)e^{s_k − ū_i}``,
    ``c_y = e^{s_y − ū_i} − 1``, ``g_u = 1 − e^{s_y − ū_i} − c_k``.
    Returns ``(c_k, c_y, g_u)``. These are exponential in the scores: vanilla SGD overflows
    here (Section 2.2).
    """
    if raman:
        e_y = math.exp(s_y - u_i)
        c = (n_classes - 1) * math.exp(s_k - u_i)
        return c, e_y - 1.0, 1.0 - e_y - c
    c = (n_classes - 1) * math.exp(s_k - s_y - u_i)
    return c, -c, 1.0 - math.exp(-u_i) - c


@njit(cache=True, nogil=True)
def umax_increase(raman, s_y, s_k, u_i, delta):
    """Algorithm 1, lines 13–15: raise ``u_i`` to ``log(1 + e^{x_iᵀ(w_k − w_{y_i})})`` when it is
    more than ``δ`` below it (Raman's analogue: ``log(e^{s_y} + e^{s_k})``, a lower bound on
    ``ū_i*``). Afterwards ``x_iᵀ(w_k − w_{y_i}) − u_i ≤ δ``, so ``|c_k| ≤ (K−1)e^δ``."""
    t = logaddexp(s_y, s_k) if raman else softplus(s_k - s_y)
    return t if u_i < t - delta else u_i


# -- Appendix F.1: the Implicit SGD step for one (i, k), α = 0 ------------------------------
@njit(cache=True, nogil=True)
def _implicit_a(u, z, log_c, xx, lr, n_classes):
    """``a(u)`` of eq. (14) on the log scale, and the step ``A = a/(2‖x‖²)`` it gives w.

    ``a e^a = 2η(K−1)‖x‖² e^{z − u}`` ⇒ ``a = W₀(e^{z − u + log(2η(K−1)‖x‖²)})``. For
    ``‖x‖ = 0`` the limit ``A = η(K−1)e^{z−u}`` (and ``a = 0``) is returned.
    """
    if xx > 0.0:
        a = lambertw_exp(z - u + log_c)
        return a, a / (2.0 * xx)
    return 0.0, lr * (n_classes - 1) * math.exp(z - u)


@njit(cache=True, nogil=True)
def implicit_u_derivative(u, u_old, z, xx, lr, n_classes):
    """Half the derivative (16) of the reduced problem (15) in ``u_i`` (our scale)::

        h(u) = η(1 − e^{−u}) − a(u)/(2‖x‖²) + (u − ũ)

    which is increasing in ``u``; its root is the Implicit SGD value of ``u_i``. ``h(u) = 0``
    is exactly the ``u``-component of ``θ⁺ = θ − η∇f_ik(θ⁺)`` since
    ``a/(2‖x‖²) = η(K−1)e^{z − a − u}`` (eq. 13).
    """
    log_c = math.log(2.0 * lr * (n_classes - 1) * xx) if xx > 0.0 else 0.0
    a, A = _implicit_a(u, z, log_c, xx, lr, n_classes)
    return lr * (1.0 - math.exp(-u)) - A + (u - u_old)

# The Lambert W of eq. (14) on the log scale, warm-started. a = W₀(e^L) solves a + log a = L; in
# b = log a, ψ(b) = e^b + b − L = 0 is convex and increasing: Halley converges from any nearby
# start, one exp per iteration. Between two evaluations of (16) only L = z − u + log c changes.
_WPOLY = (-0.0012673254095268455, -0.00029588314906619015, 0.07294117158015563,
          0.3607043817796513, 0.5673574800951501)  # a least-squares quartic for W₀(e^L), |L| ≤ 2.5


@njit(cache=True, nogil=True)
def _w_start(L):
    """A cold start ``(b, a = e^b)`` for :func:`_w_refine`: ``a ≈ W₀(e^L)`` within 5 % (tested)."""
    if L < -2.5:
        b = L - math.exp(L)  # W(x) = x − x² + …, x = e^L
        return b, math.exp(b)
    if L > 2.5:
        lL = math.log(L)
        a = L - lL + lL / L  # the asymptotic expansion
        return math.log(a), a
    p = _WPOLY
    a = (((p[0] * L + p[1]) * L + p[2]) * L + p[3]) * L + p[4]
    return math.log(a), a


@njit(cache=True, nogil=True)
def _w_refine(L, b, a):
    """Halley on ``e^b + b = L`` from ``(b, a = e^b)`` (or from :func:`_w_start` when that start is
    far off); returns ``(b, a)`` with ``a = W₀(e^L)`` to ~1e-15 relative. The last step
    (``|s| ≤ 1e-5``, remaining error O(s³)) updates ``a`` by ``e^{−s} ≈ 1 − s + s²/2`` instead
    of a fresh exp."""
    if abs(a + b - L) > 0.5 * (1.0 + a):  # a far jump (early bisection steps): start afresh
        b, a = _w_start(L)
    for _ in range(100):
        r = a + b - L
        d = 1.0 + a
        den = d * d - 0.5 * r * a
        s = r * d / den if den > 0.5 * d * d else r / d  # Halley; Newton far to the right
        if abs(s) <= 1e-5:
            return b - s, a * (1.0 - s + 0.5 * s * s)
        b -= s
        a = math.exp(b)
    return b, a


@njit(cache=True, nogil=True)
def implicit_step(z, u_old, xx, lr, n_classes, tol, newton):
    """Solve the Implicit SGD update (9) for one datapoint and one class (Appendix F.1).

    Parameters
    ----------
    z : float, ``x_iᵀ(w̃_k − w̃_{y_i})`` at the old iterate
    u_old : float, ``ũ_i ≥ 0`` ; xx : float, ``‖x_i‖²``
    lr : float, η ; n_classes : int, K
    tol : float, ε of Proposition 4: the root is found to ``ε(1 + |u_i|)``
    newton : bool, False for plain bisection (the paper); True for Halley (Newton with the
        second derivative) steps safeguarded by the same bracket: whenever a step leaves the
        bracket it falls back to bisection, so it converges to the same root

    Returns
    -------
    (a, A, u_new, n_evals) : the ``a`` of eq. (11) (``w_{y_i} += A x_i``, ``w_k −= A x_i`` with
    ``A = a/(2‖x‖²)``), the new ``u_i`` and the number of evaluations of (16).

    The bracket (F.1): if ``h(ũ) < 0`` the root lies in ``[ũ, log(1 + (K−1)e^z)]``; otherwise in
    ``[max(0, log(K−1) + z − 2η‖x‖²), ũ]``. Its width is at most
    ``|z − ũ| + 2η‖x‖² + log(2(K−1))``, so bisection needs ``log₂(width/ε)`` evaluations.
    ``h`` is increasing and concave (``h' ≥ 1``, ``h'' = −ηe^{−u} − A/(1+a)³``, ``|h''| < h'``), so
    Newton-type steps are well behaved; Halley's step converges cubically, and the safeguarded
    solver stops once ``|s|³ ≤ 0.1 ε(1 + |u|)``: typically two evaluations of (16) instead of
    bisection's ~35. Each ``a(u) = W₀(e^{z−u+log c})`` is warm-started from the previous one
    (:func:`_w_refine`: one exp per Halley iteration, none for ``|Δu| ≤ 1e-5``).
    """
    lk = math.log(n_classes - 1)
    if xx > 0.0:
        L0 = z + math.log(2.0 * lr * (n_classes - 1) * xx)  # L(u) = L0 − u
        inv2xx = 0.5 / xx
        b, a = _w_start(L0 - u_old)
        b, a = _w_refine(L0 - u_old, b, a)
        A = a * inv2xx
    else:  # ‖x‖ = 0: a = 0 and the limit A = η(K−1)e^{z−u}
        L0 = inv2xx = a = b = 0.0
        A = lr * (n_classes - 1) * math.exp(z - u_old)
    u = u_old
    eu = math.exp(-u)
    h = lr * (1.0 - eu) - A  # h(ũ)
    n_evals = 1
    if h == 0.0:
        return a, A, u, n_evals
    if h < 0.0:
        lo = u_old
        hi = max(lo, softplus(lk + z))
    else:
        hi = u_old
        lo = min(hi, max(0.0, lk + z - 2.0 * lr * xx))
    for _ in range(2000):
        fast = False
        if newton:
            # h'(u) = 1 + η e^{−u} + A/(1 + a)  (a' = −a/(1+a) ⇒ A' = −A/(1+a); ‖x‖ = 0: A' = −A)
            # h''(u) = −η e^{−u} − A/(1 + a)³ ; Halley's step (cubic convergence)
            q = 1.0 / (1.0 + a)
            dh = 1.0 + lr * eu + A * q
            d2h = -lr * eu - A * q * q * q
            den = 2.0 * dh * dh - h * d2h
            un = u - (2.0 * h * dh / den if den > dh * dh else h / dh)  # Newton if Halley's is odd
            fast = lo < un < hi
            if not fast:
                un = 0.5 * (lo + hi)
        else:
            un = 0.5 * (lo + hi)
        step = un - u
        if (hi - lo <= tol * (1.0 + abs(lo)) or abs(step) <= tol * (1.0 + abs(u))
                or (fast and step * step * abs(step) <= 0.1 * tol * (1.0 + abs(un)))):
            u = un
            break
        u = un
        if xx > 0.0:
            b, a = _w_refine(L0 - u, b, a)
            A = a * inv2xx
        else:
            A = lr * (n_classes - 1) * math.exp(z - u)
        eu = math.exp(-u)
        h = lr * (1.0 - eu) - A + (u - u_old)
        n_evals += 1
        if h == 0.0:
            break
        if h < 0.0:
            lo = u
        else:
            hi = u
    if xx > 0.0:
        b, a = _w_refine(L0 - u, b, a)
        return a, a * inv2xx, u, n_evals
    return 0.0, lr * (n_classes - 1) * math.exp(z - u), u, n_evals


# -- epoch kernels ---------------------------------------------------------------------------
# Both keep each row of W as w_j = s_j·v_j (v_j stored in W[j]; see sampled.fold_row_scale): the
# ridge's shrink of a row is O(1) (s_j /= 1 + ηαβ_j) and a step stays O(nnz(x_i)).
@njit(cache=True, nogil=True)
def sgd_epoch(indptr, indices, data, sqnorm, y, W, u, rows, ks, lr, raman, delta, alpha, beta,
              b_u, b_w):
    """One epoch of vanilla SGD (``delta = inf``) or U-max (Algorithm 1) on the double sum.

    Parameters
    ----------
    indptr, indices, data : CSR of X ; sqnorm : (N,) ``‖x_i‖²`` ; y : (N,) int labels
    W : (K, D), u : (N,) updated in place ; rows, ks : (T,) the sampled datapoints and classes
    ``k ≠ y_i`` of each step ; lr : float η ; raman : bool, eq. (8) instead of eq. (6)
    delta : float, the U-max threshold δ (``inf``: no u-increase, i.e. vanilla SGD)
    alpha : float, ridge; beta : (K,) class weights β_j (:func:`class_weights`)
    b_u, b_w : projection bounds (``inf`` when alpha = 0); u is projected onto ``[0, b_u]`` for
    the proposed formulation (Raman's ``ū`` is unconstrained)

    The data part of eq. (7)/(8) is a gradient step; the ridge of ``f_ik`` is its proximal
    step ``w_j ← w_j / (1 + ηαβ_j)`` (the gradient step to O((ηαβ_j)²), stable for every η).
    O(nnz(x_i)) per step for any alpha (row scales; ``‖w_j‖²`` is tracked for the projection).
    """
    n_classes, use_umax, project = W.shape[0], delta < np.inf, b_w < np.inf
    scale = np.ones(n_classes)
    q = np.zeros(n_classes)  # ‖v_j‖², only when projecting
    if project:
        for j in range(n_classes):
            q[j] = np.dot(W[j], W[j])
    for t in range(rows.shape[0]):
        i = rows[t]
        k = ks[t]
        yi = y[i]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        d_k = sparse_row_dot(idx, val, W[k])
        d_y = sparse_row_dot(idx, val, W[yi])
        s_k = scale[k] * d_k
        s_y = scale[yi] * d_y
        ui = u[i]
        if use_umax:
            ui = umax_increase(raman, s_y, s_k, ui, delta)
        c_k, c_y, g_u = double_sum_coefficients(raman, s_y, s_k, ui, n_classes)
        a_k = -lr * c_k / scale[k]
        a_y = -lr * c_y / scale[yi]
        sparse_row_axpy(a_k, idx, val, W[k])
        sparse_row_axpy(a_y, idx, val, W[yi])
        if project:
            q[k] = max(q[k] + a_k * (2.0 * d_k + a_k * sqnorm[i]), 0.0)
            q[yi] = max(q[yi] + a_y * (2.0 * d_y + a_y * sqnorm[i]), 0.0)
        for j in (k, yi):
            if alpha > 0.0:
                scale[j] /= 1.0 + lr * alpha * beta[j]
            if project:
                nrm = scale[j] * math.sqrt(q[j])
                if nrm > b_w:
                    scale[j] *= b_w / nrm
            f = fold_row_scale(W, scale, j, False)
            q[j] *= f * f
        ui -= lr * g_u
        if not raman:
            ui = min(max(ui, 0.0), b_u)
        u[i] = ui
    fold_row_scale(W, scale, -1, True)


@njit(cache=True, nogil=True)
def implicit_epoch(indptr, indices, data, sqnorm, y, W, u, rows, ks, lr, alpha, beta, tol,
                   newton):
    """One epoch of Implicit SGD with n = m = 1 (Proposition 4), W and u updated in place.

    With the ridge of eq. (6) and ``ρ_j = ηαβ_j``, ``θ⁺ = θ − η∇f_ik(θ⁺)`` is, with
    ``A = η(K−1)e^{x_iᵀ(w_k⁺ − w_{y_i}⁺) − u_i⁺}``,
    ``w_k⁺ = (w̃_k − A x_i)/(1 + ρ_k)``, ``w_{y_i}⁺ = (w̃_{y_i} + A x_i)/(1 + ρ_{y_i})``. So
    ``z⁺ = z' − 2γ‖x_i‖²A`` with ``z' = x_iᵀw̃_k/(1 + ρ_k) − x_iᵀw̃_{y_i}/(1 + ρ_{y_i})`` and
    ``γ = (1/(1 + ρ_k) + 1/(1 + ρ_{y_i}))/2``: the α = 0 problem (eqs. 11–16) with ``z'`` for
    ``z`` and ``γ‖x_i‖²`` for ``‖x_i‖²``, solved by the same :func:`implicit_step` (for α = 0,
    γ = 1 and z' = z: the same root as before). ``u`` has no ridge.

    O(nnz(x_i) + log(1/ε)) per step, nothing O(K) or O(D). Returns the total number of
    evaluations of the derivative (16).
    """
    n_classes, evals = W.shape[0], 0
    scale = np.ones(n_classes)
    for t in range(rows.shape[0]):
        i = rows[t]
        k = ks[t]
        yi = y[i]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        p_k = 1.0 / (1.0 + lr * alpha * beta[k])
        p_y = 1.0 / (1.0 + lr * alpha * beta[yi])
        z = (scale[k] * p_k * sparse_row_dot(idx, val, W[k])
             - scale[yi] * p_y * sparse_row_dot(idx, val, W[yi]))
        xx = 0.5 * (p_k + p_y) * sqnorm[i]
        a, A, ui, ne = implicit_step(z, u[i], xx, lr, n_classes, tol, newton)
        evals += ne
        if sqnorm[i] > 0.0:  # w⁺ = s⁺(v ± (A/s) x), s⁺ = s/(1 + ρ)
            sparse_row_axpy(A / scale[yi], idx, val, W[yi])
            sparse_row_axpy(-A / scale[k], idx, val, W[k])
        if alpha > 0.0:
            scale[k] *= p_k
            scale[yi] *= p_y
            fold_row_scale(W, scale, k, False)
            fold_row_scale(W, scale, yi, False)
        u[i] = ui
    fold_row_scale(W, scale, -1, True)
    return evals


# -- estimators ------------------------------------------------------------------------------
@dataclass
class _DoubleSumState:
    """Solver state of the double-sum methods."""

    W: np.ndarray  # (K, D)
    u: np.ndarray  # (N,) the auxiliary variables of eq. (5)
    beta: np.ndarray  # (K,) class weights of the ridge
    sqnorm: np.ndarray  # (N,) ‖x_i‖²
    b_w: float = np.inf  # projection bounds of U-max (Appendix A): ‖w_k‖ ≤ b_w, u ≤ b_u
    b_u: float = np.inf
    evals: list = field(default_factory=list)  # Implicit SGD: evaluations of (16) per step


_SHARED_DOC = """
    Parameters
    ----------
    learning_rate : float > 0, η₀, η_t = η₀ · decay^epoch, for one (i, k) of eq. (6) without
        the paper's factor N (the authors' code): Table 2's values as printed; a step η on the
        paper's N-scaled ``f_ik`` is ``learning_rate = N·η``.
    n_epochs : int, epochs of N steps ; decay : float in (0, 1] (0.9 in the paper)
    alpha : float ≥ 0, ridge: the objective is mean log-loss + (alpha/2)‖W‖²; Fagan &
        Iyengar's μ (eq. 2, a sum over datapoints) is ``alpha·N``. The paper's experiments use
        μ = 0: pass ``alpha=0.0`` to reproduce them.
    shuffle : "uniform" (paper) | "reshuffle" | "fixed" (authors' code)
    u_init : None (log K = u_i* at W = 0, Algorithm 1) or in [0, log K] (the authors' code: 0).
        A larger start only scales every gradient by ``e^{log K − u_init}``: rejected.
    random_state, verbose : as usual
"""


class _DoubleSumSGD(IterativeSoftmaxEstimator):
    """Shared parts: W = 0 and u = log K at start, η_t = η₀·decay^epoch, one epoch = N steps
    of one datapoint and one class ``k ≠ y_i``."""

    _parameter_constraints = {
        "learning_rate": LEARNING_RATE, "n_epochs": N_EPOCHS, "alpha": ALPHA, "decay": DECAY,
        "shuffle": [StrOptions(set(SHUFFLE_MODES))],
        "u_init": [None, Interval(Real, 0, None, closed="left")],  # and <= log K (_init_state)
        "random_state": RANDOM_STATE, "verbose": VERBOSE,
    }

    def _init_state(self, X, y, rng):
        K = self.classes_.shape[0]
        if self.u_init is not None and self.u_init > math.log(K) * (1 + 1e-12):
            raise ValueError(
                f"u_init must be None (log K) or in [0, log K] = [0, {math.log(K):.4g}] for "
                f"K = {K} (u* at W = 0 is log K; a larger u_init scales every gradient by "
                f"e^(log K - u_init)), got {self.u_init!r}")
        u0 = math.log(K) if self.u_init is None else float(self.u_init)
        return _DoubleSumState(
            W=np.zeros((K, X.shape[1])), u=np.full(X.shape[0], u0), beta=class_weights(y, K),
            sqnorm=np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel())

    def _draws(self, rng, y, n_classes, epoch):
        """The epoch's datapoints, their classes k ≠ y_i and its learning rate."""
        rows = epoch_order(rng, y.shape[0], self.shuffle)
        lr = float(self.learning_rate) * float(self.decay) ** epoch
        return rows, draw_other_classes(rng, y[rows], n_classes), lr

    def _coef(self, state):
        return state.W, None

    def _finalize(self, state):
        self.u_ = state.u.copy()


class VanillaSGD(_DoubleSumSGD):
    __doc__ = """Plain SGD on the double sum (eq. 6 or Raman et al.'s eq. 8), one (i, k) per step.

    Its gradients are exponential in ``x_iᵀ(w_k − w_{y_i}) − u_i`` (Section 2.2): at large rates
    it overflows (``DivergenceWarning``, ``diverged_``, the lowest-loss weights are kept).
    """ + _SHARED_DOC + """\
    formulation : "proposed" (eq. 6) | "raman" (eq. 8)

    The ridge uses the β_j weights (:func:`sgd_epoch`); u, W are projected onto the Appendix A
    bounds (:func:`umax_bounds`; infinite for alpha = 0).

    Attributes
    ----------
    coef_ (K, D), intercept_ (None), classes_, history_, diverged_, n_epochs_, u_ (N,)
    """

    _parameter_constraints = {**_DoubleSumSGD._parameter_constraints,
                              "formulation": [StrOptions(set(FORMULATIONS))]}

    def __init__(self, learning_rate=0.01, n_epochs=10, formulation="proposed", alpha=1e-4,
                 decay=0.9, shuffle="uniform", u_init=None, random_state=None, verbose=False):
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.formulation = formulation
        self.alpha = alpha
        self.decay = decay
        self.shuffle = shuffle
        self.u_init = u_init
        self.random_state = random_state
        self.verbose = verbose

    def _init_state(self, X, y, rng):
        state = super()._init_state(X, y, rng)
        state.b_w, state.b_u = umax_bounds(X, self.classes_.shape[0], float(self.alpha))
        return state

    def _run_epoch(self, state, X, y, epoch, rng):
        rows, ks, lr = self._draws(rng, y, state.W.shape[0], epoch)
        delta = float(getattr(self, "delta", np.inf))  # inf: no u-increase (vanilla SGD)
        sgd_epoch(X.indptr, X.indices, X.data, state.sqnorm, y, state.W, state.u, rows, ks, lr,
                  self.formulation == "raman", delta, float(self.alpha), state.beta, state.b_u,
                  state.b_w)


class UMax(VanillaSGD):
    """U-max (Algorithm 1): vanilla SGD plus the u-increase rule with threshold δ and the
    projections onto ``0 ≤ u ≤ B_u``, ``‖w_k‖ ≤ B_W`` (Appendix A).

    With alpha = 0 (the paper's experiments) B_W² = 2 log K/alpha is infinite: only ``u ≥ 0``
    is enforced. Parameters as :class:`VanillaSGD` plus ``delta`` (δ > 0; 1 in the paper); the
    default learning rate is larger: the gradients are bounded by ``(K−1)e^δ‖x_i‖``.
    """

    _parameter_constraints = {**VanillaSGD._parameter_constraints,
                              "delta": [Interval(Real, 0, None, closed="neither")]}

    def __init__(self, learning_rate=0.1, n_epochs=10, delta=1.0, formulation="proposed",
                 alpha=1e-4, decay=0.9, shuffle="uniform", u_init=None, random_state=None,
                 verbose=False):
        super().__init__(learning_rate=learning_rate, n_epochs=n_epochs,
                         formulation=formulation, alpha=alpha, decay=decay, shuffle=shuffle,
                         u_init=u_init, random_state=random_state, verbose=verbose)
        self.delta = delta


class ImplicitSGD(_DoubleSumSGD):
    __doc__ = """Implicit SGD on the proposed double sum, one (i, k) per step (Prop. 4, App. F.1).

    Each step solves ``θ⁺ = θ − η∇f_ik(θ⁺)`` exactly (to ``tol`` in ``u_i``), the ridge of
    eq. (6) included (:func:`implicit_epoch`): stable for any learning rate (1e-4 to 1e4 tested).
    """ + _SHARED_DOC + """\
    tol : float ≥ 0, ε: the root ``u_i`` is found to ``ε(1 + u_i)`` (0: round-off)
    solver : "newton" (default: Halley steps safeguarded by the F.1 bracket, bisection whenever
        a step leaves it; about 2 evaluations of (16) per step) or "bisection" (the paper's
        method, about 35 evaluations at ε = 1e-10). Both find the same root to ~ε.

    Attributes
    ----------
    as :class:`VanillaSGD`, plus ``n_evals_``: evaluations of (16) per step, per epoch.
    """

    _parameter_constraints = {**_DoubleSumSGD._parameter_constraints,
                              "tol": TOL,
                              "solver": [StrOptions({"newton", "bisection"})]}

    def __init__(self, learning_rate=1.0, n_epochs=10, alpha=1e-4, tol=1e-10, solver="newton",
                 decay=0.9, shuffle="uniform", u_init=None, random_state=None, verbose=False):
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.alpha = alpha
        self.tol = tol
        self.solver = solver
        self.decay = decay
        self.shuffle = shuffle
        self.u_init = u_init
        self.random_state = random_state
        self.verbose = verbose

    def _run_epoch(self, state, X, y, epoch, rng):
        rows, ks, lr = self._draws(rng, y, state.W.shape[0], epoch)
        ev = implicit_epoch(X.indptr, X.indices, X.data, state.sqnorm, y, state.W, state.u,
                            rows, ks, lr, float(self.alpha), state.beta, float(self.tol),
                            self.solver == "newton")
        state.evals.append(ev / max(rows.shape[0], 1))

    def _finalize(self, state):
        super()._finalize(state)
        self.n_evals_ = list(state.evals)
