"""Seconds per epoch of OVE and the three A&R models (Ruiz et al. 2018, Table 2), one core.

Run: ``XCLIB_DATA=/work/shared/data python benchmarks/bench_augment_reduce.py [--epochs 3]``

Prints, for Table 1's minibatch sizes (MNIST |B| = 500, |S| = 1; Bibtex 488 / 20; the K = 10^4
toy 500 / 100) and Section 4's optimiser settings (``alpha=0``, ``learning_rate=0.02``), the
median seconds per epoch with warm kernels (``xclib.book.warm_up`` compiles them first on a
few rows; evaluation excluded),
the paper's one-core figures beside them, and the A&R/OVE ratio measured in this run (paper:
about 1.0-1.05). Timings on a shared machine move with its load; the ratios within one run are
what to compare. Not part of the test suite.

``--profile`` splits one epoch of softmax A&R (and of OVE) into its kernels, each timed on its
own, and prints them beside the floor of ``benchmarks/floors.py``: one pass over the epoch's
rows in a random order (every row must come from memory once per epoch). ``--json FILE``
writes every number printed.
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
from xclib.augment_reduce import estimator as _est
from xclib.augment_reduce.kernels import batch_utilities, global_step, subsample_classes
from xclib.book import warm_up

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floors  # noqa: E402

PAPER = {  # Table 2, seconds per epoch, one core (toy: Section 4.1, minutes -> seconds)
    "mnist": {"ove": 0.336, "softmax": 0.337, "probit": 0.431, "logistic": 0.511},
    "bibtex": {"ove": 0.181, "softmax": 0.188, "probit": 0.244, "logistic": 0.246},
    "toy": {"ove": 0.189 * 60, "softmax": 0.196 * 60},
}
SETTINGS = {"mnist": (500, 1), "bibtex": (488, 20), "toy": (500, 100)}
#: Section 4's optimiser: maximum likelihood, rho_0 = 0.02 decayed x0.9 every 2000 iterations.
PAPER_PARAMS = dict(alpha=0.0, learning_rate=0.02, decay=0.9, decay_every=2000)


def load(name):
    if name == "toy":
        y, _ = datasets.make_augment_reduce_toy(random_state=0)
        y = np.unique(y, return_inverse=True)[1]
        return sp.csr_matrix((y.size, 1)), y
    return datasets.load(name, "train")


def profile_epoch(X, y, model, B, S, seed=0):
    """Seconds of one epoch spent in each kernel (Table 1's settings, warm kernels)."""
    est = AugmentReduce(model=model, batch_size=B, n_sampled=S, n_epochs=1, random_state=seed,
                        history_samples=1, **PAPER_PARAMS)
    warm_up(est, X, y)
    est.fit(X, y)  # one epoch: sets classes_, and every kernel is compiled for these types
    yy = est._encode(y)
    rng = np.random.default_rng(seed)
    st = _est._start_state(est, X, rng)
    N, K, m = X.shape[0], st.n_classes, st.n_sampled
    parts = dict.fromkeys(("draws", "subsets", "utilities", "local step", "global step"), 0.0)
    perm = rng.permutation(N)
    for it in range(N // B):
        t0 = time.perf_counter()
        st.t += 1
        batch = perm[it * B:(it + 1) * B]
        yb, u = yy[batch], rng.random((B, m))
        t1 = time.perf_counter()
        subsample_classes(u, yb, K, st.S, st.mark)
        t2 = time.perf_counter()
        batch_utilities(X.indptr, X.indices, X.data, batch, yb, st.S, st.W, st.b, st.psi_y,
                        st.psi_S)
        t3 = time.perf_counter()
        _est._local_step(st, batch, st.t, N / B, rng, "visits")
        t4 = time.perf_counter()
        global_step(X.indptr, X.indices, X.data, batch, yb, st.S, st.C, st.W, st.b, st.G,
                    st.Gb, st.sW, st.sb, st.stampW, st.stampb, st.markW, st.markb, st.touched,
                    st.touched_b, st.t, 0.02, True, st.inv_count, 0.0, 0.0)
        t5 = time.perf_counter()
        for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            parts[key] += dt
    return parts


def profile(names, out):
    for name in names:
        if name == "toy":
            continue
        X, y = load(name)
        B, S = SETTINGS[name]
        rand, seq = floors.row_pass_seconds(X)
        out[f"{name}_floor_random_pass_s"] = rand
        out[f"{name}_floor_sequential_pass_s"] = seq
        print(f"\n{name}: one pass over the rows, random order {rand:.4f} s, "
              f"storage order {seq:.4f} s")
        for model in ("softmax", "ove"):
            parts = profile_epoch(X, y, model, B, S)
            total = sum(parts.values())
            out[f"{name}_{model}_profile"] = parts
            print(f"  {model:8s} epoch {total:.4f} s = {total / rand:.1f}x the random pass: "
                  + ", ".join(f"{k} {v:.4f}" for k, v in parts.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs")
    ap.add_argument("--sets", nargs="+", default=["mnist", "bibtex", "toy"])
    ap.add_argument("--profile", action="store_true", help="time each kernel of an epoch")
    ap.add_argument("--json", help="also write the numbers to this JSON file")
    args = ap.parse_args()
    out = {}
    print(f"{'set':8s} {'method':9s} {'ours s/epoch':>13s} {'paper':>8s} {'paper/ours':>10s}")
    for name in args.sets:
        X, y = load(name)
        B, S = SETTINGS[name]
        sec = {}
        for model in PAPER[name]:
            est = AugmentReduce(model=model, batch_size=B, n_sampled=S, n_epochs=args.epochs,
                                random_state=0, history_samples=1, **PAPER_PARAMS)
            warm_up(est, X, y)
            est.fit(X, y)
            sec[model] = float(np.median(np.diff(est.history_["time"], prepend=0.0)))
            p = PAPER[name][model]
            print(f"{name:8s} {model:9s} {sec[model]:13.3f} {p:8.3f} {p / sec[model]:10.1f}x")
        out[f"{name}_seconds_per_epoch"] = sec
        print(f"{name:8s} ratio softmax A&R / OVE in this run: {sec['softmax'] / sec['ove']:.3f} "
              f"(paper {PAPER[name]['softmax'] / PAPER[name]['ove']:.3f})")
    if args.profile:
        profile(args.sets, out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
