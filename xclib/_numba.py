"""Numba primitives shared by every chapter, written once.

Plain arrays only: a CSR row is the pair ``(idx, val)`` of its column indices and values
(``X.indices[X.indptr[i]:X.indptr[i+1]]`` and the matching ``X.data`` slice), a weight row is a
1-D float64 array. Every function here is tested against NumPy/SciPy in
``tests/test_numba_primitives.py``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = [
    "dense_dot",
    "sparse_row_dot",
    "sparse_row_axpy",
    "logsumexp",
    "lambertw",
    "lambertw_exp",
    "sigmoid",
    "softplus",
    "log_sigmoid",
    "logaddexp",
    "other_class",
    "draw_other_classes",
]

_E_INV = math.exp(-1.0)


@njit(cache=True, nogil=True)
def dense_dot(a, b):
    """``a · b`` of two 1-D arrays, summed in order in one thread (the small and
    memory-bound vectors of the solvers: BLAS threads would only contend)."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@njit(cache=True, nogil=True)
def sparse_row_dot(idx, val, w):
    """Return ``x · w`` for a sparse row ``x = (idx, val)`` and a dense row ``w``: O(nnz(x))."""
    s = 0.0
    for j in range(idx.shape[0]):
        s += val[j] * w[idx[j]]
    return s


@njit(cache=True, nogil=True)
def sparse_row_axpy(a, idx, val, w):
    """``w += a · x`` in place for a sparse row ``x = (idx, val)``: O(nnz(x))."""
    for j in range(idx.shape[0]):
        w[idx[j]] += a * val[j]


@njit(cache=True, nogil=True)
def logsumexp(a):
    """``log Σ_j exp(a_j)`` of a 1-D array without overflow (``-inf`` for an empty array)."""
    n = a.shape[0]
    if n == 0:
        return -np.inf
    m = a[0]
    for j in range(1, n):
        if a[j] > m:
            m = a[j]
    if m == np.inf:
        return np.inf
    if m == -np.inf:
        return -np.inf
    s = 0.0
    for j in range(n):
        s += math.exp(a[j] - m)
    return m + math.log(s)


@njit(cache=True, nogil=True)
def _refine_w(w, x):
    """Halley iterations on ``w e^w = x`` from the starting point ``w``."""
    for _ in range(50):
        ew = math.exp(w)
        f = w * ew - x
        fp = ew * (w + 1.0)
        if fp == 0.0:
            return w
        step = f / (fp - (w + 2.0) * f / (2.0 * w + 2.0))
        w -= step
        if abs(step) <= 4e-16 * (1.0 + abs(w)):
            break
    return w


@njit(cache=True, nogil=True)
def _refine_w_log(w, z):
    """Newton iterations on ``w + log w = z`` (the log of ``w e^w = e^z``), ``w > 0``."""
    for _ in range(50):
        f = w + math.log(w) - z
        step = f * w / (w + 1.0)
        w_new = w - step
        if w_new <= 0.0:
            w_new = 0.5 * w
        if abs(w_new - w) <= 4e-16 * (1.0 + abs(w_new)):
            return w_new
        w = w_new
    return w


@njit(cache=True, nogil=True)
def lambertw(x):
    """Principal branch W₀(x) for real ``x ≥ −1/e`` (NaN below), to ~1e-15 relative.

    W solves ``w · e^w = x``; matches ``scipy.special.lambertw(x).real``.
    """
    if x != x or x < -_E_INV:
        return np.nan
    if x == -_E_INV:
        return -1.0
    if x == 0.0:
        return 0.0
    if x == np.inf:
        return np.inf
    if x > 1e300:
        # refine on the log scale, where w e^w = x cannot overflow
        lx = math.log(x)
        return _refine_w_log(lx - math.log(lx), lx)
    # Starting points: branch-point series near -1/e, log-based for large x, x otherwise.
    if x < -0.25:
        p = math.sqrt(2.0 * (math.e * x + 1.0))
        w = -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p * p * p
    elif x < 3.0:
        w = math.log1p(x)
        w = w * (1.0 - math.log1p(w) / (2.0 + w))
    else:
        lx = math.log(x)
        w = lx - math.log(lx)
    return _refine_w(w, x)


@njit(cache=True, nogil=True)
def lambertw_exp(z):
    """``W₀(e^z)`` for any real ``z``, computed on the log scale so it never overflows.

    For large ``z`` this is ``z − log z + log z / z + …``; it is what Implicit SGD needs when
    its argument is ``e^{x(w_k − w_y) − u}`` with a huge exponent (Fagan & Iyengar, eq. 14).
    """
    if z != z:
        return np.nan
    if z == np.inf:
        return np.inf
    if z == -np.inf:
        return 0.0
    if z < 1.0:
        return lambertw(math.exp(z))
    # Start from the asymptotic expansion and refine w + log w = z (w > 0 here).
    lz = math.log(z)
    w = z - lz + lz / z
    if w <= 0.0:
        w = 1.0
    return _refine_w_log(w, z)


@njit(cache=True, nogil=True)
def sigmoid(t):
    """``1 / (1 + e^{−t})`` without overflow for any real ``t``."""
    if t >= 0.0:
        return 1.0 / (1.0 + math.exp(-t))
    e = math.exp(t)
    return e / (1.0 + e)


@njit(cache=True, nogil=True)
def softplus(z):
    """``log(1 + e^z)`` without overflow for any real ``z`` (the logistic loss of ``−z``)."""
    if z > 0.0:
        return z + math.log1p(math.exp(-z))
    return math.log1p(math.exp(z))


@njit(cache=True, nogil=True)
def log_sigmoid(z):
    """``log σ(z) = −softplus(−z)`` without overflow."""
    return -softplus(-z)


@njit(cache=True, nogil=True)
def logaddexp(a, b):
    """``log(e^a + e^b)`` for two scalars, stable for any reals (``-inf`` allowed)."""
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    if a >= b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(cache=True, nogil=True)
def other_class(r, y):
    """Map ``r`` uniform on {0, …, K−2} to a class uniform on {0, …, K−1} \\ {y}."""
    return r + 1 if r >= y else r


def draw_other_classes(rng, y, n_classes):
    """For each label in ``y`` draw one class ≠ that label uniformly: O(len(y)), vectorised.

    Parameters
    ----------
    rng : numpy.random.Generator
    y : int array of encoded labels in [0, n_classes)
    n_classes : int, at least 2
    """
    y = np.asarray(y)
    if n_classes < 2:
        raise ValueError("sampling a class other than the label needs at least 2 classes")
    r = rng.integers(0, n_classes - 1, size=y.shape[0])
    return r + (r >= y)
