"""The batch statistics of Algorithm 1: the gradient estimate μ_T and the curvature Σ_S.

Binary logistic regression is Ω = {0, 1}, ``f_x(0) = 0``, ``f_x(1) = x``, ``h = 1``; then
``r = σ(u) x`` and ``S = c(u) x xᵀ`` with ``u = θ̃ᵀx`` and ``c(u) = tanh(u/2) / (2u)``
(:func:`~xclib.sqb.bound.curvature_weight`, the Jaakkola–Jordan bound). Over a batch:

* ``μ_T = (1/|T|) Σ_{j∈T} (r_j − f_{x_j}(y_j))``, an unbiased gradient by Lemma 1
  (:func:`batch_mu`);
* ``Σ_S = (1/|S|) Σ_{j∈S} c_j x_j x_jᵀ``, kept as the weights ``c_j / |S|`` of its factor
  ``S̃ = [√w_j x_j]`` (:func:`batch_curvature`, Section 4.1).

The multinomial model (beyond the paper) has ``f_x(y) = e_y ⊗ x`` and θ = W (K × D,
row-major): :func:`batch_mu_multinomial` and :func:`batch_curvature_multinomial`, whose
K × K blocks come from :func:`~xclib.sqb.bound.softmax_bound_row`, stored as its 2K factors
(:func:`~xclib.sqb.bound.softmax_bound_weights`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._numba import sigmoid, sparse_row_axpy, sparse_row_dot
from .bound import curvature_weight, softmax_bound_weights

__all__ = ["batch_mu", "batch_curvature", "batch_mu_multinomial", "batch_curvature_multinomial"]


@njit(cache=True, nogil=True)
def batch_mu(indptr, indices, data, y, theta, batch, out):
    """``out = μ_T = (1/|T|) Σ_{j∈T} (r_j − f_{x_j}(y_j)) = (1/|T|) Σ (σ(θᵀx_j) − y_j) x_j``.

    The gradient part of Algorithm 1 for Ω = {0, 1} (``r_j = σ(u_j) x_j``, ``f(y_j) = y_j x_j``);
    an unbiased estimate of the data term of ∇L (Lemma 1). O(nnz(X_T) + d).
    """
    out[:] = 0.0
    m = batch.shape[0]
    for b in range(m):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        u = sparse_row_dot(idx, val, theta)
        sparse_row_axpy((sigmoid(u) - y[j]) / m, idx, val, out)


@njit(cache=True, nogil=True)
def batch_curvature(indptr, indices, data, theta, batch, w):
    """``w_j = c(θᵀx_j) / |S|`` so that ``Σ_S = Σ_j w_j x_j x_jᵀ`` (Algorithm 1, Ω = {0, 1}).

    ``c(u) = tanh(u/2) / (2u)`` (:func:`curvature_weight` with ``t = log(α₁/α₀) = u``).
    Σ_S is never formed: ``S̃ = [√w_j x_j]`` is its factor (Section 4.1). O(nnz(X_S)).
    """
    m = batch.shape[0]
    for b in range(m):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        w[b] = curvature_weight(sparse_row_dot(idx, val, theta)) / m


@njit(cache=True, nogil=True)
def _row_scores(idx, val, theta, K, s):
    """``s = W x`` for a sparse row x and ``W = theta`` as K × D (row-major)."""
    D = theta.shape[0] // K
    for k in range(K):
        s[k] = sparse_row_dot(idx, val, theta[k * D:(k + 1) * D])


@njit(cache=True, nogil=True)
def batch_mu_multinomial(indptr, indices, data, y, theta, K, batch, out):
    """Multinomial ``μ_T = (1/|T|) Σ_j (softmax(W x_j) − e_{y_j}) ⊗ x_j`` (W = θ as K × D,
    row-major). O(K·nnz(X_T) + K·D)."""
    out[:] = 0.0
    D = theta.shape[0] // K
    m = batch.shape[0]
    s = np.empty(K)
    for b in range(m):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        _row_scores(idx, val, theta, K, s)
        mx = s.max()
        z = 0.0
        for k in range(K):
            s[k] = math.exp(s[k] - mx)
            z += s[k]
        for k in range(K):
            g = s[k] / z - (1.0 if k == y[j] else 0.0)
            sparse_row_axpy(g / m, idx, val, out[k * D:(k + 1) * D])


@njit(cache=True, nogil=True)
def batch_curvature_multinomial(indptr, indices, data, theta, K, batch, M):
    """The factors of ``M_b = M(W x_b) / |S|`` (:func:`softmax_bound_weights`: ``M[b, 0]``
    the curvature weights over |S|, ``M[b, 1]`` the shares q), so that
    ``Σ_S = Σ_b M_b ⊗ x_b x_bᵀ``. O(K·nnz(X_S)); ``M`` is (|S|, 2, K), not (|S|, K, K)."""
    m = batch.shape[0]
    s = np.empty(K)
    for b in range(m):
        j = batch[b]
        idx = indices[indptr[j]:indptr[j + 1]]
        val = data[indptr[j]:indptr[j + 1]]
        _row_scores(idx, val, theta, K, s)
        softmax_bound_weights(s, M[b])
        for k in range(K):
            M[b, 0, k] /= m
