"""DS-MLR through a Dask scheduler and two workers started as separate processes.

``dask scheduler`` and two ``dask worker --nthreads 1 --no-nanny`` run on 127.0.0.1 with ports
the OS picks (their addresses travel through a scheduler file); every wait is bounded and every
process is killed in the fixture's finaliser, also when a test fails. The worker that the last
test kills is the module's own, so that test runs last.
"""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from test_dsmlr import _data as small_problem

from xclib.dsmlr import DSMLR, WorkerLostError

ROOT = Path(__file__).resolve().parents[1]
DASK = str(Path(sys.executable).with_name("dask"))
START_TIMEOUT = 90  # seconds for the three processes to come up on a busy machine


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(client, {worker address: its Popen}) for a scheduler and two worker processes."""
    if not os.access(DASK, os.X_OK):
        pytest.fail(f"the dask command line is not next to {sys.executable}")
    from distributed import Client

    tmp = tmp_path_factory.mktemp("dask")
    sched_file = tmp / "scheduler.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])  # the workers import this tree's xclib
    procs, client = [], None

    def start(args, name):
        log = open(tmp / f"{name}.log", "wb")
        procs.append(subprocess.Popen([DASK] + args, env=env, cwd=tmp, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
        log.close()
        return procs[-1]

    try:
        start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
               "--scheduler-file", str(sched_file)], "scheduler")
        t0 = time.monotonic()
        while not sched_file.exists():
            if time.monotonic() - t0 > START_TIMEOUT or procs[0].poll() is not None:
                pytest.fail("dask scheduler did not start: "
                            + (tmp / "scheduler.log").read_text()[-2000:])
            time.sleep(0.1)
        workers = [start(["worker", "--scheduler-file", str(sched_file), "--host",
                          "127.0.0.1", "--nthreads", "1", "--no-nanny", "--no-dashboard",
                          "--death-timeout", "60", "--name", f"w{i}", "--local-directory",
                          str(tmp / f"w{i}")], f"worker{i}") for i in range(2)]
        client = Client(scheduler_file=str(sched_file), timeout=START_TIMEOUT)
        client.wait_for_workers(2, timeout=START_TIMEOUT)
        pids = client.run(os.getpid)
        by_pid = {p.pid: p for p in workers}
        yield client, {addr: by_pid[pid] for addr, pid in pids.items()}
    finally:
        if client is not None:
            client.close(timeout=10)
        _stop(procs)


def _data(n=600, d=30, k=8):
    return small_problem(n=n, d=d, k=k)


def test_workers_are_other_processes(cluster):
    client, procs = cluster
    pids = client.run(os.getpid)
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    assert all(addr.startswith("tcp://127.0.0.1:") for addr in pids)


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_fit_through_worker_processes_matches_threads(cluster, schedule):
    client, _ = cluster
    X, y = _data()
    kw = dict(alpha=1e-3, learning_rate=0.05, n_epochs=6, n_workers=2, schedule=schedule,
              random_state=5)
    ref = DSMLR(backend="threads", **kw).fit(X, y)
    m = DSMLR(backend="dask", client=client, timeout=30, **kw).fit(X, y)
    obj, obj_ref = m.history_["objective"], ref.history_["objective"]
    assert len(obj) == len(obj_ref) == 6 and obj[-1] < obj[0]
    assert abs(obj[-1] - obj_ref[-1]) <= 0.05 * obj_ref[-1]
    # two workers: the ring's order is fixed, so the same numbers up to rounding
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.b_, ref.b_, rtol=1e-10)
    assert len(m.worker_bytes_) == 2 and min(m.worker_bytes_) > 0


def test_scheduler_address_works_like_a_client(cluster):
    client, _ = cluster
    X, y = _data(n=200)
    kw = dict(alpha=1e-3, learning_rate=0.05, n_epochs=2, n_workers=2, random_state=1)
    a = DSMLR(backend="dask", client=client.scheduler.address, **kw).fit(X, y)
    b = DSMLR(backend="serial", **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_the_clients_cached_identity_is_not_trusted(cluster, monkeypatch):
    """``scheduler_info()`` may return a cache that a periodic refresh left without workers
    (a CI run once stopped a fit on it: "workers ... left the cluster" while both lived)."""
    client, _ = cluster
    monkeypatch.setattr(client, "scheduler_info", lambda *a, **k: {"workers": {}})
    X, y = _data(n=200)
    kw = dict(alpha=1e-3, learning_rate=0.05, n_epochs=2, tol=None, n_workers=2,
              random_state=1)
    a = DSMLR(backend="dask", client=client, **kw).fit(X, y)
    b = DSMLR(backend="serial", **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_two_fits_on_the_same_data_share_no_data_keys(cluster, monkeypatch):
    """A fit's scattered blocks get keys of its own: with content-hashed keys, a fit right
    after another on the same data reused keys the scheduler was still releasing, and its
    actors were cancelled ("computation on lost data", seen in CI)."""
    client, _ = cluster
    keys, scatter = [], client.scatter

    def recording(*args, **kwargs):
        out = scatter(*args, **kwargs)
        keys.append({f.key for f in (out if isinstance(out, list) else [out])})
        return out

    monkeypatch.setattr(client, "scatter", recording)
    X, y = _data(n=200)
    kw = dict(alpha=1e-3, learning_rate=0.05, n_epochs=1, tol=None, n_workers=2,
              backend="dask", client=client, random_state=1)
    a = DSMLR(**kw).fit(X, y)
    first = set().union(*keys)
    keys.clear()
    b = DSMLR(**kw).fit(X, y)
    assert first and not first & set().union(*keys)
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_a_killed_worker_ends_the_fit_with_a_clear_error(cluster):
    """Runs last: it kills one of the module's two workers (SIGKILL, mid-fit)."""
    client, procs = cluster
    X, y = _data()
    victim = procs[sorted(procs)[1]]
    killed = []

    def kill():
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30:  # until both actors exist: the epochs run
            n = client.run_on_scheduler(lambda dask_scheduler: sum(
                str(k).startswith("RingWorker") for k in dask_scheduler.tasks))
            if n == 2:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        victim.send_signal(signal.SIGKILL)
        killed.append(time.monotonic())

    timeout = 20.0
    m = DSMLR(alpha=1e-3, learning_rate=0.05, n_epochs=100_000, tol=None, n_workers=2,
              backend="dask", client=client, timeout=timeout, random_state=0)
    killer = threading.Thread(target=kill)
    killer.start()
    try:
        with pytest.raises(WorkerLostError, match="fit on Dask stops") as info:
            m.fit(X, y)
        ended = time.monotonic()
    finally:
        killer.join(timeout=60)
    assert killed, "the worker was not killed"
    assert ended - killed[0] < timeout
    assert not hasattr(m, "coef_")
    print("error:", info.value)
