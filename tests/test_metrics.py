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


def test_log_loss_and_error_match_sklearn(problem, monkeypatch):
    X, y, W, b = problem
    p = _proba(X, W, b)
    ref_loss = log_loss(y, p, labels=np.arange(9))
    ref_err = np.mean(p.argmax(1) != y)
    loss, err = M.softmax_loss_and_error(W, X, y, b)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    assert err == pytest.approx(ref_err)
    assert M.softmax_log_loss(W, X, y, b, normalize=False) == pytest.approx(300 * ref_loss)
    # tiny blocks: the blocked path gives the same numbers
    monkeypatch.setattr(M, "BLOCK_ENTRIES", 20)
    blocks = list(M.score_blocks(W, X, b, block_entries=20))
    assert len(blocks) == 150
    assert M.softmax_log_loss(W, X, y, b) == pytest.approx(ref_loss, rel=1e-12)


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
