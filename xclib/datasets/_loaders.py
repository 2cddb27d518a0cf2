"""One loader per dataset: files -> ``(X, y)`` in the conventions of :func:`load`.

Every public loader here has the signature ``loader(split, loc, **options)`` and returns a
memoised, read-only ``(X, y)``: ``X`` canonical CSR float64 (:func:`xclib.base.as_csr`),
``y`` int64 codes. ``loc`` is a hashable tuple of ``(name, value)`` pairs saying where files
are looked for (``cache_dir``, ``download`` and the environment); it is part of every
memoisation key, so changing ``$XCLIB_DATA`` (as the tests do) reloads. :func:`load` copies
what it returns, so callers may modify it.
"""
from __future__ import annotations

import functools
import io
import tarfile
import warnings
import zipfile

import numpy as np
import scipy.sparse as sp

from ..base import as_csr
from ._errors import DataFormatError
from ._fetch import locate, read_bytes
from ._readers import read_arff, read_idx, read_mulan_labels, read_svmlight

__all__ = ["UNLABELLED_ROWS", "load_mnist", "load_mulan", "mulan_label_columns", "load_newsgroups", "load_a9a",
           "load_covtype", "load_sector", "load_clef_partial", "load_clef", "load_aloi",
           "load_omniglot"]


def _kw(loc):
    """:func:`locate` keyword arguments from a ``loc`` key."""
    return {k: v for k, v in loc if k in ("cache_dir", "download")}


def _freeze(X, y):
    """Canonical CSR float64 and int64 labels, made read-only (they are memoised)."""
    X = as_csr(X)
    y = np.asarray(y, dtype=np.int64)
    for a in (X.data, X.indices, X.indptr, y):
        a.flags.writeable = False
    return X, y


def _svmlight(key, n_features, loc):
    return read_svmlight(read_bytes(key, **_kw(loc)), n_features, name=key)


# --------------------------------------------------------------------------------------------
# MULAN: bibtex, delicious
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _mulan_raw(dir, split, loc):
    """Features, label matrix and label names of a MULAN set's split."""
    names = read_mulan_labels(read_bytes(f"{dir}/{dir}.xml", **_kw(loc)), f"{dir}/{dir}.xml")
    key = f"{dir}/{dir}-{split}.arff.gz"
    Z, attributes = read_arff(read_bytes(key, **_kw(loc)), key)
    col = {a: k for k, a in enumerate(attributes)}
    missing = [n for n in names if n not in col]
    if missing:
        raise DataFormatError(f"{key}: label attributes {missing[:5]} of the XML are not in the "
                              "ARFF header")
    label_cols = np.array([col[n] for n in names])
    is_label = np.zeros(len(attributes), bool)
    is_label[label_cols] = True
    feature_cols = np.flatnonzero(~is_label)
    Z = Z.tocsc()
    return Z[:, feature_cols].tocsr(), Z[:, label_cols].tocsr(), names


def _first_label(Y):
    """Lowest label index per row (-1 where the row has no label)."""
    Y = Y.tocsr()
    Y.eliminate_zeros()
    Y.sort_indices()
    first = np.full(Y.shape[0], -1, np.int64)
    has = np.diff(Y.indptr) > 0
    first[has] = Y.indices[Y.indptr[:-1][has]]
    return first


#: Rows without any label dropped by the MULAN loader, per (name, split), once parsed.
UNLABELLED_ROWS: dict = {}


@functools.lru_cache(maxsize=None)
def _mulan_code_order(dir, loc):
    """Label column of each class code (code -> position of the label in the XML).

    Codes ``0..K_train-1`` are the first labels occurring in train, in label order (their
    position in the XML); the first labels that occur only in test follow, also in label
    order, as ``K_train, K_train+1, ...``. So train codes are contiguous and the same code
    is the same tag in both splits.
    """
    firsts = {s: _first_label(_mulan_raw(dir, s, loc)[1]) for s in ("train", "test")}
    seen = np.unique(firsts["train"][firsts["train"] >= 0])
    only_test = np.setdiff1d(firsts["test"][firsts["test"] >= 0], seen)
    order = np.concatenate([seen, only_test])
    order.flags.writeable = False
    return order


@functools.lru_cache(maxsize=None)
def _mulan(dir, split, loc):
    """Multi-class MULAN: keep the lowest-index label; one encoding for train and test
    (:func:`_mulan_code_order`). Rows without any label are dropped."""
    order = _mulan_code_order(dir, loc)
    X, Y, names = _mulan_raw(dir, split, loc)
    code = np.full(len(names), -1, np.int64)
    code[order] = np.arange(order.size)
    first = _first_label(Y)
    keep = first >= 0
    n_drop = int((~keep).sum())
    UNLABELLED_ROWS[(dir, split)] = n_drop
    if n_drop:
        # stack: _mulan, load_mulan, load, the caller of load
        warnings.warn(f"{dir} {split}: {n_drop} rows without any label dropped", stacklevel=4)
    return _freeze(X[keep], code[first[keep]])


@functools.lru_cache(maxsize=None)
def _mulan_all_labels(dir, split, loc):
    """The full label sets (CSR N × L indicator, columns in XML order) of the rows
    :func:`_mulan` keeps, in the same order."""
    Y = sp.csr_matrix(_mulan_raw(dir, split, loc)[1], dtype=np.float64, copy=True)
    Y.eliminate_zeros()                     # as _first_label: a stored 0 is no label
    Y = as_csr(Y[np.diff(Y.indptr) > 0])
    Y.data[:] = 1.0
    for a in (Y.data, Y.indices, Y.indptr):
        a.flags.writeable = False
    return Y


def load_mulan(dir, split, loc, only_train_classes=False, labels="first"):
    """Bibtex or Delicious (``dir``); see :func:`xclib.datasets.load`."""
    if labels not in ("first", "all"):
        raise ValueError(f"labels must be 'first' (one class per row, the softmax papers' "
                         f"reduction) or 'all' (the full label sets), got {labels!r}")
    X, y = _mulan(dir, split, loc)
    Y = _mulan_all_labels(dir, split, loc) if labels == "all" else None
    if only_train_classes and split != "train":
        keep = y < np.unique(_mulan(dir, "train", loc)[1]).size
        if not keep.all():
            warnings.warn(f"{dir} {split}: {int((~keep).sum())} rows whose first label "
                          "never occurs in train dropped (only_train_classes=True)",
                          stacklevel=3)
        X, y = X[keep], y[keep]
        Y = None if Y is None else Y[keep]
    return (X, y) if Y is None else (X, Y)


def mulan_label_columns(dir, loc):
    """Label column (position in the XML) of each class code of :func:`_mulan`."""
    return _mulan_code_order(dir, loc)


# --------------------------------------------------------------------------------------------
# MNIST, a9a, covtype
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def load_mnist(split, loc):
    """MNIST: pixels / 255, labels 0..9."""
    prefix = "train" if split == "train" else "t10k"
    img_key = f"mnist/{prefix}-images-idx3-ubyte.gz"
    lab_key = f"mnist/{prefix}-labels-idx1-ubyte.gz"
    images = read_idx(read_bytes(img_key, **_kw(loc)), img_key)
    labels = read_idx(read_bytes(lab_key, **_kw(loc)), lab_key)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise DataFormatError(f"MNIST {split}: images {images.shape} ({img_key}) and labels "
                              f"{labels.shape} ({lab_key}) do not match")
    X = sp.csr_matrix(images.reshape(images.shape[0], -1).astype(np.float64) / 255.0)
    return _freeze(X, labels)


@functools.lru_cache(maxsize=None)
def load_a9a(split, loc):
    """a9a: 123 binary features; y = 1 for the LIBSVM label +1."""
    X, y = _svmlight("a9a/a9a.gz" if split == "train" else "a9a/a9a.t.gz", 123, loc)
    return _freeze(X, (y > 0).astype(np.int64))


@functools.lru_cache(maxsize=1)
def _covtype_full(loc):
    import rdata

    path = locate("covtype_binary/covtype.libsvm.RData", **_kw(loc))
    try:
        obj = rdata.read_rda(str(path))["covtype.libsvm"]
    except Exception as exc:
        raise DataFormatError(f"{path}: cannot read the R data ({exc!r})") from None
    X = np.asarray(obj["X"], dtype=np.float64)
    y = np.asarray(obj["y"]).ravel()
    return sp.csr_matrix(X), (y == 2).astype(np.int64)


@functools.lru_cache(maxsize=None)
def _covtype(split, split_seed, loc):
    X, y = _covtype_full(loc)
    perm = np.random.default_rng(split_seed).permutation(X.shape[0])
    n_test = X.shape[0] // 10
    rows = np.sort(perm[n_test:] if split == "train" else perm[:n_test])
    return _freeze(X[rows], y[rows])


def load_covtype(split, loc, split_seed=0):
    """covtype.binary: a seeded 90/10 split of the rows; y = 1 for the LIBSVM class 2."""
    return _covtype(split, int(split_seed), loc)


# --------------------------------------------------------------------------------------------
# 20 Newsgroups
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _newsgroups_text(loc):
    """(train docs, train labels, test docs, test labels, group names) from the tarball."""
    key = "20newsgroups/20news-bydate.tar.gz"
    data = read_bytes(key, **_kw(loc))
    docs = {"train": [], "test": []}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for m in tar:
                if not m.isfile():
                    continue
                parts = m.name.split("/")
                if len(parts) != 3 or not parts[0].startswith("20news-bydate-"):
                    continue
                split = parts[0][len("20news-bydate-"):]
                if split not in docs:
                    continue
                text = tar.extractfile(m).read().decode("latin-1")
                docs[split].append((parts[1], parts[2], text))
    except tarfile.TarError as exc:
        raise DataFormatError(f"{key}: not a readable tar archive ({exc})") from None
    names = sorted({g for s in docs for g, _, _ in docs[s]})
    code = {g: k for k, g in enumerate(names)}
    out = []
    for s in ("train", "test"):
        rows = sorted(docs[s], key=lambda r: (r[0], r[1]))
        out += [[r[2] for r in rows], np.array([code[r[0]] for r in rows], np.int64)]
    return (*out, names)


@functools.lru_cache(maxsize=8)
def _newsgroups_vectorizer(max_features, loc):
    """The word counter (fitted on the training posts), the columns kept and the TF-IDF weights.

    The kept words are the ``max_features`` most frequent in the training posts, ties broken
    by the words' alphabetical order, in alphabetical order. That is
    ``TfidfVectorizer(max_features=...)`` except among tied words at the cut, where scikit-learn
    follows ``np.argsort``'s unstable sort, whose order differs between CPUs (NumPy sorts with
    AVX-512 where it can): on 20 Newsgroups at 10,000 words, the default and a stable sort
    keep 61 different words.
    """
    from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

    train_docs = _newsgroups_text(loc)[0]
    counter = CountVectorizer(dtype=np.int64)
    counts = counter.fit_transform(train_docs)  # columns in alphabetical order
    keep = np.arange(counts.shape[1])
    if max_features is not None and max_features < counts.shape[1]:
        freq = np.asarray(counts.sum(axis=0)).ravel()
        keep = np.sort(np.argsort(-freq, kind="stable")[:max_features])
    tfidf = TfidfTransformer().fit(counts[:, keep])
    return counter, keep, tfidf


@functools.lru_cache(maxsize=8)
def _newsgroups(split, max_features, loc):
    tr_docs, tr_y, te_docs, te_y, _ = _newsgroups_text(loc)
    counter, keep, tfidf = _newsgroups_vectorizer(max_features, loc)
    docs, y = (tr_docs, tr_y) if split == "train" else (te_docs, te_y)
    return _freeze(tfidf.transform(counter.transform(docs)[:, keep]), y.copy())


def load_newsgroups(split, loc, max_features=10000):
    """20 Newsgroups "bydate", TF-IDF fitted on the training posts."""
    mf = max_features
    if mf is not None and (isinstance(mf, bool) or not isinstance(mf, (int, np.integer))
                           or mf < 1):
        raise ValueError(f"max_features must be a positive int or None, got {mf!r}")
    return _newsgroups(split, mf, loc)


# --------------------------------------------------------------------------------------------
# The partial sets: sector, clef, omniglot (smoke tests and illustrations only)
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def load_sector(split, loc):
    """PARTIAL set, for smoke tests and illustrations only (no train split here)."""
    X, y = _svmlight(f"sector_partial/sector.{split}.gz", 55197, loc)
    return _freeze(X, y.astype(np.int64) - 1)


@functools.lru_cache(maxsize=None)
def load_clef_partial(split, loc):
    """PARTIAL set, for smoke tests and illustrations only (test split only)."""
    key = "clef_partial/cat_hier.txt"
    hier = read_bytes(key, **_kw(loc)).decode()
    try:
        edges = np.array([line.split() for line in hier.splitlines() if line.strip()],
                         dtype=np.int64)
    except ValueError:
        edges = None
    if edges is None or edges.ndim != 2 or edges.shape[1] != 2:
        raise DataFormatError(f"{key}: expected lines 'parent child' of two integers")
    leaves = np.array(sorted(set(edges[:, 1]) - set(edges[:, 0])))
    X, y = _svmlight("clef_partial/clef_test.txt.gz", 80, loc)
    y = y.astype(np.int64)
    if not np.isin(y, leaves).all():
        raise DataFormatError("clef_partial/clef_test.txt.gz: labels that are not leaves of "
                              "cat_hier.txt")
    return _freeze(X, np.searchsorted(leaves, y))


@functools.lru_cache(maxsize=None)
def _clef_raw(split, loc):
    """Features (integers 0-7) and class paths of one ImCLEF07A split (dense ARFF)."""
    key = f"clef/ImCLEF07A_{split.capitalize()}.arff.gz"
    text = read_bytes(key, **_kw(loc)).decode("ascii", errors="replace")
    head, sep, body = text.partition("@DATA")
    if not sep:
        raise DataFormatError(f"{key}: no @DATA section")
    n_attr = sum(1 for line in head.splitlines() if line.upper().startswith("@ATTRIBUTE"))
    rows, paths = [], []
    for lineno, line in enumerate(body.splitlines(), start=head.count("\n") + 1):
        line = line.strip()
        if not line or line.startswith("%"):
            continue
        fields = line.split(",")
        if len(fields) != n_attr:
            raise DataFormatError(f"{key}, line {lineno}: {len(fields)} fields, expected "
                                  f"{n_attr} ({n_attr - 1} features and the class)")
        try:
            rows.append([float(v) for v in fields[:-1]])
        except ValueError:
            raise DataFormatError(f"{key}, line {lineno}: a feature that is not a number"
                                  ) from None
        paths.append(fields[-1].split("@")[-1])  # the deepest path is the class
    X = np.array(rows, dtype=np.float64).reshape(len(rows), n_attr - 1)
    if not np.isfinite(X).all():
        raise DataFormatError(f"{key}: NaN or infinite feature values")
    return X, np.array(paths)


@functools.lru_cache(maxsize=None)
def load_clef(split, loc):
    """ImageCLEF 2007 (ImCLEF07A), complete: 80 integer features 0-7, 63 leaf classes.

    Codes are the rank of the class path (``"2/1/3"``) among the train split's paths, so both
    splits share them; a test path never seen in train is an error (none is, here).
    """
    classes = np.unique(_clef_raw("train", loc)[1])
    X, paths = _clef_raw(split, loc)
    code = np.searchsorted(classes, paths)
    if not np.array_equal(classes[np.minimum(code, classes.size - 1)], paths):
        raise DataFormatError(f"clef {split}: class paths not seen in train")
    return _freeze(sp.csr_matrix(X), code)


@functools.lru_cache(maxsize=None)
def load_aloi(split, loc):
    """ALOI (Vowpal Wabbit text ``label | idx:val ...``): 128 features, labels 1..1000 -> 0..999."""
    key = f"aloi/aloi_{split}.vw.gz"
    data = read_bytes(key, **_kw(loc))
    # "label | 1:4 6:4" is svmlight once the namespace bar goes
    X, y = read_svmlight(data.replace(b" | ", b" ").replace(b" |", b" "), 128, name=key)
    y = y.astype(np.int64)
    if y.min() < 1 or y.max() > 1000:
        raise DataFormatError(f"{key}: labels outside 1..1000")
    return _freeze(X, y - 1)


def _omniglot_pngs(key, loc):
    """``(alphabet, alphabet/character, member, zip bytes)`` of every PNG of a zip, sorted."""
    with zipfile.ZipFile(io.BytesIO(read_bytes(key, **_kw(loc)))) as z:
        for member in sorted(z.namelist()):
            p = member.split("/")
            if len(p) == 4 and p[3].endswith(".png"):
                yield p[1], p[1] + "/" + p[2], z.read(member)


@functools.lru_cache(maxsize=1)
def _omniglot_names(loc):
    alphabets, characters = set(), set()
    for part in ("small1", "small2"):
        key = f"omniglot_partial/images_background_{part}.zip"
        with zipfile.ZipFile(io.BytesIO(read_bytes(key, **_kw(loc)))) as z:
            for member in z.namelist():
                p = member.split("/")
                if len(p) == 4 and p[3].endswith(".png"):
                    alphabets.add(p[1])
                    characters.add(p[1] + "/" + p[2])
    return alphabets, characters


@functools.lru_cache(maxsize=None)
def _omniglot(split, size, label, loc):
    from PIL import Image

    parts = {"small1": ["small1"], "small2": ["small2"], "train": ["small1", "small2"]}[split]
    items = []
    for part in parts:
        for alphabet, character, png in _omniglot_pngs(
                f"omniglot_partial/images_background_{part}.zip", loc):
            img = Image.open(io.BytesIO(png)).convert("L").resize((size, size), Image.BOX)
            ink = 1.0 - np.asarray(img, dtype=np.float64) / 255.0
            items.append((alphabet, character, ink.ravel()))
    which = 0 if label == "alphabet" else 1
    # one encoding for every split: the sorted names over both zips' directory listings
    names = sorted(_omniglot_names(loc)[which])
    code = {n: k for k, n in enumerate(names)}
    X = sp.csr_matrix(np.array([it[2] for it in items]))
    y = np.array([code[it[which]] for it in items], np.int64)
    return _freeze(X, y)


def load_omniglot(split, loc, size=28, label="character"):
    """PARTIAL set (8 of 50 alphabets), for smoke tests and illustrations only."""
    if label not in ("character", "alphabet"):
        raise ValueError(f"label must be 'character' or 'alphabet', got {label!r}")
    size = int(size)
    if not 1 <= size <= 105:
        raise ValueError(f"size must be in 1..105, got {size}")
    return _omniglot(split, size, label, loc)
