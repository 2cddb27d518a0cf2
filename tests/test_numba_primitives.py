"""The shared numba primitives against NumPy/SciPy."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import lambertw as sp_lambertw
from scipy.special import logsumexp as sp_logsumexp

from xclib._numba import (
    dense_dot,
    draw_other_classes,
    lambertw,
    lambertw_exp,
    logsumexp,
    other_class,
    sparse_row_axpy,
    sparse_row_dot,
)


def _random_csr(rng, n=20, d=30, density=0.2):
    return sp.random(n, d, density=density, format="csr", random_state=np.random.RandomState(rng.integers(1 << 30)))


def test_sparse_row_dot_and_axpy_match_numpy():
    rng = np.random.default_rng(0)
    X = _random_csr(rng)
    w = rng.normal(size=X.shape[1])
    for i in range(X.shape[0]):
        idx = X.indices[X.indptr[i]:X.indptr[i + 1]]
        val = X.data[X.indptr[i]:X.indptr[i + 1]]
        assert sparse_row_dot(idx, val, w) == pytest.approx(X[i].toarray().ravel() @ w, abs=1e-12)
        w2 = w.copy()
        sparse_row_axpy(-0.7, idx, val, w2)
        np.testing.assert_allclose(w2, w - 0.7 * X[i].toarray().ravel(), atol=1e-14)


def test_dense_dot_sums_in_order():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=101), rng.normal(size=101)
    assert dense_dot(a, b) == pytest.approx(a @ b, rel=1e-13)
    s = 0.0
    for x, z in zip(a, b):   # the same order, so the same bits
        s += x * z
    assert dense_dot(a, b) == s
    assert dense_dot(a[:0], b[:0]) == 0.0


@pytest.mark.parametrize("shift", [0.0, 700.0, -800.0, 1e5])
def test_logsumexp_matches_scipy_without_overflow(shift):
    rng = np.random.default_rng(1)
    a = rng.normal(size=50) * 10 + shift
    assert logsumexp(a) == pytest.approx(sp_logsumexp(a), rel=1e-14)


def test_logsumexp_edge_cases():
    assert logsumexp(np.array([])) == -np.inf
    assert logsumexp(np.array([-np.inf, -np.inf])) == -np.inf
    assert logsumexp(np.array([np.inf, 0.0])) == np.inf


def test_lambertw_matches_scipy_on_its_domain():
    xs = np.concatenate([np.linspace(-0.36, 3, 50), np.logspace(-300, 308, 200)])
    ours = np.array([lambertw(x) for x in xs])
    np.testing.assert_allclose(ours, sp_lambertw(xs).real, rtol=2e-13, atol=1e-300)
    assert np.isnan(lambertw(-1.0))
    assert lambertw(-np.exp(-1)) == pytest.approx(-1.0)


def test_lambertw_near_the_branch_point():
    # W is ill-conditioned at -1/e (dW/dx ~ 1/sqrt(x + 1/e)): both libraries inherit the
    # rounding of x itself, so compare the defining equation and scipy only loosely.
    xs = -np.exp(-1) + np.logspace(-12, -1, 20)
    ours = np.array([lambertw(x) for x in xs])
    np.testing.assert_allclose(ours * np.exp(ours), xs, rtol=0, atol=2e-16)
    np.testing.assert_allclose(ours, sp_lambertw(xs).real, atol=1e-10)
    assert np.all(ours > -1.0)


def test_lambertw_exp_log_scale_never_overflows():
    zs = np.linspace(-700, 700, 301)
    ours = np.array([lambertw_exp(z) for z in zs])
    np.testing.assert_allclose(ours, sp_lambertw(np.exp(zs)).real, rtol=2e-13, atol=1e-300)
    for z in (1e3, 1e6, 1e12, 1e300):
        w = lambertw_exp(z)
        assert np.isfinite(w) and w > 0
        # defining equation on the log scale: w + log w = z
        assert w + np.log(w) == pytest.approx(z, rel=1e-15)
    assert lambertw_exp(-np.inf) == 0.0


def test_other_class_is_uniform_and_never_the_label():
    rng = np.random.default_rng(2)
    k = 7
    y = rng.integers(0, k, size=70000)
    draws = draw_other_classes(rng, y, k)
    assert np.all(draws != y) and draws.min() >= 0 and draws.max() < k
    for label in range(k):
        counts = np.bincount(draws[y == label], minlength=k)
        others = np.delete(counts, label)
        assert counts[label] == 0
        assert others.min() > 0.8 * others.mean()
    assert [other_class(r, 2) for r in range(4)] == [0, 1, 3, 4]
    with pytest.raises(ValueError, match="at least 2 classes"):
        draw_other_classes(rng, np.zeros(3, dtype=int), 1)


def test_sigmoid_matches_scipy_expit_without_overflow():
    from scipy.special import expit

    from xclib._numba import sigmoid

    ts = np.concatenate([np.linspace(-50, 50, 101), [-1e308, -800.0, 800.0, 1e308]])
    np.testing.assert_allclose([sigmoid(t) for t in ts], expit(ts), rtol=1e-15, atol=0)


def test_softplus_log_sigmoid_logaddexp_match_numpy_without_overflow():
    from scipy.special import log_expit

    from xclib._numba import log_sigmoid, logaddexp, softplus

    zs = np.array([-800.0, -40.0, -1.5, -1e-12, 0.0, 1e-12, 2.0, 35.0, 800.0])
    np.testing.assert_allclose([softplus(z) for z in zs], np.logaddexp(0.0, zs), rtol=1e-14)
    np.testing.assert_allclose([log_sigmoid(z) for z in zs], log_expit(zs), rtol=1e-14)
    for a in zs:
        for b in zs:
            assert abs(logaddexp(a, b) - np.logaddexp(a, b)) <= 1e-14 * max(1.0, abs(a), abs(b))
    assert logaddexp(-np.inf, 3.0) == 3.0 and logaddexp(2.0, -np.inf) == 2.0
    assert logaddexp(-np.inf, -np.inf) == -np.inf


def test_exp_shifted_is_within_one_ulp_of_libm():
    from xclib._numba import exp_shifted
    rng = np.random.default_rng(0)
    s = np.concatenate([
        -np.abs(rng.standard_normal(20_000)) * 50,
        [0.0, -0.0, -1e-300, -1e-17, -0.5 * np.log(2), -np.log(2), -1.0, -700.0, -708.0],
        -rng.uniform(0.0, 708.0, 20_000)]) + 3.25  # shifted by the maximum m = 3.25
    s[0] = 3.25
    ref = np.exp(s - 3.25)
    out = s.copy()
    total = exp_shifted(out, 3.25)
    np.testing.assert_allclose(out, ref, rtol=2.3e-16, atol=0)
    assert total == pytest.approx(ref.sum(), rel=1e-13)  # summed in order, not pairwise
    assert np.mean(out == ref) > 0.8
    low = np.array([0.0, -708.5, -745.0, -1e6, -np.inf])
    exp_shifted(low, 0.0)
    assert low[0] == 1.0 and np.all((low[1:] >= 0.0) & (low[1:] < 1e-307))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 63, 1000])
def test_dense_dot8_matches_numpy(n):
    from xclib._numba import dense_dot8
    rng = np.random.default_rng(n)
    a, b = rng.normal(size=n), rng.normal(size=n)
    assert dense_dot8(a, b) == pytest.approx(float(a @ b), rel=1e-13, abs=1e-13)
    assert dense_dot8(a, a) == pytest.approx(float(a @ a), rel=1e-13, abs=0.0)


def _elementwise(scalar_fn, x):
    """``scalar_fn`` (an inline numba primitive) applied to each entry, in a compiled loop."""
    from numba import njit

    @njit
    def loop(x, out):
        for k in range(x.shape[0]):
            out[k] = scalar_fn(x[k])

    out = np.empty_like(x)
    loop(x, out)
    return out


def test_exp_lane_is_within_one_ulp_of_libm_and_clamps():
    from xclib._numba import exp_lane
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-708, 709, 50_000), rng.standard_normal(50_000),
                        [0.0, -0.0, 1e-300, -1e-17, np.log(2) / 2, -np.log(2) / 2, 709.0]])
    np.testing.assert_allclose(_elementwise(exp_lane, x), np.exp(x), rtol=2.3e-16, atol=0)
    edge = _elementwise(exp_lane, np.array([-745.0, -1e6, 710.0, 1e6]))
    np.testing.assert_allclose(edge, np.exp([-708.0, -708.0, 709.0, 709.0]), rtol=2.3e-16)


def test_exp_rough_is_within_its_stated_error():
    from xclib._numba import exp_rough
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-708, 709, 50_000), rng.standard_normal(50_000),
                        [0.0, np.log(2) / 2, -np.log(2) / 2]])
    np.testing.assert_allclose(_elementwise(exp_rough, x), np.exp(x), rtol=2e-7, atol=0)
    np.testing.assert_allclose(_elementwise(exp_rough, np.array([-1e6, 1e6])),
                               np.exp([-708.0, 709.0]), rtol=2e-7)


def test_log_rough_is_within_its_stated_error():
    from xclib._numba import log_rough
    rng = np.random.default_rng(2)
    x = np.concatenate([np.exp(rng.uniform(-700, 700, 50_000)), rng.uniform(0.5, 2.0, 50_000),
                        [1.0, 2.0, 0.5, np.nextafter(2.0, 0.0), 1e-300, 1e300]])
    assert np.max(np.abs(_elementwise(log_rough, x) - np.log(x))) < 2e-6
