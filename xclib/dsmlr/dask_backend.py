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

The data blocks are scattered with ``hash=False``, under keys of this fit's own: with keys
hashed from the content, a fit right after another on the same data would reuse keys that
the scheduler may still be releasing, and its actors would be cancelled ("computation on
lost data").

This module is the driver's side; the actor is :class:`~.ring_worker.RingWorker`.
"""
from __future__ import annotations

import time
import weakref

import numpy as np

from .ring_worker import RingWorker

__all__ = ["DaskBackend", "RingWorker", "WorkerLostError", "worker_addresses"]


class WorkerLostError(RuntimeError):
    """A Dask worker of the fit died or stopped answering; the fit stops (no partial model)."""


def _close_owned(client, cluster):
    client.close()
    if cluster is not None:
        cluster.close()


def worker_addresses(client):
    """The addresses of the workers the scheduler knows now, asked of the scheduler itself.

    ``client.scheduler_info()`` returns the client's cached identity, which a periodic
    callback (every 2 s) refreshes *without* the per-worker entries: read at the wrong moment
    it shows no workers at all. This asks for the full identity and uses the answer directly.
    """
    return set(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


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
            alive = worker_addresses(self.client)
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
        workers = sorted(worker_addresses(self.client))
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
            Xf, yf, bf = c.scatter([blocks.X[p], blocks.y[p], blocks.b[p]], workers=[addr[p]],
                                   hash=False)  # keys of this fit's own (module docstring)
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
