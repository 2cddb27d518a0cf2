"""Fagan & Iyengar, Appendix F.3: the fixed minibatches of Implicit SGD with n datapoints
and m classes per step, and what is computed from them once per fit (F.3.1, F.3.4), or once
per epoch (the classes drawn outside each step's labels); :mod:`xclib.unbiased.minibatch`
has the derivation and the step."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from threadpoolctl import threadpool_limits

__all__ = ["Batches", "make_batches", "batch_factors", "batch_labels",
           "minibatch_class_weights", "draw_batch_classes"]

_RANK_TOL = 1e-10  # eigenvalues of the normalised Gram matrix below this are dropped


class Batches(NamedTuple):
    """The fixed minibatches of a fit and their factors (F.3.1, F.3.4), built once per fit
    (:func:`make_batches`, :func:`batch_factors`) and passed to
    :func:`~xclib.unbiased.minibatch.minibatch_epoch` as one typed argument."""

    bptr: np.ndarray   # (J + 1,) the fixed minibatches S_j = brows[bptr[j]:bptr[j+1]]
    brows: np.ndarray  # (N,)
    B: np.ndarray      # (J, n, n) the b_i of eq. (21), padded
    M: np.ndarray      # (J, n, n) r_k = M a_k, padded
    rank: np.ndarray   # (J,) q_j


# -- the fixed minibatches and their precomputation (F.3.1, F.3.4) -------------------------
def make_batches(rng, n_rows, batch_size):
    """A seeded shuffle split into ``ceil(N/n)`` batches: ``(bptr, brows)`` (CSR-like)."""
    rows = rng.permutation(n_rows).astype(np.int64)
    bptr = np.r_[np.arange(0, n_rows, batch_size), n_rows].astype(np.int64)
    return bptr, rows


@njit(cache=True, nogil=True)
def _batch_grams(indptr, indices, data, inv, bptr, brows, n):
    """(J, n, n) Gram matrices of the rows scaled by ``inv`` (sorted CSR indices: merge)."""
    J = bptr.shape[0] - 1
    G = np.zeros((J, n, n))
    for j in range(J):
        rows = brows[bptr[j]:bptr[j + 1]]
        for a in range(rows.shape[0]):
            ra = rows[a]
            for b in range(a + 1):
                rb = rows[b]
                p, q, e = indptr[ra], indptr[rb], 0.0
                while p < indptr[ra + 1] and q < indptr[rb + 1]:
                    if indices[p] == indices[q]:
                        e += (data[p] * inv[ra]) * (data[q] * inv[rb])
                        p += 1
                        q += 1
                    elif indices[p] < indices[q]:
                        p += 1
                    else:
                        q += 1
                G[j, a, b] = G[j, b, a] = e
    return G


def batch_factors(X, bptr, brows):
    """Per batch ``B`` (n × q) and ``M`` (n × q) with ``BBᵀ = G = X_S X_Sᵀ``, ``MᵀGM = I``,
    ``GM = B``; from ``Ĝ = D⁻¹GD⁻¹ = ÛΛÛᵀ`` (D the row norms): ``B = DÛΛ^½``,
    ``M = D⁻¹ÛΛ^{-½}`` (scale-free rank test). Returns ``(B, M, rank)``, B and M padded
    to (J, n, n)."""
    J = bptr.shape[0] - 1
    n = int(np.max(np.diff(bptr))) if J else 0
    mx = np.asarray(abs(X).max(axis=1).todense(), dtype=np.float64).ravel()
    mx = np.where(mx > 0, mx, 1.0)
    Xh = X.multiply(1.0 / mx[:, None]).tocsr()  # norms without overflow
    d = np.sqrt(np.asarray(Xh.multiply(Xh).sum(axis=1), dtype=np.float64).ravel())
    d = np.where(d > 0, d, 1.0)
    G = _batch_grams(X.indptr, X.indices, X.data, 1.0 / (d * mx), bptr, brows, n)
    d *= mx
    B, M = np.zeros((J, n, n)), np.zeros((J, n, n))
    rank = np.zeros(J, dtype=np.int64)
    with threadpool_limits(1, "blas"):
        for j in range(J):
            nb = int(bptr[j + 1] - bptr[j])
            lam, U = np.linalg.eigh(G[j, :nb, :nb])
            keep = lam > _RANK_TOL
            q = int(np.sum(keep))
            lam, U, dj = lam[keep], U[:, keep], d[brows[bptr[j]:bptr[j + 1]]]
            B[j, :nb, :q] = dj[:, None] * U * np.sqrt(lam)
            M[j, :nb, :q] = U / np.sqrt(lam) / dj[:, None]
            rank[j] = q
    return B, M, rank


def batch_labels(y, bptr, brows):
    """The distinct labels ``L_j`` of every fixed minibatch, sorted: ``(lptr, labs)`` with
    ``L_j = labs[lptr[j]:lptr[j+1]]`` (computed once per fit, vectorised)."""
    J = bptr.shape[0] - 1
    bid = np.repeat(np.arange(J), np.diff(bptr))
    lab = np.asarray(y)[brows]
    o = np.lexsort((lab, bid))
    bid, lab = bid[o], lab[o]
    first = np.r_[True, (bid[1:] != bid[:-1]) | (lab[1:] != lab[:-1])]
    return np.searchsorted(bid[first], np.arange(J + 1)).astype(np.int64), \
        lab[first].astype(np.int64)


def minibatch_class_weights(labels, n_classes, n_sampled):
    """``β_k = 1/((1/J) Σ_j [1{k∈L_j} + 1{k∉L_j} m_j/(K − |L_j|)])`` (module docstring);
    ``labels`` from :func:`batch_labels`."""
    lptr, labs = labels
    rest = n_classes - np.diff(lptr)
    c = np.divide(np.minimum(n_sampled, rest), rest, out=np.zeros(rest.shape[0]),
                  where=rest > 0)
    p = np.full(n_classes, c.sum())
    np.add.at(p, labs, np.repeat(1.0 - c, np.diff(lptr)))
    return (lptr.shape[0] - 1) / p


@njit(cache=True, nogil=True)
def _floyd_classes(lptr, labs, order, n_classes, u, out):
    """Floyd's sampling of ``m_j`` distinct classes outside ``L_j`` for each step, from the
    uniforms ``u`` (T, m): position r of the ``rest`` outside classes is the class
    ``r + #{labels ≤ that class}`` (the labels are sorted)."""
    m = u.shape[1]
    for t in range(order.shape[0]):
        j = order[t]
        lo, hi = lptr[j], lptr[j + 1]
        rest = n_classes - (hi - lo)
        k = min(m, rest)
        for c in range(k):
            i = rest - k + c
            r = min(int(u[t, c] * (i + 1)), i)  # uniform on 0..i
            for c2 in range(c):
                if out[t, c2] == r:
                    r = i
                    break
            out[t, c] = r
        for c in range(k):  # the r-th class outside the labels
            cls = out[t, c]
            for a in range(lo, hi):
                if labs[a] <= cls:
                    cls += 1
            out[t, c] = cls


def draw_batch_classes(rng, labels, order, n_classes, n_sampled):
    """For each step (batch ``order[t]``) ``m_j = min(m, K − |L_j|)`` distinct classes
    outside its labels, uniformly (Floyd's algorithm); a (T, m) array padded with −1.
    ``labels`` from :func:`batch_labels`."""
    out = np.full((order.shape[0], n_sampled), -1, dtype=np.int64)
    _floyd_classes(labels[0], labels[1], order, n_classes,
                   rng.random((order.shape[0], n_sampled)), out)
    return out
