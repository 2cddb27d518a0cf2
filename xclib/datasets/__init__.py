"""Real and synthetic data for the book, found the same way everywhere.

:func:`load` returns ``(X, y)``: ``X`` a ``scipy.sparse.csr_matrix`` of float64 (dense sets
too, so every chapter has one code path) and ``y`` an int64 vector of class codes ``0..K-1``
(binary sets: ``{0, 1}`` with the positive class = 1). The multi-label sets (Bibtex,
Delicious) also give their full label sets, ``load(name, split, labels="all")``, as a CSR
indicator beside the first label; :func:`label_columns` maps class codes to its columns.

Where the files come from
-------------------------
Each file is looked for, in this order:

1. ``$XCLIB_DATA/<dir>/<file>``, laid out like the project's shared mirror (``MANIFEST.md``
   there lists every file and its sha256). The mirror is read-only: nothing is ever written
   beside its files; ``.gz`` files are decompressed in memory.
2. The project's cache ``data/cache/<dir>/`` (git-ignored; override with ``$XCLIB_CACHE`` or
   the ``cache_dir`` argument), holding either the mirror's file or the upstream file.
3. A download of the upstream file (the public source the mirror was made from, at a pinned
   commit) with ``pooch``, checked against its sha256, into the cache. Set ``XCLIB_OFFLINE=1``
   (or pass ``download=False``) to forbid it.

Every file found is checked against its sha256 once per process (memoised); a mismatch is an
error naming the file and both hashes. Nothing found and no download possible: a
:class:`DataNotFoundError` lists every place looked and how to get the file.

Parsed splits are memoised in-process (:func:`functools.lru_cache`); :func:`load` returns
fresh copies, so callers may modify what they get.

The package
-----------
============================  ==========================================================
``_registry``                 the table of datasets (:data:`DATASETS`), :func:`load`,
                              :func:`describe`
``_files``                    the table of files: mirror name, sha256, upstream URL
``_fetch``                    lookup, sha256 checks, download (:func:`locate`)
``_readers``                  sparse ARFF (:func:`read_arff`), LIBSVM
                              (:func:`read_svmlight`), IDX (:func:`read_idx`)
``_loaders``                  one loader per dataset
``synthetic``                 :func:`make_softmax_data`, :func:`make_augment_reduce_toy`
============================  ==========================================================

The readers refuse what they cannot read faithfully (a DataFormatError naming the file and
line): NaN or infinite values, a feature index repeated within a row, indices out of range.
LIBSVM files are parsed by :func:`sklearn.datasets.load_svmlight_file` (then checked), text
is vectorised by :class:`sklearn.feature_extraction.text.TfidfVectorizer`.
"""
from ._errors import ChecksumError, DataFormatError, DataNotFoundError
from ._fetch import locate
from ._loaders import UNLABELLED_ROWS
from ._readers import read_arff, read_idx, read_mulan_labels, read_svmlight
from ._registry import DATASETS, Dataset, describe, label_columns, load
from .synthetic import make_augment_reduce_toy, make_softmax_data

__all__ = [
    "DataNotFoundError",
    "ChecksumError",
    "DataFormatError",
    "DATASETS",
    "Dataset",
    "UNLABELLED_ROWS",
    "load",
    "label_columns",
    "describe",
    "locate",
    "read_arff",
    "read_mulan_labels",
    "read_idx",
    "read_svmlight",
    "make_softmax_data",
    "make_augment_reduce_toy",
]
