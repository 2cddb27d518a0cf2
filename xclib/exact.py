"""The book's oracle: the exact minimum of the ridge-regularised softmax loss.

Fagan & Iyengar eq. (2), written as a mean (the book's one scale for the ridge, ``alpha``):

    f(W) = (1/N) Σ_i [ log Σ_k exp(x_iᵀ w_k) − x_iᵀ w_{y_i} ] + (α/2) ‖W‖²_F ,

that is −L(W)/N with the paper's μ = α·N. :class:`SoftmaxRegression` minimises it with L-BFGS
(:func:`lbfgs`, two-loop recursion and a strong-Wolfe line search) on exact gradients
(:func:`softmax_objective`), preconditioned by the features' second moment
(:func:`feature_preconditioner`). It agrees with
``sklearn.linear_model.LogisticRegression(C=1/(α·N), fit_intercept=False)``, which minimises
the same objective.

The gradient takes one of two paths, the same numbers to rounding:

* sparse ``X`` with ``K ≥ FUSED_MIN_K`` classes: one fused numba pass over the rows (scores of
  a row, its softmax, and its rank-one update of the (D, K) gradient, while the row is in
  cache); memory O(K·D), no N × K block at all;
* otherwise (few classes, or dense ``X``): blocks of at most ``BLOCK_ENTRIES`` scores, the two
  products through SciPy's CSR kernels (or BLAS), exp and the gradient of the scores in place.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np
import scipy.sparse as sp
from numba import njit
from sklearn.exceptions import ConvergenceWarning

from ._numba import dense_dot, dense_dot8, exp_shifted
from .base import ALPHA, FIT_INTERCEPT, MAX_ITER, TOL, LinearSoftmaxClassifier, as_csr
from .metrics import BLOCK_ENTRIES
from .steps import row_scale

__all__ = ["FUSED_MIN_K", "PRECONDITIONER_RANK", "SoftmaxRegression", "feature_preconditioner",
           "lbfgs", "row_scale", "softmax_objective", "top_eigenpairs"]

#: Classes from which the fused numba pass beats SciPy's two CSR products (measured on
#: Bibtex, K = 146: 1.3-1.9x; on MNIST, K = 10, SciPy's kernels are 1.4x faster).
FUSED_MIN_K = 32

#: Eigen-directions of the features' second moment that :func:`feature_preconditioner` takes
#: out of L-BFGS's initial Hessian (3 to 100 gave about the same evaluation counts on Bibtex
#: and MNIST; 1, the mean direction alone, did not).
PRECONDITIONER_RANK = 5


@njit(cache=True, nogil=True)
def _fused_rows(indptr, indices, data, y, wt, b, gt, gb, s):
    """Return Σ_i [lse(s_i) − s_{i,y_i}] over the CSR rows; add ``Xᵀ(P − Y)`` to ``gt`` and
    ``Σ_i (p_i − e_{y_i})`` to ``gb``.

    ``wt`` and ``gt`` are (D, K) (a feature's K weights contiguous); ``s`` is a (K,) scratch.
    """
    k_cls = wt.shape[1]
    value = 0.0
    for i in range(indptr.shape[0] - 1):
        for k in range(k_cls):
            s[k] = b[k]
        for jj in range(indptr[i], indptr[i + 1]):
            w = wt[indices[jj]]
            v = data[jj]
            for k in range(k_cls):
                s[k] += v * w[k]
        m = s[0]
        for k in range(1, k_cls):
            m = max(m, s[k])
        yi = y[i]
        sy = s[yi]
        tot = exp_shifted(s, m)
        value += m + math.log(tot) - sy
        inv = 1.0 / tot
        for k in range(k_cls):
            s[k] *= inv
            gb[k] += s[k]
        s[yi] -= 1.0
        gb[yi] -= 1.0
        for jj in range(indptr[i], indptr[i + 1]):
            g = gt[indices[jj]]
            v = data[jj]
            for k in range(k_cls):
                g[k] += v * s[k]
    return value


def _objective_fused(coef, X, y, intercept, with_grad):
    """The data term (no ridge) and its gradients by :func:`_fused_rows` (sparse ``X``)."""
    X = X if X.format == "csr" else X.tocsr()
    k, d = coef.shape
    y = np.ascontiguousarray(y, dtype=np.int64)
    # numba does not check bounds: check the shapes and labels the kernel indexes with
    b = np.zeros(k) if intercept is None else np.ascontiguousarray(intercept, dtype=np.float64)
    if X.shape[1] != d or y.shape != (X.shape[0],) or b.shape != (k,):
        raise ValueError(f"X {X.shape}, coef {coef.shape}, y {y.shape} and intercept "
                         f"{b.shape} do not match")
    if y.size and (y.min() < 0 or y.max() >= k):
        raise ValueError(f"labels must lie in 0..{k - 1}")
    wt = np.ascontiguousarray(coef.T)
    gt = np.zeros((d, k))
    gb = np.zeros(k)
    value = _fused_rows(X.indptr, X.indices, np.asarray(X.data, dtype=np.float64),
                        y, wt, b, gt, gb, np.empty(k))
    if not with_grad:
        return value, None, None
    return value, gt.T, (gb if intercept is not None else None)


def softmax_objective(coef, X, y, mu=0.0, intercept=None, with_grad=True):
    """Negative of eq. (2) on the sum scale, ``−L(W)``, and its gradient in ``W`` (and ``b``).

    Parameters
    ----------
    coef : (K, D) ; X : CSR or dense (N, D) ; y : int (N,) in 0..K-1
    mu : float ≥ 0, the paper's ridge on this sum scale (``alpha·N`` of the estimators)
    intercept : (K,) or None. The intercept is never penalised.

    Returns
    -------
    value, grad_coef, grad_intercept (None without intercept) ; or just value.

    Sparse ``X`` with ``K ≥ FUSED_MIN_K`` classes takes one fused numba pass over the rows
    (:func:`_fused_rows`); otherwise blocks of rows go through SciPy's CSR kernels (or BLAS
    for dense ``X``). Both give the same numbers to rounding.
    """
    k = coef.shape[0]
    n = X.shape[0]
    c = coef.ravel()
    value = 0.5 * mu * dense_dot(c, c)
    if sp.issparse(X) and k >= FUSED_MIN_K:
        v, g, gb = _objective_fused(coef, X, y, intercept, with_grad)
        if not with_grad:
            return value + v
        return value + v, g + mu * coef, gb
    rows = max(1, BLOCK_ENTRIES // k)
    gt = np.zeros((coef.shape[1], k)) if with_grad else None  # Xᵀ(P − Y), (D, K)
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
        value += float(np.sum(m) - np.sum(s[rows_b, yb]))
        s -= m[:, None]
        e = np.exp(s, out=s)  # in place: the scores are not needed any more
        sum_e = e.sum(axis=1)
        value += float(np.sum(np.log(sum_e)))
        if with_grad:
            e /= sum_e[:, None]
            e[rows_b, yb] -= 1.0  # P − Y, in place
            gt += Xb.T @ e
            if gb is not None:
                gb += e.sum(axis=0)
    if with_grad:
        return value, gt.T + mu * coef, gb
    return value


def _cubic_step(a, b):
    """Minimiser of the cubic through ``a = (t, f, f')`` and ``b``, kept inside the middle 80%
    of ``[a.t, b.t]`` (bisection when the cubic has none there)."""
    (ta, fa, da), (tb, fb, db) = a[:3], b[:3]
    lo, hi = min(ta, tb), max(ta, tb)
    width = hi - lo
    t = 0.5 * (lo + hi)
    d1 = da + db - 3.0 * (fa - fb) / (ta - tb)
    disc = d1 * d1 - da * db
    if disc >= 0.0:
        d2 = math.copysign(math.sqrt(disc), tb - ta)
        den = db - da + 2.0 * d2
        if den != 0.0:
            c = tb - (tb - ta) * (db + d2 - d1) / den
            if math.isfinite(c):
                t = c
    return min(max(t, lo + 0.1 * width), hi - 0.1 * width)


def _wolfe_search(fun, x, f0, g0, d, t, c1=1e-4, c2=0.9, max_evals=20):
    """Strong-Wolfe step along ``d`` from ``x`` (Nocedal & Wright, alg. 3.5-3.6, cubic zoom).

    Returns ``(x_new, f_new, g_new, evals)``; ``x_new`` is None when no step decreased ``f``.
    Each point is ``(t, f, f', x, g)``; ``lo`` always satisfies sufficient decrease.
    """
    dg0 = dense_dot8(g0, d)
    lo = (0.0, f0, dg0, x, g0)
    hi = None
    for evals in range(1, max_evals + 1):
        xt = x + t * d
        ft, gt = fun(xt)
        dgt = dense_dot8(gt, d)
        cur = (t, ft, dgt, xt, gt)
        if not np.isfinite(ft) or ft > f0 + c1 * t * dg0 or ft >= lo[1]:
            hi = cur
        elif abs(dgt) <= -c2 * dg0:
            return xt, ft, gt, evals
        elif hi is None and dgt < 0.0:
            lo = cur
            t *= 4.0  # still going down: extrapolate
            continue
        else:
            if hi is None or dgt * (hi[0] - t) >= 0.0:
                hi = lo
            lo = cur
        if not (np.isfinite(hi[1]) and np.isfinite(hi[2])):
            t = lo[0] + 0.1 * (hi[0] - lo[0])  # shrink towards lo away from overflow
        else:
            t = _cubic_step(lo, hi)
        if abs(hi[0] - lo[0]) <= 1e-12 * max(lo[0], hi[0]):
            break
    if lo[0] > 0.0:  # sufficient decrease without the curvature condition
        return lo[3], lo[1], lo[4], evals
    return None, f0, g0, evals


@njit(cache=True, nogil=True)
def _two_loop_down(g, S, Y, rho, order, alpha):
    """First loop of the two-loop recursion over the pairs ``order`` (newest first): returns
    ``q``, the gradient with the pairs' components taken out (``alpha`` keeps their weights)."""
    q = g.copy()
    n = q.shape[0]
    for i in order:
        a = rho[i] * dense_dot8(S[i], q)
        alpha[i] = a
        for j in range(n):
            q[j] -= a * Y[i, j]
    return q


@njit(cache=True, nogil=True)
def _two_loop_up(r, S, Y, rho, order, alpha):
    """Second loop, in place on ``r = −H₀·q``: returns the direction ``−H·g``."""
    n = r.shape[0]
    for i in order[::-1]:
        c = alpha[i] + rho[i] * dense_dot8(Y[i], r)  # + since r holds −H₀q
        for j in range(n):
            r[j] -= c * S[i, j]
    return r


def lbfgs(fun, x0, gtol, ftol=1e3 * np.finfo(float).eps, max_iter=1000, m=10,
          precondition=None, curvature=None):
    """Minimise ``fun`` (returning value and gradient) by L-BFGS with ``m`` correction pairs.

    Stops when ``max|g| ≤ gtol`` or when an iteration decreases ``f`` by at most
    ``ftol·max(|f|, 1)`` (both success, the tests of scipy's L-BFGS-B), or after ``max_iter``
    iterations, or when the line search finds no decrease. Returns a dict with ``x``, ``fun``,
    ``nit``, ``nfev``, ``success`` and ``message``. The two-loop recursion (numba, one thread)
    costs 4·m·n flops an iteration: 2.9 ms at n = 2.7e5, m = 10 (Bibtex), where SciPy's
    L-BFGS-B took 36-40 ms (m = 10-20) in one thread and 0.2-0.5 s when its BLAS calls ran two
    threads on busy cores (measured, ``benchmarks/bench_exact.py``).

    ``precondition``, a function ``v ↦ M⁻¹v`` for a symmetric positive definite ``M``, makes
    the initial Hessian of the recursion ``γ·M⁻¹`` with ``γ = sᵀy / yᵀM⁻¹y`` of the newest pair
    (Nocedal & Wright, *Numerical Optimization*, 2nd ed., §7.2, eq. 7.20, with ``M⁻¹`` in place
    of the identity); the first step is along ``−M⁻¹g``. Without it ``M = I``: plain L-BFGS.

    ``curvature``, a function ``d ↦ dᵀ∇²f(x0)d`` (or an estimate of it), sets the first trial
    step to the minimiser of the quadratic model along the first direction,
    ``t = −gᵀd / dᵀ∇²f d``, instead of a step of unit length.
    """
    x = np.array(x0, dtype=np.float64)
    n = x.shape[0]
    f, g = fun(x)
    nfev, nit = 1, 0
    S, Y, rho = np.empty((m, n)), np.empty((m, n)), np.empty(m)
    alpha = np.empty(m)
    m_inv_y = None  # M⁻¹y of the newest pair
    used, newest = 0, -1
    status = None
    if np.max(np.abs(g), initial=0.0) <= gtol:
        status = (True, "the largest gradient entry is below gtol")
    while status is None:
        if nit >= max_iter:
            status = (False, "reached max_iter")
            break
        if used:
            order = np.array([(newest - j) % m for j in range(used)], dtype=np.int64)
            q = _two_loop_down(g, S, Y, rho, order, alpha)
            if precondition is None:
                r = q
                gamma = 1.0 / (rho[newest] * dense_dot8(Y[newest], Y[newest]))  # sᵀy / yᵀy
            else:
                r = precondition(q)
                gamma = 1.0 / (rho[newest] * dense_dot8(Y[newest], m_inv_y))  # sᵀy / yᵀM⁻¹y
            r *= -gamma  # the direction is −H·g: negate once, here
            d = _two_loop_up(r, S, Y, rho, order, alpha)
        if not used or dense_dot8(g, d) >= 0.0:  # no memory, or not a descent direction: restart
            used, newest = 0, -1
            d = -g if precondition is None else -precondition(g)
            t0 = 1.0 / max(math.sqrt(dense_dot8(d, d)), 1e-300)
        else:
            t0 = 1.0
        if curvature is not None and nit == 0:
            dhd = curvature(d)
            if math.isfinite(dhd) and dhd > 0.0:
                t0 = -dense_dot8(g, d) / dhd
        x_new, f_new, g_new, evals = _wolfe_search(fun, x, f, g, d, t0)
        nfev += evals
        if x_new is None:
            status = (False, "the line search found no decrease")
            break
        nit += 1
        s_k, y_k = x_new - x, g_new - g
        sy = dense_dot8(s_k, y_k)
        if sy > 1e-10 * dense_dot8(y_k, y_k):  # else no curvature information: skip the pair
            newest = (newest + 1) % m
            S[newest], Y[newest], rho[newest] = s_k, y_k, 1.0 / sy
            if precondition is not None:
                m_inv_y = precondition(y_k)
            used = min(used + 1, m)
        f_old = f
        x, f, g = x_new, f_new, g_new
        if np.max(np.abs(g)) <= gtol:
            status = (True, "the largest gradient entry is below gtol")
        elif f_old - f <= ftol * max(abs(f_old), abs(f), 1.0):
            status = (True, "the relative decrease of f is below ftol")
    return {"x": x, "fun": float(f), "jac": g, "nit": nit, "nfev": nfev, "success": status[0],
            "message": status[1]}


def top_eigenpairs(X, rank, intercept=False, oversample=5, power_iters=2, seed=0):
    """Largest eigenpairs of the second moment ``C = AᵀA/N`` of the rows of ``A = X``
    (``A = [X, 1]`` with ``intercept``), by randomized subspace iteration (Halko, Martinsson &
    Tropp 2011, algorithms 4.4 and 5.1): ``rank + oversample`` random directions, ``power_iters``
    rounds of ``A``, ``Aᵀ`` with re-orthonormalisation, then the SVD of the small projection.

    Returns ``(lam, Q)``: ``lam`` the ``rank + 1`` largest eigenvalue estimates in decreasing
    order (the last one bounds the rest of the spectrum from above), ``Q`` (D', rank) the
    eigenvectors of the first ``rank``. Costs ``2·(power_iters + 1)`` products of ``X`` with
    ``rank + oversample`` columns. ``rank`` is clipped to ``min(D', N) − 1``.
    """
    n, d = X.shape
    width = d + int(intercept)
    cols = min(rank + oversample, width, n)
    rank = min(rank, cols - 1)

    def times_a(V):
        out = np.asarray(X @ V[:d])
        if intercept:
            out = out + V[d]
        return out

    def times_at(U):
        out = np.asarray(X.T @ U)
        return np.vstack([out, U.sum(axis=0)]) if intercept else out

    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(times_a(rng.standard_normal((width, cols))))[0]
    for _ in range(power_iters):
        basis = np.linalg.qr(times_a(np.linalg.qr(times_at(basis))[0]))[0]
    _, sv, vt = np.linalg.svd(times_at(basis).T, full_matrices=False)
    return sv[:rank + 1] ** 2 / n, np.ascontiguousarray(vt[:rank].T)


def feature_preconditioner(X, k, alpha, intercept=False, rank=None, seed=0):
    """``v ↦ M⁻¹v`` for the initial Hessian of :func:`lbfgs` on the softmax objective.

    The objective's Hessian is ``Σ_i (diag p_i − p_i p_iᵀ) ⊗ x_i x_iᵀ / N + α·I``; at ``W = 0``
    each class's block is ``((K − 1)/K²)·C + α·I`` with ``C = XᵀX/N``. On non-negative or
    normalised features a few directions of ``C`` (the mean row and its neighbours) carry most
    of its trace, so that block is badly conditioned, and L-BFGS's scalar initial Hessian
    spends its early pairs learning those directions. Here, per class,

        M = Q·diag(λ + τ)·Qᵀ + (λ_{r+1} + τ)·(I − QQᵀ),    τ = α / c,  c = 1/(2K),

    with ``(λ, Q)`` the ``r = rank`` largest eigenpairs of ``C`` (:func:`top_eigenpairs`) and
    the rest of the spectrum flattened to ``λ_{r+1}``; ``c`` is half the mean curvature of a
    class at ``W = 0`` (the probabilities sharpen as the fit proceeds). ``M`` acts on each class
    alike, and only the ratio of its parts matters, since L-BFGS rescales it by ``γ`` at every
    iteration. Applying it costs ``4·K·D·r`` flops. Returns None when ``C`` is zero.

    Measured (``benchmarks/bench_exact.py``, tol = 1e-6): objective evaluations to the same
    tolerance, Bibtex 35 → 23, MNIST 68 → 31 (this alone, without the first step of
    :func:`_curvature_at_zero`). ``r`` from 3 to 100 gave 20-25 and 28-33 evaluations; ``r = 1``
    (the mean direction alone) 29-31 and 63-65; ``τ`` from ``αK/2`` to ``8αK`` gave 31-32 on
    MNIST and 23-30 on Bibtex (best at ``2αK`` and ``4αK``).
    """
    d = X.shape[1]
    lam, q = top_eigenpairs(X, PRECONDITIONER_RANK if rank is None else rank,
                            intercept=intercept, seed=seed)
    if not (lam.size >= 2 and lam[0] > 0.0):
        return None
    tau = max(alpha * 2.0 * k, 1e-6 * lam[0])
    tail = 1.0 / (lam[-1] + tau)
    lift = 1.0 / (lam[:-1] + tau) - tail  # M⁻¹ = tail·I + Q·diag(lift)·Qᵀ
    qw, qb = q[:d], (q[d] if intercept else None)
    size = k * d

    def apply(v):
        coef = v[:size].reshape(k, d)
        z = coef @ qw
        if intercept:
            z += np.outer(v[size:], qb)
        z *= lift
        out = v * tail
        out[:size].reshape(k, d)[...] += z @ qw.T
        if intercept:
            out[size:] += z @ qb
        return out

    return apply


def _curvature_at_zero(X, k, alpha):
    """``d ↦ dᵀ∇²f(0)d`` for the mean objective (with or without intercepts, whose entries
    follow the ``K·D`` weights in ``d``): at ``W = 0, b = 0`` every ``p_i`` is uniform and the
    Hessian is ``(I/K − 11ᵀ/K²) ⊗ AᵀA/N + α·I`` (no ridge on ``b``), ``A = [X, 1]``, so the
    quadratic form costs one product ``A·Dᵀ``."""
    n, d = X.shape
    size = k * d

    def curvature(direction):
        z = np.asarray(X @ direction[:size].reshape(k, d).T)  # (N, K)
        if direction.shape[0] > size:
            z += direction[size:]
        total = z.sum(axis=1)
        dc = direction[:size]
        return ((dense_dot8(z.ravel(), z.ravel()) / k - dense_dot8(total, total) / (k * k)) / n
                + alpha * dense_dot8(dc, dc))

    return curvature


class SoftmaxRegression(LinearSoftmaxClassifier):
    """Exact ridge-regularised softmax regression by L-BFGS: the book's reference optimum.

    Parameters
    ----------
    alpha : float, default 1e-4
        Ridge: the objective is the mean log-loss + (alpha/2)·‖W‖². Fagan & Iyengar's μ of
        eq. (2) (a sum over rows) is ``alpha·N``; scikit-learn's ``C`` is ``1/(alpha·N)``. With
        ``alpha=0`` the optimum may not exist (separable data): L-BFGS then stops at
        ``max_iter`` with a :class:`~sklearn.exceptions.ConvergenceWarning`.
    fit_intercept : bool, default False
        Add an unpenalised bias per class.
    tol : float, default 1e-8
        Stop when the largest entry of the gradient of the mean objective falls below ``tol``
        (or when an iteration decreases it by less than 1e3·eps relatively, as L-BFGS-B does).
    max_iter : int, default 1000
        L-BFGS iterations at most; stopping there warns ``ConvergenceWarning``.
    warm_start : bool, default False
        Start from the previous fit's weights when their shape matches.

    Notes
    -----
    When the largest row norm ``s`` of ``X`` is far from 1 (above 1e4 or below 1e-4), the
    problem is solved in the scaled variables ``V = s·W`` (rows ``x/s``, ridge ``alpha/s²``):
    the same minimiser, but L-BFGS's first steps are well scaled whatever the units of the
    features (features of size 1e50 otherwise stop it at iteration 0). Rows of ordinary size
    are left as they are, so the iterates are those of the plain problem.

    The solver is :func:`lbfgs` with 10 correction pairs (scikit-learn's ``lbfgs`` uses SciPy's
    L-BFGS-B with 10 too); the gradient is :func:`softmax_objective` (a fused numba pass for
    sparse ``X`` with many classes). Two things differ from textbook L-BFGS, neither the
    optimum: the initial Hessian of the two-loop recursion is :func:`feature_preconditioner`
    (the features' second moment through its few largest eigen-directions, instead of a
    multiple of the identity), and, from ``W = 0``, the first trial step is the minimiser along
    the first direction of the exact quadratic model there (:func:`_curvature_at_zero`).
    Objective evaluations to the same ``tol`` (1e-6) with and without them: MNIST 29 / 68,
    Bibtex 21 / 35, 20 Newsgroups 17 / 38, covtype (with intercept) 39 / 545.

    Attributes
    ----------
    coef_ (K, D), intercept_ (K,) or None, classes_, n_iter_, n_fev_ (objective evaluations),
    objective_ (the mean objective at the end), converged_ (bool), fit_time_ (seconds).
    """

    _parameter_constraints = {
        "alpha": ALPHA,
        "fit_intercept": FIT_INTERCEPT,
        "tol": TOL,
        "max_iter": MAX_ITER,
        "warm_start": ["boolean"],
    }

    def __init__(self, alpha=1e-4, fit_intercept=False, tol=1e-8, max_iter=1000,
                 warm_start=False):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def fit(self, X, y):
        """Minimise the mean objective on ``(X, y)``."""
        self._validate_params()
        old = getattr(self, "coef_", None) if self.warm_start else None
        old_b = getattr(self, "intercept_", None) if self.warm_start else None
        X, y_enc = self._validate_fit(X, y)
        n, d = X.shape
        k = self.classes_.shape[0]
        size = k * d
        scale = row_scale(X)
        Xs = X * (1.0 / scale) if scale != 1.0 else X
        mu_s = float(self.alpha) * n / scale / scale  # the sum-scale ridge in V = s·W
        x0 = np.zeros(size + (k if self.fit_intercept else 0))
        if old is not None and old.shape == (k, d):
            x0[:size] = old.ravel() * scale
            if self.fit_intercept and old_b is not None:
                x0[size:] = old_b

        def fun(theta):
            coef = theta[:size].reshape(k, d)
            b = theta[size:] if self.fit_intercept else None
            v, g, gb = softmax_objective(coef, Xs, y_enc, mu_s, b)
            grad = g.ravel() if gb is None else np.concatenate([g.ravel(), gb])
            grad *= 1.0 / n  # g is a fresh array: scale in place
            return v / n, grad

        t0 = time.perf_counter()
        # the W-gradient is s times the V-gradient: stop when max |∇_W f| < tol
        precondition = feature_preconditioner(Xs, k, mu_s / n, intercept=self.fit_intercept)
        curvature = None if np.any(x0) else _curvature_at_zero(Xs, k, mu_s / n)
        res = lbfgs(fun, x0, gtol=float(self.tol) / scale, max_iter=int(self.max_iter),
                    precondition=precondition, curvature=curvature)
        self.fit_time_ = time.perf_counter() - t0
        self.coef_ = res["x"][:size].reshape(k, d) / scale
        self.intercept_ = res["x"][size:].copy() if self.fit_intercept else None
        self.n_iter_ = int(res["nit"])
        self.n_fev_ = int(res["nfev"])
        self.objective_ = float(res["fun"])
        self.converged_ = bool(res["success"])
        if not self.converged_:
            warnings.warn(
                f"SoftmaxRegression stopped after {self.n_iter_} L-BFGS iterations without "
                f"reaching tol={self.tol:g} ({res['message']}); raise max_iter or alpha",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def log_likelihood(self, X, y):
        """L(W) of eq. (2) on ``(X, y)``: a sum over rows, ridge ``(alpha·N/2)·‖W‖²`` included."""
        X = as_csr(self._validate_X(X))
        y = self._encode(y)
        mu = float(self.alpha) * X.shape[0]
        return -softmax_objective(self.coef_, X, y, mu, self.intercept_, with_grad=False)
