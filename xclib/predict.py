"""Prediction in bounded memory: blocked scans, top-k, MIPS oracles at prediction time.

Every classifier of :mod:`xclib` predicts through this module (:class:`xclib.base.
LinearSoftmaxClassifier`'s ``predict``, ``predict_topk``, ``decision_function``,
``predict_proba`` and ``predict_log_proba``). The scores ``X @ coef.T + intercept`` are
computed in *tiles*: ``r`` rows × ``c`` classes at a time, with

* ``c = min(K, budget / (8 D))`` classes (for sparse X, ``min(K, CACHE_BYTES / (8 D))``:
  a CSR × dense product reads the chunk's weights once per row, so they must stay in cache
  for the scan to read them from memory once), copied transposed and contiguous, the layout
  that product reads, and
* ``r = budget / (8 c)`` rows, so a tile of scores holds at most ``budget`` bytes.

The class chunks are the outer loop (each chunk's weights are copied once), the rows the
inner one. So the working memory is a few times :data:`SCORE_BLOCK_BYTES` (32 MiB by
default: a chunk of weights, a tile of scores and, for top-k, the tile's partition indices)
whatever N and K, besides the model and the output: ``predict`` keeps one running maximum
per row, ``predict_topk`` a running (N, k) top list, and the full-matrix methods fill their
N × K output tile by tile. On a small problem (one tile) the product is exactly the one
``X @ coef.T`` the dense path computed, and on any problem each score is the same sum in the
same order for sparse X (CSR rows times contiguous weight columns); for dense X, BLAS may
split the same dot products differently (differences of order 1e-16 relative).

Full N × K outputs above :data:`LARGE_OUTPUT_BYTES` (1 GiB) warn with
:class:`LargeOutputWarning`; outputs larger than the machine's physical memory raise a
``MemoryError`` before anything is allocated. Both module attributes may be changed (e.g.
``xclib.predict.SCORE_BLOCK_BYTES = 256 << 20``) or passed per call (``budget=``).

Top-k from a MIPS oracle
------------------------
``predict_topk(X, k, oracle=...)`` asks an oracle of :mod:`xclib.mips` (:class:`ExactMIPS`,
:class:`SimpleLSH`, :class:`HNSWMIPS`, or their names) for the k largest inner products. The
intercept is folded in exactly: the oracle indexes ``[w_k, b_k]`` and is queried with
``[x, 1]``. The oracle is built on the model at the first call and reused while the model's
weights are the same array (:func:`build_index` builds one explicitly); approximate oracles
may miss classes of the exact top-k, which :func:`topk_recall` measures.
"""
from __future__ import annotations

import os
import warnings
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from scipy.special import softmax

__all__ = ["SCORE_BLOCK_BYTES", "CACHE_BYTES", "LARGE_OUTPUT_BYTES", "LargeOutputWarning", "tile_shape",
           "score_tiles", "argmax_scores", "topk_scores", "full_scores", "check_k",
           "check_output_size", "softmax_rows", "log_softmax_rows", "build_index",
           "oracle_topk", "topk_recall"]

#: Bytes of scores (and of copied weights) held at once by a blocked scan.
SCORE_BLOCK_BYTES = 32 << 20
#: Largest class chunk of weights (bytes) a sparse scan streams its rows against: a chunk
#: that stays in a core's cache is read from memory once, not once per row.
CACHE_BYTES = 1 << 20
#: Full N × K outputs above this many bytes warn (:class:`LargeOutputWarning`).
LARGE_OUTPUT_BYTES = 1 << 30


class LargeOutputWarning(UserWarning):
    """A method is about to return an N × K array larger than :data:`LARGE_OUTPUT_BYTES`."""


def _budget(budget):
    budget = SCORE_BLOCK_BYTES if budget is None else budget
    if isinstance(budget, bool) or not isinstance(budget, Integral) or budget < 8:
        raise ValueError(f"budget must be an int number of bytes >= 8, got {budget!r}")
    return int(budget)


def tile_shape(n_rows, n_classes, n_features, budget=None, sparse=False):
    """``(rows, classes)`` of one tile for a memory ``budget`` in bytes (see the module);
    with ``sparse`` rows the class chunk's weights are also kept within
    :data:`CACHE_BYTES`."""
    budget = _budget(budget)
    limit = min(budget, CACHE_BYTES) if sparse else budget
    c = max(1, min(n_classes, limit // (8 * max(n_features, 1))))
    r = max(1, min(max(n_rows, 1), budget // (8 * c)))
    return r, c


def score_tiles(coef, X, intercept=None, budget=None):
    """Yield ``(r0, r1, c0, c1, s)``, ``s = X[r0:r1] @ coef[c0:c1].T (+ intercept[c0:c1])``.

    Class chunks outer, row blocks inner; every ``s`` is a fresh (r1 − r0, c1 − c0) float64
    array of at most ``budget`` bytes (at least one row and one class).
    """
    coef = np.asarray(coef, dtype=np.float64)
    n, (K, D) = X.shape[0], coef.shape
    sparse = sp.issparse(X)
    rows, cols = tile_shape(n, K, D, budget, sparse)
    for c0 in range(0, K, cols):
        c1 = min(K, c0 + cols)
        # CSR × dense reads the weights column by column: give it contiguous columns (SciPy
        # would copy a strided view itself); BLAS takes the transposed view as it is
        wt = np.ascontiguousarray(coef[c0:c1].T) if sparse else coef[c0:c1].T
        b = None if intercept is None else np.asarray(intercept, np.float64)[c0:c1]
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            s = (X if (r0 == 0 and r1 == n) else X[r0:r1]) @ wt
            s = np.array(s.toarray() if sp.issparse(s) else s, dtype=np.float64, copy=False)
            if b is not None:
                s += b
            yield r0, r1, c0, c1, s


def argmax_scores(coef, X, intercept=None, budget=None):
    """``(arg, best)``: the class of the largest score per row and that score (ties: the
    smallest class index, as ``np.argmax``), in bounded memory."""
    n = X.shape[0]
    best = np.full(n, -np.inf)
    arg = np.zeros(n, np.int64)
    for r0, r1, c0, _, s in score_tiles(coef, X, intercept, budget):
        a = np.argmax(s, axis=1)
        v = s[np.arange(r1 - r0), a]
        if c0 == 0:
            arg[r0:r1], best[r0:r1] = a, v
            continue
        win = v > best[r0:r1]                    # strict: an earlier chunk keeps a tie
        arg[r0:r1][win] = a[win] + c0
        best[r0:r1][win] = v[win]
    return arg, best


def check_k(k, n_classes):
    """``k`` as an int in [1, K], else a ``ValueError`` saying what is allowed."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, Integral):
        raise ValueError(f"k must be an integer in [1, {n_classes}] (the number of classes), "
                         f"got {k!r}")
    if not 1 <= k <= n_classes:
        raise ValueError(f"k must lie in [1, {n_classes}] (the number of classes), got {k}")
    return int(k)


def _merge_topk(val, idx, new_val, new_idx, k):
    """The k best of two candidate lists per row: score descending, class ascending."""
    v = np.concatenate([val, new_val], axis=1)
    i = np.concatenate([idx, new_idx], axis=1)
    order = np.lexsort((i, -v), axis=1)[:, :k]
    return np.take_along_axis(v, order, 1), np.take_along_axis(i, order, 1)


def topk_scores(coef, X, k, intercept=None, budget=None):
    """``(idx, val)``, both (N, k): the k classes of largest score per row, in decreasing
    score (equal scores: smaller class index first), and their scores. Bounded memory: each
    tile keeps its own k best (``np.argpartition``), merged into a running (N, k) list."""
    K = np.shape(coef)[0]
    k = check_k(k, K)
    n = X.shape[0]
    val = np.full((n, k), -np.inf)
    idx = np.full((n, k), K, np.int64)           # sentinel, sorted after every real class
    for r0, r1, c0, c1, s in score_tiles(coef, X, intercept, budget):
        kk = min(k, c1 - c0)
        if kk < c1 - c0:
            part = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
        else:
            part = np.broadcast_to(np.arange(c1 - c0), s.shape)
        sv = np.take_along_axis(s, part, 1)
        val[r0:r1], idx[r0:r1] = _merge_topk(val[r0:r1], idx[r0:r1], sv, part + c0, k)
    return idx, val


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def check_output_size(n_rows, n_classes, what):
    """Warn (:class:`LargeOutputWarning`) before returning an N × K float64 array above
    :data:`LARGE_OUTPUT_BYTES`; raise ``MemoryError`` if it exceeds the physical memory."""
    need = 8 * int(n_rows) * int(n_classes)
    gib = need / 2**30
    phys = _physical_memory()
    if phys is not None and need > phys:
        raise MemoryError(
            f"{what} would return a {n_rows} × {n_classes} float64 array ({gib:.1f} GiB), "
            f"more than this machine's {phys / 2**30:.1f} GiB of memory; use predict or "
            "predict_topk (bounded memory), or pass the rows in smaller batches")
    if need > LARGE_OUTPUT_BYTES:
        warnings.warn(
            f"{what} returns a {n_rows} × {n_classes} float64 array: {gib:.2f} GiB (the "
            "scores are computed in bounded blocks, but the output itself is this large); "
            "predict and predict_topk need no N × K array", LargeOutputWarning, stacklevel=3)


def full_scores(coef, X, intercept=None, budget=None, what="scores"):
    """The (N, K) scores, filled tile by tile (the output is the only N × K array)."""
    n, K = X.shape[0], np.shape(coef)[0]
    check_output_size(n, K, what)
    out = np.empty((n, K))
    for r0, r1, c0, c1, s in score_tiles(coef, X, intercept, budget):
        out[r0:r1, c0:c1] = s
    return out


def _row_blocks(out, budget):
    rows = max(1, _budget(budget) // (8 * max(out.shape[1], 1)))
    for r0 in range(0, out.shape[0], rows):
        yield slice(r0, r0 + rows)


def softmax_rows(out, budget=None):
    """Softmax of each row of ``out``, in place, a bounded block of rows at a time."""
    for b in _row_blocks(out, budget):
        out[b] = softmax(out[b], axis=1)
    return out


def log_softmax_rows(out, budget=None):
    """``s − log Σ exp(s)`` of each row of ``out``, in place, a bounded block at a time."""
    for b in _row_blocks(out, budget):
        out[b] -= np.logaddexp.reduce(out[b], axis=1, keepdims=True)
    return out


# ------------------------------------------------------------------ MIPS oracles ------------
def _augmented_weights(coef, intercept):
    coef = np.asarray(coef, np.float64)
    if intercept is None:
        return coef
    return np.hstack([coef, np.asarray(intercept, np.float64)[:, None]])


def _augmented_queries(X, intercept):
    X = sp.csr_matrix(X, dtype=np.float64)
    if intercept is None:
        return X
    return sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")


def _model_key(coef, intercept):
    """What identifies the weights an oracle was built on: the arrays and their shapes."""
    return (id(coef), np.shape(coef), None if intercept is None else id(intercept))


def build_index(oracle, coef, intercept=None):
    """Build ``oracle`` (an instance or a name of :mod:`xclib.mips`) on the rows
    ``[coef, intercept]`` (the intercept as one more column) and return it."""
    from .mips import make_oracle

    oracle = make_oracle(oracle)
    if not hasattr(oracle, "query_topk"):
        raise TypeError(f"oracle must be one of xclib.mips' oracles (ExactMIPS, SimpleLSH, "
                        f"HNSWMIPS) or their names, got {oracle!r}")
    oracle.build(_augmented_weights(coef, intercept))
    oracle._model_key = _model_key(coef, intercept)
    return oracle


def oracle_topk(oracle, coef, X, k, intercept=None):
    """``(idx, val)`` (N, k) from a MIPS oracle: its k classes of largest score per row, in
    decreasing (exactly re-computed) score. Builds the oracle unless it was built on these
    very weights (:func:`build_index`)."""
    k = check_k(k, np.shape(coef)[0])
    if isinstance(oracle, str) or getattr(oracle, "_model_key", None) != _model_key(
            coef, intercept):
        oracle = build_index(oracle, coef, intercept)
    Xa = _augmented_queries(X, intercept)
    n = Xa.shape[0]
    idx, val = np.empty((n, k), np.int64), np.empty((n, k))
    rows = max(1, _budget(None) // (8 * Xa.shape[1]))    # graph oracles densify queries
    for r0 in range(0, n, rows):
        idx[r0:r0 + rows], val[r0:r0 + rows] = oracle.query_topk(Xa[r0:r0 + rows], k)
    return idx, val


def topk_recall(approx, exact):
    """Recall@k of an approximate top-k against the exact one: the mean over rows of
    ``|approx_i ∩ exact_i| / k`` (both (N, k) arrays of classes; order does not matter)."""
    approx, exact = np.asarray(approx), np.asarray(exact)
    if approx.shape != exact.shape or approx.ndim != 2:
        raise ValueError(f"approx and exact must be (N, k) arrays of one shape, got "
                         f"{approx.shape} and {exact.shape}")
    if approx.size == 0:
        raise ValueError("recall of an empty top-k (N = 0 or k = 0) is undefined")
    hits = sum(np.sum(np.any(approx == exact[:, [j]], axis=1)) for j in range(exact.shape[1]))
    return float(hits) / exact.size
