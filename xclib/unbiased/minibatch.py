"""Fagan & Iyengar, Appendix F.3: Implicit SGD with n datapoints and m classes per step.

Scale and symbols as in :mod:`xclib.unbiased` (our objective is the paper's divided by
``N``: mean log-loss + (alpha/2)‖W‖², the paper's μ is ``alpha·N``, ``learning_rate`` is the
authors' code's η). The datapoints are split once, after a seeded shuffle, into fixed
minibatches ``S_1, …, S_J`` of ``batch_size`` rows (the last one holds ``N mod n``; F.3.1).
An epoch visits the J minibatches once each, in a fresh random order, so ``j`` is uniform on
``{1, …, J}``. With ``L_j`` the distinct labels of ``S_j`` and ``C`` a uniform draw of
``m_j = min(m, K − |L_j|)`` distinct classes outside ``L_j``, the step's function is::

    f_{j,C}(u, W) = ω Σ_{i∈S_j} [ u_i + e^{−u_i} d_i(W) ] + (α/2) Σ_{k∈L_j∪C} β_k ‖w_k‖²,
    d_i(W) = 1 + Σ_{k∈L_j−{y_i}} e^{x_iᵀ(w_k − w_{y_i})} + ((K − |L_j|)/m_j) Σ_{k∈C} e^{…},

with ``ω = J/N`` (the paper's ``p_j^{-1}`` over our factor N with p_j = 1/J: ``ω = 1/n``
when n divides N), so ``E_{j,C}[f_{j,C}] = F(u, W)``, the double sum of
:func:`xclib.unbiased.double_sum_objective`.
The classes of ``S_j − {i}`` are ``L_j − {y_i}``: a label shared by two rows of the batch is
one class, not two, and ``K − |L_j|`` replaces the paper's ``K − n`` (equal when the labels
are distinct). The ridge is unbiased when ``E[1{k ∈ L_j ∪ C}] β_k = 1``::

    β_k^{-1} = (1/J) Σ_j [ 1{k∈L_j} + 1{k∉L_j} m_j/(K − |L_j|) ],

the paper's printed formula with ``|S_j|`` read as ``|L_j|`` (for n = m = 1 it is
:func:`xclib.unbiased.class_weights`); ``tests/test_unbiased_minibatch.py`` checks it by
exact enumeration.

**The step** ``argmin 2η f_{j,C} + ‖u − ũ‖² + ‖W − W̃‖²`` (eqs. 19–21 at our scale: the
paper's ``μβ_k/2`` there is our ``ρ_k = ηαβ_k``). With ``g = ηω``, each ``u_i`` is
integrated out: ``u_i = ũ_i − g + P(z_i)``, ``z_i = g e^{g − ũ_i} d_i(W)``, P the Lambert W,
leaving ``Σ_i (1 + P(z_i))² + Σ_k (‖w_k − w̃_k‖² + ρ_k‖w_k‖²)`` (eq. 19). Its minimiser has
``w_k = w̃_k/(1 + ρ_k) + X_Sᵀ r_k`` (the perpendicular part of eq. 20 and the parallel
part in one). With ``G = X_S X_Sᵀ = B Bᵀ`` (B: n × q, q = rank) and ``r_k = M a_k``,
``MᵀGM = I``, ``GM = B`` (``X_SᵀM`` is the orthonormal basis V_j, never formed), the
reduced problem is eq. (21) in ``A = (a_k)`` (|L_j ∪ C| × q)::

    Φ(A) = Σ_i (1 + P(z_i(A)))² + Σ_k (1 + ρ_k)‖a_k‖²,  x_iᵀw_k = s̃_ik/(1 + ρ_k) + b_iᵀa_k,

(the paper's linear term ``μβ_k w̃_kᵀV_j a_k`` disappears because we expand around
``w̃_k/(1+ρ_k)`` instead of ``w̃_k``). B and M come once per minibatch from the eigenvectors
of the Gram matrix of the normalised rows (F.3.4's precomputation; eigenvalues below 1e-10
are dropped, so duplicate or zero rows give q < n, footnote 11). Φ is 2-strongly convex; it
is minimised by Newton's method (conjugate gradients on exact Hessian-vector products,
Armijo backtracking) from ``A = 0``, on the log scale throughout, so no exponent overflows
and F.3.5's linear program is not needed. It stops at ``‖∇Φ‖ ≤ 2·tol``, which guarantees
``‖W − W*‖_F = ‖A − A*‖_F ≤ tol`` for the step's exact solution W*.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import dense_dot, fold_row_scale, lambertw_exp, sparse_row_axpy, sparse_row_dot
from .minibatch_batches import (
    Batches, batch_factors, batch_labels, draw_batch_classes, make_batches,
    minibatch_class_weights,
)

__all__ = [
    "Batches", "make_batches", "batch_factors", "batch_labels", "minibatch_class_weights",
    "draw_batch_classes", "inner_objective", "inner_gradient", "inner_hvp", "solve_inner",
    "minibatch_epoch", "batch_objective",
]


def batch_objective(u, W, X, y, rows, C, beta, alpha, omega):
    """``f_{j,C}(u, W)`` of the module docstring, dense, for checking on small problems."""
    K = W.shape[0]
    lab = np.unique(y[rows])
    C = np.asarray(C, dtype=np.int64)
    cw = (K - lab.shape[0]) / max(C.shape[0], 1)
    s = np.asarray(X[rows] @ W.T).reshape(len(rows), K)
    tot = 0.0
    for a, i in enumerate(rows):
        z = s[a] - s[a, y[i]]
        d = 1.0 + np.sum(np.exp(z[lab[lab != y[i]]])) + cw * np.sum(np.exp(z[C]))
        tot += u[i] + np.exp(-u[i]) * d
    T = np.r_[lab, C]
    return omega * tot + 0.5 * alpha * float(np.sum(beta[T] * np.sum(W[T] ** 2, axis=1)))


# -- small loops (explicit: numba compiles an array expression's broadcasting for each) -----
@njit(cache=True, nogil=True)
def _axpy(a, x, z):
    """``z ← z + a x`` (1-D)."""
    for i in range(x.shape[0]):
        z[i] += a * x[i]


@njit(cache=True, nogil=True)
def _scaled(a, X):
    """``a X`` (2-D, new array)."""
    out = np.empty_like(X)
    for k in range(X.shape[0]):
        for c in range(X.shape[1]):
            out[k, c] = a * X[k, c]
    return out


@njit(cache=True, nogil=True)
def _xpby(X, b, Z):
    """``X + b Z`` (2-D, new array)."""
    out = np.empty_like(X)
    for k in range(X.shape[0]):
        for c in range(X.shape[1]):
            out[k, c] = X[k, c] + b * Z[k, c]
    return out


@njit(cache=True, nogil=True)
def _ridge_term(rho1, A):
    """``2 ρ₁ₖ A_kc`` (the ridge's gradient in eq. 21), a new array."""
    out = np.empty_like(A)
    for k in range(A.shape[0]):
        for c in range(A.shape[1]):
            out[k, c] = 2.0 * rho1[k] * A[k, c]
    return out


@njit(cache=True, nogil=True)
def _add_to(Z, X):
    """``Z ← Z + X`` (2-D)."""
    for k in range(Z.shape[0]):
        for c in range(Z.shape[1]):
            Z[k, c] += X[k, c]


@njit(cache=True, nogil=True)
def _abt(A, B):
    """``A Bᵀ`` for the small dense factors of a step (n, t, q ≤ a few tens): plain loops,
    which cost less here than a BLAS call and the copy of a transposed operand."""
    n, q = A.shape
    t = B.shape[0]
    out = np.empty((n, t))
    for i in range(n):
        for k in range(t):
            acc = 0.0
            for c in range(q):
                acc += A[i, c] * B[k, c]
            out[i, k] = acc
    return out


@njit(cache=True, nogil=True)
def _atb(A, B):
    """``Aᵀ B`` for the small dense factors of a step (as :func:`_abt`)."""
    n, t = A.shape
    q = B.shape[1]
    out = np.zeros((t, q))
    for i in range(n):
        for k in range(t):
            a = A[i, k]
            if a != 0.0:
                for c in range(q):
                    out[k, c] += a * B[i, c]
    return out


# -- eq. (21): value, gradient, Hessian-vector product, Newton solver ----------------------
@njit(cache=True, nogil=True)
def inner_objective(A, Sb, Bs, yloc, logc, logk, rho1, P, Pi):
    """``Φ(A)`` of eq. (21); writes ``P_i = P(z_i)`` and the shares ``π_ik`` of ``d_i``
    (``π_{i,y_i} = 0``) into ``P``, ``Pi``. ``Sb`` (n × t): ``s̃_ik/(1 + ρ_k)``; ``logc``:
    log weight of class k in ``d_i`` (−inf for ``y_i``); ``logk = log g + g − ũ_i``."""
    nb, t = Sb.shape
    if A.shape[1] > 0:
        S = _abt(Bs, A)
        _add_to(S, Sb)
    else:
        S = Sb.copy()
    val = 0.0
    for i in range(nb):
        sy = S[i, yloc[i]]
        mx = 0.0
        for k in range(t):
            if logc[i, k] > -np.inf:
                mx = max(mx, logc[i, k] + S[i, k] - sy)
        tot = math.exp(-mx)
        for k in range(t):
            e = math.exp(logc[i, k] + S[i, k] - sy - mx) if logc[i, k] > -np.inf else 0.0
            Pi[i, k] = e
            tot += e
        for k in range(t):
            Pi[i, k] /= tot
        P[i] = lambertw_exp(logk[i] + mx + math.log(tot))
        val += (1.0 + P[i]) ** 2
    for k in range(t):
        val += rho1[k] * dense_dot(A[k], A[k])
    return val


@njit(cache=True, nogil=True)
def inner_gradient(A, Bs, yloc, rho1, P, Pi):
    """``∇Φ(A)`` from the ``P``, ``Pi`` of :func:`inner_objective` at A (F.3.3):
    ``∂(1+P)²/∂s_ik = 2P_i π_ik``, ``∂/∂s_{i,y_i} = −2P_i Σ_k π_ik``."""
    nb, t = Pi.shape
    GS = np.empty((nb, t))
    for i in range(nb):
        sp = 0.0
        for k in range(t):
            GS[i, k] = 2.0 * P[i] * Pi[i, k]
            sp += Pi[i, k]
        GS[i, yloc[i]] = -2.0 * P[i] * sp
    g = _ridge_term(rho1, A)
    if A.shape[1] > 0:
        _add_to(g, _atb(GS, Bs))
    return g


@njit(cache=True, nogil=True)
def inner_hvp(V, Bs, yloc, rho1, P, Pi):
    """``∇²Φ(A)·V``: with ``δ_k = Δs_k − Δs_y`` and ``σ = Σ_k π_k δ_k`` the Hessian of
    ``(1 + P)²`` in ``s_i`` maps Δs to ``2Pπ_kδ_k − c π_k σ`` (k ≠ y) and ``(c Σπ − 2P)σ``
    (k = y), ``c = 2P²/(1 + P)`` (``P' = P/(z(1 + P))``)."""
    nb, t = Pi.shape
    q = Bs.shape[1]
    out = _ridge_term(rho1, V)
    ds = np.empty(t)  # row i of Δs = B Vᵀ, then of the Hessian's image
    for i in range(nb):
        for k in range(t):
            acc = 0.0
            for c in range(q):
                acc += Bs[i, c] * V[k, c]
            ds[k] = acc
        y = yloc[i]
        sig = 0.0
        sp = 0.0
        for k in range(t):
            sig += Pi[i, k] * (ds[k] - ds[y])
            sp += Pi[i, k]
        c2 = 2.0 * P[i] * P[i] / (1.0 + P[i])
        dy = ds[y]
        for k in range(t):
            ds[k] = 2.0 * P[i] * Pi[i, k] * (ds[k] - dy) - c2 * Pi[i, k] * sig
        ds[y] = (c2 * sp - 2.0 * P[i]) * sig
        for k in range(t):  # out += Hsᵢᵀ bᵢ
            h = ds[k]
            if h != 0.0:
                for c in range(q):
                    out[k, c] += h * Bs[i, c]
    return out


@njit(cache=True, nogil=True)
def solve_inner(Sb, Bs, yloc, logc, logk, rho1, tol, max_iter):
    """Minimise Φ (eq. 21) from ``A = 0`` by Newton-CG with Armijo backtracking until
    ``‖∇Φ‖ ≤ 2·tol`` (then ``‖A − A*‖ ≤ tol``: Φ is 2-strongly convex), ``max_iter`` Newton
    steps, or no further decrease (a step whose change of Φ is below round-off is taken when
    it lowers ‖∇Φ‖). Returns ``(A, P, newton_steps, finite)``, P at the returned A;
    ``finite`` is False when Φ, ∇Φ or a curvature overflowed (no reliable step)."""
    nb, t = Sb.shape
    q = Bs.shape[1]
    A = np.zeros((t, q))
    P, Pi = np.empty(nb), np.empty((nb, t))
    P2, Pi2 = np.empty(nb), np.empty((nb, t))
    val = inner_objective(A, Sb, Bs, yloc, logc, logk, rho1, P, Pi)
    steps = 0
    finite = math.isfinite(val)
    for _ in range(max_iter):
        g = inner_gradient(A, Bs, yloc, rho1, P, Pi)
        gn = math.sqrt(dense_dot(g.ravel(), g.ravel()))
        finite = finite and math.isfinite(gn)
        if q == 0 or not gn > 2.0 * tol or not finite:
            break
        # conjugate gradients on H dx = −g, forcing term min(0.1, ‖g‖) (quadratic Newton;
        # fewer Newton steps, each with its line search, for a few more CG products)
        dx = np.zeros_like(A)
        r = _scaled(-1.0, g)
        p = r.copy()
        rs = gn * gn
        eta = min(0.1, gn)
        for _cg in range(max(20, 2 * t)):
            Hp = inner_hvp(p, Bs, yloc, rho1, P, Pi)
            pHp = dense_dot(p.ravel(), Hp.ravel())
            if not pHp > 0.0 or not math.isfinite(pHp):
                finite = finite and math.isfinite(pHp)
                break
            a = rs / pHp
            _axpy(a, p.ravel(), dx.ravel())
            _axpy(-a, Hp.ravel(), r.ravel())
            rs_new = dense_dot(r.ravel(), r.ravel())
            if math.sqrt(rs_new) <= eta * gn:
                break
            bk = rs_new / rs  # p ← r + β p, in place
            for k in range(p.shape[0]):
                for c in range(p.shape[1]):
                    p[k, c] = r[k, c] + bk * p[k, c]
            rs = rs_new
        slope = dense_dot(g.ravel(), dx.ravel())
        if not slope < 0.0:
            dx = _scaled(-1.0, g)
            slope = -gn * gn
        tau, accepted = 1.0, False
        for _ls in range(60):
            An = _xpby(A, tau, dx)
            vn = inner_objective(An, Sb, Bs, yloc, logc, logk, rho1, P2, Pi2)
            if vn <= val + 1e-4 * tau * slope:
                accepted = True
                break
            if abs(vn - val) <= 1e-12 * (1.0 + abs(val)):  # below round-off: judge by ‖∇Φ‖
                g2 = inner_gradient(An, Bs, yloc, rho1, P2, Pi2)
                if math.sqrt(dense_dot(g2.ravel(), g2.ravel())) < gn:
                    accepted = True
                    break
            tau *= 0.5
        if not accepted or not finite:
            break
        A = An
        P, P2 = P2, P
        Pi, Pi2 = Pi2, Pi
        steps += 1
        val = vn
    return A, P, steps, finite


# -- the epoch ---------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def minibatch_epoch(X, y, W, u, order, classes, batches, lr, omega, alpha, beta, tol, max_iter):
    """One epoch: for step t, batch ``order[t]`` and classes ``classes[t]`` (−1 padded), the
    exact Implicit SGD step of the module docstring; W (row scales as in
    :func:`xclib.unbiased.implicit_epoch`) and u in place. O(n t nnz) for the scores and the
    update (t = |L_j ∪ C| ≤ n + m), O(n t q) per Newton-CG product. Returns the Newton steps.
    If a step's problem overflows, W is set to NaN (the estimator's divergence check).
    X is the training rows (:class:`~xclib._numba.CSR`), ``batches`` the fit's
    :class:`Batches`."""
    indptr, indices, data = X
    bptr, brows, Bfac, Mfac, rank = batches
    K = W.shape[0]
    scale = np.ones(K)
    pos = np.full(K, -1, dtype=np.int64)
    g = lr * omega
    lg = math.log(g)
    steps = 0
    for st in range(order.shape[0]):
        j = order[st]
        rows = brows[bptr[j]:bptr[j + 1]]
        nb = rows.shape[0]
        T = np.empty(nb + classes.shape[1], dtype=np.int64)
        t = 0
        for i in range(nb):
            lab = y[rows[i]]
            if pos[lab] < 0:
                pos[lab] = t
                T[t] = lab
                t += 1
        n_lab = t
        for c in range(classes.shape[1]):
            if classes[st, c] >= 0:
                pos[classes[st, c]] = t
                T[t] = classes[st, c]
                t += 1
        lcw = math.log((K - n_lab) / (t - n_lab)) if t > n_lab else 0.0
        q = rank[j]
        Bs = np.ascontiguousarray(Bfac[j, :nb, :q])
        rho1, pk = np.empty(t), np.empty(t)
        for k in range(t):
            rho1[k] = 1.0 + lr * alpha * beta[T[k]]
            pk[k] = 1.0 / rho1[k]
        Sb, logc = np.empty((nb, t)), np.empty((nb, t))
        yloc, logk = np.empty(nb, dtype=np.int64), np.empty(nb)
        for i in range(nb):
            r = rows[i]
            idx = indices[indptr[r]:indptr[r + 1]]
            val = data[indptr[r]:indptr[r + 1]]
            yloc[i] = pos[y[r]]
            logk[i] = lg + g - u[r]
            for k in range(t):
                Sb[i, k] = scale[T[k]] * pk[k] * sparse_row_dot(idx, val, W[T[k]])
                logc[i, k] = 0.0 if k < n_lab else lcw
            logc[i, yloc[i]] = -np.inf
        A, P, ns, finite = solve_inner(Sb, Bs, yloc, logc, logk, rho1, tol, max_iter)
        steps += ns
        if not finite:  # overflow (absurd rate or feature scale): report it as divergence
            W.fill(np.nan)
            return steps
        R = _abt(Mfac[j, :nb, :q], A)
        for k in range(t):  # w_k ← w̃_k/(1 + ρ_k) + X_Sᵀ r_k
            kk = T[k]
            if alpha > 0.0:
                scale[kk] *= pk[k]
                fold_row_scale(W, scale, kk, False)
            for i in range(nb):
                if R[i, k] != 0.0:
                    r = rows[i]
                    sparse_row_axpy(R[i, k] / scale[kk], indices[indptr[r]:indptr[r + 1]],
                                    data[indptr[r]:indptr[r + 1]], W[kk])
            pos[kk] = -1
        for i in range(nb):
            u[rows[i]] = u[rows[i]] - g + P[i]
    fold_row_scale(W, scale, -1, True)
    return steps
