"""Augment and Reduce (Ruiz, Titsias, Dieng & Blei, ICML 2018).

A categorical model is an additive-noise model: draw ``ε_k ~ φ`` for each class and pick
``y = argmax_k (ψ_k + ε_k)`` (eq. 4). Integrating out every error but the winner's gives (eq. 5)

    p(y = k | ψ) = ∫ φ(ε) Π_{k'≠k} Φ(ε + ψ_k − ψ_k') dε ,

and keeping that one error as a latent variable gives a joint whose log is a *sum over
classes* (eq. 6). A variational bound on it (eq. 7) can therefore be estimated, with its
gradient, from a random subset ``S`` of the classes: cost O(|S|), not O(K).

The module reads like the chapter:

1. noise models: ``log φ``, ``log Φ`` and their derivatives for the Gumbel (softmax),
   Gaussian (multinomial probit) and logistic (multinomial logistic) errors;
2. the bounds: the softmax ELBO (8), the OVE bound (10), and eq. (5) by importance sampling;
3. one iteration of stochastic variational EM, split in kernels that each do one thing:
   class subsets ``S_n`` (:func:`subsample_classes`), utilities ψ on ``B × (S + 1)`` entries
   (:func:`batch_utilities`), the local step (:func:`softmax_local_step` = Algorithm 1,
   :func:`noise_local_step` = Algorithm 2 with eq. 9, :func:`ove_coefficients` for the
   baseline), and the global step with the adaptive step size of Section 4
   (:func:`global_step`), which all four methods share;
4. the estimator :class:`AugmentReduce` (``model="softmax" | "probit" | "logistic" | "ove"``).

Every kernel costs O(|B| · |S| · nnz(x)) per iteration; none touches all K classes. The
per-coordinate RMSprop state of the step size is decayed lazily (``0.9^{Δt}`` when a
coordinate is next touched), which gives exactly the dense recursion without an O(KD) pass.
"""
from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

from ._numba import logsumexp, other_class, sigmoid
from .base import IterativeSoftmaxEstimator
from .metrics import score_blocks, softmax_loss_and_error

__all__ = [
    "MODELS",
    "softmax_elbo",
    "ove_bound",
    "log_likelihood_is",
    "subsample_classes",
    "batch_utilities",
    "softmax_local_step",
    "noise_local_step",
    "ove_coefficients",
    "global_step",
    "AugmentReduce",
]

#: Model codes used by the kernels.
MODELS = {"softmax": 0, "probit": 1, "logistic": 2, "ove": 3}

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)
_DECAY = 0.9 ** np.arange(2048)  # 0.9^Δt of the lazily decayed RMS state (a numba constant)
_NDECAY = 2048


# -- 1. noise models ---------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _log_sigmoid(z):
    """log σ(z) without overflow."""
    if z >= 0.0:
        return -math.log1p(math.exp(-z))
    return z - math.log1p(math.exp(z))


@njit(cache=True, nogil=True)
def _softplus(g):
    """log(1 + e^γ): the scale of q(ε) (Section 4)."""
    if g > 30.0:
        return g + math.log1p(math.exp(-g))
    return math.log1p(math.exp(g))


@njit(cache=True, nogil=True)
def _log_ndtr(z):
    """log Φ(z) of the standard Gaussian, accurate in the far left tail."""
    if z > -30.0:
        return math.log(0.5 * math.erfc(-z / _SQRT2))
    # Asymptotic series: Φ(z) ≈ φ(z)/(-z) · (1 − 1/z² + 3/z⁴)
    z2 = z * z
    return -0.5 * z2 - _LOG_SQRT_2PI - math.log(-z) + math.log1p(-1.0 / z2 + 3.0 / (z2 * z2))


@njit(cache=True, nogil=True)
def _dlog_ndtr(z):
    """d/dz log Φ(z) = φ(z)/Φ(z) (the inverse Mills ratio), stable for z → −∞."""
    if z > -30.0:
        return math.exp(-0.5 * z * z - _LOG_SQRT_2PI - _log_ndtr(z))
    z2 = z * z
    return -z / (1.0 - 1.0 / z2 + 3.0 / (z2 * z2))


@njit(cache=True, nogil=True)
def log_phi(model, e):
    """log φ(ε) of the standard error density: Gumbel (0), Gaussian (1) or logistic (2)."""
    if model == 0:
        return -e - math.exp(-e)
    if model == 1:
        return -0.5 * e * e - _LOG_SQRT_2PI
    return _log_sigmoid(e) + _log_sigmoid(-e)


@njit(cache=True, nogil=True)
def dlog_phi(model, e):
    """d/dε log φ(ε)."""
    if model == 0:
        return -1.0 + math.exp(-e)
    if model == 1:
        return -e
    return sigmoid(-e) - sigmoid(e)


@njit(cache=True, nogil=True)
def log_Phi(model, z):
    """log Φ(z) of the standard error CDF."""
    if model == 0:
        return -math.exp(-z)
    if model == 1:
        return _log_ndtr(z)
    return _log_sigmoid(z)


@njit(cache=True, nogil=True)
def dlog_Phi(model, z):
    """d/dz log Φ(z) = φ(z)/Φ(z)."""
    if model == 0:
        return math.exp(-z)
    if model == 1:
        return _dlog_ndtr(z)
    return sigmoid(-z)


@njit(cache=True, nogil=True)
def entropy(model, scale):
    """Entropy of q(ε) = N(μ, scale²) (model 1) or Logistic(μ, scale) (model 2)."""
    if model == 1:
        return math.log(scale) + 0.5 * math.log(2.0 * math.pi * math.e)
    return math.log(scale) + 2.0


# -- 2. the bounds and the likelihood -------------------------------------------------------
@njit(cache=True, nogil=True)
def softmax_elbo(lse_minus_psi_y, log_eta):
    """Softmax ELBO, eq. (8): ``1 − log η − (1/η)(1 + Σ_{k'≠y} e^{ψ_k' − ψ_y})``.

    Parameters
    ----------
    lse_minus_psi_y : float
        ``log Σ_k e^{ψ_k} − ψ_y``, i.e. ``log(1 + Σ_{k'≠y} e^{ψ_k' − ψ_y}) = −log p(y | ψ)``.
    log_eta : float
        ``log η`` of the variational Gumbel(log η, 1).

    The bound equals ``log p(y | ψ)`` at ``log η* = lse_minus_psi_y`` and is below it
    elsewhere (it is ``−lse − (e^{a} − 1 − a)`` with ``a = lse − log η``).
    """
    return 1.0 - log_eta - math.exp(lse_minus_psi_y - log_eta)


@njit(cache=True, nogil=True)
def ove_bound(psi, y):
    """One-vs-each bound, eq. (10): ``Σ_{k'≠y} log σ(ψ_y − ψ_k')`` for one row ψ (length K)."""
    s = 0.0
    for k in range(psi.shape[0]):
        if k != y:
            s += _log_sigmoid(psi[y] - psi[k])
    return s


@njit(cache=True, nogil=True)
def _log_joint_row(model, psi, y, e):
    """``log φ(ε) + Σ_{k'≠y} log Φ(ε + ψ_y − ψ_k')``: the log of eq. (6)'s integrand."""
    s = log_phi(model, e)
    for k in range(psi.shape[0]):
        if k != y:
            s += log_Phi(model, e + psi[y] - psi[k])
    return s


@njit(cache=True, nogil=True)
def _log_lik_is_block(model, psi, y, eps, log_r, out):
    """Importance-sampling estimate of log eq. (5) for each row of a dense score block."""
    S = eps.shape[0]
    lw = np.empty(S)
    for i in range(psi.shape[0]):
        for s in range(S):
            lw[s] = _log_joint_row(model, psi[i], y[i], eps[s]) - log_r[s]
        out[i] = logsumexp(lw) - math.log(S)


def log_likelihood_is(model, scores, y, n_samples=1000, loc=5.0, scale=5.0, random_state=0):
    """``log p(y_n | ψ_n)`` of eq. (5) by importance sampling, one value per row.

    The paper's estimator (Section 4.2): proposal N(5, 5²), 1,000 samples, log-sum-exp.
    The same proposal draws are used for every row (common random numbers).

    Parameters
    ----------
    model : {"softmax", "probit", "logistic"} or its code
    scores : (n, K) array of mean utilities ψ
    y : (n,) int labels in [0, K)
    """
    code = MODELS[model] if isinstance(model, str) else int(model)
    rng = np.random.default_rng(random_state)
    eps = rng.normal(loc, scale, size=int(n_samples))
    log_r = -0.5 * ((eps - loc) / scale) ** 2 - math.log(scale) - _LOG_SQRT_2PI
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    out = np.empty(scores.shape[0])
    _log_lik_is_block(code, scores, np.asarray(y, dtype=np.int64), eps, log_r, out)
    return out


# -- 3. one iteration of stochastic variational EM -----------------------------------------
@njit(cache=True, nogil=True)
def subsample_classes(u, y, n_classes, out, mark):
    """Draw ``S_n ⊆ {0..K−1} \\ {y_n}`` of size ``|S|`` without replacement (Floyd's method).

    Parameters
    ----------
    u : (B, |S|) uniforms in [0, 1) drawn by the caller's Generator
    y : (B,) labels of the minibatch
    out : (B, |S|) int64, filled with the subsets
    mark : (K,) bool scratch, all False on entry and on exit

    O(B · |S|): the K-sized ``mark`` array is only touched at the drawn entries.
    """
    B, m = u.shape
    pool = n_classes - 1
    for i in range(B):
        for j in range(m):
            jj = pool - m + j
            r = int(u[i, j] * (jj + 1))
            if r > jj:
                r = jj
            if mark[r]:
                r = jj
            mark[r] = True
            out[i, j] = other_class(r, y[i])
        for j in range(m):
            c = out[i, j]
            mark[c - 1 if c > y[i] else c] = False


@njit(cache=True, nogil=True)
def batch_utilities(indptr, indices, data, batch, y, S, W, b, psi_y, psi_S):
    """``ψ_nk = w_kᵀx_n + w_k⁽⁰⁾`` for ``k = y_n`` and ``k ∈ S_n``: O(B · (|S|+1) · nnz).

    (The sparse dot product of :func:`xclib._numba.sparse_row_dot`, written inline: slicing a
    row view per class costs more than the dot itself when rows are short.)
    """
    for i in range(batch.shape[0]):
        n = batch[i]
        lo, hi = indptr[n], indptr[n + 1]
        k = y[i]
        acc = b[k]
        for p in range(lo, hi):
            acc += data[p] * W[k, indices[p]]
        psi_y[i] = acc
        for j in range(S.shape[1]):
            k = S[i, j]
            acc = b[k]
            for p in range(lo, hi):
                acc += data[p] * W[k, indices[p]]
            psi_S[i, j] = acc


@njit(cache=True, nogil=True)
def softmax_local_step(psi_y, psi_S, log_eta, batch, alpha, n_classes, scale, C, elbo):
    """Algorithm 1: local (E) step on η_n and the global gradient's coefficients.

    ``η̃_n = 1 + (K−1)/|S| Σ_{k'∈S_n} e^{ψ_nk' − ψ_ny}``, ``η_n ← (1−α_n) η_n + α_n η̃_n``
    (``alpha`` holds one step size per row of the minibatch)
    (computed on the log scale: ``log_eta`` is updated in place). Then ``C[i, j]`` is the
    coefficient of the gradient of the ELBO (8) with respect to ``ψ_{n,S_nj}`` (negated):
    ``(N/|B|) (K−1)/|S| e^{ψ_nk' − ψ_ny} / η_n``; the gradient for ``ψ_ny`` is ``+Σ_j C[i, j]``.
    ``elbo[i]`` is the one-sample estimate of eq. (8) (unbiased: (8) is linear in the sum).
    """
    m = psi_S.shape[1]
    log_ratio = math.log((n_classes - 1) / m)
    d = np.empty(m)
    for i in range(psi_y.shape[0]):
        log1ma = math.log1p(-alpha[i]) if alpha[i] < 1.0 else -np.inf
        loga = math.log(alpha[i])
        dmax = -np.inf
        for j in range(m):
            dmax = max(dmax, psi_S[i, j] - psi_y[i])
        tot = 0.0
        for j in range(m):  # one exp per sampled class, reused by the global step
            d[j] = math.exp(psi_S[i, j] - psi_y[i] - dmax)
            tot += d[j]
        a = log_ratio + dmax + math.log(tot)
        log_eta_tilde = max(0.0, a) + math.log1p(math.exp(-abs(a)))  # log(1 + e^a)
        n = batch[i]
        old = log1ma + log_eta[n]
        new = loga + log_eta_tilde
        hi = max(old, new)
        log_eta[n] = hi + math.log(math.exp(old - hi) + math.exp(new - hi))
        le = log_eta[n]
        elbo[i] = softmax_elbo(log_eta_tilde, le)
        f = scale * math.exp(log_ratio + dmax - le)
        for j in range(m):
            C[i, j] = f * d[j]


@njit(cache=True, nogil=True)
def noise_local_step(model, psi_y, psi_S, mu, gamma, batch, u_local, u_global, alpha,
                     n_classes, scale, C, elbo):
    """Algorithm 2: local step on ``q(ε_n) = N(μ_n, σ_n²)`` or ``Logistic(μ_n, σ_n)``.

    ``σ_n = softplus(γ_n)``, ``ε = μ + σ u`` with ``u ~ q^(rep)`` (``u_local``, ``u_global``
    drawn by the caller; ``alpha`` one step size per row). The one-sample gradient (9) with the reduced log joint
    ``log p̃ = log φ(ε) + (K−1)/|S| Σ_{k'∈S} log Φ(ε + ψ_y − ψ_k')`` is::

        ∂/∂μ = ∂_ε log p̃ ,    ∂/∂γ = (∂_ε log p̃ · u + 1/σ) · sigmoid(γ)

    (the ``1/σ`` is the entropy's gradient, ∇_σ H = 1/σ, which eq. 9 includes). Then the
    global step draws a fresh ``ε_n`` from the updated ``q`` and sets the negated gradient
    coefficients ``C[i, j] = (N/|B|) (K−1)/|S| (φ/Φ)(ε_n + ψ_ny − ψ_nk')``.
    ``elbo[i]`` is the one-sample estimate of eq. (7) at the local draw.
    """
    m = psi_S.shape[1]
    ratio = (n_classes - 1) / m
    for i in range(psi_y.shape[0]):
        n = batch[i]
        sig = _softplus(gamma[n])
        e = mu[n] + sig * u_local[i]
        g = dlog_phi(model, e)
        lj = log_phi(model, e)
        for j in range(m):
            z = e + psi_y[i] - psi_S[i, j]
            g += ratio * dlog_Phi(model, z)
            lj += ratio * log_Phi(model, z)
        elbo[i] = lj + entropy(model, sig)
        mu[n] += alpha[i] * g
        gamma[n] += alpha[i] * (g * u_local[i] + 1.0 / sig) * sigmoid(gamma[n])
        e2 = mu[n] + _softplus(gamma[n]) * u_global[i]
        for j in range(m):
            C[i, j] = scale * ratio * dlog_Phi(model, e2 + psi_y[i] - psi_S[i, j])


@njit(cache=True, nogil=True)
def ove_coefficients(psi_y, psi_S, n_classes, scale, C, elbo):
    """The OVE bound (10) from the same subsets: ``C[i, j] = (N/|B|)(K−1)/|S| σ(ψ_k' − ψ_y)``.

    ``elbo[i] = (K−1)/|S| Σ_{k'∈S} log σ(ψ_y − ψ_k')``, an unbiased estimate of eq. (10).
    """
    m = psi_S.shape[1]
    ratio = (n_classes - 1) / m
    for i in range(psi_y.shape[0]):
        s = 0.0
        for j in range(m):
            z = psi_y[i] - psi_S[i, j]
            s += _log_sigmoid(z)
            C[i, j] = scale * ratio * sigmoid(-z)
        elbo[i] = ratio * s


@njit(cache=True, nogil=True)
def global_step(indptr, indices, data, batch, y, S, C, W, b, G, Gb, sW, sb, stampW, stampb,
                touched, touched_b, t, rho, fit_intercept):
    """Global (M) step shared by every method: ``w ← w + ρ_t g`` with Section 4's step size.

    The gradient is ``g = Σ_{n∈B} Σ_{k'∈S_n} C[n, k'] (x̃_n e_{y_n} − x̃_n e_{k'})`` with
    ``x̃ = (x, 1)`` (weights and bias). Per coordinate,
    ``s_t = 0.1 g_t² + 0.9 s_{t−1}`` (``s = g²`` at the first touch, as in ADVI) and
    ``ρ_t = rho · t^{−1/2+1e−16} / (1 + √s_t)``; ``rho`` already includes the ×0.9 decay.

    ``G``/``Gb`` are zero gradient buffers (left zero on exit), ``sW``/``sb`` the RMS state
    (−1 = never touched), ``stampW``/``stampb`` the iteration of the last touch, ``touched``
    and ``touched_b`` scratch of size ≥ B·(|S|+1)·max nnz and B·(|S|+1). O(B · |S| · nnz).
    """
    D = W.shape[1]
    nt = 0
    nb = 0
    m = S.shape[1]
    for i in range(batch.shape[0]):
        n = batch[i]
        lo, hi = indptr[n], indptr[n + 1]
        cy = 0.0
        for j in range(m + 1):
            if j < m:
                k = S[i, j]
                c = -C[i, j]
                cy += C[i, j]
            else:
                k = y[i]
                c = cy
            for p in range(lo, hi):  # sparse_row_axpy(c, x_n, G[k]) with lazy touches
                col = indices[p]
                last = stampW[k, col]
                if last != t:  # first touch in this iteration: decay the RMS state lazily
                    if sW[k, col] > 0.0:
                        dt = t - last
                        sW[k, col] *= _DECAY[dt] if dt < _NDECAY else 0.9 ** dt
                    stampW[k, col] = t
                    touched[nt] = k * D + col
                    nt += 1
                G[k, col] += c * data[p]
            if fit_intercept:
                last = stampb[k, 0]
                if last != t:
                    if sb[k, 0] > 0.0:
                        dt = t - last
                        sb[k, 0] *= _DECAY[dt] if dt < _NDECAY else 0.9 ** dt
                    stampb[k, 0] = t
                    touched_b[nb] = k
                    nb += 1
                Gb[k] += c
    step = rho * t ** (-0.5 + 1e-16)
    for q in range(nt):
        k = touched[q] // D
        col = touched[q] - k * D
        g = G[k, col]
        G[k, col] = 0.0
        if sW[k, col] < 0.0:
            sW[k, col] = g * g
        else:
            sW[k, col] += 0.1 * g * g
        W[k, col] += step * g / (1.0 + math.sqrt(sW[k, col]))
    for q in range(nb):
        k = touched_b[q]
        g = Gb[k]
        Gb[k] = 0.0
        if sb[k, 0] < 0.0:
            sb[k, 0] = g * g
        else:
            sb[k, 0] += 0.1 * g * g
        b[k] += step * g / (1.0 + math.sqrt(sb[k, 0]))


# -- 4. the estimator ----------------------------------------------------------------------
class AugmentReduce(IterativeSoftmaxEstimator):
    """Maximum likelihood for softmax, multinomial probit or logistic by A&R (Ruiz et al. 2018).

    Linear utilities ``ψ_nk = w_kᵀ x_n + w_k⁽⁰⁾``; each iteration samples a minibatch ``B`` of
    rows and, per row, ``|S|`` classes other than its label, takes a local step on the row's
    variational parameters and a global gradient step on the weights. ``model="ove"`` is the
    baseline of the paper: the one-vs-each bound (Titsias 2016, eq. 10) maximised with the
    same sampler and step sizes.

    Parameters
    ----------
    model : {"softmax", "probit", "logistic", "ove"}
    batch_size : int, |B| (clipped to N)
    n_sampled : int, |S| (clipped to K − 1)
    learning_rate : float, ρ₀ of Section 4 (0.02)
    decay, decay_every : ρ₀ is multiplied by ``decay`` every ``decay_every`` iterations
    local_learning_rate : float or None, the α scale: α_t = a (1+t)^{−0.9};
        None = the paper's 1 (softmax) or 0.01 (probit, logistic)
    local_clock : {"visits", "global"}, what ``t`` counts in α_t: the number of visits of the
        row so far (default: each row's η_n or (μ_n, γ_n) follows its own Robbins–Monro
        sequence) or the global iteration, a literal reading of Algorithms 1–2, under which
        the local parameters freeze after the first epochs whenever an epoch has many
        iterations and the A&R bound becomes looser than OVE's (chapter 2 shows both)
    init_scale, init_scale_bias : standard deviations of the Gaussian initial weights and
        biases (0.1 and 0.001); drawn first from ``random_state``, so every model starts from
        the same point for the same seed
    fit_intercept : bool
    history_samples : int, importance samples of eq. (5) for the probit/logistic
        ``history_`` losses (a cheaper version of :meth:`log_likelihood`)
    n_epochs, random_state, verbose : as in every estimator of the book

    Attributes
    ----------
    coef_, intercept_, classes_, history_, diverged_, n_epochs_ : see the base class
    elbo_trace_ : (iterations,) mean per-row stochastic ELBO of each minibatch
    time_trace_ : (iterations,) cumulative seconds at the end of each iteration
    n_iter_ : int, iterations done
    """

    def __init__(self, model="softmax", batch_size=500, n_sampled=1, learning_rate=0.02,
                 decay=0.9, decay_every=2000, local_learning_rate=None, local_clock="visits",
                 init_scale=0.1, init_scale_bias=0.001, fit_intercept=True,
                 history_samples=100,
                 n_epochs=10, random_state=None, verbose=False):
        self.model = model
        self.batch_size = batch_size
        self.n_sampled = n_sampled
        self.learning_rate = learning_rate
        self.decay = decay
        self.decay_every = decay_every
        self.local_learning_rate = local_learning_rate
        self.local_clock = local_clock
        self.init_scale = init_scale
        self.init_scale_bias = init_scale_bias
        self.fit_intercept = fit_intercept
        self.history_samples = history_samples
        self.n_epochs = n_epochs
        self.random_state = random_state
        self.verbose = verbose

    # -- the three methods of the base contract -------------------------------------------
    def _init_state(self, X, y, rng):
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {sorted(MODELS)}, got {self.model!r}")
        for name in ("batch_size", "n_sampled", "decay_every"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.local_clock not in ("global", "visits"):
            raise ValueError(f"local_clock must be 'global' or 'visits', got {self.local_clock!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        N, D = X.shape
        K = self.classes_.shape[0]
        W = rng.normal(0.0, self.init_scale, size=(K, D))
        b = rng.normal(0.0, self.init_scale_bias, size=K)
        if not self.fit_intercept:
            b[:] = 0.0
        B = min(int(self.batch_size), N)
        m = min(int(self.n_sampled), K - 1)
        code = MODELS[self.model]
        a = self.local_learning_rate
        if a is None:
            a = 1.0 if code == 0 else 0.01
        nnz_max = int(np.diff(X.indptr).max()) if N else 0
        st = dict(
            code=code, W=W, b=b, B=B, m=m, N=N, K=K, t=0, alpha0=float(a),
            G=np.zeros((K, D)), Gb=np.zeros(K), sW=np.full((K, D), -1.0),
            sb=np.full((K, 1), -1.0), stampW=np.zeros((K, D), np.int64),
            stampb=np.zeros((K, 1), np.int64),
            touched=np.empty(max(1, B * (m + 1) * nnz_max), np.int64),
            touched_b=np.empty(B * (m + 1), np.int64), mark=np.zeros(K, np.bool_),
            psi_y=np.empty(B), psi_S=np.empty((B, m)), S=np.empty((B, m), np.int64),
            C=np.empty((B, m)), elbo=np.empty(B), visits=np.zeros(N, np.int64), elbo_trace=[], time_trace=[], clock=0.0,
        )
        if code == 0:
            # η* = Σ_k e^{ψ_k − ψ_y} ≈ K at the near-zero initial weights.
            st["log_eta"] = np.full(N, math.log(K))
        elif code in (1, 2):
            st["mu"] = np.zeros(N)
            st["gamma"] = np.full(N, math.log(math.e - 1.0))  # scale 1
        return st

    def _run_epoch(self, st, X, y, epoch, rng):
        indptr, indices, data = X.indptr, X.indices, X.data
        N, B, m, K, code = st["N"], st["B"], st["m"], st["K"], st["code"]
        perm = rng.permutation(N)
        n_iter = max(1, N // B)
        scale = N / B
        for it in range(n_iter):
            t0 = time.perf_counter()
            st["t"] += 1
            t = st["t"]
            batch = perm[it * B:(it + 1) * B]
            yb = y[batch]
            subsample_classes(rng.random((B, m)), yb, K, st["S"], st["mark"])
            batch_utilities(indptr, indices, data, batch, yb, st["S"], st["W"], st["b"],
                            st["psi_y"], st["psi_S"])
            if self.local_clock == "global":
                alpha = np.full(B, min(1.0, st["alpha0"] * (1.0 + t) ** -0.9))
            else:
                st["visits"][batch] += 1
                alpha = np.minimum(1.0, st["alpha0"] * (1.0 + st["visits"][batch]) ** -0.9)
            if code == 0:
                softmax_local_step(st["psi_y"], st["psi_S"], st["log_eta"], batch, alpha, K,
                                   scale, st["C"], st["elbo"])
            elif code == 3:
                ove_coefficients(st["psi_y"], st["psi_S"], K, scale, st["C"], st["elbo"])
            else:
                if code == 1:
                    u1, u2 = rng.standard_normal(B), rng.standard_normal(B)
                else:
                    u1, u2 = rng.logistic(size=B), rng.logistic(size=B)
                noise_local_step(code, st["psi_y"], st["psi_S"], st["mu"], st["gamma"], batch,
                                 u1, u2, alpha, K, scale, st["C"], st["elbo"])
            rho = self.learning_rate * self.decay ** ((t - 1) // self.decay_every)
            global_step(indptr, indices, data, batch, yb, st["S"], st["C"], st["W"], st["b"],
                        st["G"], st["Gb"], st["sW"], st["sb"], st["stampW"], st["stampb"],
                        st["touched"], st["touched_b"], t, rho, bool(self.fit_intercept))
            st["clock"] += time.perf_counter() - t0
            st["elbo_trace"].append(float(st["elbo"].mean()))
            st["time_trace"].append(st["clock"])
        self.elbo_trace_ = np.asarray(st["elbo_trace"])
        self.time_trace_ = np.asarray(st["time_trace"])
        self.n_iter_ = st["t"]

    def _coef(self, st):
        return st["W"], (st["b"] if self.fit_intercept else None)

    def _history_metrics(self, coef, intercept, X, y):
        ll, err = self._loglik_and_error(coef, intercept, X, y, self.history_samples)
        return -ll, err

    # -- evaluation -------------------------------------------------------------------------
    def _loglik_and_error(self, coef, intercept, X, y, n_samples, random_state=0):
        code = MODELS[self.model]
        if code in (0, 3) and X.nnz == 0 and intercept is not None:
            # no features (the Section 4.1 toy): ψ_n = b for every row, O(N + K)
            log_p = intercept - logsumexp(intercept)
            return float(np.mean(log_p[y])), float(np.mean(y != np.argmax(intercept)))
        if code in (0, 3):
            loss, err = softmax_loss_and_error(coef, X, y, intercept)
            return -loss, err
        total, wrong = 0.0, 0
        for start, stop, s in score_blocks(coef, X, intercept):
            yy = y[start:stop]
            total += log_likelihood_is(code, s, yy, n_samples, random_state=random_state).sum()
            wrong += int(np.sum(np.argmax(s, axis=1) != yy))
        n = max(X.shape[0], 1)
        return total / n, wrong / n

    def log_likelihood(self, X, y, n_samples=1000, random_state=0):
        """Mean ``log p(y | x)`` under the fitted model: eq. (1) for softmax and OVE (both fit
        a softmax), eq. (5) by importance sampling (N(5, 5²) proposal) for probit/logistic."""
        X = self._validate_X(X)
        from .base import as_csr

        ll, _ = self._loglik_and_error(self.coef_, self.intercept_, as_csr(X),
                                       self._encode(y), n_samples, random_state)
        return ll

    def predict_proba(self, X, n_samples=200, random_state=0):
        """Class probabilities: softmax of the scores (softmax, OVE), or eq. (5) for every class
        by importance sampling (probit, logistic; O(N K² n_samples), for small K)."""
        if MODELS[self.model] in (0, 3):
            return super().predict_proba(X)
        s = self.scores(X)
        N, K = s.shape
        logp = np.empty((N, K))
        for k in range(K):
            logp[:, k] = log_likelihood_is(self.model, s, np.full(N, k), n_samples,
                                           random_state=random_state)
        p = np.exp(logp - logp.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))
