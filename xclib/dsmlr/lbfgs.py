"""The paper's data-parallel baseline: L-BFGS on eq. (2) with the gradient summed over blocks."""
from __future__ import annotations

import time
import warnings
from enum import IntEnum

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from ..base import ALPHA, MAX_ITER, TOL, WARM_START, LinearSoftmaxClassifier, StrOptions
from ..exact import softmax_objective
from ..streaming import check_warm, warm_weights
from .dask_backend import _close_owned, _connect, worker_addresses
from .estimators import CLIENT, N_WORKERS, pow2_scale
from .schedules import partition

__all__ = ["DataParallelLBFGS", "LBFGSStatus"]


class LBFGSStatus(IntEnum):
    """``scipy.optimize.minimize(method="L-BFGS-B")``'s ``status`` codes."""

    CONVERGED = 0
    MAX_ITER = 1  # iterations or function evaluations exhausted
    ABNORMAL = 2  # e.g. the line search failed (often at machine precision)


def _partial(block, W):
    """(sum of the log-losses, its gradient) on one block of rows."""
    v, g, _ = softmax_objective(W, block[0], block[1], 0.0)
    return v, g


class _Gradients:
    """The mean objective of eq. (2) and its gradient, summed over P row blocks (in turn, or
    as pinned tasks on Dask workers that hold their block)."""

    def __init__(self, X, y, K, P, alpha, client):
        n = X.shape[0]
        rb = partition(n, P)
        self.blocks = [(X[rb[p]:rb[p + 1]], y[rb[p]:rb[p + 1]]) for p in range(P)]
        self.n, self.K, self.alpha, self.client = n, K, alpha, client
        if client is not None:
            self.addr = sorted(worker_addresses(client))
            self.bf = [client.scatter(blk, workers=[self.addr[p % len(self.addr)]],
                                      hash=False)  # keys of this fit (see DaskBackend)
                       for p, blk in enumerate(self.blocks)]

    def __call__(self, theta):
        W = theta.reshape(self.K, -1)
        c = self.client
        if c is not None:
            Wf = c.scatter(W, broadcast=True, hash=False)
            res = c.gather([c.submit(_partial, bf, Wf, pure=False,
                                     workers=[self.addr[p % len(self.addr)]])
                            for p, bf in enumerate(self.bf)])
        else:
            res = [_partial(blk, W) for blk in self.blocks]
        v = sum(r[0] for r in res) / self.n + 0.5 * self.alpha * float(np.sum(W * W))
        g = sum(r[1] for r in res) / self.n + self.alpha * W
        return v, g.ravel()


class DataParallelLBFGS(LinearSoftmaxClassifier):
    """The paper's data-parallel baseline: L-BFGS on eq. (2) with a gradient summed over blocks.

    Each of the P workers holds a block of rows; per iteration the current W (O(KD)) is sent to
    every worker and each returns its partial gradient (O(KD)), which the driver sums — the
    O(KD) communication of Table 1. ``backend="serial"`` computes the blocks in turn,
    ``"dask"`` on a ``dask.distributed`` cluster.

    Parameters
    ----------
    alpha : float, default 1e-4
        Ridge; Raman et al.'s λ of eq. (2) exactly (mean log-loss + alpha/2 ‖W‖²).
    max_iter : int, default 1000
        L-BFGS iterations; a :class:`~sklearn.exceptions.ConvergenceWarning` when reached.
    tol : float, default 1e-5
        Stop when the largest entry of the gradient of the mean objective is below ``tol``
        (scikit-learn's ``LogisticRegression`` stops at 1e-4 on the same quantity; pass a
        smaller value, as chapter 3 does (1e-9), for a reference optimum).
    n_workers : int, default 1
        P, the number of row blocks (clamped to N).
    backend : {"serial", "dask"}, default "serial"
    client : distributed.Client, str or None
        As in :class:`~xclib.dsmlr.DSMLR`.
    warm_start : bool, default False
        Start L-BFGS from the fitted ``coef_`` (same classes and features) instead of 0.

    Attributes
    ----------
    coef_, intercept_ (None), classes_, n_iter_, objective_ (L1 at the solution), status_
    (:class:`LBFGSStatus`), history_ with ``iteration``, ``time``, ``objective`` (L1 of eq. (2)).
    """

    _parameter_constraints = {
        "alpha": ALPHA, "max_iter": MAX_ITER, "tol": TOL, "n_workers": N_WORKERS,
        "backend": [StrOptions({"serial", "dask"})], "client": CLIENT,
        "warm_start": WARM_START,
    }

    def __init__(self, *, alpha=1e-4, max_iter=1000, tol=1e-5, n_workers=1, backend="serial",
                 client=None, warm_start=False):
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.n_workers = n_workers
        self.backend = backend
        self.client = client
        self.warm_start = warm_start

    def fit(self, X, y):
        """Minimise eq. (2) on ``(X, y)`` with L-BFGS-B; returns self."""
        self._validate_params()
        warm = warm_weights(self)
        X, y = self._validate_fit(X, y)
        x0 = np.zeros(self.classes_.shape[0] * X.shape[1])
        if warm is not None:
            check_warm(self, X, warm)
            x0 = warm[1].ravel() * pow2_scale(X)
        n, d = X.shape
        K = self.classes_.shape[0]
        P = min(int(self.n_workers), n)
        own = None
        client = None
        if self.backend == "dask":
            client, own = _connect(self.client, P)
        hist = {"iteration": [], "time": [], "objective": []}
        t0 = time.perf_counter()

        def callback(intermediate_result):
            hist["iteration"].append(len(hist["iteration"]) + 1)
            hist["time"].append(time.perf_counter() - t0)
            hist["objective"].append(float(intermediate_result.fun))

        # solve for V = s·W on X/s with ridge alpha/s² (the same minimiser and objective; s a
        # power of two, so exact, and 1 for unit rows): L-BFGS's first step is then well scaled
        # whatever the units of the features
        s = pow2_scale(X)
        Xs, alpha = (X, float(self.alpha)) if s == 1.0 else (X * (1.0 / s), self.alpha / s / s)
        try:
            fun = _Gradients(Xs, y, K, P, alpha, client)
            res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                           callback=callback,
                           options={"maxiter": int(self.max_iter), "gtol": float(self.tol) / s,
                                    "ftol": 1e3 * np.finfo(float).eps, "maxcor": 20})
        finally:
            if own is not None:
                _close_owned(*own)
        self.coef_ = res.x.reshape(K, d) if s == 1.0 else res.x.reshape(K, d) / s
        self.intercept_ = None
        self.n_iter_ = int(res.nit)
        self.objective_ = float(res.fun)
        self.status_ = LBFGSStatus(res.status)
        self.history_ = hist
        if self.status_ == LBFGSStatus.MAX_ITER:
            warnings.warn(f"DataParallelLBFGS stopped after max_iter={self.max_iter} "
                          f"iterations without reaching tol={self.tol:g}; raise max_iter",
                          ConvergenceWarning, stacklevel=2)
        elif self.n_iter_ == 0:
            warnings.warn(f"DataParallelLBFGS stopped at its starting point: the "
                          f"gradient there is already below tol={self.tol:g} (lower tol if "
                          "that is not the optimum)", ConvergenceWarning, stacklevel=2)
        return self
