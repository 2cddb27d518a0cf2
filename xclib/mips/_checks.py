"""Input checks shared by the MIPS oracles (raised before a kernel could read out of bounds)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..base import as_csr


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
