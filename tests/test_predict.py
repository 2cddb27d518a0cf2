"""Prediction in bounded memory (:mod:`xclib.predict`): the blocked scan equals the dense
path, top-k equals a brute-force top-k, the MIPS oracles answer top-k queries, the memory
of ``predict`` stays bounded at K = 10^5, and large outputs warn or raise."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import softmax

import xclib.predict as P
from xclib import ExactMIPS, HNSWMIPS, SimpleLSH, SoftmaxRegression
from xclib.predict import LargeOutputWarning, topk_recall

ROOT = Path(__file__).resolve().parents[1]


def _model(K, D, intercept=True, seed=0, classes=None):
    """A SoftmaxRegression holding random weights (as if fitted)."""
    rng = np.random.default_rng(seed)
    m = SoftmaxRegression()
    m.coef_ = rng.standard_normal((K, D))
    m.intercept_ = rng.standard_normal(K) if intercept else None
    m.classes_ = np.arange(K) * 3 + 1 if classes is None else classes
    m.n_features_in_ = D
    return m


def _data(N, D, sparse, seed=1):
    if sparse:
        return sp.random(N, D, density=0.3, random_state=seed, format="csr")
    return np.random.default_rng(seed).standard_normal((N, D))


def _dense_scores(m, X):
    s = np.asarray(X @ m.coef_.T)
    return s + m.intercept_ if m.intercept_ is not None else s


CASES = [  # K, D, N, sparse, intercept, budget (bytes): one tile, row blocks, class chunks
    (7, 5, 30, False, True, None), (50, 20, 100, True, True, None),
    (50, 20, 100, True, False, 800), (50, 20, 100, False, True, 1000),
    (300, 40, 64, True, True, 4096), (2, 9, 40, True, True, 72),
]


@pytest.mark.parametrize("K,D,N,sparse,intercept,budget", CASES)
def test_blocked_methods_equal_the_dense_path(monkeypatch, K, D, N, sparse, intercept,
                                              budget):
    if budget is not None:
        monkeypatch.setattr(P, "SCORE_BLOCK_BYTES", budget)
    m, X = _model(K, D, intercept), _data(N, D, sparse)
    ref = _dense_scores(m, X)
    np.testing.assert_allclose(m.scores(X), ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(m.predict(X), m.classes_[np.argmax(ref, axis=1)])
    np.testing.assert_allclose(m.predict_proba(X), softmax(ref, axis=1), rtol=0, atol=1e-12)
    log_p = ref - np.logaddexp.reduce(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(m.predict_log_proba(X), log_p, rtol=0, atol=1e-12)
    margin = ref[:, 1] - ref[:, 0] if K == 2 else ref
    np.testing.assert_allclose(m.decision_function(X), margin, rtol=0, atol=1e-12)


def test_tiles_cover_the_matrix_once_within_the_budget():
    coef, X = np.ones((37, 11)), sp.random(53, 11, density=0.5, random_state=0, format="csr")
    seen = np.zeros((53, 37), int)
    for r0, r1, c0, c1, s in P.score_tiles(coef, X, budget=8 * 11 * 5):
        assert s.nbytes <= 8 * 11 * 5 and s.shape == (r1 - r0, c1 - c0)
        seen[r0:r1, c0:c1] += 1
    assert np.all(seen == 1)
    assert P.tile_shape(10, 10**5, 1000, 32 << 20) == (10, 4194)
    assert P.tile_shape(10**5, 10**5, 1000, 32 << 20, sparse=True) == (32017, 131)
    with pytest.raises(ValueError, match="budget"):
        P.tile_shape(1, 1, 1, budget=0)


@pytest.mark.parametrize("K,D,N,sparse,intercept,budget", CASES)
def test_predict_topk_equals_brute_force(monkeypatch, K, D, N, sparse, intercept, budget):
    if budget is not None:
        monkeypatch.setattr(P, "SCORE_BLOCK_BYTES", budget)
    m, X = _model(K, D, intercept, seed=K), _data(N, D, sparse, seed=N)
    ref = _dense_scores(m, X)
    for k in sorted({1, min(3, K), K}):
        want = m.classes_[np.argsort(-ref, axis=1, kind="stable")[:, :k]]
        np.testing.assert_array_equal(m.predict_topk(X, k), want)
    np.testing.assert_array_equal(m.predict_topk(X, 1)[:, 0], m.predict(X))


def test_topk_breaks_ties_by_class_order():
    m = _model(6, 3, intercept=False)
    m.coef_[[1, 4]] = m.coef_[2]                 # classes 1, 2, 4 score alike
    m.coef_[[0, 3, 5]] = -10 * np.abs(m.coef_[[0, 3, 5]])
    X = np.abs(_data(5, 3, False)) + 1
    np.testing.assert_array_equal(m.predict_topk(X, 3), np.tile(m.classes_[[1, 2, 4]], (5, 1)))


@pytest.mark.parametrize("k", [0, 8, -1, 2.0, 2.5, True, "3", None])
def test_predict_topk_refuses_a_bad_k(k):
    m = _model(7, 4)
    with pytest.raises(ValueError, match=r"k must .*\[1, 7\]"):
        m.predict_topk(np.ones((2, 4)), k)


def test_predict_topk_through_each_oracle():
    m, X = _model(400, 30, seed=3), _data(60, 30, True, seed=4)
    exact = m.predict_topk(X, 5)
    np.testing.assert_array_equal(m.predict_topk(X, 5, oracle="exact"), exact)
    np.testing.assert_array_equal(m.predict_topk(X, 5, oracle=ExactMIPS()), exact)
    # every row in SimpleLSH's always-re-scored top set: the exact answer
    full = SimpleLSH(n_bits=16, n_top=400, random_state=0)
    np.testing.assert_array_equal(m.predict_topk(X, 5, oracle=full), exact)
    lsh = m.predict_topk(X, 5, oracle=SimpleLSH(n_bits=64, n_candidates=40, random_state=0))
    hnsw = m.predict_topk(X, 5, oracle=HNSWMIPS(ef=200, M=16))
    faiss = HNSWMIPS(ef=3, M=16, ef_construction=100, backend="faiss")
    assert 0.2 < topk_recall(lsh, exact) < 1.0      # an approximation, better than chance
    assert topk_recall(hnsw, exact) >= 0.95
    assert topk_recall(m.predict_topk(X, 5, oracle=faiss), exact) >= 0.7   # searched at ef 5
    assert faiss.n_graph_distances > 0 and faiss.index.hnsw.efSearch == 3    # ef restored
    # what an oracle returns is sorted by the exact score
    s = _dense_scores(m, X)
    pos = np.searchsorted(m.classes_, lsh)
    got = np.take_along_axis(s, pos, 1)
    assert np.all(np.diff(got, axis=1) <= 0)


def test_an_oracle_is_built_once_per_model_and_rebuilt_after_a_change():
    m, X = _model(50, 8, seed=5), _data(20, 8, True)
    o = ExactMIPS()
    m.predict_topk(X, 2, oracle=o)
    V = o.V
    m.predict_topk(X, 2, oracle=o)
    assert o.V is V                                   # reused
    m.coef_ = m.coef_[::-1].copy()                    # a refit makes new arrays
    np.testing.assert_array_equal(m.predict_topk(X, 2, oracle=o), m.predict_topk(X, 2))
    with pytest.raises(ValueError, match="unknown MIPS oracle"):
        m.predict_topk(X, 2, oracle="annoy")
    with pytest.raises(TypeError, match="oracle must be"):
        m.predict_topk(X, 2, oracle=object())


def test_oracle_query_topk_checks_k_and_the_index():
    o = SimpleLSH()
    with pytest.raises(ValueError, match="build"):
        o.query_topk(sp.csr_matrix(np.ones((1, 3))), 1)
    o.build(np.eye(3))
    with pytest.raises(ValueError, match="k must"):
        o.query_topk(sp.csr_matrix(np.ones((1, 3))), 4)
    with pytest.raises(ValueError, match="columns"):
        o.query_topk(sp.csr_matrix(np.ones((1, 2))), 1)


def test_topk_recall():
    assert topk_recall([[1, 2], [3, 4]], [[2, 1], [3, 5]]) == 0.75
    assert topk_recall([[0]], [[1]]) == 0.0
    with pytest.raises(ValueError, match="shape"):
        topk_recall([[1, 2]], [[1]])


def test_large_outputs_warn_and_impossible_ones_raise(monkeypatch):
    m, X = _model(10, 4), _data(30, 4, False)
    monkeypatch.setattr(P, "LARGE_OUTPUT_BYTES", 1000)
    for method in (m.predict_proba, m.predict_log_proba, m.decision_function, m.scores):
        with pytest.warns(LargeOutputWarning, match=rf"{method.__name__} returns a 30 × 10 "
                                                     "float64 array"):
            method(X)
    with warnings.catch_warnings():                   # predict needs no N × K array
        warnings.simplefilter("error")
        m.predict(X), m.predict_topk(X, 3)
    phys = P._physical_memory()
    huge = _model(int(phys // (8 * 10**5)) + 10, 1, intercept=False)
    Xh = sp.csr_matrix((10**5, 1))                    # N × K × 8 bytes > physical memory
    with pytest.raises(MemoryError, match="GiB of memory; use predict or predict_topk"):
        huge.predict_proba(Xh)
    assert huge.predict(Xh[:3]).shape == (3,)


_MEMORY_PROBE = textwrap.dedent("""
    import json, resource, sys
    import numpy as np, scipy.sparse as sp
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))   # a dense N × K would fail
    from xclib import SoftmaxRegression
    N, K, D, nnz = 20_000, 100_000, 1_000, 5
    rng = np.random.default_rng(0)
    m = SoftmaxRegression()
    m.coef_ = rng.standard_normal((K, D))                 # 800 MB of weights
    m.intercept_, m.classes_, m.n_features_in_ = rng.standard_normal(K), np.arange(K), D
    cols = rng.integers(0, D, (N, nnz))
    X = sp.csr_matrix((rng.standard_normal(N * nnz), cols.ravel(),
                       np.arange(0, N * nnz + 1, nnz)), shape=(N, D))
    X.sum_duplicates()
    m.predict(X[:2])                                      # imports, first calls
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    y = m.predict(X)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ok = bool(np.array_equal(y[:50], np.argmax(X[:50] @ m.coef_.T + m.intercept_, axis=1)))
    json.dump({"before": before, "peak": peak, "n": int(y.shape[0]), "ok": ok}, sys.stdout)
""")


def test_predict_at_K_1e5_stays_under_2_GB(tmp_path):
    """N = 2·10^4 rows, K = 10^5 classes, D = 1,000: the dense N × K scores would be 16 GB.

    Measured in a fresh process (its peak resident memory, and an address-space limit of
    8 GiB so that a dense path fails fast instead of swapping): peak under 2 GB with the
    800 MB of weights, and under 400 MB more than before ``predict`` (a full transposed copy
    of the weights, 800 MB, would also fail)."""
    res = subprocess.run([sys.executable, "-c", _MEMORY_PROBE], capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert out["n"] == 20_000 and out["ok"]
    assert out["peak"] < 2e9, f"peak resident memory {out['peak'] / 1e9:.2f} GB"
    assert out["peak"] - out["before"] < 400e6, (
        f"predict added {(out['peak'] - out['before']) / 1e6:.0f} MB")
