"""The Implicit SGD update of :mod:`xclib.unbiased` (Fagan & Iyengar, Appendix F.1: eqs.
11–16 and the bisection bracket): the 1-D solve of one step, the same solve for a batch of
independent steps side by side, and the epoch kernel.

Scale and symbols as in :mod:`xclib.unbiased` (our ``F`` is the paper's divided by ``N``;
``lr`` is the authors' code's η). O(nnz(x_i) + log(1/ε)) per step, nothing O(K) or O(D).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import (
    exp_lane, exp_rough, fold_row_scale, lambertw_exp, log_rough, softplus, sparse_row_axpy,
    sparse_row_dot,
)

__all__ = ["implicit_step", "implicit_u_derivative", "implicit_epoch"]


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


@njit(cache=True, nogil=True, inline="always")
def _solve(z, u_old, xx, lr, n_classes, log_k1, tol, newton):
    """:func:`implicit_step` with ``log(K − 1)`` given: the w-space solver, handing over to
    the u-space one (with the evaluations it spent) when it cannot finish."""
    ok = False
    if newton and xx > 0.0:
        a, A, u, ne, ok = _implicit_step_w(z, u_old, xx, lr, log_k1, tol)
    else:
        ne = 0
    if not ok:
        a, A, u, ne = _implicit_step_u(z, u_old, xx, lr, n_classes, tol, newton, ne)
    return a, A, u, ne


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
    return _solve(z, u_old, xx, lr, n_classes, math.log(n_classes - 1), tol, newton)


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


# -- a batch of steps side by side -----------------------------------------------------------
#: steps whose solves of (16) run side by side (:func:`_lane_solves`)
_BATCH = 16
#: the epoch batches its steps from this many classes on, where consecutive steps seldom
#: share a class (a step ends its batch, sharing a class with an earlier step of it, with
#: probability below 4·_BATCH/K ≈ 12 %: 13.6 steps a batch at K = 1000); with fewer classes
#: it goes one step at a time
_BATCH_MIN_CLASSES = 512
#: a batch's classes and datapoints are marked in two sets of this many bits (index & mask):
#: exact for ids below it; above, two ids may share a bit, which only ends a batch early
#: (at 16 steps, ~1.5 % a step). O(1) a step where comparing it with every earlier step
#: of its batch is O(_BATCH); the epoch about 1 % faster (K = D = 1000, nnz = 10)
_SEEN_BITS = 4096
_SEEN_MASK = _SEEN_BITS - 1


@njit(cache=True, nogil=True, inline="always")
def _bit(h):
    """The bit of ``h`` within its 64-bit word."""
    return np.uint64(1) << np.uint64(h & 63)


#: after this many steps, an epoch whose lanes finished fewer than half of them (large
#: learning rates, where a step moves u far and needs two or more evaluations of (16)) goes
#: on one step at a time
_PROBE_STEPS = 64 * _BATCH


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _lane_solves(z, u_old, xx, lr, n_others, tol, a_out, u_out, done):
    """:func:`_implicit_step_w` for a batch of independent states side by side, as far as its
    first evaluation of (16) and the Halley step from it, with no call and no branch, so that
    the loop vectorises (8 lanes of AVX-512 at once, against one chain of dependent exps and
    divisions per step alone).

    ``done[j]`` is True where Halley's error bound certifies the lane's root after that one
    evaluation (the scalar solver's own stopping test); ``a_out[j]`` and ``u_out[j]`` are
    then its ``a`` and ``u``. Elsewhere (a Newton or bisection step, a second evaluation,
    ``‖x‖ = 0``, ``a`` above ``_W_SPACE_MAX_A``) the caller runs the scalar solver.
    Differences from it, in the arithmetic only: ``L`` (which only places the start) comes
    from :func:`log_rough`, below ``L = −2.5`` the start is W₀'s series to x³ (within 3e-4)
    where the scalar one takes a Halley step, and the start's ``e^{−ũ}`` comes from
    :func:`exp_rough`; ``a = C·e^{z − w}`` with ``C = 2η(K−1)‖x‖²`` is
    ``e^{L0 − w}`` without the log; the exps are :func:`exp_lane`; products and sums are
    fused into multiply-adds (32 vector registers do not hold every lane's intermediates;
    fused, fewer spill: 17.6 ns a lane in batches of 16 against 23.6).

    Three loops, one per stage (W₀'s start; the start's Newton and Halley steps; the
    evaluation), each passing its results on in ``a_out``, ``u_out`` and ``done``: shorter
    loop bodies spill less and let the two vectors of a batch run side by side (20.2 ns a
    lane against 24.3 in one loop, batches of 16 copied in and out as the epoch does;
    14.2 against 18.4 in long batches; the same results, bit for bit).
    """
    p, log_k1 = _WPOLY, math.log(n_others)
    n = z.shape[0]
    for j in range(n):  # a₀ ≈ W₀(e^L) as in _w_start: the quartic, or an expansion at either
        C = 2.0 * lr * n_others * xx[j]  # end (L in u_out, a₀ in a_out)
        L = z[j] - u_old[j] + log_rough(C)
        Lc = min(max(L, -2.5), 2.5)
        a0 = (((p[0] * Lc + p[1]) * Lc + p[2]) * Lc + p[3]) * Lc + p[4]
        x = exp_rough(min(L, -2.5))  # W₀(x) = x − x² + 3x³/2 − …
        Lp = max(L, 2.5)
        lLp = log_rough(Lp)
        a_out[j] = x * (1.0 - x * (1.0 - 1.5 * x)) if L < -2.5 else (
            Lp - lLp + lLp / Lp if L > 2.5 else a0)
        u_out[j] = L
        done[j] = (L <= _W_SPACE_MAX_A + 2.5) & (C > 1e-250) & (C < 1e250)
    for j in range(n):  # the start of _implicit_step_w, line by line (w in a_out)
        uo, L, a0 = u_old[j], u_out[j], a_out[j]
        c2 = 0.5 / xx[j]
        # one Newton step on a + log a = L (in log a): from within 5 % to within ~1e-3, and
        # 99.9 % of the lanes then finish in one evaluation (87 % without it)
        a0 = max(a0 * (1.0 - (a0 + log_rough(a0) - L) / (1.0 + a0)), 1e-300)
        e0 = lr * exp_rough(-uo)
        q0 = c2 * a0
        P = 1.0 + a0
        h0 = lr - e0 - q0
        D1 = P * (1.0 + e0) + q0
        D2 = -e0 * P * P * P - q0
        t = h0 * D1 / (2.0 * D1 * D1 * P - h0 * D2)
        w = uo + a0 - 2.0 * t * P + 2.0 * a0 * t * t * P
        lo = max(0.0, min(uo, z[j] + log_k1))
        done[j] &= (D1 * D1 * P > h0 * D2) & (w > lo)
        a_out[j] = w
        u_out[j] = c2
    for j in range(n):  # the first evaluation, as in the scalar loop, and Halley's step
        zj, uo, w, c2 = z[j], u_old[j], a_out[j], u_out[j]
        C = 2.0 * lr * n_others * xx[j]
        a = C * exp_lane(zj - w)
        u = w - a
        E = exp_lane(a - w)
        G = lr * (1.0 - E) - c2 * a + u - uo
        lo = w if G < 0.0 else max(0.0, min(uo, zj + log_k1))
        hi = w if G > 0.0 else math.inf
        opa = 1.0 + a
        lE = lr * E
        d1 = lE * opa + c2 * a + opa
        d2 = -lE * (opa * opa + a) - c2 * a - a
        d3 = lE * (opa * (opa * opa + a) + a * (3.0 + 2.0 * a)) + c2 * a + a
        den = 2.0 * d1 * d1 - G * d2
        s = 2.0 * G * d1 / den
        wn = w - s
        scale = tol * (1.0 + abs(u))
        step = abs(s) * opa <= scale
        small = ((3.0 * d2 * d2 + 2.0 * abs(d3) * d1) * s * s * abs(s) * opa
                 <= 6.0 * scale * d1 * d1)
        good = done[j] & (den > d1 * d1) & (a <= _W_SPACE_MAX_A) & (E == E) & (abs(s) <= 4e-3)
        done[j] = good & (((lo < wn) & (wn < hi)) | step) & (step | small)
        an = a * _exp_small(s)
        a_out[j] = an
        u_out[j] = wn - an


# -- epoch kernels ---------------------------------------------------------------------------
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

    Without a ridge, with the safeguarded solver (``newton``) and at least
    ``_BATCH_MIN_CLASSES`` classes the steps go in batches of up to ``_BATCH`` consecutive
    steps that share no class and no datapoint (:func:`_implicit_epoch_batched`), so that
    each step's state (z, ũ, ‖x_i‖²) is the same before and after the others are applied:
    the states are read, their solves run side by side (:func:`_lane_solves`; a lane it does
    not finish is solved alone), then the steps are applied in order. The same updates in
    the same order as one step at a time, to within the solver's tolerance. If after
    ``_PROBE_STEPS`` steps the lanes finished fewer than half (large learning rates), the
    rest of the epoch goes one step at a time. O(nnz(x_i) + log(1/ε)) per step, nothing
    O(K) or O(D). Returns the total number of evaluations of the derivative (16).

    With a ridge the steps go one at a time: the batched loop with the row scales' reads and
    refolds in it ran slower than one step at a time (measured on the machine of
    ``benchmarks/bench_unbiased.py``). This is a Python function that picks the kernels: one
    numba function holding both inlines both, and the batched loop compiled beside the other
    ran 15-30 % slower.
    """
    evals, t = 0, 0
    if newton and alpha == 0.0 and W.shape[0] >= _BATCH_MIN_CLASSES:
        evals, t = _implicit_epoch_batched(indptr, indices, data, sqnorm, y, W, u, rows, ks, lr,
                                           tol)
    if t < rows.shape[0]:
        evals += _implicit_epoch_steps(indptr, indices, data, sqnorm, y, W, u, rows[t:], ks[t:],
                                       lr, alpha, beta, tol, newton)
    return int(evals)


@njit(cache=True, nogil=True)
def _implicit_epoch_steps(indptr, indices, data, sqnorm, y, W, u, rows, ks, lr, alpha, beta,
                          tol, newton):
    """:func:`implicit_epoch` one step at a time."""
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
        a, A, ui, ne = _solve(z, u[i], xx, lr, n_classes, log_k1, tol, newton)
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


@njit(cache=True, nogil=True)
def _implicit_epoch_batched(indptr, indices, data, sqnorm, y, W, u, rows, ks, lr, tol):
    """:func:`implicit_epoch` without a ridge (the safeguarded solver) in batches of up to
    ``_BATCH`` steps that share no class and no datapoint (see there). Returns the
    evaluations of (16) and the number of steps made: all of them, or fewer if the lanes
    seldom finish (the caller goes on one step at a time)."""
    n_classes, n_steps, evals = W.shape[0], rows.shape[0], 0
    log_k1 = math.log(n_classes - 1)
    zb, ub, xb = np.empty(_BATCH), np.empty(_BATCH), np.empty(_BATCH)
    ab, unb, done = np.empty(_BATCH), np.empty(_BATCH), np.zeros(_BATCH, dtype=np.bool_)
    ib, kb, yb = (np.empty(_BATCH, dtype=np.int64), np.empty(_BATCH, dtype=np.int64),
                  np.empty(_BATCH, dtype=np.int64))
    classes = np.zeros(_SEEN_BITS // 64, dtype=np.uint64)  # the batch's classes and rows,
    points = np.zeros(_SEEN_BITS // 64, dtype=np.uint64)   # hashed to bits
    t0 = certified = 0
    while t0 < n_steps:
        if t0 >= _PROBE_STEPS and certified < t0 // 2:  # the lanes seldom finish: stop
            break
        classes[:] = 0
        points[:] = 0
        nb = 0  # read the states of the steps up to the first that shares a class or a row
        while nb < _BATCH and t0 + nb < n_steps:
            i, k = rows[t0 + nb], ks[t0 + nb]
            yi = y[i]
            hk, hy, hi = k & _SEEN_MASK, yi & _SEEN_MASK, i & _SEEN_MASK
            bk, by, bi = _bit(hk), _bit(hy), _bit(hi)
            if (classes[hk >> 6] & bk) | (classes[hy >> 6] & by) | (points[hi >> 6] & bi):
                break
            classes[hk >> 6] |= bk
            classes[hy >> 6] |= by
            points[hi >> 6] |= bi
            idx = indices[indptr[i]:indptr[i + 1]]
            val = data[indptr[i]:indptr[i + 1]]
            zb[nb] = sparse_row_dot(idx, val, W[k]) - sparse_row_dot(idx, val, W[yi])
            xb[nb] = sqnorm[i]
            ub[nb] = u[i]
            ib[nb], kb[nb], yb[nb] = i, k, yi
            nb += 1
        xb[nb:] = 0.0  # lanes without a step: never finished
        _lane_solves(zb, ub, xb, lr, n_classes - 1.0, tol, ab, unb, done)
        for j in range(nb):  # apply the steps in order
            i, k, yi = ib[j], kb[j], yb[j]
            if done[j]:
                A, ui, ne = ab[j] * (0.5 / xb[j]), unb[j], 1
                certified += 1
            else:
                a, A, ui, ne = _solve(zb[j], ub[j], xb[j], lr, n_classes, log_k1, tol, True)
            evals += ne
            if xb[j] > 0.0:
                idx = indices[indptr[i]:indptr[i + 1]]
                val = data[indptr[i]:indptr[i + 1]]
                sparse_row_axpy(A, idx, val, W[yi])
                sparse_row_axpy(-A, idx, val, W[k])
            u[i] = ui
        t0 += nb
    return evals, t0
