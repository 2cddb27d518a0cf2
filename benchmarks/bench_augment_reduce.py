"""Seconds per epoch of OVE and the three A&R models (Ruiz et al. 2018, Table 2), one core.

Run: ``XCLIB_DATA=/work/shared/data python benchmarks/bench_augment_reduce.py [--epochs 3]``

Prints, for Table 1's minibatch sizes (MNIST |B| = 500, |S| = 1; Bibtex 488 / 20; the K = 10^4
toy 500 / 100) and Section 4's optimiser settings (``alpha=0``, ``learning_rate=0.02``), the
median seconds per epoch with warm kernels (``xclib.book.warm_up`` compiles them first on a
few rows; evaluation excluded),
the paper's one-core figures beside them, and the A&R/OVE ratio measured in this run (paper:
about 1.0-1.05). Timings on a shared machine move with its load; the ratios within one run are
what to compare. Not part of the test suite.
"""
import argparse

import numpy as np
import scipy.sparse as sp

from xclib import datasets
from xclib.augment_reduce import AugmentReduce
from xclib.book import warm_up

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs")
    ap.add_argument("--sets", nargs="+", default=["mnist", "bibtex", "toy"])
    args = ap.parse_args()
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
        print(f"{name:8s} ratio softmax A&R / OVE in this run: {sec['softmax'] / sec['ove']:.3f} "
              f"(paper {PAPER[name]['softmax'] / PAPER[name]['ove']:.3f})")


if __name__ == "__main__":
    main()
