"""Augment and Reduce (Ruiz, Titsias, Dieng & Blei, ICML 2018).

A categorical model is an additive-noise model: draw ``ε_k ~ φ`` for each class and pick
``y = argmax_k (ψ_k + ε_k)`` (eq. 4). Integrating out every error but the winner's gives (eq. 5)

    p(y = k | ψ) = ∫ φ(ε) Π_{k'≠k} Φ(ε + ψ_k − ψ_k') dε ,

and keeping that one error as a latent variable gives a joint whose log is a *sum over
classes* (eq. 6). A variational bound on it (eq. 7) can therefore be estimated, with its
gradient, from a random subset ``S`` of the classes: cost O(|S|), not O(K).

The package reads like the chapter:

1. :mod:`.bounds`: noise models (``log φ``, ``log Φ`` and their derivatives for the Gumbel,
   Gaussian and logistic errors; model codes :class:`Model`), the softmax ELBO (8), the OVE
   bound (10), and eq. (5) by importance sampling;
2. :mod:`.kernels`: one iteration of stochastic variational EM (class subsets, utilities, the
   local steps of Algorithms 1-2, the OVE coefficients, and the shared global step with the
   adaptive step size of Section 4 and the ridge), and :mod:`.iteration`, the same kernels
   fused into one call per iteration;
3. :mod:`.state`: the fit's state, the kernels' inputs as typed bundles built once per fit
   (:class:`Settings`, :class:`Scratch`, :class:`StepState`, :class:`LocalState`) or per
   iteration (:class:`Draws`);
4. :mod:`.estimators`: :class:`AugmentReduce` (``model="softmax" | "probit" | "logistic" |
   "ove"``).

Every kernel costs O(|B| · |S| · nnz(x)) per iteration; none touches all K classes. The
per-coordinate RMSprop state of the step size is decayed lazily (``0.9^{Δt}`` when a
coordinate is next touched), which gives exactly the dense recursion without an O(KD) pass.
"""
from .bounds import (
    MODELS, Model, dlog_phi, dlog_Phi, entropy, log_likelihood_is, log_phi,
    log_Phi, model_code, ove_bound, softmax_elbo,
)
from .estimators import AugmentReduce
from .kernels import (
    batch_utilities, global_step, noise_local_step, ove_coefficients, softmax_local_step,
    subsample_classes,
)
from .state import Draws, LocalState, Scratch, Settings, StepState

__all__ = [
    "Model",
    "MODELS",
    "model_code",
    "log_phi",
    "dlog_phi",
    "log_Phi",
    "dlog_Phi",
    "entropy",
    "softmax_elbo",
    "ove_bound",
    "log_likelihood_is",
    "subsample_classes",
    "batch_utilities",
    "softmax_local_step",
    "noise_local_step",
    "ove_coefficients",
    "global_step",
    "Draws",
    "LocalState",
    "StepState",
    "Scratch",
    "Settings",
    "AugmentReduce",
]
