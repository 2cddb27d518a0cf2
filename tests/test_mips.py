"""MIPS oracles of chapter 5 against NumPy; their input checks; properties with hypothesis."""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def test_simple_lsh_answers_zero_rows_without_inner_products():
    # every query scores negative on the non-zero rows: the best other class is a zero row
    # (score 0), found without hashing it and without an inner product
    rng = np.random.default_rng(1)
    K, D, n = 400, 30, 50
    V = np.zeros((K, D))
    V[:20] = -np.abs(rng.standard_normal((20, D)))
    X = sp.csr_matrix(np.abs(rng.standard_normal((n, D))))
    y = rng.integers(0, 20, n)
    o = SimpleLSH(n_bits=64, n_candidates=5, random_state=0).build(V)
    r, s = o.query(X, y)
    r0, s0 = _numpy_argmax(V, X, y)
    np.testing.assert_array_equal(s, 0.0)
    np.testing.assert_array_equal(r, r0)                  # the smallest zero row, as exact
    assert o.n_inner_products <= n * 5


def _norm_dominated_problem(K=3000, D=400, n=300, seed=0):
    # as in MEMOIR's weights at large K with Zipf class sizes: a few head rows have large
    # norms and win the argmax on their norm at a wide angle; the many tail rows are small
    rng = np.random.default_rng(seed)
    V = np.zeros((K, D))
    for k in range(K):
        V[k, rng.choice(D, 8, replace=False)] = rng.standard_normal(8)
    V *= np.where(np.arange(K) < 20, 50.0, 1.0)[:, None] * rng.lognormal(0, 0.3, K)[:, None]
    V[:20] += rng.standard_normal((20, D))               # head rows: dense, wide angles
    y = rng.integers(20, K, n)
    X = sp.csr_matrix(np.where(rng.random((n, D)) < 0.03, rng.standard_normal((n, D)), 0.0))
    return V, X, y


def test_top_norm_rows_raise_recall_when_norms_decide():
    V, X, y = _norm_dominated_problem()
    K, n = V.shape[0], X.shape[0]
    _, s0 = _numpy_argmax(V, X, y)
    recall = {}
    for top in (0, 20):
        o = SimpleLSH(n_bits=64, n_candidates=K // 100, n_top=top, random_state=0).build(V)
        r, s = o.query(X, y)
        np.testing.assert_allclose(s, np.asarray(X.multiply(V[r]).sum(1)).ravel(),
                                   rtol=1e-10, atol=1e-12)   # exact scores of what it returns
        assert np.all(r != y) and np.all(s <= s0 + 1e-12)
        assert o.n_inner_products <= n * (K // 100 + top)
        recall[top] = np.mean(s >= s0 - 1e-12)
    assert recall[20] >= 0.8 and recall[20] >= recall[0] + 0.2, recall


def test_top_norm_rows_follow_updates():
    V, X, y = _norm_dominated_problem(K=400, n=40)
    o = SimpleLSH(n_bits=64, n_candidates=4, n_top=5, random_state=0).build(V)
    V[300] *= 1000.0                                     # a tail row becomes the largest
    o.update(V, [300])
    assert 300 in o._top_rows()
    fresh = SimpleLSH(n_bits=64, n_candidates=4, n_top=5, random_state=0).build(V)
    np.testing.assert_array_equal(o.query(X, y)[0], fresh.query(X, y)[0])


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
    assert o.n_rebuilds == 0                       # one row: replaced in place
    V = -V; V[7] = 50 * np.abs(V).max()            # every row changed: a fresh graph
    o.update(V, np.arange(V.shape[0]))
    assert o.n_rebuilds == 1
    r, _ = o.query(Xp, np.zeros(Xp.shape[0], np.int64))
    assert np.mean(r == 7) >= 0.95


def _faiss_problem(K=5000, D=32, n=200, seed=0):
    """Rows with Zipf-like norms and queries near a row (as training queries are)."""
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((K, D)) * rng.lognormal(0, 0.5, K)[:, None]
    y = rng.integers(0, K, n)
    X = sp.csr_matrix(V[(y + 1) % K] + 0.5 * rng.standard_normal((n, D)))
    return V, X, y


def test_hnsw_faiss_counts_its_graph_distances():
    faiss = pytest.importorskip("faiss")
    K, k = 5000, 2
    V, X, y = _faiss_problem(K=K)
    n = X.shape[0]
    per_query = {}
    for ef in (10, 50, 200):
        o = HNSWMIPS(ef=ef, M=16, ef_construction=100, backend="faiss").build(V)
        deltas = []
        for lo in range(0, n, 64):                 # per batch: faiss's own counter
            before = faiss.cvar.hnsw_stats.ndis
            o.query(X[lo:lo + 64], y[lo:lo + 64])
            deltas.append(faiss.cvar.hnsw_stats.ndis - before)
        assert o.n_graph_distances == sum(deltas)
        # + the entry point's distance and the exact re-scoring, one of each per query
        assert o.n_inner_products == o.n_graph_distances + 2 * n
        assert o.n_queries == n
        per_query[ef] = o.n_inner_products / n
        assert k < per_query[ef] < K, per_query[ef]
    assert per_query[10] < per_query[50] < per_query[200]


def test_hnsw_faiss_recall_threads_and_rebuild():
    faiss = pytest.importorskip("faiss")
    V, X, y = _faiss_problem(K=2000, D=16, n=200)
    threads = faiss.omp_get_max_threads()
    o = HNSWMIPS(ef=200, M=16, ef_construction=200, backend="faiss").build(V)
    r, s = o.query(X, y)
    r0, s0 = _numpy_argmax(V, X, y)
    assert np.all(r != y) and np.mean(r == r0) >= 0.9
    np.testing.assert_allclose(s, np.asarray(X.multiply(V[r]).sum(axis=1)).ravel())
    assert faiss.omp_get_max_threads() == threads
    # the faiss graph cannot replace a vector: update rebuilds it and follows the new row
    V = V.copy(); V[3] = 50 * np.abs(V).max(); o.update(V, [3])
    assert o.n_rebuilds == 1
    Xp = sp.csr_matrix(np.ones((20, V.shape[1])))
    r, _ = o.query(Xp, np.zeros(20, np.int64))
    assert np.all(r == 3)
    o.update(V, [])
    assert o.n_rebuilds == 1
    # hnswlib does not report its graph distances: no number rather than a wrong one
    h = HNSWMIPS(ef=20).build(V)
    h.query(X, y)
    assert h.n_graph_distances is None and h.n_inner_products == X.shape[0]


def test_hnsw_faiss_is_seeded_and_backend_checked():
    pytest.importorskip("faiss")
    V, X, y = _faiss_problem(K=500, D=8, n=50)
    a = HNSWMIPS(ef=30, M=4, random_state=7, backend="faiss").build(V).query(X, y)[0]
    b = HNSWMIPS(ef=30, M=4, random_state=7, backend="faiss").build(V).query(X, y)[0]
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="backend must be one of"):
        HNSWMIPS(backend="nmslib")
    with pytest.raises(ValueError, match="backend must be one of"):
        HNSWMIPS(backend=None)


def test_make_oracle_errors():
    with pytest.raises(ValueError, match="unknown MIPS oracle"):
        make_oracle("kd_tree")
    with pytest.raises(ValueError, match="n_bits"):
        SimpleLSH(n_bits=0)
    o = ExactMIPS()
    assert make_oracle(o) is o


# ------------------------------------------------------------------ input validation ----------
ORACLE_FACTORIES = {"exact": ExactMIPS, "simple_lsh": lambda: SimpleLSH(random_state=0),
                    "hnsw": lambda: HNSWMIPS(ef=20, M=4),
                    "hnsw_faiss": lambda: HNSWMIPS(ef=20, M=4, backend="faiss")}


# Calls that used to kill the interpreter (hnswlib with M = 0, numba kernels reading past V)
# run in ONE fresh interpreter: a segfault there fails these tests instead of ending the run.
_CRASH_CASES = {
    **{f"HNSWMIPS({kw})": f"HNSWMIPS({kw}).build(np.ones((5, 3)))" for kw in [
        "M=0", "M=1", "M=2.5", "ef=0", "ef_construction=0", "num_threads=0", "random_state=-1",
        "random_state='a'"]},
    "Memoir(oracle='hnsw', hnsw_M=0)": "Memoir(oracle='hnsw', hnsw_M=0, max_iter=2).fit(Xs, ys)",
    **{f"{o} index past width": f"{o}.build(V).query(Xpast, np.zeros(3, np.int64))"
       for o in ("ExactMIPS()", "SimpleLSH()")},
    **{f"{o} much wider X": f"{o}.build(V).query(sp.csr_matrix(np.ones((3, 7000))), [0, 0, 0])"
       for o in ("ExactMIPS()", "SimpleLSH()")},
    **{f"{o} short exclude": f"{o}.build(V).query(sp.csr_matrix(np.ones((3, 8))), [0])"
       for o in ("ExactMIPS()", "SimpleLSH()")},
}
_CRASH_SCRIPT = """
import numpy as np, scipy.sparse as sp
from xclib.mips import ExactMIPS, HNSWMIPS, SimpleLSH
from xclib.memoir import Memoir, make_prototype_data
Xs, ys = make_prototype_data(60, 20, 4, nnz_per_row=4, random_state=0)
V = np.random.default_rng(0).standard_normal((50, 8))
Xpast = sp.csr_matrix((np.ones(3), np.array([5, 10**6, 7]), np.arange(4)), shape=(3, 8))
for label, call in CASES.items():
    print(label, "::", end=" ", flush=True)
    try:
        eval(call)
        print("answered", flush=True)
    except ValueError as e:
        print("refused:", str(e).replace(chr(10), " "), flush=True)
"""


@pytest.fixture(scope="module")
def crash_run():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", f"CASES = {_CRASH_CASES!r}" + _CRASH_SCRIPT],
                          capture_output=True, text=True, timeout=600)
    lines = dict(line.split(" :: ", 1) for line in proc.stdout.splitlines() if " :: " in line)
    return proc, lines


@pytest.mark.parametrize("label,match", [
    ("HNSWMIPS(M=0)", "M must be an int >= 2"), ("HNSWMIPS(M=1)", "M must be an int >= 2"),
    ("HNSWMIPS(M=2.5)", "M must be an int"), ("HNSWMIPS(ef=0)", "ef must be"),
    ("HNSWMIPS(ef_construction=0)", "ef_construction must be"),
    ("HNSWMIPS(num_threads=0)", "num_threads must be"),
    ("HNSWMIPS(random_state=-1)", "random_state"), ("HNSWMIPS(random_state='a')", "random_state"),
    ("Memoir(oracle='hnsw', hnsw_M=0)", "'hnsw_M' parameter"),
    ("ExactMIPS() index past width", "column index outside"),
    ("SimpleLSH() index past width", "column index outside"),
    ("ExactMIPS() much wider X", "7000 columns"), ("SimpleLSH() much wider X", "7000 columns"),
    ("ExactMIPS() short exclude", "1 entries but X has 3 rows"),
    ("SimpleLSH() short exclude", "1 entries but X has 3 rows"),
])
def test_crash_prone_calls_are_refused_in_a_fresh_interpreter(crash_run, label, match):
    proc, lines = crash_run
    assert label in lines, (
        f"the interpreter died before or during {label!r}: exit code {proc.returncode} "
        f"(negative: killed by a signal)\nstderr: {proc.stderr[-2000:]}")
    assert lines[label].startswith("refused:") and match in lines[label], lines[label]


def _bad_queries(D=6, n=4):
    """(label, X, exclude, expected message) for queries the kernels must never see."""
    rng = np.random.default_rng(0)
    good = sp.csr_matrix(rng.random((n, D)))
    ex = np.zeros(n, np.int64)
    past = sp.csr_matrix((np.ones(n), np.full(n, D + 40), np.arange(n + 1)), shape=(n, D))
    return [
        ("index past V's width", past, ex, "column index outside"),
        ("wider X", sp.hstack([good, good]).tocsr(), ex, "columns"),
        ("slightly wrong width", good[:, :D - 1], ex, "columns"),
        ("exclude too short", good, ex[:-1], "one excluded class per query"),
        ("exclude too long", good, np.zeros(n + 3, np.int64), "one excluded class per query"),
        ("exclude float", good, ex.astype(float) + 0.5, "integer"),
        ("exclude out of range", good, ex + 99, "outside"),
        ("exclude negative", good, ex - 1, "outside"),
        ("exclude 2-D", good, ex[:, None], "1-D"),
        ("NaN in X", sp.csr_matrix(np.where(good.toarray() > 0.5, np.nan, 1.0)), ex, "NaN"),
        ("1-D X", np.ones(D), ex[:1], "2-D"),
    ]


@pytest.mark.parametrize("oracle", sorted(ORACLE_FACTORIES))
def test_oracles_refuse_bad_queries_before_the_kernel(oracle):
    V = np.random.default_rng(1).standard_normal((5, 6))
    o = ORACLE_FACTORIES[oracle]().build(V)
    for label, X, ex, match in _bad_queries():
        with pytest.raises(ValueError, match=match):
            o.query(X, ex)
        assert label


def test_kernel_guard_catches_what_bypasses_the_oracle():
    V, X, y = _data(K=10, D=5, n=4)
    with pytest.raises(ValueError, match="exclude"):
        exact_argmax_other(X.indptr, X.indices, X.data, y[:2], V)
    bad = X.indices.copy()
    bad[0] = 500
    with pytest.raises(ValueError, match="column indices"):
        exact_argmax_other(X.indptr, bad, X.data, y, V)


@pytest.mark.parametrize("oracle", sorted(ORACLE_FACTORIES))
def test_oracles_check_weights_updates_and_detach(oracle):
    o = ORACLE_FACTORIES[oracle]()
    with pytest.raises(ValueError, match="call build"):
        o.query(sp.csr_matrix(np.ones((1, 3))), [0])
    for V, match in [(np.ones((1, 3)), "K >= 2"), (np.ones(3), "2-D"),
                     (np.full((3, 2), np.nan), "NaN"), (np.array([["a", "b"]] * 3), "real")]:
        with pytest.raises(ValueError, match=match):
            o.build(V)
    V = np.random.default_rng(0).standard_normal((6, 4))
    o.build(V)
    with pytest.raises(ValueError, match="shape"):
        o.update(np.ones((6, 5)), [0])
    with pytest.raises(ValueError, match="outside"):
        o.update(V, [6])
    o.query(sp.csr_matrix(np.ones((2, 4))), [0, 1])
    n_ip = o.n_inner_products
    o.detach()
    assert all(not isinstance(v, np.ndarray) or v.size < 8 for v in vars(o).values())
    assert o.n_inner_products == n_ip
    with pytest.raises(ValueError, match="call build"):
        o.query(sp.csr_matrix(np.ones((1, 4))), [0])


def test_simple_lsh_parameters():
    for kw, match in [(dict(n_bits=0), "n_bits"), (dict(n_bits=1.5), "n_bits"),
                      (dict(n_candidates=0), "n_candidates"), (dict(n_top=-1), "n_top"),
                      (dict(n_top=1.5), "n_top")]:
        with pytest.raises(ValueError, match=match):
            SimpleLSH(**kw)


# ------------------------------------------------------------------ properties (hypothesis) ---

_SETTINGS = settings(max_examples=60, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@st.composite
def _problems(draw, max_K=25, max_D=12, max_n=10):
    """Integer-valued V and X (sums are exact, so ties are real ties) and valid excludes."""
    K = draw(st.integers(2, max_K))
    D = draw(st.integers(1, max_D))
    n = draw(st.integers(0, max_n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    V = rng.integers(-3, 4, (K, D)).astype(float)
    dense = rng.integers(-2, 3, (n, D)) * (rng.random((n, D)) < draw(st.floats(0.1, 1.0)))
    X = sp.csr_matrix(dense.astype(float), shape=(n, D))
    exclude = rng.integers(0, K, n)
    order = draw(st.sampled_from(["C", "F"]))
    return np.asarray(V, order=order), X, exclude


@_SETTINGS
@given(_problems())
def test_property_exact_is_brute_force_argmax(problem):
    V, X, ex = problem
    r, s = ExactMIPS().build(V).query(X, ex)
    if X.shape[0] == 0:
        assert r.shape == (0,) and s.shape == (0,)
        return
    r0, s0 = _numpy_argmax(V, X, ex)
    np.testing.assert_array_equal(r, r0)
    np.testing.assert_array_equal(s, s0)


@_SETTINGS
@given(_problems(), st.sampled_from(["simple_lsh", "hnswlib", "faiss"]), st.integers(1, 70))
def test_property_inexact_oracles_return_valid_non_excluded_rows(problem, oracle, knob):
    V, X, ex = problem
    o = (SimpleLSH(n_bits=knob, n_candidates=1 + knob % 5, random_state=knob)
         if oracle == "simple_lsh" else
         HNSWMIPS(ef=knob, M=2 + knob % 6, random_state=knob, backend=oracle))
    o.build(V)
    r, s = o.query(X, ex)
    K = V.shape[0]
    assert r.shape == (X.shape[0],) and r.dtype == np.int64
    assert np.all((r >= 0) & (r < K)) and np.all(r != ex)
    if X.shape[0]:
        exact = np.asarray(X.multiply(V[r]).sum(axis=1)).ravel()
        np.testing.assert_allclose(s, exact, atol=1e-9)     # the reported score is r's
        assert np.all(s <= _numpy_argmax(V, X, ex)[1] + 1e-9)
