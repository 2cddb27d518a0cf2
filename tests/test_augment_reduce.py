"""Tests of xclib.augment_reduce (Ruiz et al. 2018): noise models, bounds, unbiasedness of the
reduced estimators, the lazy adaptive step, and the estimator."""
import itertools
import pickle
import warnings
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate, special, stats

from xclib import augment_reduce as ar
from xclib.augment_reduce import AugmentReduce, Model
from xclib.augment_reduce.bounds import _log_joint_row
from xclib._numba import csr_arrays
from xclib.base import DivergenceWarning
from xclib.exact import SoftmaxRegression
from xclib.metrics import softmax_loss_and_error

SOFTMAX, PROBIT, LOGISTIC, OVE = Model.SOFTMAX, Model.PROBIT, Model.LOGISTIC, Model.OVE


# -- noise models against scipy --------------------------------------------------------------
def test_noise_models_match_scipy():
    z = np.linspace(-60, 12, 400)
    logpdf = {SOFTMAX: stats.gumbel_r.logpdf, PROBIT: stats.norm.logpdf,
              LOGISTIC: stats.logistic.logpdf}
    logcdf = {SOFTMAX: stats.gumbel_r.logcdf, PROBIT: special.log_ndtr,
              LOGISTIC: stats.logistic.logcdf}
    for m in (SOFTMAX, PROBIT, LOGISTIC):
        zz = z[z > -5] if m == SOFTMAX else z  # Gumbel's log Φ = −e^{−z} overflows scipy too
        got = np.array([ar.log_Phi(m, v) for v in zz])
        np.testing.assert_allclose(got, logcdf[m](zz), rtol=1e-9, atol=1e-12)
        got = np.array([ar.log_phi(m, v) for v in zz])
        np.testing.assert_allclose(got, logpdf[m](zz), rtol=1e-9, atol=1e-12)
        # derivatives: φ/Φ and (log φ)' against central differences
        h = 1e-6
        for v in zz[::20]:
            fd = (ar.log_Phi(m, v + h) - ar.log_Phi(m, v - h)) / (2 * h)
            assert ar.dlog_Phi(m, v) == pytest.approx(fd, rel=1e-5, abs=1e-8)
            fd = (ar.log_phi(m, v + h) - ar.log_phi(m, v - h)) / (2 * h)
            assert ar.dlog_phi(m, v) == pytest.approx(fd, rel=1e-5, abs=1e-6)
    assert ar.entropy(PROBIT, 2.0) == pytest.approx(stats.norm(0, 2.0).entropy())
    assert ar.entropy(LOGISTIC, 2.0) == pytest.approx(stats.logistic(0, 2.0).entropy())


# -- bounds ------------------------------------------------------------------------------------
def _log_p_quad(model, psi, y):
    """log of eq. (5) by adaptive quadrature."""
    f = lambda e: math.exp(_log_joint_row(model, psi, y, e))  # noqa: E731
    val, _ = integrate.quad(f, -40, 60, limit=400, points=[0.0, 5.0])
    return math.log(val)


def test_eq5_with_gumbel_noise_is_the_softmax():
    rng = np.random.default_rng(0)
    psi = rng.normal(size=6)
    for y in range(6):
        assert _log_p_quad(SOFTMAX, psi, y) == pytest.approx(
            psi[y] - special.logsumexp(psi), rel=1e-6)


def test_softmax_elbo_is_a_bound_tight_at_eta_star():
    rng = np.random.default_rng(1)
    for _ in range(200):
        K = rng.integers(2, 50)
        psi = rng.normal(scale=3, size=K)
        y = rng.integers(K)
        lse = special.logsumexp(psi) - psi[y]  # −log p(y | ψ)
        for log_eta in rng.normal(lse, 3, size=5):
            assert ar.softmax_elbo(lse, log_eta) <= -lse + 1e-12
        assert ar.softmax_elbo(lse, lse) == pytest.approx(-lse, abs=1e-12)


@pytest.mark.parametrize("model", [PROBIT, LOGISTIC])
def test_noise_elbo_below_log_likelihood(model):
    rng = np.random.default_rng(2)
    for _ in range(5):
        psi = rng.normal(size=4)
        y = int(rng.integers(4))
        logp = _log_p_quad(model, psi, y)
        mu, sig = rng.normal(1, 1), rng.uniform(0.3, 2.0)
        u = rng.standard_normal(20000) if model == PROBIT else rng.logistic(size=20000)
        e = mu + sig * u
        vals = np.array([_log_joint_row(model, psi, y, v) for v in e])
        elbo = vals.mean() + ar.entropy(model, sig)
        assert elbo <= logp + 3 * vals.std() / math.sqrt(len(vals))


@pytest.mark.parametrize("model", [PROBIT, LOGISTIC])
def test_importance_sampling_skips_only_what_does_not_count(model):
    """The block estimator's shortcuts (sorted classes, terms past the skip point, draws cut
    60 below the best) against the plain sum over every draw and class, on scores spread
    wide enough that both shortcuts fire."""
    from scipy.special import log_expit, log_ndtr, logsumexp
    from scipy.stats import norm
    rng = np.random.default_rng(4)
    psi = rng.normal(scale=4.0, size=(20, 40))
    y = rng.integers(40, size=20)
    eps = np.random.default_rng(0).normal(5.0, 5.0, size=1000)  # log_likelihood_is draws
    log_r = norm.logpdf(eps, 5.0, 5.0)
    if model == PROBIT:
        log_phi, log_cdf = norm.logpdf(eps), log_ndtr
    else:
        log_phi, log_cdf = log_expit(eps) + log_expit(-eps), log_expit
    plain = []
    for i in range(20):
        d = np.delete(psi[i, y[i]] - psi[i], y[i])
        joint = log_phi + log_cdf(eps[:, None] + d[None, :]).sum(axis=1)
        plain.append(logsumexp(joint - log_r) - math.log(1000))
    np.testing.assert_allclose(ar.log_likelihood_is(model, psi, y, n_samples=1000), plain,
                               rtol=1e-12)


@pytest.mark.parametrize("model", [PROBIT, LOGISTIC])
def test_importance_sampling_matches_quadrature(model):
    rng = np.random.default_rng(3)
    psi = rng.normal(size=(3, 5))
    y = np.array([0, 2, 4])
    exact = np.array([_log_p_quad(model, psi[i], y[i]) for i in range(3)])
    np.testing.assert_allclose(ar.log_likelihood_is(model, psi, y, n_samples=50000), exact,
                               atol=0.02)
    # the paper's 1,000 samples from N(5, 5²): errors of ~0.1 nats per row for the probit
    # (the proposal is wide for a standard-normal error), which the chapter reports
    np.testing.assert_allclose(ar.log_likelihood_is(model, psi, y), exact, atol=0.15)


def test_ove_bound_matches_numpy_and_is_below_softmax():
    rng = np.random.default_rng(4)
    psi = rng.normal(size=7)
    for y in range(7):
        ref = np.sum(np.log(special.expit(psi[y] - np.delete(psi, y))))
        assert ar.ove_bound(psi, y) == pytest.approx(ref)
        assert ar.ove_bound(psi, y) <= psi[y] - special.logsumexp(psi)


# -- the reduce step: subsets and unbiasedness ----------------------------------------------------
def test_subsample_classes_distinct_uniform_deterministic():
    K, m, B = 7, 3, 4000
    rng = np.random.default_rng(5)
    y = rng.integers(K, size=B)
    u = rng.random((B, m))
    out = np.empty((B, m), np.int64)
    mark = np.zeros(K, bool)
    ar.subsample_classes(u, y, K, out, mark)
    assert not mark.any()
    for i in range(B):
        assert len(set(out[i])) == m and y[i] not in out[i]
    # each other class appears with probability m/(K−1)
    freq = np.array([np.mean([(k in out[i]) for i in range(B) if y[i] == 0]) for k in range(1, K)])
    np.testing.assert_allclose(freq, m / (K - 1), atol=0.05)
    out2 = np.empty_like(out)
    ar.subsample_classes(u, y, K, out2, mark)
    np.testing.assert_array_equal(out, out2)


def _all_subsets(K, y, m):
    return [list(c) for c in itertools.combinations([k for k in range(K) if k != y], m)]


def test_softmax_reduced_estimators_are_unbiased():
    rng = np.random.default_rng(6)
    K, m, scale = 6, 2, 3.0
    psi = rng.normal(size=K)
    y = 1
    log_eta0 = 0.7
    etas, grads, elbos = [], [], []
    for S in _all_subsets(K, y, m):
        S = np.array([S])
        log_eta = np.array([log_eta0])
        C, elbo = np.empty((1, m)), np.empty(1)
        # α = 1 gives η̃ itself; α ≈ 0 keeps η fixed for the gradient
        ar.softmax_local_step(np.array([psi[y]]), psi[S], log_eta, np.array([0]),
                              np.array([1.0]), K, scale, C, elbo)
        etas.append(np.exp(log_eta[0]))
        log_eta = np.array([log_eta0])
        ar.softmax_local_step(np.array([psi[y]]), psi[S], log_eta, np.array([0]),
                              np.array([1e-300]), K, scale, C, elbo)
        g = np.zeros(K)
        g[S[0]] -= C[0]
        g[y] += C[0].sum()
        grads.append(g)
        elbos.append(elbo[0])
    eta_star = np.exp(psi - psi[y]).sum()
    assert np.mean(etas) == pytest.approx(eta_star)
    r = np.exp(psi - psi[y] - log_eta0)
    g_full = -scale * r
    g_full[y] = scale * (r.sum() - r[y])
    np.testing.assert_allclose(np.mean(grads, axis=0), g_full, rtol=1e-12)
    # the recorded one-sample ELBO uses the current η: unbiased for eq. (8) at fixed η
    lse = special.logsumexp(psi) - psi[y]
    assert np.mean(elbos) == pytest.approx(ar.softmax_elbo(lse, log_eta0), rel=1e-10)


def test_softmax_gradient_is_the_elbo_gradient():
    """With S = all other classes the coefficients are exactly d(8)/dψ (central differences)."""
    rng = np.random.default_rng(7)
    K = 5
    psi = rng.normal(size=K)
    y, log_eta0 = 3, 1.1
    S = np.array([[k for k in range(K) if k != y]])
    C, elbo = np.empty((1, K - 1)), np.empty(1)
    ar.softmax_local_step(np.array([psi[y]]), psi[S], np.array([log_eta0]), np.array([0]),
                          np.array([1e-300]), K, 1.0, C, elbo)
    f = lambda p: ar.softmax_elbo(special.logsumexp(p) - p[y], log_eta0)  # noqa: E731
    h = 1e-6
    for j, k in enumerate(S[0]):
        e = np.zeros(K)
        e[k] = h
        assert -C[0, j] == pytest.approx((f(psi + e) - f(psi - e)) / (2 * h), rel=1e-6)


@pytest.mark.parametrize("model", [PROBIT, LOGISTIC])
def test_noise_reduced_estimators_are_unbiased(model):
    rng = np.random.default_rng(8)
    K, m, scale = 6, 2, 2.0
    psi = rng.normal(size=K)
    y = 4
    u1, u2 = np.array([0.3]), np.array([-0.8])
    mu0, gamma0 = 0.5, 0.2
    d_mu, grads = [], []
    for S in _all_subsets(K, y, m):
        S = np.array([S])
        mu, gamma = np.array([mu0]), np.array([gamma0])
        C, elbo = np.empty((1, m)), np.empty(1)
        ar.noise_local_step(model, np.array([psi[y]]), psi[S], mu, gamma, np.array([0]), u1,
                            u2, np.array([1.0]), K, scale, C, elbo)
        d_mu.append(mu[0] - mu0)
        mu, gamma = np.array([mu0]), np.array([gamma0])
        ar.noise_local_step(model, np.array([psi[y]]), psi[S], mu, gamma, np.array([0]), u1,
                            u2, np.array([1e-300]), K, scale, C, elbo)
        g = np.zeros(K)
        g[S[0]] -= C[0]
        g[y] += C[0].sum()
        grads.append(g)
    sig = np.log1p(np.exp(gamma0))
    e = mu0 + sig * u1[0]
    others = [k for k in range(K) if k != y]
    full_de = ar.dlog_phi(model, e) + sum(ar.dlog_Phi(model, e + psi[y] - psi[k]) for k in others)
    assert np.mean(d_mu) == pytest.approx(full_de, rel=1e-10)
    e2 = mu0 + sig * u2[0]
    g_full = np.zeros(K)
    for k in others:
        c = scale * ar.dlog_Phi(model, e2 + psi[y] - psi[k])
        g_full[k] -= c
        g_full[y] += c
    np.testing.assert_allclose(np.mean(grads, axis=0), g_full, rtol=1e-10)


def test_noise_scale_step_includes_entropy_gradient():
    """∂/∂γ of eq. (9): (∂_ε log p̃ · u + 1/σ) · sigmoid(γ), checked by finite differences of
    the reparameterised one-sample ELBO in γ."""
    rng = np.random.default_rng(9)
    K = 4
    psi = rng.normal(size=K)
    y, u = 0, 0.4
    S = np.array([[1, 2, 3]])
    mu0, gamma0 = 0.3, -0.2

    def one_sample(gamma):
        sig = np.log1p(np.exp(gamma))
        return _log_joint_row(PROBIT, psi, y, mu0 + sig * u) + ar.entropy(PROBIT, sig)

    mu, gamma = np.array([mu0]), np.array([gamma0])
    ar.noise_local_step(PROBIT, np.array([psi[y]]), psi[S], mu, gamma, np.array([0]),
                        np.array([u]), np.array([0.0]), np.array([1.0]), K, 1.0,
                        np.empty((1, 3)), np.empty(1))
    h = 1e-6
    assert gamma[0] - gamma0 == pytest.approx(
        (one_sample(gamma0 + h) - one_sample(gamma0 - h)) / (2 * h), rel=1e-6)


def test_ove_coefficients_unbiased():
    rng = np.random.default_rng(10)
    K, m = 6, 3
    psi = rng.normal(size=K)
    y = 2
    elbos = []
    for S in _all_subsets(K, y, m):
        C, elbo = np.empty((1, m)), np.empty(1)
        ar.ove_coefficients(np.array([psi[y]]), psi[np.array([S])], K, 1.0, C, elbo)
        np.testing.assert_allclose(C[0], special.expit(psi[S] - psi[y]) * (K - 1) / m)
        elbos.append(elbo[0])
    assert np.mean(elbos) == pytest.approx(ar.ove_bound(psi, y))

# -- the global step: lazy RMS state equals the dense recursion; the ridge is unbiased ----------
def _step_buffers(K, D, B, m):
    """Zero scratch and a fresh step-size state for :func:`global_step` (S and C set later)."""
    buf = ar.Scratch(S=None, mark=None, psi_y=None, psi_S=None, C=None, elbo=None, rate=None,
                     G=np.zeros((K, D)), Gb=np.zeros(K), markW=np.zeros((K, D), np.uint8),
                     markb=np.zeros(K, np.uint8), touched=np.empty(B * (m + 1) * D, np.int64),
                     touched_b=np.empty(B * (m + 1), np.int64))
    steps = ar.StepState(np.full((K, D), -1.0), np.full((K, 1), -1.0),
                         np.zeros((K, D), np.int64), np.zeros((K, 1), np.int64))
    return buf, steps


def _global_step(X, batch, y, S, C, W, b, bufs, t, rho, inv_count, ridge_y, ridge_S):
    buf, steps = bufs
    empty = np.empty(0)
    draws = ar.Draws(batch, y, empty, empty, empty)
    cfg = ar.Settings(0, 1.0, False, True, inv_count, 1.0, float(ridge_y), float(ridge_S))
    ar.global_step(csr_arrays(X), draws, W, b, steps, buf._replace(S=S, C=C), cfg, t, rho)


def test_batch_utilities_match_numpy():
    rng = np.random.default_rng(5)
    N, D, K, B, m = 30, 40, 9, 8, 3
    X = sp.random(N, D, density=0.3, random_state=2, format="csr")
    W, b = rng.normal(size=(K, D)), rng.normal(size=K)
    batch = rng.choice(N, B, replace=False)
    y = rng.integers(K, size=B)
    S = np.array([rng.choice([k for k in range(K) if k != y[i]], m, replace=False)
                  for i in range(B)])
    psi_y, psi_S = np.empty(B), np.empty((B, m))
    ar.batch_utilities(csr_arrays(X), batch, y, S, W, b, psi_y, psi_S)
    psi = X[batch] @ W.T + b
    np.testing.assert_allclose(psi_y, psi[np.arange(B), y], rtol=1e-12)
    np.testing.assert_allclose(psi_S, np.take_along_axis(psi, S, axis=1), rtol=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 0.05])
@pytest.mark.parametrize("D, density", [(6, 0.4), (60, 0.05)])  # the sweep, the touch list
def test_global_step_matches_dense_recursion(alpha, D, density):
    rng = np.random.default_rng(11)
    N, K, B, m = 12, 5, 3, 2
    X = sp.random(N, D, density=density, random_state=1, format="csr")
    count = np.bincount(X.indices, minlength=D)
    inv_count = np.where(count > 0, 1.0 / np.maximum(count, 1), 0.0)
    ridge_y = N / B * N * alpha
    ridge_S = ridge_y * (K - 1) / m
    y = rng.integers(K, size=N)
    W, b = rng.normal(size=(K, D)), rng.normal(size=K)
    Wd, bd = W.copy(), b.copy()
    buf = _step_buffers(K, D, B, m)
    sd, sbd = np.full((K, D), np.nan), np.full(K, np.nan)
    Xd = X.toarray()
    for t in range(1, 8):
        batch = rng.choice(N, B, replace=False)
        S = np.array([rng.choice([k for k in range(K) if k != y[n]], m, replace=False)
                      for n in batch])
        C = rng.random((B, m))
        rho = 0.3
        _global_step(X, batch, y[batch], S, C, W, b, buf, t, rho, inv_count, ridge_y, ridge_S)
        # dense reference: data gradient, plus −r_k w_kd / n_d per (row, touched class, feature)
        g, gb = np.zeros((K, D)), np.zeros(K)
        pat, patb = np.zeros((K, D), bool), np.zeros(K, bool)
        for i, n in enumerate(batch):
            nz = Xd[n] != 0
            for j, k in enumerate(S[i]):
                g[k] -= C[i, j] * Xd[n]
                gb[k] -= C[i, j]
                g[y[n]] += C[i, j] * Xd[n]
                gb[y[n]] += C[i, j]
                g[k] -= ridge_S * nz * inv_count * Wd[k]
                pat[k] |= nz
                patb[k] = True
            g[y[n]] -= ridge_y * nz * inv_count * Wd[y[n]]
            pat[y[n]] |= nz
            patb[y[n]] = True
        sd = np.where(np.isnan(sd), np.where(pat, g * g, np.nan), 0.1 * g * g + 0.9 * sd)
        sbd = np.where(np.isnan(sbd), np.where(patb, gb * gb, np.nan), 0.1 * gb * gb + 0.9 * sbd)
        step = rho * t ** (-0.5 + 1e-16)
        Wd += np.where(pat, step * g / (1 + np.sqrt(np.nan_to_num(sd))), 0.0)
        bd += np.where(patb, step * gb / (1 + np.sqrt(np.nan_to_num(sbd))), 0.0)
        np.testing.assert_allclose(W, Wd, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b, bd, rtol=1e-12, atol=1e-14)
    assert not buf[0].G.any() and not buf[0].Gb.any()
    assert not buf[0].markW.any() and not buf[0].markb.any()


def test_global_step_ridge_is_unbiased():
    """Averaged over the row drawn (|B| = 1) and every subset S, the ridge gradient of the
    kernel is −N·alpha·w on every weight of a feature that some row holds, 0 elsewhere."""
    rng = np.random.default_rng(12)
    N, D, K, m, alpha = 5, 4, 4, 2, 0.3
    X = sp.csr_matrix(np.array([[1.0, 0, 2, 0], [0, 0, 1, 0], [3, 0, 0, 0], [0, 0, 1, 0.5],
                                [1, 0, 0, 0]]))
    count = np.bincount(X.indices, minlength=D)
    inv_count = np.where(count > 0, 1.0 / np.maximum(count, 1), 0.0)
    y = np.array([0, 1, 2, 3, 1])
    W0 = rng.normal(size=(K, D))
    ridge_y = N / 1 * N * alpha
    mean_g = np.zeros((K, D))
    for n in range(N):
        subsets = _all_subsets(K, y[n], m)
        for S in subsets:
            W, b = W0.copy(), np.zeros(K)
            buf = _step_buffers(K, D, 1, m)
            # C = 0: the ridge alone; t = 1, rho = 1, first touch: Δ = g / (1 + |g|)
            _global_step(X, np.array([n]), y[[n]], np.array([S]), np.zeros((1, m)), W, b, buf,
                         1, 1.0, inv_count, ridge_y, ridge_y * (K - 1) / m)
            delta = W - W0
            mean_g += delta / (1.0 - np.abs(delta)) / (N * len(subsets))
    np.testing.assert_allclose(mean_g, np.where(count > 0, -N * alpha * W0, 0.0), rtol=1e-9,
                               atol=1e-12)


def _fit_start(est, X, y):
    """The start of ``est``'s fit (already fitted once, for its classes), as the estimator
    makes it: encoded labels, the Generator, the state, N, |B|, |S|, K, N/|B|, the ridge."""
    from xclib.augment_reduce.state import start_state
    yy = est._encode(y)
    rng = np.random.default_rng(est.random_state)
    st = start_state(est, X, rng)
    N, B = st.n_rows, st.batch
    return yy, rng, st, N, B, st.n_sampled, st.n_classes, N / B, st.cfg.ridge_y


def _separate_kernels_fit(est, X, y, n_epochs):
    """The fit of ``est`` (already fitted once, for its classes) by the separate kernels, one
    call per step as before the fused iteration: subsets, utilities, local step, global step."""
    from xclib.augment_reduce.state import local_step
    yy, rng, st, N, B, m, K, scale, ridge_y = _fit_start(est, X, y)
    buf, rows = st.buf, csr_arrays(X)
    trace = []
    for _ in range(n_epochs):
        perm = rng.permutation(N)
        for it in range(N // B):
            st.t += 1
            batch = perm[it * B:(it + 1) * B]
            yb = yy[batch]
            ar.subsample_classes(rng.random((B, m)), yb, K, buf.S, buf.mark)
            ar.batch_utilities(rows, batch, yb, buf.S, st.W, st.b, buf.psi_y, buf.psi_S)
            local_step(st, batch, st.t, rng)
            rho = est.learning_rate * est.decay ** ((st.t - 1) // est.decay_every)
            draws = ar.Draws(batch, yb, st.u, st.u1, st.u2)
            ar.global_step(rows, draws, st.W, st.b, st.steps, buf, st.cfg, st.t, rho)
            trace.append(buf.elbo.mean())
    return st, np.array(trace)


@pytest.mark.parametrize("model", ["softmax", "probit", "logistic", "ove"])
@pytest.mark.parametrize("D, density, alpha, clock", [
    (12, 0.5, 0.0, "visits"),    # the step sweeps the marks
    (12, 0.5, 0.02, "global"),
    (400, 0.01, 0.02, "visits"),  # the step follows the touch list
])
def test_fused_iteration_matches_separate_kernels(model, D, density, alpha, clock):
    """The estimator's fused iteration (one pass over each minibatch row) gives the fit of the
    separate kernels, up to summation order: weights, biases, local parameters, ELBO trace."""
    rng = np.random.default_rng(13)
    N, K = 90, 7
    X = sp.random(N, D, density=density, random_state=3, format="csr")
    y = rng.integers(K, size=N)
    est = AugmentReduce(model=model, alpha=alpha, batch_size=16, n_sampled=3, tol=None, n_epochs=4,
                        local_clock=clock, learning_rate=0.3, decay_every=7, random_state=5,
                        history_samples=5).fit(X, y)
    st, trace = _separate_kernels_fit(est, X, y, 4)
    np.testing.assert_allclose(est.coef_, st.W, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(est.intercept_, st.b, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(est.elbo_trace_, trace, rtol=1e-10, atol=1e-13)
    if model == "softmax":
        np.testing.assert_allclose(est.log_eta_, st.local.log_eta, rtol=1e-10)
    elif model != "ove":
        np.testing.assert_allclose(est.q_loc_, st.local.mu, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(est.q_scale_, np.logaddexp(0.0, st.local.gamma),
                                   rtol=1e-10)
    assert est.coef_.std() > 0.05 and np.any(est.coef_ != 0.0)  # the fit moved the weights


def _schedule_fit(kernel, est, X, y, n_epochs):
    """``est``'s fit (already fitted once, for its classes) with ``kernel`` for each
    iteration: the estimator's epoch loop, the kernel chosen by the test."""
    yy, rng, st, N, B, m, K, scale, ridge_y = _fit_start(est, X, y)
    rows = csr_arrays(X)
    for _ in range(n_epochs):
        perm = rng.permutation(N)
        for it in range(N // B):
            st.t += 1
            batch = perm[it * B:(it + 1) * B]
            np.take(yy, batch, out=st.yb)
            draws = st.draws(batch, rng)
            rho = est.learning_rate * est.decay ** ((st.t - 1) // est.decay_every)
            kernel(rows, draws, st.W, st.b, st.local, st.steps, st.buf, st.cfg, st.t, rho)
    return st


@pytest.mark.parametrize("model", ["softmax", "probit", "logistic", "ove"])
@pytest.mark.parametrize("D, density, alpha", [(12, 0.5, 0.0), (400, 0.01, 0.02)])
def test_class_by_class_iteration_is_the_row_by_row_one_bit_for_bit(model, D, density,
                                                                      alpha):
    """The two schedules of :func:`ar_iteration` (row by row for weights in cache, class by
    class for larger ones) give the same numbers exactly, through the sweep of the marks
    (D = 12) and the touch list (D = 400)."""
    from xclib.augment_reduce import iteration as KN
    rng = np.random.default_rng(13)
    N, K = 90, 7
    X = sp.random(N, D, density=density, random_state=3, format="csr")
    y = rng.integers(K, size=N)
    est = AugmentReduce(model=model, alpha=alpha, batch_size=16, n_sampled=3, tol=None, n_epochs=1,
                        learning_rate=0.3, decay_every=7, random_state=5,
                        history_samples=5).fit(X, y)
    rows = _schedule_fit(KN._iteration_by_rows, est, X, y, 3)
    by_class = _schedule_fit(KN._iteration_by_class, est, X, y, 3)
    for part, names in (("", ("W", "b")), ("buf", ("psi_y", "psi_S", "C", "elbo")),
                        ("steps", ("sW", "stampW")),
                        ("local", ("visits", "log_eta", "mu", "gamma"))):
        for name in names:
            a = getattr(getattr(rows, part) if part else rows, name)
            b = getattr(getattr(by_class, part) if part else by_class, name)
            np.testing.assert_array_equal(a, b, err_msg=name)
    W0 = _fit_start(est, X, y)[2].W   # the initial weights: the fits must have moved them
    assert np.abs(rows.W - W0).max() > 0.05


# -- the estimator ------------------------------------------------------------------------------
def _blobs(n=600, K=4, D=5, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=2.0, size=(K, D))
    y = rng.integers(K, size=n)
    return centers[y] + rng.normal(size=(n, D)), y


@pytest.mark.parametrize("model", ["softmax", "probit", "logistic", "ove"])
def test_estimator_learns_and_is_deterministic(model):
    X, y = _blobs()
    kw = dict(model=model, batch_size=50, n_sampled=2, tol=None, n_epochs=15, random_state=3,
              history_samples=20, learning_rate=0.1)
    a = AugmentReduce(**kw).fit(X, y)
    b = AugmentReduce(**kw).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.score(X, y) > 0.85
    assert not a.diverged_
    assert len(a.elbo_trace_) == a.n_iter_ == 15 * (600 // 50)
    assert np.all(np.diff(a.time_trace_) >= 0)
    assert np.isfinite(a.log_likelihood(X, y, n_samples=200))


@pytest.mark.parametrize("model", ["softmax", "probit"])
def test_eval_every_changes_the_history_not_the_fit(model):
    X, y = _blobs()
    kw = dict(model=model, batch_size=50, n_sampled=2, tol=None, n_epochs=7, random_state=3,
              history_samples=20)
    a = AugmentReduce(**kw).fit(X, y)
    b = AugmentReduce(eval_every=3, **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.elbo_trace_, b.elbo_trace_)
    assert b.history_["epoch"] == [3, 6, 7] and b.n_epochs_ == a.n_epochs_ == 7
    assert b.history_["train_loss"][-1] == pytest.approx(a.history_["train_loss"][-1])


def test_defaults_fit_standardised_data():
    """``AugmentReduce().fit`` with every default: near the exact ridge optimum's accuracy and
    within 0.2 nats of its loss, stopping on its own (``tol``) within the default 100 epochs."""
    X, y = _blobs(n=1000, K=5, D=8, seed=5)
    X = (X - X.mean(0)) / X.std(0)
    est = AugmentReduce().fit(X, y)
    exact = SoftmaxRegression(alpha=1e-4, fit_intercept=True).fit(X, y)
    loss_exact, err_exact = softmax_loss_and_error(exact.coef_, sp.csr_matrix(X), y,
                                                   exact.intercept_)
    assert not est.diverged_ and est.n_epochs_ <= 100
    assert est.history_["train_loss"][-1] < loss_exact + 0.2
    assert est.history_["train_error"][-1] < err_exact + 0.03


def test_same_initialisation_for_every_model():
    X, y = _blobs(n=50)
    fits = [AugmentReduce(model=m, tol=None, n_epochs=0, random_state=4).fit(X, y)
            for m in ("softmax", "probit", "logistic", "ove")]
    for f in fits[1:]:
        np.testing.assert_array_equal(f.coef_, fits[0].coef_)
        np.testing.assert_array_equal(f.intercept_, fits[0].intercept_)
    # learning_rate="auto" fits on rows divided by row_scale_: the initial weights live there
    assert np.std(fits[0].coef_ * fits[0].row_scale_) == pytest.approx(0.1, rel=0.3)
    assert np.std(fits[0].intercept_) < 0.01


def test_softmax_ar_approaches_the_exact_optimum():
    X, y = _blobs(n=400, K=5, seed=1)
    exact = SoftmaxRegression(alpha=0.0, fit_intercept=True).fit(X, y)
    ll_exact = -np.mean(-exact.predict_log_proba(X)[np.arange(len(y)), y])
    est = AugmentReduce(alpha=0.0, batch_size=40, n_sampled=4, tol=None, n_epochs=150, learning_rate=0.3,
                        random_state=0).fit(X, y)
    ll = est.log_likelihood(X, y)
    assert ll <= ll_exact + 1e-9
    assert ll == pytest.approx(ll_exact, abs=0.05)
    # the ELBO at the end is a bound on the (per-row) log-likelihood, and close to it
    assert est.elbo_trace_[-20:].mean() < ll + 0.02
    assert est.elbo_trace_[-20:].mean() > ll - 0.2
    # log_eta_ is the fitted q(ε_n): eq. (8) at it is below each row's log-likelihood
    s = est.scores(X)
    nll = special.logsumexp(s, axis=1) - s[np.arange(len(y)), y]
    assert est.log_eta_.shape == (len(y),)
    elbo = np.array([ar.softmax_elbo(a, b) for a, b in zip(nll, est.log_eta_)])
    assert np.all(elbo <= -nll + 1e-12) and elbo.mean() > -nll.mean() - 0.2


@pytest.mark.parametrize("model", ["softmax", "ove"])
def test_ridge_reaches_the_exact_ridge_optimum(model):
    """With alpha > 0 the fit approaches SoftmaxRegression(alpha) (the same mean objective);
    OVE's bound has its own optimum, so only the shrinkage is compared there."""
    X, y = _blobs(n=400, K=5, seed=2)
    alpha = 0.05
    exact = SoftmaxRegression(alpha=alpha, fit_intercept=True).fit(X, y)
    free = SoftmaxRegression(alpha=0.0, fit_intercept=True, max_iter=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unregularised optimum may not exist
        free.fit(X, y)
    est = AugmentReduce(model=model, alpha=alpha, batch_size=40, n_sampled=4, tol=None, n_epochs=150,
                        learning_rate=0.1, random_state=0).fit(X, y)
    norm = np.linalg.norm(est.coef_)
    assert norm < 0.8 * np.linalg.norm(free.coef_)
    if model == "softmax":
        assert norm == pytest.approx(np.linalg.norm(exact.coef_), rel=0.1)
        np.testing.assert_allclose(est.coef_, exact.coef_, atol=0.15 * np.abs(exact.coef_).max())


def test_ridge_zeroes_features_absent_from_training():
    X, y = _blobs(n=200)
    X[:, 2] = 0.0
    assert np.all(AugmentReduce(tol=None, n_epochs=1, random_state=0).fit(X, y).coef_[:, 2] == 0.0)
    assert np.all(AugmentReduce(alpha=0.0, tol=None, n_epochs=1, random_state=0).fit(X, y).coef_[:, 2]
                  != 0.0)


def test_fitted_model_pickles_small():
    X, y = _blobs(n=3000, D=40)
    for model in ("softmax", "probit", "ove"):
        est = AugmentReduce(model=model, tol=None, n_epochs=2, history_samples=5, random_state=0)
        est.fit(X, y)
        assert not hasattr(est, "_state")
        size = len(pickle.dumps(est))
        assert size < X.nbytes / 4
        fitted = est.coef_.nbytes + est.elbo_trace_.nbytes * 2 + 3 * 8 * X.shape[0]
        assert size < fitted + 5000


def test_noise_models_expose_their_variational_parameters():
    X, y = _blobs(n=200)
    est = AugmentReduce(model="logistic", tol=None, n_epochs=2, history_samples=5, random_state=0)
    est.fit(X, y)
    assert est.q_loc_.shape == est.q_scale_.shape == (200,)
    assert np.all(est.q_scale_ > 0) and not hasattr(est, "log_eta_")
    est.set_params(model="softmax").fit(X, y)
    assert est.log_eta_.shape == (200,) and not hasattr(est, "q_loc_")


@pytest.mark.parametrize("param, value, accepted", [
    ("model", "gumbel", "str among"),
    ("alpha", -1.0, r"range \[0"),
    ("alpha", np.nan, r"range \[0"),
    ("batch_size", 0, r"range \[1"),
    ("batch_size", 2.5, "int"),
    ("n_sampled", 0, r"range \[1"),
    ("learning_rate", 0.0, r"range \(0"),
    ("decay", 0.0, r"range \(0.0, 1.0\]"),
    ("decay", -0.5, r"range \(0.0, 1.0\]"),
    ("decay", 1.5, r"range \(0.0, 1.0\]"),
    ("decay_every", 0, r"range \[1"),
    ("local_learning_rate", 0.0, r"range \(0.0, 1.0\]"),
    ("local_learning_rate", 2.0, r"range \(0.0, 1.0\]"),
    ("local_clock", "wall", "str among"),
    ("init_scale", np.nan, r"range \[0.0, inf\)"),
    ("init_scale", np.inf, r"range \[0.0, inf\)"),
    ("init_scale", -0.1, r"range \[0.0, inf\)"),
    ("init_scale_bias", np.nan, r"range \[0.0, inf\)"),
    ("history_samples", 0, r"range \[1"),
    ("n_epochs", -1, r"range \[0"),
])
def test_bad_parameters_are_rejected_by_name(param, value, accepted):
    X, y = _blobs(n=30)
    with pytest.raises(ValueError, match=rf"'{param}' parameter.*{accepted}"):
        AugmentReduce(**{param: value}).fit(X, y)


def test_one_class_is_an_error():
    X, _ = _blobs(n=30)
    with pytest.raises(ValueError, match="at least 2 classes"):
        AugmentReduce().fit(X, np.zeros(30))


@pytest.mark.parametrize("model", ["softmax", "ove"])
def test_badly_scaled_features_are_flagged(model):
    """X · 1e200 with a fixed step: the steps move the weights by ~learning_rate, the loss
    stays near 1e199. No silent garbage: a DivergenceWarning and diverged_ = True. The
    default step ("auto") divides the rows by a power of two first: the same fit as on X."""
    X, y = _blobs(n=300)
    kw = dict(model=model, tol=None, n_epochs=3, random_state=0)
    with pytest.warns(DivergenceWarning, match="standardise X"):
        est = AugmentReduce(learning_rate=0.1, **kw).fit(X * 1e200, y)
    assert est.diverged_
    # the same data on a unit scale is fine
    assert not AugmentReduce(learning_rate=0.1, **kw).fit(X, y).diverged_
    # (without a ridge: alpha on W means alpha / s² on the rescaled problem, another fit)
    big = AugmentReduce(alpha=0.0, **kw).fit(X * 2.0 ** 664, y)
    unit = AugmentReduce(alpha=0.0, **kw).fit(X, y)
    assert not big.diverged_
    np.testing.assert_array_equal(big.predict(X * 2.0 ** 664), unit.predict(X))
    np.testing.assert_allclose(big.coef_ * 2.0 ** 664, unit.coef_, rtol=1e-12)


def test_too_large_learning_rate_is_flagged():
    X, y = _blobs(n=300)
    with pytest.warns(DivergenceWarning):
        est = AugmentReduce(learning_rate=1e6, alpha=0.0, tol=None, n_epochs=5, random_state=0).fit(X, y)
    assert est.diverged_ and np.all(np.isfinite(est.coef_))


