"""Benchmark of prediction at large K: the blocked exact scan against the MIPS oracles.

Prints times and ratios measured in one run (one thread; not a test). Usage::

    python benchmarks/bench_predict.py [--quick] [--json PATH] [--D 128] [--n-queries 2000]
        [--k 5] [--max-K 100000]

For K = 10^3, 10^4, 10^5 classes (``--quick``: 500 queries, K up to 10^4 unless ``--max-K``
says otherwise): a linear model with Gaussian weights ``W`` (K × D, row norms spread by a
log-normal factor, as a trained model's are) and intercepts ``N(0, 0.1²)``, queried by rows
``x = w_c / ‖w_c‖ + 0.5 g / √D`` near a random class c (so each query has a clear best
class and a ranked neighbourhood, as a trained model's test rows do), stored as CSR.

1. The blocked exact scan (:mod:`xclib.predict`, 32 MiB tiles): ``predict`` and
   ``predict_topk(X, k)``, µs per query and the peak memory the call allocates (NumPy's
   allocations, traced by ``tracemalloc``), beside what the dense N × K score matrix of
   the former path needed for the same queries.
2. ``predict_topk(X, k, oracle=...)`` through ``ExactMIPS`` (the same scan behind the
   oracle interface), ``SimpleLSH`` (64 bits; the default K/100 candidates re-scored, K/10
   candidates, and K/100 with the ``K/300`` longest rows always re-scored) and ``HNSWMIPS``
   (hnswlib, ef = 100 and faiss, ef = 100): build seconds and the resident memory it added, µs per query, recall@k
   against the exact top-k (:func:`xclib.predict.topk_recall`) and recall@1 (the exact
   best class found first), and the speed-up over the blocked scan timed right after the
   oracle on the same queries (the ratio of two times measured back to back).

Every kernel is compiled on a small model first, and every method answers a few queries
before it is timed (no compilation or first-call costs in the times).
"""
from __future__ import annotations

import argparse
import json
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import psutil
import scipy.sparse as sp

from xclib import SoftmaxRegression
from xclib.mips import ExactMIPS, HNSWMIPS, SimpleLSH
from xclib.predict import topk_recall


def make_model(K, D, n_queries, seed=0):
    """A linear model with K classes and CSR queries near its classes (see the module)."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((K, D)) * rng.lognormal(0.0, 0.3, size=(K, 1)) / np.sqrt(D)
    m = SoftmaxRegression()
    m.coef_, m.intercept_ = W, 0.1 * rng.standard_normal(K)
    m.classes_, m.n_features_in_ = np.arange(K), D
    c = rng.integers(0, K, n_queries)
    Xq = W[c] / np.linalg.norm(W[c], axis=1, keepdims=True)
    Xq += 0.5 * rng.standard_normal((n_queries, D)) / np.sqrt(D)
    return m, sp.csr_matrix(Xq)


class _PeakRSS:
    """The largest resident memory of this process while the block runs (sampled 1 ms)."""

    def __enter__(self):
        self.proc, self.stop = psutil.Process(), threading.Event()
        self.start = self.peak = self.proc.memory_info().rss
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def _watch(self):
        while not self.stop.wait(0.001):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)
        self.added = self.peak - self.start


def timed(fn):
    """(result, seconds, peak bytes NumPy allocated during the call)."""
    tracemalloc.start()
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, dt, peak


def scan_bench(m, Xq, k):
    nq, K = Xq.shape[0], m.coef_.shape[0]
    m.predict(Xq[:5]), m.predict_topk(Xq[:5], k)                      # first calls
    _, t_pred, mem_pred = timed(lambda: m.predict(Xq))
    exact, t_top, mem_top = timed(lambda: m.predict_topk(Xq, k))
    row = dict(K=K, n_queries=nq, predict_us=1e6 * t_pred / nq, topk_us=1e6 * t_top / nq,
               predict_peak_MB=mem_pred / 1e6, topk_peak_MB=mem_top / 1e6,
               dense_scores_MB=8 * nq * K / 1e6, weights_MB=m.coef_.nbytes / 1e6)
    print(f"K={K:>7}  blocked scan: predict {row['predict_us']:8.1f} µs/q (peak "
          f"{row['predict_peak_MB']:6.1f} MB), predict_topk(k={k}) {row['topk_us']:8.1f} µs/q "
          f"(peak {row['topk_peak_MB']:6.1f} MB); dense N × K scores: "
          f"{row['dense_scores_MB']:7.1f} MB; weights {row['weights_MB']:6.1f} MB")
    return row, exact


def oracles_for(K):
    return {
        "ExactMIPS": ExactMIPS(),
        "SimpleLSH-64": SimpleLSH(n_bits=64, random_state=0),
        "SimpleLSH-64 K/10": SimpleLSH(n_bits=64, n_candidates=max(16, K // 10), random_state=0),
        "SimpleLSH-64 +top": SimpleLSH(n_bits=64, n_top=max(16, K // 300), random_state=0),
        "HNSW hnswlib ef=100": HNSWMIPS(ef=100, ef_construction=200),
        "HNSW faiss ef=100": HNSWMIPS(ef=100, ef_construction=200, backend="faiss"),
    }


def oracle_bench(m, Xq, k, exact):
    nq, K = Xq.shape[0], m.coef_.shape[0]
    rows = []
    for name, o in oracles_for(K).items():
        with _PeakRSS() as rss:
            t = time.perf_counter()
            m.predict_topk(Xq[:5], k, oracle=o)                          # builds the index
            t_build = time.perf_counter() - t
        o.n_inner_products = 0
        top, dt, _ = timed(lambda o=o: m.predict_topk(Xq, k, oracle=o))
        _, t_scan, _ = timed(lambda: m.predict_topk(Xq, k))              # right after
        ip = o.n_inner_products / nq
        row = dict(K=K, oracle=name, build_s=t_build, build_MB=rss.added / 1e6,
                   us_per_query=1e6 * dt / nq, scan_us_per_query=1e6 * t_scan / nq,
                   speedup=t_scan / dt, recall_at_k=topk_recall(top, exact),
                   recall_at_1=float(np.mean(top[:, 0] == exact[:, 0])),
                   inner_products_per_query=ip)
        rows.append(row)
        print(f"   {name:20s} build {t_build:6.1f} s (+{row['build_MB']:6.1f} MB)  "
              f"{row['us_per_query']:8.1f} µs/q  recall@{k} {row['recall_at_k']:.3f}  "
              f"recall@1 {row['recall_at_1']:.3f}  inner products/q {ip:9.1f}  "
              f"speed-up vs blocked scan {row['speedup']:5.2f}x")
    return rows


def warm_up(D, k):
    """Compile every kernel (and load the libraries) on a small model before any timing."""
    m, Xq = make_model(64, D, 8, seed=1)
    m.predict(Xq), m.predict_topk(Xq, k)
    for o in oracles_for(64).values():
        m.predict_topk(Xq, k, oracle=o)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="500 queries, K up to 10^4")
    ap.add_argument("--json", help="also write every number printed to this JSON file")
    ap.add_argument("--D", type=int, default=128)
    ap.add_argument("--n-queries", type=int, default=None)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--max-K", type=int, default=None)
    a = ap.parse_args(argv)
    nq = a.n_queries or (500 if a.quick else 2000)
    max_K = a.max_K or (10_000 if a.quick else 100_000)
    out = {"D": a.D, "k": a.k, "n_queries": nq, "scan": [], "oracles": []}
    warm_up(a.D, a.k)
    for K in (1_000, 10_000, 100_000):
        if K > max_K:
            continue
        m, Xq = make_model(K, a.D, nq)
        row, exact = scan_bench(m, Xq, a.k)
        out["scan"].append(row)
        out["oracles"] += oracle_bench(m, Xq, a.k, exact)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
