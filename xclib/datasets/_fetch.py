"""Finding, checking and downloading data files.

Each file of :data:`._files.FILES` is looked for, in this order, in ``$XCLIB_DATA`` (the
read-only mirror), in the cache (``$XCLIB_CACHE``, the ``cache_dir`` argument, or the
project's ``data/cache``), and finally downloaded from its upstream with :mod:`pooch`,
checked against its sha256 (unless ``download=False`` or ``$XCLIB_OFFLINE`` is set). Every
file found is checked against its sha256 once per process.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import zipfile
from pathlib import Path

from ._errors import ChecksumError, DataFormatError, DataNotFoundError
from ._files import (
    FILES,
    MNIST_MEMBER,
    MNIST_RAW_SHA256,
    MNIST_WHEEL_NAME,
    MNIST_WHEEL_SHA256,
    MNIST_WHEEL_URL,
)

__all__ = ["locate", "read_bytes", "where", "offline"]


def data_root():
    """``$XCLIB_DATA`` as a path, or None when it is not set."""
    root = os.environ.get("XCLIB_DATA")
    return Path(root).expanduser() if root else None


def cache_root(cache_dir=None):
    """The cache folder: ``cache_dir``, else ``$XCLIB_CACHE``, else the project's cache."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("XCLIB_CACHE")
    if env:
        return Path(env).expanduser()
    project = Path(__file__).resolve().parents[2]  # xclib/datasets/_fetch.py -> project
    if (project / "pyproject.toml").exists():
        return project / "data" / "cache"
    import pooch

    return Path(pooch.os_cache("xclib"))


def offline():
    """Whether ``$XCLIB_OFFLINE`` forbids downloads (any value but empty, 0, false, no)."""
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


def _cache_candidates(f, cache):
    """``(path, accepted sha256s)`` of the cache copies of file ``f``, in lookup order."""
    either = tuple(h for h in (f.sha256, f.url_sha256) if h)
    if f.url_name == f.name:  # the upstream file has the mirror's name (20 Newsgroups)
        return [(cache / f.name, either)]
    out = [(cache / f.name, f.sha256)]
    if f.url_name is not None:
        out.append((cache / f.url_name, either))
    if f.dir == "mnist":
        out.append((cache / MNIST_WHEEL_NAME, MNIST_WHEEL_SHA256))
    return out


def locate(key, *, cache_dir=None, download=None):
    """Path of the data file ``key`` (``"<dir>/<file>"`` as in the mirror), checked.

    Looks in ``$XCLIB_DATA``, then the cache, then downloads the upstream file into the
    cache (unless ``download=False`` or ``$XCLIB_OFFLINE`` is set). The returned path may be
    the mirror's (possibly ``.gz``) file, the upstream's uncompressed one, or (MNIST) the
    upstream wheel; :func:`read_bytes` opens any of them.

    Raises
    ------
    KeyError
        ``key`` is not a known data file.
    ChecksumError
        The file found has another sha256 than the one recorded.
    DataNotFoundError
        The file is nowhere and could not be downloaded; the message lists every place
        looked, why no download happened, and how to get the file.
    """
    if key not in FILES:
        raise KeyError(f"unknown data file {key!r}; known: {sorted(FILES)}")
    f = FILES[key]
    looked = []
    root = data_root()
    if root is not None:
        p = root / f.dir / f.name
        looked.append(str(p))
        if p.is_file():
            return _verify(p, f.sha256)
    else:
        looked.append("$XCLIB_DATA (not set)")
    cache = cache_root(cache_dir) / f.dir
    for p, sha in _cache_candidates(f, cache):
        looked.append(str(p))
        if p.is_file():
            return _verify(p, sha)
    if download is None:
        download = not offline()
        why = "downloads are off ($XCLIB_OFFLINE is set)" if not download else None
    else:
        why = None if download else "downloads are off (download=False)"
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
    url = MNIST_WHEEL_URL if f.dir == "mnist" else f.url
    if url:
        how += f", or allow the download from {url} (unset XCLIB_OFFLINE, download=True)"
    msg = f"data file {key!r} not found. Looked in: " + "; ".join(looked) + ". "
    if why:
        msg += why[0].upper() + why[1:] + ". "
    msg += how + "."
    if error is not None:
        msg += f" The download failed: {error!r}"
    raise DataNotFoundError(msg)


def _download(f, cache):
    import pooch

    cache.mkdir(parents=True, exist_ok=True)
    if f.dir == "mnist":
        return Path(pooch.retrieve(MNIST_WHEEL_URL, f"sha256:{MNIST_WHEEL_SHA256}",
                                   fname=MNIST_WHEEL_NAME, path=cache))
    if f.url is None:
        raise DataNotFoundError(f"no public source recorded for {f.dir}/{f.name}")
    return Path(pooch.retrieve(f.url, f"sha256:{f.url_sha256}", fname=f.url_name, path=cache))


def read_bytes(key, **kw):
    """The uncompressed bytes of data file ``key``, wherever it was found (see :func:`locate`).

    ``.gz`` files are decompressed in memory; MNIST files found as the upstream wheel are read
    from it and checked against their canonical sha256.
    """
    path = locate(key, **kw)
    if path.suffix == ".whl":  # MNIST from the wheel
        canonical = Path(key).name[:-3]
        member = MNIST_MEMBER[canonical]
        try:
            with zipfile.ZipFile(path) as z:
                data = z.read(member)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise DataFormatError(f"{path}: cannot read {member} from the wheel ({exc})") from None
        got = hashlib.sha256(data).hexdigest()
        if got != MNIST_RAW_SHA256[canonical]:
            raise ChecksumError(f"{path}!{member}: sha256 is {got}, expected "
                                f"{MNIST_RAW_SHA256[canonical]}")
        return data
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise DataFormatError(f"{path}: not a valid gzip file ({exc})") from None
    return data


def where(key, cache_dir=None):
    """Where file ``key`` would be found without downloading: XCLIB_DATA, cache or missing."""
    f = FILES[key]
    root = data_root()
    if root is not None and (root / f.dir / f.name).is_file():
        return "XCLIB_DATA"
    cache = cache_root(cache_dir) / f.dir
    if any(p.is_file() for p, _ in _cache_candidates(f, cache)):
        return "cache"
    return "missing"
