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

Every oracle checks its inputs (``V`` finite, K >= 2; queries with exactly D columns and
indices in [0, D); ``exclude`` integers in [0, K), one per query) before a kernel could read
out of bounds, with a ``ValueError`` naming the argument. ``detach()`` drops an oracle's index
and weights, keeping its parameters and counters.

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

from .base import as_csr, as_generator

__all__ = ["ExactMIPS", "SimpleLSH", "HNSWMIPS", "make_oracle", "simple_lsh_transform",
           "exact_argmax_other", "ORACLES"]


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
def _lsh_query(indptr, indices, data, exclude, qcodes, codes, n_cand, V):
    """Hamming ranking + exact re-scoring of the ``n_cand`` nearest codes (``r != exclude``).

    Per query: K popcounts (a counting sort by Hamming distance, no O(K log K) sort), then
    ``n_cand · nnz(x)`` multiply-adds for the exact scores of the candidates.
    """
    n = indptr.shape[0] - 1
    K, n_words = codes.shape
    _check_kernel_args(indptr, indices, exclude, K, V.shape[1])
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


# ------------------------------------------------------------------ validation --------------
def _check_weights(V, who):
    """``V`` as a finite float64 (K, D) array with K >= 2 (no copy when it already is one)."""
    V = np.asarray(V)
    if V.ndim != 2:
        raise ValueError(f"{who}.build: V must be a 2-D (K, D) array, got shape {V.shape}")
    if V.dtype.kind not in "iuf":
        raise ValueError(f"{who}.build: V must hold real numbers, got dtype {V.dtype}")
    K, D = V.shape
    if K < 2 or D < 1:
        raise ValueError(f"{who}.build: V needs K >= 2 rows (the oracle returns a row other "
                         f"than the excluded one) and D >= 1 columns, got shape {V.shape}")
    if V.dtype != np.float64:
        V = V.astype(np.float64)
    if not np.all(np.isfinite(V)):
        raise ValueError(f"{who}.build: V contains NaN or infinite values")
    return V


def _check_queries(X, exclude, K, D, who):
    """Validate a query batch against an index of K rows of width D.

    Returns ``(X, exclude)``: ``X`` canonical CSR float64 with exactly ``D`` columns, column
    indices in [0, D) and finite values; ``exclude`` a contiguous int64 vector with one entry
    in [0, K) per row of ``X``. Anything else is a ``ValueError`` naming the argument, raised
    before a kernel could read out of bounds.
    """
    if not sp.issparse(X) and np.ndim(X) != 2:
        raise ValueError(f"{who}.query: X must be 2-D (n, D), got {np.ndim(X)}-D")
    if sp.issparse(X) and X.ndim != 2:
        raise ValueError(f"{who}.query: X must be 2-D (n, D)")
    X = as_csr(X)
    if X.shape[1] != D:
        raise ValueError(f"{who}.query: X has {X.shape[1]} columns but the index was built "
                         f"on V with D = {D} columns")
    if X.nnz and (int(X.indices.min()) < 0 or int(X.indices.max()) >= D):
        raise ValueError(f"{who}.query: X has a column index outside [0, {D}) (a CSR matrix "
                         f"whose indices do not fit its shape)")
    if not np.all(np.isfinite(X.data)):
        raise ValueError(f"{who}.query: X contains NaN or infinite values")
    ex = np.asarray(exclude)
    if ex.ndim != 1:
        raise ValueError(f"{who}.query: exclude must be 1-D (one class per query), got "
                         f"shape {ex.shape}")
    if ex.shape[0] != X.shape[0]:
        raise ValueError(f"{who}.query: exclude has {ex.shape[0]} entries but X has "
                         f"{X.shape[0]} rows (one excluded class per query)")
    if ex.dtype.kind not in "iu":
        raise ValueError(f"{who}.query: exclude must hold integer class indices, got dtype "
                         f"{ex.dtype}")
    if ex.size and (int(ex.min()) < 0 or int(ex.max()) >= K):
        raise ValueError(f"{who}.query: exclude has a class index outside [0, {K})")
    return X, np.ascontiguousarray(ex, dtype=np.int64)


def _check_rows(rows, K, who):
    rows = np.asarray(rows)
    if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
        raise ValueError(f"{who}.update: rows must be a 1-D vector of integer row indices")
    rows = rows.astype(np.int64)
    if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= K):
        raise ValueError(f"{who}.update: rows has an index outside [0, {K})")
    return rows


def _check_int(value, name, low, who, none_ok=False):
    if value is None and none_ok:
        return None
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))
            or value < low):
        raise ValueError(f"{who}: {name} must be an int >= {low}, got {value!r}")
    return int(value)


class _Oracle:
    """What the three oracles share: input checks, counters and :meth:`detach`."""

    name = ""
    _index_attrs = ("V",)

    def _built(self):
        if getattr(self, "V", None) is None:
            raise ValueError(f"{type(self).__name__} has no index: call build(V) first")
        return self.V.shape

    def _queries(self, X, exclude):
        K, D = self._built()
        return _check_queries(X, exclude, K, D, type(self).__name__)

    def _check_update(self, V, rows):
        K, D = self._built()
        if np.shape(V) != (K, D):
            raise ValueError(f"{type(self).__name__}.update: V has shape {np.shape(V)}, the "
                             f"index was built on shape {(K, D)}")
        return _check_rows(rows, K, type(self).__name__)

    def detach(self):
        """Drop the index and the weights (keep parameters and counters); return self.

        A detached oracle answers no query until :meth:`build` is called again. ``Memoir``
        detaches its oracle at the end of ``fit``, so ``oracle_`` costs a few bytes.
        """
        for attr in self._index_attrs:
            if hasattr(self, attr):
                setattr(self, attr, None)
        return self


# ------------------------------------------------------------------ oracles -----------------
class ExactMIPS(_Oracle):
    """Brute-force MIPS (the exact margin): ``K · nnz(x)`` work and ``K − 1`` inner products per
    query. Holds a reference to a column-major float64 ``V``, so updates are free (any other
    ``V`` is copied once and its changed rows copied on update)."""

    name = "exact"

    def __init__(self):
        self.n_inner_products = 0
        self.n_queries = 0

    def build(self, V, row_sq=None):
        """Index the K rows of ``V`` (K × D, K >= 2)."""
        V0 = V
        V = _check_weights(V, "ExactMIPS")
        # keep a reference when V is column-major float64 (Memoir's layout), else a copy
        self._copy = V is not V0 or not V.flags.f_contiguous
        self.V = np.asfortranarray(V)
        return self

    def query(self, X, exclude):
        """``(r, s)``: the exact ``argmax_{r != exclude[i]} x_i · v_r`` and its score."""
        X, exclude = self._queries(X, exclude)
        r, s = exact_argmax_other(X.indptr, X.indices, X.data, exclude, self.V)
        self.n_queries += X.shape[0]
        self.n_inner_products += X.shape[0] * (self.V.shape[0] - 1)
        return r, s

    def update(self, V, rows, row_sq=None, linear=None):
        """Follow the changed ``rows`` of ``V``."""
        rows = self._check_update(V, rows)
        if self._copy:
            self.V[rows] = V[rows]
        else:
            self.V = V


class SimpleLSH(_Oracle):
    """SimpleLSH (Neyshabur & Srebro 2015) with Hamming ranking and exact re-scoring.

    Parameters
    ----------
    n_bits : int >= 1
        Hash length (the paper used 64).
    n_candidates : int >= 1 or None
        Rows re-scored exactly per query (at most K − 1); None: ``max(16, K // 100)``.
    random_state : None, int or Generator
        Seeds the Gaussian projection directions.

    ``n_inner_products`` counts exact re-scorings; ``n_hamming`` counts code comparisons
    (one popcount per 64 bits) and ``n_projection_ops`` the query hashing work
    (``nnz(x) · bits`` multiply-adds).
    """

    name = "simple_lsh"
    _index_attrs = ("V", "A", "a_pad", "P", "row_sq", "codes", "_qproj")

    def __init__(self, n_bits=64, n_candidates=None, random_state=0):
        self.n_bits = _check_int(n_bits, "n_bits", 1, "SimpleLSH")
        self.n_candidates = _check_int(n_candidates, "n_candidates", 1, "SimpleLSH",
                                       none_ok=True)
        self.random_state = random_state
        self.n_inner_products = 0
        self.n_hamming = 0
        self.n_projection_ops = 0
        self.n_queries = 0

    def build(self, V, row_sq=None):
        """Draw the projections and hash the K rows of ``V`` (O(K·D·bits))."""
        V = _check_weights(V, "SimpleLSH")
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
        self._qproj = None
        self._recode()
        nc = self.n_candidates
        self._n_cand = max(1, min(K - 1, max(16, K // 100) if nc is None else int(nc)))
        return self

    def _recode(self):
        m = float(self.row_sq.max()) if self.row_sq.size else 0.0
        M = math.sqrt(m) if m > 0 else 0.0
        _lsh_codes(self.P, self.row_sq, M, self.a_pad, self.codes)

    def query(self, X, exclude):
        """``(r, s)``: the best re-scored candidate ``!= exclude[i]`` and its exact score."""
        X, exclude = self._queries(X, exclude)
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
        rows = self._check_update(V, rows)
        if linear is not None:
            lr, lc, lq = (np.asarray(a) for a in linear)
            if not (lr.shape == lc.shape == lq.shape and lr.ndim == 1):
                raise ValueError("SimpleLSH.update: linear must be three 1-D arrays of one "
                                 "length (rows, coefs, query positions)")
            lr = _check_rows(lr, V.shape[0], "SimpleLSH")
            nq = 0 if self._qproj is None else self._qproj.shape[0]
            if lq.size and (lq.dtype.kind not in "iu" or int(lq.min()) < 0
                            or int(lq.max()) >= nq):
                raise ValueError(f"SimpleLSH.update: linear query positions must index the "
                                 f"last query batch ({nq} rows)")
        self.V = V
        if row_sq is not None:
            self.row_sq = row_sq
        else:
            self.row_sq[rows] = np.einsum("ij,ij->i", V[rows], V[rows])
        if linear is not None:
            _lsh_linear_update(self.P, lr, np.asarray(lc, np.float64),
                               np.asarray(lq, np.int64), self._qproj)
        else:
            _lsh_recompute_rows(self.P, rows, V, self.A)
        self._recode()


class HNSWMIPS(_Oracle):
    """Graph MIPS through ``hnswlib`` (inner-product space), rows updated in place.

    Parameters
    ----------
    ef : int >= 1
        Search breadth (hnswlib's ``ef``; at least 2 is used, since two neighbours are asked).
    M : int >= 2
        Graph degree (hnswlib's ``M``; 0 crashes hnswlib and 1 fails, so both are refused here).
    ef_construction : int >= 1
        Search breadth while inserting.
    random_state : None, int >= 0 or Generator
        hnswlib's level-assignment seed.
    num_threads : int >= 1

    hnswlib does not expose how many distances a search computes, so ``n_inner_products``
    counts only the exact re-scoring of the returned neighbour; its cost is measured in wall
    time (see the benchmark). Queries are densified in batches (hnswlib takes dense float32),
    which costs O(D) per query. All parameters are checked here, before hnswlib sees them.
    """

    name = "hnsw"
    _index_attrs = ("V", "index")

    def __init__(self, ef=100, M=16, ef_construction=200, random_state=0, num_threads=1):
        who = "HNSWMIPS"
        self.ef = _check_int(ef, "ef", 1, who)
        self.M = _check_int(M, "M", 2, who)
        self.ef_construction = _check_int(ef_construction, "ef_construction", 1, who)
        if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
            _check_int(random_state, "random_state", 0, who)
        elif not (random_state is None or isinstance(random_state, np.random.Generator)):
            raise ValueError(f"{who}: random_state must be None, an int >= 0 or a "
                             f"numpy.random.Generator, got {random_state!r}")
        self.random_state = random_state
        self.num_threads = _check_int(num_threads, "num_threads", 1, who)
        self.n_inner_products = 0
        self.n_queries = 0

    def _seed(self):
        if isinstance(self.random_state, (int, np.integer)):
            return int(self.random_state)
        return int(as_generator(self.random_state).integers(2**31))

    def build(self, V, row_sq=None):
        """Insert the K rows of ``V`` into a fresh graph."""
        import hnswlib

        V = _check_weights(V, "HNSWMIPS")
        K, D = V.shape
        self.index = hnswlib.Index(space="ip", dim=D)
        self.index.init_index(max_elements=K, ef_construction=self.ef_construction, M=self.M,
                              random_seed=self._seed())
        self.index.set_num_threads(self.num_threads)
        self.index.add_items(np.asarray(V, np.float32), np.arange(K))
        self.index.set_ef(max(self.ef, 2))
        self.V = V
        return self

    def query(self, X, exclude):
        """``(r, s)``: the best of the two nearest graph neighbours ``!= exclude[i]``."""
        X, exclude = self._queries(X, exclude)
        K = self.V.shape[0]
        labels, _ = self.index.knn_query(np.asarray(X.toarray(), np.float32), k=2)
        labels = labels.astype(np.int64)
        r = np.where(labels[:, 0] == exclude, labels[:, 1], labels[:, 0])
        r = np.where(r == exclude, (exclude + 1) % K, r)
        s = np.asarray(X.multiply(self.V[r]).sum(axis=1)).ravel()
        self.n_queries += X.shape[0]
        self.n_inner_products += X.shape[0]
        return r, s

    def update(self, V, rows, row_sq=None, linear=None):
        """Re-insert the changed ``rows`` of ``V`` (hnswlib replaces an existing label)."""
        rows = self._check_update(V, rows)
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
