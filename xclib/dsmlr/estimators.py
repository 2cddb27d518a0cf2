"""The DS-MLR estimator: a schedule (sync / async) × a backend (serial / threads / Dask)."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from ..base import (ALPHA, LEARNING_RATE, N_EPOCHS, N_ITER_NO_CHANGE, RANDOM_STATE, STOP_TOL,
                    VERBOSE, WARM_START, HasMethods, IterativeSoftmaxEstimator, Interval,
                    StrOptions)
from ..metrics import row_logsumexp, score_blocks
from ..steps import CUT, row_scale
from .backends import SerialBackend, ThreadsBackend
from .dask_backend import DaskBackend
from .schedules import AsyncSchedule, Blocks, SyncSchedule

__all__ = ["DSMLR", "DSMLRState"]

#: ``client`` of the Dask backends: None, a scheduler address, or a ``distributed.Client``.
CLIENT = [None, str, HasMethods(["submit", "scatter", "gather", "scheduler_info"])]
#: Seconds a worker may wait (threads) or an outer iteration may take (Dask).
TIMEOUT = [Interval(Real, 0, None, closed="neither")]
N_WORKERS = [Interval(Integral, 1, None, closed="left")]


@dataclass
class DSMLRState:
    """Everything one DS-MLR fit works on (dropped when ``fit`` returns)."""

    P: int
    K: int
    alpha: float
    learning_rate: float
    b_update: str
    W: np.ndarray
    blocks: Blocks
    schedule: SyncSchedule | AsyncSchedule
    backend: SerialBackend | ThreadsBackend | DaskBackend | None = None
    queues: list | None = None
    log: list = field(default_factory=list)
    visits: list = field(default_factory=list)
    sqnorm: list = field(default_factory=list)
    scale: float = 1.0  # the kernels work on V = scale·W, X/scale, alpha/scale² (see pow2_scale)

    def weights(self):
        """W (not V) of the current iterate."""
        V = self.backend.weights(self)
        return V if self.scale == 1.0 else V / self.scale

    def weights_sqnorm(self):
        """‖W‖²_F of the current iterate (on Dask, from the workers' partial sums)."""
        if isinstance(self.backend, DaskBackend):
            return self.backend.metrics[2] / self.scale / self.scale
        W = self.weights()
        return float(np.sum(W * W))


def pow2_scale(X):
    """The power of two nearest the largest row norm of ``X`` (1.0 for unit rows).

    The kernels run on ``X / s`` with ``V = s·W`` and ridge ``alpha / s²`` (the same minimiser):
    with ``s`` a power of two these are exact in floating point, and features of any size
    (1e-50 or 1e200) give rows of norm about 1.
    """
    return math.ldexp(1.0, int(round(math.log2(row_scale(X)))))


def auto_learning_rate(X, n_classes, alpha, typical=False):
    """``1 / (K (max_i ‖x_i‖² + 2 alpha))``: a safe η₀ of eq. (13); with ``typical``,
    ``1 / (K (√(max_i ‖x_i‖² · mean_i ‖x_i‖²) + 2 alpha))``, a bolder one.

    Near the exact ``b`` of eq. (9), ``exp(w_kᵀx_i + b_i) ≤ 1``, so the curvature of one term of
    eq. (13) along its step is at most ``alpha + ‖x_i‖²``, and eq. (13) multiplies the step by
    K; the ``2 alpha`` keeps the ridge factor ``1 − η₀ K alpha`` of eq. (13) at least 1/2.
    The bound of the longest row is safe, and small for the typical row where the longest
    stand far out: on raw ALOI histograms (largest ‖x‖² 24 times the mean) DS-MLR ended 100
    epochs at test accuracy 0.83 with it, 0.91 with the geometric mean of the largest and the
    mean ‖x‖². The bolder step can blow up (b of eq. (9), updated once an epoch, lags the
    steps: scikit-learn's two-blob check with one worker diverged in its first epoch), so
    :class:`DSMLR` takes it only where it can put back the best weights and cut the step.
    """
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    if not sq.size:
        curv = 0.0
    else:
        curv = float(np.sqrt(sq.max() * sq.mean())) if typical else float(sq.max())
    curv += 2.0 * float(alpha)
    return 1.0 / (n_classes * max(curv, np.finfo(float).tiny))


def _check_combination(est, n, K, eta_alpha):
    """Cross-parameter checks; returns P after the clamp to ``min(n_workers, N, K)``."""
    if est.b_update == "stochastic" and (est.schedule != "sync" or est.backend == "dask"):
        raise ValueError("b_update='stochastic' is only available with schedule='sync' on "
                         f"backend='serial' or 'threads'; got schedule={est.schedule!r}, "
                         f"backend={est.backend!r}")
    if eta_alpha * K >= 1.0:
        raise ValueError(
            f"learning_rate * K * alpha = {eta_alpha * K:.3g} >= 1: the ridge part "
            "of eq. (13) would flip the sign of w_k; lower learning_rate or alpha (or use "
            "learning_rate='auto')")
    P = int(est.n_workers)
    clamp = min(P, n, K)
    if clamp < P:
        warnings.warn(
            f"n_workers={P} is more than the {n} rows or {K} classes; each worker needs at "
            f"least one row and one class, so {clamp} workers are used", UserWarning,
            stacklevel=6)
    return clamp


def _make_backend(est, P, blocks, K, queues):
    """The backend named by ``est.backend`` for P workers."""
    if est.backend == "serial":
        return SerialBackend(P)
    if est.backend == "threads":
        return ThreadsBackend(P, est.timeout)
    return DaskBackend(est.client, P, blocks, K, est.timeout, queues)


def _initial_step(est, Xs, K, alpha, s):
    """η₀ of eq. (13) on the kernels' scale (rows ``X/s``, ridge ``alpha``): ``"auto"``, or
    ``learning_rate·s²``; an error when that overflows."""
    eta0 = (auto_learning_rate(Xs, K, alpha, typical=est._adaptive())
            if est.learning_rate == "auto" else float(est.learning_rate) * s * s)
    if not math.isfinite(eta0):
        raise ValueError(
            f"learning_rate={est.learning_rate!r} on rows of norm about {s:.3g} overflows "
            "the step of eq. (13): the features are too large in scale for a fixed step; "
            "use learning_rate='auto' or rescale X")
    return eta0


def _new_state(est, X, y, rng):
    """The :class:`DSMLRState` a fit of ``est`` starts from: rows dealt into blocks, W = 0
    (on the driver unless ``backend="dask"``) and the backend started."""
    n, d = X.shape
    K = est.classes_.shape[0]
    s = pow2_scale(X)  # run on V = s·W (exact: s is a power of two; 1 for unit rows)
    Xs, alpha = (X, float(est.alpha)) if s == 1.0 else (X * (1.0 / s), est.alpha / s / s)
    eta0 = _initial_step(est, Xs, K, alpha, s)
    P = _check_combination(est, n, K, eta0 * alpha)
    sched = SyncSchedule() if est.schedule == "sync" else AsyncSchedule()
    remote = est.backend == "dask"  # then W lives on the workers until the end
    st = DSMLRState(P=P, K=K, alpha=alpha, learning_rate=eta0, b_update=est.b_update,
                    W=None if remote else np.zeros((K, d)),
                    blocks=Blocks(Xs, y, K, P, rng), schedule=sched, scale=s)
    if est.schedule == "async":
        st.queues = AsyncSchedule.initial_queues(K, P, rng)
    st.backend = _make_backend(est, P, st.blocks, K, st.queues)
    return st


class _WorkersHoldW:
    """The epoch loop's hooks for ``backend="dask"``, where ``W`` stays on the workers until
    the fit ends: the history's loss comes from the workers' partial sums."""

    def _adaptive(self):
        """``learning_rate="auto"`` off Dask: a blow-up or a stall cuts η₀ by 5, a blow-up
        putting back the best weights (:class:`~xclib.fitloop.StepCuts`; on Dask the workers
        hold W, and the safe step of :func:`auto_learning_rate` is used instead)."""
        return self.learning_rate == "auto" and self.backend != "dask"

    def fit(self, X, y, eval_set=None):
        """Fit on ``(X, y)``; ``eval_set`` as in every estimator (not with ``backend="dask"``,
        whose driver does not hold ``W`` during the fit)."""
        if eval_set is not None and self.backend == "dask":
            raise ValueError("eval_set is not available with backend='dask': W stays on the "
                             "workers until the fit ends; evaluate the fitted model instead")
        if self.warm_start and self.backend == "dask" and hasattr(self, "coef_"):
            raise ValueError("warm_start=True is not available with backend='dask': the "
                             "workers start their parameter blocks at zero; warm-start with "
                             "backend='threads', or fit afresh")
        return super().fit(X, y, eval_set=eval_set)

    def _remote(self, state):
        return isinstance(state.backend, DaskBackend)

    def _round_metrics(self, state, X, y):
        if not self._remote(state):
            return super()._round_metrics(state, X, y)
        loss, err, _ = state.backend.metrics  # partial sums from the workers
        return None, None, (loss if np.isfinite(loss) else np.nan), err

    def _keep_best(self, state, coef, intercept):
        if not self._remote(state):
            return super()._keep_best(state, coef, intercept)
        state.backend.keep_best()  # each worker copies the parameter rows it holds
        return None, None

    def _set_weights(self, state, coef, intercept):  # warm_start (serial, threads)
        state.W[...] = coef * state.scale  # V = s·W, the kernels' weights

    def _warm_rows(self, state, X, y):
        """Each ``b_i`` at eq. (9) for the warm weights."""
        B = state.blocks
        for p in range(state.P):
            for start, stop, s in score_blocks(state.W, B.X[p]):
                B.b[p][start:stop] = -row_logsumexp(s)

    def _best_from_workers(self, state):
        """On Dask, the diverged fit's ``coef_``: the copy the workers kept of the best W."""
        if self._remote(state) and self.diverged_:
            self.coef_ = state.backend.weights(state, best=True) / state.scale

    def _release_backend(self, state):
        """Fetch what the workers still hold (the best W of a diverged Dask fit, the ``b``
        blocks, their peak bytes), then close the backend."""
        try:
            self._best_from_workers(state)
            if isinstance(state.backend, DaskBackend) and not self.diverged_:
                state.backend.fetch_b(state.blocks)
            worker_bytes = state.backend.worker_bytes()
            if worker_bytes is not None:
                self.worker_bytes_ = worker_bytes
        finally:
            state.backend.close()


class DSMLR(_WorkersHoldW, IterativeSoftmaxEstimator):
    """Doubly-separable multinomial logistic regression (Raman et al. 2019).

    Minimises ``L1(W)`` of eq. (2) through ``L2(W, b)`` of eq. (10): stochastic steps (13) on
    ``W``, exact ``b`` (9) once per outer iteration (epoch). Rows are dealt at random (seeded)
    into P near-equal blocks and classes into P contiguous blocks; each worker owns one data
    block (and its ``b``) for the whole fit, parameter blocks move.

    Parameters
    ----------
    alpha : float, default 1e-4
        Ridge; Raman et al.'s λ of eq. (2) *exactly* (their eq. (2) is the mean log-loss +
        λ/2 ‖W‖², the book's scale), e.g. the paper's NEWS20 λ = 8.881e-5 is ``alpha=8.881e-5``.
    learning_rate : float or "auto", default "auto"
        η₀ of eq. (13), the paper's η: outer iteration t (1-based) uses ``η_t = η₀ / √t``
        (Theorem 1; no ``decay``). Eq. (13) multiplies the step by K, so η₀ must be below
        about ``1 / (K max‖x_i‖²)``; ``"auto"`` is that bound on Dask, else the bolder step of
        :func:`auto_learning_rate`, cut by 5 when an epoch blows up or five stall. A float is
        η₀ of eq. (13) as printed (Table 3's η = 1e2–1e10 diverge then: see chapter 3).
    n_epochs, tol, n_iter_no_change : default 100, 1e-3, 5: at most T outer iterations,
        fewer by scikit-learn's rule (:class:`~xclib.base.StepRules`); ``tol=None`` runs all T.
    n_workers : int, default 1: P, clamped to ``min(P, N, K)`` with a warning.
    schedule : {"sync", "async"}, default "sync"
        Algorithm 1 (``P`` inner epochs of disjoint block pairs, then the partial sums for (9)),
        or Algorithm 2 (NOMAD: columns travel a token ring of worker queues).
    backend : {"serial", "threads", "dask"}, default "serial"
        ``serial`` runs the workers one after another (same arithmetic); ``threads`` one thread
        per worker (numba kernels release the GIL); ``dask`` one ``dask.distributed`` worker per
        data block, parameter blocks (sync) or columns (async) passing from worker to worker
        (:mod:`.dask_backend`); the driver holds no ``W`` until the fit ends.
    b_update : {"exact", "stochastic"}, default "exact"
        ``exact`` is eq. (9). ``stochastic`` also steps every ``b_i`` in the inner loop (gradient
        of (12)), never resetting it: what the paper argues against; serial/threads sync only.
    client : distributed.Client, str or None, default None
        For ``backend="dask"``: a client, a scheduler address, or None for a
        ``LocalCluster(n_workers=P, threads_per_worker=1, processes=True)`` (P worker
        processes) made (and closed) by ``fit``. The client must have at least P workers.
        Pass the address (``client.scheduler.address``) where the estimator is cloned
        (``sklearn.base.clone`` deep-copies parameters, and a ``Client`` cannot be copied).
    timeout : float > 0, default 120
        Seconds an asynchronous thread may wait for its next column, or a Dask step (an outer
        iteration, a worker's wait for a block) may take, before the fit stops with an error
        (:class:`~.dask_backend.WorkerLostError` on Dask, also raised at once when a worker
        leaves the cluster).
    random_state, verbose, warm_start : as in every estimator (``warm_start``: serial and
        threads backends; each ``b_i`` starts at eq. (9) for the fitted ``coef_``).

    Attributes
    ----------
    coef_ (K, D), intercept_ None, classes_, diverged_, n_epochs_, history_ (adds
    ``objective`` = L1(W) per epoch), learning_rate_ (η₀ used), n_workers_ (P after the
    clamp), b_ (N,) the final b (eq. (9) of the final W for the exact update; None if the fit
    diverged), async_visits_ (async only: (T, P, K) booleans, which columns each worker updated
    in each outer iteration), worker_bytes_ (dask only: per worker, the most bytes its state
    held during the fit by Dask's ``sizeof`` — its data block, labels and b block, the parameter
    blocks in its mailbox and in hand, and its copy of the best iterate).
    """

    _parameter_constraints = {
        "alpha": ALPHA, "learning_rate": LEARNING_RATE + [StrOptions({"auto"})],
        "n_epochs": N_EPOCHS, "tol": STOP_TOL, "n_iter_no_change": N_ITER_NO_CHANGE,
        "n_workers": N_WORKERS,
        "schedule": [StrOptions({"sync", "async"})],
        "backend": [StrOptions({"serial", "threads", "dask"})],
        "b_update": [StrOptions({"exact", "stochastic"})],
        "client": CLIENT, "timeout": TIMEOUT, "random_state": RANDOM_STATE, "verbose": VERBOSE,
        "warm_start": WARM_START,
    }

    _stops_on_tol = True

    def __init__(self, *, alpha=1e-4, learning_rate="auto", n_epochs=100, tol=1e-3,
                 n_iter_no_change=5, n_workers=1, schedule="sync", backend="serial",
                 b_update="exact", client=None, timeout=120.0, random_state=None,
                 verbose=False, warm_start=False):
        self.alpha = alpha
        self.learning_rate = learning_rate
        self.n_epochs = n_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.n_workers = n_workers
        self.schedule = schedule
        self.backend = backend
        self.b_update = b_update
        self.client = client
        self.timeout = timeout
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    # -- the epoch loop's methods -------------------------------------------------------
    def _init_state(self, X, y, rng):
        return _new_state(self, X, y, rng)

    def _run_epoch(self, state, X, y, epoch, rng):
        eta = state.learning_rate * CUT ** -getattr(self, "_fit_cuts", 0) \
            / math.sqrt(epoch + 1.0)
        try:
            state.schedule.run_epoch(state, eta, rng)
            sq = state.weights_sqnorm()
        except BaseException:
            state.backend.close()
            raise
        state.sqnorm.append(sq)

    def _coef(self, state):
        return state.weights(), None

    def _finalize(self, state):
        """Copy the extra fitted attributes out of the state and release the backend."""
        self._release_backend(state)
        self.learning_rate_ = state.learning_rate / state.scale / state.scale
        self.n_workers_ = state.P
        self.history_["objective"] = [
            float(loss + 0.5 * self.alpha * sq)
            for loss, sq in zip(self.history_["train_loss"], state.sqnorm)
        ]
        self.b_ = None if self.diverged_ else state.blocks.gather_b()
        if self.schedule == "async":
            self.async_visits_ = np.array(state.visits)
