"""Tests of the synthetic generators of xclib.datasets (make_softmax_data, the A&R toy)."""
import numpy as np
import scipy.sparse as sp
from scipy.special import softmax

from xclib.datasets import make_augment_reduce_toy, make_softmax_data
from xclib.datasets.synthetic import _sample_softmax_labels


def test_softmax_labels_follow_the_model():
    """The exact sampler: one row repeated, its label frequencies are its softmax."""
    X1, _, W = make_softmax_data(1, 40, 30, nnz_per_row=6, features_per_class=8, scale=1.5,
                                 random_state=5)
    n = 40000
    Xf = sp.vstack([X1[:, :-1]] * n, format="csr")
    Wt = W[:, :-1].T.tocsr()
    b = W[:, -1].toarray().ravel()
    y = _sample_softmax_labels(Xf.indptr, Xf.indices, Xf.data, Wt.indptr, Wt.indices,
                               Wt.data, b, np.cumsum(np.exp(b)),
                               np.random.default_rng(0).random(n))
    p = softmax((X1 @ W.T).toarray().ravel())
    freq = np.bincount(y, minlength=30) / n
    assert np.abs(freq - p).max() < 4 * np.sqrt(p.max() / n)


def test_softmax_data_zipf_sizes_without_features():
    s = 1.3
    X, y, W = make_softmax_data(50000, 10, 50, scale=0.0, zipf_exponent=s, random_state=1)
    p = (np.arange(50) + 1.0) ** -s
    p /= p.sum()
    freq = np.bincount(y, minlength=50) / y.size
    assert np.abs(freq - p).max() < 0.01
    assert X.shape == (50000, 10) and W.shape == (50, 10)
    np.testing.assert_array_equal(X[:, -1].toarray(), 1.0)


def test_softmax_data_deterministic_and_large_K():
    a = make_softmax_data(2000, 1000, 100_000, random_state=7)
    b = make_softmax_data(2000, 1000, 100_000, random_state=7)
    c = make_softmax_data(2000, 1000, 100_000, random_state=8)
    for u, v in zip(a, b):
        assert (u != v).nnz == 0 if sp.issparse(u) else np.array_equal(u, v)
    assert not np.array_equal(a[1], c[1])
    X, y, W = a
    assert y.min() >= 0 and y.max() < 100_000 and W.shape == (100_000, 1000)
    counts = np.bincount(y, minlength=100_000)
    assert counts[:10].sum() > counts[-50_000:].sum()  # Zipf head


def test_softmax_data_is_learnable():
    from sklearn.linear_model import LogisticRegression

    X, y, W = make_softmax_data(6000, 200, 20, nnz_per_row=8, features_per_class=10, scale=4,
                                zipf_exponent=0.5, random_state=3)
    Xtr, ytr, Xte, yte = X[:5000], y[:5000], X[5000:], y[5000:]
    acc = LogisticRegression(C=1, max_iter=500).fit(Xtr, ytr).score(Xte, yte)
    majority = np.mean(yte == np.bincount(ytr).argmax())  # 0.10
    bayes = np.mean((Xte @ W.T).toarray().argmax(1) == yte)  # the true W: 0.35
    assert acc > majority + 0.15  # measured 0.32
    assert 0.8 * bayes < acc <= bayes + 0.03


def test_augment_reduce_toy():
    y, p = make_augment_reduce_toy(n_classes=1000, n_samples=200_000, random_state=0)
    y2, p2 = make_augment_reduce_toy(n_classes=1000, n_samples=200_000, random_state=0)
    assert np.array_equal(y, y2) and np.array_equal(p, p2)
    assert y.dtype == np.int64 and p.shape == (1000,) and np.isclose(p.sum(), 1.0)
    # p_k ∝ p̃², p̃ ~ U[0,1]: sqrt(p / max p) = p̃ / max p̃ is about U[0, 1]
    assert np.isclose(np.mean(np.sqrt(p / p.max())), 0.5, atol=0.05)
    freq = np.bincount(y, minlength=1000) / y.size
    assert np.abs(freq - p).max() < 5 * np.sqrt(p.max() / y.size)
