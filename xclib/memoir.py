"""MEMOIR: multi-class SVMs with an inexact margin (Belyy, chapter 5).

The Crammer–Singer multi-class SVM trained by stochastic sub-gradient steps in which the
margin's ``argmax_{r != y} x·w_r`` (eq. 1) comes from a maximum-inner-product-search oracle
(:mod:`xclib.mips`) instead of a scan of all K classes.

Read top-down like the chapter:

1. :func:`hinge_step` — the inner loop of Algorithms 1 and 2: for each pair of the batch, the
   hinge update ``w_r -= η x, w_y += η x`` when ``1 + x·(w_r − w_y) > 0``, on a lazily scaled
   matrix ``W = acc · V`` (the paper's "implementation details"), keeping the squared row norms.
2. :func:`truncate_rows` — eq. (13), the soft-threshold of the touched rows in Algorithm 2.
3. :func:`multiclass_hinge` — the loss of eq. (10)/(11) recorded in the history.
4. :class:`Memoir` — the estimator: ``penalty="l2"`` (Algorithm 1: shrink, step, project onto
   ``‖W‖ ≤ 1/√λ``) or ``"l1"`` (Algorithm 2: step, truncate), ``oracle="exact" | "simple_lsh" |
   "hnsw"``, ``η_t = η₀ / (1 + η_step · t)``, batch ``100·√K`` by default (Table 4).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numba import njit

from .base import IterativeSoftmaxEstimator
from .metrics import score_blocks
from .mips import exact_argmax_other, make_oracle

__all__ = ["hinge_step", "truncate_rows", "multiclass_hinge", "Memoir", "weight_memory",
           "make_prototype_data"]


# ------------------------------------------------------------------ kernels -----------------
@njit(cache=True, nogil=True)
def hinge_step(indptr, indices, data, y, r, s_r, V, row_sq, acc, eta):
    """One batch of the margin step of Algorithms 1 and 2 on ``W = acc · V``.

    For pair ``j`` with oracle class ``r_j`` (score ``s_r[j] = x_j · v_{r_j}``, computed on the
    batch's starting weights like ``x_j · v_{y_j}`` here), if ``1 + acc·(s_r − s_y) > 0``:
    ``w_r -= η x_j`` and ``w_y += η x_j``, i.e. ``v ± (η/acc) x_j`` on the stored matrix. The
    squared norms ``row_sq`` of ``V`` follow exactly in O(nnz(x)):
    ``‖v + a x‖² = ‖v‖² + 2a x·v + a²‖x‖²``. Cost O(|b| · nnz(x)); nothing O(K) or O(D).

    Returns
    -------
    n_upd : number of pairs with a positive hinge
    upd_rows, upd_coef, upd_pos : the additive updates made, ``V[upd_rows[k]] += upd_coef[k] *
        x_{upd_pos[k]}`` (length ``2·n_upd``), so an oracle can follow them cheaply.
    """
    n = indptr.shape[0] - 1
    s_y = np.empty(n)
    for j in range(n):
        s = 0.0
        for p in range(indptr[j], indptr[j + 1]):
            s += data[p] * V[y[j], indices[p]]
        s_y[j] = s
    a = eta / acc
    upd_rows = np.empty(2 * n, np.int64)
    upd_coef = np.empty(2 * n)
    upd_pos = np.empty(2 * n, np.int64)
    m = 0
    for j in range(n):
        if 1.0 + acc * (s_r[j] - s_y[j]) > 0.0:
            xx = 0.0
            for p in range(indptr[j], indptr[j + 1]):
                xx += data[p] * data[p]
            for row, c in ((r[j], -a), (y[j], a)):
                xv = 0.0
                for p in range(indptr[j], indptr[j + 1]):
                    xv += data[p] * V[row, indices[p]]
                for p in range(indptr[j], indptr[j + 1]):
                    V[row, indices[p]] += c * data[p]
                row_sq[row] = max(0.0, row_sq[row] + 2.0 * c * xv + c * c * xx)
                upd_rows[m] = row
                upd_coef[m] = c
                upd_pos[m] = j
                m += 1
    return m // 2, upd_rows[:m], upd_coef[:m], upd_pos[:m]


@njit(cache=True, nogil=True)
def truncate_rows(V, rows, theta, row_sq):
    """Eq. (13): ``Truncate(w_i, ξ)`` soft-thresholds each entry of the rows ``rows`` at ``theta``
    (``= (C/ξ)·λ·η_t`` in W units; pass ``theta/acc`` for the stored ``V``) and refreshes their
    squared norms. O(D) per touched row on this dense store."""
    D = V.shape[1]
    for k in range(rows.shape[0]):
        i = rows[k]
        s = 0.0
        for j in range(D):
            w = V[i, j]
            if w > theta:
                w -= theta
            elif w < -theta:
                w += theta
            else:
                w = 0.0
            V[i, j] = w
            s += w * w
        row_sq[i] = s


def multiclass_hinge(coef, X, y, intercept=None):
    """Mean Crammer–Singer hinge ``(1 + max_{r≠y} x·w_r − x·w_y)_+`` (the loss of eq. 10 with
    ρ = 1) and the 0/1 error of the arg-max class; scores in bounded blocks."""
    y = np.asarray(y, dtype=np.int64)
    loss = 0.0
    err = 0
    for start, stop, s in score_blocks(coef, X, intercept):
        rows = np.arange(stop - start)
        yy = y[start:stop]
        sy = s[rows, yy].copy()
        err += int(np.sum(np.argmax(s, axis=1) != yy))
        s[rows, yy] = -np.inf
        loss += float(np.sum(np.maximum(0.0, 1.0 + s.max(axis=1) - sy)))
    n = max(1, X.shape[0])
    return loss / n, err / n


def weight_memory(coef):
    """``(nnz, bytes)`` of ``W`` stored as the paper does: K CSR sparse rows (8-byte value and
    4-byte index per non-zero, one 8-byte pointer per row)."""
    coef = np.asarray(coef)
    nnz = int(np.count_nonzero(coef))
    return nnz, 12 * nnz + 8 * (coef.shape[0] + 1)


# ------------------------------------------------------------------ estimator ---------------
class _State:
    pass


class Memoir(IterativeSoftmaxEstimator):
    """MEMOIR-ℓ2 (Algorithm 1) and MEMOIR-ℓ1 (Algorithm 2) with a pluggable MIPS oracle.

    Parameters
    ----------
    penalty : {"l2", "l1"}
    oracle : {"exact", "simple_lsh", "hnsw"} or an oracle instance (see :mod:`xclib.mips`)
        ``"exact"`` is the exact-margin M-SVM baseline.
    lam : float or None
        λ; None: 1 for ``l2`` and 1e-6 for ``l1`` (Table 4).
    eta0, eta_step : float
        ``η_t = eta0 / (1 + eta_step · t)``, t = 1, 2, … the iteration (Table 4: 0.1, 0.02).
    batch_size : int or None
        |b|; None: ``ceil(100 · √K)`` (Table 4). Pairs are drawn uniformly with replacement.
    n_iter : int
        T, the number of batches.
    eval_every : int or None
        Iterations between history records (each costs an exact N × K evaluation); None: one
        record at the end.
    n_bits, n_candidates : SimpleLSH hash length (paper: 64) and re-scored candidates.
    hnsw_ef, hnsw_M : HNSW search breadth and graph degree.
    track_margin : int
        If > 0, for the first ``track_margin`` pairs of each batch also compute the exact
        ``max_{r≠y}`` and store the margin error ε (in W units) in ``margin_errors_``.
    history_size : int
        Rows (a fixed seeded subsample of train and eval sets) on which ``history_`` is computed.
    random_state, verbose : as everywhere.

    Fitted attributes (beyond ``coef_``, ``classes_``, ``history_``)
    -----------------------------------------------------------------
    n_iter_ : batches run; n_updates_ : pairs with a positive hinge;
    n_inner_products_ : inner products the oracle computed (training queries only);
    oracle_ : the oracle; weight_nnz_, weight_bytes_ : :func:`weight_memory` of ``coef_``;
    margin_errors_ : (n,) array when ``track_margin``; train_time_ : seconds in the iterations.
    """

    _has_proba = False

    def __init__(self, penalty="l2", oracle="exact", lam=None, eta0=0.1, eta_step=0.02,
                 batch_size=None, n_iter=25, eval_every=None, n_bits=64, n_candidates=None,
                 hnsw_ef=100, hnsw_M=16, track_margin=0, history_size=2000, random_state=None,
                 verbose=False):
        self.penalty = penalty
        self.oracle = oracle
        self.lam = lam
        self.eta0 = eta0
        self.eta_step = eta_step
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.eval_every = eval_every
        self.n_bits = n_bits
        self.n_candidates = n_candidates
        self.hnsw_ef = hnsw_ef
        self.hnsw_M = hnsw_M
        self.track_margin = track_margin
        self.history_size = history_size
        self.random_state = random_state
        self.verbose = verbose

    # the base class loops over "epochs": here one epoch = ``eval_every`` iterations
    @property
    def n_epochs(self):
        n_iter = int(self.n_iter)
        if n_iter < 0:
            raise ValueError(f"n_iter must be >= 0, got {self.n_iter}")
        every = n_iter if self.eval_every is None else int(self.eval_every)
        if self.eval_every is not None and every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        return 0 if n_iter == 0 else -(-n_iter // max(every, 1))

    def _lam(self):
        lam = (1.0 if self.penalty == "l2" else 1e-6) if self.lam is None else float(self.lam)
        if not lam >= 0:
            raise ValueError(f"lam must be >= 0, got {self.lam}")
        return lam

    def _history_metrics(self, coef, intercept, X, y):
        # the exact N × K evaluation costs as much as an exact-margin epoch: at most
        # ``history_size`` rows (a fixed, seeded subsample) enter the history
        n_max = int(self.history_size)
        if X.shape[0] > n_max:
            keep = np.sort(np.random.default_rng(0).choice(X.shape[0], n_max, replace=False))
            X, y = X[keep], np.asarray(y)[keep]
        return multiclass_hinge(coef, X, y, intercept)

    def _init_state(self, X, y, rng):
        if self.penalty not in ("l2", "l1"):
            raise ValueError(f"penalty must be 'l2' or 'l1', got {self.penalty!r}")
        if not (float(self.eta0) > 0 and float(self.eta_step) >= 0):
            raise ValueError("eta0 must be > 0 and eta_step >= 0")
        K = self.classes_.shape[0]
        D = X.shape[1]
        st = _State()
        st.lam = self._lam()
        st.b = int(math.ceil(100 * math.sqrt(K))) if self.batch_size is None else int(self.batch_size)
        if st.b < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        st.V = np.zeros((D, K)).T          # K × D view of a C-ordered D × K array
        st.row_sq = np.zeros(K)
        st.acc = 1.0
        st.t = 0
        st.n_updates = 0
        st.margin_errors = []
        st.time = 0.0
        name = self.oracle
        if isinstance(name, str):
            opts = {}
            if name == "simple_lsh":
                opts = dict(n_bits=self.n_bits, n_candidates=self.n_candidates,
                            random_state=int(rng.integers(2**31)))
            elif name == "hnsw":
                opts = dict(ef=self.hnsw_ef, M=self.hnsw_M, random_state=int(rng.integers(2**31)))
            st.oracle = make_oracle(name, **opts)
        else:                          # an oracle instance: a fresh copy per fit
            import copy

            st.oracle = copy.deepcopy(name)
        st.oracle.build(st.V)
        st.ip0 = st.oracle.n_inner_products
        return st

    def _run_epoch(self, st, X, y, epoch, rng):
        import time

        n = X.shape[0]
        every = int(self.n_iter) if self.eval_every is None else int(self.eval_every)
        stop = min(int(self.n_iter), st.t + every)
        t0 = time.perf_counter()
        while st.t < stop:
            st.t += 1
            eta = float(self.eta0) / (1.0 + float(self.eta_step) * st.t)
            pos = rng.integers(0, n, st.b)
            Xb = X[pos]
            yb = y[pos]
            if self.penalty == "l2":                                   # W := (1 − λη) W
                shrink = 1.0 - st.lam * eta
                if shrink <= 0.0:
                    st.V[:] = 0.0
                    st.row_sq[:] = 0.0
                    st.acc = 1.0
                else:
                    st.acc *= shrink
            r, s_r = st.oracle.query(Xb, yb)                          # inexact margin
            if self.track_margin:
                m = min(int(self.track_margin), Xb.shape[0])
                Xm = Xb[:m]
                _, s_best = exact_argmax_other(Xm.indptr, Xm.indices, Xm.data, yb[:m], st.V)
                st.margin_errors.append(st.acc * (s_best - s_r[:m]))
            n_upd, ur, uc, up = hinge_step(Xb.indptr, Xb.indices, Xb.data, yb, r, s_r,
                                           st.V, st.row_sq, st.acc, eta)
            st.n_updates += int(n_upd)
            touched = np.unique(ur)
            if self.penalty == "l2":                                   # projection, O(K)
                norm = st.acc * math.sqrt(float(st.row_sq.sum()))
                if st.lam > 0 and norm > 0:
                    st.acc *= min(1.0, 1.0 / (math.sqrt(st.lam) * norm))
                st.oracle.update(st.V, touched, st.row_sq, (ur, uc, up))
            else:                                                      # Truncate, eq. (13)
                R = np.unique(np.concatenate([yb, r]))
                theta = (st.V.shape[0] / max(1, R.shape[0])) * st.lam * eta
                truncate_rows(st.V, R, theta / st.acc, st.row_sq)
                st.oracle.update(st.V, R, st.row_sq, None)
            if st.acc < 1e-150:                                        # renormalise, rare
                st.V *= st.acc
                st.row_sq *= st.acc**2
                st.acc = 1.0
                st.oracle.build(st.V)
        st.time += time.perf_counter() - t0

    def _coef(self, st):
        return np.ascontiguousarray(st.acc * st.V), None

    def fit(self, X, y, eval_set=None):
        """Run T = ``n_iter`` batches; see the class docstring for the fitted attributes."""
        super().fit(X, y, eval_set=eval_set)
        st = self._state
        self.n_iter_ = st.t
        self.n_updates_ = st.n_updates
        self.oracle_ = st.oracle
        self.n_inner_products_ = st.oracle.n_inner_products - st.ip0
        self.train_time_ = st.time
        self.batch_size_ = st.b
        self.weight_nnz_, self.weight_bytes_ = weight_memory(self.coef_)
        self.margin_errors_ = (np.concatenate(st.margin_errors) if st.margin_errors
                               else np.zeros(0))
        del self._state
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        return tags


# ------------------------------------------------------------------ synthetic data ----------
def make_prototype_data(n_samples, n_features, n_classes, nnz_per_row=20, n_noise=5,
                        noise=0.5, zipf_exponent=1.0, random_state=0):
    """Sparse many-class data whose rows lie near their class's sparse prototype.

    Class ``c`` (drawn with Zipf probabilities ``∝ (c+1)^(−zipf_exponent)``) has a prototype on
    ``nnz_per_row`` random features with N(0, 1) values; a row keeps that support with values
    ``prototype + noise · N(0, 1)``, adds ``n_noise`` random features of N(0, noise²) and is
    L2-normalised. The queries MEMOIR makes on it are "class-like", as in text data; K can be
    taken to 10^5 where our real sets stop at a few hundred classes.

    Returns ``(X csr (n, D) float64, y (n,) int64)``.
    """
    rng = np.random.default_rng(random_state)
    p = 1.0 / np.arange(1, n_classes + 1) ** zipf_exponent
    y = rng.choice(n_classes, size=n_samples, p=p / p.sum()).astype(np.int64)
    proto_idx = np.sort(np.argsort(rng.random((n_classes, n_features)), axis=1)[:, :nnz_per_row]
                        if n_features * n_classes <= 5e7 else
                        np.stack([rng.choice(n_features, nnz_per_row, replace=False)
                                  for _ in range(n_classes)]), axis=1)
    proto_val = rng.standard_normal((n_classes, nnz_per_row))
    cols = np.concatenate([proto_idx[y], rng.integers(0, n_features, (n_samples, n_noise))], axis=1)
    vals = np.concatenate([proto_val[y] + noise * rng.standard_normal((n_samples, nnz_per_row)),
                           noise * rng.standard_normal((n_samples, n_noise))], axis=1)
    rows = np.repeat(np.arange(n_samples), nnz_per_row + n_noise)
    X = sp.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(n_samples, n_features))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ X
    return sp.csr_matrix(X), y
