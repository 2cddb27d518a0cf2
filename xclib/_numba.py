"""Numba primitives shared by every chapter, written once.

Plain arrays only: a CSR row is the pair ``(idx, val)`` of its column indices and values
(``X.indices[X.indptr[i]:X.indptr[i+1]]`` and the matching ``X.data`` slice), a weight row is a
1-D float64 array. Every function here is tested against NumPy/SciPy in
``tests/test_numba_primitives.py``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = [
    "dense_dot",
    "dense_dot8",
    "sparse_row_dot",
    "sparse_row_axpy",
    "logsumexp",
    "exp_shifted",
    "exp_lane",
    "exp_rough",
    "log_rough",
    "lambertw",
    "lambertw_exp",
    "sigmoid",
    "softplus",
    "log_sigmoid",
    "logaddexp",
    "other_class",
    "draw_other_classes",
    "subsample_classes",
    "SHUFFLE_MODES",
    "epoch_order",
    "LAZY_SCALE_MIN",
    "fold_row_scale",
    "CSR",
    "csr_arrays",
]

_E_INV = math.exp(-1.0)


class CSR(NamedTuple):
    """The three arrays of a CSR matrix, passed to a kernel as one argument: row ``n``'s
    non-zeros are ``data[indptr[n]:indptr[n+1]]`` in the columns ``indices[...]``."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray


def csr_arrays(X):
    """:class:`CSR` of a ``scipy.sparse.csr_matrix`` (its own arrays, not copies)."""
    return CSR(X.indptr, X.indices, X.data)


@njit(cache=True, nogil=True)
def dense_dot(a, b):
    """``a · b`` of two 1-D arrays, summed in order in one thread (the small and
    memory-bound vectors of the solvers: BLAS threads would only contend)."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@njit(cache=True, nogil=True)
def dense_dot8(a, b):
    """``a · b`` in eight interleaved partial sums, added pairwise at the end: the same order on
    every machine, and no chain of dependent additions (``dense_dot`` waits on one add per
    entry: 0.22 ms at n = 2.7e5, this 0.08 ms; L-BFGS takes some twenty such dots an iteration)."""
    n = a.shape[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    m = n - n % 8
    for i in range(0, m, 8):
        s0 += a[i] * b[i]
        s1 += a[i + 1] * b[i + 1]
        s2 += a[i + 2] * b[i + 2]
        s3 += a[i + 3] * b[i + 3]
        s4 += a[i + 4] * b[i + 4]
        s5 += a[i + 5] * b[i + 5]
        s6 += a[i + 6] * b[i + 6]
        s7 += a[i + 7] * b[i + 7]
    tail = 0.0
    for i in range(m, n):
        tail += a[i] * b[i]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) + tail


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


# Cody-Waite split of ln 2 (fdlibm's): n·LN2_HI is exact for |n| < 2¹¹
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00


@intrinsic
def _bits_to_float(typingctx, bits):
    """The float64 whose bits are the int64 ``bits`` (a register move; no memory, no call)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def _float_to_bits(typingctx, x):
    """The bits of the float64 ``x`` as an int64."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _exp_reduce(x):
    """Cody–Waite reduction of ``x`` clamped to ``[−708, 709]``: ``(r, 2ⁿ)`` with
    ``x = n·ln 2 + r``, ``|r| ≤ ln 2 / 2``, and ``2ⁿ`` built from its bits."""
    x = min(max(x, -708.0), 709.0)
    nf = math.floor(x * _INV_LN2 + 0.5)
    return (x - nf * _LN2_HI) - nf * _LN2_LO, _bits_to_float((np.int64(nf) + 1023) << 52)


#: e^r = 1 + r + Σ c_j r^(j+2) on |r| ≤ ln 2 / 2: least squares in the relative error on 400
#: Chebyshev nodes, in 50-digit arithmetic (mpmath), rounded to float64
_EXP_POLY = (0.5000000000000012, 0.16666666666666483, 0.04166666666651632,
             0.008333333333451433, 0.0013888888946678828, 0.00019841269597118904,
             2.480149034623507e-05, 2.755750728541229e-06, 2.7631125446226205e-07,
             2.50246452096493e-08)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def exp_lane(x):
    """``e^x`` without a call into libm, so that a loop of them vectorises; within 1 ulp of
    libm (tested).

    Cody–Waite reduction ``x = n·ln 2 + r`` with ``|r| ≤ ln 2 / 2``, a degree-11 polynomial
    for ``e^r`` (``_EXP_POLY``: relative error below 5e-18 on that interval, where Taylor's of
    degree 11 leaves 6e-15 and needs degree 13 for 4e-18) and ``2ⁿ`` built from its bits.
    ``x`` is clamped to ``[−708, 709]``: below, ``e^−708 ≈ 3e−308`` rather than a subnormal
    or 0; above, ``e^709 ≈ 8e307`` rather than ``inf``.
    """
    r, two_n = _exp_reduce(x)
    c = _EXP_POLY
    return two_n * (1.0 + r * (1.0 + r * (c[0] + r * (c[1] + r * (c[2] + r * (c[3] + r * (
        c[4] + r * (c[5] + r * (c[6] + r * (c[7] + r * (c[8] + r * c[9])))))))))))


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def exp_rough(x):
    """``e^x`` within 2e-7 (relative) for ``x`` in ``[−708, 709]`` (clamped like
    :func:`exp_lane`), without a call into libm: the same reduction and a degree-6 Taylor
    polynomial. For starting points, not for results."""
    r, two_n = _exp_reduce(x)
    return two_n * (1.0 + r * (1.0 + r * (1 / 2 + r * (1 / 6 + r * (1 / 24 + r * (
        1 / 120 + r / 720))))))


#: log(1 + m) on [0, 1): a least-squares sextic (Chebyshev nodes), error below 1.5e-6
_LOG1P_POLY = (1.46756427e-06, 9.99847808e-01, -4.97373981e-01, 3.15749523e-01,
               -1.90357320e-01, 8.26930685e-02, -1.74144701e-02)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def log_rough(x):
    """``log x`` within 2e-6 (absolute) for a positive normal ``x``, without a call into libm:
    the exponent from the bits, a sextic for the log of the mantissa. For starting points, not
    for results."""
    bits = _float_to_bits(x)
    e = ((bits >> 52) & 2047) - 1023
    m = _bits_to_float((bits & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000) - 1.0  # in [0, 1)
    c = _LOG1P_POLY
    return e * _LN2_HI + (c[0] + m * (c[1] + m * (c[2] + m * (c[3] + m * (
        c[4] + m * (c[5] + m * c[6]))))))


@njit(cache=True, nogil=True)
def exp_shifted(s, m):
    """``s[k] ← exp(s[k] − m)`` in place for ``s[k] ≤ m``; returns their sum.

    A loop of :func:`exp_lane` that the compiler vectorises, where libm's ``exp`` is one
    scalar call per entry (3 ms of the 23 ms of a Bibtex gradient, 712 k exps). Arguments
    below −708 give ``e^−708 ≈ 3e−308``, which no sum with its maximum term ``e^0 = 1`` can see.
    """
    n = s.shape[0]
    for k in range(n):
        s[k] = exp_lane(s[k] - m)
    total = 0.0
    for k in range(n):
        total += s[k]
    return total


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


@njit(cache=True, nogil=True)
def subsample_classes(u, y, n_classes, out, mark):
    """Draw ``S_n ⊆ {0..K−1} \\ {y_n}`` of size ``|S|`` without replacement (Floyd's method).

    Parameters
    ----------
    u : (B, |S|) uniforms in [0, 1) drawn by the caller's Generator
    y : (B,) labels of the minibatch
    out : (B, |S|) int64, filled with the subsets
    mark : (K,) bool scratch, all False on entry and on exit

    O(B · |S|): the K-sized ``mark`` array is only touched at the drawn entries.
    """
    B, m = u.shape
    pool = n_classes - 1
    for i in range(B):
        for j in range(m):
            jj = pool - m + j
            r = int(u[i, j] * (jj + 1))
            if r > jj:
                r = jj
            if mark[r]:
                r = jj
            mark[r] = True
            out[i, j] = other_class(r, y[i])
        for j in range(m):
            c = out[i, j]
            mark[c - 1 if c > y[i] else c] = False


#: data orders of an epoch: i ~ uniform with replacement (Fagan & Iyengar), a fresh
#: permutation each epoch, or 0..N-1 every epoch (their released code)
SHUFFLE_MODES = ("uniform", "reshuffle", "fixed")


def epoch_order(rng, n_rows, shuffle):
    """Rows of one epoch: ``"uniform"`` i.i.d. draws (the paper), ``"reshuffle"`` a permutation,
    ``"fixed"`` ``0..N-1`` (the authors' code)."""
    if shuffle == "uniform":
        return rng.integers(0, n_rows, size=n_rows)
    if shuffle == "reshuffle":
        return rng.permutation(n_rows)
    if shuffle == "fixed":
        return np.arange(n_rows)
    raise ValueError(f"shuffle must be one of {SHUFFLE_MODES}, got {shuffle!r}")


#: the lazy ridge scale: a row kept as ``w = s·v`` (the ridge's shrink of a row is O(1): ``s``
#: alone changes) is folded back, ``v *= s``, once ``s`` falls below this value (before it
#: underflows; every chapter's kernels use this one threshold)
LAZY_SCALE_MIN = 1e-6


@njit(cache=True, nogil=True)
def fold_row_scale(W, scale, j, every):
    """Fold row scales into ``W`` (``W[j] *= scale[j]``, ``scale[j] = 1``): row ``j`` if its
    scale is below ``LAZY_SCALE_MIN``, or every row (``every``). Returns the factor row ``j``
    was multiplied by (1.0 if none)."""
    if every:
        for r in range(W.shape[0]):
            if scale[r] != 1.0:
                for c in range(W.shape[1]):
                    W[r, c] *= scale[r]
                scale[r] = 1.0
        return 1.0
    f = scale[j]
    if f >= LAZY_SCALE_MIN:
        return 1.0
    for c in range(W.shape[1]):
        W[j, c] *= f
    scale[j] = 1.0
    return f
