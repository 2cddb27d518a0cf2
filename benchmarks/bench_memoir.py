"""Benchmark of chapter 5: MIPS oracles per query, and MEMOIR training beside LIBLINEAR CS.

Prints ratios measured in one run (one thread; not a test). Usage::

    XCLIB_DATA=/work/shared/data python benchmarks/bench_memoir.py [--max-K 100000] [--D 512]
        [--train-K 1000,3000] [--hnsw-max-K 30000]

1. For K = 10^3 … max-K classes generated: weights from a short MEMOIR-LSH fit (3 batches) on
   synthetic prototype data (Zipf class sizes: the fit sees, and the oracles search, the rows
   of about half the classes at large K; each line gives both numbers), then 1,000 training queries ``argmax_{r≠y} x·w_r`` answered by exact search
   (numba, and one batched sparse × dense product), SimpleLSH (64 bits, K/100 re-scored;
   256 bits), SimpleLSH with the ``n_top`` largest-norm rows always re-scored, and HNSW
   (ef = 200) twice: through faiss, which counts its graph search's distance computations,
   and through hnswlib (what MEMOIR trains with), which does not. Every oracle answers a few
   queries first (no compilation in the times); the batched product is timed right after
   each oracle, and the speed-up is the ratio of the two. Printed: recall@1 (the returned
   score equals the maximum), inner products per query (HNSW through faiss: every distance
   of the graph search, a dense inner product of D terms each, plus the entry point and the
   exact re-scoring; through hnswlib: the re-scoring only, its search shows in its time),
   64-bit Hamming comparisons per query (SimpleLSH scans all K codes), µs per query.
   Goal at K = 10^5 rows searched (220,000 generated): recall@1 ≥ 0.9 at ≥ 2× the speed of the batched product.
2. MEMOIR-LSH (ℓ2, alpha = 1e-3, Table 4's learning_rate = 0.1, decay = 0.02 and T = 25
   batches of 100·√K) vs LIBLINEAR Crammer–Singer (-s 4, C = 1) on the same data at
   K = 10^3 (and 3·10^3): train time and accuracy.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from xclib.memoir import Memoir, make_prototype_data
from xclib.mips import ExactMIPS, HNSWMIPS, SimpleLSH

#: Belyy's Table 4 (the library's defaults differ: 400 batches)
TABLE4 = dict(learning_rate=0.1, decay=0.02, n_bits=64, max_iter=25)


def _batched(Xq, yq, W):
    t = time.perf_counter()
    S = np.asarray(Xq @ W.T)
    S[np.arange(Xq.shape[0]), yq] = -np.inf
    S.argmax(1)
    return time.perf_counter() - t


def oracle_bench(K, D, nq=1000, hnsw=True):
    X, y = make_prototype_data(max(3 * K, 5000), D, K, random_state=0)
    fit = Memoir(alpha=1e-3, oracle="simple_lsh", **dict(TABLE4, max_iter=3),
                 random_state=0).fit(X, y)
    W = fit.coef_
    Kw = W.shape[0]                                      # classes seen in the 3 batches
    Xq, yq = X[:nq], np.searchsorted(fit.classes_, y[:nq])
    ex = ExactMIPS().build(W)
    ex.query(Xq[:10], yq[:10])                           # compile
    t = time.perf_counter(); r0, s0 = ex.query(Xq, yq); t_ex = time.perf_counter() - t
    _batched(Xq[:10], yq[:10], W)
    t_mm = _batched(Xq, yq, W)
    print(f"K={Kw:>7} rows searched (of {K} generated)  exact numba {1e6 * t_ex / nq:8.1f} µs/q   "
          f"batched product {1e6 * t_mm / nq:8.1f} µs/q")
    oracles = {"SimpleLSH-64": SimpleLSH(n_bits=64, random_state=0),
               "SimpleLSH-256": SimpleLSH(n_bits=256, random_state=0),
               "SimpleLSH-64 +top": SimpleLSH(n_bits=64, n_top=max(16, Kw // 300), random_state=0)}
    if hnsw:
        oracles["HNSW ef=200 faiss"] = HNSWMIPS(ef=200, ef_construction=200, backend="faiss")
        oracles["HNSW ef=200 hnswlib"] = HNSWMIPS(ef=200, ef_construction=200)
    for name, o in oracles.items():
        t = time.perf_counter(); o.build(W); tb = time.perf_counter() - t
        o.query(Xq[:10], yq[:10]); o.n_inner_products = 0
        t = time.perf_counter(); r, s = o.query(Xq, yq); dt = time.perf_counter() - t
        t_mm = _batched(Xq, yq, W)                       # same load, right after
        ip = o.n_inner_products / nq
        ham = Kw * o.codes.shape[1] if hasattr(o, "codes") else 0
        if getattr(o, "n_graph_distances", 0) is None:
            ip_text = f"{ip:9.1f} (+ search, n/a)"        # hnswlib: re-scoring only
        else:
            ip_text = f"{ip:9.1f} ({(Kw - 1) / max(ip, 1e-9):7.1f}x fewer)"
        print(f"   {name:19s} recall@1 {np.mean(s >= s0 - 1e-12):.3f}  inner products/q "
              f"{ip_text}  Hamming/q {ham:7d}  "
              f"{1e6 * dt / nq:8.1f} µs/q  speed-up vs batched {t_mm / dt:5.2f}x, "
              f"vs numba {t_ex / dt:5.2f}x  (build {tb:.1f} s)")


def training_bench(K, D):
    from liblinear import liblinearutil

    X, y = make_prototype_data(10 * K + 3000, D, K, random_state=1)
    Xt, yt, X, y = X[:3000], y[:3000], X[3000:], y[3000:]
    keep = np.isin(yt, y)
    Memoir(oracle="simple_lsh", max_iter=1, random_state=0).fit(X[:500], y[:500])  # compile
    t = time.perf_counter()
    m = Memoir(alpha=1e-3, oracle="simple_lsh", **TABLE4, random_state=0).fit(X, y)
    t_m = time.perf_counter() - t
    a_m = m.score(Xt[keep], yt[keep])
    t = time.perf_counter()
    model = liblinearutil.train(y.astype(float), X, "-s 4 -c 1 -q")
    t_cs = time.perf_counter() - t
    p, _, _ = liblinearutil.predict(yt[keep].astype(float), Xt[keep], model, "-q")
    a_cs = np.mean(np.asarray(p) == yt[keep])
    print(f"K={K:>6} n={X.shape[0]}: MEMOIR-LSH {t_m:6.1f} s acc {a_m:.3f} | LIBLINEAR CS "
          f"{t_cs:6.1f} s acc {a_cs:.3f} | CS/MEMOIR time {t_cs / t_m:5.1f}x, "
          f"accuracy gap {a_cs - a_m:+.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-K", type=int, default=220000,
                    help="largest K generated (3 batches of the Zipf data see about half)")
    ap.add_argument("--D", type=int, default=512)
    ap.add_argument("--hnsw-max-K", type=int, default=30000)
    ap.add_argument("--train-K", default="1000,3000", help="K of the training comparison")
    a = ap.parse_args()
    for K in [1000, 10000, 100000, 220000]:
        if K <= a.max_K:
            oracle_bench(K, a.D, nq=1000, hnsw=K <= a.hnsw_max_K)
    for K in [int(k) for k in a.train_K.split(",") if k]:
        training_bench(K, a.D)
