"""The numba kernels of DS-MLR (Raman et al. 2019): eq. (13) and the partial sums of eq. (9).

Plain arrays only (a data block as CSR ``indptr/indices/data`` with local row numbers, a
parameter block ``W`` of shape (K_block, D), the block's ``b``), ``nogil`` so that one thread per
worker runs in parallel. ``alpha`` is Raman et al.'s λ of eq. (2) (the same mean-loss scale).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import LAZY_SCALE_MIN, logaddexp, sparse_row_axpy, sparse_row_dot

__all__ = ["block_sgd", "block_lse", "column_sgd"]

@njit(cache=True, nogil=True)
def _fold(w, scale):
    """``w *= scale`` in place (the lazy ridge shrink made explicit)."""
    for j in range(w.shape[0]):
        w[j] *= scale


@njit(cache=True, nogil=True)
def _class_sweep(indptr, indices, data, y, b, rows, w, k_global, step, shrink):
    """Eq. (13) for one class over ``rows`` (lazy ridge scale), ``b`` fixed; in place on ``w``."""
    scale = 1.0
    for ii in range(rows.shape[0]):
        i = rows[ii]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        s = scale * sparse_row_dot(idx, val, w) + b[i]
        g = math.exp(s) - (1.0 if y[i] == k_global else 0.0)
        scale *= shrink
        sparse_row_axpy(-step * g / scale, idx, val, w)
        if abs(scale) < LAZY_SCALE_MIN:
            _fold(w, scale)
            scale = 1.0
    if scale != 1.0:
        _fold(w, scale)


@njit(cache=True, nogil=True)
def block_sgd(indptr, indices, data, y, b, rows, W, classes, class_offset, eta, alpha,
              n_classes, b_step):
    """Eq. (13) over one data block × one parameter block, in place.

    For each row ``i`` of ``rows`` (in that order) and each class ``k`` of ``classes`` (in that
    order) it takes the step ``w_k ← (1 − η K α) w_k − η K (exp(w_kᵀx_i + b_i) − y_ik) x_i``.
    The ridge shrink is kept as a lazy per-class scale so one step costs O(nnz(x_i)), not
    O(D); the scale is folded back into ``W`` at the end (O(|block| D), the size of the block
    that is sent anyway).

    **Loop order.** With the exact ``b`` of eq. (9) (``b_step = 0``) a step on ``w_k`` reads
    only ``w_k``, ``x_i`` and the fixed ``b_i``: the K_block sequences of steps are independent,
    so running them class by class (each class over all rows, in the order ``rows``) gives the
    same numbers, bit for bit, as the row-by-row order, and keeps one ``w_k`` in cache instead
    of touching every row of the block's ``W`` for every data row (3–4× faster once the block's
    ``W`` no longer fits in cache). With the stochastic ``b`` the steps interact through ``b_i``
    and the rows-then-classes order is kept.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of the data block (local row numbering)
    y : int64 (n_local,) global labels ; b : float64 (n_local,) the block's b_i
    rows : int64 permutation of local rows ; W : (K_block, D) parameter block, updated in place
    classes : int64 permutation of local class numbers ``0..K_block-1``
    class_offset : global number of local class 0 ; eta : η_t ; alpha : λ of eq. (2)
    n_classes : K
    b_step : 0 for the exact b of eq. (9) (b untouched here); > 0 to also take the stochastic
        step ``b_i ← b_i − b_step (K exp(w_kᵀx_i + b_i) − 1)`` (gradient of eq. (12) in b_i,
        scaled like eq. (13)) — the unstable alternative the paper avoids.
    """
    kb = W.shape[0]
    step = eta * n_classes
    shrink = 1.0 - step * alpha
    if b_step == 0.0:
        for kk in range(classes.shape[0]):
            k = classes[kk]
            _class_sweep(indptr, indices, data, y, b, rows, W[k], class_offset + k, step,
                         shrink)
        return
    scale = np.ones(kb)
    for ii in range(rows.shape[0]):
        i = rows[ii]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        for kk in range(classes.shape[0]):
            k = classes[kk]
            s = scale[k] * sparse_row_dot(idx, val, W[k]) + b[i]
            e = math.exp(s)
            g = e - (1.0 if y[i] == class_offset + k else 0.0)
            scale[k] *= shrink
            sparse_row_axpy(-step * g / scale[k], idx, val, W[k])
            if abs(scale[k]) < LAZY_SCALE_MIN:
                _fold(W[k], scale[k])
                scale[k] = 1.0
            b[i] -= b_step * (n_classes * e - 1.0)
    for k in range(kb):
        if scale[k] != 1.0:
            _fold(W[k], scale[k])


#: rows per tile of :func:`block_lse` (a tile's scores, K_block × TILE, stay in cache)
_TILE = 128


@njit(cache=True, nogil=True)
def block_lse(indptr, indices, data, W, out):
    """Partial sums for eq. (9): ``out[i] = log Σ_{k in block} exp(w_kᵀx_i)``, O(nnz · K_block).

    Rows are taken in tiles of ``_TILE``; within a tile the scores are computed class by
    class (one ``w_k`` in cache for the whole tile), then each row's max-shifted sum is taken
    in class order (the same numbers as the row-by-row order).
    """
    n = indptr.shape[0] - 1
    kb = W.shape[0]
    s = np.empty((kb, _TILE))
    for i0 in range(0, n, _TILE):
        i1 = min(n, i0 + _TILE)
        for k in range(kb):
            wk = W[k]
            for i in range(i0, i1):
                s[k, i - i0] = sparse_row_dot(indices[indptr[i]:indptr[i + 1]],
                                              data[indptr[i]:indptr[i + 1]], wk)
        for i in range(i0, i1):
            m = -np.inf
            for k in range(kb):
                if s[k, i - i0] > m:
                    m = s[k, i - i0]
            acc = 0.0
            for k in range(kb):
                acc += math.exp(s[k, i - i0] - m)
            out[i] = m + math.log(acc)


@njit(cache=True, nogil=True)
def column_sgd(indptr, indices, data, y, b, rows, w, k, eta, alpha, n_classes, lse_acc):
    """The asynchronous unit (Algorithm 2, lines 13–14): column ``w_k`` against a data block.

    Takes eq. (13) for class ``k`` over ``rows`` in that order (lazy ridge scale as in
    :func:`block_sgd`), then adds ``exp(w_kᵀx_i)`` of the updated column to the running
    partial sums ``lse_acc`` (kept on the log scale: ``lse_acc[i] ← logaddexp(lse_acc[i], s)``).
    """
    step = eta * n_classes
    _class_sweep(indptr, indices, data, y, b, rows, w, k, step, 1.0 - step * alpha)
    n = indptr.shape[0] - 1
    for i in range(n):
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        lse_acc[i] = logaddexp(lse_acc[i], sparse_row_dot(idx, val, w))
