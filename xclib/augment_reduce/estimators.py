"""The estimator :class:`AugmentReduce`: validation, the solver state, the iteration loop."""
from __future__ import annotations

import math
import time
import warnings
from numbers import Integral, Real

import numpy as np

from .._numba import csr_arrays, logsumexp
from ..base import (
    ALPHA, DECAY, FIT_INTERCEPT, LEARNING_RATE_AUTO, N_EPOCHS, N_ITER_NO_CHANGE, RANDOM_STATE,
    STOP_TOL, VERBOSE, WARM_START,
    DivergenceWarning, Interval, IterativeSoftmaxEstimator, StrOptions, as_csr,
)
from ..metrics import score_blocks, softmax_loss_and_error
from ..streaming import row_log_losses
from .bounds import MODELS, Model, log_likelihood_is
from .iteration import ar_iteration
from .state import start_state

__all__ = ["AugmentReduce"]

_POSITIVE_INT = [Interval(Integral, 1, None, closed="left")]
_FINITE_SCALE = [Interval(Real, 0, np.inf, closed="left")]  # excludes inf and NaN


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


class _Fitting:
    """The methods of the base class's fit contract for A&R (mixed into
    :class:`AugmentReduce`): the state, the rounds of ``eval_every`` epochs, the result."""

    _auto_learning_rate = 1.0
    _stops_on_tol = True

    def _init_state(self, X, y, rng):
        return start_state(self, X, rng)

    def _n_rounds(self):
        return -(-int(self.n_epochs) // int(self.eval_every))

    def _run_epoch(self, st, X, y, rnd, rng):
        """One round: ``eval_every`` epochs (fewer in the last round)."""
        every = int(self.eval_every)
        for _ in range(min(every, int(self.n_epochs) - rnd * every)):
            _one_epoch(self, st, X, y, rng)

    def _coef(self, st):
        return st.W, (st.b if self.fit_intercept else None)

    def _warm_rows(self, st, X, y):
        if st.model == Model.SOFTMAX:  # η_i* = Σ_k e^{ψ_k − ψ_y} (see start_state)
            st.local.log_eta[:] = row_log_losses(st.W, X, y, st.b)

    def _finalize(self, st):
        _finish(self, st)


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


class AugmentReduce(_Likelihood, _Fitting, IterativeSoftmaxEstimator):
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
    n_sampled : int >= 1, default 3
        |S|, clipped to K − 1. The paper's Table 1 takes 1 on its smaller sets (chapter 2
        passes its values); at 1 a default fit on ALOI's first 100 objects stopped 0.05 to
        0.07 below scikit-learn's test accuracy, at 3 it stopped 0.03 to 0.04 below (three
        seeds); the notation page's table gives the seconds.
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

    def __init__(self, *, model="softmax", alpha=1e-4, batch_size=100, n_sampled=3,
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


def _one_epoch(est, st, X, y, rng):
    """One epoch: ⌊N/|B|⌋ iterations over a fresh permutation, one fused kernel call each
    (:func:`~.iteration.ar_iteration`); the draws are taken in the order of the separate steps
    (subset uniforms, then the noise draws), into buffers allocated once per fit."""
    N, B = st.n_rows, st.batch
    perm = rng.permutation(N)
    rows = csr_arrays(X)
    for it in range(max(1, N // B)):
        t0 = time.perf_counter()
        st.t += 1
        batch = perm[it * B:(it + 1) * B]
        np.take(y, batch, out=st.yb)
        draws = st.draws(batch, rng)
        rho = est._step_at((st.t - 1) // est.decay_every)
        ar_iteration(rows, draws, st.W, st.b, st.local, st.steps, st.buf, st.cfg, st.t, rho)
        st.clock += time.perf_counter() - t0
        st.elbo_trace.append(float(st.buf.elbo.mean()))
        st.time_trace.append(st.clock)


def _finish(est, st):
    """The fitted attributes of the rounds (``eval_every`` epochs each), the traces and the
    local parameters; a warning when the fit made no progress."""
    every = int(est.eval_every)
    est.history_["epoch"] = [min(e * every, int(est.n_epochs)) for e in est.history_["epoch"]]
    est.n_epochs_ = min(est.n_epochs_ * every, int(est.n_epochs))
    est.elbo_trace_ = np.asarray(st.elbo_trace)
    est.time_trace_ = np.asarray(st.time_trace)
    est.n_iter_ = st.t
    for name in ("log_eta_", "q_loc_", "q_scale_"):
        est.__dict__.pop(name, None)
    if st.model == Model.SOFTMAX:
        est.log_eta_ = st.local.log_eta
    elif st.model in (Model.PROBIT, Model.LOGISTIC):
        est.q_loc_ = st.local.mu
        est.q_scale_ = np.logaddexp(0.0, st.local.gamma)  # softplus(γ_n)
    _flag_no_progress(est, st.n_classes)


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
