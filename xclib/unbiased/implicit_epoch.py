"""The Implicit SGD epoch of :mod:`xclib.unbiased` (Fagan & Iyengar, Appendix F.1): one step
at a time, or batches of independent steps whose 1-D solves (:mod:`.implicit`) run side by
side in SIMD lanes.

Scale and symbols as in :mod:`xclib.unbiased` (our ``F`` is the paper's divided by ``N``;
``lr`` is the authors' code's η). O(nnz(x_i) + log(1/ε)) per step, nothing O(K) or O(D).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import (
    exp_lane, exp_rough, fold_row_scale, log_rough, sparse_row_axpy, sparse_row_dot,
)
from .implicit import _W_SPACE_MAX_A, _WPOLY, _exp_small, _solve

__all__ = ["implicit_epoch"]


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
def implicit_epoch(X, sqnorm, y, W, u, rows, ks, lr, alpha, beta, tol, newton):
    """One epoch of Implicit SGD with n = m = 1 (Proposition 4), W and u updated in place;
    X the rows (:class:`~xclib._numba.CSR`), the other arguments as :func:`~.kernels.sgd_epoch`'s.

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
    indptr, indices, data = X
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
