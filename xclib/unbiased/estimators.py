"""The estimators of Fagan & Iyengar (see :mod:`xclib.unbiased`): :class:`VanillaSGD`,
:class:`UMax` and :class:`ImplicitSGD`, one datapoint and one class (or m classes) per step,
and :class:`MinibatchImplicitSGD` (Appendix F.3, kernels in :mod:`.minibatch`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from threadpoolctl import threadpool_limits

from .._numba import SHUFFLE_MODES, csr_arrays, draw_other_classes, epoch_order
from ..base import (
    ALPHA, DECAY_ADAPTIVE, LEARNING_RATE_AUTO, MAX_ITER, N_EPOCHS, N_ITER_NO_CHANGE, RANDOM_STATE,
    STOP_TOL, TOL, VERBOSE, WARM_START, Interval,
    EVAL_EVERY, EvalEvery, IterativeSoftmaxEstimator, StrOptions, max_row_norm,
)
from ..streaming import StreamingFit, row_log_losses
from .implicit_epoch import implicit_epoch
from .kernels import CLASS_SAMPLING, draw_class_sets, sgd_epoch, sgd_epoch_sampled
from .minibatch import (
    Batches, batch_factors, batch_labels, draw_batch_classes, make_batches,
    minibatch_class_weights, minibatch_epoch,
)
from .objective import FORMULATIONS, class_weights, umax_bounds

__all__ = ["VanillaSGD", "UMax", "ImplicitSGD", "MinibatchImplicitSGD"]


# -- estimators ------------------------------------------------------------------------------
@dataclass
class _DoubleSumState:
    """Solver state of the double-sum methods."""

    W: np.ndarray  # (K, D)
    u: np.ndarray  # (N,) the auxiliary variables of eq. (5)
    beta: np.ndarray  # (K,) class weights of the ridge
    sqnorm: np.ndarray  # (N,) ‖x_i‖²
    b_w: float = np.inf  # projection bounds of U-max (Appendix A): ‖w_k‖ ≤ b_w, u ≤ b_u
    b_u: float = np.inf
    evals: list = field(default_factory=list)  # Implicit SGD: evaluations of (16) per step


_SHARED_DOC = """
    Parameters
    ----------
    learning_rate : "auto" or float > 0, η₀, η_t = η₀ · decay^epoch, for one (i, k) of eq. (6)
        without the paper's factor N (the authors' code): Table 2's values as printed; a step
        η on the paper's N-scaled ``f_ik`` is ``learning_rate = N·η``. ``"auto"`` (default):
        the rows are divided by the power of two s nearest their root-mean-square norm, the ridge
        becomes alpha/s² on V = s·W (the same minimiser, exactly) and η₀ is the class's
        ``_auto_learning_rate``, the rate that suits rows of norm about 1 (η₀/s² in the
        units of X: ``learning_rate_``; see ``IterativeSoftmaxEstimator._resolve_step``).
    n_epochs : int, at most this many epochs of N steps
    decay : "auto" (default), "adaptive" or float in (0, 1]: a number is the
        per-epoch factor of the papers' schedule (0.9 in the papers); "adaptive" holds the step
        while the loss falls and divides it by 5 when it stalls or blows up
        (``StepRules._step_at``); "auto" is "adaptive" with ``learning_rate="auto"``, 0.9
        with a number
    tol : float ≥ 0 or None, default 1e-3, and n_iter_no_change : int, default 5: the fit
        stops once ``n_iter_no_change`` epochs in a row fail to lower the training log-loss
        by ``tol`` (scikit-learn's rule; under the adaptive schedule such a stall first cuts
        the step, and stops the fit at the fourth cut); None runs all ``n_epochs`` (the
        paper's protocol)
    eval_every : int ≥ 1, default 1: the training log-loss (history, divergence, stopping:
        ``n_iter_no_change`` then counts rounds) is evaluated once every ``eval_every``
        epochs; at large N·K that pass costs more than an epoch of O(D) steps
        (:class:`~xclib.base.EvalEvery`)
    alpha : float ≥ 0, ridge: the objective is mean log-loss + (alpha/2)‖W‖²; Fagan &
        Iyengar's μ (eq. 2, a sum over datapoints) is ``alpha·N``. The paper's experiments use
        μ = 0: pass ``alpha=0.0`` to reproduce them.
    shuffle : "uniform" (paper) | "reshuffle" | "fixed" (authors' code)
    u_init : None (log K = u_i* at W = 0, Algorithm 1) or in [0, log K] (the authors' code: 0).
        A larger start only scales every gradient by ``e^{log K − u_init}``: rejected.
    random_state, verbose : as usual
    warm_start : bool, start ``fit`` from the fitted weights, each u_i at its optimum for them
        (:mod:`xclib.streaming`); ``partial_fit(X, y, classes)`` streams chunks (not the
        minibatch variant)
"""


class _DoubleSumSGD(EvalEvery, IterativeSoftmaxEstimator):
    """Shared parts: W = 0 and u = log K at start, η_t = η₀·decay^epoch, one epoch = N steps
    of one datapoint and one class ``k ≠ y_i``."""

    _stops_on_tol = True
    _parameter_constraints = {
        "learning_rate": LEARNING_RATE_AUTO, "n_epochs": N_EPOCHS, "alpha": ALPHA,
        "decay": DECAY_ADAPTIVE, "tol": STOP_TOL, "n_iter_no_change": N_ITER_NO_CHANGE,
        "eval_every": EVAL_EVERY,
        "shuffle": [StrOptions(set(SHUFFLE_MODES))],
        "u_init": [None, Interval(Real, 0, None, closed="left")],  # and <= log K (_init_state)
        "random_state": RANDOM_STATE, "verbose": VERBOSE, "warm_start": WARM_START,
    }

    def _init_state(self, X, y, rng):
        K = self.classes_.shape[0]
        if self.u_init is not None and self.u_init > math.log(K) * (1 + 1e-12):
            raise ValueError(
                f"u_init must be None (log K) or in [0, log K] = [0, {math.log(K):.4g}] for "
                f"K = {K} (u* at W = 0 is log K; a larger u_init scales every gradient by "
                f"e^(log K - u_init)), got {self.u_init!r}")
        u0 = math.log(K) if self.u_init is None else float(self.u_init)
        return _DoubleSumState(
            W=np.zeros((K, X.shape[1])), u=np.full(X.shape[0], u0),
            beta=class_weights(y, K, *self._class_draw()),
            sqnorm=np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel())

    def _class_draw(self):
        """``(m, sampling)``: the classes per step and how they are drawn (one class ≠ y_i
        for Implicit SGD)."""
        return int(getattr(self, "n_sampled", 1)), getattr(self, "class_sampling", "others")

    def _draws(self, rng, y, n_classes, epoch):
        """The epoch's datapoints, their classes (``(T,)``: one k ≠ y_i per step; ``(T, m)``
        with m classes per step) and its learning rate."""
        rows = epoch_order(rng, y.shape[0], self.shuffle)
        lr = self._step_at(epoch)
        m, sampling = self._class_draw()
        if m == 1 and sampling == "others":
            return rows, draw_other_classes(rng, y[rows], n_classes), lr
        return rows, draw_class_sets(rng, y[rows], n_classes, m, sampling), lr

    def _coef(self, state):
        return state.W, None

    def _finalize(self, state):
        self.u_ = state.u.copy()

    def _warm_rows(self, state, X, y):
        """``u_i`` at its optimum for the warm weights (eq. 5's bound is then tight), within
        U-max's projection bound."""
        raman = getattr(self, "formulation", "proposed") == "raman"
        u = row_log_losses(state.W, X, None if raman else y)
        np.minimum(u, getattr(state, "b_u", np.inf), out=state.u)


class VanillaSGD(StreamingFit, _DoubleSumSGD):
    __doc__ = """Plain SGD on the double sum (eq. 6 or Raman et al.'s eq. 8), one (i, k) per step.

    Its gradients are exponential in ``x_iᵀ(w_k − w_{y_i}) − u_i`` (Section 2.2): at large rates
    it overflows (``DivergenceWarning``, ``diverged_``, the lowest-loss weights are kept).
    The same instability bounds the default step (``learning_rate="auto"``, ``min(0.1, 10/K)``
    on rescaled rows): at large K vanilla SGD then stops short of the optimum's accuracy (the
    book's notation page measures it on raw sets; on ALOI's histograms 0.12 below
    scikit-learn's), the paper's own finding (its Table 3). :class:`ImplicitSGD` is stable at
    any step and is the double-sum method to use by default.
    """ + _SHARED_DOC + """\
    formulation : "proposed" (eq. 6) | "raman" (eq. 8)
    n_sampled : int ≥ 1, m: classes per step (Algorithm 1 with n = 1; the paper's experiments
        state m = 1, the authors' code ran m = 5). For m > 1 the proposed formulation only
        (:func:`sgd_epoch_sampled`).
    class_sampling : "others" (Algorithm 1: m distinct classes ≠ y_i) | "all" (the authors'
        code: m distinct classes of all K, the label dropped when drawn)

    The ridge uses the β_j weights (:func:`sgd_epoch`); u, W are projected onto the Appendix A
    bounds (:func:`umax_bounds`; infinite for alpha = 0).

    Attributes
    ----------
    coef_ (K, D), intercept_ (None), classes_, history_, diverged_, n_epochs_, u_ (N,)
    """

    _parameter_constraints = {**_DoubleSumSGD._parameter_constraints,
                              "formulation": [StrOptions(set(FORMULATIONS))],
                              "n_sampled": [Interval(Integral, 1, None, closed="left")],
                              "class_sampling": [StrOptions(set(CLASS_SAMPLING))]}

    _auto_learning_rate = 10.0
    _auto_cap = 0.1

    def _auto_step(self, n_classes, X, s):
        """``min(0.1, 10 / K)`` on rows of norm about 1, times ``(s / max ‖x_i‖)²`` where the
        largest row is longer than ``s`` (U-max: 1, see there).
        A sampled class's gradient carries the factor ``K − 1`` of eq. (6), so a step that
        suits K = 10 overflows at K = 1,000, and the longest rows take the largest steps; on
        the raw sets of the notation page's table vanilla SGD overflowed at 0.3 on MNIST
        (K = 10), at 0.15 on CLEF (K = 63), at 0.7 on Bibtex (K = 146), and at 0.1 on ALOI,
        whose longest rows are five times the typical one."""
        step = min(self._auto_cap, float(self._auto_learning_rate) / n_classes)
        if np.isfinite(self._auto_cap):
            longest = max_row_norm(X) or s
            step *= min(1.0, (s / longest) ** 2)
        return step

    def __init__(self, *, learning_rate="auto", n_epochs=100, tol=1e-3, n_iter_no_change=5,
                 eval_every=1,
                 formulation="proposed", alpha=1e-4, decay="auto", shuffle="uniform",
                 u_init=None, n_sampled=1, class_sampling="others", random_state=None,
                 verbose=False, warm_start=False):
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.eval_every = eval_every
        self.formulation = formulation
        self.n_sampled = n_sampled
        self.class_sampling = class_sampling
        self.alpha = alpha
        self.decay = decay
        self.shuffle = shuffle
        self.u_init = u_init
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    def _init_state(self, X, y, rng):
        K = self.classes_.shape[0]
        m, sampling = self._class_draw()
        if (m, sampling) != (1, "others") and self.formulation == "raman":
            raise ValueError("n_sampled > 1 (or class_sampling='all') needs "
                             "formulation='proposed'")
        if m > K - (sampling == "others"):
            raise ValueError(f"n_sampled must be at most {K - (sampling == 'others')} "
                             f"(K = {K} classes, class_sampling={sampling!r}), got {m}")
        state = super()._init_state(X, y, rng)
        state.b_w, state.b_u = umax_bounds(X, K, self._ridge())
        return state

    def _run_epoch(self, state, X, y, epoch, rng):
        rows, ks, lr = self._draws(rng, y, state.W.shape[0], epoch)
        delta = float(getattr(self, "delta", np.inf))  # inf: no u-increase (vanilla SGD)
        args = (csr_arrays(X), state.sqnorm, y, state.W, state.u, rows, ks, lr)
        if ks.ndim == 2:
            sgd_epoch_sampled(*args, delta, self._ridge(), state.beta, state.b_u, state.b_w)
        else:
            sgd_epoch(*args, self.formulation == "raman", delta, self._ridge(), state.beta,
                      state.b_u, state.b_w)


class UMax(VanillaSGD):
    """U-max (Algorithm 1): vanilla SGD plus the u-increase rule with threshold δ and the
    projections onto ``0 ≤ u ≤ B_u``, ``‖w_k‖ ≤ B_W`` (Appendix A).

    With alpha = 0 (the paper's experiments) B_W² = 2 log K/alpha is infinite: only ``u ≥ 0``
    is enforced. Parameters as :class:`VanillaSGD` plus ``delta`` (δ > 0; 1 in the paper); the
    default learning rate is larger (1 on rescaled rows, whatever K): the gradients are
    bounded by ``(K−1)e^δ‖x_i‖``, and the adaptive schedule cuts a step that blows up. On the
    raw sets of the notation page, against ``10/K``, 1 gained 0.047 test accuracy on Delicious
    and 0.040 on CLEF (both then within 0.05 of scikit-learn's), 0.005 on Bibtex, and lost
    0.023 on ALOI and 0.037 on 20 Newsgroups.
    """

    _parameter_constraints = {**VanillaSGD._parameter_constraints,
                              "delta": [Interval(Real, 0, None, closed="neither")]}

    _auto_learning_rate = 1.0
    _auto_cap = np.inf

    def _auto_step(self, n_classes, X, s):
        """``1`` on rows of norm about 1, for every K (the class docstring)."""
        return float(self._auto_learning_rate)

    def __init__(self, *, learning_rate="auto", n_epochs=100, tol=1e-3, n_iter_no_change=5,
                 eval_every=1,
                 delta=1.0, formulation="proposed", alpha=1e-4, decay="auto", shuffle="uniform",
                 u_init=None, n_sampled=1, class_sampling="others", random_state=None,
                 verbose=False, warm_start=False):
        super().__init__(learning_rate=learning_rate, n_epochs=n_epochs, tol=tol,
                         n_iter_no_change=n_iter_no_change, eval_every=eval_every,
                         formulation=formulation, alpha=alpha, decay=decay, shuffle=shuffle,
                         u_init=u_init, n_sampled=n_sampled, class_sampling=class_sampling,
                         random_state=random_state, verbose=verbose, warm_start=warm_start)
        self.delta = delta


class ImplicitSGD(StreamingFit, _DoubleSumSGD):
    __doc__ = """Implicit SGD on the proposed double sum, one (i, k) per step (Prop. 4, App. F.1).

    Each step solves ``θ⁺ = θ − η∇f_ik(θ⁺)`` exactly (to ``solver_tol`` in ``u_i``), the ridge of
    eq. (6) included (:func:`implicit_epoch`): stable for any learning rate (1e-4 to 1e4 tested).
    """ + _SHARED_DOC + """\
    solver_tol : float ≥ 0, ε: the root ``u_i`` is found to ``ε(1 + u_i)`` (0: round-off)
    solver : "newton" (default: Halley steps in ``u_i + a``, two exps per evaluation of (16),
        safeguarded by a bracket, bisection whenever a step leaves it; one or two evaluations
        per step) or "bisection" (the paper's method on the F.1 bracket, about 35 evaluations at
        ε = 1e-10). Both find the same root to ~ε.

    Attributes
    ----------
    as :class:`VanillaSGD`, plus ``n_evals_``: evaluations of (16) per step, per epoch.
    """

    _parameter_constraints = {**_DoubleSumSGD._parameter_constraints,
                              "solver_tol": TOL,
                              "solver": [StrOptions({"newton", "bisection"})]}

    _auto_learning_rate = 1.0

    def __init__(self, *, learning_rate="auto", n_epochs=100, tol=1e-3, n_iter_no_change=5,
                 eval_every=1,
                 alpha=1e-4, solver_tol=1e-10, solver="newton", decay="auto", shuffle="uniform",
                 u_init=None, random_state=None, verbose=False, warm_start=False):
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.eval_every = eval_every
        self.alpha = alpha
        self.solver_tol = solver_tol
        self.solver = solver
        self.decay = decay
        self.shuffle = shuffle
        self.u_init = u_init
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    def _run_epoch(self, state, X, y, epoch, rng):
        rows, ks, lr = self._draws(rng, y, state.W.shape[0], epoch)
        ev = implicit_epoch(csr_arrays(X), state.sqnorm, y, state.W, state.u,
                            rows, ks, lr, self._ridge(), state.beta, float(self.solver_tol),
                            self.solver == "newton")
        state.evals.append(ev / max(rows.shape[0], 1))

    def _finalize(self, state):
        super()._finalize(state)
        self.n_evals_ = list(state.evals)


# -- Appendix F.3: minibatches of datapoints and classes ----------------------------------------------------------------------------
@dataclass
class _MinibatchState:
    W: np.ndarray  # (K, D)
    u: np.ndarray  # (N,)
    beta: np.ndarray  # (K,) β_k of the minibatch sampling
    batches: Batches  # the fixed minibatches and their factors
    labels: tuple  # (lptr, labs): the distinct labels L_j of each minibatch
    steps: list  # Newton steps per Implicit SGD step, per epoch


class MinibatchImplicitSGD(_DoubleSumSGD):
    """Implicit SGD with ``batch_size`` datapoints and ``n_sampled`` classes per step
    (Fagan & Iyengar, Appendix F.3, eqs. 19–21; the module docstring has the derivation).

    Each step solves ``argmin 2η f_{j,C} + ‖u − ũ‖² + ‖W − W̃‖²`` over the batch's ``u_i``
    and the touched ``w_k`` to ``solver_tol``: stable for any learning rate. For
    ``batch_size = n_sampled = 1`` it is :class:`~xclib.unbiased.ImplicitSGD`'s step.

    Parameters
    ----------
    learning_rate : "auto" or float > 0, η (η_t = η·decay^epoch) on ``f_{j,C}``, whose data
        part is the *mean* over the batch (ω = J/N ≈ 1/n): the paper's ``η p_j^{-1}`` is
        ``η/n`` here; an epoch is ``ceil(N/n)`` steps, so a rate comparable to ImplicitSGD's
        ``η₁`` is about ``n·η₁`` (each ``u_i`` then moves as under ImplicitSGD). ``"auto"``
        (default): 10 on the rows divided by a power of two, as :class:`~xclib.ImplicitSGD`.
    n_epochs, tol, n_iter_no_change, eval_every : at most ``n_epochs`` epochs, stopping and
        evaluating as ImplicitSGD's
    decay : "auto" (default), "adaptive" or float in (0, 1]: a number is the
        per-epoch factor of the papers' schedule (0.9 in the papers); "adaptive" holds the step
        while the loss falls and divides it by 5 when it stalls or blows up
        (``StepRules._step_at``); "auto" is "adaptive" with ``learning_rate="auto"``, 0.9
        with a number
    batch_size : int ≥ 1, n: rows per fixed minibatch S_j (F.3.1)
    n_sampled : int ≥ 1, m: classes drawn outside the batch's labels (clipped to K − |L_j|)
    alpha : float ≥ 0, ridge, the paper's μ = alpha·N
    solver_tol : float ≥ 0, ε of the inner solver: the step's W is within ``solver_tol``
        (Frobenius) of its exact value (0: to round-off)
    solver_max_iter : int ≥ 1, Newton steps per Implicit SGD step (inner solver)
    u_init : None (log K) or in [0, log K], as ImplicitSGD
    random_state, verbose : as usual ; warm_start : as ImplicitSGD (no partial_fit: the fixed
        minibatches of F.3.1 are drawn over the whole training set)

    Attributes
    ----------
    coef_, intercept_ (None), classes_, history_, diverged_, n_epochs_, u_ (N,),
    n_newton_ : mean Newton steps per Implicit SGD step, per epoch.
    """

    _auto_learning_rate = 10.0
    _parameter_constraints = {
        "learning_rate": LEARNING_RATE_AUTO, "n_epochs": N_EPOCHS, "alpha": ALPHA,
        "decay": DECAY_ADAPTIVE, "tol": STOP_TOL, "n_iter_no_change": N_ITER_NO_CHANGE,
        "eval_every": EVAL_EVERY,
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "n_sampled": [Interval(Integral, 1, None, closed="left")],
        "solver_tol": TOL, "solver_max_iter": MAX_ITER,
        "u_init": [None, Interval(Real, 0, None, closed="left")],  # and <= log K (_init_state)
        "random_state": RANDOM_STATE, "verbose": VERBOSE, "warm_start": WARM_START,
    }

    def __init__(self, *, learning_rate="auto", n_epochs=100, tol=1e-3, n_iter_no_change=5,
                 eval_every=1,
                 batch_size=10, n_sampled=5, alpha=1e-4, decay="auto", solver_tol=1e-8,
                 solver_max_iter=50, u_init=None, random_state=None, verbose=False,
                 warm_start=False):
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.eval_every = eval_every
        self.batch_size = batch_size
        self.n_sampled = n_sampled
        self.alpha = alpha
        self.decay = decay
        self.solver_tol = solver_tol
        self.solver_max_iter = solver_max_iter
        self.u_init = u_init
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    def _init_state(self, X, y, rng):
        base = super()._init_state(X, y, rng)  # W = 0, u = u_init, checks u_init
        K = self.classes_.shape[0]
        bptr, brows = make_batches(rng, X.shape[0], int(self.batch_size))
        batches = Batches(bptr, brows, *batch_factors(X, bptr, brows))
        labels = batch_labels(y, bptr, brows)
        beta = minibatch_class_weights(labels, K, int(self.n_sampled))
        return _MinibatchState(W=base.W, u=base.u, beta=beta, batches=batches, labels=labels,
                               steps=[])

    def _run_epoch(self, state, X, y, epoch, rng):
        J = state.batches.bptr.shape[0] - 1
        order = rng.permutation(J).astype(np.int64)
        classes = draw_batch_classes(rng, state.labels, order, state.W.shape[0],
                                     int(self.n_sampled))
        lr = self._step_at(epoch)
        with threadpool_limits(1, "blas"):  # n × n products: threads only spin
            ns = minibatch_epoch(csr_arrays(X), y, state.W, state.u, order, classes,
                                 state.batches, lr, J / X.shape[0], self._ridge(), state.beta,
                                 float(self.solver_tol), int(self.solver_max_iter))
        state.steps.append(ns / max(J, 1))

    def _finalize(self, state):
        super()._finalize(state)
        self.n_newton_ = list(state.steps)
