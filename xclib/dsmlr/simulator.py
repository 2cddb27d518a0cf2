"""A cost model of one outer iteration of DS-MLR and of data-parallel L-BFGS on P machines.

A model, not a run: it turns per-operation costs measured on one machine and a network model
into simulated seconds and bytes, for the chapter's Figures 7–8 beyond the cores at hand.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from .schedules import partition

__all__ = ["simulate_schedules"]


def _simulate_sync(nnz, kq, sec_per_op, msg):
    """Algorithm 1: 2P inner epochs, each paced by its slowest worker, then a block message."""
    P = nnz.shape[0]
    t = 0.0
    for factor in (1.0, 0.5):  # the (13) steps, then the partial sums of (9) (a dot per op)
        for s in range(P):
            t += max(factor * sec_per_op * nnz[p] * kq[(p + s) % P] for p in range(P))
            t += msg(kq.max()) if P > 1 else 0.0
    nbytes = 2 * P * 8.0 * kq.max() * msg.D if P > 1 else 0.0
    return t, nbytes


def _simulate_async(nnz, K, sec_per_op, msg, max_chunks):
    """Algorithm 2: event simulation of the token ring (FIFO queues, chunks of columns).

    Each worker's outgoing link carries one message at a time: a chunk waits until the link
    is free, occupies it for ``bytes / bandwidth`` seconds and arrives ``latency`` later
    (store-and-forward). So a worker can never send faster than the bandwidth allows, and the
    time is at least ``bytes sent per worker / bandwidth``.
    """
    P = nnz.shape[0]
    n_chunks = min(K, max_chunks)
    size = np.diff(partition(K, n_chunks)).astype(float)
    free = np.zeros(P)
    link = np.zeros(P)  # when worker p's link to p + 1 is free again
    events = []  # (arrival time, seq, worker, chunk, hops)
    rng = np.random.default_rng(0)
    seq = 0
    for c in range(n_chunks):
        heapq.heappush(events, (0.0, seq, int(rng.integers(P)), c, 0))
        seq += 1
    t = 0.0
    while events:
        arrival, _, p, c, hops = heapq.heappop(events)
        free[p] = max(arrival, free[p]) + 1.5 * sec_per_op * nnz[p] * size[c]
        t = max(t, free[p])
        if hops + 1 < P:
            link[p] = max(free[p], link[p]) + msg.transfer(size[c])
            heapq.heappush(events, (link[p] + msg.latency, seq, (p + 1) % P, c, hops + 1))
            seq += 1
    nbytes = 8.0 * msg.D * K * (P - 1) / P if P > 1 else 0.0
    return max(t, float(link.max())), nbytes


class _Message:
    """Seconds to send ``rows`` rows of D float64: ``latency + 8·D·rows / bandwidth``."""

    def __init__(self, D, bandwidth, latency):
        self.D, self.bandwidth, self.latency = D, bandwidth, latency

    def transfer(self, rows):
        """Seconds the link is busy with ``rows`` rows (bandwidth only)."""
        return 8.0 * self.D * rows / self.bandwidth

    def __call__(self, rows):
        return self.latency + self.transfer(rows)


def simulate_schedules(block_nnz, n_classes, n_features, sec_per_op, lbfgs_sec_per_op,
                       bandwidth=1.25e9, latency=50e-6, max_chunks=256):
    """Simulated time and bytes of one outer iteration on P machines (a model, not a run).

    P = ``len(block_nnz)`` workers; worker p holds ``block_nnz[p]`` non-zeros. A unit of work
    "one non-zero × one class" costs ``sec_per_op`` seconds for DS-MLR (the (13) step plus the
    partial sum of (9), measured on one worker) and ``lbfgs_sec_per_op`` for one exact
    gradient (measured likewise). A message of m bytes between two workers costs
    ``latency + m / bandwidth`` (defaults: 10 Gbit/s = 1.25e9 bytes/s per link, 50 µs), and a
    worker's link to its ring neighbour carries one message at a time.

    * sync (Algorithm 1): 2P inner epochs; in each the slowest worker sets the pace and every
      worker then sends a parameter block (K/P rows of D float64) to its neighbour. The partial
      sums need a dot product per (non-zero, class) but no step, counted as half an op.
    * async (Algorithm 2): an event simulation of the token ring — columns (grouped in at most
      ``max_chunks`` chunks) queue at a worker, take ``1.5 · sec_per_op · nnz_p · |chunk|``
      there, then queue for the worker's outgoing link, which sends one chunk at a time
      (``8·D·|chunk| / bandwidth`` seconds) and delivers it ``latency`` later; computation and
      communication overlap, but no link carries more than ``bandwidth`` bytes per second, so
      the time is at least the bytes a worker sends divided by the bandwidth.
    * L-BFGS (data parallel): per iteration one gradient (slowest worker) and a ring all-reduce
      of the K × D gradient, ``2 (P−1)/P · 8KD`` bytes per worker, plus the broadcast of W.

    Returns
    -------
    dict
        ``{"sync"|"async"|"lbfgs": {"time": seconds, "bytes": bytes sent per worker}}`` per
        outer iteration (L-BFGS: per iteration).
    """
    nnz = np.asarray(block_nnz, dtype=float)
    P = nnz.shape[0]
    K, D = int(n_classes), int(n_features)
    kq = np.diff(partition(K, P)).astype(float)
    msg = _Message(D, bandwidth, latency)
    t_sync, bytes_sync = _simulate_sync(nnz, kq, sec_per_op, msg)
    t_async, bytes_async = _simulate_async(nnz, K, sec_per_op, msg, max_chunks)
    t_l = lbfgs_sec_per_op * nnz.max() * K
    bytes_l = 0.0
    if P > 1:
        bytes_l = 2 * (P - 1) / P * 8.0 * K * D + 8.0 * K * D / P
        t_l += bytes_l / bandwidth + 2 * math.ceil(math.log2(P)) * latency
    return {"sync": {"time": t_sync, "bytes": bytes_sync},
            "async": {"time": t_async, "bytes": bytes_async},
            "lbfgs": {"time": t_l, "bytes": bytes_l}}
