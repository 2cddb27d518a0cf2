"""Tests of xclib.dsmlr: kernels vs NumPy, eqs. (9)-(12), schedules, backends, Dask failures."""
import math
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

from xclib.dsmlr import (
    DSMLR, DataParallelLBFGS, LBFGSStatus, WorkerLostError, auto_learning_rate, block_lse,
    block_sgd, column_sgd, ds_objective, exact_b, fit_log_concavity, primal_objective,
    simulate_schedules, sync_schedule,
)
from xclib.exact import SoftmaxRegression


@pytest.fixture(scope="module")
def dask_client():
    """Two single-threaded Dask workers in this process (fast to start; the tests with worker
    processes started apart are in test_dsmlr_cluster.py)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                           dashboard_address=None)
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


def _data(n=120, d=15, k=5, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.4, random_state=seed, format="csr")
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel()) + 1e-12
    X = sp.csr_matrix(sp.diags(1 / norms) @ X)
    W = 3 * rng.normal(size=(k, d))
    y = np.argmax(X @ W.T + rng.gumbel(size=(n, k)), axis=1)
    return X, y.astype(np.int64)


# -- kernels against plain NumPy transcriptions -------------------------------------------
def _sgd_numpy(X, y, b, rows, W, cls, off, eta, alpha, K, b_step):
    W = W.copy()
    b = b.copy()
    Xd = X.toarray()
    for i in rows:
        for k in cls:
            s = W[k] @ Xd[i] + b[i]
            g = np.exp(s) - (y[i] == off + k)
            W[k] = W[k] - eta * K * (alpha * W[k] + g * Xd[i])  # eq. (13)
            if b_step:
                b[i] -= b_step * (K * np.exp(s) - 1)
    return W, b


@pytest.mark.parametrize("b_step", [0.0, 0.01])
def test_block_sgd_is_eq13(b_step):
    X, y = _data()
    rng = np.random.default_rng(1)
    W0 = rng.normal(size=(3, X.shape[1])) * 0.1
    b0 = rng.normal(size=X.shape[0]) - 1
    rows = rng.permutation(X.shape[0]).astype(np.int64)
    cls = rng.permutation(3).astype(np.int64)
    W, b = W0.copy(), b0.copy()
    block_sgd(X.indptr, X.indices, X.data, y, b, rows, W, cls, 2, 0.05, 0.1, 5, b_step)
    Wr, br = _sgd_numpy(X, y, b0, rows, W0, cls, 2, 0.05, 0.1, 5, b_step)
    np.testing.assert_allclose(W, Wr, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b, br, rtol=1e-12)


def test_block_sgd_lazy_scale_rescales():
    """A shrink factor that underflows the lazy scale is folded back, not lost."""
    X, y = _data(n=400)
    W = np.ones((2, X.shape[1]))
    b = np.full(X.shape[0], -10.0)
    rows = np.arange(X.shape[0], dtype=np.int64)
    block_sgd(X.indptr, X.indices, X.data, y, b, rows, W, np.arange(2), 0, 0.5, 1.9, 1, 0.0)
    Wr, _ = _sgd_numpy(X, y, np.full(X.shape[0], -10.0), rows, np.ones((2, X.shape[1])),
                       np.arange(2), 0, 0.5, 1.9, 1, 0.0)
    assert np.all(np.isfinite(W))
    np.testing.assert_allclose(W, Wr, rtol=1e-8, atol=1e-300)


def test_block_lse_and_column_sgd():
    X, y = _data()
    rng = np.random.default_rng(2)
    W = rng.normal(size=(4, X.shape[1]))
    out = np.empty(X.shape[0])
    block_lse(X.indptr, X.indices, X.data, W, out)
    np.testing.assert_allclose(out, logsumexp(X @ W.T, axis=1), rtol=1e-12)
    b = rng.normal(size=X.shape[0]) - 2
    rows = rng.permutation(X.shape[0]).astype(np.int64)
    w = W[1].copy()
    acc = np.full(X.shape[0], -np.inf)
    acc[:10] = 0.5
    column_sgd(X.indptr, X.indices, X.data, y, b, rows, w, 1, 0.03, 0.2, 5, acc)
    Wr, _ = _sgd_numpy(X, y, b, rows, W[1:2], np.array([0]), 1, 0.03, 0.2, 5, 0.0)
    np.testing.assert_allclose(w, Wr[0], rtol=1e-10, atol=1e-12)
    s = X @ w
    expect = s.copy()
    expect[:10] = np.logaddexp(0.5, s[:10])
    np.testing.assert_allclose(acc, expect, rtol=1e-12)


# -- the reformulation ----------------------------------------------------------------------
def test_exact_b_recovers_eq2_and_is_stationary():
    X, y = _data()
    rng = np.random.default_rng(3)
    W = rng.normal(size=(5, X.shape[1]))
    b = exact_b(W, X)
    v, _, gb = ds_objective(W, b, X, y, 0.01, with_grad=True)
    np.testing.assert_allclose(v, primal_objective(W, X, y, 0.01), rtol=1e-12)
    np.testing.assert_allclose(gb, 0, atol=1e-14)
    # any other b gives a larger L2 (L2 is convex in b, minimised by eq. (9))
    assert ds_objective(W, b + 0.1 * rng.normal(size=b.shape), X, y, 0.01) > v
    np.testing.assert_allclose(exact_b(np.zeros((5, X.shape[1])), X), -np.log(5))


def test_ds_objective_gradient_finite_differences():
    X, y = _data(n=30, d=6, k=4)
    rng = np.random.default_rng(4)
    W = rng.normal(size=(4, 6))
    b = rng.normal(size=30)
    _, gW, gb = ds_objective(W, b, X, y, 0.3, with_grad=True)
    h = 1e-6
    for (k, j) in [(0, 0), (1, 3), (3, 5)]:
        E = np.zeros_like(W)
        E[k, j] = h
        fd = (ds_objective(W + E, b, X, y, 0.3) - ds_objective(W - E, b, X, y, 0.3)) / (2 * h)
        np.testing.assert_allclose(gW[k, j], fd, rtol=1e-6, atol=1e-9)
    for i in [0, 7, 29]:
        e = np.zeros_like(b)
        e[i] = h
        fd = (ds_objective(W, b + e, X, y, 0.3) - ds_objective(W, b - e, X, y, 0.3)) / (2 * h)
        np.testing.assert_allclose(gb[i], fd, rtol=1e-6, atol=1e-9)


# -- schedules -----------------------------------------------------------------------------
@pytest.mark.parametrize("P", [1, 2, 3, 5])
def test_sync_schedule_covers_every_pair_once(P):
    sched = sync_schedule(P)
    assert len(sched) == P
    pairs = [pq for inner in sched for pq in inner]
    assert sorted(pairs) == [(p, q) for p in range(P) for q in range(P)]
    for inner in sched:  # P disjoint blocks at once
        assert sorted(p for p, _ in inner) == list(range(P))
        assert sorted(q for _, q in inner) == list(range(P))


@pytest.mark.parametrize("backend", ["serial", "threads"])
def test_async_every_column_reaches_every_worker(backend):
    X, y = _data()
    m = DSMLR(alpha=1e-3, learning_rate=0.05, n_epochs=3, n_workers=3, schedule="async",
              backend=backend, random_state=0).fit(X, y)
    assert m.async_visits_.shape == (3, 3, 5)
    assert m.async_visits_.all()


def test_backends_give_the_same_model(dask_client):
    X, y = _data()
    kw = dict(alpha=1e-3, learning_rate=0.1, n_epochs=4, n_workers=2, random_state=7)
    serial = DSMLR(backend="serial", **kw).fit(X, y)
    threads = DSMLR(backend="threads", **kw).fit(X, y)
    dask = DSMLR(backend="dask", client=dask_client, **kw).fit(X, y)
    np.testing.assert_array_equal(serial.coef_, threads.coef_)
    np.testing.assert_array_equal(serial.coef_, dask.coef_)
    # the workers sum the objective in another order: equal to rounding
    np.testing.assert_allclose(serial.history_["objective"], dask.history_["objective"],
                               rtol=1e-13)
    np.testing.assert_array_equal(serial.history_["train_error"],
                                  dask.history_["train_error"])
    again = DSMLR(backend="serial", **kw).fit(X, y)
    np.testing.assert_array_equal(serial.coef_, again.coef_)


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_reaches_the_lbfgs_optimum(schedule):
    X, y = _data(n=300)
    alpha = 1e-2
    opt = SoftmaxRegression(alpha=alpha, tol=1e-10).fit(X, y).objective_
    m = DSMLR(alpha=alpha, learning_rate=0.05, n_epochs=40, tol=None, n_workers=2,
              schedule=schedule, random_state=0).fit(X, y)
    obj = m.history_["objective"]
    assert obj[-1] < obj[0]
    assert (obj[-1] - opt) / opt < 2e-3
    np.testing.assert_allclose(obj[-1], primal_objective(m.coef_, X, y, alpha), rtol=1e-12)


def test_data_parallel_lbfgs_matches_oracle():
    X, y = _data()
    alpha = 1e-2
    opt = SoftmaxRegression(alpha=alpha, tol=1e-10).fit(X, y).objective_
    a = DataParallelLBFGS(alpha=alpha, max_iter=200, tol=1e-10, n_workers=3).fit(X, y)
    np.testing.assert_allclose(a.objective_, opt, rtol=1e-7)
    assert a.status_ == LBFGSStatus.CONVERGED
    b = DataParallelLBFGS(alpha=alpha, max_iter=200, tol=1e-10, n_workers=2,
                          backend="dask").fit(X, y)
    np.testing.assert_allclose(b.objective_, opt, rtol=1e-7)
    assert len(a.history_["objective"]) == a.n_iter_


# -- bad input and clamping ----------------------------------------------------------------
def test_clamps_workers_to_classes():
    X, y = _data(k=3)
    with pytest.warns(UserWarning, match="3 workers are used"):
        m = DSMLR(n_workers=8, n_epochs=2, random_state=0).fit(X, y)
    assert m.n_workers_ == 3


@pytest.mark.parametrize("kw, match", [
    (dict(schedule="nope"), "'schedule' parameter"),
    (dict(backend="mpi"), "'backend' parameter"),
    (dict(learning_rate=-1.0), "'learning_rate' parameter"),
    (dict(learning_rate="optimal"), "'learning_rate' parameter"),
    (dict(alpha=np.nan), "'alpha' parameter"),
    (dict(n_workers=0), "'n_workers' parameter"),
    (dict(timeout=0), "'timeout' parameter"),
    (dict(client=5), "'client' parameter"),
    (dict(learning_rate=10.0, alpha=1.0), "flip the sign"),
    (dict(b_update="stochastic", schedule="async"), "b_update='stochastic'"),
])
def test_bad_parameters(kw, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        DSMLR(n_epochs=1, **kw).fit(X, y)


def test_timeout_zero_is_a_parameter_error_not_a_worker_failure():
    """timeout=0 once surfaced as "worker failed: Empty()" from a thread; now it is refused."""
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = _data()
    with pytest.raises(InvalidParameterError, match="'timeout' parameter .* range"):
        DSMLR(timeout=0, n_workers=2, schedule="async", backend="threads").fit(X, y)


@pytest.mark.parametrize("kw, match", [
    (dict(max_iter=0), "'max_iter' parameter"),
    (dict(alpha=-1.0), "'alpha' parameter"),
    (dict(backend="threads"), "'backend' parameter"),
    (dict(client=3.0), "'client' parameter"),
])
def test_lbfgs_bad_parameters(kw, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        DataParallelLBFGS(**kw).fit(X, y)


def test_lbfgs_warns_at_max_iter():
    from sklearn.exceptions import ConvergenceWarning

    X, y = _data()
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        m = DataParallelLBFGS(max_iter=2).fit(X, y)
    assert m.status_ == LBFGSStatus.MAX_ITER and m.n_iter_ == 2


def test_async_on_dask_visits_every_column_and_matches_serial(dask_client):
    """With P = 2 every column alternates between the two workers, so the ring's order is
    fixed and Dask computes what the serial ring does (to rounding)."""
    X, y = _data()
    kw = dict(alpha=1e-3, learning_rate=0.1, n_epochs=3, n_workers=2, schedule="async",
              random_state=4)
    a = DSMLR(backend="serial", **kw).fit(X, y)
    b = DSMLR(backend="dask", client=dask_client, **kw).fit(X, y)
    assert b.async_visits_.shape == (3, 2, 5) and b.async_visits_.all()
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b.history_["objective"], a.history_["objective"], rtol=1e-12)


def test_dask_divergence_keeps_the_best_weights_like_serial(dask_client):
    X, y = _data()
    kw = dict(alpha=0.0, learning_rate=1e4, n_epochs=3, n_workers=2, random_state=0)
    with pytest.warns(Warning, match="diverged"):
        a = DSMLR(**kw).fit(X, y)
    with pytest.warns(Warning, match="diverged"):
        b = DSMLR(backend="dask", client=dask_client, **kw).fit(X, y)
    assert b.diverged_ and b.n_epochs_ == a.n_epochs_
    np.testing.assert_array_equal(b.coef_, a.coef_)


def test_dask_driver_assembles_w_once(dask_client, monkeypatch):
    """W stays on the workers during the fit: the driver gathers it once, at the end, and the
    history's objective (from the workers' partial sums) is eq. (2) of the final W."""
    from xclib.dsmlr import DaskBackend

    calls = []
    gather = DaskBackend.weights
    monkeypatch.setattr(DaskBackend, "weights",
                        lambda self, *a, **k: calls.append(1) or gather(self, *a, **k))
    X, y = _data()
    m = DSMLR(alpha=1e-3, learning_rate=0.1, n_epochs=4, n_workers=2, backend="dask",
              client=dask_client, random_state=2).fit(X, y)
    assert len(calls) == 1 and m.n_epochs_ == 4
    np.testing.assert_allclose(m.history_["objective"][-1],
                               primal_objective(m.coef_, X, y, 1e-3), rtol=1e-12)


def test_dask_refuses_eval_set(dask_client):
    X, y = _data()
    with pytest.raises(ValueError, match="eval_set is not available with backend='dask'"):
        DSMLR(backend="dask", client=dask_client, n_workers=2).fit(X, y, eval_set=(X, y))


def test_too_large_step_is_reported_not_silent():
    X, y = _data()
    with pytest.warns(Warning, match="diverged"):
        m = DSMLR(alpha=0.0, learning_rate=1e4, n_epochs=3, random_state=0).fit(X, y)
    assert m.diverged_ and np.all(np.isfinite(m.coef_))


# -- Dask reliability ----------------------------------------------------------------------
def test_dask_worker_killed_mid_fit_stops_with_clear_error():
    from distributed import Client, LocalCluster

    X, y = _data(n=200)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                           dashboard_address=None)
    client = Client(cluster)
    try:
        victim = list(cluster.workers.values())[1]

        def kill():
            # wait until the fit is running, then take a worker (and its data block) away
            t0 = time.monotonic()
            while time.monotonic() - t0 < 20:
                n = client.run_on_scheduler(lambda dask_scheduler: sum(
                    k.startswith("RingWorker") for k in map(str, dask_scheduler.tasks)))
                if n == 2:  # the two workers' actors exist: the epochs are running
                    break
                time.sleep(0.05)
            time.sleep(0.5)
            cluster.sync(victim.close)

        killer = threading.Thread(target=kill)
        killer.start()
        kw = dict(alpha=1e-3, learning_rate=0.1, n_epochs=400, n_workers=2, random_state=0)
        m = DSMLR(backend="dask", client=client, timeout=20, **kw)
        try:
            m.fit(X, y)
        except WorkerLostError as exc:
            print("stopped:", exc)
            assert "fit on Dask stops" in str(exc)
            assert not hasattr(m, "coef_")
        else:  # the fit recovered: then it must be the same model as without the failure
            ref = DSMLR(**kw).fit(X, y)
            np.testing.assert_allclose(m.coef_, ref.coef_)
        killer.join()
    finally:
        client.close()
        cluster.close()


# -- defaults, fitted state, pickles ------------------------------------------------------
def _standardised_3_class(cluster_std, n=300, seed=0):
    from sklearn.datasets import make_blobs
    from sklearn.preprocessing import StandardScaler

    X, y = make_blobs(n_samples=n, centers=3, n_features=4, cluster_std=cluster_std,
                      random_state=seed)
    return StandardScaler().fit_transform(X), y


def test_auto_learning_rate_is_the_stability_bound():
    X, y = _data()
    Xd = X.toarray()
    expect = 1.0 / (5 * (np.max(np.sum(Xd * Xd, axis=1)) + 2 * 0.01))
    assert auto_learning_rate(X, 5, 0.01) == pytest.approx(expect, rel=1e-12)
    m = DSMLR(alpha=0.01, n_epochs=1, random_state=0).fit(X, y)
    assert m.learning_rate_ == pytest.approx(expect, rel=1e-12)
    assert DSMLR(learning_rate=0.3, n_epochs=1).fit(X, y).learning_rate_ == 0.3


def test_auto_learning_rate_off_dask_is_the_bolder_typical_step():
    """Rows of unequal norms: off Dask ``"auto"`` takes the geometric mean of the largest and
    the mean ‖x‖² (it can back off); the safe bound of the longest row is smaller."""
    X, y = _data()
    X = sp.csr_matrix(sp.diags(np.linspace(0.5, 4.0, X.shape[0])) @ X)
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    bold = 1.0 / (5 * (np.sqrt(sq.max() * sq.mean()) + 2 * 0.01))
    assert auto_learning_rate(X, 5, 0.01, typical=True) == pytest.approx(bold, rel=1e-12)
    assert auto_learning_rate(X, 5, 0.01) < 0.7 * bold
    m = DSMLR(alpha=0.01, n_epochs=1, tol=None, random_state=0).fit(X, y)
    assert m.learning_rate_ == pytest.approx(bold, rel=1e-12)


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_defaults_converge_on_standardised_data(schedule):
    """DSMLR().fit on standardised 3-class data once diverged and predicted one class."""
    # well separated: the optimum's weights are large and SGD's objective approaches it slowly
    # (70 % above after 10 epochs), but the classifier is as good as the optimum's
    X, y = _standardised_3_class(cluster_std=2.0)
    m = DSMLR(schedule=schedule, random_state=0).fit(X, y)
    assert not m.diverged_
    assert set(np.unique(m.predict(X))) == {0, 1, 2}
    opt = SoftmaxRegression(alpha=1e-4, tol=1e-10).fit(X, y)
    assert m.score(X, y) >= opt.score(X, y) - 0.02
    # overlapping classes: within 6 % of the optimum after the default 10 epochs
    X, y = _standardised_3_class(cluster_std=4.0)
    m = DSMLR(schedule=schedule, random_state=0).fit(X, y)
    opt = SoftmaxRegression(alpha=1e-4, tol=1e-10).fit(X, y)
    obj = m.history_["objective"]
    assert not m.diverged_ and obj[-1] < obj[0] < np.log(3)
    assert (obj[-1] - opt.objective_) / opt.objective_ < 0.06
    lb = DataParallelLBFGS().fit(X, y)
    np.testing.assert_allclose(lb.objective_, opt.objective_, rtol=1e-6)


@pytest.mark.parametrize("scale", [1e-50, 1e50, 1e200])
def test_feature_scale_does_not_matter(scale):
    """The kernels run on X/s, V = s·W (s a power of two): same model as with alpha/s² on X."""
    X, y = _standardised_3_class(cluster_std=4.0)
    m = DSMLR(random_state=0).fit(X * scale, y)
    s = m.learning_rate_  # finite, and W lives on the scale of 1/scale
    assert np.isfinite(s) and np.all(np.isfinite(m.coef_)) and not m.diverged_
    if scale > 1:  # alpha is then negligible against the data: the same classifier
        ref = DSMLR(alpha=0.0, random_state=0).fit(X, y)
        assert m.score(X * scale, y) >= ref.score(X, y) - 0.02
    # x -> c·x, W -> W/c is the same problem when alpha -> alpha·c²
    # (and the W-gradient -> gradient/c: tol scales with it)
    lb = DataParallelLBFGS(alpha=1e-4 * scale**2 if scale < 1e100 else 0.0, max_iter=200,
                           tol=1e-8 * min(scale, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lb.fit(X * scale, y)
        ref = DataParallelLBFGS(alpha=1e-4 if scale < 1e100 else 0.0, max_iter=200,
                                tol=1e-8).fit(X, y)
    np.testing.assert_allclose(lb.coef_ * scale, ref.coef_, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kw", [dict(), dict(n_workers=2, backend="threads"),
                                dict(n_workers=2, backend="dask"),
                                dict(n_workers=2, backend="threads", schedule="async")])
def test_fitted_model_holds_no_state_and_pickles_small(kw, request):
    import pickle

    if kw.get("backend") == "dask":
        kw = dict(kw, client=request.getfixturevalue("dask_client").scheduler.address)
    X, y = _data(n=2000, d=40)
    threads_before = threading.active_count()
    m = DSMLR(n_epochs=2, random_state=0, **kw).fit(X, y)
    params = set(m.get_params())
    assert all(k in params or (k.endswith("_") and not k.startswith("_")) for k in vars(m))
    assert m.b_.shape == (X.shape[0],)
    size = len(pickle.dumps(m))
    # coef_ + b_ (N floats) + history + small attributes; the data alone is ~ 12 nnz bytes
    assert size < 2 * m.coef_.nbytes + 8 * X.shape[0] + 20_000 < X.data.nbytes
    again = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(again.predict(X), m.predict(X))
    if kw.get("backend") == "threads":  # the pool and ring threads are gone
        for _ in range(50):
            if threading.active_count() <= threads_before:
                break
            time.sleep(0.02)
        assert threading.active_count() <= threads_before


def test_dask_b_matches_serial_b(dask_client):
    X, y = _data()
    kw = dict(alpha=1e-3, learning_rate=0.1, n_epochs=2, n_workers=2, random_state=3)
    a = DSMLR(**kw).fit(X, y)
    b = DSMLR(backend="dask", client=dask_client, **kw).fit(X, y)
    np.testing.assert_array_equal(a.b_, b.b_)
    np.testing.assert_allclose(a.b_, exact_b(a.coef_, X), rtol=1e-12)
    assert len(b.worker_bytes_) == 2 and min(b.worker_bytes_) > 0




def _sgd_rows_first(X, y, b, rows, W, cls, off, eta, alpha, K):
    """Eq. (13) in the rows-then-classes order with the lazy scale, exactly as the kernel
    did before its class-by-class loop (same floating-point operations)."""
    W = W.copy()
    scale = np.ones(W.shape[0])
    step = eta * K
    shrink = 1.0 - step * alpha
    for i in rows:
        idx = X.indices[X.indptr[i]:X.indptr[i + 1]]
        val = X.data[X.indptr[i]:X.indptr[i + 1]]
        for k in cls:
            dot = 0.0
            for j, v in zip(idx, val):
                dot += W[k, j] * v
            g = math.exp(scale[k] * dot + b[i]) - (1.0 if y[i] == off + k else 0.0)
            scale[k] *= shrink
            a = -step * g / scale[k]
            for j, v in zip(idx, val):
                W[k, j] += a * v
    return W * scale[:, None]


def test_block_sgd_class_order_is_bit_identical_to_row_order():
    """With the exact b the class-by-class loop changes the memory order, not the numbers."""
    X, y = _data(n=60, d=9, k=7)
    rng = np.random.default_rng(4)
    W0 = rng.normal(size=(7, X.shape[1])) * 0.1
    b = rng.normal(size=X.shape[0]) - 2
    rows = rng.permutation(X.shape[0]).astype(np.int64)
    cls = rng.permutation(7).astype(np.int64)
    W = W0.copy()
    block_sgd(X.indptr, X.indices, X.data, y, b.copy(), rows, W, cls, 0, 0.02, 0.1, 7, 0.0)
    Wr = _sgd_rows_first(X, y, b, rows, W0, cls, 0, 0.02, 0.1, 7)
    np.testing.assert_allclose(W, Wr, rtol=1e-14, atol=1e-15)


def test_block_lse_tiles_cover_every_row():
    """More rows than one tile (and a partial last tile): every row's log-sum-exp."""
    X, _ = _data(n=300, d=6, k=3)
    W = np.random.default_rng(5).normal(size=(5, X.shape[1]))
    out = np.full(X.shape[0], np.nan)
    block_lse(X.indptr, X.indices, X.data, W, out)
    np.testing.assert_allclose(out, logsumexp(X @ W.T, axis=1), rtol=1e-12)


def test_simulated_async_respects_the_link_bandwidth():
    """No worker sends faster than its link: time >= bytes sent per worker / bandwidth."""
    K, D, P = 1000, 50_000, 16
    nnz = np.full(P, 1e5)
    slow = simulate_schedules(nnz, K, D, 1e-12, 1e-12, bandwidth=1e8)
    assert slow["async"]["time"] >= slow["async"]["bytes"] / 1e8
    fast = simulate_schedules(nnz, K, D, 1e-9, 1e-9, bandwidth=1e15, latency=0.0)
    one = simulate_schedules(nnz[:1] * P, K, D, 1e-9, 1e-9, bandwidth=1e15, latency=0.0)
    assert one["async"]["time"] / fast["async"]["time"] > 0.8 * P  # compute-bound: ~linear


def test_log_concavity_decreases_towards_the_optimum():
    X, y = _data(n=80, d=6, k=4)
    res = fit_log_concavity(X, y, 0.05, n_outer=15, inner_iter=20)
    obj = np.array(res.history_["objective"])
    assert np.all(np.diff(obj) <= 1e-10)  # block coordinate descent on L2: monotone
    opt = SoftmaxRegression(alpha=0.05, fit_intercept=False, tol=1e-10).fit(X, y).objective_
    assert obj[-1] - opt < 1e-3 * abs(opt)
    passes = np.diff([0.0] + res.history_["passes"])  # per round: 1 for b, 2 per evaluation
    assert np.all(passes >= 1 + 2 * 1) and np.all(passes <= 1 + 2 * 25)
