"""Noise models and bounds of Augment and Reduce (Ruiz et al. 2018, Sections 2-3).

``log φ``, ``log Φ`` and their derivatives for the three error distributions (Gumbel: softmax,
Gaussian: multinomial probit, logistic: multinomial logistic), the softmax ELBO (eq. 8), the
one-vs-each bound (eq. 10) and ``log p(y | ψ)`` of eq. (5) by importance sampling.
"""
from __future__ import annotations

import math
from enum import IntEnum

import numpy as np
from numba import njit

from .._numba import log_sigmoid, logsumexp, sigmoid

__all__ = [
    "Model",
    "MODELS",
    "model_code",
    "log_phi",
    "dlog_phi",
    "log_Phi",
    "dlog_Phi",
    "entropy",
    "softmax_elbo",
    "ove_bound",
    "log_likelihood_is",
]


class Model(IntEnum):
    """The code of each model, as the kernels receive it (an int)."""

    SOFTMAX = 0   # Gumbel errors
    PROBIT = 1    # Gaussian errors
    LOGISTIC = 2  # logistic errors
    OVE = 3       # the one-vs-each bound of the softmax (Titsias 2016), the paper's baseline


#: Model name (the estimator's ``model=``) -> :class:`Model`.
MODELS = {m.name.lower(): m for m in Model}

_SOFTMAX, _PROBIT, _LOGISTIC = int(Model.SOFTMAX), int(Model.PROBIT), int(Model.LOGISTIC)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)


def model_code(model):
    """:class:`Model` of a name ("softmax", "probit", "logistic", "ove") or of a code."""
    return MODELS[model] if isinstance(model, str) else Model(int(model))


# -- noise models ---------------------------------------------------------------------------
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
    if model == _SOFTMAX:
        return -e - math.exp(-e)
    if model == _PROBIT:
        return -0.5 * e * e - _LOG_SQRT_2PI
    return log_sigmoid(e) + log_sigmoid(-e)


@njit(cache=True, nogil=True)
def dlog_phi(model, e):
    """d/dε log φ(ε)."""
    if model == _SOFTMAX:
        return -1.0 + math.exp(-e)
    if model == _PROBIT:
        return -e
    return sigmoid(-e) - sigmoid(e)


@njit(cache=True, nogil=True)
def log_Phi(model, z):
    """log Φ(z) of the standard error CDF."""
    if model == _SOFTMAX:
        return -math.exp(-z)
    if model == _PROBIT:
        return _log_ndtr(z)
    return log_sigmoid(z)


@njit(cache=True, nogil=True)
def dlog_Phi(model, z):
    """d/dz log Φ(z) = φ(z)/Φ(z)."""
    if model == _SOFTMAX:
        return math.exp(-z)
    if model == _PROBIT:
        return _dlog_ndtr(z)
    return sigmoid(-z)


@njit(cache=True, nogil=True)
def entropy(model, scale):
    """Entropy of q(ε) = N(μ, scale²) (model 1) or Logistic(μ, scale) (model 2)."""
    if model == _PROBIT:
        return math.log(scale) + 0.5 * math.log(2.0 * math.pi * math.e)
    return math.log(scale) + 2.0


# -- the bounds and the likelihood ------------------------------------------------------------
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
            s += log_sigmoid(psi[y] - psi[k])
    return s


@njit(cache=True, nogil=True)
def _skip_z(model):
    """z above which a class's log Φ(z) is skipped: for probit it is exactly 0.0 in double
    precision there (Φ(z) rounds to 1 above z ≈ 8.3), for logistic below e^{−40} ≈ 4e−18."""
    if model == _PROBIT:
        return 8.5
    if model == _LOGISTIC:
        return 40.0
    return math.inf


@njit(cache=True, nogil=True)
def _log_joint_row(model, psi, y, e):
    """``log φ(ε) + Σ_{k'≠y} log Φ(ε + ψ_y − ψ_k')``: the log of eq. (6)'s integrand.

    The terms with ``z >`` :func:`_skip_z` are not computed: under the
    N(5, 5²) proposal most draws put most classes there, and log Φ is the costly part.
    """
    s = log_phi(model, e)
    a = e + psi[y]
    zmax = _skip_z(model)
    for k in range(psi.shape[0]):
        if k != y:
            z = a - psi[k]
            if z <= zmax:
                s += log_Phi(model, z)
    return s


#: a draw whose log weight falls this far below the largest so far is not summed further:
#: its share of the log-sum-exp is below e^{−60} ≈ 1e−26, nothing in double precision
_IS_CUT = 60.0


@njit(cache=True, nogil=True)
def _log_lik_is_block(model, psi, y, eps, log_r, out):
    """Importance-sampling estimate of log eq. (5) for each row of a dense score block.

    Each draw's log weight is :func:`_log_joint_row`'s sum minus ``log r(ε)``, summed over the
    classes in ascending order of ``d_k = ψ_y − ψ_k`` (the largest terms first), stopping at
    the first ``z = ε + d_k`` above :func:`_skip_z` (every later term is zero, or below
    e^{−40}) or once the partial sum is ``_IS_CUT`` below the largest log weight so far
    (later terms only lower it, and the draw no longer counts in the log-sum-exp). The
    estimate is the full sum's up to round-off.
    """
    S = eps.shape[0]
    K = psi.shape[1]
    zmax = _skip_z(model)
    lw = np.empty(S)
    d = np.empty(max(K - 1, 0))
    for i in range(psi.shape[0]):
        yi = y[i]
        j = 0
        for k in range(K):
            if k != yi:
                d[j] = psi[i, yi] - psi[i, k]
                j += 1
        d.sort()
        best = -math.inf
        for s in range(S):
            e = eps[s]
            v = log_phi(model, e) - log_r[s]
            for j in range(K - 1):
                z = e + d[j]
                if z > zmax:
                    break
                v += log_Phi(model, z)
                if v < best - _IS_CUT:
                    break
            lw[s] = v
            if v > best:
                best = v
        out[i] = logsumexp(lw) - math.log(S)


def log_likelihood_is(model, scores, y, n_samples=1000, loc=5.0, scale=5.0, random_state=0):
    """``log p(y_n | ψ_n)`` of eq. (5) by importance sampling, one value per row.

    The paper's estimator (Section 4.2): proposal N(5, 5²), 1,000 samples, log-sum-exp.
    The same proposal draws are used for every row (common random numbers).

    Parameters
    ----------
    model : {"softmax", "probit", "logistic"} or its :class:`Model` code
    scores : (n, K) array of mean utilities ψ
    y : (n,) int labels in [0, K)
    n_samples : int, proposal draws
    loc, scale : float, the Gaussian proposal N(loc, scale²)
    random_state : None, int or Generator, the proposal draws

    Returns
    -------
    (n,) array of estimated ``log p(y_n | ψ_n)``.
    """
    code = int(model_code(model))
    rng = np.random.default_rng(random_state)
    eps = rng.normal(loc, scale, size=int(n_samples))
    log_r = -0.5 * ((eps - loc) / scale) ** 2 - math.log(scale) - _LOG_SQRT_2PI
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    out = np.empty(scores.shape[0])
    _log_lik_is_block(code, scores, np.asarray(y, dtype=np.int64), eps, log_r, out)
    return out
