"""Chapter 4: semistochastic quadratic bound (SQB) methods (Aravkin et al.).

The package reads like the chapter:

1. :mod:`~xclib.sqb.bound` — **the bound** (Jebara & Choromanska 2012, Algorithm 1 of the
   paper): for ``Z(θ) = Σ_y h(y) exp(θᵀ f(y))`` and any anchor ``θ̃`` it finds ``z, r, S``
   with ``Z(θ) ≤ z · exp(½ (θ−θ̃)ᵀ S (θ−θ̃) + (θ−θ̃)ᵀ r)`` (eq. 3).
2. :mod:`~xclib.sqb.statistics` — **the batch statistics** of binary logistic regression
   (Ω = {0, 1}: the Jaakkola–Jordan bound ``c(u) = tanh(u/2) / (2u)``): the gradient estimate
   μ_T (unbiased by Lemma 1) and the curvature Σ_S in factored form (Section 4.1); and their
   multinomial versions (beyond the paper).
3. :mod:`~xclib.sqb.solvers` — **the SQB step** (eq. 5)
   ``θ ← θ − a (Σ_S + αI)⁻¹ (μ_T + αθ)``, the system solved by a few LSQR or CG iterations,
   batches growing as ``b_k = min(cap, b¹ + round((k−1)γ))`` (Section 4.2; γ rows an
   iteration, or γ·T rows with ``gamma_unit="fraction"``, the two readings of the paper's γ);
   with ``learning_rate="auto"`` (beyond the paper) the step along the bound's direction is
   searched on the cost (:func:`~xclib.sqb.solvers.search_step`).
4. :mod:`~xclib.sqb.objective` — **the objective** of every estimator (eq. 4)
   ``L(θ) = (1/T) Σ_j [log(1 + exp(θᵀx_j)) − y_j θᵀx_j] + (α/2) ‖θ‖²``, y_j ∈ {0, 1},
   and its optimum by L-BFGS.
5. :mod:`~xclib.sqb.baselines` — **the baselines** of Section 4.4: SGD, ASGD, SAG, SAGls
   (numba kernels) and L-BFGS (``scipy.optimize``).
6. :mod:`~xclib.sqb.estimators` — :class:`SQB` and :class:`MultinomialSQB`.

The paper's symbols in the book's vocabulary: its ridge η (eq. 4 is a mean) is ``alpha``;
its step α_k is ``learning_rate`` (a number; the default ``"auto"`` searches it); l is
``n_inner``; γ_μ, γ_Σ, b¹ and the caps are ``gamma_mu``, ``gamma_sigma``,
``b1_mu``/``b1_sigma``, ``cap_mu``/``cap_sigma``. Each fit epoch is about one *effective
pass* (T gradient-or-curvature row evaluations, and with ``pass_unit="row_products"`` also
the rows of every product with Σ_S inside the solve), the paper's x-axis;
``history_["passes"]`` holds the exact count.

The binary models are :class:`~xclib.base.LinearSoftmaxClassifier` with K = 2 rows,
``coef_ = [0, θ]``: the softmax of the scores ``(0, θᵀx)`` *is* the logistic model
(``f_x(y) = e_y ⊗ x`` with class 0's row pinned at zero), so ``predict_proba``, the metrics and
the epoch loop of the other chapters apply unchanged.
"""
from .baselines import (
    LogisticASGD, LogisticLBFGS, LogisticSAG, LogisticSGD, asgd_epoch, sag_epoch, sgd_epoch,
)
from .bound import (
    bound_factors, bound_stats, curvature_weight, softmax_bound_matvec, softmax_bound_row,
    softmax_bound_weights,
)
from .estimators import SQB, MultinomialSQB
from .objective import logistic_objective, logistic_optimum
from .solvers import (
    Solver, batch_schedule, cg_sigma, full_cost, lsqr_sigma, search_step, sigma_matvec,
    sqb_iterations,
)
from .statistics import (
    batch_curvature, batch_curvature_multinomial, batch_mu, batch_mu_multinomial,
)

__all__ = [
    "curvature_weight",
    "bound_factors",
    "bound_stats",
    "batch_mu",
    "batch_curvature",
    "softmax_bound_row",
    "softmax_bound_weights",
    "softmax_bound_matvec",
    "batch_mu_multinomial",
    "batch_curvature_multinomial",
    "sigma_matvec",
    "cg_sigma",
    "lsqr_sigma",
    "sqb_iterations",
    "full_cost",
    "search_step",
    "Solver",
    "sgd_epoch",
    "asgd_epoch",
    "sag_epoch",
    "batch_schedule",
    "logistic_objective",
    "logistic_optimum",
    "SQB",
    "LogisticSGD",
    "LogisticASGD",
    "LogisticSAG",
    "LogisticLBFGS",
    "MultinomialSQB",
]
