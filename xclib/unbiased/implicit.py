"""The Implicit SGD update of :mod:`xclib.unbiased` (Fagan & Iyengar, Appendix F.1: eqs.
11–16 and the bisection bracket): the 1-D solve of one step (the epoch kernels, which also
solve batches of independent steps side by side, are in :mod:`.implicit_epoch`).

Scale and symbols as in :mod:`xclib.unbiased` (our ``F`` is the paper's divided by ``N``;
``lr`` is the authors' code's η). O(nnz(x_i) + log(1/ε)) per step, nothing O(K) or O(D).
"""
from __future__ import annotations

import math

from numba import njit

from .._numba import lambertw_exp, softplus

__all__ = ["implicit_step", "implicit_u_derivative"]


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
