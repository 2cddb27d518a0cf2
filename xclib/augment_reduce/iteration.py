"""A&R's iteration fused into one kernel call (:func:`ar_iteration`): the kernels of
:mod:`.kernels` run block by block of minibatch rows (or class by class when W outgrows the
cache), so that each row of X is fetched from memory once per iteration, not once per
kernel. The result is the separate kernels', the same arithmetic in the same order."""
from __future__ import annotations

import numpy as np
from numba import njit

from .._numba import subsample_classes
from ._prefetch import prefetch
from .bounds import Model
from .kernels import (
    _accumulate_row, _apply_all, _row_dot, _sweeps, batch_utilities, noise_local_step,
    ove_coefficients, softmax_local_step,
)

__all__ = ["ar_iteration"]


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
