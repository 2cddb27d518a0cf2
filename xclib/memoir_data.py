"""Many-class sparse data for MEMOIR's measurements: rows near a sparse class prototype.

Our real data sets stop at a few hundred classes; :func:`make_prototype_data` takes K to 10^5
with queries that are "class-like", as in text data (:mod:`xclib.memoir`).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["make_prototype_data"]


def make_prototype_data(n_samples, n_features, n_classes, nnz_per_row=20, n_noise=5,
                        noise=0.5, zipf_exponent=1.0, random_state=0):
    """Sparse many-class data whose rows lie near their class's sparse prototype.

    Class ``c`` (drawn with Zipf probabilities ``∝ (c+1)^(−zipf_exponent)``) has a prototype on
    ``nnz_per_row`` random features with N(0, 1) values; a row keeps that support with values
    ``prototype + noise · N(0, 1)``, adds ``n_noise`` random features of N(0, noise²) and is
    L2-normalised. The queries MEMOIR makes on it are "class-like", as in text data; K can be
    taken to 10^5 where our real sets stop at a few hundred classes.

    Returns ``(X csr (n, D) float64, y (n,) int64)``.
    """
    rng = np.random.default_rng(random_state)
    p = 1.0 / np.arange(1, n_classes + 1) ** zipf_exponent
    y = rng.choice(n_classes, size=n_samples, p=p / p.sum()).astype(np.int64)
    proto_idx = np.sort(np.argsort(rng.random((n_classes, n_features)), axis=1)[:, :nnz_per_row]
                        if n_features * n_classes <= 5e7 else
                        np.stack([rng.choice(n_features, nnz_per_row, replace=False)
                                  for _ in range(n_classes)]), axis=1)
    proto_val = rng.standard_normal((n_classes, nnz_per_row))
    cols = np.concatenate([proto_idx[y], rng.integers(0, n_features, (n_samples, n_noise))],
                          axis=1)
    vals = np.concatenate([proto_val[y] + noise * rng.standard_normal((n_samples, nnz_per_row)),
                           noise * rng.standard_normal((n_samples, n_noise))], axis=1)
    rows = np.repeat(np.arange(n_samples), nnz_per_row + n_noise)
    X = sp.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(n_samples, n_features))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ X
    return sp.csr_matrix(X), y
