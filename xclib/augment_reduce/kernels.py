"""One iteration of A&R's stochastic variational EM (Ruiz et al. 2018, Algorithms 1-2).

Kernels that each do one thing: class subsets ``S_n`` (:func:`subsample_classes`), utilities
ψ on ``B × (S + 1)`` entries (:func:`batch_utilities`), the local step
(:func:`softmax_local_step` = Algorithm 1, :func:`noise_local_step` = Algorithm 2 with eq. 9,
:func:`ove_coefficients` for the baseline), and the global step with the adaptive step size of
Section 4 and the ridge (:func:`global_step`), which all four methods share. The estimator runs
them fused, one call per iteration (:func:`ar_iteration`): block by block of rows, the same
kernels on the block's views and then its share of the gradient, so that each row of X is
fetched from memory once per epoch, not once per kernel. Every kernel costs
O(|B| · |S| · nnz(x)) per iteration; none touches all K classes.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import sigmoid, softplus, subsample_classes
from ._prefetch import prefetch
from .bounds import Model, dlog_phi, dlog_Phi, entropy, log_phi, log_Phi, softmax_elbo

__all__ = [
    "subsample_classes",
    "batch_utilities",
    "softmax_local_step",
    "noise_local_step",
    "ove_coefficients",
    "global_step",
    "ar_iteration",
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


_OVE, _SOFTMAX = int(Model.OVE), int(Model.SOFTMAX)  # numba-frozen constants
_CHUNK = 16  # rows whose utilities are computed before their gradient is accumulated


@njit(cache=True, nogil=True)
def _prefetch_row(X, n):
    """Ask for the cache lines of row ``n`` of X (8 values or 16 indices a 64-byte line)."""
    lo, hi = X.indptr[n], X.indptr[n + 1]
    for p in range(lo, hi, 8):
        prefetch(X.data, p)
    for p in range(lo, hi, 16):
        prefetch(X.indices, p)


@njit(cache=True, nogil=True)
def _local_rates(draws, local, buf, cfg, t, r):
    """The local step sizes ``α = min(1, rate0 (1 + c)^−0.9)`` of the minibatch's slots
    ``r`` into ``buf.rate``: ``c = t`` (``global_clock``) or the row's visits, counted here."""
    batch, visits = draws.batch, local.visits
    for i in range(r.start, r.stop):
        c = t
        if not cfg.global_clock:
            visits[batch[i]] += 1
            c = visits[batch[i]]
        buf.rate[i] = min(1.0, cfg.rate0 * (1.0 + c) ** -0.9)


@njit(cache=True, nogil=True)
def _local_block(draws, local, buf, cfg, K, t, r):
    """The local step of slots ``r`` (:func:`softmax_local_step`, :func:`noise_local_step` or
    :func:`ove_coefficients`, called on the block's views): fills ``buf.C[r]``."""
    if cfg.model == _OVE:
        ove_coefficients(buf.psi_y[r], buf.psi_S[r], K, cfg.scale, buf.C[r], buf.elbo[r])
        return
    _local_rates(draws, local, buf, cfg, t, r)
    if cfg.model == _SOFTMAX:
        softmax_local_step(buf.psi_y[r], buf.psi_S[r], local.log_eta, draws.batch[r],
                           buf.rate[r], K, cfg.scale, buf.C[r], buf.elbo[r])
    else:
        noise_local_step(cfg.model, buf.psi_y[r], buf.psi_S[r], local.mu, local.gamma,
                         draws.batch[r], draws.u_local[r], draws.u_global[r], buf.rate[r], K,
                         cfg.scale, buf.C[r], buf.elbo[r])


@njit(cache=True, nogil=True)
def _iteration_by_rows(X, draws, W, b, local, steps, buf, cfg, t, rho):
    """:func:`ar_iteration` row by row: one pass over the minibatch's rows of X, instead of
    one pass per kernel (for weights that stay in cache: MNIST's, the toy's).

    In blocks of ``_CHUNK`` rows: the block's subsets ``S_n`` (:func:`subsample_classes`),
    utilities (:func:`batch_utilities`) and local step (:func:`_local_block`), each kernel
    called on the block's views; then the block's gradient is accumulated as in
    :func:`global_step`, while its rows of X are still in cache (16 MNIST rows fit in L1),
    and the next block's rows are prefetched meanwhile. After the last block, the step of
    :func:`global_step`, once per touched coordinate. The gradient is taken at the W before
    the step, as by the separate kernels: the result is theirs, the same arithmetic in the
    same order. (Blocks rather than rows: a kernel call per row costs more in views than a
    featureless row's work.) Nothing is allocated.
    """
    batch, y, S = draws.batch, draws.y, buf.S
    m = S.shape[1]
    K = W.shape[0]
    B = batch.shape[0]
    nt = 0
    nb = 0
    sweep = _sweeps(X.indptr, batch, m, W.size)
    for i in range(min(B, _CHUNK)):
        _prefetch_row(X, batch[i])
    for i0 in range(0, B, _CHUNK):
        i1 = min(B, i0 + _CHUNK)
        for i in range(i1, min(B, i1 + _CHUNK)):  # the next block, fetched meanwhile
            _prefetch_row(X, batch[i])
        r = slice(i0, i1)
        subsample_classes(draws.u[r], y[r], K, S[r], buf.mark)
        batch_utilities(X, batch[r], y[r], S[r], W, b, buf.psi_y[r], buf.psi_S[r])
        _local_block(draws, local, buf, cfg, K, t, r)
        for i in range(i0, i1):
            nt, nb = _accumulate_row(X, batch[i], i, y[i], W, buf, cfg, nt, nb, sweep)
    _apply_all(W, b, steps, buf, nt, nb, t, rho, sweep)


@njit(cache=True, nogil=True)
def _pairs_by_class(batch_y, S, K, start, pairs):
    """The minibatch's (row, class) pairs grouped by class, rows in order within a class:
    ``pairs[start[k]:start[k+1]]`` holds ``i·(|S|+1) + j`` for the pairs of class k (slot
    ``j < |S|``: ``S[i, j] = k``; ``j = |S|``: the label). A counting sort, O(K + |B|(|S|+1));
    only called when K is at most a few times the number of pairs."""
    B, m = S.shape
    start[:] = 0
    for i in range(B):
        start[batch_y[i] + 1] += 1
        for j in range(m):
            start[S[i, j] + 1] += 1
    for k in range(K):
        start[k + 1] += start[k]
    fill = start[:K].copy()
    for i in range(B):   # rows in order: each class's pairs come out row-ascending
        for j in range(m + 1):
            k = S[i, j] if j < m else batch_y[i]
            pairs[fill[k]] = i * (m + 1) + j
            fill[k] += 1


@njit(cache=True, nogil=True)
def _utilities_by_class(X, batch, W, b, buf, start, pairs):
    """:func:`batch_utilities` class by class over the grouped pairs, ``W[k]`` in cache."""
    m = buf.S.shape[1]
    for k in range(W.shape[0]):
        for q in range(start[k], start[k + 1]):
            i = pairs[q] // (m + 1)
            j = pairs[q] - i * (m + 1)
            n = batch[i]
            v = b[k] + _row_dot(X.indices, X.data, X.indptr[n], X.indptr[n + 1], W, k)
            if j == m:
                buf.psi_y[i] = v
            else:
                buf.psi_S[i, j] = v


@njit(cache=True, nogil=True)
def _iteration_by_class(X, draws, W, b, local, steps, buf, cfg, t, rho):
    """:func:`ar_iteration` class by class, for weights larger than the cache (Bibtex's):
    the utilities and the gradient of one class are computed over all its pairs of the
    minibatch while its rows of W and G stay in cache; the rows of X (the minibatch's, a
    few hundred kB) are read once per pair. Each coordinate of G receives the same terms in
    the same order (rows ascending) as row by row: the results are the same bit for bit."""
    batch, S, C, G, markW, touched = draws.batch, buf.S, buf.C, buf.G, buf.markW, buf.touched
    indices, data, inv_count = X.indices, X.data, cfg.inv_count
    m = S.shape[1]
    K, D = W.shape
    B = batch.shape[0]
    subsample_classes(draws.u, draws.y, K, S, buf.mark)
    start = np.empty(K + 1, np.int64)
    pairs = np.empty(B * (m + 1), np.int64)
    _pairs_by_class(draws.y, S, K, start, pairs)
    _utilities_by_class(X, batch, W, b, buf, start, pairs)
    _local_block(draws, local, buf, cfg, K, t, slice(0, B))
    cy = np.zeros(B)   # the label's coefficient of each row, summed as _accumulate_row does
    for i in range(B):
        for j in range(m):
            cy[i] += C[i, j]
    penalise = cfg.ridge_y > 0.0
    sweep = _sweeps(X.indptr, batch, m, W.size)
    nt = 0
    nb = 0
    for k in range(K):   # the gradient, G[k] in cache
        for q in range(start[k], start[k + 1]):
            i = pairs[q] // (m + 1)
            j = pairs[q] - i * (m + 1)
            n = batch[i]
            if j < m:
                c = -C[i, j]
                r = cfg.ridge_S
            else:
                c = cy[i]
                r = cfg.ridge_y
            # _accumulate_row's loop, written out: as a shared helper numba called it,
            # 2.6x slower on the featureless toy, whose pairs are all call and no work
            for p in range(X.indptr[n], X.indptr[n + 1]):
                col = indices[p]
                if not sweep and markW[k, col] == 0:
                    touched[nt] = k * D + col
                    nt += 1
                markW[k, col] = 1
                G[k, col] += c * data[p]
                if penalise:
                    G[k, col] -= r * inv_count[col] * W[k, col]
            if cfg.fit_intercept:
                if buf.markb[k] == 0:
                    buf.markb[k] = 1
                    buf.touched_b[nb] = k
                    nb += 1
                buf.Gb[k] += c
    _apply_all(W, b, steps, buf, nt, nb, t, rho, sweep)


#: weights (K·D float64) above this many bytes take the class-by-class iteration
_BY_CLASS_BYTES = 512 * 1024


@njit(cache=True, nogil=True)
def ar_iteration(X, draws, W, b, local, steps, buf, cfg, t, rho):
    """One whole iteration of A&R (``cfg.model`` a :class:`Model` code; OVE too) in one call.

    The subsets ``S_n`` (:func:`subsample_classes`), the utilities (:func:`batch_utilities`),
    the local step (:func:`softmax_local_step`, :func:`noise_local_step` or
    :func:`ove_coefficients`) and the step of :func:`global_step`, with the gradient taken
    at the W before the step, as by the separate kernels: the result is theirs, the same
    arithmetic in the same order. Two schedules of the same work: row by row
    (:func:`_iteration_by_rows`) when W fits in cache, class by class
    (:func:`_iteration_by_class`) when it does not (more than ``_BY_CLASS_BYTES``) and K is
    at most 4× the minibatch's (row, class) pairs, so that grouping them by class costs
    O(|B|·|S|), never O(K) alone.

    The inputs come in bundles built once per fit (:class:`Scratch`, :class:`StepState`,
    :class:`LocalState`, :class:`Settings`) or per iteration (:class:`Draws`): X the
    training rows (:class:`~xclib._numba.CSR`), ``W``, ``b`` the weights, ``t`` the
    iteration (from 1) and ``rho`` its step-size factor. The local step size is
    ``α = min(1, rate0 (1 + c)^−0.9)`` with ``c = t`` (``global_clock``) or the row's visits
    (``local.visits[n]``, incremented here; OVE has none), written to ``buf.rate``. Arrays a
    model does not use may be empty.

    Cost O(|B| · (|S|+1) · nnz(x)) per iteration, never O(K·D) on its own: the step sweeps
    the K·D marks only when the minibatch has more than K·D/4 (row, class, feature) triples.
    """
    pairs = draws.batch.shape[0] * (buf.S.shape[1] + 1)
    if W.size * 8 > _BY_CLASS_BYTES and W.shape[0] <= 4 * pairs:
        _iteration_by_class(X, draws, W, b, local, steps, buf, cfg, t, rho)
    else:
        _iteration_by_rows(X, draws, W, b, local, steps, buf, cfg, t, rho)
