"""Where DS-MLR's work runs in one process: ``serial`` (workers in turn) or ``threads``.

Both share the parameter matrix ``W`` and the blocks in memory; the numba kernels release the
GIL, so with ``threads`` the P workers compute in parallel. The Dask backend (workers that own
their data blocks and exchange parameter blocks) is :mod:`.dask_backend`.

A backend offers what the schedules (:mod:`.schedules`) need:

``sync_epoch(state, orders, eta)``   one outer iteration of Algorithm 1
``async_epoch(state, rows, eta)``    one outer iteration of Algorithm 2; returns the (P, K)
                                     columns each worker updated
``weights(state)``                   the current (K, D) ``W``
``worker_bytes()``                   per worker bytes held (Dask only; None here)
``close()``                          release threads / clusters (idempotent)
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor

from .schedules import local_async_epoch, local_sync_epoch

__all__ = ["SerialBackend", "ThreadsBackend"]


class SerialBackend:
    """The P workers one after another in the caller's thread: the same arithmetic as the
    parallel backends, and a fixed round-robin interleaving of the asynchronous ring."""

    name = "serial"

    def __init__(self, P):
        self.P = P

    @staticmethod
    def map(fn, items):
        return [fn(*args) for args in items]

    def sync_epoch(self, state, orders, eta):
        local_sync_epoch(state, orders, eta, self.map)

    def async_epoch(self, state, rows, eta):
        return local_async_epoch(state, rows, eta, self.token_ring)

    def token_ring(self, queues, K, process):
        P = self.P
        qs = [list(q) for q in queues]
        held = [[] for _ in range(P)]  # columns that came round again before the b update
        done = [0] * P
        log = []
        while min(done) < K:
            for p in range(P):  # round robin: each worker processes at most one column a turn
                while done[p] < K and qs[p]:
                    k = qs[p].pop(0)
                    if not process(p, k):
                        held[p].append(k)
                        continue
                    log.append((p, k))
                    done[p] += 1
                    qs[(p + 1) % P].append(k)
                    break
        return [held[p] + qs[p] for p in range(P)], log

    def weights(self, state):
        return state.W

    def worker_bytes(self):
        return None

    def close(self):
        pass


class ThreadsBackend(SerialBackend):
    """One thread per worker: a thread pool for Algorithm 1's inner epochs, and P threads
    passing columns through ``queue.Queue`` s for Algorithm 2 (a nondeterministic interleaving).

    ``timeout`` is the seconds a ring worker waits for its next column before the fit stops.
    """

    name = "threads"

    def __init__(self, P, timeout):
        super().__init__(P)
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=P)

    def map(self, fn, items):
        return list(self._pool.map(lambda args: fn(*args), items))

    def token_ring(self, queues, K, process):
        P = self.P
        qs = [queue.Queue() for _ in range(P)]
        for p in range(P):
            for k in queues[p]:
                qs[p].put(k)
        held = [[] for _ in range(P)]
        lock = threading.Lock()
        log, errors = [], []

        def worker(p):
            try:
                count = 0
                while count < K:
                    k = qs[p].get(timeout=self.timeout)
                    if not process(p, k):
                        held[p].append(k)
                        continue
                    with lock:
                        log.append((p, k))
                    count += 1
                    qs[(p + 1) % P].put(k)
            except queue.Empty as exc:
                errors.append(TimeoutError(
                    f"asynchronous worker {p} waited more than timeout={self.timeout} s for a "
                    f"column ({count} of {K} done)"))
                errors[-1].__cause__ = exc
            except BaseException as exc:  # surfaced in the caller's thread below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(p,)) for p in range(P)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(f"an asynchronous worker failed: {errors[0]}") from errors[0]
        rest = []
        for p in range(P):
            left = []
            while not qs[p].empty():
                left.append(qs[p].get())
            rest.append(held[p] + left)
        return rest, log

    def close(self):
        self._pool.shutdown(wait=True)
