"""The DS-MLR worker on Dask: :class:`RingWorker`, one actor per ``dask.distributed`` worker.

An actor is a stateful object that lives on its worker for the whole fit. Its data block,
labels and ``b`` block are sent to it once, when it is made, and never move again; its
:class:`_Mailbox` holds the parameter blocks (Algorithm 1) or columns (Algorithm 2) that its
ring neighbours hand it (:meth:`_Mailbox.put`, a direct worker-to-worker message), and it waits
only for the block it needs next. The driver's side is :mod:`.dask_backend`.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from .kernels import column_sgd
from .schedules import lse_call, sgd_call

__all__ = ["RingWorker"]


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
            _put_first(self.box, held)
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
                lse = _fold_packet(self.X, self.y, classes, Wq, lse, top, arg, true)
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


def _put_first(box, held):
    """Put the packets ``held`` (tag → packet, in order) before those in ``box``."""
    rest = list(box.items())
    box.clear()
    box.update(held)
    box.update(rest)


def _fold_packet(X, y, classes, Wq, lse, top, arg, true):
    """Fold one packet (``classes`` and their rows ``Wq`` of W) into the sums over the rows
    of ``X``: returns the log-sum-exp of the scores so far (``lse``, None before the first
    packet); updates in place ``top`` and ``arg`` (the best score and its class, ties to the
    smaller class) and ``true`` (the score of each row's label, when it is in ``classes``)."""
    n = X.shape[0]
    part = lse_call(X, Wq)
    lse = part if lse is None else np.logaddexp(lse, part)
    S = np.asarray(X @ Wq.T)
    jm = np.argmax(S, axis=1)
    m = S[np.arange(n), jm]
    better = (m > top) | ((m == top) & (classes[jm] < arg))
    top[better], arg[better] = m[better], classes[jm][better]
    pos = np.searchsorted(classes, y) if _sorted(classes) else None
    mine = _member(classes, y, pos)
    true[mine[0]] = S[mine[0], mine[1]]
    return lse


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
