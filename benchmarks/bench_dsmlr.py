"""DS-MLR benchmarks: ratios measured in one run (no timed asserts; not part of the tests).

    XCLIB_DATA=/work/shared/data python benchmarks/bench_dsmlr.py [--set bibtex] [--epochs 3]
        [--skip-lbfgs]

Prints, for the sync schedule on the chosen set:
  * updates (eq. 13 steps) per second per worker with P = 1 and 2, threads and Dask, and the
    ratios P=2 / P=1 of epoch throughput (goals on an idle 2-core machine: >= 1.8x threads,
    >= 1.5x Dask);
  * the Dask overhead per inner epoch (Dask time minus threads time, divided by the 2P inner
    epochs of an outer iteration);
  * the async schedule with threads, P = 1 and 2;
  * L-BFGS (data parallel, serial) vs DS-MLR sync (P = 2 threads): seconds to get within 1 %
    of the optimum.
The load average is printed first: ratios mean little when the machine runs other jobs.
"""
import argparse
import os
import time
import warnings

import numpy as np

from xclib import datasets
from xclib.dsmlr import DSMLR, DataParallelLBFGS


def epoch_seconds(X, y, alpha, K, P, backend, schedule, epochs):
    m = DSMLR(alpha=alpha, learning_rate=1.0 / K, n_epochs=epochs, n_workers=P,
              backend=backend, schedule=schedule, random_state=0).fit(X, y)
    return float(np.min(np.diff([0.0] + m.history_["time"]))), m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="bibtex")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--skip-lbfgs", action="store_true")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    X, y = datasets.load(a.set, "train", normalize=True)
    K, N = len(np.unique(y)), X.shape[0]
    alpha = 1.0 / N  # the paper's λ (eq. (2) is on alpha's mean scale)
    print(f"{a.set}: N={N} D={X.shape[1]} K={K} nnz/row={X.nnz / N:.1f}  alpha=1/N")
    if len(np.unique(y[:50])) > 1:  # compile (or load) the kernels before timing
        DSMLR(n_epochs=1, learning_rate=1.0 / K, alpha=alpha).fit(X[:50], y[:50])
    t = {}
    for backend, P, sched in [("threads", 1, "sync"), ("threads", 2, "sync"), ("dask", 1, "sync"),
                              ("dask", 2, "sync"), ("threads", 1, "async"),
                              ("threads", 2, "async")]:
        t[(backend, P, sched)], _ = epoch_seconds(X, y, alpha, K, P, backend, sched, a.epochs)
        ups = N * K / t[(backend, P, sched)] / P
        print(f"  {sched:5s} {backend:7s} P={P}: {t[(backend, P, sched)]:.3f} s/epoch, "
              f"{ups:,.0f} updates/s/worker")
    print(f"speed-up P=2/P=1: threads {t[('threads', 1, 'sync')] / t[('threads', 2, 'sync')]:.2f}x"
          f" (goal 1.8x), Dask {t[('dask', 1, 'sync')] / t[('dask', 2, 'sync')]:.2f}x (goal 1.5x),"
          f" async threads {t[('threads', 1, 'async')] / t[('threads', 2, 'async')]:.2f}x")
    print(f"Dask overhead per inner epoch (P=2): "
          f"{(t[('dask', 2, 'sync')] - t[('threads', 2, 'sync')]) / 4 * 1e3:.2f} ms")
    if a.skip_lbfgs:
        return
    lb = DataParallelLBFGS(alpha=alpha, max_iter=300, tol=1e-9).fit(X, y)
    opt = lb.objective_
    t_l = next((s for s, o in zip(lb.history_["time"], lb.history_["objective"])
                if o <= 1.01 * opt), np.nan)
    m = DSMLR(alpha=alpha, learning_rate=1.0 / K, n_epochs=30, n_workers=2,
              backend="threads", random_state=0).fit(X, y)
    t_d = next((s for s, o in zip(m.history_["time"], m.history_["objective"])
                if o <= 1.01 * opt), np.nan)
    print(f"time to 1 % of the optimum: L-BFGS {t_l:.2f} s, DS-MLR sync P=2 {t_d:.2f} s "
          f"(ratio DS-MLR / L-BFGS {t_d / t_l:.2f})")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"[{time.perf_counter() - t0:.0f} s]")
