"""How DS-MLR visits its (data block, parameter block) pairs: Algorithms 1 and 2.

A schedule decides *what* is computed in one outer iteration and in which order (drawn from
the fit's ``numpy.random.Generator`` in a fixed order, so every backend computes the same
numbers); a backend (:mod:`.backends`, :mod:`.dask_backend`) decides *where*.

* :class:`SyncSchedule` (Algorithm 1): P inner epochs of P disjoint block pairs, each a call of
  :func:`~.kernels.block_sgd`, then P inner epochs of partial sums
  (:func:`~.kernels.block_lse`) and the exact ``b`` of eq. (9) per data block.
* :class:`AsyncSchedule` (Algorithm 2, NOMAD): columns travel a token ring of worker queues; a
  worker runs :func:`~.kernels.column_sgd` on each column it pops, and sets its ``b`` once it
  has seen all K columns.
"""
from __future__ import annotations

import math

import numpy as np

from ..base import as_csr
from .kernels import block_lse, block_sgd, column_sgd

__all__ = ["partition", "sync_schedule", "Blocks", "SyncSchedule", "AsyncSchedule",
           "sgd_call", "lse_call"]


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


class Blocks:
    """Data blocks (CSR pieces, labels, ``b``) and class-block boundaries for P workers.

    Rows are dealt to workers at random once (data files are often sorted by class; a block
    holding only some classes makes the block-wise steps drift), then stay put. ``b`` starts at
    eq. (9) for ``W = 0``: ``b_i = −log K`` (Algorithm 1's "b = 1/K" read as ``a_i = 1/K``).

    Attributes
    ----------
    P : int ; rb, cb : row and class block boundaries (length P+1) ; order : (N,) the row
    permutation (block p holds rows ``order[rb[p]:rb[p+1]]``) ; X, y, b : lists of P blocks.
    """

    def __init__(self, X, y, n_classes, P, rng):
        self.P = P
        n = X.shape[0]
        self.rb = partition(n, P)
        self.cb = partition(n_classes, P)
        self.order = rng.permutation(n) if P > 1 else np.arange(n)
        pieces = [self.order[self.rb[p]:self.rb[p + 1]] for p in range(P)]
        self.X = [as_csr(X[r]) for r in pieces]
        self.y = [np.ascontiguousarray(y[r]) for r in pieces]
        self.b = [np.full(r.shape[0], -math.log(n_classes)) for r in pieces]

    def gather_b(self):
        """The (N,) ``b`` in the original row order."""
        out = np.empty(self.order.shape[0])
        out[self.order] = np.concatenate(self.b)
        return out


def sgd_call(Xp, yp, bp, rows, Wq, cls, off, eta, alpha, K, b_step):
    """:func:`block_sgd` on a CSR block (in place on ``Wq`` and, if ``b_step``, ``bp``)."""
    block_sgd(Xp.indptr, Xp.indices, Xp.data, yp, bp, rows, Wq, cls, off, eta, alpha, K,
              b_step)


def lse_call(Xp, Wq):
    """:func:`block_lse` on a CSR block: the block's partial log-partition sums, shape (n_p,)."""
    out = np.empty(Xp.shape[0])
    block_lse(Xp.indptr, Xp.indices, Xp.data, Wq, out)
    return out


class SyncSchedule:
    """Algorithm 1: ``P`` inner epochs of disjoint block pairs, then the exact ``b`` of (9).

    Re-shuffling (Section 6): every inner epoch each worker visits its rows, and for each row
    the classes of its parameter block, in fresh random orders.
    """

    name = "sync"

    def draw(self, state, rng):
        """Orders of every (inner epoch, worker): ``[[(p, q, rows, classes), ...], ...]``."""
        B = state.blocks
        orders = []
        for pairs in sync_schedule(state.P):
            inner = []
            for p, q in pairs:
                rows = rng.permutation(B.rb[p + 1] - B.rb[p]).astype(np.int64)
                cls = rng.permutation(B.cb[q + 1] - B.cb[q]).astype(np.int64)
                inner.append((p, q, rows, cls))
            orders.append(inner)
        return orders

    def run_epoch(self, state, eta, rng):
        state.backend.sync_epoch(state, self.draw(state, rng), eta)


def local_sync_epoch(state, orders, eta, map_fn):
    """One outer iteration of Algorithm 1 in shared memory; ``map_fn(fn, items)`` runs a batch
    of independent calls (in turn, or on a thread pool)."""
    B, W, K = state.blocks, state.W, state.K
    b_step = eta if state.b_update == "stochastic" else 0.0

    def sgd(p, q, rows, cls):
        sgd_call(B.X[p], B.y[p], B.b[p], rows, W[B.cb[q]:B.cb[q + 1]], cls, int(B.cb[q]),
                 eta, state.alpha, K, b_step)

    for inner in orders:  # P inner epochs: P disjoint (data, parameter) block pairs each
        map_fn(sgd, inner)
    if state.b_update == "stochastic":
        return
    pairs = [pq for inner in sync_schedule(state.P) for pq in inner]
    parts = map_fn(lambda p, q: lse_call(B.X[p], W[B.cb[q]:B.cb[q + 1]]), pairs)
    for p in range(state.P):  # the exact b of eq. (9) from the P partial sums of block p
        mine = [parts[j] for j, (pp, _) in enumerate(pairs) if pp == p]
        B.b[p][:] = -np.logaddexp.reduce(np.vstack(mine), axis=0)


class AsyncSchedule:
    """Algorithm 2 (NOMAD): columns ``(k, w_k)`` travel a token ring of worker queues.

    A column that comes back to a worker that already used it in this outer iteration waits
    there until that worker's ``b`` update (so no worker counts a column twice in its partial
    sums). The backend runs the ring (``async_epoch``); the schedule draws the row orders.
    """

    name = "async"

    @staticmethod
    def initial_queues(K, P, rng):
        """Algorithm 2, lines 4–7: every column starts in a random worker's queue."""
        queues = [[] for _ in range(P)]
        for k in range(K):
            queues[int(rng.integers(P))].append(k)
        return queues

    def run_epoch(self, state, eta, rng):
        B = state.blocks
        rows = [rng.permutation(B.rb[p + 1] - B.rb[p]).astype(np.int64) for p in range(state.P)]
        state.visits.append(state.backend.async_epoch(state, rows, eta))


def local_async_epoch(state, rows, eta, token_ring):
    """One outer iteration of Algorithm 2 in shared memory, the ring run by ``token_ring``
    (a backend's); returns the (P, K) columns each worker updated."""
    P, K, B, W = state.P, state.K, state.blocks, state.W
    seen = np.zeros((P, K), dtype=bool)
    lse_acc = [np.full(B.rb[p + 1] - B.rb[p], -np.inf) for p in range(P)]

    def process(p, k):
        """Column k at worker p; False if p already used it in this outer iteration."""
        if seen[p, k]:
            return False
        Xp = B.X[p]
        column_sgd(Xp.indptr, Xp.indices, Xp.data, B.y[p], B.b[p], rows[p], W[k], k, eta,
                   state.alpha, K, lse_acc[p])
        seen[p, k] = True
        return True

    state.queues, state.log = token_ring(state.queues, K, process)
    for p in range(P):  # Algorithm 2, line 18: exact b from the accumulated partial sums
        B.b[p][:] = -lse_acc[p]
    return seen
