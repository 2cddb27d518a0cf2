"""Maximum inner product search (MIPS) oracles: the inexact margin of MEMOIR (Belyy, ch. 5).

MEMOIR needs, for a training pair ``(x, y)``, the class ``r = argmax_{r != y} x·w_r`` among the
K rows of the weight matrix (the *margin* of eq. (1) of the paper). An oracle may return a
class whose score is below the maximum: the difference ``ε = max_{r≠y} x·w_r − x·w_r̂ ≥ 0`` is the
margin error that Theorem 1 bounds. Every oracle here has the same small interface::

    oracle.build(V)                            # index the K rows of V (K × D, float64)
    r, s = oracle.query(X, exclude)            # batch of CSR rows; r[i] != exclude[i]
    oracle.update(V, rows, row_sq, linear)     # rows of V that changed since the last query
    oracle.n_inner_products                    # exact x·w evaluations made by query()

``row_sq`` holds the squared row norms of ``V`` (the caller maintains them). ``linear`` is an
optional ``(rows, coefs, qpos)`` triple saying the change was purely additive,
``V[rows[k]] += coefs[k] * X_last[qpos[k]]`` with ``X_last`` the last query batch; an oracle may
use it to update in O(bits) instead of O(D) (SimpleLSH does).

Oracles
-------
:class:`ExactMIPS`  brute force over all K rows in numba: ``K·nnz(x)`` per query.
:class:`SimpleLSH`  Neyshabur & Srebro (2015): rows scaled by the largest norm and padded with
                    ``sqrt(1 − ‖w‖²/M²)``, queries normalised and padded with 0, signed random
                    projections; candidates by Hamming ranking, re-scored exactly.
:class:`HNSWMIPS`   a navigable small-world graph (hnswlib's HNSW, the successor of the
                    SW-graph the paper used through nmslib) in inner-product space.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numba import njit

from ._numba import sparse_row_dot

__all__ = ["ExactMIPS", "SimpleLSH", "HNSWMIPS", "make_oracle", "simple_lsh_transform",
           "exact_argmax_other", "ORACLES"]


# ------------------------------------------------------------------ kernels -----------------
@njit(cache=True, nogil=True)
def exact_argmax_other(indptr, indices, data, exclude, V):
    """Exact ``argmax_{r != exclude[i]} x_i · V[r]`` for each CSR row ``x_i``.

    The margin's maximisation of eq. (1) of Belyy, by brute force: ``K · nnz(x_i)``
    multiply-adds per row, no N × K matrix is formed. Ties go to the smallest index. Fast when
    ``V`` is column-major (``V = VT.T`` for a C-ordered D × K ``VT``, as :class:`~xclib.memoir.Memoir`
    stores it): the inner loop then runs over K contiguous numbers.

    Returns
    -------
    r : (n,) int64, s : (n,) float64 (the maximal score)
    """
    n = indptr.shape[0] - 1
    K = V.shape[0]
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

    ``P(w) = [w / M, sqrt(1 − ‖w‖²/M²)]`` with ``M = max_r ‖w_r‖`` and ``Q(x) = [x/‖x‖, 0]``, so
    ``Q(x)·P(w) = x·w / (M‖x‖)`` and every ``P(w)`` has unit norm: the inner product becomes a
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
    out = np.zeros((n, B))
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            v = data[p]
            for b in range(B):
                out[i, b] += v * A[j, b]
    return out


@njit(cache=True, nogil=True)
def _lsh_query(indptr, indices, data, exclude, qcodes, codes, n_cand, V):
    """Hamming ranking + exact re-scoring of the ``n_cand`` nearest codes (``r != exclude``).

    Per query: K popcounts (a counting sort by Hamming distance, no O(K log K) sort), then
    ``n_cand · nnz(x)`` multiply-adds for the exact scores of the candidates.
    """
    n = indptr.shape[0] - 1
    K, n_words = codes.shape
    n_bits = n_words * 64
    r = np.empty(n, np.int64)
    s = np.empty(n, np.float64)
    dist = np.empty(K, np.int64)
    hist = np.empty(n_bits + 1, np.int64)
    n_ip = 0
    for i in range(n):
        hist[:] = 0
        for k in range(K):
            d = 0
            for w in range(n_words):
                d += _popcount64(codes[k, w] ^ qcodes[i, w])
            dist[k] = d
            if k != exclude[i]:
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
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        best = -np.inf
        arg = -1
        for k in range(K):
            if k == exclude[i]:
                continue
            d = dist[k]
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
            if v > best:
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


# ------------------------------------------------------------------ oracles -----------------
def _csr(X):
    X = sp.csr_matrix(X, dtype=np.float64)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


class ExactMIPS:
    """Brute-force MIPS (the exact margin): ``K · nnz(x)`` work and ``K − 1`` inner products per
    query. Holds a reference to a column-major ``V``, so updates are free (a C-ordered ``V`` is
    copied once and its changed rows copied on update)."""

    name = "exact"

    def __init__(self):
        self.n_inner_products = 0
        self.n_queries = 0

    def build(self, V, row_sq=None):
        # keep a reference when V is column-major (Memoir's layout), else a column-major copy
        self._copy = not V.flags.f_contiguous
        self.V = np.asfortranarray(V)
        return self

    def query(self, X, exclude):
        X = _csr(X)
        exclude = np.asarray(exclude, dtype=np.int64)
        r, s = exact_argmax_other(X.indptr, X.indices, X.data, exclude, self.V)
        self.n_queries += X.shape[0]
        self.n_inner_products += X.shape[0] * (self.V.shape[0] - 1)
        return r, s

    def update(self, V, rows, row_sq=None, linear=None):
        if self._copy:
            rows = np.asarray(rows, dtype=np.int64)
            self.V[rows] = V[rows]
        else:
            self.V = V


class SimpleLSH:
    """SimpleLSH (Neyshabur & Srebro 2015) with Hamming ranking and exact re-scoring.

    Parameters
    ----------
    n_bits : int
        Hash length (the paper used 64).
    n_candidates : int or None
        Rows re-scored exactly per query; None: ``max(16, K // 100)``.
    random_state : int, Generator or None
        Seeds the Gaussian projection directions.

    ``n_inner_products`` counts exact re-scorings; ``n_hamming`` counts code comparisons
    (one popcount per 64 bits) and ``n_projection_ops`` the query hashing work
    (``nnz(x) · bits`` multiply-adds).
    """

    name = "simple_lsh"

    def __init__(self, n_bits=64, n_candidates=None, random_state=0):
        if int(n_bits) < 1:
            raise ValueError(f"n_bits must be >= 1, got {n_bits}")
        self.n_bits = int(n_bits)
        self.n_candidates = n_candidates
        self.random_state = random_state
        self.n_inner_products = 0
        self.n_hamming = 0
        self.n_projection_ops = 0
        self.n_queries = 0

    def build(self, V, row_sq=None):
        from .base import as_generator

        rng = as_generator(self.random_state)
        K, D = V.shape
        G = rng.standard_normal((D + 1, self.n_bits))
        self.A = np.ascontiguousarray(G[:D])
        self.a_pad = np.ascontiguousarray(G[D])
        self.V = V
        self.P = V @ self.A
        self.row_sq = np.einsum("ij,ij->i", V, V) if row_sq is None else row_sq
        n_words = (self.n_bits + 63) // 64
        self.codes = np.zeros((K, n_words), np.uint64)
        self._recode()
        nc = self.n_candidates
        self._n_cand = max(1, min(K - 1, max(16, K // 100) if nc is None else int(nc)))
        return self

    def _recode(self):
        m = float(self.row_sq.max()) if self.row_sq.size else 0.0
        M = math.sqrt(m) if m > 0 else 0.0
        _lsh_codes(self.P, self.row_sq, M, self.a_pad, self.codes)

    def query(self, X, exclude):
        X = _csr(X)
        exclude = np.asarray(exclude, dtype=np.int64)
        qproj = _project_queries(X.indptr, X.indices, X.data, self.A)
        qcodes = np.zeros((X.shape[0], self.codes.shape[1]), np.uint64)
        _pack_signs(qproj, qcodes)
        r, s, n_ip = _lsh_query(X.indptr, X.indices, X.data, exclude, qcodes, self.codes,
                                self._n_cand, self.V)
        self._qproj = qproj
        self.n_queries += X.shape[0]
        self.n_inner_products += int(n_ip)
        self.n_hamming += X.shape[0] * self.codes.shape[0] * self.codes.shape[1]
        self.n_projection_ops += X.nnz * self.n_bits
        return r, s

    def update(self, V, rows, row_sq=None, linear=None):
        """Follow changed rows: O(bits) per additive update, else O(D + nnz · bits) per row;
        then re-code all K rows (O(K · bits)) since the largest norm M may have moved."""
        self.V = V
        if row_sq is not None:
            self.row_sq = row_sq
        else:
            rows = np.asarray(rows, dtype=np.int64)
            self.row_sq[rows] = np.einsum("ij,ij->i", V[rows], V[rows])
        if linear is not None:
            lr, lc, lq = linear
            _lsh_linear_update(self.P, np.asarray(lr, np.int64), np.asarray(lc, np.float64),
                               np.asarray(lq, np.int64), self._qproj)
        else:
            _lsh_recompute_rows(self.P, np.asarray(rows, np.int64), V, self.A)
        self._recode()


class HNSWMIPS:
    """Graph MIPS through ``hnswlib`` (inner-product space), rows updated in place.

    hnswlib does not expose how many distances a search computes, so ``n_inner_products``
    counts only the exact re-scoring of the ``k`` returned neighbours; its cost is measured in
    wall time (see the benchmark). Queries are densified in batches (hnswlib takes dense
    float32), which costs O(D) per query.
    """

    name = "hnsw"

    def __init__(self, ef=100, M=16, ef_construction=200, random_state=0, num_threads=1):
        self.ef = int(ef)
        self.M = int(M)
        self.ef_construction = int(ef_construction)
        self.random_state = random_state
        self.num_threads = int(num_threads)
        self.n_inner_products = 0
        self.n_queries = 0

    def build(self, V, row_sq=None):
        import hnswlib

        K, D = V.shape
        seed = self.random_state if isinstance(self.random_state, (int, np.integer)) else 0
        self.index = hnswlib.Index(space="ip", dim=D)
        self.index.init_index(max_elements=K, ef_construction=self.ef_construction, M=self.M,
                              random_seed=int(seed))
        self.index.set_num_threads(self.num_threads)
        self.index.add_items(np.asarray(V, np.float32), np.arange(K))
        self.index.set_ef(max(self.ef, 2))
        self.V = V
        return self

    def query(self, X, exclude):
        X = _csr(X)
        exclude = np.asarray(exclude, dtype=np.int64)
        K = self.V.shape[0]
        k = min(2, K)
        labels, _ = self.index.knn_query(np.asarray(X.toarray(), np.float32), k=k)
        labels = labels.astype(np.int64)
        r = np.where(labels[:, 0] == exclude, labels[:, k - 1], labels[:, 0])
        r = np.where(r == exclude, (exclude + 1) % K, r)
        s = np.asarray(X.multiply(self.V[r]).sum(axis=1)).ravel()
        self.n_queries += X.shape[0]
        self.n_inner_products += X.shape[0]
        return r, s

    def update(self, V, rows, row_sq=None, linear=None):
        rows = np.asarray(rows, dtype=np.int64)
        self.V = V
        if rows.size:
            self.index.add_items(np.asarray(V[rows], np.float32), rows)


#: oracle names accepted by :func:`make_oracle` and ``Memoir(oracle=...)``
ORACLES = {"exact": ExactMIPS, "simple_lsh": SimpleLSH, "hnsw": HNSWMIPS}


def make_oracle(name, **options):
    """An oracle by name (``"exact"``, ``"simple_lsh"``, ``"hnsw"``) or pass an instance through."""
    if not isinstance(name, str):
        return name
    try:
        cls = ORACLES[name]
    except KeyError:
        raise ValueError(f"unknown MIPS oracle {name!r}; choose one of {sorted(ORACLES)}") from None
    return cls(**options)
