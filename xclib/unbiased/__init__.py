"""Fagan & Iyengar, *Unbiased scalable softmax optimization*: U-max and Implicit SGD.

The log-loss of the softmax is rewritten (Section 2.1, eqs. 3–5) as a double sum over
datapoints ``i`` and classes ``k ≠ y_i`` with one auxiliary variable ``u_i`` per datapoint::

    F(u, W) = (1/N) Σ_i Σ_{k≠y_i} [ (u_i + e^{−u_i})/(K−1) + e^{x_iᵀ(w_k − w_{y_i}) − u_i} ]
              + (α/2) ‖W‖²,

whose minimum over ``u`` is ``u_i*(W) = log(1 + Σ_{k≠y_i} e^{x_iᵀ(w_k − w_{y_i})})`` and
``min_u F(u, W) = (mean log-loss of W) + (α/2)‖W‖² + 1``. Sampling ``i`` uniformly and
``k`` uniformly among the other ``K − 1`` classes gives the unbiased stochastic term (eq. 6)::

    f_ik(u, W) = u_i + e^{−u_i} + (K−1) e^{x_iᵀ(w_k − w_{y_i}) − u_i}
                 + (α/2)(β_{y_i} ‖w_{y_i}‖² + β_k ‖w_k‖²).

**Symbols and scale.** The paper's ``f`` is ``N`` times ours (its eqs. 2 and 5 sum over
``i``; its ``f_ik`` carries a factor ``N``), so the paper's ridge ``μ`` is ``alpha·N`` and
``SoftmaxRegression(alpha=alpha)`` is the exact optimum of our ``F``. The authors' released
code drops the factor ``N`` from the step, and their tuned learning rates (Table 2) are for
the code: we use the code's scaling, so Table 2's ``η`` is ``learning_rate`` as printed (a
step ``η`` on the paper's N-scaled ``f_ik`` is ``learning_rate = N·η``). Every step is one
datapoint and one class (n = m = 1; :class:`VanillaSGD` and :class:`UMax` also take m > 1
classes, ``n_sampled``), so there is no minibatch sum or mean to convert.

**β.** ``β_j`` must be the inverse probability that class ``j`` is touched by a draw
``(i, k)``: ``P(j ∈ {y_i, k}) = n_j/N + (N − n_j)/(N(K − 1))``, so
``β_j = N(K−1) / (n_j(K−1) + N − n_j)``. The paper prints ``N / (n_j + (N − n_j)(K − 1))``,
which swaps the roles of ``n_j`` and ``N − n_j`` and makes the ridge term biased; the
unbiasedness test in ``tests/test_unbiased.py`` pins ours. A step's ridge touches only
``w_k``, ``w_{y_i}`` (:func:`sgd_epoch`, :func:`implicit_epoch`: O(nnz(x_i)) per step).

The package reads like the chapter, in the files every chapter package of ``xclib`` uses:

``objective.py``   the exact double sums (for small problems), the class weights β and the
                   U-max bounds of Appendix A
``kernels.py``     the numba kernels: the stochastic-gradient coefficients of eqs. 7 and 8,
                   the U-max rule of Algorithm 1, the epochs of vanilla SGD and U-max
``implicit.py``    the Implicit SGD step of Appendix F.1 (one 1-D solve)
``implicit_epoch.py``  its epoch kernels (one step at a time, or batches of steps in lanes)
``minibatch.py``   the kernels of Appendix F.3 (n datapoints and m classes a step)
``estimators.py``  :class:`VanillaSGD`, :class:`UMax`, :class:`ImplicitSGD`,
                   :class:`MinibatchImplicitSGD`

Everything is importable from ``xclib.unbiased``.
"""
from .estimators import ImplicitSGD, MinibatchImplicitSGD, UMax, VanillaSGD
from .implicit import _implicit_a, implicit_step, implicit_u_derivative
from .implicit_epoch import implicit_epoch
from .kernels import (
    CLASS_SAMPLING, double_sum_coefficients, draw_class_sets, sgd_epoch, sgd_epoch_sampled,
    umax_increase,
)
from .objective import (
    FORMULATIONS, class_weights, double_sum_objective, optimal_u, umax_bounds,
)

__all__ = [
    "VanillaSGD", "UMax", "ImplicitSGD", "MinibatchImplicitSGD", "double_sum_objective",
    "optimal_u", "class_weights", "umax_bounds", "double_sum_coefficients", "umax_increase",
    "implicit_step", "implicit_u_derivative", "sgd_epoch", "sgd_epoch_sampled",
    "implicit_epoch", "draw_class_sets", "FORMULATIONS", "CLASS_SAMPLING", "_implicit_a",
]
