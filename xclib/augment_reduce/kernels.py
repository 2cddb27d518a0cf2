"""One iteration of A&R's stochastic variational EM (Ruiz et al. 2018, Algorithms 1-2).

Kernels that each do one thing: class subsets ``S_n`` (:func:`subsample_classes`), utilities
ψ on ``B × (S + 1)`` entries (:func:`batch_utilities`), the local step
(:func:`softmax_local_step` = Algorithm 1, :func:`noise_local_step` = Algorithm 2 with eq. 9,
:func:`ove_coefficients` for the baseline), and the global step with the adaptive step size of
Section 4 and the ridge (:func:`global_step`), which all four methods share. The estimator runs
them fused, one call per iteration (:func:`ar_iteration`): block by block of rows, the same
kernels on the block's views and then its share of the gradient (:mod:`.iteration`), so that
each row of X is fetched from memory once per epoch, not once per kernel. Every kernel costs
O(|B| · |S| · nnz(x)) per iteration; none touches all K classes.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import sigmoid, softplus, subsample_classes
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
def batch_utilities(X, batch, y, S, W, b, psi_y, psi_S):
    """``ψ_nk = w_kᵀx_n + w_k⁽⁰⁾`` for ``k = y_n`` and ``k ∈ S_n``: O(B · (|S|+1) · nnz).

    (A sparse dot product on the row's index range, not on a row view: slicing a view per
    class costs more than the dot itself when rows are short.)
    """
    indices, data = X.indices, X.data
    for i in range(batch.shape[0]):
        n = batch[i]
        lo, hi = X.indptr[n], X.indptr[n + 1]
        psi_y[i] = b[y[i]] + _row_dot(indices, data, lo, hi, W, y[i])
        for j in range(S.shape[1]):
            k = S[i, j]
            psi_S[i, j] = b[k] + _row_dot(indices, data, lo, hi, W, k)


@njit(cache=True, nogil=True, inline="always")
def _row_dot(indices, data, lo, hi, W, k):
    """``w_kᵀ x`` over the non-zeros ``lo:hi`` of x: four partial sums, so that the gathers
    of W are not one chain of dependent additions."""
    s0 = s1 = s2 = s3 = 0.0
    p = lo
    while p + 3 < hi:
        s0 += data[p] * W[k, indices[p]]
        s1 += data[p + 1] * W[k, indices[p + 1]]
        s2 += data[p + 2] * W[k, indices[p + 2]]
        s3 += data[p + 3] * W[k, indices[p + 3]]
        p += 4
    while p < hi:
        s0 += data[p] * W[k, indices[p]]
        p += 1
    return (s0 + s1) + (s2 + s3)


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
    for i in range(psi_y.shape[0]):
        a_i = local_rate[i]
        log1ma = math.log1p(-a_i) if a_i < 1.0 else -np.inf
        loga = math.log(a_i)
        dmax = -np.inf
        for j in range(m):
            dmax = max(dmax, psi_S[i, j] - psi_y[i])
        tot = 0.0
        for j in range(m):  # one exp per sampled class, kept in C for the gradient
            C[i, j] = math.exp(psi_S[i, j] - psi_y[i] - dmax)
            tot += C[i, j]
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
            C[i, j] *= f


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
def global_step(X, draws, W, b, steps, buf, cfg, t, rho):
    """Global (M) step shared by every method: ``w ← w + ρ_t g`` with Section 4's step size.

    The data gradient is ``Σ_{n∈B} Σ_{k'∈S_n} C[n, k'] (x̃_n e_{y_n} − x̃_n e_{k'})`` with
    ``x̃ = (x, 1)`` (weights and bias; B = ``draws.batch``, S and C from ``buf``). The ridge
    ``−(N·alpha/2)‖W‖²`` (biases unpenalised) enters on the touched coordinates only, by
    inverse touch probability: for each row n of the batch, feature d of x_n and class k of
    ``{y_n} ∪ S_n``, ``g_kd −= r_k w_kd / n_d`` with ``n_d`` the number of training rows
    holding feature d (``cfg.inv_count[d] = 1/n_d``), ``r_k = ridge_y = (N/|B|) N alpha`` for
    the label and ``ridge_S = ridge_y (K−1)/|S|`` for a sampled class. Its expectation over B
    and S_n is ``−N alpha w_kd``: the gradient is unbiased for the ridge-penalised bound at
    cost O(B · |S| · nnz), never O(K D).

    Step size per coordinate: ``s_t = 0.1 g_t² + 0.9 s_{t−1}`` (``s = g²`` at the first
    touch, as in ADVI) and ``ρ_t = rho · t^{−1/2+1e−16} / (1 + √s_t)``; ``rho`` already
    includes the ``decay`` schedule. ``buf.G``/``buf.Gb`` are zero gradient buffers and
    ``buf.markW``/``buf.markb`` zero uint8 marks of the coordinates touched (all left zero
    on exit), ``steps`` the RMS state (−1 = never touched) and the iteration of each
    coordinate's last touch, ``buf.touched`` and ``buf.touched_b`` scratch of size
    ≥ B·(|S|+1)·max nnz and B·(|S|+1). Untouched coordinates have g = 0, so their RMS state
    only decays; it is decayed lazily (``0.9^Δt`` at the next touch), exactly the dense
    recursion. When the iteration's (row, class, feature) triples number more than a
    quarter of the K·D weights (MNIST, Bibtex: :func:`_sweeps`), the coordinates are only
    marked (no touch list, no branch) and the step sweeps the marks in memory order: the
    same updates, fewer cache misses and mispredicted branches, at O(K·D) < 4 · triples.
    """
    nt = 0
    nb = 0
    batch = draws.batch
    sweep = _sweeps(X.indptr, batch, buf.S.shape[1], W.shape[0] * W.shape[1])
    for i in range(batch.shape[0]):
        nt, nb = _accumulate_row(X, batch[i], i, draws.y[i], W, buf, cfg, nt, nb, sweep)
    _apply_all(W, b, steps, buf, nt, nb, t, rho, sweep)


@njit(cache=True, nogil=True)
def _sweeps(indptr, batch, m, KD):
    """Whether the step sweeps all K·D marks: the minibatch's (row, class, feature) triples
    number more than K·D / 4 (so the sweep costs less than 4 × accumulating them)."""
    total = 0
    for i in range(batch.shape[0]):
        total += (m + 1) * (indptr[batch[i] + 1] - indptr[batch[i]])
    return 4 * total > KD


@njit(cache=True, nogil=True, inline="always")
def _accumulate_row(X, n, i, ky, W, buf, cfg, nt, nb, sweep):
    """Add row ``n``'s (slot ``i``, label ``ky``) data and ridge gradient to ``buf.G``/``Gb``
    and mark the coordinates: with ``sweep`` an unconditional store; otherwise those first
    touched are appended to ``buf.touched`` (``nt`` counts them). Biases always go to
    ``buf.touched_b``. Returns the new ``nt``, ``nb``."""
    indices, data = X.indices, X.data
    S, C, G, markW, touched = buf.S, buf.C, buf.G, buf.markW, buf.touched
    inv_count = cfg.inv_count
    D = W.shape[1]
    m = S.shape[1]
    penalise = cfg.ridge_y > 0.0
    lo, hi = X.indptr[n], X.indptr[n + 1]
    cy = 0.0
    for j in range(m + 1):
        if j < m:
            k = S[i, j]
            c = -C[i, j]
            cy += C[i, j]
            r = cfg.ridge_S
        else:
            k = ky
            c = cy
            r = cfg.ridge_y
        if sweep:
            for p in range(lo, hi):
                col = indices[p]
                markW[k, col] = 1
                G[k, col] += c * data[p]
                if penalise:
                    G[k, col] -= r * inv_count[col] * W[k, col]
        else:
            for p in range(lo, hi):  # sparse_row_axpy(c, x_n, G[k]) with lazy touches
                col = indices[p]
                if markW[k, col] == 0:  # first touch in this iteration
                    markW[k, col] = 1
                    touched[nt] = k * D + col
                    nt += 1
                G[k, col] += c * data[p]
                if penalise:
                    G[k, col] -= r * inv_count[col] * W[k, col]
        if cfg.fit_intercept:
            if buf.markb[k] == 0:
                buf.markb[k] = 1
                buf.touched_b[nb] = k
                nb += 1
            buf.Gb[k] += c
    return nt, nb


@njit(cache=True, nogil=True)
def _apply_all(W, b, steps, buf, nt, nb, t, rho, sweep):
    """Step every coordinate marked by :func:`_accumulate_row` (``nt`` weights, ``nb`` biases)
    with its accumulated gradient; leaves ``buf.G``, ``buf.Gb`` and the marks zero."""
    K, D = W.shape
    G, markW, touched = buf.G, buf.markW, buf.touched
    sW, stampW = steps.sW, steps.stampW
    step = rho * t ** (-0.5 + 1e-16)
    if sweep:
        for k in range(K):
            for col in range(D):
                if markW[k, col] != 0:
                    _apply(W, G, sW, stampW, markW, k, col, t, step)
    else:
        for q in range(nt):
            k = touched[q] // D
            _apply(W, G, sW, stampW, markW, k, touched[q] - k * D, t, step)
    for q in range(nb):
        k = buf.touched_b[q]
        g = buf.Gb[k]
        buf.Gb[k] = 0.0
        buf.markb[k] = 0
        b[k] += step * g / (1.0 + _rms_step(steps.sb, steps.stampb, k, 0, g, t))
