"""DS-MLR's synchronous schedule on a ``dask.distributed`` cluster (one worker per block).

Each worker receives its data block and its ``b`` block once (``client.scatter(...,
workers=[addr])``) and keeps them; every inner step is a task pinned to the worker that owns
the data block, taking a parameter block as input, so Dask moves only parameter blocks
(O(KD/P) each) and partial sums (O(N/P)). A task waits only for the parameter block it reads,
as in the ring of Algorithm 1: no global barrier between inner epochs. A worker that leaves in
the middle of a fit takes its data block with it: the fit stops with :class:`WorkerLostError`.
"""
from __future__ import annotations

import time
import weakref

import numpy as np

from .schedules import lse_call, sgd_call

__all__ = ["DaskBackend", "WorkerLostError"]


class WorkerLostError(RuntimeError):
    """A Dask worker holding a data block left during a fit; the fit stops (no partial model)."""


# Dask task functions: they never mutate their inputs (Dask may share them).
def _dask_sgd(Xp, yp, bp, Wq, rows, cls, off, eta, alpha, K):
    Wq = Wq.copy()
    sgd_call(Xp, yp, bp, rows, Wq, cls, off, eta, alpha, K, 0.0)
    return Wq


def _dask_b(*parts):
    return -np.logaddexp.reduce(np.vstack(parts), axis=0)


def _worker_bytes(dask_worker):
    from dask.sizeof import sizeof

    return sum(sizeof(v) for v in dask_worker.data.values())


def _close_owned(client, cluster):
    client.close()
    if cluster is not None:
        cluster.close()


def _connect(client, P):
    """(client, finalizer or None): the given client, one to an address, or a new cluster."""
    from distributed import Client, LocalCluster

    if client is None:
        cluster = LocalCluster(n_workers=P, threads_per_worker=1, processes=False,
                               dashboard_address=None)
        client = Client(cluster)
        return client, (client, cluster)
    if isinstance(client, str):
        client = Client(client)
        return client, (client, None)
    return client, None


class DaskBackend:
    """Algorithm 1 on Dask. ``client``: a ``distributed.Client``, a scheduler address, or None
    for a ``LocalCluster(n_workers=P, threads_per_worker=1, processes=False)`` made here and
    closed by :meth:`close` (or when this object is garbage collected). The client must have at
    least P workers. ``timeout``: seconds one outer iteration may take."""

    name = "dask"

    def __init__(self, client, P, blocks, W, timeout):
        self.P, self.timeout = P, timeout
        self.client, own = _connect(client, P)
        self._finalizer = weakref.finalize(self, _close_owned, *own) if own else None
        workers = sorted(self.client.scheduler_info()["workers"])
        if len(workers) < P:
            self.close()
            raise ValueError(f"the Dask client has {len(workers)} workers; n_workers={P} "
                             f"needs at least {P}")
        c, addr = self.client, workers[:P]
        self.addr = addr
        self.Xf = [c.scatter(blocks.X[p], workers=[addr[p]]) for p in range(P)]
        self.yf = [c.scatter(blocks.y[p], workers=[addr[p]]) for p in range(P)]
        self.bf = [c.scatter(blocks.b[p], workers=[addr[p]]) for p in range(P)]
        self.Wf = [c.scatter(W[blocks.cb[q]:blocks.cb[q + 1]].copy(), workers=[addr[q]])
                   for q in range(P)]
        self.epoch_done = self.W_epoch = 0
        self.peak = {}

    def _submit(self, fn, *args, worker):
        return self.client.submit(fn, *args, workers=[self.addr[worker]],
                                  allow_other_workers=False, pure=False)

    def sync_epoch(self, state, orders, eta):
        B, K, P = state.blocks, state.K, self.P
        Wf = self.Wf
        for inner in orders:
            new = list(Wf)
            for p, q, rows, cls in inner:  # parameter block q moves to worker p
                new[q] = self._submit(_dask_sgd, self.Xf[p], self.yf[p], self.bf[p], Wf[q],
                                      rows, cls, int(B.cb[q]), eta, state.alpha, K, worker=p)
            Wf = new
        parts = [[self._submit(lse_call, self.Xf[p], Wf[q], worker=p) for q in range(P)]
                 for p in range(P)]
        self.bf = [self._submit(_dask_b, *parts[p], worker=p) for p in range(P)]
        self.Wf = Wf
        self._wait(Wf + self.bf)
        self.epoch_done += 1
        # what each worker holds now (Dask's own accounting of its stored results); a worker
        # may leave between the wait above and this call
        held = self.client.run(_worker_bytes, workers=self.addr, on_error="return")
        gone = sorted(a for a, v in held.items() if isinstance(v, BaseException))
        if gone or len(held) < len(self.addr):
            raise WorkerLostError(
                f"Dask workers {gone or sorted(set(self.addr) - set(held))} left the cluster "
                "during the fit; the data blocks they held are lost, so the fit stops (no "
                "partial model)")
        for a, nbytes in held.items():
            self.peak[a] = max(self.peak.get(a, 0), int(nbytes))

    def _missing(self):
        return set(self.addr) - set(self.client.scheduler_info()["workers"])

    def _wait(self, futures):
        from distributed import wait

        t0 = time.monotonic()
        while True:
            try:
                wait(futures, timeout=0.25)
            except Exception:  # distributed's TimeoutError
                pass
            bad = [f for f in futures if f.status in ("error", "lost", "cancelled")]
            if bad:
                missing = self._missing()
                raise WorkerLostError(
                    f"a Dask task ended with status {bad[0].status!r}"
                    + (f"; workers {sorted(missing)} left the cluster" if missing else "")
                    + ": their data blocks are lost, so the fit stops (no partial model)")
            if all(f.status == "finished" for f in futures):
                return
            missing = self._missing()
            if missing:
                raise WorkerLostError(
                    f"Dask workers {sorted(missing)} left the cluster during the fit; the data "
                    "blocks they held are lost, so the fit stops (no partial model)")
            if time.monotonic() - t0 > self.timeout:
                raise WorkerLostError(
                    f"a DS-MLR outer iteration took more than timeout={self.timeout} s on Dask")

    def token_ring(self, queues, K, process):
        raise NotImplementedError(
            "the asynchronous (NOMAD) schedule is not implemented on Dask: use "
            "schedule='sync' with backend='dask', or schedule='async' with 'threads'")

    def weights(self, state):
        """Gather the parameter blocks into ``state.W`` once per outer iteration."""
        if self.Wf is not None and self.W_epoch != self.epoch_done:
            try:
                state.W = np.vstack(self.client.gather(self.Wf))
            except Exception as exc:
                missing = self._missing()
                if missing:
                    raise WorkerLostError(
                        f"Dask workers {sorted(missing)} left the cluster before the weights "
                        "were gathered; the fit stops (no partial model)") from exc
                raise
            self.W_epoch = self.epoch_done
        return state.W

    def fetch_b(self, blocks):
        """Copy the workers' ``b`` blocks into ``blocks.b``."""
        if self.bf is not None:
            blocks.b = [np.asarray(b) for b in self.client.gather(self.bf)]

    def worker_bytes(self):
        """Per worker (in address order) the most bytes Dask held after an outer iteration."""
        return [self.peak.get(a, 0) for a in self.addr]

    def close(self):
        """Drop the futures; close the client and cluster if this backend made them."""
        self.Xf = self.yf = self.bf = self.Wf = None
        if self._finalizer is not None:
            self._finalizer()
