"""xclib: the companion library of the book *Softmax at scale*.

One module per paper, plus the shared parts:

============================  ==========================================================
``xclib.unbiased``            Fagan & Iyengar: ``VanillaSGD``, ``UMax``, ``ImplicitSGD``,
                              ``MinibatchImplicitSGD`` (App. F.3)
``xclib.sampled``             biased baselines: ``OVE``, ``NCE``, ``ImportanceSampling``
``xclib.augment_reduce``      Ruiz et al.: ``AugmentReduce`` (softmax, probit, logistic)
``xclib.dsmlr``               Raman et al.: ``DSMLR`` (sync / async, serial / threads / Dask)
``xclib.sqb``                 Aravkin et al.: ``SQB`` and its baselines
``xclib.memoir``, ``mips``    Belyy: ``Memoir`` and the MIPS oracles
``xclib.exact``, ``lbfgs``    ``SoftmaxRegression``, the exact optimum (the book's oracle),
                              and its L-BFGS solver
``xclib.datasets``            real data (``load``) and synthetic generators
``xclib.metrics``             exact log-loss, error, rank of the true label; P@k, nDCG@k,
                              propensity-scored P@k against multi-label truth
``xclib.predict``             prediction in bounded memory: blocked scans, top-k, MIPS
                              oracles at prediction time (``predict_topk``)
``xclib.defaults_check``      every estimator at its defaults on real data, against
                              scikit-learn's ``LogisticRegression()``
``xclib.base``, ``_numba``    the estimator contract and the shared primitives (numba
                              kernels, class sampling, epoch orders, the lazy ridge scale)
``xclib.fitloop``             the epoch loop's bookkeeping: divergence, stopping, warnings
``xclib.steps``               the step from the data (``learning_rate="auto"``)
``xclib.streaming``           warm starts (``warm_start``) and ``partial_fit``
============================  ==========================================================

A chapter's package keeps one layout: ``estimators.py`` (the scikit-learn estimators),
``kernels.py`` (their numba kernels), ``objective.py`` (the exact objective and what the
estimators check against), and files named after the paper's parts where it has more
(``unbiased/implicit.py``, ``sqb/bound.py``, ``dsmlr/schedules.py``); no chapter package
imports another. A kernel takes at most fifteen parameters: what a fit builds once (its
settings, scratch buffers, step-size state) reaches a kernel as a typed bundle, a
``NamedTuple`` that numba compiles as one argument (``augment_reduce/state.py``), and the
rows of X as one :class:`~xclib._numba.CSR`. Estimator parameters are keyword-only.
The book's plumbing (claim reports, the learning-rate explorer, caches and pools of the
notebooks) lives in :mod:`xclib.book`, apart from the library.

Every estimator speaks one vocabulary (scikit-learn's), checked before each fit by a table of
parameter constraints, and each paper's symbol is mapped to it in the estimator's docstring:

==================  ==========================================================================
``alpha``           ridge: objective = mean over rows of the loss + (alpha/2)·‖W‖²_F
                    (``SGDClassifier``'s scale; ``LogisticRegression``'s ``C = 1/(alpha·N)``)
``learning_rate``   initial step size; ``decay`` its schedule (step_t = learning_rate·decay^t);
                    ``"auto"`` (the stochastic methods' default): the rows divided by the power
                    of two nearest their root-mean-square norm, the ridge rescaled to the same
                    minimiser, and the step that suits rows of norm about 1 (``learning_rate_``)
``n_epochs``        passes over the data (stochastic methods; at most, when ``tol`` is set)
``max_iter``        iterations of a deterministic solver (L-BFGS), or number of batches
``tol``             stopping tolerance; for the stochastic methods with ``n_iter_no_change``:
                    stop once that many epochs in a row lower the training loss by less than
                    ``tol`` (scikit-learn's rule; None runs every epoch)
``random_state``    None, an int or a ``numpy.random.Generator``: same seed, same numbers
``verbose``         a ``tqdm`` progress bar
``fit_intercept``   an unpenalised bias per class
==================  ==========================================================================

A fitted model holds fitted attributes only (``coef_``, ``classes_``, ``history_``, ...): a
pickle carries no training data. A fit whose loss blows up warns ``DivergenceWarning``, sets
``diverged_`` and keeps the weights with the lowest loss (:mod:`xclib.base`).

Not to be confused with ``pyxclib`` (kunaldahiya/pyxclib), which also imports as ``xclib``;
this one has ``xclib.__book__ == "Softmax at scale"``.
"""
from .augment_reduce import AugmentReduce
from .base import DivergenceWarning, IterativeSoftmaxEstimator, LinearSoftmaxClassifier
from .dsmlr import DSMLR, DataParallelLBFGS
from .exact import SoftmaxRegression
from .memoir import Memoir
from .mips import HNSWMIPS, ExactMIPS, SimpleLSH
from .sampled import NCE, OVE, ImportanceSampling
from .sqb import SQB, LogisticASGD, LogisticLBFGS, LogisticSAG, LogisticSGD, MultinomialSQB
from .unbiased import ImplicitSGD, MinibatchImplicitSGD, UMax, VanillaSGD

__version__ = "0.2.0"
__book__ = "Softmax at scale"

__all__ = [
    "AugmentReduce", "DSMLR", "DataParallelLBFGS", "DivergenceWarning", "ExactMIPS",
    "HNSWMIPS", "ImplicitSGD", "ImportanceSampling", "IterativeSoftmaxEstimator",
    "LinearSoftmaxClassifier", "LogisticASGD", "LogisticLBFGS", "LogisticSAG", "LogisticSGD",
    "Memoir", "MinibatchImplicitSGD", "MultinomialSQB", "NCE", "OVE", "SQB", "SimpleLSH",
    "SoftmaxRegression", "UMax", "VanillaSGD",
]
