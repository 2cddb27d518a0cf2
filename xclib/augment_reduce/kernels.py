"""One iteration of A&R's stochastic variational EM (Ruiz et al. 2018, Algorithms 1-2).

Kernels that each do one thing: class subsets ``S_n`` (:func:`subsample_classes`), utilities
ψ on ``B × (S + 1)`` entries (:func:`batch_utilities`), the local step
(:func:`softmax_local_step` = Algorithm 1, :func:`noise_local_step` = Algorithm 2 with eq. 9,
:func:`ove_coefficients` for the baseline), and the global step with the adaptive step size of
Section 4 and the ridge (:func:`global_step`), which all four methods share. Every kernel costs
O(|B| · |S| · nnz(x)) per iteration; none touches all K classes.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import other_class, sigmoid, softplus
from .bounds import dlog_phi, dlog_Phi, entropy, log_phi, log_Phi, softmax_elbo

__all__ = [
    "subsample_classes",
    "batch_utilities",
    "softmax_local_step",
    "noise_local_step",
    "ove_coefficients",
    "global_step",
]

_DECAY = 0.9 ** np.arange(2048)  # 0.9^Δt of the lazily decayed RMS state (a numba constant)
_NDECAY = 2048


@njit(cache=True, nogil=True)
def subsample_classes(u, y, n_classes, out, mark):
    """Draw ``S_n ⊆ {0..K−1} \\ {y_n}`` of size ``|S|`` without replacement (Floyd's method).

    Parameters
    ----------
    u : (B, |S|) uniforms in [0, 1) drawn by the caller's Generator
    y : (B,) labels of the minibatch
    out : (B, |S|) int64, filled with the subsets
    mark : (K,) bool scratch, all False on entry and on exit

    O(B · |S|): the K-sized ``mark`` array is only touched at the drawn entries.
    """
    B, m = u.shape
    pool = n_classes - 1
    for i in range(B):
        for j in range(m):
            jj = pool - m + j
            r = int(u[i, j] * (jj + 1))
            if r > jj:
                r = jj
            if mark[r]:
                r = jj
            mark[r] = True
            out[i, j] = other_class(r, y[i])
        for j in range(m):
            c = out[i, j]
            mark[c - 1 if c > y[i] else c] = False


@njit(cache=True, nogil=True)
def batch_utilities(indptr, indices, data, batch, y, S, W, b, psi_y, psi_S):
    """``ψ_nk = w_kᵀx_n + w_k⁽⁰⁾`` for ``k = y_n`` and ``k ∈ S_n``: O(B · (|S|+1) · nnz).

    (The sparse dot product of :func:`xclib._numba.sparse_row_dot`, written inline: slicing a
    row view per class costs more than the dot itself when rows are short.)
    """
    for i in range(batch.shape[0]):
        n = batch[i]
        lo, hi = indptr[n], indptr[n + 1]
        k = y[i]
        acc = b[k]
        for p in range(lo, hi):
            acc += data[p] * W[k, indices[p]]
        psi_y[i] = acc
        for j in range(S.shape[1]):
            k = S[i, j]
            acc = b[k]
            for p in range(lo, hi):
                acc += data[p] * W[k, indices[p]]
            psi_S[i, j] = acc


@njit(cache=True, nogil=True)
def softmax_local_step(psi_y, psi_S, log_eta, batch, local_rate, n_classes, scale, C, elbo):
    """Algorithm 1: local (E) step on η_n and the global gradient's coefficients.

    ``η̃_n = 1 + (K−1)/|S| Σ_{k'∈S_n} e^{ψ_nk' − ψ_ny}``, ``η_n ← (1−α_n) η_n + α_n η̃_n``
    (``local_rate`` holds the paper's local step size α_n, one per row of the minibatch;
    computed on the log scale: ``log_eta`` is updated in place). Then ``C[i, j]`` is the
    coefficient of the gradient of the ELBO (8) with respect to ``ψ_{n,S_nj}`` (negated):
    ``(N/|B|) (K−1)/|S| e^{ψ_nk' − ψ_ny} / η_n``; the gradient for ``ψ_ny`` is ``+Σ_j C[i, j]``.
    ``elbo[i]`` is the one-sample estimate of eq. (8) (unbiased: (8) is linear in the sum).
    """
    m = psi_S.shape[1]
    log_ratio = math.log((n_classes - 1) / m)
    d = np.empty(m)
    for i in range(psi_y.shape[0]):
        a_i = local_rate[i]
        log1ma = math.log1p(-a_i) if a_i < 1.0 else -np.inf
        loga = math.log(a_i)
        dmax = -np.inf
        for j in range(m):
            dmax = max(dmax, psi_S[i, j] - psi_y[i])
        tot = 0.0
        for j in range(m):  # one exp per sampled class, reused by the global step
            d[j] = math.exp(psi_S[i, j] - psi_y[i] - dmax)
            tot += d[j]
        a = log_ratio + dmax + math.log(tot)
        log_eta_tilde = max(0.0, a) + math.log1p(math.exp(-abs(a)))  # log(1 + e^a)
        n = batch[i]
        old = log1ma + log_eta[n]
        new = loga + log_eta_tilde
        hi = max(old, new)
        log_eta[n] = hi + math.log(math.exp(old - hi) + math.exp(new - hi))
        le = log_eta[n]
        elbo[i] = softmax_elbo(log_eta_tilde, le)
        f = scale * math.exp(log_ratio + dmax - le)
        for j in range(m):
            C[i, j] = f * d[j]


@njit(cache=True, nogil=True)
def noise_local_step(model, psi_y, psi_S, mu, gamma, batch, u_local, u_global, local_rate,
                     n_classes, scale, C, elbo):
    """Algorithm 2: local step on ``q(ε_n) = N(μ_n, σ_n²)`` or ``Logistic(μ_n, σ_n)``.

    ``σ_n = softplus(γ_n)``, ``ε = μ + σ u`` with ``u ~ q^(rep)`` (``u_local``, ``u_global``
    drawn by the caller; ``local_rate`` the paper's α, one step size per row). The one-sample
    gradient (9) with the reduced log joint
    ``log p̃ = log φ(ε) + (K−1)/|S| Σ_{k'∈S} log Φ(ε + ψ_y − ψ_k')`` is::

        ∂/∂μ = ∂_ε log p̃ ,    ∂/∂γ = (∂_ε log p̃ · u + 1/σ) · sigmoid(γ)

    (the ``1/σ`` is the entropy's gradient, ∇_σ H = 1/σ, which eq. 9 includes). Then the
    global step draws a fresh ``ε_n`` from the updated ``q`` and sets the negated gradient
    coefficients ``C[i, j] = (N/|B|) (K−1)/|S| (φ/Φ)(ε_n + ψ_ny − ψ_nk')``.
    ``elbo[i]`` is the one-sample estimate of eq. (7) at the local draw.
    """
    m = psi_S.shape[1]
    ratio = (n_classes - 1) / m
    for i in range(psi_y.shape[0]):
        n = batch[i]
        sig = softplus(gamma[n])
        e = mu[n] + sig * u_local[i]
        g = dlog_phi(model, e)
        lj = log_phi(model, e)
        for j in range(m):
            z = e + psi_y[i] - psi_S[i, j]
            g += ratio * dlog_Phi(model, z)
            lj += ratio * log_Phi(model, z)
        elbo[i] = lj + entropy(model, sig)
        mu[n] += local_rate[i] * g
        gamma[n] += local_rate[i] * (g * u_local[i] + 1.0 / sig) * sigmoid(gamma[n])
        e2 = mu[n] + softplus(gamma[n]) * u_global[i]
        for j in range(m):
            C[i, j] = scale * ratio * dlog_Phi(model, e2 + psi_y[i] - psi_S[i, j])


@njit(cache=True, nogil=True)
def ove_coefficients(psi_y, psi_S, n_classes, scale, C, elbo):
    """The OVE bound (10) from the same subsets: ``C[i, j] = (N/|B|)(K−1)/|S| σ(ψ_k' − ψ_y)``.

    ``elbo[i] = (K−1)/|S| Σ_{k'∈S} log σ(ψ_y − ψ_k')``, an unbiased estimate of eq. (10).
    """
    m = psi_S.shape[1]
    ratio = (n_classes - 1) / m
    for i in range(psi_y.shape[0]):
        s = 0.0
        for j in range(m):  # log σ(z) and σ(−z) from one exponential, e = e^{−|z|}
            z = psi_y[i] - psi_S[i, j]
            e = math.exp(-abs(z))
            s += min(z, 0.0) - math.log1p(e)
            C[i, j] = scale * ratio * (e / (1.0 + e) if z >= 0.0 else 1.0 / (1.0 + e))
        elbo[i] = ratio * s


@njit(cache=True, nogil=True)
def _rms_step(s, stamp, r, c, g, t):
    """Section 4's RMS state of one coordinate touched at iteration ``t``; returns √s_t.

    Untouched since ``stamp[r, c]``, its state only decayed (g = 0): ``s ← 0.9^Δt s``, done
    here lazily, then ``s ← 0.1 g² + s`` (``s = g²`` at the first touch, −1 = never touched).
    """
    if s[r, c] < 0.0:
        s[r, c] = g * g
    else:
        dt = t - stamp[r, c]
        if s[r, c] > 0.0:
            s[r, c] *= _DECAY[dt] if dt < _NDECAY else 0.9 ** dt
        s[r, c] += 0.1 * g * g
    stamp[r, c] = t
    return math.sqrt(s[r, c])


@njit(cache=True, nogil=True)
def _apply(W, G, sW, stampW, markW, k, col, t, step):
    """Step one touched coordinate with its accumulated gradient; clears G and the mark."""
    g = G[k, col]
    G[k, col] = 0.0
    markW[k, col] = 0
    W[k, col] += step * g / (1.0 + _rms_step(sW, stampW, k, col, g, t))


@njit(cache=True, nogil=True)
def global_step(indptr, indices, data, batch, y, S, C, W, b, G, Gb, sW, sb, stampW, stampb,
                markW, markb, touched, touched_b, t, rho, fit_intercept, inv_count, ridge_y,
                ridge_S):
    """Global (M) step shared by every method: ``w ← w + ρ_t g`` with Section 4's step size.

    The data gradient is ``Σ_{n∈B} Σ_{k'∈S_n} C[n, k'] (x̃_n e_{y_n} − x̃_n e_{k'})`` with
    ``x̃ = (x, 1)`` (weights and bias). The ridge ``−(N·alpha/2)‖W‖²`` (biases unpenalised)
    enters on the touched coordinates only, by inverse touch probability: for each row n of
    the batch, feature d of x_n and class k of ``{y_n} ∪ S_n``, ``g_kd −= r_k w_kd / n_d``
    with ``n_d`` the number of training rows holding feature d (``inv_count[d] = 1/n_d``),
    ``r_k = ridge_y = (N/|B|) N alpha`` for the label and ``ridge_S = ridge_y (K−1)/|S|`` for
    a sampled class. Its expectation over B and S_n is ``−N alpha w_kd``: the gradient is
    unbiased for the ridge-penalised bound at cost O(B · |S| · nnz), never O(K D).

    Step size per coordinate: ``s_t = 0.1 g_t² + 0.9 s_{t−1}`` (``s = g²`` at the first
    touch, as in ADVI) and ``ρ_t = rho · t^{−1/2+1e−16} / (1 + √s_t)``; ``rho`` already
    includes the ``decay`` schedule. ``G``/``Gb`` are zero gradient buffers and
    ``markW``/``markb`` zero uint8 marks of the coordinates touched (all left zero on exit),
    ``sW``/``sb`` the RMS state (−1 = never touched), ``stampW``/``stampb`` the iteration of
    the last touch, ``touched`` and ``touched_b`` scratch of size ≥ B·(|S|+1)·max nnz and
    B·(|S|+1). Untouched coordinates have g = 0, so their RMS state only decays; it is
    decayed lazily (``0.9^Δt`` at the next touch), exactly the dense recursion. When the
    iteration touches more than a quarter of the K·D weights (MNIST, Bibtex), the step sweeps
    the marks in memory order instead of the touch list: the same updates, fewer cache misses.
    """
    K, D = W.shape
    nt = 0
    nb = 0
    m = S.shape[1]
    penalise = ridge_y > 0.0
    for i in range(batch.shape[0]):
        n = batch[i]
        lo, hi = indptr[n], indptr[n + 1]
        cy = 0.0
        for j in range(m + 1):
            if j < m:
                k = S[i, j]
                c = -C[i, j]
                cy += C[i, j]
                r = ridge_S
            else:
                k = y[i]
                c = cy
                r = ridge_y
            for p in range(lo, hi):  # sparse_row_axpy(c, x_n, G[k]) with lazy touches
                col = indices[p]
                if markW[k, col] == 0:  # first touch in this iteration
                    markW[k, col] = 1
                    touched[nt] = k * D + col
                    nt += 1
                G[k, col] += c * data[p]
                if penalise:
                    G[k, col] -= r * inv_count[col] * W[k, col]
            if fit_intercept:
                if markb[k] == 0:
                    markb[k] = 1
                    touched_b[nb] = k
                    nb += 1
                Gb[k] += c
    step = rho * t ** (-0.5 + 1e-16)
    if 4 * nt > K * D:
        for k in range(K):
            for col in range(D):
                if markW[k, col] != 0:
                    _apply(W, G, sW, stampW, markW, k, col, t, step)
    else:
        for q in range(nt):
            k = touched[q] // D
            _apply(W, G, sW, stampW, markW, k, touched[q] - k * D, t, step)
    for q in range(nb):
        k = touched_b[q]
        g = Gb[k]
        Gb[k] = 0.0
        markb[k] = 0
        b[k] += step * g / (1.0 + _rms_step(sb, stampb, k, 0, g, t))
