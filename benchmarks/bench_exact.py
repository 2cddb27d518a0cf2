"""SoftmaxRegression (xclib's oracle) beside scikit-learn's
``LogisticRegression(C=1/mu, fit_intercept=False, solver="lbfgs")`` on the same data, objective
and tolerance (``alpha = mu/N``: both minimise the mean log-loss + (mu/2N)·‖W‖², both stop when
the largest gradient entry of that mean is below ``tol``).

For each dataset it prints iterations / objective evaluations of each solver, how far above
the optimum each stopped (the optimum: xclib at a 1e4 times tighter ``tol``, not timed), the
floor (xclib's evaluations, each at the cost of one pass over the values and indices of X in
storage order, ``floors.row_pass_seconds``: every evaluation of the objective and its gradient
must read each non-zero at least once), both objective values (the same function,
:func:`softmax_objective`, at both solutions) and the largest difference of predicted
probabilities on the test split; then, per thread setting, the median wall time of each over
``--repeat`` runs and the median of the per-run ratios sklearn/xclib against the goal of 2x
(solvers and thread settings interleaved within each run, so that a ratio compares runs made
under the same load of a shared machine).
Thread settings: ``default`` (as installed: OpenBLAS and OpenMP threads on every core) and ``1``
(``threadpoolctl`` limits both to one thread: the algorithms, without the machine's load).

Run: ``XCLIB_DATA=... python benchmarks/bench_exact.py [--json ratios.json]``; with
``--baseline OLD.py`` (e.g. ``git show REV:xclib/exact.py > /tmp/old_exact.py``) an older
``SoftmaxRegression`` is timed in the same runs.

Profile (2 shared cores, one thread, medians of repeated timings)
-----------------------------------------------------------------
Work per objective evaluation: the products ``X Wᵀ`` and ``Xᵀ(P − Y)``, 2·nnz·K flops each
(Bibtex: nnz = 334 250, K = 146, 98 Mflop each, X is 4 MB of CSR, W and the gradient 2.1 MB;
MNIST 1/6: nnz = 1.50 M, K = 10, 30 Mflop each, 18 MB of CSR), plus N·K exps.

Before (SciPy L-BFGS-B with maxcor=20 on blocked NumPy/SciPy products):

* Bibtex, 25 iterations / 30 evaluations: 88-96 ms an evaluation (X Wᵀ 29 ms, exp 13 ms,
  Xᵀ(P − Y) 28 ms, the rest max/subtract/divide temporaries); L-BFGS-B itself 36 ms an
  iteration at n = K·D = 268 056 (0.2-0.5 s when its BLAS calls run two threads on busy cores).
* MNIST, 58 / 63: 25-27 ms an evaluation (X Wᵀ 12 ms, Xᵀ(P − Y) 11 ms, exp 2 ms).

After (:func:`xclib.exact.lbfgs`, numba two-loop recursion with 10 pairs, single thread;
the fused numba pass for sparse X with K ≥ 32):

* Bibtex, 29 / 35: the fused pass 41 ms an evaluation (both products while a row is in cache,
  no N × K array), the two-loop recursion 9.5 ms an iteration.
* MNIST, 62 / 68: 14 ms an evaluation (SciPy products 6.6 + 5.8 ms, kept: the fused pass takes
  20 ms at K = 10 and dense BLAS 16 + 16 ms, X being 63 MB dense against 18 MB of CSR).

End to end (this script, 5 interleaved runs, before → after, sklearn/xclib):
Bibtex 1.02x → 1.39x with one thread, 1.15x → 5.1x with default threads; MNIST 0.86x → 0.96x
and 0.97x → 1.87x. With default threads most of the gap is scikit-learn's (and the old
solver's) L-BFGS-B spending its time in two-thread level-1 BLAS on cores that other jobs hold;
with one thread MNIST stays bound by the two sparse products, which neither side avoids.

Fewer evaluations (a better initial Hessian): the two-loop recursion starts
from :func:`xclib.exact.feature_preconditioner` (per class, the features' second moment through
its 5 largest eigen-directions, shifted by 2Kα) instead of γ·I, and the first step from W = 0 is
the minimiser of the exact quadratic model there. Evaluations / one-thread ratio sklearn/xclib
(5 interleaved runs): Bibtex 35 → 23 with the preconditioner (1.34x → 1.85x) → 21 with the
first step (2.06x); MNIST 68 → 31 (1.03x → 2.15x) → 29 (2.13x). A diagonal preconditioner
(column scales) did not help (MNIST 70-78 evaluations); a dense one (all of XᵀX) saved no more
than rank 5 and costs 2·K·D² flops an iteration.

Then the time between evaluations, on Bibtex (fit 0.70 s, of which 21 evaluations 0.49 s): the
fused pass's 712 k scalar exps took 3 ms of its 23 ms an evaluation, and a vectorisable exp
(:func:`xclib._numba.exp_shifted`, within 1 ulp) takes 21 ms in all; the two-loop recursion's
dots waited on one addition per entry (0.22 ms each at n = 2.7e5, 4.8 ms an iteration), and
eight partial sums (:func:`xclib._numba.dense_dot8`) take 0.08 ms (2.9 ms an iteration). Fit
0.59 s; ratio 2.24x on Bibtex, 2.16x on MNIST. Blocking the fused pass by classes (blocks of
8-80 classes, whose W and gradient fit in L2) was slower: 30-59 ms an evaluation.

Tried for MNIST (K = 10, one thread, ms per evaluation or product, best of 7-9):
SciPy's path 10.3 (X Wᵀ 5.1, Xᵀ(P − Y) as CSC 4.2); a kept CSR copy of Xᵀ 5.3 (slower than
the CSC view); the fused pass 12.3-12.6 (also with fastmath or FMA contraction); the fused
pass with eight register accumulators per block of classes (K padded to 16) 25.1.
Then (2026-11-27): numba leaves LLVM's SLP vectoriser off, so sixteen scalar accumulators
stay sixteen scalar multiply-adds a non-zero (checked in the assembly); 8-wide fused
multiply-adds written as an LLVM intrinsic (K padded to 16, four partial sums per row to
break the chain) gave X Wᵀ 4.5-6.1 and Xᵀ(P − Y) 3.9-4.6 against SciPy's 5.2-5.4 and
4.3-4.4, and the whole fused pass 13.3 against 10.9 (Bibtex 21.3 against 21.0): no gain,
so not kept. Neither is bound by its multiply-adds: the non-zeros alone stream in 1.2 ms,
a chain of one multiply-add a non-zero takes 2.2 ms, and each product takes about 3 ns a
non-zero whatever the arithmetic. Nor by the cache: Xᵀ(P − Y) in blocks of columns whose
rows of the gradient fit in L1 (12-49 kB) took 3.3-4.1 ms against 3.4-4.5 unblocked.
"""
import argparse
import contextlib
import importlib.util
import json
import os
import sys
import time
import warnings

import numpy as np
import scipy.optimize
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from xclib import SoftmaxRegression
from xclib.datasets import load
from xclib.exact import softmax_objective

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402

GOAL = 2.0


@contextlib.contextmanager
def count_minimize(counts):
    """Count the objective evaluations of scikit-learn's ``scipy.optimize.minimize`` call."""
    orig = scipy.optimize.minimize

    def counting(fun, x0, *args, **kwargs):
        def f(x, *a):
            counts["nfev"] += 1
            return fun(x, *a)
        return orig(f, x0, *args, **kwargs)

    scipy.optimize.minimize = counting
    try:
        yield
    finally:
        scipy.optimize.minimize = orig


def load_baseline(path):
    spec = importlib.util.spec_from_file_location("xclib._exact_baseline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.SoftmaxRegression


def timed(make, X, y):
    t0 = time.perf_counter()
    model = make().fit(X, y)
    return time.perf_counter() - t0, model


def one(name, mu, fraction, tol, repeat, modes, baseline=None):
    """Time every solver under every thread setting, interleaved within each repeat."""
    opts = {"only_train_classes": True} if name == "bibtex" else {}
    X, y = load(name, "train", normalize=True, fraction=fraction, random_state=0)
    Xt, _ = load(name, "test", normalize=True, **opts)
    n = X.shape[0]
    solvers = {
        "xclib": lambda: SoftmaxRegression(alpha=mu / n, tol=tol, max_iter=2000),
        "sklearn": lambda: LogisticRegression(C=1.0 / mu, fit_intercept=False, tol=tol,
                                              max_iter=2000),
    }
    if baseline is not None:
        solvers["baseline"] = lambda: baseline(alpha=mu / n, tol=tol, max_iter=2000)
    times = {(m, s): [] for m in modes for s in solvers}
    models, counts, sk_fev = {}, {"nfev": 0}, 0
    with warnings.catch_warnings():  # load numba's compiled kernels before timing
        warnings.simplefilter("ignore")
        SoftmaxRegression(alpha=mu / n, max_iter=3).fit(X, y)  # past the first step: every kernel
    for _ in range(repeat):
        for mode in modes:
            with threadpool_limits(1) if mode == "1" else contextlib.nullcontext():
                for s, make in solvers.items():
                    counts["nfev"] = 0
                    with count_minimize(counts) if s == "sklearn" else contextlib.nullcontext():
                        t, models[s] = timed(make, X, y)
                    times[mode, s].append(t)
                    sk_fev = counts["nfev"] if s == "sklearn" else sk_fev
    codes = np.searchsorted(models["xclib"].classes_, y)
    obj = {s: softmax_objective(m.coef_, X, codes, mu, with_grad=False) / n
           for s, m in models.items()}
    ours, ref = models["xclib"], models["sklearn"]
    dp = float(np.abs(ours.predict_proba(Xt) - ref.predict_proba(Xt)).max())
    print(f"{name:7s} N={n:6d} D={X.shape[1]:5d} K={len(ours.classes_):4d} nnz={X.nnz:8d}  "
          f"(medians of {repeat} interleaved runs)\n"
          f"  xclib   {ours.n_iter_:4d} it {ours.n_fev_:4d} fev  f = {obj['xclib']:.12f}\n"
          f"  sklearn {int(ref.n_iter_[0]):4d} it {sk_fev:4d} fev  f = {obj['sklearn']:.12f}  "
          f"(f_xclib − f_sklearn = {obj['xclib'] - obj['sklearn']:+.1e}, "
          f"max|dp| = {dp:.1e})")
    if baseline is not None:
        print(f"  before  {models['baseline'].n_iter_:4d} it           "
              f"f = {obj['baseline']:.12f}")
    # where both stopped, against the optimum to a 1e4 times tighter tolerance (not timed)
    tight = SoftmaxRegression(alpha=mu / n, tol=tol * 1e-4, max_iter=5000).fit(X, y)
    f_star = softmax_objective(tight.coef_, X, codes, mu, with_grad=False) / n
    gap = {s: (obj[s] - f_star) / abs(f_star) for s in ("xclib", "sklearn")}
    print(f"  optimum at tol = {tol * 1e-4:.0e}: f* = {f_star:.12f}; (f − f*)/f*: "
          f"xclib {gap['xclib']:+.1e}, sklearn {gap['sklearn']:+.1e}")
    # the floor of an evaluation: one pass over X's values and indices (any objective and
    # gradient must read every non-zero once); xclib's evaluations at that cost
    _, pass_s = floors.row_pass_seconds(X)
    floor_s = ours.n_fev_ * pass_s
    print(f"  one pass over X {1e3 * pass_s:.2f} ms: xclib's {ours.n_fev_} evaluations at "
          f"that cost {floor_s:.3f} s (the floor)")
    rows = []
    for mode in modes:
        med = {s: float(np.median(times[mode, s])) for s in solvers}
        # the median of the per-repeat ratios: each pair ran back to back, under the same load
        ratio = float(np.median(np.array(times[mode, "sklearn"]) / times[mode, "xclib"]))
        row = {"dataset": name, "threads": mode, "repeat": repeat, "t_xclib": med["xclib"],
               "t_sklearn": med["sklearn"], "ratio": ratio, "goal": GOAL,
               "it_xclib": ours.n_iter_, "fev_xclib": ours.n_fev_,
               "it_sklearn": int(ref.n_iter_[0]), "fev_sklearn": sk_fev,
               "f_xclib": obj["xclib"], "f_sklearn": obj["sklearn"], "max_dp": dp,
               "f_star": f_star, "gap_xclib": gap["xclib"], "gap_sklearn": gap["sklearn"],
               "pass_s": pass_s, "floor_s": floor_s, "xclib_over_floor": med["xclib"] / floor_s,
               "floor_ratio": med["sklearn"] / floor_s,
               "times": {s: times[mode, s] for s in solvers}}
        line = (f"  threads={mode:7s} xclib {med['xclib']:6.2f} s  sklearn {med['sklearn']:6.2f} s"
                f"  sklearn/xclib = {ratio:4.2f}x (goal {GOAL:.0f}x: "
                f"{'met' if ratio >= GOAL else 'not met'}); xclib at "
                f"{med['xclib'] / floor_s:.1f}x the floor, sklearn / floor = "
                f"{med['sklearn'] / floor_s:.1f}x")
        if baseline is not None:
            rb = float(np.median(np.array(times[mode, "sklearn"]) / times[mode, "baseline"]))
            row.update(t_baseline=med["baseline"], ratio_baseline=rb, f_baseline=obj["baseline"])
            line += f"  | before {med['baseline']:6.2f} s  sklearn/before = {rb:4.2f}x"
        print(line, flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--mu", type=float, default=1.0, help="sum-scale ridge (alpha = mu/N)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", default="default,1",
                    help="comma-separated thread settings among 'default' and '1'")
    ap.add_argument("--datasets", default="bibtex,mnist")
    ap.add_argument("--baseline", help="an older xclib/exact.py to time in the same runs")
    ap.add_argument("--json", help="write the ratios (and times, counts, objectives) here")
    a = ap.parse_args()
    base = load_baseline(a.baseline) if a.baseline else None
    fractions = {"bibtex": None, "mnist": 1 / 6}
    modes = a.threads.split(",")
    rows = [r for d in a.datasets.split(",")
            for r in one(d, a.mu, fractions.get(d), a.tol, a.repeat, modes, base)]
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
