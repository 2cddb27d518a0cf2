"""The SQB estimators: binary (:class:`SQB`, the paper's) and multinomial (beyond the paper)."""
from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from ..base import (
    ALPHA, LEARNING_RATE_AUTO, N_EPOCHS, RANDOM_STATE, VERBOSE, WARM_START, Interval,
    StrOptions,
)
from .objective import LogisticState, _BinaryLogistic, _RidgeLogistic
from .solvers import Solver, batch_schedule, sqb_iterations

__all__ = ["SQB", "MultinomialSQB"]

_BATCH = [Interval(Integral, 1, None, closed="left"), None]
_GROWTH = [Interval(Real, 0, None, closed="left")]


@dataclass
class SQBState(LogisticState):
    """SQB's state: the iterate, the next iteration's number ``k`` (1-based), the row
    evaluations so far (``seen``, both batches) and the number of weight rows (1: binary)."""

    k: int = 1
    seen: int = 0
    n_classes: int = 1
    products: int = 0
    product_passes: list = field(default_factory=list)
    # "auto": the previous step a_{k-1} and the cost it reached (NaN: not evaluated)
    last_step: np.ndarray = field(default_factory=lambda: np.array([1.0, np.nan]))
    steps: list = field(default_factory=list)  # "auto": the step of each round's last iteration


class _SQBSolver(_RidgeLogistic):
    """The SQB iteration shared by the binary and the multinomial estimators."""

    _parameter_constraints = {
        "learning_rate": LEARNING_RATE_AUTO,
        "alpha": ALPHA,
        "n_inner": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions({"lsqr", "cg"})],
        "gamma_mu": _GROWTH,
        "gamma_sigma": _GROWTH,
        "b1_mu": _BATCH,
        "b1_sigma": _BATCH,
        "cap_mu": _BATCH,
        "cap_sigma": _BATCH,
        "batches": [StrOptions({"independent", "same"})],
        "gamma_unit": [StrOptions({"rows", "fraction"})],
        "pass_unit": [StrOptions({"batch_rows", "row_products"})],
        "n_epochs": N_EPOCHS,
        "random_state": RANDOM_STATE,
        "verbose": VERBOSE,
        "warm_start": WARM_START,
    }

    def __init__(self, *, learning_rate="auto", alpha=1e-4, n_inner=10, solver="cg",
                 gamma_mu=0.0, gamma_sigma=0.0, b1_mu=None, b1_sigma=None, cap_mu=None,
                 cap_sigma=None, batches="independent", n_epochs=10, random_state=None,
                 verbose=False, gamma_unit="rows", pass_unit="batch_rows", warm_start=False):
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.n_inner = n_inner
        self.solver = solver
        self.gamma_mu = gamma_mu
        self.gamma_sigma = gamma_sigma
        self.b1_mu = b1_mu
        self.b1_sigma = b1_sigma
        self.cap_mu = cap_mu
        self.cap_sigma = cap_sigma
        self.batches = batches
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose
        self.gamma_unit = gamma_unit
        self.pass_unit = pass_unit
        self.warm_start = warm_start

    def _init_state(self, X, y, rng):
        rows = self._n_weight_rows()
        return SQBState.start(X, y, n_weights=rows * X.shape[1], n_classes=rows)

    def _schedule(self, k, n):
        """Gradient and curvature batch sizes of iterations ``k`` (Section 4.2), at most T:
        γ rows per iteration, or γ·T rows with ``gamma_unit="fraction"``."""
        sizes = []
        per = float(n) if self.gamma_unit == "fraction" else 1.0
        for b1, cap, gamma in ((self.b1_mu, self.cap_mu, self.gamma_mu),
                               (self.b1_sigma, self.cap_sigma, self.gamma_sigma)):
            b1 = n if b1 is None else min(n, int(b1))
            cap = n if cap is None else min(n, int(cap))
            sizes.append(np.minimum(batch_schedule(k, b1, cap, float(gamma) * per), n))
        return sizes

    def _products(self, b_mu, b_sigma, same):
        """Row products of each iteration: the gradient batch, the curvature batch (one
        batch if ``same``) and every product of Σ_S with a vector inside the solve, one per
        row of S (l of them for CG, 2l + 1 for LSQR; the nominal l, however early the solver
        stops)."""
        l = int(self.n_inner)  # noqa: E741 (the paper's l)
        inner = (2 * l + 1 if self.solver == "lsqr" else l) * b_sigma
        return (b_mu if same else b_mu + b_sigma) + inner

    def _run_epoch(self, state, X, y, epoch, rng):
        n = state.n
        target = (epoch + 1) * n
        # iterations until the rows evaluated (|T| + |S| each) reach one more pass
        ks = np.arange(state.k, state.k + n + 1)
        b_mu, b_sigma = self._schedule(ks, n)
        same = self.batches == "same"
        if same:  # Lemma 4: S = T, one loop of Algorithm 1 gives μ_T and Σ_T
            b_sigma = b_mu
        rows = b_mu if same else b_mu + b_sigma
        products = self._products(b_mu, b_sigma, same)
        cost = products if self.pass_unit == "row_products" else rows
        cum = state.seen + np.cumsum(cost)
        m = int(np.searchsorted(cum, target)) + 1  # first iteration reaching the target
        b_mu, b_sigma = b_mu[:m], b_sigma[:m]
        stream_mu = _permutation_stream(rng, n, int(b_mu[b_mu < n].sum()))
        stream_sigma = (stream_mu if same else
                        _permutation_stream(rng, n, int(b_sigma[b_sigma < n].sum())))
        indptr, indices, data, yf = state.arrays
        solver = Solver.LSQR if self.solver == "lsqr" else Solver.CG
        auto = isinstance(self.learning_rate, str)
        searched = sqb_iterations(
            indptr, indices, data, yf, state.theta, float(self.alpha),
            1.0 if auto else float(self.learning_rate), int(self.n_inner), int(solver), b_mu,
            b_sigma, stream_mu, stream_sigma, state.n_classes,
            state.last_step if auto else None)
        if auto:
            state.steps.append(float(state.last_step[0]))
        state.k += m
        state.seen = int(cum[m - 1]) + searched * n  # the search's passes count too
        state.passes.append(state.seen / n)
        state.products += int(products[:m].sum()) + searched * n
        state.product_passes.append(state.products / n)

    def _finalize(self, state):
        super()._finalize(state)
        self.history_["product_passes"] = [float(p) for p in
                                           state.product_passes[: self.n_epochs_]]
        if state.steps:
            self.history_["step"] = state.steps[: self.n_epochs_]
        self.n_iter_ = state.k - 1


def _permutation_stream(rng, n, total):
    """``total`` row indices: consecutive random permutations of ``range(n)`` (each row is
    equally likely in every batch window, as Lemma 1 asks)."""
    if total <= 0:
        return np.empty(0, dtype=np.int64)
    reps = -(-total // n)
    return np.concatenate([rng.permutation(n) for _ in range(reps)])[:total].astype(np.int64)


class SQB(_BinaryLogistic, _SQBSolver):
    """Semistochastic quadratic bound method for ℓ2-regularised logistic regression.

    ``θ ← θ − a (Σ_S + αI)⁻¹ (μ_T + αθ)`` (eq. 5) with independent gradient and curvature
    batches growing as ``min(cap, b1 + round((k−1)γ))`` (Section 4.2), the system solved by
    ``n_inner`` LSQR or CG iterations on the factored Σ_S (Section 4.1). Minimises
    ``mean log-loss + (alpha/2)‖θ‖²`` (eq. 4).

    The defaults are the *batch* bound method: both batches are all T rows and CG solves the
    system, so every step lowers a majorizer of the objective and the cost never increases
    (a majorization–minimization method, Jebara & Choromanska; Theorem 2's regime). The
    paper's semistochastic schedule must be asked for (below): its small curvature batches
    make the step unstable on badly conditioned data.

    Parameters
    ----------
    learning_rate : "auto" or float > 0, default "auto"
        A number is the constant step, the paper's α_k (1, or 0.1 on covtype, quantum and
        rcv1). ``"auto"`` searches the step along the bound's direction ``−ξ`` at every
        iteration whose gradient batch is all T rows (the default's): the first of
        ``2a', a', a'/2, …`` above 1 (a' the previous iteration's step, at most 2¹⁰) that
        meets Armijo's decrease of the cost L, else 1, the bound's own step, which lowers L
        (it minimises a majorizer). Near uniform scores the bound's K × K curvature exceeds
        the softmax's Hessian ``diag(p) − ppᵀ`` by factors up to K/2 (from 11 to 50 at
        K = 100, p = 1/K), so a unit step is short at large K: on ALOI's first 100
        objects (the notation page's table) ten unit steps end at cost 1.38 and 0.784 test
        accuracy, against scikit-learn's 0.945. Each step tried costs one pass over T, and L(θ)
        one more after a fallback to 1 (counted in ``history_["passes"]`` and
        ``["product_passes"]``); with
        stochastic gradient batches ``"auto"`` is the step 1.
    alpha : float ≥ 0, default 1e-4
        Ridge on the mean scale of eq. (4): the paper's η is ``alpha`` (its experiments use
        η = 1/T, so pass ``alpha=1/T``).
    n_inner : int ≥ 1, default 10
        Inner LSQR/CG iterations, the paper's l (it picks from {5, 10, 20}).
    solver : {"cg", "lsqr"}, default "cg"
        Inner solver; the paper's is "lsqr".
    gamma_mu, gamma_sigma : float ≥ 0, default 0.0
        Growth rates γ_μ, γ_Σ of the gradient and curvature batches: rows per iteration,
        or a fraction of T per iteration with ``gamma_unit="fraction"``.
    b1_mu, b1_sigma : int ≥ 1 or None, default None
        Initial batch sizes b¹ (5 in the paper); None is all T rows.
    cap_mu, cap_sigma : int ≥ 1 or None, default None
        Caps of the batches (the paper: all data for μ, 200 for Σ); None is all T rows.
    batches : {"independent", "same"}, default "independent"
        "independent": T and S are drawn independently (Theorem 1's hypothesis, eq. 6).
        "same": S = T, the gradient batch, as one run of Algorithm 1 over T gives both; then
        μ_T lies in the range of Σ_T (Lemma 4), so no direction of the gradient goes unseen,
        but the step is no longer unbiased. ``b1_sigma``, ``cap_sigma`` and ``gamma_sigma``
        are ignored, and each row counts once for both statistics (and, with
        ``pass_unit="row_products"``, once more in each product of the solve).
    n_epochs : int, default 10
        Rounds; each runs SQB iterations until the rows counted in ``pass_unit`` reach one
        more effective pass (at least one iteration: with full batches a round is one
        iteration, two batch-row passes). ``history_["passes"]`` holds the exact count.
    random_state, verbose : as everywhere.
    warm_start : bool, default False
        Start ``fit`` from the fitted weights (SQB's bound needs no other state).
    gamma_unit : {"rows", "fraction"}, default "rows"
        How γ reads (Section 4.2 gives ``b^k = min(cap, b¹ + round((k−1)γ))`` and γ to four
        decimals without a unit): "rows" adds γ rows per iteration, "fraction" adds γ·T rows
        per iteration (``b^k = min(cap, b¹ + round((k−1)γT))``).
    pass_unit : {"batch_rows", "row_products"}, default "batch_rows"
        What an effective pass counts. "batch_rows": the rows of the gradient and curvature
        batches (T per pass, the inner solve free). "row_products": also every product of
        Σ_S with a vector inside the solve, one per row of S — l per iteration for CG,
        2l + 1 for LSQR — so that a run's passes are its work. ``history_`` always holds
        both: ``passes`` in this unit and ``product_passes`` (row products / T).

    The paper's setting for adult (a9a) is
    ``SQB(learning_rate=1.0, alpha=1/T, solver="lsqr", n_inner=5, b1_mu=5, b1_sigma=5,
    gamma_mu=0.05, gamma_sigma=0.001, cap_mu=None, cap_sigma=200)``, with γ read as rows
    (add ``gamma_unit="fraction"`` for the other reading, ``pass_unit="row_products"`` to
    charge the solve).

    Attributes
    ----------
    coef_ : (2, D), ``[0, θ]`` ; theta_ : (D,), θ ; n_iter_ : SQB iterations run ;
    history_ : as in :class:`~xclib.base.IterativeSoftmaxEstimator`, with the cost L(θ) as
    ``train_loss``, ``passes`` (effective passes after each round, in ``pass_unit``) and
    ``product_passes`` (row products, the inner solve included, over T), and with
    ``learning_rate="auto"`` ``step`` (the step of each round's last iteration).
    """


class MultinomialSQB(_SQBSolver):
    """SQB for ℓ2-regularised multinomial logistic regression (beyond the paper).

    ``f_x(y) = e_y ⊗ x`` and θ = W (K × D): the bound of each row is ``M ⊗ xxᵀ`` with the
    K × K matrix of :func:`~xclib.sqb.bound.softmax_bound_row`, and ``Σ_S`` acts as a sum of
    Kronecker products (:func:`~xclib.sqb.solvers.sigma_matvec`), never formed. Same
    parameters and defaults as :class:`SQB`; ``coef_`` is W (all K rows free) and the cost is
    ``mean log-loss + (alpha/2)‖W‖²``, the objective of
    :class:`~xclib.exact.SoftmaxRegression` with the same ``alpha``.
    """

    def _n_weight_rows(self):
        return self.classes_.shape[0]

    def _coef(self, state):
        return state.theta.reshape(state.n_classes, -1).copy(), None
