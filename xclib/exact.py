"""The book's oracle: the exact minimum of the ridge-regularised softmax loss.

Fagan & Iyengar eq. (2), written as a mean (the book's one scale for the ridge, ``alpha``):

    f(W) = (1/N) Σ_i [ log Σ_k exp(x_iᵀ w_k) − x_iᵀ w_{y_i} ] + (α/2) ‖W‖²_F ,

that is −L(W)/N with the paper's μ = α·N. :class:`SoftmaxRegression` minimises it with L-BFGS
(:func:`~xclib.lbfgs.lbfgs`, two-loop recursion and a strong-Wolfe line search) on exact
gradients (:func:`softmax_objective`), preconditioned by the features' second moment
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
from .lbfgs import lbfgs
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

    def __init__(self, *, alpha=1e-4, fit_intercept=False, tol=1e-8, max_iter=1000,
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
