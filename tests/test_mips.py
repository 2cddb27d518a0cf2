"""MIPS oracles of chapter 5 against NumPy."""
import numpy as np
import pytest
import scipy.sparse as sp

from xclib.mips import (ExactMIPS, HNSWMIPS, SimpleLSH, exact_argmax_other, make_oracle,
                        simple_lsh_transform)


def _data(K=300, D=40, n=60, seed=0):
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((K, D)) * rng.lognormal(0, 0.5, K)[:, None]
    X = sp.random(n, D, density=0.3, random_state=seed, format="csr")
    y = rng.integers(0, K, n)
    return V, X, y


def _numpy_argmax(V, X, y):
    S = np.asarray(X @ V.T)
    S[np.arange(X.shape[0]), y] = -np.inf
    return S.argmax(1), S.max(1)


@pytest.mark.parametrize("order", ["C", "F"])
def test_exact_equals_numpy_argmax(order):
    V, X, y = _data()
    V = np.asarray(V, order=order)
    r, s = exact_argmax_other(X.indptr, X.indices, X.data, y, V)
    r0, s0 = _numpy_argmax(V, X, y)
    np.testing.assert_array_equal(r, r0)
    np.testing.assert_allclose(s, s0, rtol=1e-12, atol=1e-12)
    assert np.all(r != y)
    o = ExactMIPS().build(V)
    r1, _ = o.query(X, y)
    np.testing.assert_array_equal(r1, r0)
    assert o.n_inner_products == X.shape[0] * (V.shape[0] - 1)


def test_exact_follows_updates_of_c_ordered_rows():
    V, X, y = _data()
    o = ExactMIPS().build(V)
    V[5] = 100.0
    o.update(V, [5])
    r, _ = o.query(X, np.zeros(X.shape[0], np.int64))
    np.testing.assert_array_equal(r, _numpy_argmax(V, X, np.zeros(X.shape[0], np.int64))[0])


def test_simple_lsh_transform_makes_inner_product_monotone_in_angle():
    V, _, _ = _data(K=200, D=20)
    rng = np.random.default_rng(1)
    for _ in range(5):
        x = rng.standard_normal(20)
        P, Q = simple_lsh_transform(V, x)
        np.testing.assert_allclose(np.linalg.norm(P, axis=1), 1.0)
        assert abs(np.linalg.norm(Q) - 1.0) < 1e-12
        cos = P @ Q                                  # both unit: cosine of the angle
        ip = V @ x
        M = np.sqrt((V**2).sum(1).max())
        np.testing.assert_allclose(cos, ip / (M * np.linalg.norm(x)), rtol=1e-10, atol=1e-12)
        order = np.argsort(ip)
        assert np.all(np.diff(np.arccos(np.clip(cos[order], -1, 1))) <= 1e-12)


def test_simple_lsh_recall_on_class_like_queries():
    # queries near a row (as training queries are near their class): recall@1 floor 0.9
    rng = np.random.default_rng(0)
    K, D, n = 2000, 64, 300
    V = rng.standard_normal((K, D))
    y = rng.integers(0, K, n)
    target = (y + 1) % K
    X = sp.csr_matrix(V[target] + 0.3 * rng.standard_normal((n, D)))
    o = SimpleLSH(n_bits=128, n_candidates=K // 50, random_state=0).build(V)
    r, s = o.query(X, y)
    r0, s0 = _numpy_argmax(V, X, y)
    assert np.mean(r == r0) >= 0.9
    assert o.n_inner_products == n * (K // 50)           # 50x fewer than exact
    assert np.all(s <= s0 + 1e-12) and np.all(r != y)


def test_simple_lsh_linear_update_equals_rebuild():
    V, X, y = _data(K=100, D=30, n=20)
    o = SimpleLSH(n_bits=64, random_state=3).build(V.copy())
    o.query(X, y)
    rows = np.array([1, 7, 7, 50]); coefs = np.array([0.5, -1.0, 2.0, 0.1]); pos = np.array([0, 3, 4, 19])
    V2 = o.V
    for r_, c, p in zip(rows, coefs, pos):
        V2[r_] += c * X[p].toarray().ravel()
    o.update(V2, np.unique(rows), np.einsum("ij,ij->i", V2, V2), (rows, coefs, pos))
    fresh = SimpleLSH(n_bits=64, random_state=3).build(V2.copy())
    np.testing.assert_allclose(o.P, fresh.P, atol=1e-10)
    np.testing.assert_array_equal(o.codes, fresh.codes)


def test_hnsw_recall_and_update():
    V, X, y = _data(K=500, D=16, n=100)
    o = HNSWMIPS(ef=200).build(V)
    r, _ = o.query(X, y)
    assert np.all(r != y)
    assert np.mean(r == _numpy_argmax(V, X, y)[0]) >= 0.8
    V = V.copy(); V[3] = 50 * np.abs(V[3]).max(); V[3] = np.abs(V[3])
    o.update(V, [3])
    Xp = sp.csr_matrix(np.abs(X.toarray()) + 0.01)
    r, _ = o.query(Xp, np.zeros(Xp.shape[0], np.int64))
    assert np.mean(r == 3) >= 0.95


def test_make_oracle_errors():
    with pytest.raises(ValueError, match="unknown MIPS oracle"):
        make_oracle("kd_tree")
    with pytest.raises(ValueError, match="n_bits"):
        SimpleLSH(n_bits=0)
    o = ExactMIPS()
    assert make_oracle(o) is o
