"""An A&R fit's state: the kernels' inputs as typed bundles, built once per fit.

:func:`~.iteration.ar_iteration` takes ten arguments: the training rows
(:class:`~xclib._numba.CSR`), the weights ``W``, ``b``, the iteration ``t`` and its step-size
factor ``rho``, and five bundles, each a ``NamedTuple`` of arrays and scalars that numba
compiles as one typed argument. :class:`Settings`, :class:`Scratch`, :class:`StepState` and
:class:`LocalState` are built once per fit by :func:`start_state`; :class:`Draws` once per
iteration (:meth:`ARState.draws`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .bounds import MODELS, Model
from .kernels import noise_local_step, ove_coefficients, softmax_local_step

__all__ = ["Draws", "LocalState", "StepState", "Scratch", "Settings", "ARState",
           "start_state", "noise_draws"]

_EMPTY = np.empty(0)  # the model arrays an iteration does not use


class Draws(NamedTuple):
    """One iteration's minibatch and random draws."""

    batch: np.ndarray     # (|B|,) rows of X
    y: np.ndarray         # (|B|,) their labels
    u: np.ndarray         # (|B|, |S|) uniforms of the class subsets S_n
    u_local: np.ndarray   # (|B|,) probit/logistic: u ~ q^(rep) of the local step (eq. 9)
    u_global: np.ndarray  # (|B|,) ... and of the global step's fresh ε_n


class LocalState(NamedTuple):
    """The variational parameters of every training row (a model's unused arrays empty)."""

    log_eta: np.ndarray   # (N,) softmax: log η_n of q(ε_n) = Gumbel(log η_n, 1)
    mu: np.ndarray        # (N,) probit / logistic: location of q(ε_n)
    gamma: np.ndarray     # (N,) probit / logistic: scale softplus(γ_n) of q(ε_n)
    visits: np.ndarray    # (N,) int64 visits of each row (local_clock="visits")


class StepState(NamedTuple):
    """Section 4's step-size state of every weight and bias."""

    sW: np.ndarray        # (K, D) RMS state s_t (−1 = never touched)
    sb: np.ndarray        # (K, 1)
    stampW: np.ndarray    # (K, D) int64 iteration of each coordinate's last touch
    stampb: np.ndarray    # (K, 1)


class Scratch(NamedTuple):
    """The buffers one iteration fills and leaves (allocated once per fit)."""

    S: np.ndarray         # (|B|, |S|) int64 class subsets of the minibatch
    mark: np.ndarray      # (K,) bool scratch of subsample_classes
    psi_y: np.ndarray     # (|B|,) utilities of the labels
    psi_S: np.ndarray     # (|B|, |S|) utilities of the sampled classes
    C: np.ndarray         # (|B|, |S|) gradient coefficients of the local step
    elbo: np.ndarray      # (|B|,) one-sample ELBO of each row
    rate: np.ndarray      # (|B|,) local step sizes α
    G: np.ndarray         # (K, D) zero gradient buffer
    Gb: np.ndarray        # (K,)
    markW: np.ndarray     # (K, D) uint8 marks of the coordinates one iteration touches
    markb: np.ndarray     # (K,) uint8
    touched: np.ndarray   # (≥ |B|(|S|+1) max nnz,) int64 flat indices k·D + d touched
    touched_b: np.ndarray  # (|B|(|S|+1),) int64 classes whose bias is touched


class Settings(NamedTuple):
    """What stays fixed through a fit."""

    model: int            # a Model code
    rate0: float          # a of the local step size α = a (1 + c)^−0.9
    global_clock: bool    # c counts iterations (True) or the row's visits
    fit_intercept: bool
    inv_count: np.ndarray  # (D,) 1 / (training rows holding feature d), 0 if none
    scale: float          # N / |B|
    ridge_y: float        # (N/|B|) N alpha, the ridge weight of a label's coordinates
    ridge_S: float        # ridge_y (K − 1)/|S|, of a sampled class's


@dataclass
class ARState:
    """Everything one A&R fit updates between iterations (dropped at the end of ``fit``)."""

    W: np.ndarray                 # (K, D) weights
    b: np.ndarray                 # (K,) biases
    cfg: Settings
    buf: Scratch
    steps: StepState
    local: LocalState
    batch: int                    # |B| (clipped to N)
    yb: np.ndarray = None         # (|B|,) labels of the minibatch
    u: np.ndarray = None          # (|B|, |S|) uniforms of the class subsets
    u1: np.ndarray = None         # (|B|,) probit: the local and global draws of q^(rep)
    u2: np.ndarray = None
    t: int = 0                    # iterations done
    clock: float = 0.0            # training seconds
    elbo_trace: list = field(default_factory=list)
    time_trace: list = field(default_factory=list)

    @property
    def model(self):
        return Model(self.cfg.model)

    @property
    def n_rows(self):
        return self.local.visits.shape[0]

    @property
    def n_classes(self):
        return self.W.shape[0]

    @property
    def n_sampled(self):
        return self.buf.S.shape[1]

    def draws(self, batch, rng):
        """The bundle of the next iteration on the rows ``batch`` (whose labels are already
        in ``yb``): the subset uniforms, then the noise draws, from ``rng`` in that order."""
        rng.random(out=self.u)
        u1, u2 = noise_draws(self, rng)
        return Draws(batch, self.yb, self.u, u1, u2)


def _scratch(K, D, B, m, nnz_max):
    """The buffers of the kernels: O(|B| |S| nnz) scratch and the O(K D) gradient."""
    return Scratch(
        S=np.empty((B, m), np.int64), mark=np.zeros(K, np.bool_),
        psi_y=np.empty(B), psi_S=np.empty((B, m)), C=np.empty((B, m)), elbo=np.empty(B),
        rate=np.empty(B), G=np.zeros((K, D)), Gb=np.zeros(K),
        markW=np.zeros((K, D), np.uint8), markb=np.zeros(K, np.uint8),
        touched=np.empty(max(1, B * (m + 1) * nnz_max), np.int64),
        touched_b=np.empty(B * (m + 1), np.int64))


def start_state(est, X, rng):
    """The state at the start of a fit: initial weights first from ``rng`` (the same for
    every model), then the variational parameters and the buffers."""
    N, D = X.shape
    K = est.classes_.shape[0]
    W = rng.normal(0.0, est.init_scale, size=(K, D))
    b = rng.normal(0.0, est.init_scale_bias, size=K)
    if not est.fit_intercept:
        b[:] = 0.0
    code = MODELS[est.model]
    a = est.local_learning_rate
    if a is None:
        a = 1.0 if code == Model.SOFTMAX else 0.01
    count = np.bincount(X.indices, minlength=D)
    inv_count = np.zeros(D)
    np.divide(1.0, count, out=inv_count, where=count > 0)
    if est._ridge() > 0:
        W[:, count == 0] = 0.0  # the ridge optimum of weights no training row reaches
    B, m = min(int(est.batch_size), N), min(int(est.n_sampled), K - 1)
    scale = N / B
    ridge_y = scale * N * est._ridge()
    cfg = Settings(int(code), float(a), est.local_clock == "global", bool(est.fit_intercept),
                   inv_count, float(scale), float(ridge_y), float(ridge_y * (K - 1) / m))
    log_eta = mu = gamma = _EMPTY
    if code == Model.SOFTMAX:
        # η* = Σ_k e^{ψ_k − ψ_y} ≈ K at the near-zero initial weights.
        log_eta = np.full(N, math.log(K))
    elif code in (Model.PROBIT, Model.LOGISTIC):
        mu = np.zeros(N)
        gamma = np.full(N, math.log(math.e - 1.0))  # scale 1
    steps = StepState(np.full((K, D), -1.0), np.full((K, 1), -1.0),
                      np.zeros((K, D), np.int64), np.zeros((K, 1), np.int64))
    nnz_max = int(np.diff(X.indptr).max()) if N else 0
    return ARState(W=W, b=b, cfg=cfg, buf=_scratch(K, D, B, m, nnz_max), steps=steps,
                   local=LocalState(log_eta, mu, gamma, np.zeros(N, np.int64)), batch=B,
                   yb=np.empty(B, np.int64), u=np.empty((B, m)), u1=np.empty(B),
                   u2=np.empty(B))


def noise_draws(st, rng):
    """The probit and logistic draws ``u ~ q^(rep)`` of an iteration (local, then global), in
    the order :func:`local_step` draws them; empty arrays for softmax and OVE."""
    if st.model == Model.PROBIT:
        return rng.standard_normal(out=st.u1), rng.standard_normal(out=st.u2)
    if st.model == Model.LOGISTIC:
        B = st.batch
        return rng.logistic(size=B), rng.logistic(size=B)
    return _EMPTY, _EMPTY


def local_step(st, batch, t, rng):
    """The local (E) step of the minibatch by the separate kernels (the fused iteration does
    it inside :func:`~.iteration.ar_iteration`); fills ``st.buf.C``."""
    B, K, buf, cfg, loc = st.batch, st.n_classes, st.buf, st.cfg, st.local
    if st.model == Model.OVE:
        ove_coefficients(buf.psi_y, buf.psi_S, K, cfg.scale, buf.C, buf.elbo)
        return
    if cfg.global_clock:
        rate = np.full(B, min(1.0, cfg.rate0 * (1.0 + t) ** -0.9))
    else:
        loc.visits[batch] += 1
        rate = np.minimum(1.0, cfg.rate0 * (1.0 + loc.visits[batch]) ** -0.9)
    if st.model == Model.SOFTMAX:
        softmax_local_step(buf.psi_y, buf.psi_S, loc.log_eta, batch, rate, K, cfg.scale,
                           buf.C, buf.elbo)
        return
    if st.model == Model.PROBIT:
        u1, u2 = rng.standard_normal(B), rng.standard_normal(B)
    else:
        u1, u2 = rng.logistic(size=B), rng.logistic(size=B)
    noise_local_step(cfg.model, buf.psi_y, buf.psi_S, loc.mu, loc.gamma, batch, u1, u2, rate,
                     K, cfg.scale, buf.C, buf.elbo)
