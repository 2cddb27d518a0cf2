"""Chapter 4: semistochastic quadratic bound (SQB) methods (Aravkin et al.).

The module reads like the chapter:

1. **The bound** (Jebara & Choromanska 2012, Algorithm 1 of the paper): for a partition function
   ``Z(θ) = Σ_y h(y) exp(θᵀ f(y))`` and any anchor ``θ̃`` it finds ``z, r, S`` with
   ``Z(θ) ≤ z · exp(½ (θ−θ̃)ᵀ S (θ−θ̃) + (θ−θ̃)ᵀ r)`` (eq. 3). :func:`bound_factors` and
   :func:`bound_stats` run the loop over Ω on the log scale.
2. **Its binary logistic special case**: Ω = {0, 1}, ``f_x(0) = 0``, ``f_x(1) = x``, ``h = 1``.
   Then ``r = σ(u) x`` and ``S = c(u) x xᵀ`` with ``u = θ̃ᵀx`` and
   ``c(u) = tanh(u/2) / (2u)`` (:func:`curvature_weight`), the Jaakkola–Jordan bound.
   The batch statistics of Algorithm 1 are ``μ_T = (1/|T|) Σ_j (r_j − f_{x_j}(y_j))``
   (:func:`batch_mu`, an unbiased gradient by Lemma 1) and
   ``Σ_S = (1/|S|) Σ_j c_j x_j x_jᵀ`` kept in factored form (:func:`sigma_matvec`, Section 4.1).
3. **The SQB step** (eq. 5): ``θ ← θ − α (Σ_S + ηI)⁻¹ (μ_T + ηθ)``, the system solved by ``l``
   iterations of LSQR (:func:`lsqr_sigma`) or CG (:func:`cg_sigma`), batches growing as
   ``b_k = min(cap, b¹ + round((k−1)γ))`` (Section 4.2, :func:`batch_schedule`).
4. **Baselines on the same objective** (Section 4.4): SGD, ASGD, SAG (step 1/L) and SAG with a
   line search on L (SAGls) as numba kernels; L-BFGS from ``scipy.optimize``.
5. **Beyond the paper**: multinomial SQB (:func:`softmax_bound_row`,
   :func:`batch_mu_multinomial`, :func:`batch_curvature_multinomial`; the same
   :func:`sigma_matvec` with K × K blocks, :class:`MultinomialSQB`).
6. **Estimators** (:class:`SQB`, :class:`LogisticSGD`, :class:`LogisticASGD`,
   :class:`LogisticSAG`, :class:`LogisticLBFGS`), all minimising

   ``L_η(θ) = (1/T) Σ_j [log(1 + exp(θᵀx_j)) − y_j θᵀx_j] + (η/2) ‖θ‖²``,  y_j ∈ {0, 1},

   (eq. 4 for binary logistic regression) with ``η = 1/T`` by default. Each ``fit`` epoch is
   one *effective pass* through the data (T gradient-or-curvature sample evaluations), the
   paper's x-axis; ``history_["passes"]`` holds the exact count.

The binary models are :class:`~xclib.base.LinearSoftmaxClassifier` with K = 2 rows,
``coef_ = [0, θ]``: the softmax of the scores ``(0, θᵀx)`` *is* the logistic model
(``f_x(y) = e_y ⊗ x`` with class 0's row pinned at zero), so ``predict_proba``, the metrics and
the epoch loop of the other chapters apply unchanged.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.optimize
from numba import njit
from sklearn.utils.validation import check_is_fitted

from .base import IterativeSoftmaxEstimator, as_csr
from .metrics import softmax_loss_and_error
from ._numba import sigmoid, sparse_row_axpy, sparse_row_dot

__all__ = [
    "curvature_weight",
    "bound_factors",
    "bound_stats",
    "batch_mu",
    "batch_curvature",
    "softmax_bound_row",
    "batch_mu_multinomial",
    "batch_curvature_multinomial",
    "sigma_matvec",
    "cg_sigma",
    "lsqr_sigma",
    "sqb_iterations",
    "sgd_epoch",
    "asgd_epoch",
    "sag_epoch",
    "batch_schedule",
    "logistic_objective",
    "logistic_optimum",
    "SQB",
    "LogisticSGD",
    "LogisticASGD",
    "LogisticSAG",
    "LogisticLBFGS",
    "MultinomialSQB",
]


# --------------------------------------------------------------------------------------------
# 1. The bound (Algorithm 1, subroutine "Bound Computation")
# --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def curvature_weight(t):
    """Bound weight ``tanh(t/2) / (2t)`` of Algorithm 1, ``t = log(α/z)``.

    Equals ¼ at ``t = 0`` (series ``¼ − t²/48``), tends to 0 as ``|t| → ∞`` and is exactly 0
    for the first term of the loop (``z → 0⁺``, ``t = +∞``).
    """
    at = abs(t)
    if at == np.inf:
        return 0.0
    if at < 1e-4:
        return 0.25 - t * t / 48.0
    return math.tanh(0.5 * t) / (2.0 * t)


@njit(cache=True, nogil=True)
def bound_factors(F, log_h, theta):
    """Quadratic bound on ``Z(θ) = Σ_y h(y) exp(θᵀf(y))`` at ``θ̃ = theta``, factored.

    Algorithm 1 (Jebara & Choromanska 2012) on the log scale::

        z → 0⁺, r = 0, S = 0
        for y in Ω:  α = h(y) exp(θ̃ᵀ f(y));  l = f(y) − r
                     S += tanh(½ log(α/z)) / (2 log(α/z)) · l lᵀ
                     r += α / (z + α) · l;   z += α

    Parameters
    ----------
    F : (n, d) float64, rows ``f(y)`` for the n elements y of Ω.
    log_h : (n,) float64, ``log h(y)`` (``-inf`` allowed for h = 0).
    theta : (d,) float64, the anchor θ̃.

    Returns
    -------
    log_z : float, ``log z = log Z(θ̃)``.
    r : (d,) float64, ``E_{p_θ̃}[f]`` (the gradient of log Z at θ̃).
    L : (n, d) float64, the vectors ``l_y`` (Lemma 4: ``S = Lᵀ diag(D) L``).
    D : (n,) float64, the weights ``tanh(½ log(α/z)) / (2 log(α/z))``.
    """
    n, d = F.shape
    log_z = -np.inf
    r = np.zeros(d)
    L = np.empty((n, d))
    D = np.empty(n)
    for y in range(n):
        log_a = log_h[y]
        for i in range(d):
            log_a += F[y, i] * theta[i]
        for i in range(d):
            L[y, i] = F[y, i] - r[i]
        if log_a == -np.inf:  # h(y) = 0 adds nothing
            D[y] = 0.0
            continue
        if log_z == -np.inf:
            t = np.inf
        else:
            t = log_a - log_z
        D[y] = curvature_weight(t)
        p = sigmoid(t)  # α / (z + α)
        for i in range(d):
            r[i] += p * L[y, i]
        if log_z == -np.inf:
            log_z = log_a
        else:
            m = max(log_z, log_a)
            log_z = m + math.log(math.exp(log_z - m) + math.exp(log_a - m))
    return log_z, r, L, D


@njit(cache=True, nogil=True)
def bound_stats(F, log_h, theta):
    """``(log z, r, S)`` of the bound (eq. 3), ``S = Lᵀ diag(D) L`` formed (small d only)."""
    log_z, r, L, D = bound_factors(F, log_h, theta)
    n, d = L.shape
    S = np.zeros((d, d))
    for y in range(n):
        w = D[y]
        if w == 0.0:
            continue
        for a in range(d):
            la = w * L[y, a]
            for b in range(d):
                S[a, b] += la * L[y, b]
    return log_z, r, S


# --------------------------------------------------------------------------------------------
# 2. Binary logistic regression: the batch statistics μ_T and Σ_S
# --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def batch_mu(indptr, indices, data, y, theta, batch, out):
    """``out = μ_T = (1/|T|) Σ_{j∈T} (r_j − f_{x_j}(y_j)) = (1/|T|) Σ (σ(θᵀx_j) − y_j) x_j``.

    The gradient part of Algorithm 1 for Ω = {0, 1} (``r_j = σ(u_j) x_j``, ``f(y_j) = y_j x_j``);
    an unbiased estimate of the data term of ∇L_η (Lemma 1). O(nnz(X_T) + d).
    """
    out[:] = 0.0
    m = batch.shape[0]
    for b in range(m):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        u = sparse_row_dot(idx, val, theta)
        sparse_row_axpy((sigmoid(u) - y[j]) / m, idx, val, out)


@njit(cache=True, nogil=True)
def batch_curvature(indptr, indices, data, theta, batch, w):
    """``w_j = c(θᵀx_j) / |S|`` so that ``Σ_S = Σ_j w_j x_j x_jᵀ`` (Algorithm 1, Ω = {0, 1}).

    ``c(u) = tanh(u/2) / (2u)`` (:func:`curvature_weight` with ``t = log(α₁/α₀) = u``).
    Σ_S is never formed: ``S̃ = [√w_j x_j]`` is its factor (Section 4.1). O(nnz(X_S)).
    """
    m = batch.shape[0]
    for b in range(m):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        w[b] = curvature_weight(sparse_row_dot(idx, val, theta)) / m


@njit(cache=True, nogil=True)
def softmax_bound_row(scores, M):
    """Algorithm 1 for one row of multinomial logistic regression: Ω = {0..K−1},
    ``f_x(y) = e_y ⊗ x``, ``h = 1``. Fills the K × K matrix ``M`` and returns ``p``.

    With ``α_y = e^{s_y}`` (``s = Wx``) the loop keeps ``r = p̂ ⊗ x``, so every
    ``l_y = (e_y − p̂) ⊗ x`` and ``S = M ⊗ xxᵀ`` with ``M = Σ_y D_y a_y a_yᵀ``,
    ``a_y = e_y − p̂`` (p̂ before the update). At the end ``p̂ = softmax(s)``: ``r = E_p[f]``.
    O(K²) per row, on the log scale.
    """
    K = scores.shape[0]
    p = np.zeros(K)
    a = np.empty(K)
    M[:, :] = 0.0
    log_z = -np.inf
    for y in range(K):
        for k in range(K):
            a[k] = -p[k]
        a[y] += 1.0
        if log_z == -np.inf:
            t = np.inf
        else:
            t = scores[y] - log_z
        w = curvature_weight(t)
        if w != 0.0:
            for k in range(K):
                for kk in range(K):
                    M[k, kk] += w * a[k] * a[kk]
        q = sigmoid(t)
        for k in range(K):
            p[k] += q * a[k]
        if log_z == -np.inf:
            log_z = scores[y]
        else:
            m = max(log_z, scores[y])
            log_z = m + math.log(math.exp(log_z - m) + math.exp(scores[y] - m))
    return p


@njit(cache=True, nogil=True)
def _row_scores(idx, val, theta, K, s):
    D = theta.shape[0] // K
    for k in range(K):
        s[k] = sparse_row_dot(idx, val, theta[k * D:(k + 1) * D])


@njit(cache=True, nogil=True)
def batch_mu_multinomial(indptr, indices, data, y, theta, K, batch, out):
    """Multinomial ``μ_T = (1/|T|) Σ_j (softmax(W x_j) − e_{y_j}) ⊗ x_j`` (W = θ as K × D,
    row-major). O(K·nnz(X_T) + K·D)."""
    out[:] = 0.0
    D = theta.shape[0] // K
    m = batch.shape[0]
    s = np.empty(K)
    for b in range(m):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        _row_scores(idx, val, theta, K, s)
        mx = s.max()
        z = 0.0
        for k in range(K):
            s[k] = math.exp(s[k] - mx)
            z += s[k]
        for k in range(K):
            g = s[k] / z - (1.0 if k == y[j] else 0.0)
            sparse_row_axpy(g / m, idx, val, out[k * D:(k + 1) * D])


@njit(cache=True, nogil=True)
def batch_curvature_multinomial(indptr, indices, data, theta, K, batch, M):
    """``M_b = M(W x_b) / |S|`` (:func:`softmax_bound_row`), so that
    ``Σ_S = Σ_b M_b ⊗ x_b x_bᵀ``. O(K·nnz(X_S) + K²|S|)."""
    m = batch.shape[0]
    s = np.empty(K)
    for b in range(m):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        _row_scores(idx, val, theta, K, s)
        softmax_bound_row(s, M[b])
        for k in range(K):
            for kk in range(K):
                M[b, k, kk] /= m


@njit(cache=True, nogil=True)
def sigma_matvec(indptr, indices, data, batch, M, eta, v, out):
    """``out = (Σ_S + ηI) v`` with ``Σ_S = Σ_{b} M_b ⊗ x_{j_b} x_{j_b}ᵀ``, never formed (Sec. 4.1).

    ``v`` and ``out`` are K·D vectors (a K × D matrix V, row-major) and ``M`` is (|S|, K, K):
    ``out = Σ_b M_b (V x_b) x_bᵀ + ηV`` in O(K·nnz(X_S) + K²|S| + K·D). Binary logistic
    regression is K = 1 with ``M_b = c(θᵀx_b)/|S|`` (so ``Σ_S = S̃S̃ᵀ``, ``S̃ = [√M_b x_b]``);
    the multinomial model has ``M_b`` from :func:`softmax_bound_row`.
    """
    K = M.shape[1]
    D = v.shape[0] // K
    for i in range(v.shape[0]):
        out[i] = eta * v[i]
    s = np.empty(K)
    for b in range(batch.shape[0]):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        for k in range(K):
            s[k] = sparse_row_dot(idx, val, v[k * D:(k + 1) * D])
        for k in range(K):
            t = 0.0
            for kk in range(K):
                t += M[b, k, kk] * s[kk]
            if t != 0.0:
                sparse_row_axpy(t, idx, val, out[k * D:(k + 1) * D])


@njit(cache=True, nogil=True)
def cg_sigma(indptr, indices, data, batch, M, eta, rhs, n_iter, x):
    """``n_iter`` conjugate-gradient iterations on ``(Σ_S + ηI) x = rhs`` from ``x = 0``."""
    d = rhs.shape[0]
    x[:] = 0.0
    r = rhs.copy()
    p = rhs.copy()
    ap = np.empty(d)
    rs = np.dot(r, r)
    for _ in range(n_iter):
        if rs <= 1e-300:
            break
        sigma_matvec(indptr, indices, data, batch, M, eta, p, ap)
        pap = np.dot(p, ap)
        if pap <= 0.0:
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
def lsqr_sigma(indptr, indices, data, batch, M, eta, rhs, n_iter, x):
    """``n_iter`` LSQR iterations (Paige & Saunders 1982) on ``(Σ_S + ηI) x = rhs`` from 0.

    The operator is symmetric, so ``Aᵀu = Au``; this matches
    ``scipy.sparse.linalg.lsqr(A, rhs, iter_lim=n_iter, atol=0, btol=0)`` (tested).
    """
    d = rhs.shape[0]
    x[:] = 0.0
    u = rhs.copy()
    beta = math.sqrt(np.dot(u, u))
    if beta == 0.0:
        return
    u /= beta
    v = np.empty(d)
    sigma_matvec(indptr, indices, data, batch, M, eta, u, v)
    alpha = math.sqrt(np.dot(v, v))
    if alpha == 0.0:
        return
    v /= alpha
    wv = v.copy()
    phibar = beta
    rhobar = alpha
    tmp = np.empty(d)
    for _ in range(n_iter):
        sigma_matvec(indptr, indices, data, batch, M, eta, v, tmp)
        for i in range(d):
            u[i] = tmp[i] - alpha * u[i]
        beta = math.sqrt(np.dot(u, u))
        if beta > 0.0:
            u /= beta
            sigma_matvec(indptr, indices, data, batch, M, eta, u, tmp)
            for i in range(d):
                v[i] = tmp[i] - beta * v[i]
            alpha = math.sqrt(np.dot(v, v))
            if alpha > 0.0:
                v /= alpha
        rho = math.sqrt(rhobar * rhobar + beta * beta)
        c = rhobar / rho
        s = beta / rho
        theta_ = s * alpha
        rhobar = -c * alpha
        phi = c * phibar
        phibar = s * phibar
        for i in range(d):
            x[i] += (phi / rho) * wv[i]
            wv[i] = v[i] - (theta_ / rho) * wv[i]
        if beta == 0.0 or alpha == 0.0:
            break


# --------------------------------------------------------------------------------------------
# 3. The SQB iteration (eq. 5 with the batches of Section 4.2)
# --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def sqb_iterations(indptr, indices, data, y, theta, eta, step, n_inner, use_lsqr,
                   b_mu, b_sigma, stream_mu, stream_sigma, n_classes=1):
    """Run ``len(b_mu)`` SQB iterations ``θ ← θ − α (Σ_S + ηI)⁻¹ (μ_T + ηθ)`` in place.

    Iteration k uses a gradient batch T of ``b_mu[k]`` rows (all rows when ``b_mu[k] ≥ N``,
    otherwise the next ``b_mu[k]`` entries of ``stream_mu``) and an independent curvature batch
    S of ``b_sigma[k]`` rows from ``stream_sigma`` (Theorem 1 needs T and S independent).
    The system is solved by ``n_inner`` LSQR (``use_lsqr``) or CG iterations. ``n_classes=1``
    is binary logistic regression (θ of length D); ``n_classes=K ≥ 2`` the multinomial model
    (θ = W, K × D row-major). Cost per iteration O(K·nnz(X_T) + n_inner·(K·nnz(X_S) + K²|S|)
    + K·D): Σ is never formed.
    """
    n = indptr.shape[0] - 1
    K = n_classes
    d = theta.shape[0]
    full = np.arange(n)
    mu = np.empty(d)
    rhs = np.empty(d)
    xi = np.empty(d)
    M = np.zeros((min(n, b_sigma.max()) if b_sigma.shape[0] else 0, K, K))
    pt = 0
    ps = 0
    for k in range(b_mu.shape[0]):
        bt = b_mu[k]
        if bt >= n:
            tb = full
        else:
            tb = stream_mu[pt:pt + bt]
            pt += bt
        bs = b_sigma[k]
        if bs >= n:
            sb = full
        else:
            sb = stream_sigma[ps:ps + bs]
            ps += bs
        Ms = M[:sb.shape[0]]
        if K == 1:
            batch_mu(indptr, indices, data, y, theta, tb, mu)
            batch_curvature(indptr, indices, data, theta, sb, Ms[:, 0, 0])
        else:
            batch_mu_multinomial(indptr, indices, data, y, theta, K, tb, mu)
            batch_curvature_multinomial(indptr, indices, data, theta, K, sb, Ms)
        for i in range(d):
            rhs[i] = mu[i] + eta * theta[i]
        if use_lsqr:
            lsqr_sigma(indptr, indices, data, sb, Ms, eta, rhs, n_inner, xi)
        else:
            cg_sigma(indptr, indices, data, sb, Ms, eta, rhs, n_inner, xi)
        for i in range(d):
            theta[i] -= step * xi[i]


def batch_schedule(k, b1, cap, gamma):
    """Batch size of iteration ``k`` (1-based): ``min(cap, b1 + round((k − 1)γ))`` (Sec. 4.2).

    Rounds half up (not NumPy's half-to-even). ``k`` may be an array.
    """
    k = np.asarray(k, dtype=np.float64)
    return np.minimum(cap, b1 + np.floor((k - 1.0) * gamma + 0.5)).astype(np.int64)


# --------------------------------------------------------------------------------------------
# 4. Baselines (Section 4.4), one pass over a pre-drawn order of rows
# --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _logloss(u, y):
    """``log(1 + e^u) − y u`` without overflow."""
    if u > 0.0:
        return u + math.log1p(math.exp(-u)) - y * u
    return math.log1p(math.exp(u)) - y * u


@njit(cache=True, nogil=True)
def _sgd_step(indptr, indices, data, y, theta, i, shrink, step):
    """One SGD step on row ``i``: ``θ ← (1 − aη) θ − a (σ(θᵀx_i) − y_i) x_i``."""
    idx = indices[indptr[i]:indptr[i + 1]]
    val = data[indptr[i]:indptr[i + 1]]
    g = sigmoid(sparse_row_dot(idx, val, theta)) - y[i]
    theta *= shrink
    sparse_row_axpy(-step * g, idx, val, theta)


@njit(cache=True, nogil=True)
def sgd_epoch(indptr, indices, data, y, theta, eta, step, order):
    """SGD with constant step ``a``: :func:`_sgd_step` for each i in ``order``.

    O(nnz(x_i) + d) per step (the ridge shrinkage is applied densely; d ≤ 10³ here).
    """
    shrink = 1.0 - step * eta
    for t in range(order.shape[0]):
        _sgd_step(indptr, indices, data, y, theta, order[t], shrink, step)


@njit(cache=True, nogil=True)
def asgd_epoch(indptr, indices, data, y, theta, avg, count, eta, step, order):
    """Averaged SGD (Polyak–Ruppert): the SGD step of :func:`sgd_epoch`, then
    ``θ̄ ← θ̄ + (θ − θ̄)/(t + 1)``; returns the new step count t. The model is θ̄."""
    shrink = 1.0 - step * eta
    for t in range(order.shape[0]):
        _sgd_step(indptr, indices, data, y, theta, order[t], shrink, step)
        count += 1
        inv = 1.0 / count
        for j in range(theta.shape[0]):
            avg[j] += (theta[j] - avg[j]) * inv
    return count


@njit(cache=True, nogil=True)
def sag_epoch(indptr, indices, data, y, sqnorm, theta, grad_mem, seen, dsum, n_seen,
              eta, step, lipschitz, line_search, order):
    """Stochastic average gradient (Schmidt, Le Roux & Bach), one pass over ``order``.

    Keeps the last scalar gradient ``g_i = σ(θᵀx_i) − y_i`` of every row and their sum
    ``dsum = Σ_i g_i x_i`` over the ``n_seen`` rows visited so far; the step is
    ``θ ← (1 − aη) θ − (a / n_seen) dsum``. With ``line_search`` (SAGls) the step is
    ``a = 1/(L + η)`` where L doubles until ``f_i(θ − g_i x_i / L) ≤ f_i(θ) − ‖g_i x_i‖²/(2L)``
    and decays by ``2^{-1/N}`` after each step; otherwise ``a = step``. Returns
    ``(n_seen, L)``.
    """
    n = grad_mem.shape[0]
    decay = 2.0 ** (-1.0 / n)
    for t in range(order.shape[0]):
        i = order[t]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        u = sparse_row_dot(idx, val, theta)
        g = sigmoid(u) - y[i]
        sparse_row_axpy(g - grad_mem[i], idx, val, dsum)
        grad_mem[i] = g
        if not seen[i]:
            seen[i] = True
            n_seen += 1
        if line_search:
            gg = g * g * sqnorm[i]
            if gg > 1e-16:
                f0 = _logloss(u, y[i])
                while _logloss(u - g * sqnorm[i] / lipschitz, y[i]) > f0 - gg / (2.0 * lipschitz):
                    lipschitz *= 2.0
            a = 1.0 / (lipschitz + eta)
        else:
            a = step
        theta *= 1.0 - a * eta
        c = a / n_seen
        for j in range(theta.shape[0]):
            theta[j] -= c * dsum[j]
        if line_search:
            lipschitz *= decay
    return n_seen, lipschitz


# --------------------------------------------------------------------------------------------
# 5. The objective, its optimum, and the estimators
# --------------------------------------------------------------------------------------------
def logistic_objective(theta, X, y01, eta, with_grad=True):
    """``L_η(θ) = mean(log(1 + e^{u}) − y u) + (η/2)‖θ‖²``, ``u = Xθ`` (eq. 4); and its gradient."""
    u = np.asarray(X @ theta).ravel()
    f = float(np.mean(np.logaddexp(0.0, u) - y01 * u) + 0.5 * eta * theta @ theta)
    if not with_grad:
        return f
    p = 0.5 * (1.0 + np.tanh(0.5 * u))  # σ(u) without overflow
    g = np.asarray(X.T @ (p - y01)).ravel() / X.shape[0] + eta * theta
    return f, g


def logistic_optimum(X, y01, eta, gtol=1e-10, max_iter=5000):
    """θ* and L_η(θ*) by L-BFGS to a gradient norm ``gtol`` (the excess-cost reference)."""
    X = as_csr(X)
    y01 = np.asarray(y01, dtype=np.float64)
    res = scipy.optimize.minimize(
        logistic_objective, np.zeros(X.shape[1]), args=(X, y01, eta), jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "maxfun": 2 * max_iter, "gtol": gtol, "ftol": 0.0,
                 "maxcor": 20},
    )
    return res.x, float(res.fun)


class _RidgeLogistic(IterativeSoftmaxEstimator):
    """Shared parts of this chapter's estimators: the ridge η (None: 1/T), a history of the
    *cost* ``L_η`` (the paper's "training cost"/"testing cost": log-loss + (η/2)‖coef‖²) and of
    the effective passes (``history_["passes"]``)."""

    def _resolve_eta(self, n):
        eta = 1.0 / n if self.eta is None else float(self.eta)
        if not eta >= 0.0:
            raise ValueError(f"eta must be >= 0 (or None for 1/T), got {self.eta!r}")
        return eta

    def _validate_fit(self, X, y):
        X, y_enc = super()._validate_fit(X, y)
        self._eta = self._resolve_eta(X.shape[0])
        self._passes = []
        return X, y_enc

    def _history_metrics(self, coef, intercept, X, y):
        loss, err = softmax_loss_and_error(coef, X, y, intercept)
        return loss + 0.5 * self._eta * float(np.sum(coef * coef)), err

    def fit(self, X, y, eval_set=None):
        """Fit on ``(X, y)``; each epoch is one effective pass."""
        super().fit(X, y, eval_set=eval_set)
        self.history_["passes"] = [float(p) for p in self._passes[: self.n_epochs_]]
        self.eta_ = self._eta
        return self


class _BinaryLogistic(_RidgeLogistic):
    """Binary logistic estimators: K = 2 rows, ``coef_ = [0, θ]`` (the softmax of ``(0, θᵀx)``
    is the logistic model), so the cost is ``L_η(θ)``."""

    def _validate_fit(self, X, y):
        from sklearn.utils.multiclass import type_of_target

        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type not in ("binary", "unknown") and np.unique(np.asarray(y)).shape[0] > 2:
            raise ValueError(
                f"Only binary classification is supported ({type(self).__name__} is binary "
                f"logistic regression). The type of the target is {y_type}."
            )
        return super()._validate_fit(X, y)

    def _coef(self, state):
        theta = state["theta_out"] if "theta_out" in state else state["theta"]
        return np.vstack([np.zeros_like(theta), theta]), None

    @property
    def theta_(self):
        """θ, the weight vector of the logistic model (``coef_[1]``)."""
        check_is_fitted(self, "coef_")
        return self.coef_[1]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    @staticmethod
    def _arrays(X, y):
        return X.indptr, X.indices, X.data, y.astype(np.float64)


class SQB(_BinaryLogistic):
    """Semistochastic quadratic bound method for ℓ2-regularised logistic regression.

    ``θ ← θ − α (Σ_S + ηI)⁻¹ (μ_T + ηθ)`` (eq. 5) with independent gradient and curvature
    batches growing as ``min(cap, b¹ + round((k−1)γ))`` (Section 4.2), solved by a few LSQR or
    CG iterations on the factored Σ_S (Section 4.1).

    Parameters
    ----------
    learning_rate : float, the constant step α (the paper: 1, or 0.1 when badly conditioned).
    eta : float or None, ridge η (None: 1/T as in Section 5).
    n_inner : int, LSQR/CG iterations l per step (the paper picks from {5, 10, 20}).
    solver : "lsqr" (the paper's) or "cg".
    gamma_mu, gamma_sigma : growth rates γ_μ, γ_Σ of the two batches.
    b1_mu, b1_sigma : initial batch sizes (5 in the paper).
    cap_mu, cap_sigma : caps (None: all data for μ; 200 for Σ).
    n_epochs : int, effective passes to run. random_state, verbose : as usual.
    """

    def __init__(self, learning_rate=1.0, eta=None, n_inner=5, solver="lsqr", gamma_mu=0.05,
                 gamma_sigma=0.001, b1_mu=5, b1_sigma=5, cap_mu=None, cap_sigma=200,
                 n_epochs=10, random_state=None, verbose=False):
        self.learning_rate = learning_rate
        self.eta = eta
        self.n_inner = n_inner
        self.solver = solver
        self.gamma_mu = gamma_mu
        self.gamma_sigma = gamma_sigma
        self.b1_mu = b1_mu
        self.b1_sigma = b1_sigma
        self.cap_mu = cap_mu
        self.cap_sigma = cap_sigma
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose

    def _init_state(self, X, y, rng):
        if self.solver not in ("lsqr", "cg"):
            raise ValueError(f"solver must be 'lsqr' or 'cg', got {self.solver!r}")
        if int(self.n_inner) < 1:
            raise ValueError(f"n_inner must be >= 1, got {self.n_inner}")
        if not float(self.learning_rate) > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        for name in ("b1_mu", "b1_sigma"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        n = X.shape[0]
        self.n_iter_ = 0
        return {"theta": np.zeros(X.shape[1]), "k": 1, "seen": 0, "n": n,
                "arrays": self._arrays(X, y)}

    def _schedule(self, k, n):
        cap_mu = n if self.cap_mu is None else min(n, int(self.cap_mu))
        cap_sigma = n if self.cap_sigma is None else min(n, int(self.cap_sigma))
        b_mu = batch_schedule(k, int(self.b1_mu), cap_mu, float(self.gamma_mu))
        b_sigma = batch_schedule(k, int(self.b1_sigma), cap_sigma, float(self.gamma_sigma))
        return np.minimum(b_mu, n), np.minimum(b_sigma, n)

    def _run_epoch(self, state, X, y, epoch, rng):
        n = state["n"]
        target = (epoch + 1) * n
        # iterations until the samples touched (|T| + |S| each) reach one more pass
        ks = np.arange(state["k"], state["k"] + n + 1)
        b_mu, b_sigma = self._schedule(ks, n)
        cum = state["seen"] + np.cumsum(b_mu + b_sigma)
        m = int(np.searchsorted(cum, target)) + 1  # first iteration reaching the target
        b_mu, b_sigma = b_mu[:m], b_sigma[:m]
        stream_mu = _permutation_stream(rng, n, int(b_mu[b_mu < n].sum()))
        stream_sigma = _permutation_stream(rng, n, int(b_sigma[b_sigma < n].sum()))
        indptr, indices, data, yf = state["arrays"]
        sqb_iterations(indptr, indices, data, yf, state["theta"], self._eta,
                       float(self.learning_rate), int(self.n_inner), self.solver == "lsqr",
                       b_mu, b_sigma, stream_mu, stream_sigma, state.get("K", 1))
        state["k"] += m
        state["seen"] = int(cum[m - 1])
        self.n_iter_ = state["k"] - 1
        self._passes.append(state["seen"] / n)


def _permutation_stream(rng, n, total):
    """``total`` row indices: consecutive random permutations of ``range(n)`` (each row is
    equally likely in every batch window, as Lemma 1 asks)."""
    if total <= 0:
        return np.empty(0, dtype=np.int64)
    reps = -(-total // n)
    return np.concatenate([rng.permutation(n) for _ in range(reps)])[:total].astype(np.int64)


class LogisticSGD(_BinaryLogistic):
    """SGD with constant step ``learning_rate`` on L_η (the paper's SGD baseline)."""

    def __init__(self, learning_rate=1e-2, eta=None, n_epochs=10, random_state=None,
                 verbose=False):
        self.learning_rate = learning_rate
        self.eta = eta
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose

    def _init_state(self, X, y, rng):
        if not float(self.learning_rate) > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        return {"theta": np.zeros(X.shape[1]), "arrays": self._arrays(X, y), "n": X.shape[0]}

    def _run_epoch(self, state, X, y, epoch, rng):
        order = rng.integers(0, state["n"], size=state["n"])
        sgd_epoch(*state["arrays"], state["theta"], self._eta, float(self.learning_rate), order)
        self._passes.append(epoch + 1.0)


class LogisticASGD(LogisticSGD):
    """Averaged SGD (constant step, Polyak–Ruppert average from the first step); the model
    is the average θ̄ (the paper's ASGD baseline)."""

    def _init_state(self, X, y, rng):
        state = super()._init_state(X, y, rng)
        state["theta_out"] = np.zeros(X.shape[1])
        state["count"] = 0
        return state

    def _run_epoch(self, state, X, y, epoch, rng):
        order = rng.integers(0, state["n"], size=state["n"])
        state["count"] = asgd_epoch(*state["arrays"], state["theta"], state["theta_out"],
                                    state["count"], self._eta, float(self.learning_rate), order)
        self._passes.append(epoch + 1.0)


class LogisticSAG(_BinaryLogistic):
    """Stochastic average gradient on L_η (Schmidt, Le Roux & Bach).

    ``learning_rate=None`` uses ``1/L`` with the global Lipschitz constant
    ``L = max_i ‖x_i‖²/4 + η`` (the paper's SAG); ``line_search=True`` is SAGls (L estimated by
    line search, starting from ``L = 1``).
    """

    def __init__(self, learning_rate=None, line_search=False, eta=None, n_epochs=10,
                 random_state=None, verbose=False):
        self.learning_rate = learning_rate
        self.line_search = line_search
        self.eta = eta
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose

    def _init_state(self, X, y, rng):
        n, d = X.shape
        sqnorm = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        lipschitz = 0.25 * float(sqnorm.max()) + self._eta
        step = 1.0 / lipschitz if self.learning_rate is None else float(self.learning_rate)
        if not step > 0:
            raise ValueError(f"learning_rate must be > 0 or None, got {self.learning_rate}")
        self.lipschitz_ = lipschitz
        return {"theta": np.zeros(d), "arrays": self._arrays(X, y), "n": n, "sqnorm": sqnorm,
                "grad_mem": np.zeros(n), "seen": np.zeros(n, dtype=np.bool_),
                "dsum": np.zeros(d), "n_seen": 0, "step": step, "L": 1.0}

    def _run_epoch(self, state, X, y, epoch, rng):
        order = rng.integers(0, state["n"], size=state["n"])
        indptr, indices, data, yf = state["arrays"]
        state["n_seen"], state["L"] = sag_epoch(
            indptr, indices, data, yf, state["sqnorm"], state["theta"], state["grad_mem"],
            state["seen"], state["dsum"], state["n_seen"], self._eta, state["step"],
            state["L"], bool(self.line_search), order)
        self._passes.append(epoch + 1.0)


class LogisticLBFGS(_BinaryLogistic):
    """L-BFGS (``scipy.optimize``, line search) on L_η; one epoch = one function + gradient
    evaluation (one pass). The model after epoch e is the best point evaluated so far.

    scipy runs the whole minimisation (``n_epochs`` evaluations) inside the first epoch, so
    ``history_["time"]`` is the total time from epoch 1 on; time a run with fewer
    ``n_epochs`` to know the time to a given pass.
    """

    def __init__(self, eta=None, memory=10, n_epochs=10, random_state=None, verbose=False):
        self.eta = eta
        self.memory = memory
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose

    def _init_state(self, X, y, rng):
        return {"theta": np.zeros(X.shape[1]), "points": None, "X": X, "y": y}

    def _run_epoch(self, state, X, y, epoch, rng):
        if state["points"] is None:  # one L-BFGS run, recording every evaluation
            points = []
            yf = y.astype(np.float64)

            def fun(theta):
                f, g = logistic_objective(theta, X, yf, self._eta)
                points.append((f, theta.copy()))
                return f, g

            scipy.optimize.minimize(
                fun, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B",
                options={"maxfun": int(self.n_epochs), "maxiter": int(self.n_epochs),
                         "maxcor": int(self.memory), "gtol": 0.0, "ftol": 0.0})
            state["points"] = points
        pts = state["points"][: epoch + 1]
        state["theta"] = min(pts, key=lambda p: p[0])[1].copy()
        self._passes.append(epoch + 1.0)


class MultinomialSQB(SQB):
    """SQB for ℓ2-regularised multinomial logistic regression (beyond the paper).

    ``f_x(y) = e_y ⊗ x`` and θ = W (K × D): the bound of each row is ``M ⊗ xxᵀ`` with the
    K × K matrix of :func:`softmax_bound_row`, and ``Σ_S`` acts as a sum of Kronecker products
    (:func:`sigma_matvec`), never formed. Same parameters as :class:`SQB`; ``coef_`` is W (all
    K rows free), the cost is ``mean log-loss + (η/2)‖W‖²`` — the optimum of
    :class:`~xclib.exact.SoftmaxRegression` with ``mu = η·T`` (a sum objective).
    """

    def _validate_fit(self, X, y):
        return _RidgeLogistic._validate_fit(self, X, y)

    def _init_state(self, X, y, rng):
        state = super()._init_state(X, y, rng)
        K = self.classes_.shape[0]
        state["K"] = K
        state["theta"] = np.zeros(K * X.shape[1])
        return state

    def _coef(self, state):
        return state["theta"].reshape(state["K"], -1).copy(), None

    def __sklearn_tags__(self):
        tags = IterativeSoftmaxEstimator.__sklearn_tags__(self)
        return tags
