"""The book's oracle: the exact minimum of the ridge-regularised softmax loss.

Fagan & Iyengar eq. (2), written as a mean (the book's one scale for the ridge, ``alpha``):

    f(W) = (1/N) Σ_i [ log Σ_k exp(x_iᵀ w_k) − x_iᵀ w_{y_i} ] + (α/2) ‖W‖²_F ,

that is −L(W)/N with the paper's μ = α·N. :class:`SoftmaxRegression` minimises it with L-BFGS
(:func:`lbfgs`, two-loop recursion and a strong-Wolfe line search) on exact gradients
(:func:`softmax_objective`). It agrees with
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

from ._numba import dense_dot
from .base import ALPHA, FIT_INTERCEPT, MAX_ITER, TOL, LinearSoftmaxClassifier, as_csr
from .metrics import BLOCK_ENTRIES

__all__ = ["FUSED_MIN_K", "SoftmaxRegression", "lbfgs", "row_scale", "softmax_objective"]

#: Classes from which the fused numba pass beats SciPy's two CSR products (measured on
#: Bibtex, K = 146: 1.3-1.9x; on MNIST, K = 10, SciPy's kernels are 1.4x faster).
FUSED_MIN_K = 32


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
        tot = 0.0
        for k in range(k_cls):
            e = math.exp(s[k] - m)
            s[k] = e
            tot += e
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
    dg0 = dense_dot(g0, d)
    lo = (0.0, f0, dg0, x, g0)
    hi = None
    for evals in range(1, max_evals + 1):
        xt = x + t * d
        ft, gt = fun(xt)
        dgt = dense_dot(gt, d)
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
def _two_loop(g, S, Y, rho, order, gamma, alpha):
    """``−H·g`` by the two-loop recursion over the pairs ``order`` (newest first), in place."""
    q = g.copy()
    n = q.shape[0]
    for i in order:
        a = rho[i] * dense_dot(S[i], q)
        alpha[i] = a
        for j in range(n):
            q[j] -= a * Y[i, j]
    for j in range(n):
        q[j] *= -gamma  # the direction is −H·g: negate once, here
    for i in order[::-1]:
        c = alpha[i] + rho[i] * dense_dot(Y[i], q)  # + since q holds −r
        for j in range(n):
            q[j] -= c * S[i, j]
    return q


def lbfgs(fun, x0, gtol, ftol=1e3 * np.finfo(float).eps, max_iter=1000, m=10):
    """Minimise ``fun`` (returning value and gradient) by L-BFGS with ``m`` correction pairs.

    Stops when ``max|g| ≤ gtol`` or when an iteration decreases ``f`` by at most
    ``ftol·max(|f|, 1)`` (both success, the tests of scipy's L-BFGS-B), or after ``max_iter``
    iterations, or when the line search finds no decrease. Returns a dict with ``x``, ``fun``,
    ``nit``, ``nfev``, ``success`` and ``message``. The two-loop recursion (numba, one thread)
    costs 4·m·n flops an iteration: 9.5 ms at n = 2.7e5, m = 10 (Bibtex), where SciPy's
    L-BFGS-B took 36-40 ms (m = 10-20) in one thread and 0.2-0.5 s when its BLAS calls ran two
    threads on busy cores (measured, ``benchmarks/bench_exact.py``).
    """
    x = np.array(x0, dtype=np.float64)
    n = x.shape[0]
    f, g = fun(x)
    nfev, nit = 1, 0
    S, Y, rho = np.empty((m, n)), np.empty((m, n)), np.empty(m)
    alpha = np.empty(m)
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
            gamma = 1.0 / (rho[newest] * dense_dot(Y[newest], Y[newest]))  # sᵀy / yᵀy
            d = _two_loop(g, S, Y, rho, order, gamma, alpha)
        if not used or dense_dot(g, d) >= 0.0:  # no memory, or not a descent direction: restart
            used, newest = 0, -1
            d = -g
            t0 = 1.0 / max(math.sqrt(dense_dot(g, g)), 1e-300)
        else:
            t0 = 1.0
        x_new, f_new, g_new, evals = _wolfe_search(fun, x, f, g, d, t0)
        nfev += evals
        if x_new is None:
            status = (False, "the line search found no decrease")
            break
        nit += 1
        s_k, y_k = x_new - x, g_new - g
        sy = dense_dot(s_k, y_k)
        if sy > 1e-10 * dense_dot(y_k, y_k):  # else no curvature information: skip the pair
            newest = (newest + 1) % m
            S[newest], Y[newest], rho[newest] = s_k, y_k, 1.0 / sy
            used = min(used + 1, m)
        f_old = f
        x, f, g = x_new, f_new, g_new
        if np.max(np.abs(g)) <= gtol:
            status = (True, "the largest gradient entry is below gtol")
        elif f_old - f <= ftol * max(abs(f_old), abs(f), 1.0):
            status = (True, "the relative decrease of f is below ftol")
    return {"x": x, "fun": float(f), "jac": g, "nit": nit, "nfev": nfev, "success": status[0],
            "message": status[1]}


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
    sparse ``X`` with many classes).

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
        res = lbfgs(fun, x0, gtol=float(self.tol) / scale, max_iter=int(self.max_iter))
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


def row_scale(X):
    """Largest row L2 norm of CSR ``X`` when it lies outside [1e-4, 1e4], else 1.0."""
    if X.nnz == 0:
        return 1.0
    m = float(np.max(np.abs(X.data)))
    if not (np.isfinite(m) and m > 0.0):
        return 1.0
    v = X.data / m  # no overflow for features near the float range
    sq = np.add.reduceat(v * v, X.indptr[:-1][np.diff(X.indptr) > 0])
    s = m * float(np.sqrt(sq.max()))
    if not (np.isfinite(s) and s > 0.0) or 1e-4 <= s <= 1e4:
        return 1.0
    return s
