"""DS-MLR benchmarks: per-epoch times and speed-ups measured in one run (no timed asserts).

    XCLIB_DATA=/work/shared/data python benchmarks/bench_dsmlr.py [--set bibtex]
        [--workers 1,2,4,8,16] [--epochs 3] [--backends threads,dask] [--scheduler ADDR]
        [--skip-lbfgs]
    python benchmarks/bench_dsmlr.py --synthetic 50000,10000,2000,50 --workers 1,2,4,8,16

``--set`` loads a data set (``--synthetic N,D,K,nnz_per_row`` draws one with
``make_softmax_data`` instead: the 16-core point of chapter 3 is
``--synthetic 50000,10000,2000,50``). For every P of ``--workers`` (default 1 and 2, and more
up to ``os.cpu_count()``) it prints the median seconds per outer iteration of the sync and async
schedules with threads (and sync with Dask if asked), updates per second per worker, and the
speed-up over P = 1. Every fit is warmed first (:func:`xclib.book.warm_up`), so no time includes
numba compilation. Then, unless ``--skip-lbfgs``: L-BFGS (data parallel) against DS-MLR sync
(P = 2 threads), seconds to 1 % of the optimum, both warm.

The load average is printed first: ratios mean little when the machine runs other jobs.
"""
import argparse
import os
import time
import warnings

import numpy as np

from xclib import datasets
from xclib.book import warm_up
from xclib.dsmlr import DSMLR, DataParallelLBFGS


def epoch_seconds(X, y, alpha, K, P, backend, schedule, epochs, client=None):
    """Median warm seconds per outer iteration of one configuration."""
    m = DSMLR(alpha=alpha, learning_rate=1.0 / K, n_epochs=epochs, n_workers=P,
              backend=backend, schedule=schedule, random_state=0,
              client=client if backend == "dask" else None)
    warm_up(m, X, y)
    m.fit(X, y)
    return float(np.median(np.diff([0.0] + m.history_["time"]))), m


def default_workers():
    n = os.cpu_count() or 1
    return [P for P in (1, 2, 4, 8, 16, 32, 64) if P <= max(2, n)]


def load(a):
    if a.synthetic:
        from xclib.datasets.synthetic import make_softmax_data

        N, D, K, nnz = (int(v) for v in a.synthetic.split(","))
        X, y = make_softmax_data(N, D, K, nnz_per_row=nnz, random_state=0)[:2]
        return f"synthetic N={N} D={D} K={K}", X, y
    return a.set, *datasets.load(a.set, "train", normalize=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="bibtex")
    ap.add_argument("--synthetic", default=None, help="N,D,K,nnz_per_row")
    ap.add_argument("--workers", default=None, help="comma-separated P, e.g. 1,2,4,8,16")
    ap.add_argument("--backends", default="threads", help="threads and/or dask")
    ap.add_argument("--scheduler", default=None,
                    help="a Dask scheduler address (default: a LocalCluster of max(P) "
                         "single-threaded worker processes)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--skip-lbfgs", action="store_true")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    workers = ([int(p) for p in a.workers.split(",")] if a.workers else default_workers())
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; P = {workers}")
    name, X, y = load(a)
    K, N = len(np.unique(y)), X.shape[0]
    alpha = 1.0 / N  # the paper's λ (eq. (2) is on alpha's mean scale)
    print(f"{name}: N={N} D={X.shape[1]} K={K} nnz/row={X.nnz / N:.1f}  alpha=1/N")
    configs = [("threads", "sync"), ("threads", "async")]
    client = None
    if "dask" in a.backends.split(","):
        from distributed import Client, LocalCluster

        configs += [("dask", "sync"), ("dask", "async")]
        client = Client(a.scheduler) if a.scheduler else Client(LocalCluster(
            n_workers=max(workers), threads_per_worker=1, processes=True,
            dashboard_address=None, worker_dashboard_address=None))
    for backend, sched in configs:
        base = None
        for P in workers:
            t, _ = epoch_seconds(X, y, alpha, K, P, backend, sched, a.epochs, client)
            base = t if base is None else base
            print(f"  {sched:5s} {backend:7s} P={P:3d}: {t:8.3f} s/epoch, "
                  f"{N * K / t / P:14,.0f} updates/s/worker, speed-up {base / t:5.2f}x")
    if a.skip_lbfgs:
        return
    lb = DataParallelLBFGS(alpha=alpha, max_iter=300, tol=1e-9)
    warm_up(lb, X, y)
    lb.fit(X, y)
    opt = lb.objective_
    t_l = next((s for s, o in zip(lb.history_["time"], lb.history_["objective"])
                if o <= 1.01 * opt), np.nan)
    m = DSMLR(alpha=alpha, learning_rate=1.0 / K, n_epochs=30, n_workers=2,
              backend="threads", random_state=0)
    warm_up(m, X, y)
    m.fit(X, y)
    t_d = next((s for s, o in zip(m.history_["time"], m.history_["objective"])
                if o <= 1.01 * opt), np.nan)
    print(f"time to 1 % of the optimum (warm): L-BFGS {t_l:.3f} s, DS-MLR sync P=2 "
          f"{t_d:.3f} s (ratio DS-MLR / L-BFGS {t_d / t_l:.2f})")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"[{time.perf_counter() - t0:.0f} s]")
