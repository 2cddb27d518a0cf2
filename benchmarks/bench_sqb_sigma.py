"""Benchmark of MultinomialSQB's Σ_S product: feature-major against class-major W.

``xclib.sqb.solvers`` applies ``Σ_S + αI = Σ_b M_b ⊗ x_b x_bᵀ + αI`` (Sec. 4.1) with the
K × D iterate stored feature-major (D × K), so that each non-zero of a row reads and writes
K contiguous numbers. This script times that product (``_sigma_matvec_fm``) against the same
arithmetic on the class-major layout (K numbers D apart; the loop below, which the library
used before), and against one pass of the data at the same K (``X @ Wᵀ``, scipy), on the
full batch of each set's training rows as :func:`xclib.datasets.load` returns them. Ratios in
one run, best of ``--repeat``; numba's compilation excluded. Not part of the test suite::

    XCLIB_DATA=/work/shared/data python benchmarks/bench_sqb_sigma.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from numba import njit

from xclib import datasets
from xclib.sqb.bound import softmax_bound_matvec
from xclib.sqb.solvers import _sigma_matvec_fm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floors  # noqa: E402


@njit(cache=True)
def class_major_matvec(indptr, indices, data, batch, M, alpha, v, out):
    """The same product on V stored K × D (row k at ``k·D``)."""
    K = M.shape[2]
    D = v.shape[0] // K
    out[:] = alpha * v
    s, t = np.empty(K), np.empty(K)
    for b in range(batch.shape[0]):
        j = batch[b]
        for k in range(K):
            acc = 0.0
            for p in range(indptr[j], indptr[j + 1]):
                acc += data[p] * v[k * D + indices[p]]
            s[k] = acc
        softmax_bound_matvec(M[b], s, t)
        for k in range(K):
            for p in range(indptr[j], indptr[j + 1]):
                out[k * D + indices[p]] += data[p] * t[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sets", nargs="+", default=["bibtex", "20newsgroups", "aloi", "mnist"])
    args = ap.parse_args()
    print(f"{'set':14s} {'N':>7s} {'D':>6s} {'K':>5s} {'class-major s':>14s} "
          f"{'feature-major s':>16s} {'speed-up':>9s} {'X @ Wᵀ s':>9s} {'fm / pass':>9s}")
    for name in args.sets:
        X, y = datasets.load(name, "train")
        X = X.tocsr().astype(np.float64)
        K, D = int(y.max()) + 1, X.shape[1]
        rng = np.random.default_rng(0)
        M = rng.random((X.shape[0], 2, K))
        batch = np.arange(X.shape[0])
        V = rng.normal(size=(K, D))
        v, vt = V.ravel().copy(), V.T.ravel().copy()
        out, out_t = np.empty_like(v), np.empty_like(v)
        args_ = (X.indptr, X.indices, X.data, batch, M, 0.1)
        cm = floors.best(lambda: class_major_matvec(*args_, v, out), repeat=args.repeat)
        fm = floors.best(lambda: _sigma_matvec_fm(*args_, vt, out_t), repeat=args.repeat)
        assert np.allclose(out, out_t.reshape(D, K).T.ravel())
        one_pass = floors.best(lambda: X @ V.T, repeat=args.repeat)
        print(f"{name:14s} {X.shape[0]:7d} {D:6d} {K:5d} {cm:14.4f} {fm:16.4f} "
              f"{cm / fm:9.2f} {one_pass:9.4f} {fm / one_pass:9.2f}")


if __name__ == "__main__":
    main()
