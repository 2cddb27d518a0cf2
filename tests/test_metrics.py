"""Exact softmax metrics against scikit-learn, including the blocked path."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import log_loss

import xclib.metrics as M


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    X = sp.random(300, 40, density=0.3, format="csr", random_state=np.random.RandomState(0))
    W = rng.normal(size=(9, 40))
    b = rng.normal(size=9)
    y = rng.integers(0, 9, size=300)
    return X, y, W, b


def _proba(X, W, b):
    s = X @ W.T + b
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("fused_from", [1, 32])
def test_log_loss_and_error_match_sklearn(problem, monkeypatch, fused_from):
    monkeypatch.setattr(M, "FUSED_MIN_CLASSES", fused_from)  # K = 9: fused, then blocked
    X, y, W, b = problem
    p = _proba(X, W, b)
    ref_loss = log_loss(y, p, labels=np.arange(9))
    ref_err = np.mean(p.argmax(1) != y)
    loss, err = M.softmax_loss_and_error(W, X, y, b)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    assert err == pytest.approx(ref_err)
    assert M.softmax_log_loss(W, X, y, b, normalize=False) == pytest.approx(300 * ref_loss)
    # CSR rows take the fused kernel; dense rows and tiny blocks the blocked path: same numbers
    dense = M.softmax_loss_and_error(W, X.toarray(), y, b)
    assert dense[0] == pytest.approx(ref_loss, rel=1e-12) and dense[1] == err
    blocks = list(M.score_blocks(W, X, b, block_entries=20))
    assert len(blocks) == 150
    total, wrong = M.blocked_loss_error(W, X, y, b, block_entries=20)
    assert total == pytest.approx(300 * ref_loss, rel=1e-12) and wrong == round(300 * ref_err)


def test_fused_loss_matches_blocks_on_hard_rows(monkeypatch):
    """Empty rows, tied scores (the first arg-max counts, as numpy's), no intercept, K = 1,
    scores far apart (exponentials that underflow), float32 weights; the fused kernel at
    every K here (the library uses it from K = 32)."""
    monkeypatch.setattr(M, "FUSED_MIN_CLASSES", 1)
    rng = np.random.default_rng(1)
    X = sp.random(50, 6, density=0.4, format="csr", random_state=np.random.RandomState(1))
    X = sp.diags(np.r_[np.zeros(5), np.ones(45)]) @ X
    X.eliminate_zeros()
    y = rng.integers(0, 4, size=50)
    W = np.round(rng.normal(size=(4, 6)))  # integer weights on 0/1 rows: ties
    X.data[:] = 1.0
    for coef, b in ((W, None), (W, np.zeros(4)), (800 * W, rng.normal(size=4)),
                    (W.astype(np.float32), None)):
        fused = M.softmax_loss_and_error(coef, X, y, b, normalize=False)
        total, wrong = M.blocked_loss_error(coef, X, y, b)
        assert fused[0] == pytest.approx(total, rel=1e-13)
        assert fused[1] == wrong / 50
    one = M.softmax_loss_and_error(W[:1], X, np.zeros(50, int))
    assert one == (0.0, 0.0)


def test_non_finite_weights_give_nan_not_a_number():
    X = sp.random(20, 5, density=0.5, format="csr", random_state=np.random.RandomState(2))
    W = np.ones((3, 5))
    W[1, 2] = np.nan
    with np.errstate(invalid="ignore"):
        assert np.isnan(M.softmax_log_loss(W, X, np.zeros(20, int)))
        W[1, 2] = np.inf
        assert not np.isfinite(M.softmax_log_loss(W, X, np.zeros(20, int)))


def test_true_label_rank(problem):
    X, y, W, b = problem
    s = np.asarray(X @ W.T) + b
    ranks = M.true_label_rank(W, X, y, b)
    ref = 1 + (s > s[np.arange(300), y][:, None]).sum(1)
    np.testing.assert_array_equal(ranks, ref)
    assert np.mean(ranks == 1) == pytest.approx(1 - M.softmax_error(W, X, y, b))


def test_bad_labels_are_named(problem):
    X, y, W, b = problem
    with pytest.raises(ValueError, match="encoded as 0..8"):
        M.softmax_log_loss(W, X, y + 1, b)
    with pytest.raises(ValueError, match="1-D with 300"):
        M.softmax_log_loss(W, X, y[:10], b)
    with pytest.raises(ValueError, match="0 rows"):
        M.softmax_log_loss(W, X[:0], y[:0], b)


def test_sklearn_wrappers():
    assert M.accuracy([0, 1, 1], [0, 1, 0]) == pytest.approx(2 / 3)
    assert M.macro_f1([0, 1, 1], [0, 1, 1]) == 1.0


# ------------------------------------------------------------------ multi-label ranking ----
def _multilabel(n=60, L=25, seed=0):
    rng = np.random.default_rng(seed)
    Y = sp.random(n, L, density=0.12, format="csr", random_state=np.random.RandomState(seed))
    Y.data[:] = 1.0
    keep = np.ones(n)
    keep[3] = 0                                   # a row without labels
    Y = sp.diags(keep) @ Y
    Y.eliminate_zeros()
    S = rng.standard_normal((n, L))
    return sp.csr_matrix(Y), S


def _brute(Y, S, k, inv_p):
    """Row by row, from the definitions (Jain et al. 2016; the XMC repository)."""
    Yd = Y.toarray() > 0
    p_at, ndcg, psp, psp_n = [], [], [], []
    for i in range(Yd.shape[0]):
        top = sorted(range(Yd.shape[1]), key=lambda l: (-S[i, l], l))[:k]
        rel = [float(Yd[i, l]) for l in top]
        p_at.append(sum(rel) / k)
        dcg = sum(r / np.log2(j + 2) for j, r in enumerate(rel))
        m = min(k, int(Yd[i].sum()))
        ndcg.append(dcg / sum(1 / np.log2(j + 2) for j in range(m)) if m else 0.0)
        gain = sum(inv_p[l] for l in top if Yd[i, l])
        psp.append(gain / k)
        best = sum(sorted((inv_p[l] for l in np.flatnonzero(Yd[i])), reverse=True)[:k])
        psp_n.append(gain / best if best else 0.0)
    return tuple(float(np.mean(v)) for v in (p_at, ndcg, psp, psp_n))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 3, 5])
def test_ranking_metrics_match_brute_force(seed, k):
    Y, S = _multilabel(seed=seed)
    p = M.propensity(Y)
    want = _brute(Y, S, k, 1 / p)
    ranked = M.rank_scores(S, 10)
    for pred in (S, sp.csr_matrix(S), ranked):
        got = (M.precision_at_k(Y, pred, k), M.ndcg_at_k(Y, pred, k),
               M.psprecision_at_k(Y, pred, k), M.psprecision_at_k(Y, pred, k, normalize=True))
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert M.ranking_metrics(Y, S, ks=(k,))[f"nDCG@{k}"] == pytest.approx(want[1], rel=1e-12)


def test_ranking_metrics_by_hand():
    # row 0 holds labels {0, 2}, row 1 label {3}; the ranking puts 2, 1, 0 and 3, 0, 1 first
    Y = sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 0, 0, 1]]))
    R = np.array([[2, 1, 0], [3, 0, 1]])
    assert M.precision_at_k(Y, R, 1) == 1.0
    assert M.precision_at_k(Y, R, 3) == pytest.approx((2 / 3 + 1 / 3) / 2)
    # row 0: DCG = 1 + 1/log2(4) = 1.5 over IDCG = 1 + 1/log2(3); row 1: 1 / 1
    assert M.ndcg_at_k(Y, R, 3) == pytest.approx((1.5 / (1 + 1 / np.log2(3)) + 1) / 2)
    # N = 2 rows: C = (log 2 − 1) 2.5^0.55 < 0, so take a larger training set for p
    Ytr = sp.csr_matrix(np.repeat(np.array([[1, 0, 1, 1]]), 100, axis=0))
    p = M.propensity(Ytr, A=0.55, B=1.5)
    C = (np.log(100) - 1) * 2.5**0.55
    np.testing.assert_allclose(p, [1 / (1 + C * 101.5**-0.55), 1 / (1 + C * 1.5**-0.55),
                                   1 / (1 + C * 101.5**-0.55), 1 / (1 + C * 101.5**-0.55)])
    want = (1 / p[2] + 1 / p[3]) / 2               # P@1 weighted by 1/p of the hit
    assert M.psprecision_at_k(Y, R, 1, propensities=p) == pytest.approx(want)
    assert M.propensity(Ytr, A=0.5, B=0.4)[1] == pytest.approx(
        1 / (1 + (np.log(100) - 1) * 1.4**0.5 * 0.4**-0.5))
    # −1: nothing predicted at that rank
    assert M.precision_at_k(Y, np.array([[-1, 0], [3, -1]]), 2) == 0.5


def test_ranking_metrics_refuse_bad_input():
    Y = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match="scipy.sparse"):
        M.precision_at_k(np.eye(3), np.eye(3), 1)
    with pytest.raises(ValueError, match="k must"):
        M.precision_at_k(Y, np.zeros((3, 2), int), 3)
    with pytest.raises(ValueError, match="k must"):
        M.ndcg_at_k(Y, np.eye(3), 4)
    with pytest.raises(ValueError, match=r"label columns in \[0, 3\)"):
        M.precision_at_k(Y, np.full((3, 1), 5), 1)
    with pytest.raises(ValueError, match="one column per label"):
        M.precision_at_k(Y, np.ones((3, 2)), 1)
    with pytest.raises(ValueError, match="rows"):
        M.precision_at_k(Y, np.zeros((2, 1), int), 1)
    with pytest.raises(ValueError, match="propensities"):
        M.psprecision_at_k(Y, np.eye(3), 1, propensities=np.zeros(3))
    with pytest.raises(ValueError, match="B must"):
        M.propensity(Y, B=-1)
