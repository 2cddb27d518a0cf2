"""The estimator :class:`AugmentReduce`: validation, the solver state, the iteration loop."""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from .._numba import logsumexp
from ..base import (
    ALPHA, DECAY, FIT_INTERCEPT, LEARNING_RATE_AUTO, N_EPOCHS, N_ITER_NO_CHANGE, RANDOM_STATE,
    STOP_TOL, VERBOSE, WARM_START,
    DivergenceWarning, Interval, IterativeSoftmaxEstimator, StrOptions, as_csr,
)
from ..metrics import score_blocks, softmax_loss_and_error
from ..streaming import row_log_losses
from .bounds import MODELS, Model, log_likelihood_is
from .kernels import ar_iteration, noise_local_step, ove_coefficients, softmax_local_step

__all__ = ["AugmentReduce"]

_POSITIVE_INT = [Interval(Integral, 1, None, closed="left")]
_EMPTY = np.empty(0)  # the model arrays an iteration does not use
_FINITE_SCALE = [Interval(Real, 0, np.inf, closed="left")]  # excludes inf and NaN


@dataclass
class _ARState:
    """Everything one A&R fit updates between iterations (dropped at the end of ``fit``)."""

    model: Model
    W: np.ndarray                 # (K, D) weights
    b: np.ndarray                 # (K,) biases
    n_rows: int                   # N
    n_classes: int                # K
    batch: int                    # |B| (clipped to N)
    n_sampled: int                # |S| (clipped to K − 1)
    local_rate0: float            # a of α_t = a (1 + t)^−0.9
    inv_count: np.ndarray         # (D,) 1 / (training rows holding feature d), 0 if none
    ridge: float                  # N · alpha (the sum-scale ridge of the bound)
    G: np.ndarray = None          # (K, D) zero gradient buffer
    Gb: np.ndarray = None
    sW: np.ndarray = None         # RMS state of Section 4's step size (−1 = never touched)
    sb: np.ndarray = None
    stampW: np.ndarray = None     # iteration of each coordinate's last touch
    stampb: np.ndarray = None
    markW: np.ndarray = None      # (K, D) uint8 marks of the coordinates one iteration touches
    markb: np.ndarray = None
    touched: np.ndarray = None
    touched_b: np.ndarray = None
    yb: np.ndarray = None         # (|B|,) labels of the minibatch
    u: np.ndarray = None          # (|B|, |S|) uniforms of the class subsets
    rate: np.ndarray = None       # (|B|,) local step sizes of the minibatch's rows
    u1: np.ndarray = None         # (|B|,) probit: the local and global draws of q^(rep)
    u2: np.ndarray = None
    mark: np.ndarray = None       # (K,) scratch of subsample_classes
    S: np.ndarray = None          # (|B|, |S|) class subsets of the current minibatch
    psi_y: np.ndarray = None
    psi_S: np.ndarray = None
    C: np.ndarray = None          # gradient coefficients of the local step
    elbo: np.ndarray = None       # one-sample ELBO of each row of the minibatch
    visits: np.ndarray = None     # (N,) visits of each row (local_clock="visits")
    log_eta: np.ndarray = None    # (N,) softmax: log η_n of q(ε_n) = Gumbel(log η_n, 1)
    mu: np.ndarray = None         # (N,) probit / logistic: location of q(ε_n)
    gamma: np.ndarray = None      # (N,) probit / logistic: scale softplus(γ_n) of q(ε_n)
    t: int = 0                    # iterations done
    clock: float = 0.0            # training seconds
    elbo_trace: list = field(default_factory=list)
    time_trace: list = field(default_factory=list)

    def allocate(self, nnz_max):
        """Buffers of the kernels: O(K D) for the weights' state, O(|B| |S| nnz) scratch."""
        K, D = self.W.shape
        B, m = self.batch, self.n_sampled
        self.G, self.Gb = np.zeros((K, D)), np.zeros(K)
        self.sW, self.sb = np.full((K, D), -1.0), np.full((K, 1), -1.0)
        self.stampW, self.stampb = np.zeros((K, D), np.int64), np.zeros((K, 1), np.int64)
        self.markW, self.markb = np.zeros((K, D), np.uint8), np.zeros(K, np.uint8)
        self.touched = np.empty(max(1, B * (m + 1) * nnz_max), np.int64)
        self.touched_b = np.empty(B * (m + 1), np.int64)
        self.mark = np.zeros(K, np.bool_)
        self.S = np.empty((B, m), np.int64)
        self.psi_y, self.psi_S = np.empty(B), np.empty((B, m))
        self.C, self.elbo = np.empty((B, m)), np.empty(B)
        self.visits = np.zeros(self.n_rows, np.int64)
        self.yb, self.u, self.rate = np.empty(B, np.int64), np.empty((B, m)), np.empty(B)
        self.u1, self.u2 = np.empty(B), np.empty(B)


class _Likelihood:
    """Evaluation of A&R's models: eq. (1) for softmax and OVE, eq. (5) by importance
    sampling for probit and logistic (mixed into :class:`AugmentReduce`)."""

    def _history_metrics(self, coef, intercept, X, y):
        ll, err = self._loglik_and_error(coef, intercept, X, y, self.history_samples)
        return -ll, err

    def _loglik_and_error(self, coef, intercept, X, y, n_samples, random_state=0):
        code = MODELS[self.model]
        softmax_like = code in (Model.SOFTMAX, Model.OVE)
        if softmax_like and X.nnz == 0 and intercept is not None:
            # no features (the Section 4.1 toy): ψ_n = b for every row, O(N + K)
            log_p = intercept - logsumexp(intercept)
            return float(np.mean(log_p[y])), float(np.mean(y != np.argmax(intercept)))
        if softmax_like:
            loss, err = softmax_loss_and_error(coef, X, y, intercept)
            return -loss, err
        total, wrong = 0.0, 0
        for start, stop, s in score_blocks(coef, X, intercept):
            yy = y[start:stop]
            total += log_likelihood_is(code, s, yy, n_samples, random_state=random_state).sum()
            wrong += int(np.sum(np.argmax(s, axis=1) != yy))
        n = max(X.shape[0], 1)
        return total / n, wrong / n

    def log_likelihood(self, X, y, n_samples=1000, random_state=0):
        """Mean ``log p(y | x)`` under the fitted model: eq. (1) for softmax and OVE (both fit
        a softmax), eq. (5) by importance sampling (N(5, 5²) proposal) for probit/logistic."""
        X = self._validate_X(X)
        ll, _ = self._loglik_and_error(self.coef_, self.intercept_, as_csr(X),
                                       self._encode(y), n_samples, random_state)
        return ll

    def predict_proba(self, X, n_samples=200, random_state=0):
        """Class probabilities: softmax of the scores (softmax, OVE), or eq. (5) for every class
        by importance sampling (probit, logistic; O(N K² n_samples), for small K)."""
        if MODELS[self.model] in (Model.SOFTMAX, Model.OVE):
            return super().predict_proba(X)
        s = self.scores(X)
        N, K = s.shape
        logp = np.empty((N, K))
        for k in range(K):
            logp[:, k] = log_likelihood_is(self.model, s, np.full(N, k), n_samples,
                                           random_state=random_state)
        p = np.exp(logp - logp.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))


#: AugmentReduce's parameter table (checked before every fit)
_AR_CONSTRAINTS = {
    "model": [StrOptions(set(MODELS))],
    "alpha": ALPHA,
    "batch_size": _POSITIVE_INT, "n_sampled": _POSITIVE_INT,
    "learning_rate": LEARNING_RATE_AUTO,
    "decay": DECAY,
    "decay_every": _POSITIVE_INT,
    "local_learning_rate": [Interval(Real, 0, 1, closed="right"), None],
    "local_clock": [StrOptions({"visits", "global"})],
    "init_scale": _FINITE_SCALE, "init_scale_bias": _FINITE_SCALE,
    "fit_intercept": FIT_INTERCEPT,
    "history_samples": _POSITIVE_INT, "n_epochs": N_EPOCHS, "eval_every": _POSITIVE_INT,
    "tol": STOP_TOL, "n_iter_no_change": N_ITER_NO_CHANGE,
    "random_state": RANDOM_STATE, "verbose": VERBOSE, "warm_start": WARM_START,
}


class AugmentReduce(_Likelihood, IterativeSoftmaxEstimator):
    """Softmax, multinomial probit or logistic regression by A&R (Ruiz et al. 2018).

    Utilities ``ψ_nk = w_kᵀ x_n + w_k⁽⁰⁾``; each iteration samples a minibatch ``B`` of rows
    and, per row, ``|S|`` classes other than its label, takes a local step on the row's
    variational parameters and a gradient step on the weights (Algorithms 1-2) to minimise
    the mean over rows of −bound (eq. 7; eq. 8 for the softmax) + (alpha/2)‖W‖².
    ``model="ove"`` is the paper's baseline, the one-vs-each bound (eq. 10), fitted alike.

    Parameters
    ----------
    model : {"softmax", "probit", "logistic", "ove"}, default "softmax"
    alpha : float >= 0, default 1e-4
        Ridge on the weights (biases unpenalised). Ruiz et al. fit maximum likelihood, i.e.
        ``alpha=0`` (they note that a regulariser gives the MAP solution): a Gaussian prior
        ``w_kd ~ N(0, σ²)`` is ``alpha = 1 / (N σ²)`` with N the number of training rows.
        The ridge gradient is applied on the coordinates the iteration touches only, weighted
        by their inverse touch probability, so that it is unbiased at O(|B| |S| nnz) per
        iteration (see :func:`global_step`); weights of features absent from the training
        rows are set to their optimum, 0, at the start when ``alpha > 0``.
    batch_size : int >= 1, default 100
        |B|, clipped to N. An epoch is ⌊N / |B|⌋ iterations over a fresh permutation.
    n_sampled : int >= 1, default 1
        |S|, clipped to K − 1.
    learning_rate : "auto" or float > 0, default "auto"
        ρ₀ of Section 4, on the paper's scale (the bound's gradient summed over the N rows):
        its 0.02 carries over unchanged (0.1 is better in 10 epochs). ``"auto"``: ρ₀ = 1 on
        the rows divided by the power of two nearest their root-mean-square norm (the ridge rescaled
        to keep the same minimiser; ``IterativeSoftmaxEstimator._resolve_step``): the
        normalised step moves a weight by about ρ₀, which suits rows of norm about 1 (on raw
        Bibtex and CLEF, ρ₀ = 0.1 and 0.3 ended further from scikit-learn's accuracy within
        the 100 epochs than 1 did). The step of j at t
        is ``learning_rate · decay^⌊(t−1)/decay_every⌋ · t^{−1/2+1e−16} / (1 + √s_tj)``,
        ``s_tj = 0.1 g_tj² + 0.9 s_{t−1,j}``.
    decay, decay_every : float in (0, 1], int >= 1, default 0.9 and 2000
        ρ₀ is multiplied by ``decay`` every ``decay_every`` iterations (the paper's values).
    local_learning_rate : float in (0, 1] or None, default None
        ``a`` of the local step size ``α_t = a (1 + t)^−0.9`` (Hoffman et al. 2013); None is
        the paper's ``a = 1`` (softmax) or ``0.01`` (probit, logistic). OVE has no local step.
    local_clock : {"visits", "global"}, default "visits"
        What ``t`` counts in α_t: the row's visits (each η_n or (μ_n, γ_n) follows its own
        Robbins–Monro sequence), or the global iteration (Algorithms 1-2 read literally: the
        local parameters freeze once an epoch has many iterations; chapter 2 shows both).
    init_scale, init_scale_bias : float >= 0, default 0.1 and 0.001
        Standard deviations of the Gaussian initial weights and biases (drawn first: every
        model starts from the same point for the same seed).
    fit_intercept : bool, default True ; n_epochs : int >= 0, default 100 (at most)
    tol : float >= 0 or None, default 1e-3 ; n_iter_no_change : int >= 1, default 5
        The fit stops once ``n_iter_no_change`` history entries in a row fail to lower the
        training loss by ``tol`` (scikit-learn's rule); None runs all ``n_epochs``.
    history_samples : int >= 1, default 100
        Importance samples of eq. (5) for the probit/logistic ``history_`` losses.
    eval_every : int >= 1, default 1
        Epochs between entries of ``history_`` (each entry scores all N training rows, which
        on long runs can cost more than the epochs themselves).
    random_state, verbose : as in every estimator of the book.
    warm_start : bool, default False (softmax: each ``log η_i`` starts at its optimum). No
        ``partial_fit``: the stochastic gradients are scaled by N, the whole set's size.

    Attributes
    ----------
    coef_, intercept_, classes_, history_, diverged_, n_epochs_ : see the base class
    elbo_trace_ : (iterations,) mean per-row stochastic ELBO of each minibatch (no ridge)
    time_trace_ : (iterations,) cumulative seconds at the end of each iteration
    n_iter_ : int, iterations done
    log_eta_ : (N,) softmax only: ``log η_n`` of the fitted ``q(ε_n) = Gumbel(log η_n, 1)``
        of each training row (eq. 8), in the order of the rows of X
    q_loc_, q_scale_ : (N,) probit and logistic only: location μ_n and scale softplus(γ_n)
        of the fitted ``q(ε_n)`` of each training row

    Divergence
    ----------
    The base class's checks apply. Besides, a fit whose lowest training loss stays above
    10·max(log K, 1) warns DivergenceWarning and sets ``diverged_`` (``coef_`` = final
    weights): the normalised step moves a weight by about ``learning_rate`` per iteration, so
    features on a huge scale (``X · 1e200``) cannot be fitted. Standardise X.
    """

    _parameter_constraints = _AR_CONSTRAINTS

    _auto_learning_rate = 1.0
    _stops_on_tol = True

    def __init__(self, *, model="softmax", alpha=1e-4, batch_size=100, n_sampled=1,
                 learning_rate="auto", decay=0.9, decay_every=2000, local_learning_rate=None,
                 local_clock="visits", init_scale=0.1, init_scale_bias=0.001,
                 fit_intercept=True, history_samples=100, n_epochs=100, tol=1e-3,
                 n_iter_no_change=5, eval_every=1, random_state=None, verbose=False,
                 warm_start=False):
        self.model = model
        self.alpha = alpha
        self.batch_size = batch_size
        self.n_sampled = n_sampled
        self.learning_rate = learning_rate
        self.decay = decay
        self.decay_every = decay_every
        self.local_learning_rate = local_learning_rate
        self.local_clock = local_clock
        self.init_scale = init_scale
        self.init_scale_bias = init_scale_bias
        self.fit_intercept = fit_intercept
        self.history_samples = history_samples
        self.n_epochs = n_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.eval_every = eval_every
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    # -- the methods of the base contract --------------------------------------------------
    def _init_state(self, X, y, rng):
        return _start_state(self, X, rng)

    def _n_rounds(self):
        return -(-int(self.n_epochs) // int(self.eval_every))

    def _run_epoch(self, st, X, y, rnd, rng):
        """One round: ``eval_every`` epochs (fewer in the last round)."""
        every = int(self.eval_every)
        for _ in range(min(every, int(self.n_epochs) - rnd * every)):
            self._one_epoch(st, X, y, rng)

    def _one_epoch(self, st, X, y, rng):
        _one_epoch(self, st, X, y, rng)

    def _coef(self, st):
        return st.W, (st.b if self.fit_intercept else None)

    def _warm_rows(self, st, X, y):
        if st.model == Model.SOFTMAX:  # η_i* = Σ_k e^{ψ_k − ψ_y} (see _start_state)
            st.log_eta[:] = row_log_losses(st.W, X, y, st.b)

    def _finalize(self, st):
        every = int(self.eval_every)
        self.history_["epoch"] = [min(e * every, int(self.n_epochs))
                                  for e in self.history_["epoch"]]
        self.n_epochs_ = min(self.n_epochs_ * every, int(self.n_epochs))
        self.elbo_trace_ = np.asarray(st.elbo_trace)
        self.time_trace_ = np.asarray(st.time_trace)
        self.n_iter_ = st.t
        for name in ("log_eta_", "q_loc_", "q_scale_"):
            self.__dict__.pop(name, None)
        if st.model == Model.SOFTMAX:
            self.log_eta_ = st.log_eta
        elif st.model in (Model.PROBIT, Model.LOGISTIC):
            self.q_loc_ = st.mu
            self.q_scale_ = np.logaddexp(0.0, st.gamma)  # softplus(γ_n)
        _flag_no_progress(self, st.n_classes)


def _start_state(est, X, rng):
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
    st = _ARState(model=code, W=W, b=b, n_rows=N, n_classes=K,
                  batch=min(int(est.batch_size), N),
                  n_sampled=min(int(est.n_sampled), K - 1), local_rate0=float(a),
                  inv_count=inv_count, ridge=N * est._ridge())
    st.allocate(int(np.diff(X.indptr).max()) if N else 0)
    if code == Model.SOFTMAX:
        # η* = Σ_k e^{ψ_k − ψ_y} ≈ K at the near-zero initial weights.
        st.log_eta = np.full(N, math.log(K))
    elif code in (Model.PROBIT, Model.LOGISTIC):
        st.mu = np.zeros(N)
        st.gamma = np.full(N, math.log(math.e - 1.0))  # scale 1
    return st


def _one_epoch(est, st, X, y, rng):
    """One epoch: ⌊N/|B|⌋ iterations over a fresh permutation, one fused kernel call each
    (:func:`~.kernels.ar_iteration`); the draws are taken in the order of the separate steps
    (subset uniforms, then the noise draws), into buffers allocated once per fit."""
    N, B, m, K = st.n_rows, st.batch, st.n_sampled, st.n_classes
    perm = rng.permutation(N)
    scale = N / B
    ridge_y = scale * st.ridge
    ridge_S = ridge_y * (K - 1) / m
    code, glob = int(st.model), est.local_clock == "global"
    fit_b = bool(est.fit_intercept)
    log_eta, mu, gamma = (_EMPTY if a is None else a for a in (st.log_eta, st.mu, st.gamma))
    for it in range(max(1, N // B)):
        t0 = time.perf_counter()
        st.t += 1
        t = st.t
        batch = perm[it * B:(it + 1) * B]
        np.take(y, batch, out=st.yb)
        rng.random(out=st.u)
        u1, u2 = _noise_draws(st, rng)
        rho = est._step_at((t - 1) // est.decay_every)
        ar_iteration(code, X.indptr, X.indices, X.data, batch, st.yb, st.u, st.S, st.mark,
                     st.W, st.b, st.psi_y, st.psi_S, st.C, st.elbo, st.rate, log_eta, mu, gamma,
                     u1, u2, st.visits, st.local_rate0, glob, st.G, st.Gb, st.sW, st.sb,
                     st.stampW, st.stampb, st.markW, st.markb, st.touched, st.touched_b, t,
                     rho, fit_b, st.inv_count, scale, ridge_y, ridge_S)
        st.clock += time.perf_counter() - t0
        st.elbo_trace.append(float(st.elbo.mean()))
        st.time_trace.append(st.clock)


def _noise_draws(st, rng):
    """The probit and logistic draws ``u ~ q^(rep)`` of an iteration (local, then global), in
    the order :func:`_local_step` draws them; empty arrays for softmax and OVE."""
    if st.model == Model.PROBIT:
        return rng.standard_normal(out=st.u1), rng.standard_normal(out=st.u2)
    if st.model == Model.LOGISTIC:
        B = st.batch
        return rng.logistic(size=B), rng.logistic(size=B)
    return _EMPTY, _EMPTY


def _local_step(st, batch, t, scale, rng, local_clock):
    """Local (E) step of the minibatch; fills the gradient coefficients ``st.C``."""
    B, K = st.batch, st.n_classes
    if st.model == Model.OVE:
        ove_coefficients(st.psi_y, st.psi_S, K, scale, st.C, st.elbo)
        return
    if local_clock == "global":
        rate = np.full(B, min(1.0, st.local_rate0 * (1.0 + t) ** -0.9))
    else:
        st.visits[batch] += 1
        rate = np.minimum(1.0, st.local_rate0 * (1.0 + st.visits[batch]) ** -0.9)
    if st.model == Model.SOFTMAX:
        softmax_local_step(st.psi_y, st.psi_S, st.log_eta, batch, rate, K, scale, st.C,
                           st.elbo)
        return
    if st.model == Model.PROBIT:
        u1, u2 = rng.standard_normal(B), rng.standard_normal(B)
    else:
        u1, u2 = rng.logistic(size=B), rng.logistic(size=B)
    noise_local_step(int(st.model), st.psi_y, st.psi_S, st.mu, st.gamma, batch, u1, u2,
                     rate, K, scale, st.C, st.elbo)


def _flag_no_progress(est, n_classes):
    """DivergenceWarning and ``diverged_`` when the lowest training loss of a fit stayed above
    ``_divergence_factor · max(log K, 1)`` (see :class:`AugmentReduce`, Divergence)."""
    losses = est.history_["train_loss"]
    limit = est._divergence_factor * max(math.log(n_classes), 1.0)
    if losses and not est.diverged_ and min(losses) > limit:
        est.diverged_ = True
        warnings.warn(
            f"AugmentReduce did not converge: its lowest training loss, {min(losses):.4g}, "
            f"stayed above {limit:.4g} ({est._divergence_factor:g}× log K, the loss of "
            "uniform probabilities); the step moves each weight by about learning_rate "
            "per iteration, so features must be on a unit scale: standardise X",
            DivergenceWarning, stacklevel=4,
        )
