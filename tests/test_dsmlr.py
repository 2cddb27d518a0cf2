"""Tests of xclib.dsmlr: kernels vs NumPy, eqs. (9)-(12), schedules, backends, Dask failures."""
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp
from sklearn.utils.estimator_checks import parametrize_with_checks

from xclib.dsmlr import (
    DSMLR, DataParallelLBFGS, WorkerLostError, block_lse, block_sgd, column_sgd,
    ds_objective, exact_b, primal_objective, sync_schedule,
)
from xclib.exact import SoftmaxRegression


def _data(n=120, d=15, k=5, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.4, random_state=seed, format="csr")
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel()) + 1e-12
    X = sp.csr_matrix(sp.diags(1 / norms) @ X)
    W = 3 * rng.normal(size=(k, d))
    y = np.argmax(X @ W.T + rng.gumbel(size=(n, k)), axis=1)
    return X, y.astype(np.int64)


# -- kernels against plain NumPy transcriptions -------------------------------------------
def _sgd_numpy(X, y, b, rows, W, cls, off, eta, lam, K, b_step):
    W = W.copy()
    b = b.copy()
    Xd = X.toarray()
    for i in rows:
        for k in cls:
            s = W[k] @ Xd[i] + b[i]
            g = np.exp(s) - (y[i] == off + k)
            W[k] = W[k] - eta * K * (lam * W[k] + g * Xd[i])  # eq. (13)
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
    m = DSMLR(lam=1e-3, eta0=0.05, n_epochs=3, n_workers=3, schedule="async", backend=backend,
              random_state=0).fit(X, y)
    assert m.async_visits_.shape == (3, 3, 5)
    assert m.async_visits_.all()


def test_backends_give_the_same_model():
    X, y = _data()
    kw = dict(lam=1e-3, eta0=0.1, n_epochs=4, n_workers=2, random_state=7)
    serial = DSMLR(backend="serial", **kw).fit(X, y)
    threads = DSMLR(backend="threads", **kw).fit(X, y)
    dask = DSMLR(backend="dask", **kw).fit(X, y)
    np.testing.assert_array_equal(serial.coef_, threads.coef_)
    np.testing.assert_array_equal(serial.coef_, dask.coef_)
    np.testing.assert_array_equal(serial.history_["objective"], dask.history_["objective"])
    again = DSMLR(backend="serial", **kw).fit(X, y)
    np.testing.assert_array_equal(serial.coef_, again.coef_)


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_reaches_the_lbfgs_optimum(schedule):
    X, y = _data(n=300)
    lam = 1e-2
    opt = SoftmaxRegression(mu=lam * X.shape[0], tol=1e-10).fit(X, y).objective_
    m = DSMLR(lam=lam, eta0=0.05, n_epochs=40, n_workers=2, schedule=schedule,
              random_state=0).fit(X, y)
    obj = m.history_["objective"]
    assert obj[-1] < obj[0]
    assert (obj[-1] - opt) / opt < 2e-3
    np.testing.assert_allclose(obj[-1], primal_objective(m.coef_, X, y, lam), rtol=1e-12)


def test_data_parallel_lbfgs_matches_oracle():
    X, y = _data()
    lam = 1e-2
    opt = SoftmaxRegression(mu=lam * X.shape[0], tol=1e-10).fit(X, y).objective_
    a = DataParallelLBFGS(lam=lam, max_iter=200, n_workers=3).fit(X, y)
    np.testing.assert_allclose(a.objective_, opt, rtol=1e-7)
    b = DataParallelLBFGS(lam=lam, max_iter=200, n_workers=2, backend="dask").fit(X, y)
    np.testing.assert_allclose(b.objective_, opt, rtol=1e-7)
    assert len(a.history_["objective"]) == a.n_iter_


# -- bad input and clamping ----------------------------------------------------------------
def test_clamps_workers_to_classes():
    X, y = _data(k=3)
    with pytest.warns(UserWarning, match="3 workers are used"):
        m = DSMLR(n_workers=8, n_epochs=2, random_state=0).fit(X, y)
    assert m.n_workers_ == 3


@pytest.mark.parametrize("kw, match", [
    (dict(schedule="nope"), "schedule"),
    (dict(backend="mpi"), "backend"),
    (dict(eta0=-1.0), "eta0"),
    (dict(lam=np.nan), "lam"),
    (dict(eta0=10.0, lam=1.0), "flip the sign"),
    (dict(n_workers=0), "n_workers"),
    (dict(b_update="stochastic", schedule="async"), "stochastic"),
])
def test_bad_parameters(kw, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        DSMLR(n_epochs=1, **kw).fit(X, y)


def test_async_on_dask_says_why_not():
    X, y = _data()
    with pytest.raises(NotImplementedError, match="not implemented on Dask"):
        DSMLR(schedule="async", backend="dask", n_epochs=1).fit(X, y)


def test_too_large_step_is_reported_not_silent():
    X, y = _data()
    with pytest.warns(Warning, match="diverged"):
        m = DSMLR(lam=0.0, eta0=1e4, n_epochs=3, random_state=0).fit(X, y)
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
                n = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
                if n > 20:
                    break
                time.sleep(0.05)
            cluster.sync(victim.close)

        killer = threading.Thread(target=kill)
        killer.start()
        m = DSMLR(lam=1e-3, eta0=0.1, n_epochs=400, n_workers=2, backend="dask", client=client,
                  timeout=20, random_state=0)
        try:
            m.fit(X, y)
        except WorkerLostError as exc:
            print("stopped:", exc)
            assert "fit stops" in str(exc) or "timeout" in str(exc)
            assert not hasattr(m, "coef_")
        else:  # the fit recovered: then it must be the same model as without the failure
            ref = DSMLR(lam=1e-3, eta0=0.1, n_epochs=400, n_workers=2, random_state=0).fit(X, y)
            np.testing.assert_allclose(m.coef_, ref.coef_)
        killer.join()
    finally:
        client.close()
        cluster.close()


# -- scikit-learn estimator checks ---------------------------------------------------------
@parametrize_with_checks(
    [DSMLR(n_epochs=3, eta0=0.05, lam=1e-3, random_state=0),
     DSMLR(n_epochs=3, eta0=0.05, lam=1e-3, n_workers=2, backend="threads", random_state=0)],
    expected_failed_checks=lambda est: {},
)
def test_sklearn_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)
