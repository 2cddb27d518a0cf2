"""Benchmark of the exact softmax log-loss and error over a training set (``history_``'s
per-epoch evaluation): the fused row-by-row kernel against the blocked numpy path.

:func:`xclib.metrics.softmax_loss_and_error` evaluates CSR rows with ``_csr_loss_error``: one
row's K scores at a time, each non-zero adding a contiguous row of ``Wᵀ``, the maximum, the
first arg-max and the vectorised exponentials in the same pass. The blocked path
(:func:`xclib.metrics.blocked_loss_error`, used for dense rows and non-finite inputs) forms
blocks of ``X @ Wᵀ`` with scipy and reduces them with numpy. Both on each set's full
training rows as :func:`xclib.datasets.load` returns them, with random weights; ratios in one
run, best of ``--repeat``; numba's compilation excluded. Not part of the test suite::

    XCLIB_DATA=/work/shared/data python benchmarks/bench_loss_eval.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xclib import datasets
from xclib.metrics import blocked_loss_error, softmax_loss_and_error

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floors  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sets", nargs="+",
                    default=["mnist", "bibtex", "20newsgroups", "aloi", "clef"])
    args = ap.parse_args()
    print(f"{'set':14s} {'N':>7s} {'D':>6s} {'K':>5s} {'nnz/row':>8s} {'blocked s':>10s} "
          f"{'fused s':>9s} {'speed-up':>9s} {'|Δ loss|':>9s}")
    for name in args.sets:
        X, y = datasets.load(name, "train")
        X = sp.csr_matrix(X, dtype=np.float64)
        y = np.unique(y, return_inverse=True)[1]
        K, D = int(y.max()) + 1, X.shape[1]
        rng = np.random.default_rng(0)
        W = rng.normal(size=(K, D)) / np.sqrt(max(X.multiply(X).sum(1).max(), 1.0))
        b = rng.normal(size=K)
        blocked = floors.best(lambda: blocked_loss_error(W, X, y, b), repeat=args.repeat)
        fused = floors.best(lambda: softmax_loss_and_error(W, X, y, b, normalize=False),
                            repeat=args.repeat)
        delta = abs(blocked_loss_error(W, X, y, b)[0]
                    - softmax_loss_and_error(W, X, y, b, normalize=False)[0]) / X.shape[0]
        print(f"{name:14s} {X.shape[0]:7d} {D:6d} {K:5d} {X.nnz / X.shape[0]:8.1f} "
              f"{blocked:10.4f} {fused:9.4f} {blocked / fused:9.2f} {delta:9.1e}")


if __name__ == "__main__":
    main()
