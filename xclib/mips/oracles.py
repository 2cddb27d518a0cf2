"""The MIPS oracles: exact scan, SimpleLSH and HNSW (one interface, see :mod:`xclib.mips`)."""
from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from ..base import as_generator
from ._checks import _check_int, _check_queries, _check_rows, _check_weights
from .kernels import (_lsh_codes, _lsh_linear_update, _lsh_query, _lsh_recompute_rows,
                      _lsh_topk, _pack_signs, _project_queries, exact_argmax_other,
                      rescore_rows)


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

    def _topk_queries(self, X, k):
        """``(X, k)`` of a top-k query checked against the index (k in [1, K])."""
        from ..predict import check_k

        K, D = self._built()
        X, _ = _check_queries(X, np.zeros(np.shape(X)[0], np.int64), K, D,
                              type(self).__name__)
        return X, check_k(k, K)

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

    def query_topk(self, X, k):
        """``(idx, val)`` (n, k): the exact k largest ``x_i · v_r``, in decreasing score
        (ties: smaller index), by the blocked scan of :mod:`xclib.predict`."""
        from ..predict import topk_scores

        X, k = self._topk_queries(X, k)
        self.n_queries += X.shape[0]
        self.n_inner_products += X.shape[0] * self.V.shape[0]
        return topk_scores(self.V, X, k)

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
    n_top : int >= 0
        Rows of largest norm re-scored for every query besides the Hamming candidates (the
        limit of norm-ranging LSH, Yan et al. 2018, whose top range is searched
        exhaustively). With Zipf-sized classes a few long rows win the argmax on their norm
        at a wide angle, where a ranking by angle misses them. The set follows each update
        in O(K). Default 0: plain SimpleLSH.
    random_state : None, int or Generator
        Seeds the Gaussian projection directions.

    ``n_inner_products`` counts exact re-scorings; ``n_hamming`` counts code comparisons
    (one popcount per 64 bits) and ``n_projection_ops`` the query hashing work
    (``nnz(x) · bits`` multiply-adds).
    """

    name = "simple_lsh"
    _index_attrs = ("V", "A", "a_pad", "P", "row_sq", "codes", "_qproj")

    def __init__(self, *, n_bits=64, n_candidates=None, n_top=0, random_state=0):
        self.n_bits = _check_int(n_bits, "n_bits", 1, "SimpleLSH")
        self.n_top = _check_int(n_top, "n_top", 0, "SimpleLSH")
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

    def _top_rows(self):
        """The ``n_top`` rows of largest norm (O(K) selection)."""
        t = min(self.n_top, self.row_sq.shape[0])
        if t == 0:
            return np.zeros(0, np.int64)
        return np.argpartition(self.row_sq, -t)[-t:].astype(np.int64)

    def _zero_rows(self):
        """Up to two rows with ``w_r = 0`` (smallest indices): each scores exactly 0."""
        return np.flatnonzero(self.row_sq == 0.0)[:2].astype(np.int64)

    def _recode(self):
        m = float(self.row_sq.max()) if self.row_sq.size else 0.0
        M = math.sqrt(m) if m > 0 else 0.0
        _lsh_codes(self.P, self.row_sq, M, self.a_pad, self.codes)

    def query(self, X, exclude):
        """``(r, s)``: the best re-scored candidate ``!= exclude[i]`` and its exact score."""
        X, exclude = self._queries(X, exclude)
        qproj, qcodes = _hash_queries(self, X)
        r, s, n_ip = _lsh_query(X.indptr, X.indices, X.data, exclude, qcodes, self.codes,
                                self._n_cand, self.V, self._zero_rows(), self._top_rows())
        self._qproj = qproj
        _count_lsh_work(self, X, n_ip)
        return r, s

    def query_topk(self, X, k):
        """``(idx, val)`` (n, k): the k best of ``max(n_candidates, k)`` Hamming-nearest rows
        (and the ``n_top`` longest), re-scored exactly, in decreasing score."""
        X, k = self._topk_queries(X, k)
        _, qcodes = _hash_queries(self, X)
        n_cand = max(k, self._n_cand)
        idx, val, n_ip = _lsh_topk(X.indptr, X.indices, X.data, qcodes, self.codes, n_cand,
                                   self.V, self._top_rows(), k)
        _count_lsh_work(self, X, n_ip)
        return idx, val

    def update(self, V, rows, row_sq=None, linear=None):
        """Follow changed rows: O(bits) per additive update, else O(D + nnz · bits) per row;
        then re-code all K rows (O(K · bits)) since the largest norm M may have moved."""
        rows = self._check_update(V, rows)
        if linear is not None:
            lr, lc, lq = _check_linear(linear, V.shape[0], self._qproj)
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


def _hash_queries(o, X):
    """``(qproj, qcodes)``: the projections of the CSR queries ``X`` on the directions of
    :class:`SimpleLSH` ``o`` and their packed sign codes."""
    qproj = _project_queries(X.indptr, X.indices, X.data, o.A)
    qcodes = np.zeros((X.shape[0], o.codes.shape[1]), np.uint64)
    _pack_signs(qproj, qcodes)
    return qproj, qcodes


def _count_lsh_work(o, X, n_ip):
    """Add one query batch ``X`` (``n_ip`` exact re-scorings) to the counters of ``o``."""
    o.n_queries += X.shape[0]
    o.n_inner_products += int(n_ip)
    o.n_hamming += X.shape[0] * o.codes.shape[0] * o.codes.shape[1]
    o.n_projection_ops += X.nnz * o.n_bits


def _check_linear(linear, n_rows, qproj):
    """``(rows, coefs, query positions)`` of :meth:`SimpleLSH.update`'s ``linear``, checked:
    three 1-D arrays of one length, rows in ``0..n_rows-1``, positions indexing the last query
    batch (``qproj``, None before the first query)."""
    lr, lc, lq = (np.asarray(a) for a in linear)
    if not (lr.shape == lc.shape == lq.shape and lr.ndim == 1):
        raise ValueError("SimpleLSH.update: linear must be three 1-D arrays of one "
                         "length (rows, coefs, query positions)")
    lr = _check_rows(lr, n_rows, "SimpleLSH")
    nq = 0 if qproj is None else qproj.shape[0]
    if lq.size and (lq.dtype.kind not in "iu" or int(lq.min()) < 0
                    or int(lq.max()) >= nq):
        raise ValueError(f"SimpleLSH.update: linear query positions must index the "
                         f"last query batch ({nq} rows)")
    return lr, lc, lq


@contextmanager
def _faiss_threads(n):
    """faiss with ``n`` OpenMP threads for the block; the previous count restored after it."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield faiss
    finally:
        faiss.omp_set_num_threads(before)


def _check_seed(random_state, who):
    """``random_state`` of :class:`HNSWMIPS` when it is None, an int >= 0 or a Generator."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        _check_int(random_state, "random_state", 0, who)
    elif not (random_state is None or isinstance(random_state, np.random.Generator)):
        raise ValueError(f"{who}: random_state must be None, an int >= 0 or a "
                         f"numpy.random.Generator, got {random_state!r}")
    return random_state


def _graph_seed(random_state):
    """The int seed a graph library takes: ``random_state`` itself, or one drawn from it."""
    if isinstance(random_state, (int, np.integer)):
        return int(random_state)
    return int(as_generator(random_state).integers(2**31))


def _faiss_graph(o, V32):
    """A ``faiss.IndexHNSWFlat`` (inner product) of the rows ``V32`` with the parameters of
    :class:`HNSWMIPS` ``o``."""
    with _faiss_threads(o.num_threads) as faiss:
        index = faiss.IndexHNSWFlat(V32.shape[1], o.M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = o.ef_construction
        index.hnsw.efSearch = max(o.ef, 2)
        index.hnsw.rng = faiss.RandomGenerator(_graph_seed(o.random_state))
        index.add(V32)
    return index


def _hnswlib_graph(o, V32):
    """An ``hnswlib.Index`` (inner product) of the rows ``V32`` with the parameters of
    :class:`HNSWMIPS` ``o``."""
    import hnswlib

    K, D = V32.shape
    index = hnswlib.Index(space="ip", dim=D)
    index.init_index(max_elements=K, ef_construction=o.ef_construction, M=o.M,
                     random_seed=_graph_seed(o.random_state))
    index.set_num_threads(o.num_threads)
    index.add_items(V32, np.arange(K))
    index.set_ef(max(o.ef, 2))
    return index


def _graph_nearest(o, Q, k=2):
    """Labels (n, k) of the k best rows of :class:`HNSWMIPS` ``o`` for the dense float32
    queries ``Q`` (search breadth ``max(ef, k, 2)`` for this call, then ``max(ef, 2)`` again)."""
    ef = max(o.ef, 2)
    if o.backend == "hnswlib":
        o.index.set_ef(max(ef, k))
        try:
            return o.index.knn_query(Q, k=k)[0]
        finally:
            o.index.set_ef(ef)
    with _faiss_threads(o.num_threads) as faiss:
        stats = faiss.cvar.hnsw_stats
        ndis0 = stats.ndis
        o.index.hnsw.efSearch = max(ef, k)
        try:
            labels = o.index.search(Q, k)[1]
        finally:
            o.index.hnsw.efSearch = ef
        ndis = int(stats.ndis - ndis0)
    o.n_graph_distances += ndis
    o.n_inner_products += ndis + Q.shape[0]          # + the entry point's distance
    return labels


def _best_other(labels, exclude, K):
    """Per query, the first of its two graph neighbours ``labels`` (n, 2) that is a row and
    not ``exclude``; ``(exclude + 1) % K`` when neither is."""
    ok = (labels >= 0) & (labels != exclude[:, None])    # faiss pads with -1
    return np.where(ok[:, 0], labels[:, 0],
                    np.where(ok[:, 1], labels[:, 1], (exclude + 1) % K))


class HNSWMIPS(_Oracle):
    """Graph MIPS: an HNSW graph in inner-product space, through hnswlib or faiss.

    Parameters
    ----------
    ef : int >= 1
        Search breadth (``ef`` / ``efSearch``; at least 2 is used, since two neighbours are
        asked).
    M : int >= 2
        Graph degree (``M``, 2M on the bottom layer in both libraries; hnswlib crashes at 0
        and fails at 1, so both are refused here).
    ef_construction : int >= 1
        Search breadth while inserting.
    random_state : None, int >= 0 or Generator
        Seed of the level assignment.
    num_threads : int >= 1
        Threads of insertion and search (default 1: the times are one thread's). With
        ``"faiss"`` the OpenMP thread count is set for each call and restored after it.
    backend : {"hnswlib", "faiss"}
        ``"hnswlib"`` (default; what ``Memoir(oracle="hnsw")`` trains with) replaces a changed
        row in place, or builds a fresh graph when more than half the rows changed (counted
        in ``n_rebuilds``: re-inserting a row repairs its neighbours' links and costs about
        1.6 fresh insertions; MEMOIR's batches change most rows at K = 1,000, where the
        fresh graph cut training time by a third); it does not report how many distances a
        search computes.
        ``"faiss"`` (``faiss.IndexHNSWFlat`` with ``METRIC_INNER_PRODUCT``, the same ``M``,
        ``efConstruction`` and ``efSearch``) reports them; its graph cannot remove or replace
        a vector, so :meth:`update` rebuilds the whole graph (K insertions, counted in
        ``n_rebuilds``): meant for static queries such as the oracle comparison, not for
        training.

    Counters
    --------
    n_inner_products
        With ``"faiss"``: every inner product a query computes. That is the graph search's
        distance computations as faiss counts them (``n_graph_distances``), one per query for
        the entry point (its distance is computed before faiss's count starts), and one for
        the exact float64 re-scoring of the returned row. The graph distances are dense
        float32 inner products of D terms (the query is densified); the re-scoring costs
        ``nnz(x)``. With ``"hnswlib"`` only the re-scoring (1 per query) is counted: the
        graph search's cost shows in wall time only.
    n_graph_distances
        ``"faiss"``: the change of faiss's process-global ``hnsw_stats.ndis`` over each
        search (the greedy descent through the upper layers and the ``ef``-bounded search
        of the bottom layer), summed. ``None`` with ``"hnswlib"`` (not reported).

    Queries are densified (both libraries take dense float32): O(D) per query. All
    parameters are checked here, before either library sees them.
    """

    name = "hnsw"
    _index_attrs = ("V", "index")
    BACKENDS = ("hnswlib", "faiss")

    def __init__(self, *, ef=100, M=16, ef_construction=200, random_state=0, num_threads=1,
                 backend="hnswlib"):
        who = "HNSWMIPS"
        self.ef = _check_int(ef, "ef", 1, who)
        self.M = _check_int(M, "M", 2, who)
        self.ef_construction = _check_int(ef_construction, "ef_construction", 1, who)
        self.random_state = _check_seed(random_state, who)
        self.num_threads = _check_int(num_threads, "num_threads", 1, who)
        if not (isinstance(backend, str) and backend in self.BACKENDS):
            raise ValueError(f"{who}: backend must be one of {list(self.BACKENDS)}, "
                             f"got {backend!r}")
        self.backend = backend
        self.n_inner_products = 0
        self.n_queries = 0
        self.n_graph_distances = 0 if backend == "faiss" else None
        self.n_rebuilds = 0

    def build(self, V, row_sq=None):
        """Insert the K rows of ``V`` into a fresh graph."""
        V = _check_weights(V, "HNSWMIPS")
        V32 = np.ascontiguousarray(V, dtype=np.float32)
        self.index = (_faiss_graph if self.backend == "faiss" else _hnswlib_graph)(self, V32)
        self.V = V
        return self

    def query(self, X, exclude):
        """``(r, s)``: the best of the two nearest graph neighbours ``!= exclude[i]``."""
        X, exclude = self._queries(X, exclude)
        K = self.V.shape[0]
        labels = np.asarray(_graph_nearest(self, np.asarray(X.toarray(), np.float32)), np.int64)
        r = _best_other(labels, exclude, K)
        s = np.asarray(X.multiply(self.V[r]).sum(axis=1)).ravel()
        self.n_queries += X.shape[0]
        self.n_inner_products += X.shape[0]                 # the exact re-scoring
        return r, s

    def query_topk(self, X, k):
        """``(idx, val)`` (n, k): the graph's k nearest rows (search breadth ``max(ef, k)``),
        re-scored exactly and sorted by decreasing score. Rows for which faiss returns fewer
        than k neighbours are answered by an exact scan."""
        from ..predict import topk_scores

        X, k = self._topk_queries(X, k)
        idx = np.asarray(_graph_nearest(self, np.asarray(X.toarray(), np.float32), k), np.int64)
        short = np.flatnonzero((idx < 0).any(axis=1))
        if short.size:                                    # faiss pads with -1
            idx[short] = topk_scores(self.V, X[short], k)[0]
        val = rescore_rows(X.indptr, X.indices, X.data, self.V, idx)
        order = np.lexsort((idx, -val), axis=1)
        self.n_queries += X.shape[0]
        self.n_inner_products += idx.size                  # the exact re-scoring
        return np.take_along_axis(idx, order, 1), np.take_along_axis(val, order, 1)

    def update(self, V, rows, row_sq=None, linear=None):
        """Follow the changed ``rows`` of ``V``: hnswlib re-inserts them (it replaces an
        existing label); faiss's graph cannot replace a vector, so it is rebuilt from ``V``."""
        rows = self._check_update(V, rows)
        if not rows.size:
            self.V = V
            return
        if self.backend == "faiss" or 2 * rows.size > V.shape[0]:
            self.build(V)
            self.n_rebuilds += 1
            return
        self.V = V
        self.index.add_items(np.asarray(V[rows], np.float32), rows)


#: oracle names accepted by :func:`make_oracle` and ``Memoir(oracle=...)``
ORACLES = {"exact": ExactMIPS, "simple_lsh": SimpleLSH, "hnsw": HNSWMIPS}


def make_oracle(name, **options):
    """An oracle by name (``"exact"``, ``"simple_lsh"``, ``"hnsw"``) with ``options`` (its
    keyword parameters), or an instance passed through."""
    if not isinstance(name, str):
        return name
    try:
        cls = ORACLES[name]
    except KeyError:
        raise ValueError(f"unknown MIPS oracle {name!r}; "
                         f"choose one of {sorted(ORACLES)}") from None
    return cls(**options)
