"""What one core of this machine can do at best: the floors the kernels are compared with.

    python benchmarks/floors.py [--json out.json]

1. Streaming read bandwidth: a float64 array far larger than the caches, summed (GB/s).
2. One pass over the rows of a CSR matrix in a random order, reading every value and index
   once (seconds per pass over MNIST's 9 M non-zeros): the least an epoch of a minibatch
   method with a fresh permutation must spend, since every row is fetched from memory once.
   Beside it, the same pass in storage order (what the prefetcher makes of a stream).
3. Latency of a dependent random access to one of K rows of W (a pointer chase through a
   random cycle over K rows of D float64, one cache line read per row): the floor of a step
   that touches a random row of a large W, for K = 10^2 and 10^5.
4. The memory traffic of one double-sum SGD step without its arithmetic
   (:func:`sgd_access_epoch`): read a random CSR row, dot it with two rows of W (the class
   ``k`` and the label's) and add it back into both. Every chapter-1 kernel (vanilla SGD,
   U-max, Implicit SGD) makes these accesses and more; its steps per second over this
   kernel's, at the same K, is its measured/floor ratio (`bench_unbiased.py`).
5. The memory traffic of an Augment-and-Reduce epoch without its arithmetic
   (:func:`ar_access_epoch`): minibatches of a fresh permutation; each row dotted with the rows
   of W of its label and of ``|S|`` other classes, then added into those rows of a gradient
   buffer, marking them; after each minibatch, one step per marked weight (read, write,
   clear). Every A&R and OVE epoch makes these accesses and more (`bench_augment_reduce.py`
   prints its epoch over this one).

No asserts: the numbers describe the machine, and the benchmarks print their measured/floor
ratios from them. Timings take the best of a few repetitions (warm numba kernels).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from numba import njit


@njit(cache=True)
def _sum(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s


@njit(cache=True)
def _row_pass(indptr, indices, data, order):
    """Read every value and index of the rows in ``order``, with 4 independent sums."""
    s0 = s1 = s2 = s3 = 0.0
    for r in range(order.shape[0]):
        n = order[r]
        p, hi = indptr[n], indptr[n + 1]
        while p + 3 < hi:
            s0 += data[p] + indices[p]
            s1 += data[p + 1] + indices[p + 1]
            s2 += data[p + 2] + indices[p + 2]
            s3 += data[p + 3] + indices[p + 3]
            p += 4
        while p < hi:
            s0 += data[p] + indices[p]
            p += 1
    return s0 + s1 + s2 + s3


@njit(cache=True)
def _chase(W, nxt, steps):
    """Follow ``k ← nxt[k]`` reading ``W[k, 0]`` each time: each read depends on the last."""
    k = 0
    acc = 0.0
    for _ in range(steps):
        acc += W[k, 0]
        k = nxt[k] + (1 if acc < -1.0 else 0)  # a data dependence on the row just read
    return acc + k


@njit(cache=True)
def sgd_access_epoch(indptr, indices, data, y, W, rows, ks):
    """The loads and stores of an epoch of double-sum SGD steps, and nothing else: for each
    step ``t``, ``x = X[rows[t]]``, ``d = x·W[k] + x·W[y]`` and ``W[k] −= c x``,
    ``W[y] += c x`` with ``c`` depending on ``d`` (so the stores wait for the loads)."""
    acc = 0.0
    for t in range(rows.shape[0]):
        i = rows[t]
        k = ks[t]
        yi = y[i]
        p0, p1 = indptr[i], indptr[i + 1]
        d = 0.0
        for p in range(p0, p1):
            j = indices[p]
            d += data[p] * (W[k, j] + W[yi, j])
        c = 1e-9 * (1.0 if d >= 0.0 else -1.0)
        for p in range(p0, p1):
            j = indices[p]
            W[k, j] -= c * data[p]
            W[yi, j] += c * data[p]
        acc += d
    return acc


@njit(cache=True)
def ar_access_epoch(indptr, indices, data, order, classes, B, W, G, mark):
    """The loads and stores of an A&R epoch, and nothing else: for each minibatch of ``B``
    rows of ``order``, row ``n = order[t]`` is dotted with the rows ``classes[t]`` of W
    (its label's and ``|S|`` others), then ``G[k] += c_k x`` for each (marking the weights),
    ``c_k`` depending on the dots (so the stores wait for the loads); after the minibatch,
    ``W += 1e-9 G`` on the marked weights, G and the marks cleared."""
    K, D = W.shape
    m = classes.shape[1]
    c = np.empty(m)
    acc = 0.0
    for t0 in range(0, order.shape[0] - B + 1, B):
        for t in range(t0, t0 + B):
            n = order[t]
            p0, p1 = indptr[n], indptr[n + 1]
            for j in range(m):
                k = classes[t, j]
                d = 0.0
                for p in range(p0, p1):
                    d += data[p] * W[k, indices[p]]
                c[j] = 1e-9 * (1.0 if d >= 0.0 else -1.0)
                acc += d
            for j in range(m):
                k = classes[t, j]
                for p in range(p0, p1):
                    col = indices[p]
                    mark[k, col] = 1
                    G[k, col] += c[j] * data[p]
        for k in range(K):
            for col in range(D):
                if mark[k, col] != 0:
                    W[k, col] += 1e-9 * G[k, col]
                    G[k, col] = 0.0
                    mark[k, col] = 0
    return acc


def ar_access_seconds(X, n_classes, batch, n_sampled, seed=0):
    """Seconds of :func:`ar_access_epoch` over the rows of ``X`` with ``n_classes`` classes
    (each row's label and ``n_sampled`` other classes drawn at random: the access pattern
    depends on K and |S| only), minibatches of ``batch``."""
    rng = np.random.default_rng(seed)
    N, D = X.shape
    order = rng.permutation(N)
    classes = np.empty((N, n_sampled + 1), np.int64)
    for j in range(n_sampled + 1):
        classes[:, j] = rng.integers(0, n_classes, N)
    W = rng.normal(scale=0.01, size=(n_classes, D))
    G = np.zeros_like(W)
    mark = np.zeros(W.shape, np.uint8)
    return best(ar_access_epoch, X.indptr, X.indices, X.data, order, classes, batch, W, G,
                mark)


def best(fn, *args, repeat=3):
    fn(*args)  # compile / warm
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


def stream_gbps(n_bytes=800_000_000):
    a = np.random.default_rng(0).random(n_bytes // 8)
    return a.nbytes / best(_sum, a) / 1e9


def row_pass_seconds(X, seed=0):
    order = np.random.default_rng(seed).permutation(X.shape[0])
    rand = best(_row_pass, X.indptr, X.indices, X.data, order)
    seq = best(_row_pass, X.indptr, X.indices, X.data, np.arange(X.shape[0]))
    return rand, seq


def chase_ns(K, D=64, steps=2_000_000, seed=0):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(K)
    nxt = np.empty(K, np.int64)
    nxt[perm] = np.roll(perm, -1)  # one cycle through all K rows
    W = rng.random((K, D))
    return best(_chase, W, nxt, steps) / steps * 1e9


def measure(mnist=None, quick=False):
    out = {"stream_GBps": stream_gbps(200_000_000 if quick else 800_000_000)}
    if mnist is not None:
        rand, seq = row_pass_seconds(mnist)
        out.update(mnist_nnz=int(mnist.nnz), mnist_random_pass_s=rand,
                   mnist_sequential_pass_s=seq,
                   mnist_stream_floor_s=(mnist.data.nbytes + mnist.indices.nbytes)
                   / (out["stream_GBps"] * 1e9))
    for K in (100, 100_000):
        out[f"chase_ns_K{K}"] = chase_ns(K, steps=500_000 if quick else 2_000_000)
    return out


def load_mnist():
    try:
        from xclib import datasets
        return datasets.load("mnist", "train")[0]
    except Exception as err:  # no data here: the other floors still mean something
        print(f"(MNIST not available: {err}; its row-pass floor is skipped)")
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the floors to this JSON file")
    ap.add_argument("--quick", action="store_true", help="a smaller stream, a shorter chase")
    args = ap.parse_args()
    out = measure(load_mnist(), quick=args.quick)
    print(f"streaming read: {out['stream_GBps']:.1f} GB/s")
    if "mnist_random_pass_s" in out:
        print(f"MNIST rows ({out['mnist_nnz'] / 1e6:.1f} M nnz), random order: "
              f"{out['mnist_random_pass_s']:.4f} s/pass; storage order "
              f"{out['mnist_sequential_pass_s']:.4f} s; bandwidth floor "
              f"{out['mnist_stream_floor_s']:.4f} s")
    for K in (100, 100_000):
        print(f"dependent random row access, K = {K}: {out[f'chase_ns_K{K}']:.1f} ns")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
