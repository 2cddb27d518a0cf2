"""Biased sampled-softmax baselines: one-vs-each, NCE and importance sampling.

Fagan & Iyengar (Section 4.1) compare their unbiased methods against three O(D)-per-step
approximations of the softmax likelihood, all run as minibatch SGD with ``n = 100``
datapoints and ``m = 5`` sampled classes per step (the Augment & Reduce chapter reuses
:class:`OVE`). Every method minimises a per-datapoint surrogate ``ℓ_i(s)`` of the
log-loss ``−log softmax(s)_{y_i}`` that only touches the scores ``s_j = x_iᵀ w_j`` of the true
class and of the ``m`` sampled classes ``S`` (drawn uniformly with replacement from all
``K`` classes, shared by the minibatch):

* **OVE** (one-vs-each bound, Titsias 2016):
  ``ℓ_i = (K/m) Σ_{j∈S, j≠y_i} log(1 + e^{s_j − s_{y_i}})``, an unbiased estimate of the
  bound ``Σ_{k≠y_i} log(1 + e^{s_k − s_{y_i}}) ≥ −log softmax(s)_{y_i}``.
* **NCE** (noise-contrastive estimation, Mnih & Teh 2012), uniform noise ``q = 1/K`` and the
  self-normalised model (log-partition fixed at 0): with ``Δ_j = s_j − log(m q_j)``,
  ``ℓ_i = −log σ(Δ_{y_i}) − Σ_{j∈S} log(1 − σ(Δ_j))``.
* **IS** (importance-sampled softmax, Bengio & Senécal 2008):
  ``ℓ_i = −s_{y_i} + log(e^{s_{y_i}} + (K/m) Σ_{j∈S, j≠y_i} e^{s_j})``.

The gradient of ``ℓ_i`` with respect to ``w_j`` is ``c_j x_i`` where ``c_j = ∂ℓ_i/∂s_j``;
:func:`sampled_coefficients` computes the ``c`` of one datapoint, :func:`sampled_epoch`
runs one epoch of minibatch SGD (scores at the start of the step, the mean gradient over the
minibatch, ``O(n (m + 1) nnz(x))`` per step: nothing O(K)).

Learning-rate scale: the step is ``W ← W − η · (1/n) Σ_i ∇ℓ_i`` (per-datapoint losses, no
factor N), the scaling of the authors' released code and hence of their Table 2.

A biases-only model (the A&R chapter's toy) is the same kernel on a single constant feature:
pass ``X = np.ones((N, 1))``; ``coef_[:, 0]`` are then the biases.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._numba import sigmoid, sparse_row_axpy, sparse_row_dot
from .base import IterativeSoftmaxEstimator, as_csr

__all__ = [
    "OVE", "NCE", "ImportanceSampling",
    "sampled_coefficients", "sampled_epoch", "epoch_order", "SHUFFLE_MODES",
]

#: integer codes of the three surrogates in the kernels
OVE_LOSS, NCE_LOSS, IS_LOSS = 0, 1, 2
_LOSS_CODES = {"ove": OVE_LOSS, "nce": NCE_LOSS, "is": IS_LOSS}

#: data orders of an epoch: i ~ uniform with replacement (the paper), a fresh permutation each
#: epoch, or 0..N-1 every epoch (the authors' released code)
SHUFFLE_MODES = ("uniform", "reshuffle", "fixed")


@njit(cache=True, nogil=True)
def sampled_coefficients(kind, y, s_y, s, classes, n_classes, out):
    """``out[0] = ∂ℓ/∂s_y`` and ``out[1 + j] = ∂ℓ/∂s_{classes[j]}`` for one datapoint.

    Parameters
    ----------
    kind : int, ``OVE_LOSS``, ``NCE_LOSS`` or ``IS_LOSS`` (module docstring for ``ℓ``)
    y : int, the datapoint's label ; s_y : float, its score ``x·w_y``
    s : (m,) scores of the sampled classes ; classes : (m,) their ids
    n_classes : int, K ; out : (m + 1,) written in place

    Returns
    -------
    float, the surrogate loss ``ℓ`` itself.
    """
    m = s.shape[0]
    w = n_classes / m  # K/m: uniform sampling with replacement from all K classes
    loss = 0.0
    if kind == 0:  # OVE
        cy = 0.0
        for j in range(m):
            if classes[j] == y:
                out[1 + j] = 0.0
                continue
            d = s[j] - s_y
            c = w * sigmoid(d)
            out[1 + j] = c
            cy -= c
            loss += w * (max(d, 0.0) + math.log1p(math.exp(-abs(d))))
        out[0] = cy
    elif kind == 1:  # NCE, uniform noise q = 1/K, log(m q) = log(m/K)
        shift = math.log(m / n_classes)
        d = s_y - shift
        out[0] = -sigmoid(-d)
        loss += max(-d, 0.0) + math.log1p(math.exp(-abs(d)))
        for j in range(m):
            d = s[j] - shift
            out[1 + j] = sigmoid(d)
            loss += max(d, 0.0) + math.log1p(math.exp(-abs(d)))
    else:  # importance sampling
        lw = math.log(w)
        mx = s_y
        for j in range(m):
            if classes[j] != y and s[j] + lw > mx:
                mx = s[j] + lw
        z = math.exp(s_y - mx)
        for j in range(m):
            if classes[j] != y:
                z += math.exp(s[j] + lw - mx)
        lz = mx + math.log(z)
        out[0] = math.exp(s_y - lz) - 1.0
        for j in range(m):
            out[1 + j] = math.exp(s[j] + lw - lz) if classes[j] != y else 0.0
        loss = lz - s_y
    return loss


@njit(cache=True, nogil=True)
def sampled_epoch(kind, indptr, indices, data, y, W, order, classes, lr, batch_size):
    """One epoch of minibatch SGD on a sampled surrogate, updating ``W`` (K × D) in place.

    Parameters
    ----------
    kind : int loss code ; indptr, indices, data : CSR of X ; y : (N,) int labels
    W : (K, D) float64 ; order : (T,) rows in processing order (one epoch: T = N)
    classes : (ceil(T / batch_size), m) the sampled classes of each step
    lr : float, the learning rate η of this epoch ; batch_size : int, n

    Returns
    -------
    float, the mean surrogate loss over the epoch (at the scores each step saw).
    """
    n_rows = order.shape[0]
    m = classes.shape[1]
    n_classes = W.shape[0]
    n_steps = (n_rows + batch_size - 1) // batch_size
    s = np.empty(m)
    coef = np.empty((batch_size, m + 1))
    total = 0.0
    for t in range(n_steps):
        start = t * batch_size
        stop = min(start + batch_size, n_rows)
        S = classes[t]
        for b in range(stop - start):  # scores with W frozen at the start of the step
            i = order[start + b]
            idx = indices[indptr[i]:indptr[i + 1]]
            val = data[indptr[i]:indptr[i + 1]]
            s_y = sparse_row_dot(idx, val, W[y[i]])
            for j in range(m):
                s[j] = sparse_row_dot(idx, val, W[S[j]])
            total += sampled_coefficients(kind, y[i], s_y, s, S, n_classes, coef[b])
        step = lr / (stop - start)
        for b in range(stop - start):  # mean gradient over the minibatch
            i = order[start + b]
            idx = indices[indptr[i]:indptr[i + 1]]
            val = data[indptr[i]:indptr[i + 1]]
            sparse_row_axpy(-step * coef[b, 0], idx, val, W[y[i]])
            for j in range(m):
                if coef[b, 1 + j] != 0.0:
                    sparse_row_axpy(-step * coef[b, 1 + j], idx, val, W[S[j]])
    return total / max(n_rows, 1)


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


def _check_common(est):
    if not (np.isfinite(est.learning_rate) and est.learning_rate > 0):
        raise ValueError(f"learning_rate must be a positive number, got {est.learning_rate!r}")
    if not (0 < est.decay <= 1):
        raise ValueError(f"decay must be in (0, 1], got {est.decay!r}")
    if est.shuffle not in SHUFFLE_MODES:
        raise ValueError(f"shuffle must be one of {SHUFFLE_MODES}, got {est.shuffle!r}")


def _with_intercept(X, fit_intercept):
    """CSR X, with a trailing column of ones when an intercept is fitted."""
    import scipy.sparse as sp

    if not fit_intercept:
        return X
    return as_csr(sp.hstack([X, np.ones((X.shape[0], 1))], format="csr"))


class _SampledSoftmax(IterativeSoftmaxEstimator):
    """Minibatch SGD on a sampled surrogate of the softmax (see the module docstring)."""

    _kind = None

    def __init__(self, learning_rate=1.0, n_epochs=10, batch_size=100, n_sampled=5,
                 decay=0.9, shuffle="uniform", fit_intercept=False, random_state=None,
                 verbose=False):
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.batch_size = batch_size
        self.n_sampled = n_sampled
        self.decay = decay
        self.shuffle = shuffle
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.verbose = verbose

    def _init_state(self, X, y, rng):
        _check_common(self)
        if int(self.batch_size) < 1 or int(self.n_sampled) < 1:
            raise ValueError("batch_size and n_sampled must be positive integers")
        Xa = _with_intercept(X, self.fit_intercept)
        W = np.zeros((self.classes_.shape[0], Xa.shape[1]))
        return {"X": Xa, "W": W, "surrogate": []}

    def _run_epoch(self, state, X, y, epoch, rng):
        Xa, W = state["X"], state["W"]
        n, K = Xa.shape[0], W.shape[0]
        bs = int(self.batch_size)
        order = epoch_order(rng, n, self.shuffle)
        classes = rng.integers(0, K, size=((n + bs - 1) // bs, int(self.n_sampled)))
        lr = float(self.learning_rate) * float(self.decay) ** epoch
        state["surrogate"].append(sampled_epoch(
            self._kind, Xa.indptr, Xa.indices, Xa.data, y, W, order, classes, lr, bs))

    def _coef(self, state):
        W = state["W"]
        if self.fit_intercept:
            return W[:, :-1], W[:, -1]
        return W, None


class OVE(_SampledSoftmax):
    """SGD on the one-vs-each bound (Titsias 2016) with ``n`` datapoints and ``m`` classes per step.

    Parameters
    ----------
    learning_rate : float, η₀ (the step is η · mean gradient; η_t = η₀ · decay^epoch)
    n_epochs : int ; batch_size : int, n (100 in the paper) ; n_sampled : int, m (5)
    decay : float, per-epoch factor of the learning rate (0.9 in the paper)
    shuffle : "uniform" | "reshuffle" | "fixed", the data order (see :func:`epoch_order`)
    fit_intercept : bool, append a constant feature (its weights become ``intercept_``)
    random_state : None | int | Generator ; verbose : bool, tqdm progress bar

    Attributes
    ----------
    coef_ (K, D), intercept_ (K,) or None, classes_, history_, diverged_, n_epochs_ :
        see :class:`xclib.base.IterativeSoftmaxEstimator`.
    """

    _kind = OVE_LOSS


class NCE(_SampledSoftmax):
    """SGD on noise-contrastive estimation (Mnih & Teh 2012), uniform noise, self-normalised.

    Parameters as :class:`OVE`; ``n_sampled`` is the number of noise samples per step.
    """

    _kind = NCE_LOSS


class ImportanceSampling(_SampledSoftmax):
    """SGD on the importance-sampled softmax (Bengio & Senécal 2008), uniform proposal.

    Parameters as :class:`OVE`.
    """

    _kind = IS_LOSS
