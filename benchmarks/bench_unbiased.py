"""Steps per second of the chapter-1 kernels, as ratios measured in one run (no asserts).
The kernels take turns, one timed epoch each per round, each after an untimed epoch of its
own (:func:`epoch_times`); a ratio of two kernels timed in the same rounds is the median
over the rounds of their paired ratio, and vanilla SGD is timed twice a round so that
its ratio to itself (the control) shows the statistic's own error in that run. The
fast kernels of part 1, measured against its goals, take ``MORE_ROUNDS`` times as many
rounds. Ratios between separate measurements (K = 10^5 / K = 10^2) compare each one's
best epoch.

Why the paired median: in an A/A test on this shared machine (vanilla against itself,
K = D = 1000, nnz = 10, N = 2·10^4, runs of 5 rounds, 20-30 runs, 6 repetitions on
2026-11-27) the median of paired ratios strayed from 1 by 0.06-0.12 (rms over the runs),
each kernel's best epoch taken separately by 0.05-0.26; the ratio of summed times
0.06-0.13. A slow spell of the machine falls on both kernels of a round alike, and
cancels in their ratio; it does not cancel between two kernels' best epochs, taken in
different rounds.

    python benchmarks/bench_unbiased.py [--quick]

1. Implicit SGD (the default safeguarded Halley/Newton solver, and the paper's plain bisection)
   against vanilla SGD and U-max on sparse data (goal: Implicit ≥ 0.8× vanilla at nnz = 10,
   0.9× at 200, Proposition 4), for nnz/row = 10 and 200; with evaluations of (16) per
   step; and each kernel with a ridge (alpha = 1e-4, per-row scales) against without (goal
   ≈ 1: the ridge keeps a step O(nnz); Implicit SGD with a ridge goes one step at a time).
   Beside the Implicit/vanilla ratio, what the solve costs: with ``t_v`` the vanilla step,
   ``t_c`` its coefficients (:func:`double_sum_coefficients`), ``t_s`` the 1-D solve
   (:func:`implicit_step`) and ``t_b`` the same solves per step in the epoch's batches of 16
   side by side (:func:`xclib.unbiased.implicit_epoch._lane_solves`), each timed alone on the states
   after one epoch of the benchmark's own Implicit SGD run, a vanilla step with its two exps
   replaced by the batched solve runs at ``t_v / (t_v − t_c + t_b)`` of vanilla's speed (an
   estimate, not a bound: the batches also let the loads of 16 steps overlap); at K = 10^5
   (part 2), likewise, ``t_f / (t_f + t_b)`` of the floor's speed (``t_f`` its step).
2. The same kernels at K = 10^2 and K = 10^5 with the same nnz (goal: ≥ 0.7×, the O(D) claim),
   each beside the floor of ``floors.sgd_access_epoch``: the loads and stores of the same steps
   (a CSR row, two rows of W read and written) without the arithmetic. At K = 10^5 (W is
   80 MB) those rows come from memory, not cache: the floor's own K = 10^5 / K = 10^2 ratio
   is the most any kernel could keep, and measured/floor says how far each kernel is from it.
   (Implicit SGD goes one step at a time at K = 10^2, where batches would share classes, and
   in batches at K = 10^5.) Beside it, the same floor with a float32 W:
   each access still fetches its own cache line, so half the bytes buy little; measured
   1.08-1.34× the float64 floor's speed (2026-11-27), an upper bound on what float32 W could
   give a kernel, against a float32 W's 2^-24 resolution, below which an SGD step's update
   to a weight is lost. Not offered as an option.
3. xclib's Implicit SGD against a straightforward per-step NumPy/SciPy implementation of the same
   update (dense rows of W, scipy.special.lambertw, scipy.optimize.bisect or brentq on the same
   bracket; goal: ≥ 100× faster). xclib default vs NumPy+brentq (the authors' own solver) is the
   headline; the bisection-vs-bisection ratio is printed too.

Profile of the solve (K = D = 1000, nnz = 10, the states of part 1's run)
----------------------------------------------------------------------------------------------
A vanilla step at nnz = 10 reads 2 × 10 entries of two random rows of W (8 MB, from L3) and
writes them back: 140-440 ns on this shared machine, mostly waiting for those loads; its
coefficients (two exps) take 9-12 ns.

* First: Halley in u, each evaluation of (16) a warm-started Lambert W (1-2 exps) plus
  e^{-u}, two evaluations a step, the bracket's softplus and two logs: 168 ns a solve.
* Then (:func:`xclib.unbiased.implicit._implicit_step_w`): Halley in w = u + a, where
  eq. (14) is a = e^{L0 − w}, so an evaluation is two exps; the start is one Halley step in u
  from ũ with a₀ from a quartic, and Halley's error bound stops after one evaluation:
  65-71 ns, 1.0 evaluations. Cost by stage, as a chain of dependent solves / one after
  another (ns): to a₀ 16 / 11, the start's Halley step 32 / 22, the first exp 41 / 30, the
  second 52 / 39, the Halley step and the Taylor update 69 / 65. The step paid it whole: a
  vanilla step with a chain of 7 dependent exps in its coefficient (53-67 ns alone) costs
  73-74 ns more, the Implicit step 71-77 ns more. Implicit/vanilla 0.61-0.85 (goal 0.8).
  Tried on that solver and not kept (A/B, one process, median of 21-30 rounds): evaluating
  first where a = a(u₁) (a log and an exp side by side instead of two exps in a row), FMA
  contraction, Estrin's quartic: the chain 73 -> 58 ns, the epoch unchanged; inline
  approximations for the start-only calls: 1.7 ns; inlining the solve: nothing; reading the
  next step's dots before this step's solve: slower.
* Now (:func:`xclib.unbiased.implicit.implicit_epoch`, without a ridge, K ≥ 512): the steps
  go in batches of up to 16 that share no class and no datapoint (13.6 steps a batch on
  average here); their starts and first evaluations run side by side in one vectorised,
  branch-free loop (libm-free exps, :func:`xclib._numba.exp_lane`; fused multiply-adds,
  without which the loop spilled 86 vector registers), 17.6-23 ns a step instead of 69; a
  Newton step on a₀ before the start's Halley step lets 99.9 % of the lanes finish in one
  evaluation (87 % without it); the rest go to the scalar solver. A/B in one
  process: in cache (K = 1000, D = 100, N = 10⁴) 133 ns a step against 158 (vanilla 96);
  with W in memory 391 against 475 (vanilla 383). Decomposition (N = 2·10⁴, one process):
  vanilla's own step in the batched loop costs what it costs alone (145 against 144 ns), the
  check for shared classes 5 ns more, the lanes 39 ns more (before the fused multiply-adds).
  Implicit/vanilla 0.71-1.11 at nnz = 10 and 0.92-1.12 at 200 (quick and full runs of this
  benchmark, 2026-11-27); 0.80-0.87 of the floor's speed at K = 10^5. With a ridge the
  steps go one at a time (the batched loop with the row scales in it ran slower), as do
  learning rates where most steps need two evaluations (lr ≥ 10 here: the epoch notices
  within 1024 steps). Tried: Estrin's scheme in exp_lane (no faster, and 2 ulp).
* Then: the lanes in three loops, one per stage (20.2 ns a lane against 24.3 in one loop,
  batches of 16 copied in and out as the epoch does; 14.2 against 18.4 in long batches),
  and the batch's classes and rows marked in bit sets instead of compared pairwise. One
  process, N = 2·10⁴, 15 rounds: 152-153 ns a step against 160-170, vanilla 122-126
  (paired medians 0.83-0.84 against 0.75-0.79). What is left, by the same kind of
  decomposition (a vanilla step inside the batched loop, then with the check, then with
  the lanes): the gather-then-apply structure alone costs 10-35 ns a step more than
  vanilla's loop, where W's rows stay in L3 (vanilla 125-175 ns); the lanes 18 ns a step.
  Tried and not kept: prefetching the next batch's rows of W and CSR rows while the lanes
  run. At N = 2·10⁴ no faster; at N = 10⁵ (rows from memory) 15 % faster, beyond vanilla's
  speed (1.2×) with a trick vanilla's loop does not use, so not a fair reading of the goal;
  written into the epoch kernel, its mere presence made the loop 60 % slower. Hiding the
  lanes under the gather's loads (a vanilla step in the batched loop, with the lanes of a
  fixed batch placed after the gather or in its middle): 125 ns without, 150 after, 144-150
  in the middle, so there is little stall to hide them in; what is left is their cost.
* Then (2026-11-27, later): by loop, in batches of 16 copied in and out, W₀'s start 6.4 ns a
  lane, the start's Newton and Halley steps 5.9, the evaluation 12.5 (its two exps, a
  division and Halley's step). :func:`xclib._numba.exp_lane` now a fitted polynomial of
  degree 11 instead of Taylor's of degree 13 (the same 1 ulp; the loop of exps 12 % faster),
  and the last loop reuses the previous loop's ``1/(2‖x‖²)``; together within the noise of
  one process against another (17.5-19.6 ns a lane for the same code). Decomposition again
  (41 rounds, paired medians over vanilla's time, on a busy spell where vanilla's step took
  218-391 ns): the batched loop with vanilla's coefficients in place of the lanes 0.95-0.98,
  with the check for shared classes 0.97-0.99, with the lanes 1.06-1.10: the structure costs
  nothing there, the lanes 7-10 %. With W in L3 (vanilla 125-135 ns) the same lanes are 16 %
  of a vanilla step, and that is the margin between 0.8 and the 0.82-0.93 measured.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.optimize import bisect, brentq
from scipy.special import lambertw
from sklearn.preprocessing import normalize

from xclib import unbiased
from xclib._numba import csr_arrays
from xclib.unbiased.implicit import implicit_step
from xclib.unbiased.implicit_epoch import _BATCH, _lane_solves
from xclib.unbiased.kernels import double_sum_coefficients

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402


def make(n, d, K, nnz, seed=0):
    rng = np.random.default_rng(seed)
    X = normalize(sp.random(n, d, density=nnz / d, format="csr", random_state=seed))
    y = rng.integers(0, K, n)
    rows = rng.integers(0, n, n)
    r = rng.integers(0, K - 1, n)
    ks = r + (r >= y[rows])
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return X, y, rows, ks, sq


def kernels(X, y, rows, ks, sq, K, alpha=0.0):
    """The epoch kernels at the paper's setting (alpha = 0), or with a ridge (per-row scales)."""
    beta = np.ones(K)
    rows_csr = csr_arrays(X)
    return {
        "vanilla": lambda W, u: unbiased.sgd_epoch(rows_csr, sq, y, W, u, rows, ks, 1e-3, False,
                                                   np.inf, alpha, beta, np.inf, np.inf),
        "umax": lambda W, u: unbiased.sgd_epoch(rows_csr, sq, y, W, u, rows, ks, 1e-1, False, 1.0,
                                                alpha, beta, np.inf, np.inf),
        "implicit_bisection": lambda W, u: unbiased.implicit_epoch(
            rows_csr, sq, y, W, u, rows, ks, 1.0, alpha, beta, 1e-10, False),
        "implicit_newton": lambda W, u: unbiased.implicit_epoch(
            rows_csr, sq, y, W, u, rows, ks, 1.0, alpha, beta, 1e-10, True),
    }


REPS = 11  # rounds per measurement, one epoch of each kernel a round (--quick: 9)
#: part 1 times vanilla SGD, U-max and Implicit SGD with Newton in this many times REPS rounds
#: (bisection, ten times slower, in REPS rounds of its own beside vanilla): in one process,
#: 45-48 rounds (N = 2·10⁴, 2026-11-27), the medians of 9-12 consecutive rounds spread
#: 0.70-1.01 for Implicit/vanilla and 0.91-1.12 for the control; the median of all of
#: them is the steadier reading (the control 0.95-1.03 over 10 such runs)
MORE_ROUNDS = 4
GOAL = {10: 0.8, 200: 0.9}  # Implicit / vanilla steps per second: the speed goal


def epoch_times(fns, K, d, n, reps=None, dtypes=None):
    """Seconds of each epoch kernel in ``fns`` (name → fn(W, u)) in each of ``reps`` rounds,
    the kernels taking turns within every round: name → array of times. ``dtypes``: the
    dtype of W for some of them (name → dtype; float64 otherwise).

    Each timed epoch follows an untimed one of the same kernel from the same start, as in a
    fit, where epochs run back to back. Without it a kernel's time depends on the one before
    it: after 10-30 ms of other work (an epoch of bisection, a busy loop, even a 10 ms
    sleep) an Implicit SGD epoch took 265-330 ns a step, after one of its own or of vanilla
    SGD 157-195, and vanilla's 156-242 against 127 (one process, 2026-11-27): in the order
    of :func:`kernels`, Implicit SGD always came after bisection."""
    times = {name: [] for name in fns}
    for _ in range(reps or REPS):
        for name, fn in fns.items():
            # not np.zeros: untouched pages would fault in the timing
            W = np.full((K, d), 0.0, dtype=(dtypes or {}).get(name, np.float64))
            u = np.full(n, math.log(K))
            fn(W, u)  # the untimed epoch
            W.fill(0.0)
            u.fill(math.log(K))
            t = time.perf_counter()
            fn(W, u)
            times[name].append(time.perf_counter() - t)
    return {name: np.array(v) for name, v in times.items()}


def steps_per_second(times, n):
    """Steps per second of each kernel at its best epoch."""
    return {name: n / t.min() for name, t in times.items()}


def speed_ratio(times, a, b):
    """Speed of kernel ``a`` over kernel ``b``, timed in the same rounds: the median of their
    per-round ratios (see the module's docstring)."""
    return float(np.median(times[b] / times[a]))


@njit(cache=True)
def _solve_all(zs, us, xxs, lr, n_classes):
    acc = 0.0
    for t in range(zs.shape[0]):
        acc += implicit_step(zs[t], us[t], xxs[t], lr, n_classes, 1e-10, True)[2]
    return acc


@njit(cache=True)
def _coefficients_all(zs, us, n_classes):
    acc = 0.0
    for t in range(zs.shape[0]):
        c, _, g = double_sum_coefficients(False, 0.0, zs[t], us[t], n_classes)
        acc += c + g
    return acc


@njit(cache=True)
def _lanes_all(zs, us, xxs, lr, n_classes, a, un, done):
    for t0 in range(0, zs.shape[0] - _BATCH + 1, _BATCH):
        sl = slice(t0, t0 + _BATCH)
        _lane_solves(zs[sl], us[sl], xxs[sl], lr, n_classes - 1.0, 1e-10, a[sl], un[sl],
                     done[sl])


def solve_and_coefficient_ns(X, y, rows, ks, sq, K, lr=1.0, reps=None):
    """Nanoseconds per step of the Implicit SGD solve alone (one step at a time, and in the
    epoch's batches of ``_BATCH`` side by side), and of a vanilla step's coefficients, on
    the states (z, ũ, ‖x‖²) of the same steps after one epoch of Implicit SGD; and the
    fraction of those batched solves finished without the scalar solver."""
    W = np.zeros((K, X.shape[1]))
    u = np.full(X.shape[0], math.log(K))
    beta = np.ones(K)
    unbiased.implicit_epoch(csr_arrays(X), sq, y, W, u, rows, ks, lr, 0.0,
                            beta, 1e-10, True)
    Xr = X[rows]   # z = x_i·(w_k − w_y) of each step, one non-zero at a time
    t = np.repeat(np.arange(rows.size), np.diff(Xr.indptr))
    zs = np.bincount(t, Xr.data * (W[ks[t], Xr.indices] - W[y[rows][t], Xr.indices]),
                     minlength=rows.size)
    keep = sq[rows] > 0.0   # (the batched solver leaves ‖x‖ = 0 to the scalar one)
    zs, us, xxs = zs[keep], u[rows][keep], sq[rows][keep]
    a, un, done = np.empty(zs.size), np.empty(zs.size), np.zeros(zs.size, dtype=np.bool_)
    timed = {"solve": lambda: _solve_all(zs, us, xxs, lr, K),
             "batched": lambda: _lanes_all(zs, us, xxs, lr, K, a, un, done),
             "coef": lambda: _coefficients_all(zs, us, K)}
    _solve_all(zs[:10], us[:10], xxs[:10], lr, K)
    _lanes_all(zs[:_BATCH], us[:_BATCH], xxs[:_BATCH], lr, K, a, un, done)
    _coefficients_all(zs[:10], us[:10], K)
    best = dict.fromkeys(timed, np.inf)
    for _ in range(reps or REPS):
        for name, fn in timed.items():
            t = time.perf_counter(); fn()
            best[name] = min(best[name], time.perf_counter() - t)
    ns = {name: 1e9 * b / zs.size for name, b in best.items()}
    return ns["solve"], ns["batched"], ns["coef"], float(done.mean())


def numpy_implicit_epoch(X, y, W, u, rows, ks, lr, tol=1e-10, root=bisect):
    """The same Implicit SGD update written plainly with NumPy/SciPy, one step at a time (dense
    rows; ``root`` is ``scipy.optimize.bisect`` or ``brentq`` on the F.1 bracket)."""
    K = W.shape[0]
    for i, k in zip(rows, ks):
        x = X[i].toarray().ravel()
        yi = y[i]
        xx = x @ x
        z = x @ (W[k] - W[yi])
        c = 2 * lr * (K - 1) * xx

        def a_of(uu):
            return lambertw(c * np.exp(z - uu)).real

        def h(uu):
            return lr * (1 - np.exp(-uu)) - a_of(uu) / (2 * xx) + (uu - u[i])

        if h(u[i]) < 0:
            lo, hi = u[i], np.logaddexp(0, math.log(K - 1) + z)
        else:
            lo, hi = max(0.0, math.log(K - 1) + z - 2 * lr * xx), u[i]
        un = root(h, lo, hi, xtol=tol) if lo < hi else lo
        a = a_of(un)
        W[yi] += a / (2 * xx) * x
        W[k] -= a / (2 * xx) * x
        u[i] = un


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer steps")
    ap.add_argument("--json", help="also write the ratios to this JSON file")
    args = ap.parse_args()
    global REPS
    REPS = 9 if args.quick else 11
    out = {}
    n = 20_000 if args.quick else 100_000
    d = 1000

    # warm up (numba compilation)
    X, y, rows, ks, sq = make(200, 50, 10, 5)
    for alpha in (0.0, 1e-4):
        for fn in kernels(X, y, rows, ks, sq, 10, alpha).values():
            fn(np.zeros((10, 50)), np.full(200, math.log(10)))

    print("1. steps/s by method (K = 1000, D = 1000)")
    for nnz in (10, 200):
        X, y, rows, ks, sq = make(n, d, 1000, nnz)
        plain = kernels(X, y, rows, ks, sq, 1000)
        fns = {k: plain[k] for k in ("vanilla", "umax", "implicit_newton")}
        fns["vanilla_again"] = fns["vanilla"]  # the control
        times = epoch_times(fns, 1000, d, n, reps=MORE_ROUNDS * REPS)
        # bisection, and each kernel with a ridge beside the same without, in REPS rounds
        ridged = kernels(X, y, rows, ks, sq, 1000, 1e-4)
        slow_times = epoch_times({**plain, **{k + "_ridge": f for k, f in ridged.items()}},
                                 1000, d, n)
        sps = steps_per_second(times, n)
        sps.pop("vanilla_again")
        sps["implicit_bisection"] = steps_per_second(slow_times, n)["implicit_bisection"]
        line = ", ".join(f"{k} {v:,.0f}" for k, v in sps.items())
        print(f"   nnz={nnz}: {line}")
        control = speed_ratio(times, "vanilla_again", "vanilla")
        out[f"nnz{nnz}_vanilla_over_itself"] = control
        print(f"   nnz={nnz}: vanilla / vanilla (the control) = {control:.2f}")
        solve_ns, batched_ns, coef_ns, done = solve_and_coefficient_ns(X, y, rows, ks, sq, 1000)
        vanilla_ns = 1e9 / sps["vanilla"]
        estimate = vanilla_ns / (vanilla_ns - coef_ns + batched_ns)
        out[f"nnz{nnz}_solve_ns"] = solve_ns
        out[f"nnz{nnz}_batched_solve_ns"] = batched_ns
        out[f"nnz{nnz}_batched_done"] = done
        out[f"nnz{nnz}_vanilla_step_ns"] = vanilla_ns
        out[f"nnz{nnz}_implicit_estimate_over_vanilla"] = estimate
        print(f"   nnz={nnz}: vanilla step {vanilla_ns:.0f} ns (its coefficients {coef_ns:.0f} "
              f"ns); the 1-D solve alone {solve_ns:.0f} ns, {batched_ns:.0f} ns a step in "
              f"batches of {_BATCH} ({done:.1%} finished there): Implicit / vanilla about "
              f"{estimate:.2f}")
        for name in ("implicit_newton", "implicit_bisection"):
            rounds = slow_times if name == "implicit_bisection" else times
            ev = unbiased.implicit_epoch(csr_arrays(X), sq, y, np.zeros((1000, d)),
                                         np.full(n, math.log(1000)), rows, ks, 1.0, 0.0,
                                         np.ones(1000), 1e-10, name == "implicit_newton") / n
            over_vanilla = speed_ratio(rounds, name, "vanilla")
            out[f"nnz{nnz}_{name}_over_vanilla"] = over_vanilla
            out[f"nnz{nnz}_{name}_over_vanilla_best_of"] = sps[name] / sps["vanilla"]
            out[f"nnz{nnz}_{name}_evals"] = ev
            print(f"   nnz={nnz}: {name} / vanilla = {over_vanilla:.2f} (best epochs: "
                  f"{sps[name] / sps['vanilla']:.2f}; over umax "
                  f"{sps[name] / sps['umax']:.2f})   (goal ≥ {GOAL[nnz]}; "
                  f"{ev:.1f} evaluations of (16) per step)")

        ridge = {k: speed_ratio(slow_times, k + "_ridge", k) for k in sps}
        out.update({f"nnz{nnz}_{k}_ridge_over_plain": r for k, r in ridge.items()})
        print(f"   nnz={nnz}: with alpha = 1e-4 (row scales) / alpha = 0: "
              + ", ".join(f"{k} {r:.2f}" for k, r in ridge.items()) + "   (goal ≈ 1: O(nnz))")

    print("2. steps/s at K = 1e2 vs K = 1e5 (nnz = 10, D = 100), and measured/floor")
    d2 = 100
    res, floor, of_floor = {}, {}, {}
    for K in (100, 100_000):
        X, y, rows, ks, sq = make(n, d2, K, 10)
        access = lambda W, u: floors.sgd_access_epoch(X.indptr, X.indices, X.data, y, W, rows, ks)  # noqa: E731
        access(np.zeros((K, d2)), None)  # compile
        times = epoch_times({**kernels(X, y, rows, ks, sq, K), "floor": access}, K, d2, n)
        res[K] = steps_per_second(times, n)
        floor[K] = res[K].pop("floor")
        of_floor[K] = {name: speed_ratio(times, name, "floor") for name in res[K]}
        if K == 100_000:   # Implicit SGD there: the floor's step plus the batched solve
            _, batched_ns, _, _ = solve_and_coefficient_ns(X, y, rows, ks, sq, K)
            out["K1e5_batched_solve_ns"] = batched_ns
            out["implicit_newton_K1e5_estimate_of_floor"] = 1.0 / (1.0 + 1e-9 * batched_ns
                                                                   * floor[K])
            # the most a float32 W (and float32 values of X) could buy: the same loads and
            # stores with half the bytes
            data32 = X.data.astype(np.float32)
            access32 = lambda W, u: floors.sgd_access_epoch(X.indptr, X.indices, data32, y, W, rows, ks)  # noqa: E731
            access32(np.zeros((K, d2), np.float32), None)  # compile
            t32 = epoch_times({"floor": access, "floor32": access32}, K, d2, n,
                              dtypes={"floor32": np.float32})
            out["floor_K1e5_float32_speedup"] = speed_ratio(t32, "floor32", "floor")
        print(f"   K={K:>6}: floor (loads/stores only) {floor[K]:,.0f} steps/s; "
              + ", ".join(f"{k} {v:,.0f} ({of_floor[K][k]:.2f} of floor)"
                          for k, v in res[K].items()))
    f_ratio = floor[100_000] / floor[100]
    out["floor_K1e5_over_K1e2"] = f_ratio
    print(f"   floor: K=1e5 / K=1e2 = {f_ratio:.2f}   (the most any kernel can keep)")
    print(f"   floor at K=1e5 with a float32 W: {out['floor_K1e5_float32_speedup']:.2f}x the "
          f"float64 floor's speed (the most a float32 W could buy)")
    for name in res[100]:
        r = res[100_000][name] / res[100][name]
        out[f"{name}_K1e5_over_K1e2"] = r
        out[f"{name}_K1e5_of_floor"] = of_floor[100_000][name]
        print(f"   {name}: K=1e5 / K=1e2 = {r:.2f}   (goal ≥ 0.7, or the floor's {f_ratio:.2f}); "
              f"at K=1e5 {of_floor[100_000][name]:.2f} of the floor's speed")
    print(f"   the batched 1-D solve at K=1e5: {out['K1e5_batched_solve_ns']:.0f} ns a step: "
          f"Implicit SGD about "
          f"{out['implicit_newton_K1e5_estimate_of_floor']:.2f} of the floor's speed")

    print("3. xclib vs plain NumPy/SciPy Implicit SGD (K = 1000, D = 1000, nnz = 10)")
    m = 2000
    X, y, rows, ks, sq = make(m, d, 1000, 10)
    t_np, W_np = {}, {}
    for name, root in (("bisect", bisect), ("brentq", brentq)):
        W = np.zeros((1000, d)); u = np.full(m, math.log(1000))
        t = time.perf_counter(); numpy_implicit_epoch(X, y, W, u, rows, ks, 1.0, root=root)
        t_np[name] = time.perf_counter() - t
        W_np[name] = W
    t_nb = {}
    for name, newton in (("newton", True), ("bisection", False)):
        best = np.inf
        for _ in range(20):  # m steps take ~1 ms: best of 20
            W2 = np.full((1000, d), 0.0); u2 = np.full(m, math.log(1000))
            t = time.perf_counter()
            unbiased.implicit_epoch(csr_arrays(X), sq, y, W2, u2, rows, ks, 1.0,
                                    0.0, np.ones(1000), 1e-10, newton)
            best = min(best, time.perf_counter() - t)
        t_nb[name] = best
        diff = float(np.max(np.abs(W_np["bisect"] - W2)))
        out[f"max_abs_diff_numpy_vs_{name}"] = diff
        print(f"   max |W_numpy(bisect) - W_xclib({name})| = {diff:.2e}")
    print(f"   numpy+bisect {m / t_np['bisect']:,.0f}, numpy+brentq {m / t_np['brentq']:,.0f}, "
          f"xclib {m / t_nb['newton']:,.0f} (bisection {m / t_nb['bisection']:,.0f}) steps/s")
    print(f"   xclib / numpy+brentq = {t_np['brentq'] / t_nb['newton']:,.0f}x   (goal ≥ 100);  "
          f"xclib / numpy+bisect = {t_np['bisect'] / t_nb['newton']:,.0f}x;  "
          f"bisection vs bisection = {t_np['bisect'] / t_nb['bisection']:,.0f}x")
    out["xclib_over_numpy_brentq"] = t_np["brentq"] / t_nb["newton"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
