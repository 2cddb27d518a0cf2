"""The notebooks' helpers (xclib.book): settings by scale, warm timings, fits side by side."""
import numpy as np
import pytest

from xclib.book import by_scale, one_per_core, time_fit, warm_up
from xclib.exact import SoftmaxRegression


def test_by_scale_updates_book_with_full_and_refuses_unknown_scales():
    assert by_scale("book", dict(a=1, b=2), dict(b=3)) == dict(a=1, b=2)
    assert by_scale("full", dict(a=1, b=2), dict(b=3)) == dict(a=1, b=3)
    with pytest.raises(ValueError, match="scale must be one of"):
        by_scale("ci", dict(a=1))


def _fit_score(seed, alpha):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 4))
    y = np.argmax(X[:, :3], axis=1)
    return SoftmaxRegression(alpha=alpha).fit(X, y).score(X, y), seed


def test_one_per_core_matches_the_serial_results_in_order():
    jobs = [(s, a) for s in (0, 1, 2) for a in (1e-3, 1e-1)]
    got = one_per_core(_fit_score, jobs, n_jobs=2)
    assert got == [_fit_score(*job) for job in jobs]
    assert one_per_core(_fit_score, jobs[:1]) == [_fit_score(*jobs[0])]
    assert one_per_core(_fit_score, []) == []


def test_warm_up_leaves_the_estimator_unfitted_and_time_fit_times_the_fit():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), rng.integers(3, size=200)
    est = SoftmaxRegression()
    warm_up(est, X, y)
    assert not hasattr(est, "coef_")
    fitted, seconds = time_fit(est, X, y)
    assert fitted is est and hasattr(est, "coef_") and 0 < seconds < 60


def test_others_load_sees_a_busy_neighbour_and_not_itself():
    # Only what a neighbour cannot move is asserted: other processes (the other pytest
    # worker) may load the machine more in one block than in the next.
    import os
    import subprocess
    import sys
    import time

    from xclib.book import others_load

    with others_load() as alone:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:  # this process's own work is not "others"
            pass
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        with others_load() as shared:
            time.sleep(1.0)
    finally:
        busy.kill()
        busy.wait()
    with others_load() as child:  # a child this process waits for is its own work
        subprocess.run([sys.executable, "-c",
                        "import time\nt = time.perf_counter()\n"
                        "while time.perf_counter() - t < 1.0: pass"], check=True)
    # A busy loop gets less than a whole core when the host takes time from this virtual
    # machine's cores (a CI run measured 0.61 for the loop alone), so "counted" is asserted
    # as at least half a core, which a helper that lost the work could not report
    assert alone["own"] > 0.5 and child["own"] > 0.4  # (the child's start-up is I/O too)
    assert shared["own"] < 0.2 and shared["cores"] > 0.5  # the busy neighbour is seen
    for load in (alone, shared, child):  # what is counted as own is not counted twice
        assert 0.0 <= load["cores"] <= os.cpu_count() - load["own"] + 0.2


def _writeable(X):
    return bool(X.flags.writeable)


def test_one_per_core_gives_workers_writable_arrays():
    """Read-only memory maps would be a new numba type: a second compilation, timed."""
    big = np.zeros(2_000_000)   # above joblib's default memory-map threshold (1 MB)
    assert one_per_core(_writeable, [(big,), (big,)], n_jobs=2) == [True, True]
