"""DS-MLR: doubly-separable multinomial logistic regression (Raman et al., KDD 2019).

The chapter's equations, top-down:

* eq. (2)  ``L1(W) = λ/2 ‖W‖² − (1/N) Σ_i w_{y_i}ᵀx_i + (1/N) Σ_i log Σ_k exp(w_kᵀx_i)``;
* eq. (10)–(12) the doubly-separable form ``L2(W, b) = Σ_i Σ_k f_ki(w_k, b_i)`` with

      f_ki = λ/(2N) ‖w_k‖² − y_ik w_kᵀx_i / N + exp(w_kᵀx_i + b_i) / N − b_i/(NK) − 1/(NK);

* eq. (9)  the exact ``b_i = −log Σ_k exp(w_kᵀx_i)`` (β_i = 1, ``b_i = log a_i``), with which
  ``L2(W, b(W)) = L1(W)``;
* eq. (13) the stochastic step ``w_k ← w_k − η_t K (λ w_k − y_ik x_i + exp(w_kᵀx_i + b_i) x_i)``.

Kernels (numba, plain arrays, GIL released so that one thread per worker runs in parallel):
:func:`block_sgd` runs eq. (13) over every (row, class) pair of one data block × one parameter
block; :func:`block_lse` computes one block's partial log-partition sums for eq. (9);
:func:`column_sgd` is the asynchronous (NOMAD) unit of work: one column ``w_k`` against a whole
data block. The estimator :class:`DSMLR` arranges these kernels in the synchronous schedule
(Algorithm 1) or the asynchronous one (Algorithm 2) on a ``serial``, ``threads`` or ``dask``
backend; :class:`DataParallelLBFGS` is the paper's data-parallel baseline.

Algorithm 1 initialises ``b = 1/K``; with ``W = 0`` eq. (9) gives ``b_i = −log K``. We read the
``1/K`` as the initial ``a_i`` (``b_i = log a_i = −log K``), which *is* eq. (9) at ``W = 0``, and
initialise ``b`` that way.
"""
from __future__ import annotations

import math
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit
from scipy.optimize import minimize

from ._numba import sparse_row_axpy, sparse_row_dot
from .base import IterativeSoftmaxEstimator, LinearSoftmaxClassifier, as_csr
from .exact import softmax_objective
from .metrics import row_logsumexp

__all__ = [
    "block_sgd",
    "block_lse",
    "column_sgd",
    "ds_objective",
    "exact_b",
    "primal_objective",
    "partition",
    "sync_schedule",
    "simulate_schedules",
    "DSMLR",
    "DataParallelLBFGS",
    "WorkerLostError",
]

_RESCALE = 1e-100  # fold the lazy scale back into the row when it gets this small


# ----------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def block_sgd(indptr, indices, data, y, b, rows, W, classes, class_offset, eta, lam,
              n_classes, b_step):
    """Eq. (13) over one data block × one parameter block, in place.

    For each row ``i`` of ``rows`` (in that order) and each class ``k`` of ``classes`` (in that
    order) it takes the step ``w_k ← (1 − η K λ) w_k − η K (exp(w_kᵀx_i + b_i) − y_ik) x_i``.
    The ridge shrink is kept as a lazy per-row scale so one step costs O(nnz(x_i)), not O(D);
    the scale is folded back into ``W`` at the end (O(|block| D), the size of the block that is
    sent anyway).

    Parameters
    ----------
    indptr, indices, data : CSR arrays of the data block (local row numbering)
    y : int64 (n_local,) global labels ; b : float64 (n_local,) the block's b_i
    rows : int64 permutation of local rows ; W : (K_block, D) parameter block, updated in place
    classes : int64 permutation of local class numbers ``0..K_block-1``
    class_offset : global number of local class 0 ; eta : η_t ; lam : λ ; n_classes : K
    b_step : 0 for the exact b of eq. (9) (b untouched here); > 0 to also take the stochastic
        step ``b_i ← b_i − b_step (K exp(w_kᵀx_i + b_i) − 1)`` (gradient of eq. (12) in b_i,
        scaled like eq. (13)) — the unstable alternative the paper avoids.
    """
    kb = W.shape[0]
    step = eta * n_classes
    shrink = 1.0 - step * lam
    alpha = np.ones(kb)
    for ii in range(rows.shape[0]):
        i = rows[ii]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        for kk in range(classes.shape[0]):
            k = classes[kk]
            s = alpha[k] * sparse_row_dot(idx, val, W[k]) + b[i]
            e = math.exp(s)
            g = e - (1.0 if y[i] == class_offset + k else 0.0)
            alpha[k] *= shrink
            sparse_row_axpy(-step * g / alpha[k], idx, val, W[k])
            if abs(alpha[k]) < _RESCALE:
                for j in range(W.shape[1]):
                    W[k, j] *= alpha[k]
                alpha[k] = 1.0
            if b_step > 0.0:
                b[i] -= b_step * (n_classes * e - 1.0)
    for k in range(kb):
        if alpha[k] != 1.0:
            for j in range(W.shape[1]):
                W[k, j] *= alpha[k]


@njit(cache=True, nogil=True)
def block_lse(indptr, indices, data, W, out):
    """Partial sums for eq. (9): ``out[i] = log Σ_{k in block} exp(w_kᵀx_i)``, O(nnz · K_block)."""
    n = indptr.shape[0] - 1
    kb = W.shape[0]
    s = np.empty(kb)
    for i in range(n):
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        m = -np.inf
        for k in range(kb):
            s[k] = sparse_row_dot(idx, val, W[k])
            if s[k] > m:
                m = s[k]
        acc = 0.0
        for k in range(kb):
            acc += math.exp(s[k] - m)
        out[i] = m + math.log(acc)


@njit(cache=True, nogil=True)
def column_sgd(indptr, indices, data, y, b, rows, w, k, eta, lam, n_classes, lse_acc):
    """The asynchronous unit (Algorithm 2, lines 13–14): column ``w_k`` against a data block.

    Takes eq. (13) for class ``k`` over ``rows`` in that order (lazy ridge scale as in
    :func:`block_sgd`), then adds ``exp(w_kᵀx_i)`` of the updated column to the running
    partial sums ``lse_acc`` (kept on the log scale: ``lse_acc[i] ← logaddexp(lse_acc[i], s)``).
    """
    step = eta * n_classes
    shrink = 1.0 - step * lam
    alpha = 1.0
    for ii in range(rows.shape[0]):
        i = rows[ii]
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        s = alpha * sparse_row_dot(idx, val, w) + b[i]
        g = math.exp(s) - (1.0 if y[i] == k else 0.0)
        alpha *= shrink
        sparse_row_axpy(-step * g / alpha, idx, val, w)
        if abs(alpha) < _RESCALE:
            for j in range(w.shape[0]):
                w[j] *= alpha
            alpha = 1.0
    if alpha != 1.0:
        for j in range(w.shape[0]):
            w[j] *= alpha
    n = indptr.shape[0] - 1
    for i in range(n):
        idx = indices[indptr[i]:indptr[i + 1]]
        val = data[indptr[i]:indptr[i + 1]]
        s = sparse_row_dot(idx, val, w)
        a = lse_acc[i]
        if a == -np.inf:
            lse_acc[i] = s
        elif a > s:
            lse_acc[i] = a + math.log1p(math.exp(s - a))
        else:
            lse_acc[i] = s + math.log1p(math.exp(a - s))


# ----------------------------------------------------------------------------------------
# The objectives in NumPy (for the chapter and the tests)
# ----------------------------------------------------------------------------------------
def exact_b(W, X):
    """Eq. (9) with β_i = 1: ``b_i = −log Σ_k exp(w_kᵀx_i)``, shape (N,)."""
    s = np.asarray(X @ W.T)
    return -row_logsumexp(s)


def primal_objective(W, X, y, lam):
    """``L1(W)`` of eq. (2) (mean over rows, λ/2‖W‖²): ``softmax_objective(mu=λN) / N``."""
    n = X.shape[0]
    return softmax_objective(W, as_csr(X), y, lam * n, with_grad=False) / n


def ds_objective(W, b, X, y, lam, with_grad=False):
    """``L2(W, b) = Σ_i Σ_k f_ki(w_k, b_i)`` of eqs. (10)–(12), and its gradients.

    Returns ``value`` or ``(value, grad_W (K, D), grad_b (N,))``. Dense N × K scores: for the
    chapter's small checks and the tests, not for training.
    """
    X = as_csr(X)
    n = X.shape[0]
    s = np.asarray(X @ W.T)
    e = np.exp(s + b[:, None])
    value = (0.5 * lam * np.sum(W * W) - np.sum(s[np.arange(n), y]) / n
             + (np.sum(e) - np.sum(b) - n) / n)
    if not with_grad:
        return value
    r = e.copy()
    r[np.arange(n), y] -= 1.0
    grad_W = lam * W + np.asarray(X.T @ r).T / n
    grad_b = (e.sum(axis=1) - 1.0) / n
    return value, grad_W, grad_b


# ----------------------------------------------------------------------------------------
# Partition and schedule
# ----------------------------------------------------------------------------------------
def partition(n, n_blocks):
    """Boundaries of ``n_blocks`` contiguous, near-equal blocks of ``range(n)`` (length P+1)."""
    return np.linspace(0, n, n_blocks + 1).round().astype(np.int64)


def sync_schedule(n_workers):
    """Algorithm 1's pairs: list over inner epochs s of ``[(p, (p + s) mod P) for p]``.

    In each inner epoch the P pairs use P distinct data blocks and P distinct parameter
    blocks; over the P inner epochs every (data block, parameter block) pair appears once.
    """
    P = int(n_workers)
    return [[(p, (p + s) % P) for p in range(P)] for s in range(P)]


def simulate_schedules(block_nnz, n_classes, n_features, sec_per_op, lbfgs_sec_per_op,
                       bandwidth=1.25e9, latency=50e-6, max_chunks=256):
    """Simulated time and bytes of one outer iteration on P machines (a model, not a run).

    P = ``len(block_nnz)`` workers; worker p holds ``block_nnz[p]`` non-zeros. A unit of work
    "one non-zero × one class" costs ``sec_per_op`` seconds for DS-MLR (the (13) step plus the
    partial sum of (9), measured on one worker) and ``lbfgs_sec_per_op`` for one exact
    gradient (measured likewise). A message of m bytes between two workers costs
    ``latency + m / bandwidth`` (defaults: 10 Gbit/s, 50 µs).

    * sync (Algorithm 1): 2P inner epochs; in each the slowest worker sets the pace and every
      worker then sends a parameter block (K/P rows of D float64) to its neighbour. The partial
      sums need a dot product per (non-zero, class) but no step, counted as half an op.
    * async (Algorithm 2): an event simulation of the token ring — columns (grouped in at most
      ``max_chunks`` chunks) queue at a worker, take ``sec_per_op · nnz_p · |chunk|`` there and
      arrive at the next worker a message later; computation and communication overlap.
    * L-BFGS (data parallel): per iteration one gradient (slowest worker) and a ring all-reduce
      of the K × D gradient, ``2 (P−1)/P · 8KD`` bytes per worker, plus the broadcast of W.

    Returns a dict: ``{"sync"|"async"|"lbfgs": {"time": seconds, "bytes": bytes sent per
    worker}}`` per outer iteration (L-BFGS: per iteration).
    """
    import heapq

    nnz = np.asarray(block_nnz, dtype=float)
    P = nnz.shape[0]
    K, D = int(n_classes), int(n_features)
    cb = partition(K, P)
    kq = np.diff(cb).astype(float)
    msg = lambda rows: latency + 8.0 * D * rows / bandwidth  # noqa: E731
    # sync
    t_sync = 0.0
    for s in range(P):
        t_sync += max(sec_per_op * nnz[p] * kq[(p + s) % P] for p in range(P))
        t_sync += msg(kq.max()) if P > 1 else 0.0
    for s in range(P):
        t_sync += max(0.5 * sec_per_op * nnz[p] * kq[(p + s) % P] for p in range(P))
        t_sync += msg(kq.max()) if P > 1 else 0.0
    bytes_sync = 2 * P * 8.0 * D * kq.max() if P > 1 else 0.0
    # async: token ring, FIFO queues, chunks of columns
    n_chunks = min(K, max_chunks)
    size = np.diff(partition(K, n_chunks)).astype(float)
    free = np.zeros(P)
    done = np.zeros(P, dtype=int)
    events = []  # (arrival time, seq, worker, chunk, hops)
    rng = np.random.default_rng(0)
    seq = 0
    for c in range(n_chunks):
        heapq.heappush(events, (0.0, seq, int(rng.integers(P)), c, 0))
        seq += 1
    t_async = 0.0
    while events:
        t, _, p, c, hops = heapq.heappop(events)
        start = max(t, free[p])
        free[p] = start + 1.5 * sec_per_op * nnz[p] * size[c]
        done[p] += 1
        t_async = max(t_async, free[p])
        if hops + 1 < P:
            heapq.heappush(events, (free[p] + msg(size[c]), seq, (p + 1) % P, c, hops + 1))
            seq += 1
    bytes_async = 8.0 * D * K * (P - 1) / P if P > 1 else 0.0
    # data-parallel L-BFGS
    t_l = lbfgs_sec_per_op * nnz.max() * K
    bytes_l = 0.0
    if P > 1:
        bytes_l = 2 * (P - 1) / P * 8.0 * K * D + 8.0 * K * D / P
        t_l += bytes_l / bandwidth + 2 * math.ceil(math.log2(P)) * latency
    return {"sync": {"time": t_sync, "bytes": bytes_sync},
            "async": {"time": t_async, "bytes": bytes_async},
            "lbfgs": {"time": t_l, "bytes": bytes_l}}


class WorkerLostError(RuntimeError):
    """A Dask worker holding a data block left during a fit; the fit stops (no partial model)."""


# ----------------------------------------------------------------------------------------
# Per-backend runners
# ----------------------------------------------------------------------------------------
class _Blocks:
    """Data blocks (CSR pieces, labels, b) and class-block boundaries for P workers."""

    def __init__(self, X, y, n_classes, P, rng):
        self.P = P
        n = X.shape[0]
        self.rb = partition(n, P)
        self.cb = partition(n_classes, P)
        # rows are dealt to workers at random once (data files are often sorted by class; a
        # block holding only some classes makes the block-wise steps drift), then stay put
        self.order = rng.permutation(n) if P > 1 else np.arange(n)
        self.X = [as_csr(X[self.order[self.rb[p]:self.rb[p + 1]]]) for p in range(P)]
        self.y = [np.ascontiguousarray(y[self.order[self.rb[p]:self.rb[p + 1]]]) for p in range(P)]
        self.b = [np.full(self.rb[p + 1] - self.rb[p], -math.log(n_classes)) for p in range(P)]


def _sgd_call(Xp, yp, bp, rows, Wq, cls, off, eta, lam, K, b_step):
    block_sgd(Xp.indptr, Xp.indices, Xp.data, yp, bp, rows, Wq, cls, off, eta, lam, K, b_step)


def _lse_call(Xp, Wq):
    out = np.empty(Xp.shape[0])
    block_lse(Xp.indptr, Xp.indices, Xp.data, Wq, out)
    return out


# Dask task functions: they never mutate their inputs (Dask may share them).
def _dask_sgd(Xp, yp, bp, Wq, rows, cls, off, eta, lam, K):
    Wq = Wq.copy()
    _sgd_call(Xp, yp, bp, rows, Wq, cls, off, eta, lam, K, 0.0)
    return Wq


def _worker_bytes(dask_worker):
    from dask.sizeof import sizeof

    return sum(sizeof(v) for v in dask_worker.data.values())


def _dask_b(*parts):
    return -np.logaddexp.reduce(np.vstack(parts), axis=0)


# ----------------------------------------------------------------------------------------
# Estimators
# ----------------------------------------------------------------------------------------
class DSMLR(IterativeSoftmaxEstimator):
    """Doubly-separable multinomial logistic regression (Raman et al. 2019).

    Minimises ``L1(W)`` of eq. (2) through ``L2(W, b)`` of eq. (10): stochastic steps (13) on
    ``W``, exact ``b`` (9) once per outer iteration. Rows are dealt at random (seeded) into P
    near-equal blocks and classes into P contiguous blocks; each worker owns one data block (and its ``b``) for the
    whole fit, parameter blocks move.

    Parameters
    ----------
    lam : float, default 1e-4
        λ of eq. (2).
    eta0 : float, default 0.1
        η₀; outer iteration t (1-based) uses ``η_t = η₀ / √t`` in eq. (13). Eq. (13) multiplies
        the step by K, so η₀ must be below about ``1 / (K max‖x_i‖²)``.
    n_epochs : int, default 10
        Outer iterations T.
    n_workers : int, default 1
        P. Clamped to ``min(P, N, K)`` with a warning (a worker needs a row and a class).
    schedule : {"sync", "async"}
        Algorithm 1 (``P`` inner epochs of disjoint block pairs, then the partial sums for (9)),
        or Algorithm 2 (NOMAD: columns travel a token ring of worker queues).
    backend : {"serial", "threads", "dask"}
        ``serial`` runs the workers one after another (same arithmetic); ``threads`` one thread
        per worker (numba kernels release the GIL); ``dask`` one ``dask.distributed`` worker per
        block (sync schedule only).
    b_update : {"exact", "stochastic"}
        ``exact`` is eq. (9). ``stochastic`` also steps every ``b_i`` inside the inner loop
        (gradient of (12)) and never resets it — the alternative the paper argues against;
        serial/threads sync only.
    client : dask.distributed.Client or str or None
        For ``backend="dask"``: a client, a scheduler address, or None for a
        ``LocalCluster(n_workers=P, threads_per_worker=1, processes=False)`` made (and closed)
        by ``fit``. The client must have at least P workers.
    timeout : float, default 120
        Seconds a Dask inner step may take before the fit stops with an error.
    random_state, verbose : as in every estimator.

    Attributes
    ----------
    coef_ (K, D), intercept_ None, classes_, history_ (adds ``objective`` = L1(W) per epoch),
    b_ (N,) the final b (exact eq. (9) of the final W for sync/exact; None on Dask, where b
    stays on the workers), n_workers_ (P after the clamp), diverged_, async_visits_
    (async only: (T, P, K) booleans, which columns each worker updated in each outer iteration),
    worker_bytes_ (dask only: per worker, the largest number of bytes Dask held for it at the end
    of an outer iteration — its data block, b block and the parameter blocks it last updated).
    """

    def __init__(self, lam=1e-4, eta0=0.1, n_epochs=10, n_workers=1, schedule="sync",
                 backend="serial", b_update="exact", client=None, timeout=120.0,
                 random_state=None, verbose=False):
        self.lam = lam
        self.eta0 = eta0
        self.n_epochs = n_epochs
        self.n_workers = n_workers
        self.schedule = schedule
        self.backend = backend
        self.b_update = b_update
        self.client = client
        self.timeout = timeout
        self.random_state = random_state
        self.verbose = verbose

    # -- validation --------------------------------------------------------------------
    def _check_params(self, n, K):
        if self.schedule not in ("sync", "async"):
            raise ValueError(f"schedule must be 'sync' or 'async', got {self.schedule!r}")
        if self.backend not in ("serial", "threads", "dask"):
            raise ValueError(f"backend must be 'serial', 'threads' or 'dask', got {self.backend!r}")
        if self.b_update not in ("exact", "stochastic"):
            raise ValueError(f"b_update must be 'exact' or 'stochastic', got {self.b_update!r}")
        if self.schedule == "async" and self.backend == "dask":
            raise NotImplementedError(
                "the asynchronous (NOMAD) schedule is not implemented on Dask: use "
                "schedule='sync' with backend='dask', or schedule='async' with 'threads'")
        if self.b_update == "stochastic" and (self.schedule != "sync" or self.backend == "dask"):
            raise ValueError("b_update='stochastic' is only available with the sync schedule "
                             "on the serial or threads backend")
        if not (np.isfinite(self.lam) and self.lam >= 0):
            raise ValueError(f"lam must be a finite number >= 0, got {self.lam!r}")
        if not (np.isfinite(self.eta0) and self.eta0 > 0):
            raise ValueError(f"eta0 must be a finite number > 0, got {self.eta0!r}")
        if self.eta0 * K * self.lam >= 1.0:
            raise ValueError(
                f"eta0 * K * lam = {self.eta0 * K * self.lam:.3g} >= 1: the ridge part of eq. (13) "
                "would flip the sign of w_k; lower eta0 or lam")
        P = int(self.n_workers)
        if P < 1:
            raise ValueError(f"n_workers must be >= 1, got {self.n_workers!r}")
        clamp = min(P, n, K)
        if clamp < P:
            import warnings

            warnings.warn(
                f"n_workers={P} is more than the {n} rows or {K} classes; each worker needs at "
                f"least one row and one class, so {clamp} workers are used", UserWarning,
                stacklevel=3)
        return clamp

    # -- the epoch loop's three methods -------------------------------------------------
    def _init_state(self, X, y, rng):
        n, d = X.shape
        K = self.classes_.shape[0]
        P = self._check_params(n, K)
        self.n_workers_ = P
        st = {"P": P, "K": K, "W": np.zeros((K, d)), "blocks": _Blocks(X, y, K, P, rng),
              "sqnorm": []}
        if self.backend == "threads":
            st["pool"] = ThreadPoolExecutor(max_workers=P)
        if self.backend == "dask":
            self._dask_init(st)
        if self.schedule == "async":
            st["queues"] = [[] for _ in range(P)]
            for k in range(K):  # Algorithm 2, lines 4–7
                st["queues"][int(rng.integers(P))].append(k)
            st["async_t"] = 0
        return st

    def _run_epoch(self, state, X, y, epoch, rng):
        eta = self.eta0 / math.sqrt(epoch + 1.0)
        try:
            if self.schedule == "sync":
                self._sync_epoch(state, eta, rng)
            else:
                self._async_epoch(state, eta, rng)
        except BaseException:
            self._shutdown(state, gather=False)
            raise
        W = self._coef(state)[0]
        state["sqnorm"].append(float(np.sum(W * W)))
        if epoch + 1 == int(self.n_epochs):
            self._shutdown(state)

    def _coef(self, state):
        if self.backend == "dask" and "Wf" in state:
            if state.get("W_epoch") != state.get("epoch_done"):
                state["W"] = np.vstack(state["client"].gather(state["Wf"]))
                state["W_epoch"] = state.get("epoch_done")
        return state["W"], None

    def fit(self, X, y, eval_set=None):
        """Fit on ``(X, y)``; see the class docstring."""
        super().fit(X, y, eval_set=eval_set)
        st = self._state
        self._shutdown(st)
        n = self.n_epochs_
        self.history_["objective"] = [
            float(self.history_["train_loss"][e] + 0.5 * self.lam * st["sqnorm"][e])
            for e in range(n)
        ]
        self.b_ = None
        if self.backend != "dask":
            self.b_ = np.empty(st["blocks"].order.shape[0])
            self.b_[st["blocks"].order] = np.concatenate(st["blocks"].b)
        if self.schedule == "async":
            self.async_visits_ = np.array(st.get("visits", []))
        if self.backend == "dask":
            peak = st.get("worker_bytes", {})
            self.worker_bytes_ = [peak.get(a, 0) for a in st.get("addr", [])]
        self._state = None
        return self

    # -- synchronous schedule (Algorithm 1) --------------------------------------------
    def _draw(self, state, rng):
        """Re-shuffled orders of every (inner epoch, worker) — drawn in one fixed order."""
        P, B = state["P"], state["blocks"]
        orders = []
        for s, pairs in enumerate(sync_schedule(P)):
            row = []
            for p, q in pairs:
                rows = rng.permutation(B.rb[p + 1] - B.rb[p]).astype(np.int64)
                cls = rng.permutation(B.cb[q + 1] - B.cb[q]).astype(np.int64)
                row.append((p, q, rows, cls))
            orders.append(row)
        return orders

    def _sync_epoch(self, state, eta, rng):
        orders = self._draw(state, rng)
        if self.backend == "dask":
            return self._dask_sync_epoch(state, eta, orders)
        B, W, K = state["blocks"], state["W"], state["K"]
        b_step = eta if self.b_update == "stochastic" else 0.0

        def sgd(p, q, rows, cls):
            _sgd_call(B.X[p], B.y[p], B.b[p], rows, W[B.cb[q]:B.cb[q + 1]], cls,
                      int(B.cb[q]), eta, self.lam, K, b_step)

        def lse(p, q):
            return _lse_call(B.X[p], W[B.cb[q]:B.cb[q + 1]])

        pool = state.get("pool")
        for inner in orders:  # P inner epochs: P disjoint (data, parameter) block pairs each
            if pool is None:
                for args in inner:
                    sgd(*args)
            else:
                list(pool.map(lambda a: sgd(*a), inner))
        if self.b_update == "stochastic":
            return
        # P inner epochs of partial sums, then the exact b of eq. (9) per data block
        P = state["P"]
        pairs = [(p, q) for s in range(P) for p, q in sync_schedule(P)[s]]
        if pool is None:
            parts = [lse(p, q) for p, q in pairs]
        else:
            parts = list(pool.map(lambda a: lse(*a), pairs))
        for p in range(P):
            mine = [parts[j] for j, (pp, _) in enumerate(pairs) if pp == p]
            B.b[p][:] = -np.logaddexp.reduce(np.vstack(mine), axis=0)

    # -- asynchronous schedule (Algorithm 2, NOMAD) -------------------------------------
    def _async_epoch(self, state, eta, rng):
        P, K, B, W = state["P"], state["K"], state["blocks"], state["W"]
        rows = [rng.permutation(B.rb[p + 1] - B.rb[p]).astype(np.int64) for p in range(P)]
        seen = np.zeros((P, K), dtype=bool)
        held = [[] for _ in range(P)]  # columns that came round again before the worker's b update
        lse_acc = [np.full(B.rb[p + 1] - B.rb[p], -np.inf) for p in range(P)]
        visits = state.setdefault("visits", [])
        log = []

        def process(p, k):
            Xp = B.X[p]
            column_sgd(Xp.indptr, Xp.indices, Xp.data, B.y[p], B.b[p], rows[p], W[k], k, eta,
                       self.lam, K, lse_acc[p])
            seen[p, k] = True

        if self.backend == "serial":
            qs = [list(q) for q in state["queues"]]
            done = [0] * P
            while min(done) < K:
                for p in range(P):  # round robin: a deterministic interleaving of the workers
                    while done[p] < K and qs[p]:
                        k = qs[p].pop(0)
                        if seen[p, k]:
                            held[p].append(k)
                            continue
                        process(p, k)
                        log.append((p, k))
                        done[p] += 1
                        qs[(p + 1) % P].append(k)
                        break
            for p in range(P):
                qs[p] = held[p] + qs[p]
            state["queues"] = qs
        else:
            qs = [queue.Queue() for _ in range(P)]
            for p in range(P):
                for k in state["queues"][p]:
                    qs[p].put(k)
            lock = threading.Lock()
            errors = []

            def worker(p):
                try:
                    count = 0
                    while count < K:
                        k = qs[p].get(timeout=self.timeout)
                        if seen[p, k]:
                            held[p].append(k)
                            continue
                        process(p, k)
                        with lock:
                            log.append((p, k))
                        count += 1
                        qs[(p + 1) % P].put(k)
                except BaseException as exc:  # pragma: no cover - surfaced below
                    errors.append(exc)

            threads = [threading.Thread(target=worker, args=(p,)) for p in range(P)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise RuntimeError(f"an asynchronous worker failed: {errors[0]!r}") from errors[0]
            rest = []
            for p in range(P):
                left = []
                while not qs[p].empty():
                    left.append(qs[p].get())
                rest.append(held[p] + left)
            state["queues"] = rest
        for p in range(P):  # Algorithm 2, line 18: exact b from the accumulated partial sums
            B.b[p][:] = -lse_acc[p]
        visits.append(seen.copy())
        state["log"] = log

    # -- Dask ---------------------------------------------------------------------------
    def _dask_init(self, st):
        from distributed import Client, LocalCluster

        P = st["P"]
        if self.client is None:
            cluster = LocalCluster(n_workers=P, threads_per_worker=1, processes=False,
                                   dashboard_address=None)
            client = Client(cluster)
            st["own"] = (client, cluster)
        elif isinstance(self.client, str):
            client = Client(self.client)
            st["own"] = (client, None)
        else:
            client = self.client
        workers = sorted(client.scheduler_info()["workers"])
        if len(workers) < P:
            self._shutdown(st)
            raise ValueError(f"the Dask client has {len(workers)} workers; n_workers={P} needs {P}")
        B = st["blocks"]
        addr = workers[:P]
        st["client"], st["addr"] = client, addr
        # data blocks are sent once and stay on their worker; so do the b blocks
        st["Xf"] = [client.scatter(B.X[p], workers=[addr[p]]) for p in range(P)]
        st["yf"] = [client.scatter(B.y[p], workers=[addr[p]]) for p in range(P)]
        st["bf"] = [client.scatter(B.b[p], workers=[addr[p]]) for p in range(P)]
        st["Wf"] = [client.scatter(st["W"][B.cb[q]:B.cb[q + 1]].copy(), workers=[addr[q]])
                    for q in range(P)]
        st["epoch_done"] = 0
        st["W_epoch"] = 0

    def _dask_sync_epoch(self, state, eta, orders):
        from distributed import wait

        c, addr, P, K = state["client"], state["addr"], state["P"], state["K"]
        B = state["blocks"]
        Wf, Xf, yf, bf = state["Wf"], state["Xf"], state["yf"], state["bf"]
        for inner in orders:
            new = list(Wf)
            for p, q, rows, cls in inner:  # parameter block q moves to worker p
                new[q] = c.submit(_dask_sgd, Xf[p], yf[p], bf[p], Wf[q], rows, cls,
                                  int(B.cb[q]), eta, self.lam, K, workers=[addr[p]],
                                  allow_other_workers=False, pure=False)
            Wf = new
        parts = [[c.submit(_lse_call, Xf[p], Wf[q], workers=[addr[p]],
                           allow_other_workers=False, pure=False) for q in range(P)]
                 for p in range(P)]
        bf = [c.submit(_dask_b, *parts[p], workers=[addr[p]], allow_other_workers=False,
                       pure=False) for p in range(P)]
        state["Wf"], state["bf"] = Wf, bf
        self._dask_wait(state, Wf + bf, wait)
        state["epoch_done"] += 1
        # what each worker holds now (Dask's own accounting of its stored results)
        held = c.run(_worker_bytes, workers=addr)
        peak = state.setdefault("worker_bytes", {})
        for a, nbytes in held.items():
            peak[a] = max(peak.get(a, 0), int(nbytes))

    def _dask_wait(self, state, futures, wait):
        c, addr = state["client"], state["addr"]
        t0 = time.monotonic()
        while True:
            try:
                wait(futures, timeout=0.25)
            except Exception:  # distributed's TimeoutError
                pass
            bad = [f for f in futures if f.status in ("error", "lost", "cancelled")]
            if bad:
                missing = set(addr) - set(c.scheduler_info()["workers"])
                raise WorkerLostError(
                    f"a Dask task ended with status {bad[0].status!r}"
                    + (f"; workers {sorted(missing)} left the cluster" if missing else "")
                    + ": their data blocks are lost, so the fit stops (no partial model)")
            if all(f.status == "finished" for f in futures):
                return
            missing = set(addr) - set(c.scheduler_info()["workers"])
            if missing:
                raise WorkerLostError(
                    f"Dask workers {sorted(missing)} left the cluster during the fit; the data "
                    "blocks they held are lost, so the fit stops (no partial model)")
            if time.monotonic() - t0 > self.timeout:
                raise WorkerLostError(
                    f"a DS-MLR inner step took more than timeout={self.timeout} s on Dask")

    def _shutdown(self, state, gather=True):
        if state is None:
            return
        pool = state.pop("pool", None)
        if pool is not None:
            pool.shutdown(wait=True)
        if "Wf" in state and "client" in state:
            if gather:
                self._coef(state)
            for key in ("Xf", "yf", "bf", "Wf"):
                state.pop(key, None)
        own = state.pop("own", None)
        if own is not None:
            client, cluster = own
            client.close()
            if cluster is not None:
                cluster.close()


class DataParallelLBFGS(LinearSoftmaxClassifier):
    """The paper's data-parallel baseline: L-BFGS on eq. (2) with a gradient summed over blocks.

    Each of the P workers holds a block of rows; per iteration the current W (O(KD)) is sent to
    every worker and each returns its partial gradient (O(KD)), which the driver sums — the
    O(KD) communication of Table 1. ``backend="serial"`` computes the blocks in turn,
    ``"dask"`` on a ``dask.distributed`` cluster (``client`` as in :class:`DSMLR`).

    Attributes: ``coef_``, ``intercept_`` None, ``history_`` with ``iteration``, ``time``,
    ``objective`` (L1 of eq. (2)), ``n_iter_``.
    """

    def __init__(self, lam=1e-4, max_iter=100, n_workers=1, backend="serial", client=None,
                 tol=1e-10):
        self.lam = lam
        self.max_iter = max_iter
        self.n_workers = n_workers
        self.backend = backend
        self.client = client
        self.tol = tol

    def fit(self, X, y):
        X, y = self._validate_fit(X, y)
        n, d = X.shape
        K = self.classes_.shape[0]
        P = max(1, min(int(self.n_workers), n))
        rb = partition(n, P)
        blocks = [(X[rb[p]:rb[p + 1]], y[rb[p]:rb[p + 1]]) for p in range(P)]
        own = None
        if self.backend == "dask":
            from distributed import Client, LocalCluster

            if self.client is None:
                cluster = LocalCluster(n_workers=P, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
                client = Client(cluster)
                own = (client, cluster)
            else:
                client = self.client if not isinstance(self.client, str) else Client(self.client)
            addr = sorted(client.scheduler_info()["workers"])[:P]
            bf = [client.scatter(blk, workers=[addr[p % len(addr)]]) for p, blk in enumerate(blocks)]
        elif self.backend != "serial":
            raise ValueError(f"backend must be 'serial' or 'dask', got {self.backend!r}")
        hist = {"iteration": [], "time": [], "objective": []}
        lam = self.lam

        def partial(blk, W):
            v, g, _ = softmax_objective(W, blk[0], blk[1], 0.0)
            return v, g

        def fun(theta):
            W = theta.reshape(K, d)
            if self.backend == "dask":
                Wf = client.scatter(W, broadcast=True)
                res = client.gather([client.submit(partial, bf[p], Wf, workers=[addr[p]],
                                                   pure=False) for p in range(P)])
            else:
                res = [partial(blk, W) for blk in blocks]
            v = sum(r[0] for r in res) / n + 0.5 * lam * float(np.sum(W * W))
            g = sum(r[1] for r in res) / n + lam * W
            return v, g.ravel()

        t0 = time.perf_counter()

        def callback(intermediate_result):
            hist["iteration"].append(len(hist["iteration"]) + 1)
            hist["time"].append(time.perf_counter() - t0)
            hist["objective"].append(float(intermediate_result.fun))

        try:
            res = minimize(fun, np.zeros(K * d), jac=True, method="L-BFGS-B", callback=callback,
                           options={"maxiter": int(self.max_iter), "gtol": self.tol,
                                    "ftol": 1e3 * np.finfo(float).eps, "maxcor": 20})
        finally:
            if own is not None:
                own[0].close()
                own[1].close()
        self.coef_ = res.x.reshape(K, d)
        self.intercept_ = None
        self.n_iter_ = int(res.nit)
        self.objective_ = float(res.fun)
        self.history_ = hist
        return self
