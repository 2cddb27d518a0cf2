"""DS-MLR: doubly-separable multinomial logistic regression (Raman et al., KDD 2019).

The chapter's equations, top-down (Raman et al.'s λ is ``alpha``: their eq. (2) is already the
book's mean-loss scale):

* eq. (2)  ``L1(W) = λ/2 ‖W‖² − (1/N) Σ_i w_{y_i}ᵀx_i + (1/N) Σ_i log Σ_k exp(w_kᵀx_i)``;
* eq. (10)–(12) the doubly-separable form ``L2(W, b) = Σ_i Σ_k f_ki(w_k, b_i)`` with

      f_ki = λ/(2N) ‖w_k‖² − y_ik w_kᵀx_i / N + exp(w_kᵀx_i + b_i) / N − b_i/(NK) − 1/(NK);

* eq. (9)  the exact ``b_i = −log Σ_k exp(w_kᵀx_i)`` (β_i = 1, ``b_i = log a_i``), with which
  ``L2(W, b(W)) = L1(W)``;
* eq. (13) the stochastic step ``w_k ← w_k − η_t K (λ w_k − y_ik x_i + exp(w_kᵀx_i + b_i) x_i)``.

The package, in the order of the chapter:

=====================  ====================================================================
``kernels``            numba: :func:`block_sgd` (eq. (13) over a block pair),
                       :func:`block_lse` (partial sums of eq. (9)), :func:`column_sgd`
                       (the asynchronous unit of work)
``objective``          NumPy: :func:`primal_objective` (2), :func:`ds_objective` (10)–(12),
                       :func:`exact_b` (9)
``schedules``          :class:`SyncSchedule` (Algorithm 1), :class:`AsyncSchedule`
                       (Algorithm 2, NOMAD), :func:`sync_schedule`, :func:`partition`,
                       :class:`Blocks` (how rows and classes are dealt to workers)
``backends``           :class:`SerialBackend`, :class:`ThreadsBackend`
``dask_backend``       :class:`DaskBackend` (Algorithms 1 and 2 on ``dask.distributed``),
                       :class:`WorkerLostError`
``ring_worker``        :class:`RingWorker`, the actor each Dask worker runs (its blocks, the
                       ring's mailbox)
``simulator``          :func:`simulate_schedules`, a cost model beyond the cores at hand
``estimators``         :class:`DSMLR` = a schedule × a backend on the base epoch loop
``lbfgs``              :class:`DataParallelLBFGS`, the paper's data-parallel baseline
``lc``                 :func:`fit_log_concavity`, the paper's model-parallel baseline
=====================  ====================================================================

Algorithm 1 initialises ``b = 1/K``; with ``W = 0`` eq. (9) gives ``b_i = −log K``. We read the
``1/K`` as the initial ``a_i`` (``b_i = log a_i = −log K``), which *is* eq. (9) at ``W = 0``, and
initialise ``b`` that way.
"""
from .backends import SerialBackend, ThreadsBackend
from .dask_backend import DaskBackend, RingWorker, WorkerLostError
from .estimators import DSMLR, DSMLRState, auto_learning_rate
from .kernels import block_lse, block_sgd, column_sgd
from .lbfgs import DataParallelLBFGS, LBFGSStatus
from .lc import LogConcavityResult, fit_log_concavity
from .objective import ds_objective, exact_b, primal_objective
from .schedules import AsyncSchedule, Blocks, SyncSchedule, partition, sync_schedule
from .simulator import simulate_schedules

__all__ = [
    "block_sgd",
    "block_lse",
    "column_sgd",
    "ds_objective",
    "exact_b",
    "primal_objective",
    "partition",
    "sync_schedule",
    "Blocks",
    "SyncSchedule",
    "AsyncSchedule",
    "SerialBackend",
    "ThreadsBackend",
    "DaskBackend",
    "RingWorker",
    "simulate_schedules",
    "auto_learning_rate",
    "DSMLR",
    "DSMLRState",
    "DataParallelLBFGS",
    "LBFGSStatus",
    "fit_log_concavity",
    "LogConcavityResult",
    "WorkerLostError",
]
