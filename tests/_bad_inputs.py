"""The bad-input matrix of one estimator or oracle, run in a child process.

``python tests/_bad_inputs.py estimator NAME`` (or ``oracle NAME``; several such pairs run one
after the other) tries every case on the named ``xclib`` class and prints one JSON line per
case, after a line ``{"start": NAME}``::

    {"case": ..., "outcome": ..., "detail": ...}

Outcomes: ``error`` (a ValueError/TypeError naming the problem), ``warning`` (the fit finished
with a warning that says what went wrong), ``ok`` (a sound result), and the failures
``unclear`` (an error that does not name the parameter or problem), ``exception`` (any other
exception), ``garbage`` (a silent non-finite or invalid result) and ``degenerate`` (a silent fit
that learned nothing where the same budget with the defaults learns). A segfault kills this
process; ``tests/test_bad_inputs.py`` reports it as a crash of the class last started and
runs the classes after it in a new process.
"""
from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags

import xclib

#: values tried for every parameter (those equal to the default are skipped)
BAD_VALUES = (np.nan, -1, 0, "0.1", 1e300)
#: budget parameters: a small value keeps the matrix fast; the baseline uses the same budget
BUDGET = {"n_epochs": 3, "max_iter": 100}
FAILURES = ("unclear", "exception", "garbage", "degenerate")


def _emit(case, outcome, detail=""):
    print(json.dumps({"case": case, "outcome": outcome, "detail": str(detail)[:300]}),
          flush=True)


def _data(est, n=240, d=8, seed=0):
    k = 3 if get_tags(est).classifier_tags.multi_class else 2
    X, y = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=2.0, random_state=seed)
    return StandardScaler().fit_transform(X), y


def _small_budget(cls):
    params = cls().get_params()
    return {k: v for k, v in BUDGET.items() if k in params and params[k] is not None
            and isinstance(params[k], (int, np.integer)) and params[k] > v}


def _fit(est, X, y, names):
    """Fit and classify the outcome; ``names`` are the words a clear error must contain."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X, y)
        except (ValueError, TypeError) as e:
            msg = str(e)
            clear = any(n.lower() in msg.lower() for n in names)
            return ("error" if clear else "unclear"), f"{type(e).__name__}: {msg}"
        except Exception as e:  # noqa: BLE001 - any other exception is a finding
            return "exception", f"{type(e).__name__}: {e}"
    said = [w for w in caught if issubclass(w.category, (UserWarning, RuntimeWarning))
            and not issubclass(w.category, DeprecationWarning)]
    coef = getattr(est, "coef_", None)
    if coef is None or not np.all(np.isfinite(coef)):
        return ("warning" if said and getattr(est, "diverged_", False) else "garbage"), \
            f"coef_ finite: {coef is not None and bool(np.all(np.isfinite(coef)))}"
    try:
        pred = est.predict(X)
    except Exception as e:  # noqa: BLE001
        return "exception", f"predict: {type(e).__name__}: {e}"
    if said:
        return "warning", f"{said[0].category.__name__}: {said[0].message}"
    return "ok", float(np.mean(pred == y))


def run_estimator(name):
    cls = getattr(xclib, name)
    budget = _small_budget(cls)
    base_est = cls(**budget)
    X, y = _data(base_est)
    outcome, acc = _fit(cls(**budget), X, y, [])
    majority = np.max(np.bincount(y)) / len(y)
    baseline = acc if outcome == "ok" else None
    _emit("defaults (small budget)", outcome if outcome in ("ok", "warning") else "exception",
          acc)
    learns = baseline is not None and baseline > majority + 0.2

    for param, default in cls().get_params().items():
        if param in ("verbose",):
            continue
        for value in BAD_VALUES:
            if isinstance(value, float) and isinstance(default, float) and value == default:
                continue
            if value == 0 and param in BUDGET:
                continue  # a zero budget is rejected (max_iter) or means "do nothing"
            kwargs = dict(budget)
            kwargs[param] = value
            try:
                est = cls(**kwargs)
            except Exception as e:  # noqa: BLE001 - constructors must only store
                _emit(f"{param}={value!r}", "exception", f"constructor: {e}")
                continue
            out, detail = _fit(est, X, y, [param])
            # a huge ridge or tolerance asks for W = 0 / no iteration: not a silent failure
            if out == "ok" and learns and detail <= majority + 0.02 and param not in BUDGET \
                    and not (param in ("alpha", "tol") and value == 1e300):
                out = "degenerate"
            _emit(f"{param}={value!r}", out, detail)

    names = ["nan", "infinity", "inf"]
    Xn = X.copy()
    Xn[3, 1] = np.nan
    _emit("X with NaN", *_fit(cls(**budget), Xn, y, names))
    Xi = X.copy()
    Xi[5, 0] = np.inf
    _emit("X with inf", *_fit(cls(**budget), Xi, y, names))
    for scale in (1e50, 1e200, 1e-50):
        out, detail = _fit(cls(**budget), X * scale, y, ["scale", "large", "overflow"])
        if out == "ok" and learns and scale > 1 and detail < baseline - 0.1:
            out = "degenerate"
        _emit(f"X*{scale:g}", out, detail)
    _emit("sparse X*1e50", *_fit(cls(**budget), sp.csr_matrix(X * 1e50), y, ["scale"]))
    _emit("one class", *_fit(cls(**budget), X, np.zeros(len(y), int), ["class"]))
    _emit("no rows", *_fit(cls(**budget), X[:0], y[:0], ["sample", "0 rows", "empty"]))
    _emit("y too short", *_fit(cls(**budget), X, y[:10], ["samples", "rows", "labels"]))
    est = cls(**budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    for case, Xq in (("predict: wrong width", X[:, :-1]), ("predict: NaN", Xn)):
        try:
            est.predict(Xq)
            _emit(case, "garbage", "no error")
        except (ValueError, TypeError) as e:
            clear = any(w in str(e).lower() for w in ("feature", "nan", "infinity"))
            _emit(case, "error" if clear else "unclear", e)
        except Exception as e:  # noqa: BLE001
            _emit(case, "exception", f"{type(e).__name__}: {e}")


def _oracle_case(case, build, query, names):
    try:
        oracle = build()
        r, _ = query(oracle)
        r = np.asarray(r)
        _emit(case, "garbage", f"returned {r[:5].tolist()} without an error")
    except (ValueError, TypeError) as e:
        clear = any(n.lower() in str(e).lower() for n in names)
        _emit(case, "error" if clear else "unclear", f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001
        _emit(case, "exception", f"{type(e).__name__}: {e}")


def run_oracle(name):
    cls = getattr(xclib, name)
    rng = np.random.default_rng(0)
    K, D, n = 50, 12, 20
    V = rng.standard_normal((K, D))
    Q = sp.random(n, D, density=0.5, format="csr", random_state=np.random.RandomState(0))
    y = rng.integers(0, K, n)
    r, _ = cls().build(V).query(Q, y)
    ok = np.all((0 <= r) & (r < K)) and not np.any(r == y)
    _emit("valid query", "ok" if ok else "garbage", r[:5].tolist())

    wide = sp.random(n, D + 3, density=0.5, format="csr", random_state=np.random.RandomState(1))
    _oracle_case("query wider than V", lambda: cls().build(V), lambda o: o.query(wide, y),
                 ["feature", "width", "column", "dimension"])
    narrow = Q[:, : D - 1]
    _oracle_case("query narrower than V", lambda: cls().build(V), lambda o: o.query(narrow, y),
                 ["feature", "width", "column", "dimension"])
    bad_idx = Q.copy()
    bad_idx.indices[0] = D + 100  # an index past the width its shape claims
    _oracle_case("query index out of range", lambda: cls().build(V),
                 lambda o: o.query(bad_idx, y), ["index", "indices", "column"])
    _oracle_case("exclude shorter than queries", lambda: cls().build(V),
                 lambda o: o.query(Q, y[:-3]), ["exclude"])
    _oracle_case("exclude out of range", lambda: cls().build(V),
                 lambda o: o.query(Q, np.full(n, K + 5)), ["exclude"])
    Vn = V.copy()
    Vn[2, 3] = np.nan
    _oracle_case("V with NaN", lambda: cls().build(Vn), lambda o: o.query(Q, y),
                 ["nan", "finite"])
    _oracle_case("V not 2-D", lambda: cls().build(V[0]), lambda o: o.query(Q, y),
                 ["2-d", "2d", "dimension", "shape"])
    for param, values in {"HNSWMIPS": {"M": (0, -1, 1.5), "ef": (0, -5),
                                       "ef_construction": (0,), "num_threads": (0,)},
                          "SimpleLSH": {"n_bits": (0, -1, 2.5), "n_candidates": (0, -3)},
                          }.get(name, {}).items():
        for value in values:
            _oracle_case(f"{param}={value!r}", lambda: cls(**{param: value}).build(V),
                         lambda o: o.query(Q, y), [param])


if __name__ == "__main__":
    for kind, name in zip(sys.argv[1::2], sys.argv[2::2]):
        print(json.dumps({"start": name}), flush=True)
        (run_estimator if kind == "estimator" else run_oracle)(name)
