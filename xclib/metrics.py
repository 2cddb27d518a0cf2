"""Exact softmax metrics that never form more than a bounded block of the N × K score matrix.

``softmax_log_loss`` is the mean negative log-likelihood of Fagan & Iyengar eq. (2)
(without the ridge term), ``softmax_error`` the 0/1 error of the arg-max class, and
``true_label_rank`` the rank of the true label among all K scores (DS-MLR's Figure 6).
Where scikit-learn already computes a metric (accuracy, macro-F1) we wrap it.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn import metrics as _skm

__all__ = [
    "score_blocks",
    "softmax_log_loss",
    "softmax_error",
    "softmax_loss_and_error",
    "true_label_rank",
    "accuracy",
    "macro_f1",
]

#: Largest number of score-matrix entries held in memory at once (rows × K).
BLOCK_ENTRIES = 1 << 22


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
    total = 0.0
    wrong = 0
    for start, stop, s in score_blocks(coef, X, intercept):
        yy = y[start:stop]
        true = s[np.arange(stop - start), yy]
        total += float(np.sum(row_logsumexp(s) - true))
        wrong += int(np.sum(np.argmax(s, axis=1) != yy))
    loss = total / n if normalize else total
    return loss, wrong / n


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
