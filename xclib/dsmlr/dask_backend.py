"""DS-MLR on a ``dask.distributed`` cluster: one actor per worker, parameter blocks passed
worker to worker.

Each of the P workers runs one :class:`RingWorker` *actor* (a stateful object that lives on that
worker for the whole fit). Its data block, labels and ``b`` block are sent to it once, when it is
made, and never move again. Parameter blocks (Algorithm 1) or columns (Algorithm 2) move by one
actor calling :meth:`RingWorker.put` on its ring neighbour: a direct worker-to-worker message,
which the scheduler does not see and the driver does not relay. Each actor waits only for the
block it needs next, so there is no global barrier inside an outer iteration; the driver waits
for the P actors at the end of each outer iteration, when they report partial sums of the
objective. ``W`` reaches the driver once, at the end of the fit.

A worker that dies takes its data block and the parameter blocks it holds with it: the driver
notices (the scheduler drops the worker, or an actor call fails, or nothing finishes within
``timeout``), tells the surviving actors to stop, and raises :class:`WorkerLostError`.
"""
from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict

import numpy as np

from .kernels import column_sgd
from .schedules import lse_call, sgd_call

__all__ = ["DaskBackend", "RingWorker", "WorkerLostError"]


class WorkerLostError(RuntimeError):
    """A Dask worker of the fit died or stopped answering; the fit stops (no partial model)."""


class _Aborted(RuntimeError):
    pass


def _nbytes(obj):
    """Bytes of ``obj`` by Dask's own accounting (``dask.sizeof``, what a worker counts for
    the data it holds); lists and tuples item by item (``sizeof`` samples long ones)."""
    from dask.sizeof import sizeof

    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o) for o in obj)
    return int(sizeof(obj))


class _Mailbox:
    """A worker's parameter *packets* ``(classes, rows of W)`` keyed by a tag, and its ring.

    :meth:`put` (a coroutine: it runs on the worker's event loop while the actor's thread
    computes) is how a neighbour hands it a packet; :meth:`_take` waits (at most ``timeout``
    seconds) for the one it needs. ``bytes_`` is the most bytes held at once (``fixed`` bytes
    of the subclass's own arrays, the mailbox, the packet in hand, the copy of the best
    iterate), by Dask's ``sizeof``.
    """

    def __init__(self, p, P, timeout, fixed):
        self.p, self.P, self.timeout, self.fixed = p, P, float(timeout), int(fixed)
        self.box = OrderedDict()
        self.cv = threading.Condition()  # re-entrant: guards box, best and the counters
        self.aborted = None
        self.prev = self.next = None
        self.pending = []
        self.best = None
        self.in_hand = 0
        self.bytes_ = self._held()

    # -- wiring and mail -----------------------------------------------------------------
    def connect(self, prev, nxt):
        """Ring neighbours ``prev`` (worker p−1) and ``nxt`` (worker p+1), each given as
        (address, actor key); the handles are made here, on this worker, so that calls on
        them go from this worker straight to the neighbour's."""
        from distributed import get_worker
        from distributed.actor import Actor

        me = get_worker()
        self.prev, self.next = (Actor(RingWorker, addr, key, worker=me) for addr, key in
                                (prev, nxt))
        return True

    async def put(self, tag, packet):
        self._deliver(tag, packet)
        return True

    async def abort(self, why):
        with self.cv:
            self.aborted = str(why)
            self.cv.notify_all()
        return True

    def _deliver(self, tag, packet):
        with self.cv:
            self.box[tag] = packet
            self.cv.notify_all()
            self._track()

    def _held(self):
        with self.cv:
            return (self.fixed + self.in_hand
                    + sum(_nbytes(v) for v in self.box.values())
                    + (0 if self.best is None else _nbytes(self.best)))

    def _track(self):
        self.bytes_ = max(self.bytes_, self._held())

    def _take(self, want):
        """The packet tagged ``want`` (None: the first to arrive), waiting at most
        ``timeout`` seconds."""
        deadline = time.monotonic() + self.timeout
        with self.cv:
            while True:
                if self.aborted is not None:
                    raise _Aborted(f"worker {self.p}: stopped by the driver ({self.aborted})")
                hit = next(iter(self.box), None) if want is None else (
                    want if want in self.box else None)
                if hit is not None:
                    packet = self.box.pop(hit)
                    self.in_hand = _nbytes(packet)
                    return hit, packet
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"DS-MLR worker {self.p} waited more than timeout={self.timeout} s for "
                        "a parameter block from its ring neighbour")
                self.cv.wait(min(left, 0.5))

    def _send(self, to, tag, packet):
        self._track()
        self.in_hand = 0
        if to is None:  # P = 1: the ring is this worker
            self._deliver(tag, packet)
            return
        self._check_sends()
        self.pending.append(to.put(tag, packet))

    def _check_sends(self, wait=False):
        """Raise if a message to a neighbour failed; with ``wait``, wait for all of them."""
        keep = []
        for f in self.pending:
            if wait or f.done():
                f.result(timeout=self.timeout)  # raises the failure of the call
            else:
                keep.append(f)
        self.pending = keep

    def _neighbour(self, side):
        return None if self.P == 1 else side

    # -- snapshots and results ---------------------------------------------------------------
    def keep_best(self):
        """Copy the parameter rows this worker holds now (the best iterate so far)."""
        with self.cv:
            self.best = None
            self.best = [(c.copy(), w.copy()) for c, w in self.box.values()]
        self._track()
        return True

    def weights(self, best=False):
        """(classes, rows of W) of every packet this worker holds (or held at the best)."""
        with self.cv:
            items = self.best if best else list(self.box.values())
        if not items:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim))
        return (np.concatenate([c for c, _ in items]), np.vstack([w for _, w in items]))



class RingWorker(_Mailbox):
    """The state and the loops of one DS-MLR worker (a Dask actor): its data block ``X``
    (CSR, local rows), ``y`` and ``b``, kept for the whole fit, and a :class:`_Mailbox`."""

    def __init__(self, p, P, X, y, b, n_classes, timeout):
        self.K = n_classes
        self.X, self.y, self.b = X, np.asarray(y), np.array(b, dtype=float)
        self.dim = X.shape[1]
        super().__init__(p, P, timeout, _nbytes(self.X) + _nbytes(self.y) + _nbytes(self.b))

    # -- Algorithm 1 -----------------------------------------------------------------------
    def seed_blocks(self, tag_packets):
        """Put the starting packets (zero parameter rows made here) into the mailbox."""
        D = self.X.shape[1]
        for tag, classes in tag_packets:
            self._deliver(tag, (np.asarray(classes), np.zeros((len(classes), D))))
        return True

    def sync_epoch(self, epoch, orders, eta, alpha):
        """One outer iteration of Algorithm 1 at this worker; returns its partial objective.

        ``orders``: per inner epoch s, ``(q, rows, classes)``; parameter block q is tagged
        ``("w", q)`` and, after this worker's steps, goes to worker p−1, which needs it in
        inner epoch s+1. Then the P blocks go round once more for the partial sums of (9).
        """
        for q, rows, cls in orders:
            _, (classes, Wq) = self._take(("w", q))
            sgd_call(self.X, self.y, self.b, rows, Wq, cls, int(classes[0]), eta, alpha,
                     self.K, 0.0)
            self._send(self._neighbour(self.prev), ("w", q), (classes, Wq))
        return self._score_pass(epoch, [("w", q) for q, _, _ in orders], set_b=True)

    # -- Algorithm 2 -----------------------------------------------------------------------
    def async_epoch(self, epoch, rows, eta, alpha):
        """One outer iteration of Algorithm 2 at this worker: pop columns as they arrive,
        update each one (once), pass it to worker p+1; stop after all K columns.

        Returns the log of columns it updated (in order); columns that came back a second time
        stay in its mailbox for the next outer iteration.
        """
        lse_acc = np.full(self.X.shape[0], -np.inf)
        Xp, seen, log = self.X, np.zeros(self.K, dtype=bool), []
        held = OrderedDict()
        while len(log) < self.K:
            tag, (classes, w) = self._take(None)
            k = int(classes[0])
            if seen[k]:
                held[tag] = (classes, w)  # back too soon: wait for the next iteration
                continue
            column_sgd(Xp.indptr, Xp.indices, Xp.data, self.y, self.b, rows, w[0], k, eta,
                       alpha, self.K, lse_acc)
            seen[k] = True
            log.append(k)
            self._send(self._neighbour(self.next), tag, (classes, w))
        self._check_sends(wait=True)
        self.b[:] = -lse_acc
        with self.cv:  # held columns go first, as in the shared-memory ring
            rest = list(self.box.items())
            self.box.clear()
            self.box.update(held)
            self.box.update(rest)
        return log

    def bundle(self, epoch):
        """Pack the columns in the mailbox into one packet for :meth:`score_pass`."""
        with self.cv:
            items = list(self.box.items())
            self.box.clear()
        D = self.X.shape[1]
        classes = np.array([int(c[0]) for _, (c, _) in items], dtype=np.int64)
        W = np.vstack([w for _, (_, w) in items]) if items else np.zeros((0, D))
        self._deliver(("pack", self.p, epoch), (classes, W))
        return [t for t, _ in items]

    def unbundle(self, epoch, tags):
        """Undo :meth:`bundle` after the pass (the columns come home in their order)."""
        _, (classes, W) = self._take(("pack", self.p, epoch))
        for j, t in enumerate(tags):
            self._deliver(t, (classes[j:j + 1], W[j:j + 1].copy()))
        self.in_hand = 0
        return True

    def score_pass(self, epoch, packed):
        """The partial sums of the objective only: over the bundles of :meth:`bundle`
        (``packed``) or over the parameter blocks of Algorithm 1."""
        ring = [(self.p + s) % self.P for s in range(self.P)]
        tags = [("pack", q, epoch) if packed else ("w", q) for q in ring]
        return self._score_pass(epoch, tags, set_b=False)

    # -- the partial sums ------------------------------------------------------------------
    def _score_pass(self, epoch, tags, set_b):
        """Every packet once through this worker (the ring order ``tags``, each then sent to
        worker p−1): the partial sums of (9) and of the objective over this worker's rows."""
        n = self.X.shape[0]
        lse = None
        top = np.full(n, -np.inf)
        arg = np.zeros(n, dtype=np.int64)
        true = np.zeros(n)
        sq = 0.0
        for j, tag in enumerate(tags):
            _, (classes, Wq) = self._take(tag)
            if j == 0:
                sq = float(np.sum(Wq * Wq))  # the packet that starts here: counted once
            if len(classes):
                part = lse_call(self.X, Wq)
                lse = part if lse is None else np.logaddexp(lse, part)
                S = np.asarray(self.X @ Wq.T)
                jm = np.argmax(S, axis=1)
                m = S[np.arange(n), jm]
                better = (m > top) | ((m == top) & (classes[jm] < arg))
                top[better], arg[better] = m[better], classes[jm][better]
                pos = np.searchsorted(classes, self.y) if _sorted(classes) else None
                mine = _member(classes, self.y, pos)
                true[mine[0]] = S[mine[0], mine[1]]
            self._send(self._neighbour(self.prev), tag, (classes, Wq))
        self._check_sends(wait=True)
        if set_b:
            self.b[:] = -lse
        loss = float(np.sum(lse - true))
        return dict(loss_sum=loss, errors=int(np.sum(arg != self.y)), n=n, sqnorm=sq,
                    bytes=int(self.bytes_))

    def get_b(self):
        return self.b

    def memory(self):
        """(most bytes held, bytes held now) by this worker's DS-MLR state."""
        return int(self.bytes_), int(self._held())


def _sorted(a):
    return a.shape[0] < 2 or bool(np.all(a[1:] > a[:-1]))


def _member(classes, y, pos):
    """(rows, positions) of the rows whose label is in ``classes``."""
    if pos is not None:
        pos = np.minimum(pos, len(classes) - 1)
        rows = np.flatnonzero(classes[pos] == y)
        return rows, pos[rows]
    where = {int(c): j for j, c in enumerate(classes)}
    rows = np.array([i for i, c in enumerate(y) if int(c) in where], dtype=np.int64)
    return rows, np.array([where[int(y[i])] for i in rows], dtype=np.int64)


def _close_owned(client, cluster):
    client.close()
    if cluster is not None:
        cluster.close()


def _connect(client, P):
    """(client, (client, cluster) to close, or None): the given client, a client to an
    address, or a new ``LocalCluster`` of P single-threaded worker processes."""
    from distributed import Client, LocalCluster

    if client is None:
        cluster = LocalCluster(n_workers=P, threads_per_worker=1, processes=True,
                               dashboard_address=None, worker_dashboard_address=None)
        client = Client(cluster)
        return client, (client, cluster)
    if isinstance(client, str):
        client = Client(client, timeout=30)
        return client, (client, None)
    return client, None


class _ActorRing:
    """Bounded waits on the P actors of a fit, watching the cluster for lost workers."""

    # -- waiting, bounded ------------------------------------------------------------------
    def _missing(self):
        try:
            alive = self.client.scheduler_info()["workers"]
        except Exception:  # the scheduler itself is gone
            return set(self.addr)
        return set(self.addr) - set(alive)

    def _abort_all(self, why):
        """Tell every actor to stop waiting (best effort: some workers may be gone)."""
        for a in self.actors or ():
            try:
                a.abort(why)
            except Exception:  # that actor's worker is gone
                pass

    def _fail(self, why, cause=None):
        """Stop the surviving actors (they may be waiting for a lost block) and raise."""
        self._abort_all(why)
        raise WorkerLostError(f"the DS-MLR fit on Dask stops: {why} (no partial model)") \
            from cause

    def _wait_futures(self, futs):
        """Wait for Dask futures, at most ``timeout`` s, watching for lost workers."""
        from distributed import wait

        t0 = time.monotonic()
        while True:
            try:
                wait(futs, timeout=0.25)
            except Exception:  # distributed's TimeoutError
                pass
            bad = [f for f in futs if f.status in ("error", "lost", "cancelled")]
            if bad:
                self._fail(f"a Dask task ended with status {bad[0].status!r}")
            if all(f.status == "finished" for f in futs):
                return
            self._check(t0)

    def _check(self, t0):
        missing = self._missing()
        if missing:
            self._fail(f"Dask workers {sorted(missing)} left the cluster; their data blocks "
                       "and the parameter blocks they held are lost")
        if time.monotonic() - t0 > self.timeout:
            self._fail(f"a step took more than timeout={self.timeout} s")

    def _run(self, method, args):
        """Call ``method`` on every actor (actor p with ``args[p]``) and wait for all."""
        t0 = time.monotonic()
        try:
            futs = [getattr(a, method)(*args[p]) for p, a in enumerate(self.actors)]
        except RuntimeError as exc:  # "Worker holding Actor was lost"
            self._fail(str(exc), exc)
        polled = t0
        while not all(f.done() for f in futs):
            time.sleep(0.005)
            if time.monotonic() - polled > 0.5:  # ask the scheduler twice a second
                self._check(t0)
                polled = time.monotonic()
        out = []
        for p, f in enumerate(futs):
            try:
                out.append(f.result())
            except Exception as exc:
                missing = self._missing()
                self._fail(f"worker {p} ({self.addr[p]}) failed: {type(exc).__name__}: {exc}"
                           + (f"; workers {sorted(missing)} left the cluster" if missing
                              else ""), exc)
        return out


class DaskBackend(_ActorRing):
    """Algorithms 1 and 2 on Dask, one :class:`RingWorker` actor per worker.

    ``client``: a ``distributed.Client``, a scheduler address, or None for a
    ``LocalCluster(n_workers=P, threads_per_worker=1, processes=True)`` made here and closed
    by :meth:`close` (or when this object is garbage collected); it must have at least P
    workers, and actor p lives on the p-th worker in address order. ``blocks``: the
    :class:`~.schedules.Blocks` (their data blocks are sent to the workers here, once, and
    dropped from ``blocks``). ``queues``: Algorithm 2's starting columns per worker, or None
    for Algorithm 1. ``timeout``: the seconds one step (an outer iteration, or a worker's wait
    for a block) may take before the fit stops.
    """

    name = "dask"

    def __init__(self, client, P, blocks, n_classes, timeout, queues=None):
        self.P, self.timeout, self.K = P, float(timeout), n_classes
        self.client, own = _connect(client, P)
        self._finalizer = weakref.finalize(self, _close_owned, *own) if own else None
        self.actors = self._futures = None
        workers = sorted(self.client.scheduler_info()["workers"])
        if len(workers) < P:
            self.close()
            raise ValueError(f"the Dask client has {len(workers)} workers; n_workers={P} "
                             f"needs at least {P}")
        self.addr = workers[:P]
        self.packed = queues is not None
        self.metrics, self.best_bytes = None, [0] * P
        try:
            self._start(blocks, queues)
        except BaseException:
            self.close()
            raise
        blocks.X = blocks.y = None  # the driver keeps only the block boundaries and b

    def _start(self, blocks, queues):
        c, P, addr = self.client, self.P, self.addr
        futs = []
        for p in range(P):  # each data block crosses to its worker once, here
            Xf, yf, bf = c.scatter([blocks.X[p], blocks.y[p], blocks.b[p]], workers=[addr[p]])
            futs.append(c.submit(RingWorker, p, P, Xf, yf, bf, self.K, self.timeout,
                                 actor=True, workers=[addr[p]], allow_other_workers=False,
                                 pure=False))
        self._futures = futs
        self._wait_futures(futs)
        self.actors = [f.result() for f in futs]
        ring = [(addr[p], futs[p].key) for p in range(P)]
        self._run("connect", [(ring[p - 1], ring[(p + 1) % P]) for p in range(P)])
        if queues is None:
            seeds = [[(("w", q), np.arange(blocks.cb[q], blocks.cb[q + 1]))] for q in range(P)]
        else:
            seeds = [[(("c", k), [k]) for k in queues[p]] for p in range(P)]
        self._run("seed_blocks", [(s,) for s in seeds])
        self.score(-1)  # the objective at the start (W = 0)

    # -- the schedules' operations -------------------------------------------------------
    def _record(self, parts):
        n = sum(r["n"] for r in parts)
        self.metrics = (sum(r["loss_sum"] for r in parts) / n,
                        sum(r["errors"] for r in parts) / n,
                        sum(r["sqnorm"] for r in parts))
        self.best_bytes = [max(a, r["bytes"]) for a, r in zip(self.best_bytes, parts)]

    def sync_epoch(self, state, orders, eta):
        mine = [[] for _ in range(self.P)]
        for inner in orders:
            for p, q, rows, cls in inner:
                mine[p].append((q, rows, cls))
        epoch = len(state.sqnorm)
        self._record(self._run("sync_epoch", [(epoch, mine[p], eta, state.alpha)
                                              for p in range(self.P)]))

    def async_epoch(self, state, rows, eta):
        """Algorithm 2's outer iteration; returns the (P, K) columns each worker updated."""
        epoch = len(state.sqnorm)
        logs = self._run("async_epoch", [(epoch, rows[p], eta, state.alpha)
                                         for p in range(self.P)])
        self.score(epoch)
        seen = np.zeros((self.P, self.K), dtype=bool)
        for p, log in enumerate(logs):
            seen[p, log] = True
        state.log = [(p, k) for p, log in enumerate(logs) for k in log]
        return seen

    def score(self, epoch):
        """The objective's partial sums on the workers for the current iterate."""
        if not self.packed:
            self._record(self._run("score_pass", [(epoch, False)] * self.P))
            return
        tags = self._run("bundle", [(epoch,)] * self.P)
        self._record(self._run("score_pass", [(epoch, True)] * self.P))
        self._run("unbundle", [(epoch, tags[p]) for p in range(self.P)])

    def keep_best(self):
        self._run("keep_best", [()] * self.P)

    def weights(self, state, best=False):
        """The (K, D) parameter matrix, assembled from the workers (once, at the end)."""
        parts = self._run("weights", [(best,)] * self.P)
        W = np.empty((self.K, parts[0][1].shape[1]))
        for classes, rows in parts:
            W[classes] = rows
        return W

    def fetch_b(self, blocks):
        """Copy the workers' ``b`` blocks into ``blocks.b``."""
        blocks.b = [np.asarray(b) for b in self._run("get_b", [()] * self.P)]

    def worker_bytes(self):
        """Per worker, the most bytes its DS-MLR state held (``dask.sizeof``) during the fit."""
        return [int(v) for v in self.best_bytes]

    def close(self):
        """Stop and drop the actors; close the client and cluster if this backend made them."""
        self._abort_all("the fit was closed")  # an actor still waiting stops now
        self.actors = self._futures = None
        if self._finalizer is not None:
            self._finalizer()
