"""SoftmaxRegression (L-BFGS on xclib's blocked exact gradient) beside scikit-learn's
LogisticRegression(C=1/mu, fit_intercept=False, solver="lbfgs") on the same data and tolerance.

Prints wall time of each, their ratio, iterations, and the largest difference of predicted
probabilities on the test split. Run: ``XCLIB_DATA=... python benchmarks/bench_exact.py``.
"""
import argparse
import time

import numpy as np
from sklearn.linear_model import LogisticRegression

from xclib import SoftmaxRegression
from xclib.datasets import load


def one(name, mu, fraction, tol):
    opts = {"only_train_classes": True} if name == "bibtex" else {}
    X, y = load(name, "train", normalize=True, fraction=fraction, random_state=0)
    Xt, yt = load(name, "test", normalize=True, **opts)
    t0 = time.perf_counter()
    ours = SoftmaxRegression(mu=mu, tol=tol, max_iter=2000).fit(X, y)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = LogisticRegression(C=1.0 / mu, fit_intercept=False, tol=tol, max_iter=2000).fit(X, y)
    t_ref = time.perf_counter() - t0
    dp = np.abs(ours.predict_proba(Xt) - ref.predict_proba(Xt)).max()
    print(f"{name:8s} N={X.shape[0]:6d} D={X.shape[1]:5d} K={len(ours.classes_):4d} nnz={X.nnz:8d} | "
          f"xclib {t_ours:6.2f} s ({ours.n_iter_} it)  sklearn {t_ref:6.2f} s ({int(ref.n_iter_[0])} it)  "
          f"sklearn/xclib = {t_ref / t_ours:4.2f}x  max|dp| = {dp:.1e}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tol", type=float, default=1e-6)
    a = ap.parse_args()
    one("bibtex", 1.0, None, a.tol)
    one("mnist", 1.0, 1 / 6, a.tol)
