"""The baselines of Section 4.4, on the objective of eq. (4): SGD, ASGD, SAG and SAGls as
numba kernels (one pass over a pre-drawn order of rows), L-BFGS from ``scipy.optimize``.

All kernels take the ridge ``alpha`` (the paper's η, mean scale) and the step
``learning_rate`` (the step of one row's gradient ``(σ(θᵀx_i) − y_i) x_i + αθ``, so it is the
step of the paper's per-sample updates as is).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np
import scipy.optimize
from numba import njit
from sklearn.exceptions import ConvergenceWarning

from .._numba import sigmoid, softplus, sparse_row_axpy, sparse_row_dot
from ..base import (
    ALPHA, LEARNING_RATE, MAX_ITER, N_EPOCHS, RANDOM_STATE, TOL, VERBOSE, WARM_START,
    Interval,
)
from .objective import LogisticState, _BinaryLogistic, lipschitz_constant, logistic_objective

__all__ = ["sgd_epoch", "asgd_epoch", "sag_epoch", "LogisticSGD", "LogisticASGD",
           "LogisticSAG", "LogisticLBFGS"]


# -- kernels ---------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _sgd_step(indptr, indices, data, y, theta, i, shrink, learning_rate):
    """One SGD step on row ``i``: ``θ ← (1 − aα) θ − a (σ(θᵀx_i) − y_i) x_i``."""
    idx = indices[indptr[i]:indptr[i + 1]]
    val = data[indptr[i]:indptr[i + 1]]
    g = sigmoid(sparse_row_dot(idx, val, theta)) - y[i]
    theta *= shrink
    sparse_row_axpy(-learning_rate * g, idx, val, theta)


@njit(cache=True, nogil=True)
def sgd_epoch(indptr, indices, data, y, theta, alpha, learning_rate, order):
    """SGD with constant step ``a = learning_rate``: :func:`_sgd_step` for each i in ``order``.

    O(nnz(x_i) + d) per step (the ridge shrinkage is applied densely; d ≤ 10⁴ here).
    """
    shrink = 1.0 - learning_rate * alpha
    for t in range(order.shape[0]):
        _sgd_step(indptr, indices, data, y, theta, order[t], shrink, learning_rate)


@njit(cache=True, nogil=True)
def asgd_epoch(indptr, indices, data, y, theta, avg, count, alpha, learning_rate, order):
    """Averaged SGD (Polyak–Ruppert): the SGD step of :func:`sgd_epoch`, then
    ``θ̄ ← θ̄ + (θ − θ̄)/(t + 1)``; returns the new step count t. The model is θ̄."""
    shrink = 1.0 - learning_rate * alpha
    for t in range(order.shape[0]):
        _sgd_step(indptr, indices, data, y, theta, order[t], shrink, learning_rate)
        count += 1
        inv = 1.0 / count
        for j in range(theta.shape[0]):
            avg[j] += (theta[j] - avg[j]) * inv
    return count


@njit(cache=True, nogil=True)
def sag_epoch(indptr, indices, data, y, sqnorm, theta, grad_mem, seen, dsum, n_seen,
              alpha, learning_rate, lipschitz, line_search, order):
    """Stochastic average gradient (Schmidt, Le Roux & Bach), one pass over ``order``.

    Keeps the last scalar gradient ``g_i = σ(θᵀx_i) − y_i`` of every row and their sum
    ``dsum = Σ_i g_i x_i`` over the ``n_seen`` rows visited so far; the step is
    ``θ ← (1 − aα) θ − (a / n_seen) dsum``. With ``line_search`` (SAGls) the step is
    ``a = 1/(L + α)`` where L doubles until ``f_i(θ − g_i x_i / L) ≤ f_i(θ) − ‖g_i x_i‖²/(2L)``
    (``f_i(u) = log(1 + e^u) − y_i u``) and decays by ``2^{-1/N}`` after each step; otherwise
    ``a = learning_rate``. Returns ``(n_seen, L)``.
    """
    n = grad_mem.shape[0]
    decay = 2.0 ** (-1.0 / n)
    a = learning_rate
    for t in range(order.shape[0]):
        i = order[t]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        u = sparse_row_dot(idx, val, theta)
        g = sigmoid(u) - y[i]
        sparse_row_axpy(g - grad_mem[i], idx, val, dsum)
        grad_mem[i] = g
        if not seen[i]:
            seen[i] = True
            n_seen += 1
        if line_search:
            gg = g * g * sqnorm[i]
            if gg > 1e-16:
                f0 = softplus(u) - y[i] * u
                while True:
                    u_new = u - g * sqnorm[i] / lipschitz
                    if softplus(u_new) - y[i] * u_new <= f0 - gg / (2.0 * lipschitz):
                        break
                    lipschitz *= 2.0
            a = 1.0 / (lipschitz + alpha)
        theta *= 1.0 - a * alpha
        c = a / n_seen
        for j in range(theta.shape[0]):
            theta[j] -= c * dsum[j]
        if line_search:
            lipschitz *= decay
    return n_seen, lipschitz


# -- estimators ------------------------------------------------------------------------------
_COMMON = {"alpha": ALPHA, "n_epochs": N_EPOCHS, "random_state": RANDOM_STATE,
           "verbose": VERBOSE, "warm_start": WARM_START}


@dataclass
class SGDState(LogisticState):
    """SGD/ASGD state: the iterate θ, the step, and for ASGD the average θ̄ and the step
    count."""

    step: float = 0.0
    avg: np.ndarray | None = None
    count: int = 0


class LogisticSGD(_BinaryLogistic):
    """SGD with a constant step on ``mean log-loss + (alpha/2)‖θ‖²`` (the paper's SGD baseline).

    Parameters
    ----------
    learning_rate : float > 0 or None, default None
        The constant step a of ``θ ← (1 − aα)θ − a(σ(θᵀx_i) − y_i)x_i`` (the paper tunes it
        per dataset; its values are this parameter as is). None is ``1/L`` with
        ``L = max_i ‖x_i‖²/4 + alpha``, a step that is stable whatever the scale of X.
    alpha : float ≥ 0, default 1e-4
        Ridge; the paper's η (pass ``alpha=1/T`` for its experiments).
    n_epochs : int, default 10
        Passes, each of T steps on rows drawn uniformly with replacement.
    random_state, verbose : as everywhere.
    warm_start : bool, default False
        Start ``fit`` from the fitted ``theta_`` (ASGD: its average restarts there).
    """

    _parameter_constraints = {"learning_rate": [*LEARNING_RATE, None], **_COMMON}

    def __init__(self, *, learning_rate=None, alpha=1e-4, n_epochs=10, random_state=None,
                 verbose=False, warm_start=False):
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    def _init_state(self, X, y, rng):
        return SGDState.start(X, y, step=self._step(X), **self._extra_state(X))

    def _step(self, X):
        if self.learning_rate is not None:
            return float(self.learning_rate)
        return 1.0 / lipschitz_constant(X, self.alpha)[1]

    def _extra_state(self, X):
        return {}

    def _run_epoch(self, state, X, y, epoch, rng):
        order = rng.integers(0, state.n, size=state.n)
        sgd_epoch(*state.arrays, state.theta, float(self.alpha), state.step, order)
        state.passes.append(epoch + 1.0)


class LogisticASGD(LogisticSGD):
    """Averaged SGD: the steps of :class:`LogisticSGD`, and the model is their Polyak–Ruppert
    average θ̄ from the first step on (the paper's ASGD baseline). Same parameters."""

    def _extra_state(self, X):
        return {"avg": np.zeros(X.shape[1])}

    def _theta(self, state):
        return state.avg

    def _set_weights(self, state, coef, intercept):
        super()._set_weights(state, coef, intercept)
        state.avg[:] = state.theta  # the average restarts at the warm θ (count 0)

    def _run_epoch(self, state, X, y, epoch, rng):
        order = rng.integers(0, state.n, size=state.n)
        state.count = asgd_epoch(*state.arrays, state.theta, state.avg, state.count,
                                 float(self.alpha), state.step, order)
        state.passes.append(epoch + 1.0)


@dataclass
class SAGState(LogisticState):
    """SAG state: squared row norms, the stored scalar gradients, which rows were seen, their
    gradient sum, the step and SAGls's running Lipschitz estimate."""

    sqnorm: np.ndarray = None
    grad_mem: np.ndarray = None
    seen: np.ndarray = None
    dsum: np.ndarray = None
    n_seen: int = 0
    step: float = 0.0
    lipschitz: float = 1.0
    global_lipschitz: float = 0.0


class LogisticSAG(_BinaryLogistic):
    """Stochastic average gradient on ``mean log-loss + (alpha/2)‖θ‖²`` (Schmidt, Le Roux &
    Bach; the paper's SAG and SAGls baselines).

    Parameters
    ----------
    learning_rate : float > 0 or None, default None
        The constant step; None is ``1/L`` with the global Lipschitz constant
        ``L = max_i ‖x_i‖²/4 + alpha`` (the paper's SAG). Ignored with ``line_search``.
    line_search : bool, default False
        SAGls: the step ``1/(L + alpha)`` with L estimated by a line search from L = 1.
    alpha : float ≥ 0, default 1e-4
        Ridge; the paper's η (pass ``alpha=1/T`` for its experiments).
    n_epochs : int, default 10
        Passes, each of T steps on rows drawn uniformly with replacement.
    random_state, verbose : as everywhere.
    warm_start : bool, default False
        Start ``fit`` from the fitted ``theta_`` (the stored gradients start empty).

    Attributes
    ----------
    lipschitz_ : float, the global constant ``max_i ‖x_i‖²/4 + alpha``.
    """

    _parameter_constraints = {
        "learning_rate": [*LEARNING_RATE, None],
        "line_search": ["boolean"],
        **_COMMON,
    }

    def __init__(self, *, learning_rate=None, line_search=False, alpha=1e-4, n_epochs=10,
                 random_state=None, verbose=False, warm_start=False):
        self.learning_rate = learning_rate
        self.line_search = line_search
        self.alpha = alpha
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    def _init_state(self, X, y, rng):
        n, d = X.shape
        sqnorm, lipschitz = lipschitz_constant(X, self.alpha)
        step = 1.0 / lipschitz if self.learning_rate is None else float(self.learning_rate)
        return SAGState.start(X, y, sqnorm=sqnorm, grad_mem=np.zeros(n),
                              seen=np.zeros(n, dtype=np.bool_), dsum=np.zeros(d), step=step,
                              global_lipschitz=lipschitz)

    def _run_epoch(self, state, X, y, epoch, rng):
        order = rng.integers(0, state.n, size=state.n)
        indptr, indices, data, yf = state.arrays
        state.n_seen, state.lipschitz = sag_epoch(
            indptr, indices, data, yf, state.sqnorm, state.theta, state.grad_mem, state.seen,
            state.dsum, state.n_seen, float(self.alpha), state.step, state.lipschitz,
            bool(self.line_search), order)
        state.passes.append(epoch + 1.0)

    def _finalize(self, state):
        super()._finalize(state)
        self.lipschitz_ = state.global_lipschitz


@dataclass
class LBFGSState(LogisticState):
    """L-BFGS state: the iterate after each L-BFGS iteration and the function evaluations
    (passes) spent until then; ``None`` until scipy has run."""

    iterates: list | None = None
    evaluations: list = field(default_factory=list)
    n_iter: int = 0


class LogisticLBFGS(_BinaryLogistic):
    """L-BFGS (``scipy.optimize``, L-BFGS-B with its line search) on
    ``mean log-loss + (alpha/2)‖θ‖²`` (the paper's L-BFGS baseline).

    One round of the fit is one L-BFGS iteration; ``history_["passes"]`` counts the function
    and gradient evaluations (one pass each) spent up to it, the paper's x-axis. scipy runs
    the whole minimisation inside the first round, so ``history_["time"]`` is the total time
    from round 1 on (time a fit with a smaller ``max_iter`` to know the time to a given
    iteration). When L-BFGS stops before ``max_iter`` (gradient below ``tol``, or no
    further decrease in floating point), the remaining rounds repeat its last iterate.

    Parameters
    ----------
    alpha : float ≥ 0, default 1e-4
        Ridge; the paper's η (pass ``alpha=1/T`` for its experiments).
    memory : int ≥ 1, default 10
        Correction pairs kept (scipy's ``maxcor``).
    max_iter : int ≥ 1, default 100
        L-BFGS iterations (rounds).
    tol : float ≥ 0, default 1e-6
        Stop when the largest gradient entry is below ``tol`` (scipy's ``gtol``).
    verbose : as everywhere. (The method is deterministic: no ``random_state``.)
    warm_start : bool, default False
        Start L-BFGS from the fitted ``theta_``.

    Attributes
    ----------
    n_iter_ : int, L-BFGS iterations scipy ran (at most ``max_iter``).
    """

    _parameter_constraints = {
        "alpha": ALPHA,
        "memory": [Interval(Integral, 1, None, closed="left")],
        "max_iter": MAX_ITER,
        "tol": TOL,
        "verbose": VERBOSE,
        "warm_start": WARM_START,
    }
    random_state = None  # read by the base fit loop; L-BFGS draws nothing

    def __init__(self, *, alpha=1e-4, memory=10, max_iter=100, tol=1e-6, verbose=False,
                 warm_start=False):
        self.alpha = alpha
        self.memory = memory
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.warm_start = warm_start

    def _n_rounds(self):
        return int(self.max_iter)

    def _init_state(self, X, y, rng):
        return LBFGSState.start(X, y)

    def _minimize(self, state, X, y):
        """One scipy L-BFGS-B run, recording every iterate and the evaluations before it."""
        yf = y.astype(np.float64)
        n_evals = [0]
        iterates, evaluations = [], []

        def fun(theta):
            n_evals[0] += 1
            return logistic_objective(theta, X, yf, float(self.alpha))

        def callback(theta):
            iterates.append(np.array(theta, copy=True))
            evaluations.append(n_evals[0])

        res = scipy.optimize.minimize(
            fun, state.theta.copy(), jac=True, method="L-BFGS-B", callback=callback,
            options={"maxiter": int(self.max_iter), "maxfun": 10**9,
                     "maxcor": int(self.memory), "gtol": float(self.tol), "ftol": 0.0})
        if not iterates and not res.success:
            warnings.warn(
                "LogisticLBFGS made no step from its start ({res.message}): the line search "
                "failed, typically on features of extreme scale; rescale X",
                ConvergenceWarning, stacklevel=4)
        state.n_iter = len(iterates)
        if not iterates:  # stopped at its start (zero gradient)
            iterates, evaluations = [state.theta.copy()], [n_evals[0]]
        state.iterates, state.evaluations = iterates, evaluations

    def _run_epoch(self, state, X, y, epoch, rng):
        if state.iterates is None:
            self._minimize(state, X, y)
        i = min(epoch, len(state.iterates) - 1)
        state.theta = state.iterates[i]
        state.passes.append(float(state.evaluations[i]))

    def _finalize(self, state):
        super()._finalize(state)
        self.n_iter_ = state.n_iter
