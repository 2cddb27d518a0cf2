"""The numba kernels of :mod:`xclib.unbiased` (Fagan & Iyengar): one step's gradient
coefficients (eqs. 7 and 8), the U-max rule (Algorithm 1) and the epochs of vanilla SGD and
U-max (the Implicit SGD update is in :mod:`xclib.unbiased.implicit`).

Scale and symbols as in :mod:`xclib.unbiased` (our ``F`` is the paper's divided by ``N``;
``lr`` is the authors' code's η). Every kernel is O(nnz(x_i)) per step for one class
(O(m·nnz(x_i)) for m classes): nothing O(K) or O(D) inside an epoch. Each row of W is kept as
``w_j = s_j·v_j`` (``v_j`` stored in ``W[j]``; :func:`xclib._numba.fold_row_scale`), so the
ridge's shrink of a row is O(1).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import (
    fold_row_scale, logaddexp, softplus, sparse_row_axpy, sparse_row_dot, subsample_classes,
)

__all__ = [
    "double_sum_coefficients", "umax_increase", "sgd_epoch", "sgd_epoch_sampled",
    "draw_class_sets", "CLASS_SAMPLING",
]

#: how the m classes of a step are drawn: Algorithm 1's m distinct classes other than the
#: label, or the authors' code's m distinct classes of all K with the label dropped if drawn
CLASS_SAMPLING = ("others", "all")


# -- eq. (7) and (8): the stochastic gradient of one (i, k) ---------------------------------
@njit(cache=True, nogil=True)
def double_sum_coefficients(raman, s_y, s_k, u_i, n_classes):
    """Coefficients of the stochastic gradient of ``f_ik`` (α = 0 part), eqs. (7) and (8).

    ``∇_{w_k} f_ik = c_k x_i``, ``∇_{w_{y_i}} f_ik = c_y x_i``, ``∂_{u_i} f_ik = g_u``.

    Proposed (eq. 7, our scale): ``c_k = (K−1)e^{s_k − s_y − u_i} = −c_y``,
    ``g_u = 1 − e^{−u_i} − c_k``. Raman et al. (eq. 8): ``c_k = (K−1)e^{s_k − ū_i}``,
    ``c_y = e^{s_y − ū_i} − 1``, ``g_u = 1 − e^{s_y − ū_i} − c_k``.
    Returns ``(c_k, c_y, g_u)``. These are exponential in the scores: vanilla SGD overflows
    here (Section 2.2).
    """
    if raman:
        e_y = math.exp(s_y - u_i)
        c = (n_classes - 1) * math.exp(s_k - u_i)
        return c, e_y - 1.0, 1.0 - e_y - c
    c = (n_classes - 1) * math.exp(s_k - s_y - u_i)
    return c, -c, 1.0 - math.exp(-u_i) - c


@njit(cache=True, nogil=True)
def umax_increase(raman, s_y, s_k, u_i, delta):
    """Algorithm 1, lines 13–15: raise ``u_i`` to ``log(1 + e^{x_iᵀ(w_k − w_{y_i})})`` when it is
    more than ``δ`` below it (Raman's analogue: ``log(e^{s_y} + e^{s_k})``, a lower bound on
    ``ū_i*``). Afterwards ``x_iᵀ(w_k − w_{y_i}) − u_i ≤ δ``, so ``|c_k| ≤ (K−1)e^δ``."""
    t = logaddexp(s_y, s_k) if raman else softplus(s_k - s_y)
    return t if u_i < t - delta else u_i


# -- epoch kernels ---------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _shrink_row(W, scale, q, j, rho, b_w):
    """After a step touched row ``j``: the ridge's proximal shrink ``w_j ← w_j/(1 + ρ_j)``
    (``rho`` = ηαβ_j) and the projection onto ``‖w_j‖ ≤ b_w`` (Appendix A; ``q[j] = ‖v_j‖²``
    is tracked when ``b_w`` is finite), both on the row's scale, then a refold if needed."""
    if rho > 0.0:
        scale[j] /= 1.0 + rho
    if b_w < np.inf:
        nrm = scale[j] * math.sqrt(q[j])
        if nrm > b_w:
            scale[j] *= b_w / nrm
    f = fold_row_scale(W, scale, j, False)
    q[j] *= f * f


@njit(cache=True, nogil=True)
def sgd_epoch(X, sqnorm, y, W, u, rows, ks, lr, raman, delta, alpha, beta, b_u, b_w):
    """One epoch of vanilla SGD (``delta = inf``) or U-max (Algorithm 1) on the double sum.

    Parameters
    ----------
    X : the rows (:class:`~xclib._numba.CSR`) ; sqnorm : (N,) ``‖x_i‖²`` ; y : (N,) int labels
    W : (K, D), u : (N,) updated in place ; rows, ks : (T,) the sampled datapoints and classes
    ``k ≠ y_i`` of each step ; lr : float η ; raman : bool, eq. (8) instead of eq. (6)
    delta : float, the U-max threshold δ (``inf``: no u-increase, i.e. vanilla SGD)
    alpha : float, ridge; beta : (K,) class weights β_j (:func:`class_weights`)
    b_u, b_w : projection bounds (``inf`` when alpha = 0); u is projected onto ``[0, b_u]`` for
    the proposed formulation (Raman's ``ū`` is unconstrained)

    The data part of eq. (7)/(8) is a gradient step; the ridge of ``f_ik`` is its proximal
    step ``w_j ← w_j / (1 + ηαβ_j)`` (the gradient step to O((ηαβ_j)²), stable for every η).
    O(nnz(x_i)) per step for any alpha (row scales; ``‖w_j‖²`` is tracked for the projection).
    """
    indptr, indices, data = X
    n_classes, use_umax, project = W.shape[0], delta < np.inf, b_w < np.inf
    # without a ridge or a projection every row scale stays 1: the same arithmetic without
    # reading scale, beta and q (K-sized: at large K each read is another cache miss)
    plain = alpha == 0.0 and not project
    scale = np.ones(n_classes)
    q = np.zeros(n_classes)  # ‖v_j‖², only when projecting
    if project:
        for j in range(n_classes):
            q[j] = np.dot(W[j], W[j])
    for t in range(rows.shape[0]):
        i = rows[t]
        k = ks[t]
        yi = y[i]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        d_k = sparse_row_dot(idx, val, W[k])
        d_y = sparse_row_dot(idx, val, W[yi])
        s_k = d_k if plain else scale[k] * d_k
        s_y = d_y if plain else scale[yi] * d_y
        ui = u[i]
        if use_umax:
            ui = umax_increase(raman, s_y, s_k, ui, delta)
        c_k, c_y, g_u = double_sum_coefficients(raman, s_y, s_k, ui, n_classes)
        a_k = -lr * c_k if plain else -lr * c_k / scale[k]
        a_y = -lr * c_y if plain else -lr * c_y / scale[yi]
        sparse_row_axpy(a_k, idx, val, W[k])
        sparse_row_axpy(a_y, idx, val, W[yi])
        if project:
            q[k] = max(q[k] + a_k * (2.0 * d_k + a_k * sqnorm[i]), 0.0)
            q[yi] = max(q[yi] + a_y * (2.0 * d_y + a_y * sqnorm[i]), 0.0)
        if not plain:
            _shrink_row(W, scale, q, k, lr * alpha * beta[k], b_w)
            _shrink_row(W, scale, q, yi, lr * alpha * beta[yi], b_w)
        ui -= lr * g_u
        if not raman:
            ui = min(max(ui, 0.0), b_u)
        u[i] = ui
    fold_row_scale(W, scale, -1, True)


# -- m classes per step (Algorithm 1 with n = 1, m ≥ 1) --------------------------------------
def draw_class_sets(rng, y, n_classes, n_sampled, sampling="others"):
    """For each label ``y[t]`` a set of ``n_sampled`` (m) classes: ``(T, m)`` int64.

    ``"others"`` (Algorithm 1): m distinct classes ≠ ``y[t]``, uniform (needs m ≤ K − 1).
    ``"all"`` (the authors' code, ``np.random.choice(K, m, replace=False)`` then
    ``setdiff1d`` with the label): m distinct classes of all K, with the label, when drawn,
    replaced by −1 (the step then uses the m' ≤ m others, scaled by (K − 1)/m'). O(T·m)
    (Floyd's method; nothing O(K) per step).
    """
    y = np.asarray(y, dtype=np.int64)
    m = int(n_sampled)
    if sampling not in CLASS_SAMPLING:
        raise ValueError(f"class sampling must be one of {CLASS_SAMPLING}, got {sampling!r}")
    pool = n_classes - 1 if sampling == "others" else n_classes
    if not 1 <= m <= pool:
        raise ValueError(f"n_sampled must be in [1, {pool}] for K = {n_classes} and "
                         f"class sampling {sampling!r}, got {n_sampled!r}")
    out = np.empty((y.shape[0], m), dtype=np.int64)
    u = rng.random((y.shape[0], m))
    if sampling == "others":
        subsample_classes(u, y, n_classes, out, np.zeros(n_classes, dtype=np.bool_))
        return out
    phantom = np.full(y.shape[0], n_classes, dtype=np.int64)  # a label no class has
    subsample_classes(u, phantom, n_classes + 1, out, np.zeros(n_classes + 1, dtype=np.bool_))
    out[out == y[:, None]] = -1
    return out


@njit(cache=True, nogil=True)
def sgd_epoch_sampled(X, sqnorm, y, W, u, rows, ks, lr, delta, alpha, beta, b_u, b_w):
    """One epoch of vanilla SGD (``delta = inf``) or U-max with m classes per step, on the
    proposed double sum (eq. 6 with the class sum estimated from m draws, Algorithm 1).

    Step ``t``: datapoint ``i = rows[t]`` and the classes ``C`` = the entries ≥ 0 of ``ks[t]``
    (m' of them, distinct, none the label; see :func:`draw_class_sets`)::

        f_iC(u, W) = u_i + e^{−u_i} + ((K−1)/m') Σ_{k∈C} e^{z_k − u_i} + ridge,
        z_k = x_iᵀ(w_k − w_{y_i}).

    U-max first raises ``u_i`` to ``log(1 + Σ_{k∈C} e^{z_k})`` when it is more than δ below
    it (Algorithm 1, lines 13–15, for m classes). The gradient step is
    ``w_k −= η c_k x_i``, ``w_{y_i} += η (Σ_k c_k) x_i``, ``u_i −= η(1 − e^{−u_i} − Σ_k c_k)``
    with ``c_k = ((K−1)/m') e^{z_k − u_i}``; the ridge and the Appendix A projections act on
    the touched rows as in :func:`sgd_epoch` (β from :func:`xclib.unbiased.class_weights`
    with the same m). A step with no class (m = 1 and the label drawn, ``"all"`` sampling)
    only moves ``u_i``. For m = 1 and ``"others"`` it is :func:`sgd_epoch`'s step (tested).
    O(m · nnz(x_i)) per step.
    """
    indptr, indices, data = X
    n_classes, use_umax, project = W.shape[0], delta < np.inf, b_w < np.inf
    m = ks.shape[1]
    scale = np.ones(n_classes)
    q = np.zeros(n_classes)  # ‖v_j‖², only when projecting
    if project:
        for j in range(n_classes):
            q[j] = np.dot(W[j], W[j])
    d = np.empty(m)
    z = np.empty(m)
    for t in range(rows.shape[0]):
        i = rows[t]
        yi = y[i]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        d_y = sparse_row_dot(idx, val, W[yi])
        s_y = scale[yi] * d_y
        cnt = 0
        top = 0.0  # max(0, z_k): log(1 + Σ e^{z_k}) computed from it
        for j in range(m):
            k = ks[t, j]
            if k >= 0:
                d[j] = sparse_row_dot(idx, val, W[k])
                z[j] = scale[k] * d[j] - s_y
                top = max(top, z[j])
                cnt += 1
        ui = u[i]
        if use_umax and cnt > 0:
            acc = math.exp(-top)
            for j in range(m):
                if ks[t, j] >= 0:
                    acc += math.exp(z[j] - top)
            bound = top + math.log(acc)
            if ui < bound - delta:
                ui = bound
        c_sum = 0.0
        for j in range(m):
            k = ks[t, j]
            if k < 0:
                continue
            c = (n_classes - 1) / cnt * math.exp(z[j] - ui)
            c_sum += c
            a_k = -lr * c / scale[k]
            sparse_row_axpy(a_k, idx, val, W[k])
            if project:
                q[k] = max(q[k] + a_k * (2.0 * d[j] + a_k * sqnorm[i]), 0.0)
        if cnt > 0:
            a_y = lr * c_sum / scale[yi]
            sparse_row_axpy(a_y, idx, val, W[yi])
            if project:
                q[yi] = max(q[yi] + a_y * (2.0 * d_y + a_y * sqnorm[i]), 0.0)
            for j in range(m + 1):
                r = yi if j == m else ks[t, j]
                if r >= 0:
                    _shrink_row(W, scale, q, r, lr * alpha * beta[r], b_w)
        ui -= lr * (1.0 - math.exp(-ui) - c_sum)
        u[i] = min(max(ui, 0.0), b_u)
    fold_row_scale(W, scale, -1, True)
