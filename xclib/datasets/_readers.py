"""Readers of the three file formats: sparse ARFF (MULAN), LIBSVM/svmlight, IDX (MNIST).

Each reader either returns well-formed arrays (finite values, one entry per index and row,
indices in range) or raises :class:`DataFormatError` naming the file and the line (text
formats) or the header field (IDX). The MULAN label XML is read by
:func:`read_mulan_labels`.
"""
from __future__ import annotations

import io
import math
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..base import as_csr
from ._errors import DataFormatError

__all__ = ["read_arff", "read_mulan_labels", "read_idx", "read_svmlight", "IDX_DTYPES"]

# --------------------------------------------------------------------------------------------
# ARFF
# --------------------------------------------------------------------------------------------

_ATTR = re.compile(r"""@attribute\s+('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+)\s+(.+)$""",
                   re.IGNORECASE)


def _unquote(name):
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", name[1:-1])
    return name


def _number(text):
    """``float(text)``, refusing missing values (``?``), NaN and infinities."""
    if text == "?":
        raise ValueError("missing value '?' (not supported)")
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"non-finite value {text!r}")
    return v


def _arff_header(lines, name):
    """Attribute names and the index of the ``@data`` line."""
    attributes = []
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
            if not attributes:
                raise DataFormatError(f"{name}: no @attribute lines before @data")
            return attributes, i
        raise DataFormatError(f"{name}, line {i + 1}: expected @relation, @attribute or @data, "
                              f"got {s[:60]!r}")
    raise DataFormatError(f"{name}: no @data line ({len(lines)} lines read)")


def _sparse_row(s, n_attr, indices, values):
    """Append the entries of the sparse row ``{i v,i v,...}`` to ``indices`` and ``values``.

    The fast path converts and checks the row as a whole; whenever it sees a problem, the
    careful path re-reads the row entry by entry to raise the precise error.
    """
    if s[-1] != "}":
        raise ValueError("sparse row does not end with '}'")
    body = s[1:-1].strip()
    if not body:
        return
    try:
        pairs = [item.split() for item in body.split(",")]
        ks = [int(k) for k, _ in pairs]
        vs = [float(v) for _, v in pairs]
        ok = (min(ks) >= 0 and max(ks) < n_attr and len(set(ks)) == len(ks)
              and math.isfinite(sum(vs)))  # the sum is finite if all values are (or overflows)
    except ValueError:
        ok = False
    if ok:
        indices.extend(ks)
        values.extend(vs)
    else:
        _sparse_row_careful(body, n_attr, indices, values)


def _sparse_row_careful(body, n_attr, indices, values):
    """Entry by entry: raise ValueError naming the first bad entry, else append them all."""
    seen = set()
    for item in body.split(","):
        parts = item.split()
        if len(parts) != 2:
            raise ValueError(f"sparse entry {item.strip()!r} is not 'index value'")
        k = int(parts[0])
        if not 0 <= k < n_attr:
            raise ValueError(f"attribute index {k} out of range 0..{n_attr - 1}")
        if k in seen:
            raise ValueError(f"duplicate attribute index {k} in one row")
        seen.add(k)
        indices.append(k)
        values.append(_number(parts[1]))


def _dense_row(s, n_attr, indices, values):
    """Append the non-zero entries of the dense row ``v,v,...,v``."""
    items = s.split(",")
    if len(items) != n_attr:
        raise ValueError(f"dense row has {len(items)} values, expected {n_attr}")
    for k, v in enumerate(items):
        v = _number(v.strip())
        if v != 0.0:
            indices.append(k)
            values.append(v)


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
    X : scipy.sparse.csr_matrix, float64, shape (n_rows, n_attributes), sorted indices
    attributes : list of str
        Attribute names in file order (quotes removed).

    Raises
    ------
    DataFormatError
        Naming the line number of the first malformed line: an unknown header, a value that
        is not a finite number (NaN, infinities and the missing value ``?`` are refused), an
        attribute index out of range or repeated within a row, a dense row of the wrong
        length, a missing ``@data``.

    Notes
    -----
    MULAN rows look like ``{idx val,idx val,...}`` with 0-based attribute indices; nominal
    ``{0,1}`` attributes are read as the numbers 0 and 1. Entries of a sparse row may come in
    any order (they are sorted), but an index may appear only once per row: a repeated index
    is an error rather than silently summed. Lines end with ``\\n``, ``\\r\\n`` or ``\\r``.
    """
    if isinstance(source, (bytes, bytearray)):
        text = source.decode("utf-8", errors="replace")
    elif isinstance(source, str) and ("\n" in source or source.lstrip().startswith("@")):
        text = source
    else:
        name = str(source)
        text = Path(source).read_text("utf-8", errors="replace")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    attributes, data_line = _arff_header(lines, name)
    n_attr = len(attributes)
    indptr = [0]
    indices = []
    values = []
    for j in range(data_line + 1, len(lines)):
        s = lines[j].strip()
        if not s or s.startswith("%"):
            continue
        try:
            if s[0] == "{":
                _sparse_row(s, n_attr, indices, values)
            else:
                _dense_row(s, n_attr, indices, values)
        except ValueError as exc:
            raise DataFormatError(f"{name}, line {j + 1}: {exc}: {s[:60]!r}") from None
        indptr.append(len(indices))
    X = sp.csr_matrix(
        (np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=np.int32),
         np.asarray(indptr, dtype=np.int64)),
        shape=(len(indptr) - 1, n_attr),
    )
    return as_csr(X), attributes


def read_mulan_labels(source, name="<xml>"):
    """Label names, in order, from a MULAN label XML (``<labels><label name=...>``).

    ``source`` is the XML (bytes or text) or its path. Raises :class:`DataFormatError` on
    malformed XML or when there is no ``<label name=...>`` element.
    """
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


# --------------------------------------------------------------------------------------------
# LIBSVM / svmlight
# --------------------------------------------------------------------------------------------


def _svmlight_lines(data):
    """``(line number, tokens)`` of the data rows, split the way scikit-learn's parser does.

    A row is a line (``\\n``-terminated) with something before its first ``#`` (a comment);
    scikit-learn looks for the ``#`` with C's ``strchr``, so not past a NUL byte.
    """
    for i, line in enumerate(data.split(b"\n")):
        h = line.find(b"#")
        z = line.find(b"\0")
        if h >= 0 and (z < 0 or h < z):
            line = line[:h]
        tokens = line.split()
        if tokens:
            yield i + 1, tokens


def _svmlight_problem(data, n_features):
    """The first problem of a LIBSVM file as ``(line, message)``, or None.

    The slow path, run only after scikit-learn's parser refused the file or returned a
    non-finite value: it re-reads the file line by line with the same rules (feature indices
    strictly increasing, labels and values finite numbers; 0-based indices if any index is
    0, else 1-based) to say where the problem is.
    """
    rows = list(_svmlight_lines(data))
    lowest = None
    for line, tokens in rows:
        try:
            label = float(tokens[0])
        except ValueError:
            return line, f"label {tokens[0].decode(errors='replace')!r} is not a number"
        if not math.isfinite(label):
            return line, f"non-finite label {tokens[0].decode(errors='replace')!r}"
        features = tokens[1:]
        if features and features[0].startswith(b"qid"):
            features = features[1:]
        prev = -1
        for tok in features:
            shown = tok.decode(errors="replace")
            idx, colon, value = tok.partition(b":")
            try:
                k = int(idx)
                v = float(value)
            except ValueError:
                return line, f"entry {shown!r} is not 'index:value'"
            if not colon or k < 0:
                return line, f"entry {shown!r} is not 'index:value' with index >= 0"
            if k >= 2**31:
                return line, f"feature index {k} is too large (at most 2**31 - 1)"
            if k == prev:
                return line, f"duplicate feature index {k} in one row"
            if k < prev:
                return line, f"feature index {k} after {prev}: indices must increase"
            if not math.isfinite(v):
                return line, f"non-finite value in {shown!r}"
            prev = k
            lowest = k if lowest is None else min(lowest, k)
    if n_features is not None:
        offset = 0 if lowest == 0 else 1
        for line, tokens in rows:
            for tok in tokens[1:]:
                k = tok.partition(b":")[0]
                if not tok.startswith(b"qid") and int(k) - offset >= n_features:
                    return line, (f"feature index {int(k)} is beyond the {n_features} features "
                                  f"({'0' if offset == 0 else '1'}-based)")
    return None


def read_svmlight(source, n_features=None, name="<svmlight>"):
    """Read a LIBSVM/svmlight file: :func:`sklearn.datasets.load_svmlight_file`, checked.

    Parameters
    ----------
    source : bytes or path-like
        The file's (uncompressed) content or its path.
    n_features : int, optional
        Number of columns (a file need not use its last features).
    name : str
        Used in error messages.

    Returns
    -------
    X : scipy.sparse.csr_matrix, float64, shape (n_rows, n_features), sorted indices
    y : numpy.ndarray of float64, the labels as written

    Raises
    ------
    DataFormatError
        Naming the line of the first problem: a label or value that is not a finite number,
        an entry that is not ``index:value``, a feature index repeated within a row or out of
        order, an index beyond ``n_features``.

    Notes
    -----
    Indices are 1-based unless some index is 0 (scikit-learn's ``zero_based="auto"``).
    """
    from sklearn.datasets import load_svmlight_file

    if not isinstance(source, (bytes, bytearray)):
        name = str(source)
        source = Path(source).read_bytes()
    data = bytes(source)
    try:
        X, y = load_svmlight_file(io.BytesIO(data), n_features=n_features, dtype=np.float64)
        failure = None
    except (ValueError, OverflowError) as exc:
        failure = exc
    if failure is None and np.isfinite(X.data).all() and np.isfinite(y).all():
        return as_csr(X), np.asarray(y, dtype=np.float64)
    problem = _svmlight_problem(data, n_features)
    if problem is not None:
        line, what = problem
        raise DataFormatError(f"{name}: malformed LIBSVM/svmlight file: line {line}: {what}")
    raise DataFormatError(f"{name}: malformed LIBSVM/svmlight file ({failure})")


# --------------------------------------------------------------------------------------------
# IDX
# --------------------------------------------------------------------------------------------

#: IDX type code -> numpy dtype (big-endian).
IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(data, name="<idx>"):
    """Read an IDX file (LeCun's MNIST format) from its uncompressed bytes (or its path).

    The header is two zero bytes, a type code (0x08 ubyte, 0x09 byte, 0x0B short, 0x0C int,
    0x0D float, 0x0E double), the number of dimensions, then one big-endian uint32 per
    dimension; the data follows in C order.

    Returns
    -------
    numpy.ndarray of the header's shape, in native byte order

    Raises
    ------
    DataFormatError
        Naming the header field that is wrong (magic, type code, dimensions, data length),
        or the position of the first NaN or infinity in a float file.
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
    if code not in IDX_DTYPES:
        raise DataFormatError(f"{name}: IDX type code {code:#04x} is not one of "
                              f"{sorted(hex(c) for c in IDX_DTYPES)}")
    if ndim == 0:
        raise DataFormatError(f"{name}: IDX number of dimensions is 0")
    start = 4 + 4 * ndim
    if len(data) < start:
        raise DataFormatError(f"{name}: IDX dimension sizes truncated (need {4 * ndim} bytes)")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", ndim, 4))
    dtype = np.dtype(IDX_DTYPES[code])
    expected = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if len(data) - start != expected:
        raise DataFormatError(f"{name}: IDX data length is {len(data) - start} bytes, but the "
                              f"header's dimensions {shape} and type code {code:#04x} need "
                              f"{expected}")
    a = np.frombuffer(data, dtype, offset=start).reshape(shape).astype(dtype.newbyteorder("="))
    if dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(a.ravel()))
        if bad.size:
            where = np.unravel_index(bad[0], shape)
            raise DataFormatError(f"{name}: IDX data holds {bad.size} non-finite value(s), the "
                                  f"first at index {tuple(int(i) for i in where)}")
    return a
