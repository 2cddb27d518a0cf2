"""The numba kernels of :mod:`xclib.unbiased` (Fagan & Iyengar): one step's gradient
coefficients (eqs. 7 and 8), the U-max rule (Algorithm 1), the Implicit SGD step
(Appendix F.1: eqs. 11–16 and the bisection bracket) and the epoch kernels.

Scale and symbols as in :mod:`xclib.unbiased` (our ``F`` is the paper's divided by ``N``;
``lr`` is the authors' code's η). Every kernel is O(nnz(x_i)) per step for one class
(O(m·nnz(x_i)) for m classes): nothing O(K) or O(D) inside an epoch. Each row of W is kept as
``w_j = s_j·v_j`` (``v_j`` stored in ``W[j]``; :func:`xclib.sampled.fold_row_scale`), so the
ridge's shrink of a row is O(1).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._numba import lambertw_exp, logaddexp, softplus, sparse_row_axpy, sparse_row_dot
from .augment_reduce.kernels import subsample_classes
from .sampled import fold_row_scale

__all__ = [
    "double_sum_coefficients", "umax_increase", "implicit_step", "implicit_u_derivative",
    "sgd_epoch", "sgd_epoch_sampled", "implicit_epoch", "draw_class_sets", "CLASS_SAMPLING",
]

#: how the m classes of a step are drawn: Algorithm 1's m distinct classes other than the
#: label, or the authors' code's m distinct classes of all K with the label dropped if drawn
CLASS_SAMPLING = ("others", "all")


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


#: the w-space solver runs while ``a ≤ _W_SPACE_MAX_A``: there ``u = w − a`` keeps ~1e-15·|w|
#: absolute precision; beyond it (rare in SGD, common in the extreme states of the tests)
#: :func:`_implicit_step_u` takes over
_W_SPACE_MAX_A = 8.0


@njit(cache=True, nogil=True, inline="always")
def _exp_small(x):
    """``e^x`` for ``|x| ≤ 1e-2``: its Taylor polynomial of degree 6 (truncation < 2e-17
    relative; with rounding within 4e-16, tested), evaluated in Estrin's scheme (three
    dependent multiply-adds instead of Horner's six)."""
    x2 = x * x
    return ((1.0 + x) + x2 * (0.5 + x * (1.0 / 6.0))
            + x2 * x2 * ((1.0 / 24.0 + x * (1.0 / 120.0)) + x2 * (1.0 / 720.0)))


@njit(cache=True, nogil=True)
def _implicit_step_w(z, u_old, xx, lr, log_k1, tol):
    """The default Implicit SGD solve (``xx > 0``): safeguarded Halley on (16) in ``w = u + a``.

    With ``L0 = z + log(2η(K−1)‖x‖²)``, eq. (14) ``a e^a = e^{L0 − u}`` reads ``a = e^{L0 − w}``,
    so ``w ↦ (a, u = w − a, e^{−u} = e^{a − w})`` costs two exps and no Lambert W, and (16)
    becomes ``G(w) = η(1 − e^{−u}) − a/(2‖x‖²) + u − ũ``: increasing and concave in ``w``
    (``G' = (1 + a)(1 + ηe^{−u}) + a/(2‖x‖²)``, ``G'' < 0``; derivatives in the code), with
    the root of (16) at ``u = w − a``.

    * Start: ``a₀ ≈ W₀(e^{L0 − ũ})`` from :func:`_w_start` (within 5 %), then one
      Halley step of (16) in ``u`` from ``ũ`` with that ``a₀``: on the states of an SGD run
      this lands within ~1e-3 of the root, and one evaluation of (16) usually suffices.
    * Halley steps inside a bracket, ``w* > max(0, min(ũ, z + log(K−1)))`` at first (``u* > 0``;
      if ``u* < ũ``, (16) gives ``a* < 2η‖x‖²``, so ``w* > z + log(K−1)``; otherwise
      ``w* ≥ u* ≥ ũ``), then the points where ``G`` changes sign; a step that leaves it
      becomes bisection. By concavity a step from the left stays left of the root, and a
      step from the right is bounded by the bracket.
    * Stop when Halley's error after the step, ``(1 + a)·C·|s|³`` with
      ``C = (G''/2G')² + |G'''/(6G')|``, is below ``ε(1 + |u|)/2``, or when the step or the
      bracket is below ``ε(1 + |u|)``. A step ``|s| ≤ 4e-3`` updates ``a`` and ``e^{−u}`` by
      :func:`_exp_small` instead of two exps.

    Returns ``(a, A, u, n_evals, ok)``. ``ok`` is False (the caller then uses the u-space
    solver) when ``a`` exceeds ``_W_SPACE_MAX_A``.
    """
    L0 = z + log_k1 + math.log(2.0 * lr * xx)
    c2 = 0.5 / xx
    L = L0 - u_old
    if L > _W_SPACE_MAX_A + 2.5:  # then a₀ > _W_SPACE_MAX_A
        return 0.0, 0.0, u_old, 0, False
    a0 = _w_start(L)[1]
    # one Halley step of (16) in u from ũ with that a₀: h(ũ) = η(1 − e^{−ũ}) − a₀/(2‖x‖²),
    # h' = 1 + ηe^{−u} + A/(1 + a), h'' = −ηe^{−u} − A/(1 + a)³ (A = a/(2‖x‖²)); then
    # w = u + a(u) to second order in Δu (a' = −a/(1 + a), a'' = a/(1 + a)³). With P = 1 + a₀,
    # D1 = P·h' and D2 = P³·h'', Δu = −2h·D1·P²/(2D1²P − h·D2): one division on the way
    e0 = lr * math.exp(-u_old)
    q0 = c2 * a0
    P = 1.0 + a0
    h0 = lr - e0 - q0
    D1 = P * (1.0 + e0) + q0
    D2 = -e0 * P * P * P - q0
    if D1 * D1 * P > h0 * D2:  # Halley's denominator 2h'² − h·h'' exceeds h'²
        t = h0 * D1 / (2.0 * D1 * D1 * P - h0 * D2)  # Δu = −2tP², Δu/P = −2tP
        w = u_old + a0 - 2.0 * t * P + 2.0 * a0 * t * t * P
    else:  # Newton: Δu = −h/h'
        du0 = -h0 * P / D1
        w = u_old + a0 + du0 / P + 0.5 * a0 * du0 * du0 / (P * P * P)
    lo, hi = max(0.0, min(u_old, z + log_k1)), math.inf  # w* > lo (see above)
    if w <= lo:  # a long step predicted: start halfway from the bound to ũ + a₀ instead
        w = 0.5 * (lo + max(lo, u_old + a0))
    a = math.exp(L0 - w)
    u = w - a
    E = math.exp(-u)
    n_evals = 0
    for _ in range(200):
        if a > _W_SPACE_MAX_A or E != E:
            return a, a * c2, u, n_evals, False
        G = lr * (1.0 - E) - c2 * a + u - u_old
        n_evals += 1
        if G == 0.0:
            return a, a * c2, u, n_evals, True
        if G < 0.0:
            lo = w
        else:
            hi = w
        opa = 1.0 + a
        lE = lr * E
        d1 = lE * opa + c2 * a + opa                         # G'
        d2 = -lE * (opa * opa + a) - c2 * a - a               # G''
        d3 = lE * (opa * (opa * opa + a) + a * (3.0 + 2.0 * a)) + c2 * a + a  # G'''
        den = 2.0 * d1 * d1 - G * d2
        s = 2.0 * G * d1 / den if den > d1 * d1 else G / d1  # Newton if Halley's is odd
        wn = w - s
        scale = tol * (1.0 + abs(u))
        fast = lo < wn < hi or abs(s) * opa <= scale
        if not fast:  # hi is finite here: from the left (G < 0) a step moves right
            wn = 0.5 * (lo + hi)
            s = w - wn
        # Halley's error in u after the step, C|s|³(1 + a) ≤ ε(1 + |u|)/2, times 12G'² (no division)
        small = (3.0 * d2 * d2 + 2.0 * abs(d3) * d1) * s * s * abs(s) * opa <= 6.0 * scale * d1 * d1
        if (fast and (abs(s) * opa <= scale or small)) or hi - lo <= scale:
            an = a * _exp_small(s) if abs(s) <= 4e-3 else math.exp(L0 - wn)
            return an, an * c2, wn - an, n_evals, True
        if abs(s) <= 4e-3 and abs(s) * opa <= 1e-2:  # a = e^{L0−w}, e^{−u} by Taylor
            an = a * _exp_small(s)
            E *= _exp_small(s + (an - a))
            a = an
        else:
            a = math.exp(L0 - wn)
            E = math.exp(a - wn)
        w = wn
        u = w - a
    return a, a * c2, u, n_evals, True


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
        second derivative) steps safeguarded by a bracket: whenever a step leaves the bracket
        it falls back to bisection, so it converges to the same root. For ``‖x‖ > 0`` these
        run in ``w = u + a`` (:func:`_implicit_step_w`: two exps per evaluation of (16), no
        Lambert W, usually one evaluation), handing over to the u-space Halley
        (:func:`_implicit_step_u`) when ``a`` is large

    Returns
    -------
    (a, A, u_new, n_evals) : the ``a`` of eq. (11) (``w_{y_i} += A x_i``, ``w_k −= A x_i`` with
    ``A = a/(2‖x‖²)``), the new ``u_i`` and the number of evaluations of (16).

    The bracket (F.1): if ``h(ũ) < 0`` the root lies in ``[ũ, log(1 + (K−1)e^z)]``; otherwise in
    ``[max(0, log(K−1) + z − 2η‖x‖²), ũ]``. Its width is at most
    ``|z − ũ| + 2η‖x‖² + log(2(K−1))``, so bisection needs ``log₂(width/ε)`` evaluations.
    ``h`` is increasing and concave (``h' ≥ 1``, ``h'' = −ηe^{−u} − A/(1+a)³``, ``|h''| < h'``), so
    Newton-type steps are well behaved; Halley's step converges cubically. In ``u`` (bisection,
    ``‖x‖ = 0``, and large ``a``) the safeguarded solver stops once ``|s|³ ≤ 0.1 ε(1 + |u|)``,
    and each ``a(u) = W₀(e^{z−u+log c})`` is warm-started from the previous one
    (:func:`_w_refine`: one exp per Halley iteration, none for ``|Δu| ≤ 1e-5``). Either way
    Halley needs one to three evaluations of (16) where bisection needs ~35.
    """
    n_w = 0  # evaluations spent by the w-space solver before handing over
    if newton and xx > 0.0:
        a, A, u, n_w, ok = _implicit_step_w(z, u_old, xx, lr, math.log(n_classes - 1), tol)
        if ok:
            return a, A, u, n_w
    return _implicit_step_u(z, u_old, xx, lr, n_classes, tol, newton, n_w)


@njit(cache=True, nogil=True)
def _implicit_step_u(z, u_old, xx, lr, n_classes, tol, newton, n_prior):
    """:func:`implicit_step` in ``u``: the paper's bisection, or Halley with ``a(u)`` from the
    warm-started Lambert W, on the F.1 bracket (``n_prior``: evaluations already spent)."""
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
    n_evals = 1 + n_prior
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
@njit(cache=True, nogil=True)
def _shrink_row(W, scale, q, j, rho, b_w):
    """After a step touched row ``j``: the ridge's proximal shrink ``w_j ← w_j/(1 + ρ_j)``
    (``rho`` = ηαβ_j) and the projection onto ``‖w_j‖ ≤ b_w`` (Appendix A; ``q[j] = ‖v_j‖²``
    is tracked when ``b_w`` is finite), both on the row's scale, then a refold if needed."""
    if rho > 0.0:
        scale[j] /= 1.0 + rho
    if b_w < np.inf:
        nrm = scale[j] * math.sqrt(q[j])
        if nrm > b_w:
            scale[j] *= b_w / nrm
    f = fold_row_scale(W, scale, j, False)
    q[j] *= f * f


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
    # without a ridge or a projection every row scale stays 1: the same arithmetic without
    # reading scale, beta and q (K-sized: at large K each read is another cache miss)
    plain = alpha == 0.0 and not project
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
        s_k = d_k if plain else scale[k] * d_k
        s_y = d_y if plain else scale[yi] * d_y
        ui = u[i]
        if use_umax:
            ui = umax_increase(raman, s_y, s_k, ui, delta)
        c_k, c_y, g_u = double_sum_coefficients(raman, s_y, s_k, ui, n_classes)
        a_k = -lr * c_k if plain else -lr * c_k / scale[k]
        a_y = -lr * c_y if plain else -lr * c_y / scale[yi]
        sparse_row_axpy(a_k, idx, val, W[k])
        sparse_row_axpy(a_y, idx, val, W[yi])
        if project:
            q[k] = max(q[k] + a_k * (2.0 * d_k + a_k * sqnorm[i]), 0.0)
            q[yi] = max(q[yi] + a_y * (2.0 * d_y + a_y * sqnorm[i]), 0.0)
        if not plain:
            _shrink_row(W, scale, q, k, lr * alpha * beta[k], b_w)
            _shrink_row(W, scale, q, yi, lr * alpha * beta[yi], b_w)
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
    log_k1 = math.log(n_classes - 1)
    scale = np.ones(n_classes)
    for t in range(rows.shape[0]):
        i = rows[t]
        k = ks[t]
        yi = y[i]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        if alpha > 0.0:
            p_k = 1.0 / (1.0 + lr * alpha * beta[k])
            p_y = 1.0 / (1.0 + lr * alpha * beta[yi])
            z = (scale[k] * p_k * sparse_row_dot(idx, val, W[k])
                 - scale[yi] * p_y * sparse_row_dot(idx, val, W[yi]))
            xx = 0.5 * (p_k + p_y) * sqnorm[i]
        else:  # no ridge: p = 1 and every row scale stays 1 (the same arithmetic, no
            # reads of the K-sized beta and scale: at large K each is another cache miss)
            z = sparse_row_dot(idx, val, W[k]) - sparse_row_dot(idx, val, W[yi])
            xx = sqnorm[i]
        ok = False
        if newton and xx > 0.0:  # implicit_step's default solver, with log(K − 1) hoisted
            a, A, ui, ne, ok = _implicit_step_w(z, u[i], xx, lr, log_k1, tol)
        else:
            ne = 0
        if not ok:
            a, A, ui, ne = _implicit_step_u(z, u[i], xx, lr, n_classes, tol, newton, ne)
        evals += ne
        if sqnorm[i] > 0.0:  # w⁺ = s⁺(v ± (A/s) x), s⁺ = s/(1 + ρ)
            sparse_row_axpy(A / scale[yi] if alpha > 0.0 else A, idx, val, W[yi])
            sparse_row_axpy(-A / scale[k] if alpha > 0.0 else -A, idx, val, W[k])
        if alpha > 0.0:
            scale[k] *= p_k
            scale[yi] *= p_y
            fold_row_scale(W, scale, k, False)
            fold_row_scale(W, scale, yi, False)
        u[i] = ui
    fold_row_scale(W, scale, -1, True)
    return evals


# -- m classes per step (Algorithm 1 with n = 1, m ≥ 1) --------------------------------------
def draw_class_sets(rng, y, n_classes, n_sampled, sampling="others"):
    """For each label ``y[t]`` a set of ``n_sampled`` (m) classes: ``(T, m)`` int64.

    ``"others"`` (Algorithm 1): m distinct classes ≠ ``y[t]``, uniform (needs m ≤ K − 1).
    ``"all"`` (the authors' code, ``np.random.choice(K, m, replace=False)`` then
    ``setdiff1d`` with the label): m distinct classes of all K, with the label, when drawn,
    replaced by −1 (the step then uses the m' ≤ m others, scaled by (K − 1)/m'). O(T·m)
    (Floyd's method; nothing O(K) per step).
    """
    y = np.asarray(y, dtype=np.int64)
    m = int(n_sampled)
    if sampling not in CLASS_SAMPLING:
        raise ValueError(f"class sampling must be one of {CLASS_SAMPLING}, got {sampling!r}")
    pool = n_classes - 1 if sampling == "others" else n_classes
    if not 1 <= m <= pool:
        raise ValueError(f"n_sampled must be in [1, {pool}] for K = {n_classes} and "
                         f"class sampling {sampling!r}, got {n_sampled!r}")
    out = np.empty((y.shape[0], m), dtype=np.int64)
    u = rng.random((y.shape[0], m))
    if sampling == "others":
        subsample_classes(u, y, n_classes, out, np.zeros(n_classes, dtype=np.bool_))
        return out
    phantom = np.full(y.shape[0], n_classes, dtype=np.int64)  # a label no class has
    subsample_classes(u, phantom, n_classes + 1, out, np.zeros(n_classes + 1, dtype=np.bool_))
    out[out == y[:, None]] = -1
    return out


@njit(cache=True, nogil=True)
def sgd_epoch_sampled(indptr, indices, data, sqnorm, y, W, u, rows, ks, lr, delta, alpha, beta,
                      b_u, b_w):
    """One epoch of vanilla SGD (``delta = inf``) or U-max with m classes per step, on the
    proposed double sum (eq. 6 with the class sum estimated from m draws, Algorithm 1).

    Step ``t``: datapoint ``i = rows[t]`` and the classes ``C`` = the entries ≥ 0 of ``ks[t]``
    (m' of them, distinct, none the label; see :func:`draw_class_sets`)::

        f_iC(u, W) = u_i + e^{−u_i} + ((K−1)/m') Σ_{k∈C} e^{z_k − u_i} + ridge,
        z_k = x_iᵀ(w_k − w_{y_i}).

    U-max first raises ``u_i`` to ``log(1 + Σ_{k∈C} e^{z_k})`` when it is more than δ below
    it (Algorithm 1, lines 13–15, for m classes). The gradient step is
    ``w_k −= η c_k x_i``, ``w_{y_i} += η (Σ_k c_k) x_i``, ``u_i −= η(1 − e^{−u_i} − Σ_k c_k)``
    with ``c_k = ((K−1)/m') e^{z_k − u_i}``; the ridge and the Appendix A projections act on
    the touched rows as in :func:`sgd_epoch` (β from :func:`xclib.unbiased.class_weights`
    with the same m). A step with no class (m = 1 and the label drawn, ``"all"`` sampling)
    only moves ``u_i``. For m = 1 and ``"others"`` it is :func:`sgd_epoch`'s step (tested).
    O(m · nnz(x_i)) per step.
    """
    n_classes, use_umax, project = W.shape[0], delta < np.inf, b_w < np.inf
    m = ks.shape[1]
    scale = np.ones(n_classes)
    q = np.zeros(n_classes)  # ‖v_j‖², only when projecting
    if project:
        for j in range(n_classes):
            q[j] = np.dot(W[j], W[j])
    d = np.empty(m)
    z = np.empty(m)
    for t in range(rows.shape[0]):
        i = rows[t]
        yi = y[i]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        d_y = sparse_row_dot(idx, val, W[yi])
        s_y = scale[yi] * d_y
        cnt = 0
        top = 0.0  # max(0, z_k): log(1 + Σ e^{z_k}) computed from it
        for j in range(m):
            k = ks[t, j]
            if k >= 0:
                d[j] = sparse_row_dot(idx, val, W[k])
                z[j] = scale[k] * d[j] - s_y
                top = max(top, z[j])
                cnt += 1
        ui = u[i]
        if use_umax and cnt > 0:
            acc = math.exp(-top)
            for j in range(m):
                if ks[t, j] >= 0:
                    acc += math.exp(z[j] - top)
            bound = top + math.log(acc)
            if ui < bound - delta:
                ui = bound
        c_sum = 0.0
        for j in range(m):
            k = ks[t, j]
            if k < 0:
                continue
            c = (n_classes - 1) / cnt * math.exp(z[j] - ui)
            c_sum += c
            a_k = -lr * c / scale[k]
            sparse_row_axpy(a_k, idx, val, W[k])
            if project:
                q[k] = max(q[k] + a_k * (2.0 * d[j] + a_k * sqnorm[i]), 0.0)
        if cnt > 0:
            a_y = lr * c_sum / scale[yi]
            sparse_row_axpy(a_y, idx, val, W[yi])
            if project:
                q[yi] = max(q[yi] + a_y * (2.0 * d_y + a_y * sqnorm[i]), 0.0)
            for j in range(m + 1):
                r = yi if j == m else ks[t, j]
                if r >= 0:
                    _shrink_row(W, scale, q, r, lr * alpha * beta[r], b_w)
        ui -= lr * (1.0 - math.exp(-ui) - c_sum)
        u[i] = min(max(ui, 0.0), b_u)
    fold_row_scale(W, scale, -1, True)
