"""Synthetic data: a sparse true softmax model with Zipf class sizes, and the A&R toy.

No files: both generators are seeded and deterministic. :func:`make_softmax_data` draws
labels exactly from ``p(y = k | x) ∝ exp(w_k · x)`` (Fagan & Iyengar, eq. 1) without ever
forming an N × K matrix, so K = 10^5 and beyond is cheap; :func:`make_augment_reduce_toy` is
the label-only toy of Ruiz et al. (2018), Section 4.1.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..base import as_csr, as_generator

__all__ = ["make_softmax_data", "make_augment_reduce_toy"]


def make_augment_reduce_toy(n_classes=10_000, n_samples=300_000, random_state=0):
    """The toy of Ruiz et al. (2018), Section 4.1: labels without covariates.

    ``p_k ∝ p̃_k²`` with ``p̃_k ~ U[0, 1]`` i.i.d., then ``n_samples`` labels drawn from ``p``.

    Returns
    -------
    y : int64 array, shape (n_samples,)
    p : float64 array, shape (n_classes,), the true class probabilities (sum to 1)
    """
    rng = np.random.default_rng(random_state)
    pt = rng.uniform(size=n_classes)
    p = pt**2
    p /= p.sum()
    y = rng.choice(n_classes, size=n_samples, p=p).astype(np.int64)
    return y, p


@njit(cache=True)
def _sample_softmax_labels(indptr, indices, data, wt_indptr, wt_indices, wt_data, b, cum_b, u):
    """Draw ``y_i ~ softmax(b + W x_i)`` exactly, in O(|A_i| log |A_i| + log K) per row.

    ``W`` is sparse: ``wt_*`` is ``W[:, :-1].T`` in CSR (feature -> classes using it). Only the
    classes ``A_i`` sharing a feature with ``x_i`` have a score ``s_k = w_k . x_i != 0``; the
    others have probability ``∝ exp(b_k)``. With ``Z_A = Σ_{k∈A} exp(b_k + s_k)`` and
    ``Z_rest = Σ_{k∉A} exp(b_k)``, ``t = u_i (Z_A + Z_rest)`` falls either in ``A`` (scan it)
    or in the background, where the class is the smallest ``k ∉ A`` with
    ``cum_b[k] - Σ_{a∈A, a≤k} exp(b_a) > t - Z_A`` (binary search; such a ``k`` is never in A).

    Parameters
    ----------
    indptr, indices, data : CSR of X without its bias column.
    wt_indptr, wt_indices, wt_data : CSR of ``W[:, :-1].T``, shape (D-1, K).
    b : (K,) class biases; cum_b : (K,) prefix sums of ``exp(b)``.
    u : (N,) uniforms in [0, 1), drawn by the caller.
    """
    n = indptr.shape[0] - 1
    K = b.shape[0]
    score = np.zeros(K)
    mark = np.zeros(K, np.bool_)
    touched = np.empty(K, np.int64)
    y = np.empty(n, np.int64)
    total_b = cum_b[K - 1]
    eb = np.exp(b)
    for i in range(n):
        m = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            xj = data[p]
            for q in range(wt_indptr[j], wt_indptr[j + 1]):
                k = wt_indices[q]
                if not mark[k]:
                    mark[k] = True
                    touched[m] = k
                    m += 1
                score[k] += xj * wt_data[q]
        z_a = 0.0
        acc = 0.0
        for r in range(m):
            k = touched[r]
            z_a += eb[k] * np.exp(score[k])
            acc += eb[k]
        z_rest = max(total_b - acc, 0.0)
        t = u[i] * (z_a + z_rest)
        if t < z_a or z_rest <= 0.0:  # inside A, scanned in first-touched order
            c = 0.0
            pick = touched[m - 1] if m > 0 else 0
            for r in range(m):
                k = touched[r]
                c += eb[k] * np.exp(score[k])
                if c > t:
                    pick = k
                    break
        else:  # the background, outside A: needs A sorted
            A = np.sort(touched[:m])
            rem = np.empty(m)  # prefix sums of exp(b_a) over sorted A
            acc = 0.0
            for r in range(m):
                acc += eb[A[r]]
                rem[r] = acc
            t -= z_a
            lo, hi = 0, K - 1  # smallest k with g(k) = cum_b[k] - removed(k) > t
            while lo < hi:
                mid = (lo + hi) // 2
                r = np.searchsorted(A, mid, side="right")
                g = cum_b[mid] - (rem[r - 1] if r > 0 else 0.0)
                if g > t:
                    hi = mid
                else:
                    lo = mid + 1
            pick = lo
            while mark[pick] and pick < K - 1:  # rounding at a boundary: step off A
                pick += 1
        y[i] = pick
        for r in range(m):
            score[touched[r]] = 0.0
            mark[touched[r]] = False
    return y


def make_softmax_data(n_samples, n_features, n_classes, nnz_per_row=10, zipf_exponent=1.0,
                      scale=4.0, features_per_class=5, random_state=0):
    """Sparse data drawn from a true softmax model with Zipf-distributed class sizes.

    The model: ``p(y = k | x) ∝ exp(w_k · x)`` (Fagan & Iyengar eq. 1) with

    * ``x``: ``nnz_per_row - 1`` random features (uniform over the first ``n_features - 1``,
      repeats merged) of value ``1/sqrt(nnz_per_row - 1)`` (unit norm), plus the last
      feature, a constant 1 (the bias feature);
    * ``W_true`` sparse: class ``k`` weighs ``features_per_class`` random features with
      ``N(0, scale²)`` weights, and its bias feature with ``b_k = -zipf_exponent·log(k+1)``.

    Without the features, class ``k`` would have probability ``∝ (k+1)^(-zipf_exponent)``
    (Zipf, class 0 the largest); the features move each row's mass toward the few classes
    sharing its features, so class sizes stay close to Zipf while labels depend on ``x``.
    Labels are drawn exactly, without any N × K matrix: per row only the classes sharing
    a feature with it are scored (:func:`_sample_softmax_labels`), so K = 10^5 is fast.

    Parameters
    ----------
    n_samples, n_features, n_classes : int
        N, D (including the bias feature; D ≥ 2) and K (≥ 2).
    nnz_per_row : int
        Stored entries per row (at most; repeated features merge), including the bias.
    zipf_exponent : float
        Exponent ``s`` of the class-size law ``∝ (k+1)^-s``; 0 gives balanced classes.
    scale : float
        Standard deviation of the non-bias weights: larger = labels more predictable.
    features_per_class : int
        Non-zero non-bias weights per class.
    random_state : int or numpy.random.Generator

    Returns
    -------
    X : scipy.sparse.csr_matrix, float64, (N, D); the last column is all ones
    y : int64 array, (N,), values in 0..K-1
    W_true : scipy.sparse.csr_matrix, float64, (K, D); ``W_true[:, -1]`` are the biases
    """
    N, D, K = int(n_samples), int(n_features), int(n_classes)
    if N < 1 or D < 2 or K < 2:
        raise ValueError(f"need n_samples >= 1, n_features >= 2, n_classes >= 2; got {N}, {D}, {K}")
    if nnz_per_row < 2 or features_per_class < 1:
        raise ValueError("need nnz_per_row >= 2 and features_per_class >= 1")
    rng = as_generator(random_state)
    m = int(nnz_per_row) - 1
    f = int(features_per_class)
    # the true weights: K x (D-1) sparse, plus the bias column
    wcols = rng.integers(0, D - 1, size=(K, f))
    wvals = rng.normal(0.0, scale, size=(K, f))
    b = -float(zipf_exponent) * np.log1p(np.arange(K, dtype=np.float64))
    rows = np.repeat(np.arange(K), f + 1)
    cols = np.concatenate([wcols, np.full((K, 1), D - 1)], axis=1).ravel()
    vals = np.concatenate([wvals, b[:, None]], axis=1).ravel()
    W = as_csr(sp.coo_matrix((vals, (rows, cols)), shape=(K, D)))  # repeats summed
    # the features
    xcols = rng.integers(0, D - 1, size=(N, m))
    xrows = np.repeat(np.arange(N), m)
    Xf = as_csr(sp.coo_matrix((np.full(N * m, 1.0 / np.sqrt(m)), (xrows, xcols.ravel())),
                              shape=(N, D - 1)))  # repeated features merged
    # the labels
    Wt = as_csr(W[:, : D - 1].T)  # feature -> the classes using it
    u = rng.random(N)
    y = _sample_softmax_labels(Xf.indptr, Xf.indices, Xf.data, Wt.indptr, Wt.indices, Wt.data,
                               b, np.cumsum(np.exp(b)), u)
    X = as_csr(sp.hstack([Xf, sp.csr_matrix(np.ones((N, 1)))], format="csr"))
    return X, y, W
