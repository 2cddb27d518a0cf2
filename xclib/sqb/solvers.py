"""The SQB iteration: the factored system ``(Σ_S + αI) ξ = μ_T + αθ``, its inexact solvers and
the batch schedule (Sections 4.1 and 4.2 of Aravkin et al.).

:func:`sigma_matvec` applies ``Σ_S + αI`` without forming Σ (a sum of rank-one terms, or of
Kronecker products ``M_b ⊗ x_b x_bᵀ`` in the multinomial case); :func:`lsqr_sigma` (the
paper's) and :func:`cg_sigma` run a fixed number of iterations from zero;
:func:`sqb_iterations` is the whole step of eq. (5) for a run of iterations, one numba call;
:func:`batch_schedule` gives the growing batch sizes. The ridge here is the book's ``alpha``,
the paper's η (eq. 4 is a mean, so the two are the same number).
"""
from __future__ import annotations

import math
from enum import IntEnum

import numpy as np
from numba import njit

from .._numba import sparse_row_axpy, sparse_row_dot
from ..metrics import _csr_loss_error
from .bound import softmax_bound_matvec
from .statistics import (
    batch_curvature,
    batch_curvature_multinomial,
    batch_mu,
    batch_mu_multinomial,
)

__all__ = ["Solver", "sigma_matvec", "cg_sigma", "lsqr_sigma", "full_cost", "search_step",
           "sqb_iterations", "batch_schedule"]


class Solver(IntEnum):
    """Inner solver of the SQB system (the ``solver`` parameter of :class:`~xclib.sqb.SQB`)."""

    LSQR = 0  #: Paige & Saunders' LSQR, the paper's choice
    CG = 1    #: conjugate gradients: every inner iteration lowers the quadratic model


@njit(cache=True, nogil=True)
def sigma_matvec(indptr, indices, data, batch, M, alpha, v, out):
    """``out = (Σ_S + αI) v`` with ``Σ_S = Σ_{b} M_b ⊗ x_{j_b} x_{j_b}ᵀ``, never formed (Sec. 4.1).

    ``v`` and ``out`` are K·D vectors (a K × D matrix V, row-major):
    ``out = Σ_b M_b (V x_b) x_bᵀ + αV`` in O(K·nnz(X_S) + K·D). Binary logistic regression
    is K = 1, ``M`` of shape (|S|, 1, 1) holding ``M_b = c(θᵀx_b)/|S|`` (so ``Σ_S = S̃S̃ᵀ``,
    ``S̃ = [√M_b x_b]``); the multinomial model passes ``M`` of shape (|S|, 2, K), the
    factors of :func:`~xclib.sqb.bound.softmax_bound_row`'s K × K matrix
    (:func:`~xclib.sqb.bound.softmax_bound_weights`), applied in O(K) per row
    (:func:`~xclib.sqb.bound.softmax_bound_matvec`) where the formed matrix took K²; it is
    computed on V transposed (:func:`_sigma_matvec_fm`).
    """
    if M.shape[1] != 1:  # the multinomial model: computed feature-major
        K = M.shape[2]
        D = v.shape[0] // K
        vf = np.empty_like(v)
        of = np.empty_like(v)
        _transpose(v, K, D, vf)
        _sigma_matvec_fm(indptr, indices, data, batch, M, alpha, vf, of)
        _transpose(of, D, K, out)
        return
    for i in range(v.shape[0]):
        out[i] = alpha * v[i]
    for b in range(batch.shape[0]):  # binary: M_b is the scalar weight
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        t = M[b, 0, 0] * sparse_row_dot(idx, val, v)
        if t != 0.0:
            sparse_row_axpy(t, idx, val, out)


@njit(cache=True, nogil=True)
def _sigma_matvec_fm(indptr, indices, data, batch, M, alpha, v, out):
    """:func:`sigma_matvec` of the multinomial model on *feature-major* vectors: V stored
    D × K (entry (j, k) at ``j·K + k``). A row's K scores ``V x_b`` and its K updates
    ``t_k x_b`` then read and write, per non-zero of ``x_b``, K contiguous numbers instead
    of K numbers D apart: the same arithmetic, 1.5 (MNIST, K = 10) to 5 (Bibtex, K = 146)
    times faster (``benchmarks/bench_sqb_sigma.py``). The solvers below run in this
    layout."""
    K = M.shape[2]
    for i in range(v.shape[0]):
        out[i] = alpha * v[i]
    s = np.empty(K)
    t = np.empty(K)
    for b in range(batch.shape[0]):
        j = batch[b]
        s[:] = 0.0
        for p in range(indptr[j], indptr[j + 1]):
            base, xv = indices[p] * K, data[p]
            for k in range(K):
                s[k] += xv * v[base + k]
        softmax_bound_matvec(M[b], s, t)
        for p in range(indptr[j], indptr[j + 1]):
            base, xv = indices[p] * K, data[p]
            for k in range(K):
                out[base + k] += xv * t[k]


@njit(cache=True, nogil=True)
def _matvec(indptr, indices, data, batch, M, alpha, v, out):
    """``(Σ_S + αI) v`` in the solvers' layout: feature-major for the multinomial model
    (:func:`_sigma_matvec_fm`), the plain vector for the binary one."""
    if M.shape[1] == 1:
        sigma_matvec(indptr, indices, data, batch, M, alpha, v, out)
    else:
        _sigma_matvec_fm(indptr, indices, data, batch, M, alpha, v, out)


@njit(cache=True, nogil=True)
def _transpose(v, rows, cols, out):
    """``out`` = the ``rows × cols`` row-major matrix ``v`` transposed, row-major."""
    for i in range(rows):
        for j in range(cols):
            out[j * rows + i] = v[i * cols + j]


@njit(cache=True, nogil=True)
def _to_solver_layout(M, rhs):
    """``(K, D, rhs in the solvers' layout)``: ``rhs`` (K × D, class-major) transposed to
    feature-major for the multinomial model, unchanged (a copy) for the binary one."""
    K = M.shape[2] if M.shape[1] != 1 else 1
    D = rhs.shape[0] // K
    out = np.empty_like(rhs)
    if K == 1:
        out[:] = rhs
    else:
        _transpose(rhs, K, D, out)
    return K, D, out


@njit(cache=True, nogil=True)
def _from_solver_layout(K, D, xs, x):
    """``x`` (class-major) from the solvers' ``xs`` (:func:`_to_solver_layout`)."""
    if K == 1:
        x[:] = xs
    else:
        _transpose(xs, D, K, x)


@njit(cache=True, nogil=True)
def _solve(indptr, indices, data, batch, M, alpha, rhs, n_inner, x, solver):
    """``x`` (class-major) from ``n_inner`` iterations of ``solver`` run in the solvers'
    layout (:func:`_to_solver_layout`)."""
    K, D, rhs_s = _to_solver_layout(M, rhs)
    xs = np.zeros_like(rhs_s)
    if solver == Solver.CG:
        _cg(indptr, indices, data, batch, M, alpha, rhs_s, n_inner, xs)
    else:
        _lsqr(indptr, indices, data, batch, M, alpha, rhs_s, n_inner, xs)
    _from_solver_layout(K, D, xs, x)


@njit(cache=True, nogil=True)
def cg_sigma(indptr, indices, data, batch, M, alpha, rhs, n_inner, x):
    """``n_inner`` conjugate-gradient iterations on ``(Σ_S + αI) x = rhs`` from ``x = 0``.

    Each iterate minimises the quadratic model ``½xᵀAx − rhsᵀx`` over a growing Krylov space,
    so the model decreases at every iteration (what makes the full-batch method monotone).
    ``rhs`` and ``x`` are K × D, class-major (as :func:`sigma_matvec`); the iteration runs
    feature-major (:func:`_sigma_matvec_fm`).
    """
    _solve(indptr, indices, data, batch, M, alpha, rhs, n_inner, x, Solver.CG)


@njit(cache=True, nogil=True)
def _cg(indptr, indices, data, batch, M, alpha, rhs, n_inner, x):
    """:func:`cg_sigma`'s iteration, in the solvers' layout, ``x`` zero on entry."""
    d = rhs.shape[0]
    r = rhs.copy()
    p = rhs.copy()
    ap = np.empty(d)
    rs = np.dot(r, r)
    for _ in range(n_inner):
        if rs <= 1e-300:
            break
        _matvec(indptr, indices, data, batch, M, alpha, p, ap)
        pap = np.dot(p, ap)
        if not pap > 0.0:
            break
        a = rs / pap
        for i in range(d):
            x[i] += a * p[i]
            r[i] -= a * ap[i]
        rs_new = np.dot(r, r)
        beta = rs_new / rs
        for i in range(d):
            p[i] = r[i] + beta * p[i]
        rs = rs_new


@njit(cache=True, nogil=True)
def lsqr_sigma(indptr, indices, data, batch, M, alpha, rhs, n_inner, x):
    """``n_inner`` LSQR iterations (Paige & Saunders 1982) on ``(Σ_S + αI) x = rhs`` from 0.

    The operator is symmetric, so ``Aᵀu = Au``; this matches
    ``scipy.sparse.linalg.lsqr(A, rhs, iter_lim=n_inner, atol=0, btol=0)`` (tested).
    ``gk_a``, ``gk_b`` are the Golub–Kahan scalars (LSQR's α and β). Layouts as
    :func:`cg_sigma`.
    """
    _solve(indptr, indices, data, batch, M, alpha, rhs, n_inner, x, Solver.LSQR)


@njit(cache=True, nogil=True)
def _lsqr(indptr, indices, data, batch, M, alpha, rhs, n_inner, x):
    """:func:`lsqr_sigma`'s iteration, in the solvers' layout, ``x`` zero on entry."""
    d = rhs.shape[0]
    u = rhs.copy()
    gk_b = math.sqrt(np.dot(u, u))
    if gk_b == 0.0:
        return
    u /= gk_b
    v = np.empty(d)
    _matvec(indptr, indices, data, batch, M, alpha, u, v)
    gk_a = math.sqrt(np.dot(v, v))
    if gk_a == 0.0:
        return
    v /= gk_a
    wv = v.copy()
    phibar = gk_b
    rhobar = gk_a
    tmp = np.empty(d)
    for _ in range(n_inner):
        _matvec(indptr, indices, data, batch, M, alpha, v, tmp)
        for i in range(d):
            u[i] = tmp[i] - gk_a * u[i]
        gk_b = math.sqrt(np.dot(u, u))
        if gk_b > 0.0:
            u /= gk_b
            _matvec(indptr, indices, data, batch, M, alpha, u, tmp)
            for i in range(d):
                v[i] = tmp[i] - gk_b * v[i]
            gk_a = math.sqrt(np.dot(v, v))
            if gk_a > 0.0:
                v /= gk_a
        rho = math.sqrt(rhobar * rhobar + gk_b * gk_b)
        c = rhobar / rho
        s = gk_b / rho
        theta_ = s * gk_a
        rhobar = -c * gk_a
        phi = c * phibar
        phibar = s * phibar
        for i in range(d):
            x[i] += (phi / rho) * wv[i]
            wv[i] = v[i] - (theta_ / rho) * wv[i]
        if gk_b == 0.0 or gk_a == 0.0:
            break


@njit(cache=True, nogil=True)
def _batch(stream, pos, size, full):
    """Rows of the next batch: all rows when ``size ≥ N``, else ``size`` entries of the stream."""
    if size >= full.shape[0]:
        return full, pos
    return stream[pos:pos + size], pos + size


#: the longest step the search of ``learning_rate="auto"`` tries (2¹⁰ bound steps)
MAX_SEARCH_STEP = 1024.0


@njit(cache=True, nogil=True)
def full_cost(indptr, indices, data, y, theta, alpha, K):
    """``L(θ) = mean log-loss + (α/2)‖θ‖²`` over all N rows (eq. 4): binary for ``K = 1``
    (the softmax of the scores ``(0, θᵀx)``), multinomial (W = θ as K × D) otherwise; the
    log-loss by the library's fused pass (:func:`xclib.metrics._csr_loss_error`).
    O(K·nnz(X))."""
    n = indptr.shape[0] - 1
    if K == 1:
        coef_t = np.zeros((theta.shape[0], 2))
        coef_t[:, 1] = theta
    else:
        coef_t = np.ascontiguousarray(theta.reshape(K, theta.shape[0] // K).T)
    total, _ = _csr_loss_error(indptr, indices, data, coef_t, np.zeros(coef_t.shape[1]),
                               y.astype(np.int64))
    sq = 0.0
    for i in range(theta.shape[0]):
        sq += theta[i] * theta[i]
    return total / max(n, 1) + 0.5 * alpha * sq


@njit(cache=True, nogil=True)
def search_step(indptr, indices, data, y, theta, alpha, K, xi, grad, last, f0, trial):
    """The step of ``learning_rate="auto"`` along the bound's direction ``−ξ``: the first of
    ``a = 2·last, last, last/2, …`` above 1 with Armijo's decrease
    ``L(θ − aξ) ≤ L(θ) − 10⁻⁴·a·gradᵀξ``, else 1 (the bound's own step, which lowers the
    majorizer and so L when both batches are all rows). ``f0`` is L(θ) when known (the cost
    of the previous accepted step), NaN otherwise. Returns ``(step, passes, L(θ − step·ξ))``:
    passes over the rows are the cost evaluations made (L(θ) when not known, and one per
    step tried); the cost is NaN after the fallback to 1 (not evaluated)."""
    a = min(2.0 * last, MAX_SEARCH_STEP)
    if a <= 1.0:
        return 1.0, 0, np.nan
    passes = 0
    if not math.isfinite(f0):
        f0 = full_cost(indptr, indices, data, y, theta, alpha, K)
        passes += 1
    slope = 0.0
    for i in range(xi.shape[0]):
        slope += grad[i] * xi[i]
    while a > 1.0:
        for i in range(xi.shape[0]):
            trial[i] = theta[i] - a * xi[i]
        passes += 1
        f = full_cost(indptr, indices, data, y, trial, alpha, K)
        if f <= f0 - 1e-4 * a * slope:
            return a, passes, f
        a *= 0.5
    return 1.0, passes, np.nan


@njit(cache=True, nogil=True)
def sqb_iterations(indptr, indices, data, y, theta, alpha, learning_rate, n_inner, solver,
                   b_mu, b_sigma, stream_mu, stream_sigma, n_classes=1, last_step=None):
    """Run ``len(b_mu)`` SQB iterations ``θ ← θ − a (Σ_S + αI)⁻¹ (μ_T + αθ)`` (eq. 5) in place.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of X (N rows) ; y : (N,) float64 labels
        (0/1 for the binary model, class codes for the multinomial one).
    theta : (n_classes·D,) float64, updated in place.
    alpha : float, the ridge (the paper's η). learning_rate : float, the step (the paper's α).
    n_inner : int, inner iterations l. solver : int, a :class:`Solver` code.
    b_mu, b_sigma : (m,) int64, batch sizes of the m iterations (≥ N means all rows).
    stream_mu, stream_sigma : int64 row indices the batches are read from, in order; the two
        streams are independent (Theorem 1 needs T and S independent).
    n_classes : 1 for binary logistic regression (θ of length D); K ≥ 2 for the multinomial
        model (θ = W, K × D row-major).
    last_step : None, or a (2,) float64 array: then each iteration whose gradient batch is
        all N rows takes the step of :func:`search_step` (``learning_rate="auto"``) from the
        previous accepted step ``last_step[0]`` and the known cost at θ ``last_step[1]`` (NaN:
        unknown), and stores its own step and the cost it reached there; other iterations
        take ``learning_rate`` (and forget the cost).

    Returns the passes over all rows the step searches made (0 without ``last_step``).

    Cost per iteration O(K·nnz(X_T) + n_inner·K·(nnz(X_S) + |S|) + K·D): Σ is never formed.
    """
    n = indptr.shape[0] - 1
    K = n_classes
    d = theta.shape[0]
    full = np.arange(n)
    mu = np.empty(d)
    rhs = np.empty(d)
    xi = np.empty(d)
    M = np.zeros((min(n, b_sigma.max()) if b_sigma.shape[0] else 0, 1 if K == 1 else 2, K))
    trial = np.empty(d if last_step is not None else 0)
    searched = 0
    pt = 0
    ps = 0
    for k in range(b_mu.shape[0]):
        tb, pt = _batch(stream_mu, pt, b_mu[k], full)
        sb, ps = _batch(stream_sigma, ps, b_sigma[k], full)
        Ms = M[:sb.shape[0]]
        if K == 1:
            batch_mu(indptr, indices, data, y, theta, tb, mu)
            batch_curvature(indptr, indices, data, theta, sb, Ms[:, 0, 0])
        else:
            batch_mu_multinomial(indptr, indices, data, y, theta, K, tb, mu)
            batch_curvature_multinomial(indptr, indices, data, theta, K, sb, Ms)
        for i in range(d):
            rhs[i] = mu[i] + alpha * theta[i]
        if solver == Solver.LSQR:
            lsqr_sigma(indptr, indices, data, sb, Ms, alpha, rhs, n_inner, xi)
        else:
            cg_sigma(indptr, indices, data, sb, Ms, alpha, rhs, n_inner, xi)
        a = learning_rate
        if last_step is not None and tb.shape[0] == n:  # rhs is then ∇L(θ)
            a, passes, f = search_step(indptr, indices, data, y, theta, alpha, K, xi, rhs,
                                       last_step[0], last_step[1], trial)
            last_step[0], last_step[1] = a, f
            searched += passes
        elif last_step is not None:
            last_step[1] = np.nan
        for i in range(d):
            theta[i] -= a * xi[i]
    return searched


def batch_schedule(k, b1, cap, gamma):
    """Batch size of iteration ``k`` (1-based): ``min(cap, b1 + round((k − 1)γ))`` (Sec. 4.2).

    Rounds half up (not NumPy's half-to-even). ``k`` may be an array.
    """
    k = np.asarray(k, dtype=np.float64)
    return np.minimum(cap, b1 + np.floor((k - 1.0) * gamma + 0.5)).astype(np.int64)
