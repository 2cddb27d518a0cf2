"""Seconds per epoch of OVE and the three A&R models (Ruiz et al. 2018, Table 2), one core.

Run: ``XCLIB_DATA=/work/shared/data python benchmarks/bench_augment_reduce.py [--epochs 3]``

Prints, for Table 1's minibatch sizes (MNIST |B| = 500, |S| = 1; Bibtex 488 / 20; the K = 10^4
toy 500 / 100; ``--sets aloi``: K = 1,000, 500 / 50) and Section 4's optimiser settings
(``alpha=0``, ``learning_rate=0.02``), the median seconds per epoch with warm kernels
(``xclib.book.warm_up`` compiles them first on a few rows; evaluation excluded), the paper's
one-core figures beside them, the ratio of each method to OVE (paper: about 1.0-1.05 for
softmax A&R), and each epoch over the floor of ``benchmarks/floors.py`` measured in the same
run: one pass over the data's rows in a random order, reading every non-zero once (every row
must come from memory once per epoch), and an epoch of A&R's loads and stores without its
arithmetic (``floors.ar_access_epoch``: the same |B|, |S| and K; dots with |S| + 1 rows of W,
adds into a gradient buffer, a step per touched weight). Timings on a shared machine move with its load, so the methods take
turns for ``--rounds`` rounds, each fitting ``--epochs`` epochs of which the first is untimed;
a ratio is the median over the rounds of the ratio within a round (a slow spell falls on the
whole round), printed with its range, and OVE runs twice a round: its ratio to itself is the
error of that statistic. Not part of the test suite.

The estimator runs one fused kernel per iteration (:func:`~xclib.augment_reduce.iteration.
ar_iteration`: one pass over each minibatch row when W fits in cache, as on MNIST; class by
class when it does not, as on Bibtex, so that each class's rows of W and G stay in cache). ``--profile`` times one epoch of softmax A&R
(and of OVE) with that kernel, and splits an epoch of the same computation by the separate
kernels (subsets, utilities, local step, global step), each timed on its own: what each part
costs, and what fusing saves. ``--json FILE`` writes every number printed.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from xclib import datasets
from xclib.augment_reduce import AugmentReduce
from xclib._numba import csr_arrays
from xclib.augment_reduce.iteration import ar_iteration
from xclib.augment_reduce.kernels import batch_utilities, global_step, subsample_classes
from xclib.augment_reduce.state import Draws, local_step, start_state
from xclib.book import warm_up

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floors  # noqa: E402

PAPER = {  # Table 2, seconds per epoch, one core (toy: Section 4.1, minutes -> seconds)
    "mnist": {"ove": 0.336, "softmax": 0.337, "probit": 0.431, "logistic": 0.511},
    "bibtex": {"ove": 0.181, "softmax": 0.188, "probit": 0.244, "logistic": 0.246},
    "toy": {"ove": 0.189 * 60, "softmax": 0.196 * 60},
}
SETTINGS = {"mnist": (500, 1), "bibtex": (488, 20), "toy": (500, 100), "aloi": (500, 50)}
#: the methods timed on each set (ALOI: the softmax bounds, as in chapter 2)
METHODS = {"mnist": ("ove", "softmax", "probit", "logistic"),
           "bibtex": ("ove", "softmax", "probit", "logistic"),
           "toy": ("ove", "softmax"), "aloi": ("ove", "softmax")}
#: Section 4's optimiser: maximum likelihood, rho_0 = 0.02 decayed x0.9 every 2000 iterations.
PAPER_PARAMS = dict(alpha=0.0, learning_rate=0.02, decay=0.9, decay_every=2000)


def load(name):
    if name == "toy":
        y, _ = datasets.make_augment_reduce_toy(random_state=0)
        y = np.unique(y, return_inverse=True)[1]
        return sp.csr_matrix((y.size, 1)), y
    return datasets.load(name, "train")


def _separate_epoch(est, X, yy, seed, n_iter):
    """``n_iter`` iterations by the separate kernels, each timed on its own (seconds by part)."""
    parts = dict.fromkeys(("draws", "subsets", "utilities", "local step", "global step"), 0.0)
    rng = np.random.default_rng(seed)
    st = start_state(est, X, rng)
    N, B, K, m = X.shape[0], st.batch, st.n_classes, st.n_sampled
    buf, rows = st.buf, csr_arrays(X)
    cfg = st.cfg._replace(fit_intercept=True, ridge_y=0.0, ridge_S=0.0)
    perm = rng.permutation(N)
    for it in range(n_iter):
        t0 = time.perf_counter()
        st.t += 1
        batch = perm[it * B:(it + 1) * B]
        yb, u = yy[batch], rng.random((B, m))
        t1 = time.perf_counter()
        subsample_classes(u, yb, K, buf.S, buf.mark)
        t2 = time.perf_counter()
        batch_utilities(rows, batch, yb, buf.S, st.W, st.b, buf.psi_y, buf.psi_S)
        t3 = time.perf_counter()
        local_step(st, batch, st.t, rng)
        t4 = time.perf_counter()
        global_step(rows, Draws(batch, yb, u, u, u), st.W, st.b, st.steps, buf, cfg, st.t,
                    0.02)
        t5 = time.perf_counter()
        for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            parts[key] += dt
    return parts


def _fused_epoch(est, X, yy, seed, n_iter):
    """``n_iter`` iterations of the estimator's fused kernel (seconds), the same draws."""
    rng = np.random.default_rng(seed)
    st = start_state(est, X, rng)
    N, B = X.shape[0], st.batch
    rows = csr_arrays(X)
    cfg = st.cfg._replace(global_clock=False, fit_intercept=True, ridge_y=0.0, ridge_S=0.0)
    perm = rng.permutation(N)
    fused = 0.0
    for it in range(n_iter):
        t0 = time.perf_counter()
        st.t += 1
        batch = perm[it * B:(it + 1) * B]
        np.take(yy, batch, out=st.yb)
        draws = st.draws(batch, rng)
        ar_iteration(rows, draws, st.W, st.b, st.local, st.steps, st.buf, cfg, st.t, 0.02)
        fused += time.perf_counter() - t0
    return fused


def profile_epoch(X, y, model, B, S, seed=0):
    """Seconds of one epoch in each separate kernel, and of one epoch of the fused kernel the
    estimator runs (Table 1's settings, warm kernels, the same draws)."""
    est = AugmentReduce(model=model, batch_size=B, n_sampled=S, n_epochs=1, random_state=seed,
                        history_samples=1, **PAPER_PARAMS)
    warm_up(est, X, y)
    est.fit(X, y)  # one epoch: sets classes_, and the fused kernel is compiled for these types
    yy = est._encode(y)
    _separate_epoch(est, X, yy, seed, 1)  # the estimator no longer calls these: compile them
    n_iter = X.shape[0] // B
    return _separate_epoch(est, X, yy, seed, n_iter), _fused_epoch(est, X, yy, seed, n_iter)


def profile(names, out, floors_s):
    for name in names:
        if name == "toy":
            continue
        X, y = load(name)
        B, S = SETTINGS[name]
        rand, seq = floors_s[name]
        print(f"\n{name}: one pass over the rows, random order {rand:.4f} s, "
              f"storage order {seq:.4f} s")
        for model in ("softmax", "ove"):
            parts, fused = profile_epoch(X, y, model, B, S)
            total = sum(parts.values())
            out[f"{name}_{model}_profile"] = dict(parts, fused_epoch=fused)
            print(f"  {model:8s} fused epoch {fused:.4f} s = {fused / rand:.1f}x the random "
                  f"pass; separate kernels {total:.4f} s = {total / rand:.1f}x: "
                  + ", ".join(f"{k} {v:.4f}" for k, v in parts.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=2,
                    help="epochs per fit (the first untimed, the others timed)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of interleaved fits")
    ap.add_argument("--sets", nargs="+", default=["mnist", "bibtex", "toy"])
    ap.add_argument("--profile", action="store_true", help="time each kernel of an epoch")
    ap.add_argument("--json", help="also write the numbers to this JSON file")
    args = ap.parse_args()
    out = {}
    floors_s = {}
    print(f"{'set':8s} {'method':9s} {'ours s/epoch':>13s} {'/floor':>7s} {'paper':>8s} "
          f"{'paper/ours':>10s}")
    for name in args.sets:
        X, y = load(name)
        B, S = SETTINGS[name]
        floors_s[name] = floors.row_pass_seconds(X) if X.nnz else (np.nan, np.nan)
        rand = floors_s[name][0]
        out[f"{name}_floor_random_pass_s"], out[f"{name}_floor_sequential_pass_s"] = floors_s[name]
        access = (floors.ar_access_seconds(X, np.unique(y).size, B, S) if X.nnz else np.nan)
        out[f"{name}_floor_access_s"] = access
        runs = {m: [] for m in METHODS[name] + ("ove again",)}
        for rnd in range(args.rounds):   # the methods take turns: load drifts cancel
            for label in runs:
                model = label.split()[0]
                est = AugmentReduce(model=model, batch_size=B, n_sampled=S,
                                    n_epochs=max(2, args.epochs), eval_every=max(2, args.epochs),
                                    tol=None, random_state=rnd, history_samples=1,
                                    **PAPER_PARAMS)
                warm_up(est, X, y)
                est.fit(X, y)
                per = X.shape[0] // B
                epochs = np.diff(est.time_trace_[per - 1::per])   # after the untimed first
                runs[label].append(float(np.median(epochs)))
        sec = {m: float(np.median(v)) for m, v in runs.items()}
        ratios = {m: np.asarray(runs[m]) / np.asarray(runs["ove"]) for m in runs if m != "ove"}
        out[f"{name}_ratio_to_ove"] = {m: dict(median=float(np.median(r)), lo=float(r.min()),
                                               hi=float(r.max())) for m, r in ratios.items()}
        for model in runs:
            p = PAPER.get(name, {}).get(model, np.nan)
            over = f"{sec[model] / rand:6.1f}x" if X.nnz else "    n/a"
            print(f"{name:8s} {model:9s} {sec[model]:13.3f} {over} {p:8.3f} "
                  f"{p / sec[model]:10.1f}x")
        out[f"{name}_seconds_per_epoch"] = sec
        out[f"{name}_over_floor"] = {k: v / rand for k, v in sec.items()}
        out[f"{name}_over_access_floor"] = {k: v / access for k, v in sec.items()}
        floor = (f"floor (one random-order pass over the {X.nnz} non-zeros) {rand:.4f} s, "
                 f"an epoch's loads and stores {access:.4f} s (softmax A&R "
                 f"{sec['softmax'] / access:.2f}x that); " if X.nnz else "no features, no floor; ")
        paper = PAPER.get(name, {})
        print(f"{name:8s} {floor}ratio to OVE, median over {args.rounds} rounds (range): "
              + "; ".join(f"{m} {np.median(r):.3f} "
                          f"({r.min():.3f}-{r.max():.3f}, paper "
                          f"{paper.get(m.split()[0], np.nan) / paper.get('ove', np.nan):.3f})"
                          for m, r in ratios.items()))
    if args.profile:
        profile(args.sets, out, floors_s)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
