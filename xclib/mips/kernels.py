"""Numba kernels of the MIPS oracles (exact scan, SimpleLSH hashing and ranking)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit


# ------------------------------------------------------------------ kernels -----------------
@njit(cache=True, nogil=True)
def _check_kernel_args(indptr, indices, exclude, K, D):
    """O(nnz + n) bounds check shared by the query kernels (they index V without checks)."""
    n = indptr.shape[0] - 1
    if exclude.shape[0] != n:
        raise ValueError("exclude must have one entry per query row")
    if indptr[0] != 0 or indptr[n] > indices.shape[0]:
        raise ValueError("indptr is inconsistent with indices")
    for i in range(n):
        if indptr[i + 1] < indptr[i] or exclude[i] < 0 or exclude[i] >= K:
            raise ValueError("indptr must not decrease and exclude must lie in [0, K)")
    for p in range(indptr[n]):
        if indices[p] < 0 or indices[p] >= D:
            raise ValueError("column indices must lie in [0, D)")


@njit(cache=True, nogil=True)
def exact_argmax_other(indptr, indices, data, exclude, V):
    """Exact ``argmax_{r != exclude[i]} x_i · V[r]`` for each CSR row ``x_i``.

    The margin's maximisation of eq. (1) of Belyy, by brute force: ``K · nnz(x_i)``
    multiply-adds per row, no N × K matrix is formed. Ties go to the smallest index. Fast when
    ``V`` is column-major (``V = VT.T`` for a C-ordered D × K ``VT``, as
    :class:`~xclib.memoir.Memoir` stores it): the inner loop then runs over K contiguous numbers.

    Raises ``ValueError`` (before any arithmetic) when ``exclude`` does not have one entry per
    row or a column index or an ``exclude`` entry is out of range: a last line of defence, the
    oracles validate with clearer messages first.

    Returns
    -------
    r : (n,) int64, s : (n,) float64 (the maximal score)
    """
    n = indptr.shape[0] - 1
    K, D = V.shape
    _check_kernel_args(indptr, indices, exclude, K, D)
    r = np.empty(n, np.int64)
    s = np.empty(n, np.float64)
    scores = np.empty(K)
    for i in range(n):
        scores[:] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for k in range(K):          # contiguous when V is column-major (a view of D × K)
                scores[k] += v * V[k, j]
        best = -np.inf
        arg = -1
        for k in range(K):
            if k != exclude[i] and scores[k] > best:
                best = scores[k]
                arg = k
        r[i] = arg
        s[i] = best
    return r, s


def simple_lsh_transform(W, x=None):
    """The SimpleLSH reduction of MIPS to cosine similarity (Neyshabur & Srebro 2015, §4).

    ``P(w) = [w / M, sqrt(1 − ‖w‖²/M²)]`` with ``M = max_r ‖w_r‖`` and ``Q(x) = [x/‖x‖, 0]``,
    so ``Q(x)·P(w) = x·w / (M‖x‖)`` and every ``P(w)`` has unit norm: the inner product becomes a
    monotone function of the angle. Dense NumPy; used by the tests and the notebook.
    """
    W = np.asarray(W, dtype=np.float64)
    sq = np.einsum("ij,ij->i", W, W)
    M = math.sqrt(sq.max()) if sq.size and sq.max() > 0 else 1.0
    P = np.hstack([W / M, np.sqrt(np.maximum(0.0, 1.0 - sq / M**2))[:, None]])
    if x is None:
        return P
    x = np.asarray(x, dtype=np.float64)
    nx = np.linalg.norm(x, axis=-1, keepdims=True)
    Q = np.concatenate([x / np.where(nx > 0, nx, 1.0), np.zeros(x.shape[:-1] + (1,))], axis=-1)
    return P, Q


@njit(cache=True, nogil=True)
def _popcount64(v):
    v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
    v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
    v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (v * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True, nogil=True)
def _pack_signs(Z, codes):
    """``codes[r]`` = the bits ``Z[r, b] > 0`` packed into uint64 words."""
    K, B = Z.shape
    for r in range(K):
        for w in range(codes.shape[1]):
            codes[r, w] = np.uint64(0)
        for b in range(B):
            if Z[r, b] > 0.0:
                codes[r, b >> 6] |= np.uint64(1) << np.uint64(b & 63)


@njit(cache=True, nogil=True)
def _lsh_codes(P, row_sq, M, a_pad, codes):
    """Hash codes of the transformed rows: ``sign(P[r]/M + a_pad·sqrt(1 − ‖w_r‖²/M²))``.

    ``P = V @ A`` (K × bits) are the projections of the raw rows, so re-coding all K rows after
    the largest norm ``M`` changed costs O(K · bits), not O(K · D · bits).
    """
    K, B = P.shape
    for r in range(K):
        for w in range(codes.shape[1]):
            codes[r, w] = np.uint64(0)
        if M > 0.0:
            pad = math.sqrt(max(0.0, 1.0 - row_sq[r] / (M * M)))
            inv = 1.0 / M
        else:
            pad = 1.0
            inv = 0.0
        for b in range(B):
            if P[r, b] * inv + a_pad[b] * pad > 0.0:
                codes[r, b >> 6] |= np.uint64(1) << np.uint64(b & 63)


@njit(cache=True, nogil=True)
def _project_queries(indptr, indices, data, A):
    """``A^T x`` for each CSR row: O(nnz(x) · bits). The query's padding coordinate is 0."""
    n = indptr.shape[0] - 1
    B = A.shape[1]
    _check_kernel_args(indptr, indices, np.zeros(n, np.int64), 1, A.shape[0])
    out = np.zeros((n, B))
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for b in range(B):
                out[i, b] += v * A[j, b]
    return out


@njit(cache=True, nogil=True)
def _hamming_cut(codes, q, is_top, skip, n_cand, dist, hist):
    """Hamming distances from the query code ``q`` to every row's code (into ``dist``), and
    the cut ``(h, take_at_h)`` that keeps the ``n_cand`` nearest rows other than ``skip`` and
    the top rows: every row at distance < h and the first ``take_at_h`` (by index) at h.

    K popcounts per query (a counting sort by distance, no O(K log K) sort)."""
    K, n_words = codes.shape
    n_bits = n_words * 64
    hist[:] = 0
    for k in range(K):
        d = 0
        for w in range(n_words):
            d += _popcount64(codes[k, w] ^ q[w])
        dist[k] = d
        if k != skip and not is_top[k]:
            hist[d] += 1
    # smallest threshold h with at least n_cand rows at distance <= h
    total = 0
    h = 0
    while h <= n_bits:
        total += hist[h]
        if total >= n_cand:
            break
        h += 1
    take_at_h = n_cand - (total - hist[h]) if h <= n_bits else 0
    return h, take_at_h


@njit(cache=True, nogil=True)
def _lsh_query(indptr, indices, data, exclude, qcodes, codes, n_cand, V, zero_rows, top_rows):
    """Hamming ranking + exact re-scoring of the ``n_cand`` nearest codes (``r != exclude``).

    Per query: K popcounts (a counting sort by Hamming distance, no O(K log K) sort), then
    ``n_cand · nnz(x)`` multiply-adds for the exact scores of the candidates. ``zero_rows``
    (up to two indices of rows ``w_r = 0``, smallest first) seeds the answer with score 0 and
    no inner product: every zero row scores exactly 0, and all of them share one hash code
    (``P(0) = [0, 1]``), at a distance unrelated to their score. ``top_rows`` (the rows of
    largest norm) are re-scored for every query, outside the Hamming ranking: their codes
    are the only ones the global norm does not squeeze, yet a large row wins on its norm
    even at a wide angle.
    """
    n = indptr.shape[0] - 1
    K, n_words = codes.shape
    is_top = np.zeros(K, np.bool_)
    for t in range(top_rows.shape[0]):
        is_top[top_rows[t]] = True
    _check_kernel_args(indptr, indices, exclude, K, V.shape[1])
    r = np.empty(n, np.int64)
    s = np.empty(n, np.float64)
    dist = np.empty(K, np.int64)
    hist = np.empty(n_words * 64 + 1, np.int64)
    n_ip = 0
    for i in range(n):
        h, take_at_h = _hamming_cut(codes, qcodes[i], is_top, exclude[i], n_cand, dist, hist)
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        best = -np.inf
        arg = -1
        for z in range(zero_rows.shape[0]):
            if zero_rows[z] != exclude[i]:
                best = 0.0
                arg = zero_rows[z]
                break
        for k in range(K):
            if k == exclude[i]:
                continue
            d = dist[k]
            if not is_top[k]:
                if d > h:
                    continue
                if d == h:
                    if take_at_h <= 0:
                        continue
                    take_at_h -= 1
            v = 0.0
            for j in range(idx.shape[0]):
                v += val[j] * V[k, idx[j]]
            n_ip += 1
            if v > best or (v == best and k < arg):
                best = v
                arg = k
        r[i] = arg
        s[i] = best
    return r, s, n_ip


@njit(cache=True, nogil=True)
def _lsh_linear_update(P, rows, coefs, qpos, qproj):
    """``P[rows[k]] += coefs[k] · qproj[qpos[k]]``: the projections follow an additive update of
    ``V`` in O(bits) (``A^T (v + a x) = A^T v + a A^T x`` and ``A^T x`` is known from the query)."""
    for k in range(rows.shape[0]):
        P[rows[k]] += coefs[k] * qproj[qpos[k]]


@njit(cache=True, nogil=True)
def _lsh_recompute_rows(P, rows, V, A):
    """``P[r] = A^T V[r]`` for the given rows, skipping zero weights: O(D + nnz(v_r) · bits)."""
    B = A.shape[1]
    D = V.shape[1]
    for k in range(rows.shape[0]):
        r = rows[k]
        P[r, :] = 0.0
        for j in range(D):
            v = V[r, j]
            if v != 0.0:
                for b in range(B):
                    P[r, b] += v * A[j, b]


@njit(cache=True, nogil=True)
def _lsh_topk(indptr, indices, data, qcodes, codes, n_cand, V, top_rows, k):
    """Top-k by SimpleLSH: Hamming ranking, exact re-scoring of the ``n_cand`` nearest codes
    (and of ``top_rows``), the k best re-scored rows in decreasing score (ties: smaller index).

    ``n_cand >= k`` re-scored rows per query, so k rows are always returned. Returns
    ``(idx (n, k) int64, val (n, k) float64, inner products made)``.
    """
    n = indptr.shape[0] - 1
    K, n_words = codes.shape
    is_top = np.zeros(K, np.bool_)
    for t in range(top_rows.shape[0]):
        is_top[top_rows[t]] = True
    _check_kernel_args(indptr, indices, np.zeros(n, np.int64), K, V.shape[1])
    idx_out = np.empty((n, k), np.int64)
    val_out = np.empty((n, k), np.float64)
    dist = np.empty(K, np.int64)
    hist = np.empty(n_words * 64 + 1, np.int64)
    cand = np.empty(K, np.int64)
    cval = np.empty(K, np.float64)
    n_ip = 0
    for i in range(n):
        h, take_at_h = _hamming_cut(codes, qcodes[i], is_top, -1, n_cand, dist, hist)
        lo, hi = indptr[i], indptr[i + 1]
        m = 0
        for r in range(K):
            if not is_top[r]:
                if dist[r] > h:
                    continue
                if dist[r] == h:
                    if take_at_h <= 0:
                        continue
                    take_at_h -= 1
            v = 0.0
            for p in range(lo, hi):
                v += data[p] * V[r, indices[p]]
            cand[m] = r
            cval[m] = -v
            m += 1
        n_ip += m
        order = np.argsort(cval[:m], kind="mergesort")   # stable: ties keep index order
        for j in range(k):
            idx_out[i, j] = cand[order[j]]
            val_out[i, j] = -cval[order[j]]
    return idx_out, val_out, n_ip


@njit(cache=True, nogil=True)
def rescore_rows(indptr, indices, data, V, idx):
    """``val[i, j] = x_i · V[idx[i, j]]`` for CSR rows ``x_i``: ``nnz(x_i)`` per entry."""
    n, k = idx.shape
    _check_kernel_args(indptr, indices, np.zeros(n, np.int64), V.shape[0], V.shape[1])
    val = np.zeros((n, k))
    for i in range(n):
        for j in range(k):
            r = idx[i, j]
            if r < 0 or r >= V.shape[0]:
                raise ValueError("row index out of range")
            v = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                v += data[p] * V[r, indices[p]]
            val[i, j] = v
    return val
