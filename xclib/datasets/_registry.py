"""The registry of datasets: one table drives :func:`load` and :func:`describe`.

Each :class:`Dataset` names its files (keys of :data:`._files.FILES`, which record their
sha256 and upstream URL), its splits, the shape facts of the mirror's ``MANIFEST.md``, its
options with their defaults, and its loader (:mod:`._loaders`). :func:`load` checks the
arguments against the table and dispatches to the loader; adding a dataset is adding a row.
"""
from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from . import _loaders
from ._fetch import offline, where

__all__ = ["Dataset", "DATASETS", "load", "describe", "label_columns"]


@dataclass(frozen=True)
class Dataset:
    """One dataset: what :func:`load` needs to find, check and read it.

    Attributes
    ----------
    splits : tuple of str
    n : dict
        Rows per split (from the MANIFEST; :func:`describe` ``compute=True`` measures them).
    d : int or str
        Columns (a string where an option decides them).
    K : int, dict or str
        Classes (per split where they differ).
    partial : bool
        Only part of the set is available: smoke tests and illustrations only.
    files : tuple of str
        Keys of the data files read (see :data:`xclib.datasets._files.FILES`).
    loader : callable
        ``loader(split, loc, **options) -> (X, y)`` (``(X, Y)``, Y the CSR label sets, for
        ``labels="all"``), memoised and read-only.
    options : dict
        The options :func:`load` accepts for this set, with their defaults.

    ``dataset["splits"]`` etc. also work, as for the dicts of xclib 0.1.
    """

    splits: tuple
    n: dict
    d: Any
    K: Any
    partial: bool
    files: tuple
    loader: Callable = field(repr=False)
    options: dict = field(default_factory=dict)

    def __getitem__(self, key):
        return getattr(self, key)


_MNIST_FILES = tuple(f"mnist/{p}-{k}-idx{i}-ubyte.gz" for p in ("train", "t10k")
                     for k, i in (("images", 3), ("labels", 1)))

#: The datasets :func:`load` knows: splits, the MANIFEST's shape facts, files, loader, options.
DATASETS = {
    "mnist": Dataset(("train", "test"), {"train": 60000, "test": 10000}, 784, 10, False,
                     _MNIST_FILES, _loaders.load_mnist),
    "bibtex": Dataset(("train", "test"), {"train": 4880, "test": 2515}, 1836,
                      {"train": 146, "test": 145}, False,
                      ("bibtex/bibtex-train.arff.gz", "bibtex/bibtex-test.arff.gz",
                       "bibtex/bibtex.xml"),
                      functools.partial(_loaders.load_mulan, "bibtex"),
                      {"only_train_classes": False, "labels": "first"}),
    "delicious": Dataset(("train", "test"), {"train": 12910, "test": 3181}, 500,
                         {"train": 352, "test": 241}, False,
                         ("delicious/delicious-train.arff.gz",
                          "delicious/delicious-test.arff.gz", "delicious/delicious.xml"),
                         functools.partial(_loaders.load_mulan, "delicious"),
                         {"only_train_classes": False, "labels": "first"}),
    "20newsgroups": Dataset(("train", "test"), {"train": 11314, "test": 7532}, "max_features",
                            20, False, ("20newsgroups/20news-bydate.tar.gz",),
                            _loaders.load_newsgroups, {"max_features": 10000}),
    "a9a": Dataset(("train", "test"), {"train": 32561, "test": 16281}, 123, 2, False,
                   ("a9a/a9a.gz", "a9a/a9a.t.gz"), _loaders.load_a9a),
    "covtype_binary": Dataset(("train", "test"), {"train": 522911, "test": 58101}, 54, 2,
                              False, ("covtype_binary/covtype.libsvm.RData",),
                              _loaders.load_covtype, {"split_seed": 0}),
    "sector": Dataset(("heldout", "test"), {"heldout": 865, "test": 961}, 55197, 105, True,
                      ("sector_partial/sector.heldout.gz", "sector_partial/sector.test.gz"),
                      _loaders.load_sector),
    "clef": Dataset(("train", "test"), {"train": 10000, "test": 1006}, 80, 63, False,
                    ("clef/ImCLEF07A_Train.arff.gz", "clef/ImCLEF07A_Test.arff.gz"),
                    _loaders.load_clef),
    "aloi": Dataset(("train", "test"), {"train": 97200, "test": 10800}, 128, 1000, False,
                    ("aloi/aloi_train.vw.gz", "aloi/aloi_test.vw.gz"), _loaders.load_aloi),
    "clef_partial": Dataset(("test",), {"test": 1006}, 80, 63, True,
                            ("clef_partial/clef_test.txt.gz", "clef_partial/cat_hier.txt"),
                            _loaders.load_clef_partial),
    "omniglot": Dataset(("train", "small1", "small2"),
                        {"train": 5840, "small1": 2720, "small2": 3120}, "size**2",
                        "242 characters / 8 alphabets", True,
                        ("omniglot_partial/images_background_small1.zip",
                         "omniglot_partial/images_background_small2.zip"),
                        _loaders.load_omniglot, {"size": 28, "label": "character"}),
}


def _loc(cache_dir, download):
    """Where files are looked for: part of every memoisation key, so tests can change it."""
    return (("cache_dir", None if cache_dir is None else str(cache_dir)),
            ("download", download), ("root", os.environ.get("XCLIB_DATA")),
            ("cache", os.environ.get("XCLIB_CACHE")), ("offline", offline()))


def _check_arguments(name, split, options, fraction):
    """The :class:`Dataset` of ``name``, once ``split``, ``options`` and ``fraction`` are valid."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    spec = DATASETS[name]
    if split not in spec.splits:
        extra = ""
        if spec.partial:
            extra = f" ({name} is a partial set: only {', '.join(spec.splits)} exist here)"
        raise ValueError(f"{name} has no split {split!r}; choose one of {spec.splits}{extra}")
    unknown = set(options) - set(spec.options)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)} for {name!r}; "
                        f"its options are {sorted(spec.options) or 'none'}")
    if fraction is not None and not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    return spec


def load(name, split="train", normalize=False, fraction=None, random_state=0, *,
         cache_dir=None, download=None, **options):
    """Load a dataset split as ``(X, y)``.

    Parameters
    ----------
    name : str
        One of

        ``"mnist"``
            60000 / 10000 images, 784 pixel features scaled to [0, 1] (value / 255), K = 10.
        ``"bibtex"``, ``"delicious"``
            MULAN multi-label sets made multi-class by keeping each row's lowest-index label
            (its position among the label attributes, i.e. the order of the ``.xml``), as the
            softmax papers did. Rows with no label are dropped with a warning (delicious: 10
            train, 4 test; counts in :data:`UNLABELLED_ROWS`). One encoding serves both
            splits: the train split's first labels, in label order, get codes
            ``0..K_train-1`` (K_train = 146 / 352); first labels seen only in test follow
            (codes ``K_train, ...``: 2 for bibtex on 3 test rows, 19 for delicious on 21 test
            rows). Option ``only_train_classes=True`` drops those test rows, so that a model
            fitted on train can score every test row (e.g. as ``eval_set``). Bibtex: 4880 /
            2515 rows × 1836 binary features; delicious: 12910 / 3181 rows × 500.

            Option ``labels="all"`` returns ``(X, Y)`` with ``Y`` the full label sets, a CSR
            N × L indicator (float64 ones; L = 159 / 983 columns in the order of the
            ``.xml``), for the multi-label metrics (:func:`xclib.metrics.precision_at_k`).
            Its rows are exactly those of ``labels="first"`` with the same options (rows
            without any label dropped; ``only_train_classes`` drops the same test rows), so
            ``Y`` row i holds the first label ``y[i]`` and the others of row i. Class code
            ``c`` is label column ``label_columns(name)[c]`` (:func:`label_columns`): a
            model fitted on first labels ranks label columns as
            ``label_columns(name)[model.predict_topk(X, k)]``.
        ``"20newsgroups"``
            The "bydate" split (11314 / 7532 posts, K = 20, codes = groups in alphabetical
            order), vectorised by :class:`~sklearn.feature_extraction.text.TfidfVectorizer`
            fitted on the training posts only (the test split uses the train vocabulary and
            idf). Option ``max_features`` (default 10000: the 10^4 most frequent words keep
            ~99% of the tokens while K × D stays small for the per-class weight matrices).
            The fitted vectorizer is cached in memory.
        ``"a9a"``
            LIBSVM's UCI Adult, 32561 / 16281 rows × 123 binary features; y = 1 for the
            LIBSVM label +1 (income > 50K), 0 for −1.
        ``"covtype_binary"``
            LIBSVM covtype.binary, 581012 rows × 54 unscaled features; y = 1 for the LIBSVM
            class 2, else 0. There is no official split: ``"train"`` / ``"test"`` are a
            seeded 90 / 10 random split of the rows (option ``split_seed``, default 0;
            522911 / 58101 rows, each in file order).
        ``"sector"``
            PARTIAL, for smoke tests and illustrations only: the PD-Sparse re-split of LIBSVM
            sector has only its ``"heldout"`` (865) and ``"test"`` (961) parts here, 55197
            tf-idf features, K = 105 (codes = LIBSVM labels − 1). No train split.
        ``"clef"``
            ImageCLEF 2007 medical images (ImCLEF07A, the DS-MLR paper's CLEF), complete:
            10000 / 1006 rows × 80 dense integer features 0-7 (as stored: not standardised),
            K = 63 (codes = the rank of the class path, e.g. ``"2/1/3"``, among train's).
        ``"aloi"``
            ALOI (Amsterdam Library of Object Images), 128-bin colour histograms: 97200 /
            10800 rows × 128 small integer counts (1-9; 31 non-zeros a row on average),
            K = 1000 objects (codes = labels − 1); every class has 87-105 train rows.
        ``"clef_partial"``
            PARTIAL, for smoke tests and illustrations only: the ImageCLEF07 ``"test"`` split
            only, as another source standardised it, 1006 rows × 80 dense features, K = 63
            (codes = rank of the label among the leaves of ``cat_hier.txt``).
        ``"omniglot"``
            PARTIAL, for smoke tests and illustrations only: 8 of the 50 alphabets (the
            "background small 1" and "small 2" zips; split ``"small1"``, ``"small2"`` or
            ``"train"`` = both). Each 105×105 PNG is box-downsampled to ``size`` × ``size``
            (option, default 28) with ink = 1, background = 0. Option ``label``:
            ``"character"`` (default; 242 codes, "alphabet/characterNN" sorted; Greek and Latin
            appear in both zips and share codes) or ``"alphabet"`` (8 codes).
    split : str
        ``"train"`` or ``"test"`` (``"heldout"`` for sector; see above).
    normalize : bool
        Scale each row to unit L2 norm (Fagan & Iyengar normalise features this way). All-zero
        rows stay zero.
    fraction : float in (0, 1], optional
        Keep a random subset of ``round(fraction * n)`` rows (at least 1), drawn without
        replacement with ``numpy.random.default_rng(random_state)``, in their original order.
        Not stratified: rare classes may be absent from a small subsample.
    random_state : int
        Seed of the subsample.
    cache_dir : path, optional
        Cache folder (default ``$XCLIB_CACHE`` or the project's ``data/cache``).
    download : bool, optional
        Allow downloading missing files (default: yes unless ``$XCLIB_OFFLINE`` is set).
    **options
        Dataset options named above (``only_train_classes``, ``labels``, ``max_features``,
        ``split_seed``, ``size``, ``label``).

    Returns
    -------
    X : scipy.sparse.csr_matrix, float64, shape (n, d), canonical (sorted indices)
    y : numpy.ndarray of int64, shape (n,); with ``labels="all"`` a scipy.sparse.csr_matrix
        (n, L) indicator of the label sets

    Raises
    ------
    DataNotFoundError, ChecksumError, DataFormatError, ValueError
    """
    spec = _check_arguments(name, split, options, fraction)
    loc = _loc(cache_dir, download)
    X, y = spec.loader(split, loc, **{**spec.options, **options})
    X = X.copy()
    y = y.copy() if sp.issparse(y) else np.array(y, dtype=np.int64)
    if fraction is not None:
        n = X.shape[0]
        m = max(1, int(round(fraction * n)))
        rows = np.sort(np.random.default_rng(random_state).choice(n, size=m, replace=False))
        X, y = X[rows], y[rows]
    if normalize:
        from sklearn.preprocessing import normalize as _normalize

        X = _normalize(X, norm="l2", copy=False)
    return X, y


def label_columns(name, codes=None, *, cache_dir=None, download=None):
    """Label column of each class code of a multi-label set loaded with ``labels="first"``.

    ``label_columns(name)[c]`` is the column of ``load(name, labels="all")``'s ``Y`` (the
    label's position in the ``.xml``) that class code ``c`` stands for; with ``codes`` (e.g. a
    fitted model's ``classes_`` or its ``predict_topk`` output) the columns of those codes,
    in the same shape. Codes are the same in both splits (see :func:`load`).
    """
    if name not in DATASETS or "labels" not in DATASETS[name].options:
        multi = sorted(n for n, d in DATASETS.items() if "labels" in d.options)
        raise ValueError(f"label_columns is defined for the multi-label sets {multi}, "
                         f"got {name!r}")
    loc = _loc(cache_dir, download)
    order = np.array(_loaders.mulan_label_columns(name, loc))
    if codes is None:
        return order
    codes = np.asarray(codes)
    if codes.size and (codes.dtype.kind not in "iu" or codes.min() < 0
                       or codes.max() >= order.size):
        raise ValueError(f"{name}: class codes must be integers in [0, {order.size}), got "
                         f"{codes.dtype} values" + (f" in [{codes.min()}, {codes.max()}]"
                                                    if codes.dtype.kind in "iuf" else ""))
    return order[codes]


def describe(compute=False, cache_dir=None):
    """A table of the datasets: splits, shapes, K, where their files are, complete or partial.

    Parameters
    ----------
    compute : bool
        Load every available split to report the measured shape, K and density (slow the
        first time: covtype and 20 Newsgroups take a while). Otherwise the table gives the
        MANIFEST's numbers and only checks where the files are.
    cache_dir : path, optional
        Cache folder, as for :func:`load`.

    Returns
    -------
    pandas.DataFrame
        One row per (dataset, split): ``name, split, n, d, K, nnz, density, found, complete``;
        ``found`` is ``XCLIB_DATA``, ``cache`` or ``missing`` (the worst over its files).
    """
    import pandas as pd

    rows = []
    for name, spec in DATASETS.items():
        found = [where(key, cache_dir) for key in spec.files]
        found = ("missing" if "missing" in found else "cache" if "cache" in found
                 else "XCLIB_DATA")
        for split in spec.splits:
            K = spec.K[split] if isinstance(spec.K, dict) else spec.K
            row = dict(name=name, split=split, n=spec.n[split], d=spec.d, K=K,
                       nnz=None, density=None, found=found,
                       complete="partial" if spec.partial else "complete")
            if compute and found != "missing":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    X, y = load(name, split, cache_dir=cache_dir, download=False)
                row.update(n=X.shape[0], d=X.shape[1], K=int(np.unique(y).size), nnz=X.nnz,
                           density=X.nnz / (X.shape[0] * X.shape[1]))
            rows.append(row)
    return pd.DataFrame(rows)
