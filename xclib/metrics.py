"""Exact softmax metrics that never form more than a bounded block of the N × K score matrix.

``softmax_log_loss`` is the mean negative log-likelihood of Fagan & Iyengar eq. (2)
(without the ridge term), ``softmax_error`` the 0/1 error of the arg-max class, and
``true_label_rank`` the rank of the true label among all K scores (DS-MLR's Figure 6).
Where scikit-learn already computes a metric (accuracy, macro-F1) we wrap it.

Multi-label ranking metrics
---------------------------
The extreme-classification repository (Bhatia et al.) judges a ranking of the L labels by
its top k against the set of true labels ``y_i`` (a CSR N × L indicator):

``precision_at_k``   P@k = (1/k) Σ_{j ≤ k} y_{i, r_ij}, the mean over rows
``ndcg_at_k``        nDCG@k = Σ_{j ≤ k} y_{i, r_ij} / log2(j + 1) divided by its largest
                     value, Σ_{j ≤ min(k, |y_i|)} 1 / log2(j + 1)
``psprecision_at_k`` PSP@k = (1/k) Σ_{j ≤ k} y_{i, r_ij} / p_{r_ij} (Jain et al. 2016,
                     eq. 4) with the propensities of :func:`propensity`; ``normalize=True``
                     divides by the best PSP@k any ranking of row i attains (what the
                     repository's evaluation code reports)

A ranking is either an (N, k') integer array of label columns, best first (−1: no label
predicted there), or an (N, L) float array (dense or sparse) of scores, ranked here in
bounded row blocks (equal scores: the smaller column first). A row without any true label
counts 0 in every metric (and 1 in the mean's denominator).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit
from sklearn import metrics as _skm

from ._numba import exp_shifted

__all__ = [
    "score_blocks",
    "softmax_log_loss",
    "softmax_error",
    "softmax_loss_and_error",
    "true_label_rank",
    "accuracy",
    "macro_f1",
    "propensity",
    "rank_scores",
    "precision_at_k",
    "ndcg_at_k",
    "psprecision_at_k",
    "ranking_metrics",
]

#: Largest number of score-matrix entries held in memory at once (rows × K).
BLOCK_ENTRIES = 1 << 22

#: Least K at which CSR rows take the fused kernel ``_csr_loss_error``: 2.1-2.4x the blocked
#: path on ALOI (K = 1,000), 1.4-1.9x on Bibtex (146), 1.25x on CLEF (63), even on
#: 20 Newsgroups (20) and 0.6x on MNIST (10), where scipy's product over few columns is
#: faster (``benchmarks/bench_loss_eval.py``, between runs).
FUSED_MIN_CLASSES = 32


def score_blocks(coef, X, intercept=None, block_entries=BLOCK_ENTRIES):
    """Yield ``(start, stop, scores)`` with ``scores = X[start:stop] @ coef.T (+ intercept)``.

    Each block has at most ``block_entries`` entries (at least one row), so an N × K matrix
    is never formed for large N·K.
    """
    coef = np.asarray(coef, dtype=np.float64)
    n = X.shape[0]
    k = coef.shape[0]
    rows = max(1, int(block_entries // max(k, 1)))
    coef_t = np.ascontiguousarray(coef.T)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        s = (X if (start == 0 and stop == n) else X[start:stop]) @ coef_t
        s = np.asarray(s.toarray() if sp.issparse(s) else s, dtype=np.float64)
        if intercept is not None:
            s = s + intercept
        yield start, stop, s


def row_logsumexp(s):
    """``log Σ_k exp(s_ik)`` per row of a 2-D array, stably. (``scipy.special.logsumexp``
    gives the same numbers but costs about 10× more here, through its array-API layer.)"""
    m = s.max(axis=1)
    return m + np.log(np.exp(s - m[:, None]).sum(axis=1))


def _check_labels(y, n_classes, n_rows):
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n_rows:
        raise ValueError(f"y must be 1-D with {n_rows} entries, got shape {y.shape}")
    if n_rows and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(
            f"labels must be encoded as 0..{n_classes - 1} (rows of coef); got range "
            f"[{y.min()}, {y.max()}]"
        )
    return y.astype(np.int64, copy=False)


@njit(cache=True, nogil=True)
def _csr_loss_error(indptr, indices, data, coef_t, intercept, y):
    """Σ_i (log Σ_k e^{s_ik} − s_{i,y_i}) and the number of rows whose first arg-max is not
    y_i, for ``s_i = W x_i + b`` of CSR rows: one row of K scores at a time, each non-zero
    adding a contiguous row of ``coef_t`` (D, K), the exponentials vectorised
    (:func:`~xclib._numba.exp_shifted`). Finite inputs only."""
    n, k = indptr.shape[0] - 1, coef_t.shape[1]
    s = np.empty(k)
    total, wrong = 0.0, 0
    for i in range(n):
        s[:] = intercept
        for p in range(indptr[i], indptr[i + 1]):
            v, j = data[p], indices[p]
            for c in range(k):
                s[c] += v * coef_t[j, c]
        best, m = 0, s[0]
        for c in range(1, k):
            if s[c] > m:
                best, m = c, s[c]
        wrong += best != y[i]
        true = s[y[i]]
        total += m + np.log(exp_shifted(s, m)) - true
    return total, wrong


def softmax_loss_and_error(coef, X, y, intercept=None, normalize=True):
    """Exact softmax log-loss and 0/1 error in one pass over the data.

    Parameters
    ----------
    coef : array (K, D)
    X : array or sparse matrix (N, D)
    y : int array (N,), labels encoded as 0..K-1
    intercept : array (K,) or None
    normalize : bool
        Mean over rows (True) or sum (False) for the log-loss; the error is always a rate.

    Returns
    -------
    (log_loss, error) : tuple of float
        ``log_loss = −(1/N) Σ_i log softmax(W x_i)_{y_i}``.
    """
    n = X.shape[0]
    if n == 0:
        raise ValueError("cannot evaluate a loss on 0 rows")
    y = _check_labels(y, np.asarray(coef).shape[0], n)
    coef = np.asarray(coef, dtype=np.float64)
    if sp.issparse(X) and X.format == "csr" and coef.shape[0] >= FUSED_MIN_CLASSES:
        b = np.zeros(coef.shape[0]) if intercept is None else \
            np.asarray(intercept, dtype=np.float64)
        data = np.asarray(X.data, dtype=np.float64)
        if np.isfinite(coef).all() and np.isfinite(b).all() and np.isfinite(data).all():
            total, wrong = _csr_loss_error(X.indptr, X.indices, data,
                                           np.ascontiguousarray(coef.T), b, y)
            return (total / n if normalize else total), wrong / n
    total, wrong = blocked_loss_error(coef, X, y, intercept)
    return (total / n if normalize else total), wrong / n


def blocked_loss_error(coef, X, y, intercept=None, block_entries=BLOCK_ENTRIES):
    """(summed log-loss, number wrong) through :func:`score_blocks` and numpy: the path of
    dense rows and of non-finite inputs (NaN propagates), and the fused kernel's reference."""
    total = 0.0
    wrong = 0
    for start, stop, s in score_blocks(coef, X, intercept, block_entries):
        yy = y[start:stop]
        true = s[np.arange(stop - start), yy]
        total += float(np.sum(row_logsumexp(s) - true))
        wrong += int(np.sum(np.argmax(s, axis=1) != yy))
    return total, wrong


def softmax_log_loss(coef, X, y, intercept=None, normalize=True):
    """Exact softmax log-loss (see :func:`softmax_loss_and_error`)."""
    return softmax_loss_and_error(coef, X, y, intercept, normalize)[0]


def softmax_error(coef, X, y, intercept=None):
    """Exact 0/1 error of the arg-max class (see :func:`softmax_loss_and_error`)."""
    return softmax_loss_and_error(coef, X, y, intercept)[1]


def true_label_rank(coef, X, y, intercept=None):
    """Rank of the true label's score among all K classes, 1 = best (ties count against).

    Returns an int array (N,). DS-MLR's Figure 6 plots its CDF.
    """
    n = X.shape[0]
    y = _check_labels(y, np.asarray(coef).shape[0], n)
    ranks = np.empty(n, dtype=np.int64)
    for start, stop, s in score_blocks(coef, X, intercept):
        true = s[np.arange(stop - start), y[start:stop]]
        ranks[start:stop] = 1 + np.sum(s > true[:, None], axis=1)
    return ranks


def accuracy(y_true, y_pred):
    """Fraction of correct predictions (``sklearn.metrics.accuracy_score``)."""
    return float(_skm.accuracy_score(y_true, y_pred))


def macro_f1(y_true, y_pred):
    """Unweighted mean of per-class F1 (``sklearn.metrics.f1_score(average="macro")``)."""
    return float(_skm.f1_score(y_true, y_pred, average="macro", zero_division=0))


# ------------------------------------------------------------------ multi-label ranking ----
def _check_truth(Y):
    if not sp.issparse(Y) or Y.ndim != 2:
        raise ValueError("Y_true must be a scipy.sparse (N, L) indicator of the true labels "
                         f"(e.g. load(..., labels='all')), got {type(Y).__name__}")
    Y = sp.csr_matrix(Y, copy=True)
    Y.eliminate_zeros()
    Y.sum_duplicates()
    Y.sort_indices()
    return Y


def propensity(Y_train, A=0.55, B=1.5):
    """Label propensities of Jain, Prabhu & Varma (2016, eq. 3), one per column of ``Y_train``:
    ``p_l = 1 / (1 + C (N_l + B)^(−A))``, ``C = (log N − 1)(B + 1)^A``, with N the rows of
    ``Y_train`` and ``N_l`` those holding label l. A = 0.55, B = 1.5 are the paper's values for
    every set but Wikipedia-LSHTC (0.5, 0.4) and Amazon (0.6, 2.6)."""
    Y = _check_truth(Y_train)
    for name, v in (("A", A), ("B", B)):
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    n = Y.shape[0]
    if n < 1:
        raise ValueError("propensities need at least one training row")
    n_l = np.bincount(Y.indices, minlength=Y.shape[1]).astype(np.float64)
    C = (np.log(n) - 1.0) * (B + 1.0) ** A
    return 1.0 / (1.0 + C * (n_l + B) ** (-A))


def rank_scores(S, k, block_entries=BLOCK_ENTRIES):
    """The k columns of largest score per row of ``S`` (N, L; dense or sparse), best first
    (equal scores: the smaller column first): an (N, k) int64 array."""
    n, L = S.shape
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) \
            or not 1 <= k <= L:
        raise ValueError(f"k must be an integer in [1, {L}] (the number of labels), got {k!r}")
    out = np.empty((n, k), np.int64)
    rows = max(1, int(block_entries // max(L, 1)))
    for start in range(0, n, rows):
        s = S[start:start + rows]
        s = np.asarray(s.toarray() if sp.issparse(s) else s, dtype=np.float64)
        if np.isnan(s).any():
            raise ValueError("scores contain NaN")
        part = np.argpartition(-s, k - 1, axis=1)[:, :k] if k < L else \
            np.broadcast_to(np.arange(L), s.shape)
        v = np.take_along_axis(s, part, 1)
        order = np.lexsort((part, -v), axis=1)
        out[start:start + rows] = np.take_along_axis(part, order, 1)
    return out


@njit(cache=True, nogil=True)
def _hits(indptr, indices, R):
    """``h[i, j] = 1`` where label ``R[i, j]`` is among row i's (sorted) true labels."""
    n, k = R.shape
    h = np.zeros((n, k), np.float64)
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        for j in range(k):
            r = R[i, j]
            if r < 0:
                continue
            a, b = lo, hi
            while a < b:
                m = (a + b) // 2
                if indices[m] < r:
                    a = m + 1
                else:
                    b = m
            if a < hi and indices[a] == r:
                h[i, j] = 1.0
    return h


def _ranking(Y, pred, k):
    """(hits (N, k), ranked labels (N, k)) of a ranking given as labels or scores."""
    Y = _check_truth(Y)
    n, L = Y.shape
    if not sp.issparse(pred):
        pred = np.asarray(pred)
    if pred.ndim != 2 or pred.shape[0] != n:
        raise ValueError(f"predictions must be an (N, k) array of labels or an (N, L) array "
                         f"of scores with N = {n} rows, got shape {pred.shape}")
    if sp.issparse(pred) or pred.dtype.kind == "f":
        if pred.shape[1] != L:
            raise ValueError(f"scores must have one column per label (L = {L}), got "
                             f"{pred.shape[1]}; ranked labels must be an integer array")
        R = rank_scores(pred, k)
    elif pred.dtype.kind in "iu":
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) \
                or not 1 <= k <= pred.shape[1]:
            raise ValueError(f"k must be an integer in [1, {pred.shape[1]}] (the ranked "
                             f"labels given per row), got {k!r}")
        R = np.ascontiguousarray(pred[:, :k], dtype=np.int64)
        if R.size and (R.min() < -1 or R.max() >= L):
            raise ValueError(f"ranked labels must be label columns in [0, {L}) (or −1 for "
                             f"none), got values in [{R.min()}, {R.max()}]")
    else:
        raise ValueError(f"predictions must hold integer labels or float scores, got dtype "
                         f"{pred.dtype}")
    return _hits(Y.indptr, Y.indices, R), R, Y


def precision_at_k(Y_true, pred, k=5):
    """P@k of a ranking against the true labels (see the module); a float in [0, 1]."""
    h, _, _ = _ranking(Y_true, pred, k)
    return float(h.sum(axis=1).mean() / k) if h.shape[0] else float("nan")


def ndcg_at_k(Y_true, pred, k=5):
    """nDCG@k of a ranking against the true labels (see the module); a float in [0, 1]."""
    h, _, Y = _ranking(Y_true, pred, k)
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.concatenate([[np.inf], np.cumsum(disc)])   # row without labels: 0 / inf
    n_true = np.minimum(np.diff(Y.indptr), k)
    return float(np.mean(h @ disc / ideal[n_true])) if h.shape[0] else float("nan")


def psprecision_at_k(Y_true, pred, k=5, propensities=None, normalize=False):
    """Propensity-scored P@k (Jain et al. 2016) of a ranking: unbiased for the P@k of the
    complete labels when the missing labels follow the propensity model.

    ``propensities``: one per label column (default: :func:`propensity` of ``Y_true``
    itself; pass ``propensity(Y_train)``, or with other A, B, to use the training labels).
    ``normalize=True`` divides each row's value by the best a ranking of it attains (the
    sum of its k largest ``1/p`` among its true labels).
    """
    h, R, Y = _ranking(Y_true, pred, k)
    p = propensity(Y) if propensities is None else np.asarray(propensities, np.float64)
    if p.shape != (Y.shape[1],) or not np.all((p > 0) & (p <= 1)):
        raise ValueError(f"propensities must be {Y.shape[1]} numbers in (0, 1], one per label")
    inv = 1.0 / p
    gain = (h * inv[np.maximum(R, 0)]).sum(axis=1)
    if not normalize:
        return float(gain.mean() / k) if h.shape[0] else float("nan")
    rows = np.repeat(np.arange(Y.shape[0]), np.diff(Y.indptr))
    w = inv[Y.indices]
    order = np.lexsort((-w, rows))               # within each row, largest 1/p first
    keep = np.arange(w.size) - Y.indptr[rows] < k
    best = np.bincount(rows[keep], w[order][keep], minlength=Y.shape[0])
    return float(np.mean(np.divide(gain, best, out=np.zeros_like(gain), where=best > 0)))


def ranking_metrics(Y_true, pred, ks=(1, 3, 5), propensities=None):
    """``{"P@k": .., "nDCG@k": .., "PSP@k": ..}`` for each k of ``ks`` (one ranking of the
    largest k, computed once from scores when ``pred`` holds scores)."""
    kmax = max(ks)
    if sp.issparse(pred) or np.asarray(pred).dtype.kind == "f":
        pred = rank_scores(pred, kmax)
    out = {}
    for k in ks:
        out[f"P@{k}"] = precision_at_k(Y_true, pred, k)
        out[f"nDCG@{k}"] = ndcg_at_k(Y_true, pred, k)
        out[f"PSP@{k}"] = psprecision_at_k(Y_true, pred, k, propensities)
    return out
