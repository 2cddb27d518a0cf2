"""Tests of the file readers of xclib.datasets (sparse ARFF, LIBSVM/svmlight, IDX, MULAN XML).

Examples pin the error messages (file, line, what is wrong); hypothesis checks that random
matrices survive a write/read round trip exactly and that random corruption of a valid file
gives either a DataFormatError or well-formed arrays, never another exception or garbage.
"""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from xclib.datasets import DataFormatError, read_arff, read_idx, read_mulan_labels, read_svmlight
from xclib.datasets._readers import IDX_DTYPES

PROPERTY = settings(max_examples=50, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

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
    """An IDX file holding ``a`` with type ``code``."""
    a = np.asarray(a)
    head = bytes([0, 0, code, a.ndim]) + np.array(a.shape, ">u4").tobytes()
    return head + a.astype(IDX_DTYPES[code]).tobytes()


# ------------------------------------------------------------------------------------------
# ARFF
# ------------------------------------------------------------------------------------------


def test_read_arff_sparse_and_dense_rows():
    X, names = read_arff(ARFF_TRAIN)
    assert names == ["w0", "w 1", "w2", "L_a", "L_b", "L_c"]
    assert X.shape == (4, 6) and sp.isspmatrix_csr(X) and X.has_canonical_format
    np.testing.assert_array_equal(X.toarray()[0], [1, 0, 0.5, 0, 1, 1])
    X2, _ = read_arff(ARFF_TEST.encode())
    np.testing.assert_array_equal(X2.toarray()[1], [0, 1, 0, 0, 0, 1])


def test_read_arff_from_path_names_the_file(tmp_path):
    p = tmp_path / "f.arff"
    p.write_text(ARFF_TRAIN.replace("{1 1,3 1}", "{1 1,3 nan}"))
    with pytest.raises(DataFormatError, match=rf"{p.name}, line 13: non-finite value 'nan'"):
        read_arff(p)


@pytest.mark.parametrize(
    "bad, what",
    [
        ("{0 1,2 x}", "could not convert"),
        ("{0 1,9 1}", "out of range"),
        ("{0 1,2 1", "does not end"),
        ("1,0,1", "dense row has 3 values"),
        ("{0 1,2}", "sparse entry '2' is not 'index value'"),
        ("{0 1,2 nan}", "non-finite value 'nan'"),
        ("{0 1,2 inf}", "non-finite value 'inf'"),
        ("{0 -Infinity}", "non-finite value '-Infinity'"),
        ("{0 1,2 ?}", r"missing value '\?'"),
        ("0,1,NaN,0,0,1", "non-finite value 'NaN'"),
        ("{0 1,2 1,0 1}", "duplicate attribute index 0 in one row"),
        ("{3 1,3 0}", "duplicate attribute index 3"),
    ],
)
def test_read_arff_malformed_row_names_line(bad, what):
    text = ARFF_TRAIN.replace("{1 1,3 1}", bad)
    with pytest.raises(DataFormatError, match=rf"<arff>, line 13: .*{what}"):
        read_arff(text)


def test_read_arff_line_numbers_with_crlf_and_unsorted_entries():
    text = ARFF_TRAIN.replace("\n", "\r\n").replace("{2 2,5 1}", "{5 1,2 2}")
    X, _ = read_arff(text)  # entries may come in any order
    np.testing.assert_array_equal(X.toarray()[3], [0, 0, 2, 0, 0, 1])
    assert X.has_canonical_format
    with pytest.raises(DataFormatError, match="line 15: duplicate"):
        read_arff(text.replace("{5 1,2 2}", "{5 1,2 2,5 1}"))


def test_read_arff_malformed_header():
    with pytest.raises(DataFormatError, match="line 4: malformed @attribute"):
        read_arff(ARFF_TRAIN.replace("@attribute w0 {0,1}", "@attribute"))
    with pytest.raises(DataFormatError, match="line 3: expected @relation"):
        read_arff(ARFF_TRAIN.replace("\n\n@attr", "\nnonsense\n@attr", 1))
    with pytest.raises(DataFormatError, match="no @data"):
        read_arff(ARFF_TRAIN.split("@data")[0])
    with pytest.raises(DataFormatError, match="no @attribute lines"):
        read_arff("@relation r\n@data\n{0 1}\n")


def test_read_mulan_labels():
    assert read_mulan_labels(XML.encode()) == ["L_a", "L_b", "L_c"]
    with pytest.raises(DataFormatError, match="malformed XML"):
        read_mulan_labels(b"<labels><label name='a'></labels>")
    with pytest.raises(DataFormatError, match="no <label name"):
        read_mulan_labels(b"<labels><label/></labels>")


# ------------------------------------------------------------------------------------------
# LIBSVM / svmlight
# ------------------------------------------------------------------------------------------

SVM = b"# a comment line\n-1 3:1 11:1 \n\n+1 5:1 123:0.5 # trailing comment\n-1 1:1\n"


def test_read_svmlight_reads_and_names_lines():
    X, y = read_svmlight(SVM, 123)
    assert X.shape == (3, 123) and sp.isspmatrix_csr(X) and X.has_canonical_format
    np.testing.assert_array_equal(y, [-1, 1, -1])
    assert X[1, 122] == 0.5 and X[0, 2] == 1 and X[2, 0] == 1


@pytest.mark.parametrize(
    "old, new, what",
    [
        (b"5:1 123:0.5", b"5:1 123:nan", "line 4: non-finite value in '123:nan'"),
        (b"5:1 123:0.5", b"5:inf", r"line 4: non-finite value in '5:inf'"),
        (b"+1 5:1", b"nan 5:1", "line 4: non-finite label 'nan'"),
        (b"+1 5:1", b"yes 5:1", "line 4: label 'yes' is not a number"),
        (b"5:1 123:0.5", b"5:1 5:2", "line 4: duplicate feature index 5 in one row"),
        (b"5:1 123:0.5", b"7:1 5:2", "line 4: feature index 5 after 7: indices must increase"),
        (b"5:1 123:0.5", b"5:1 124:1", "line 4: feature index 124 is beyond the 123 features"),
        (b"5:1 123:0.5", b"5:1 x:1", "line 4: entry 'x:1' is not 'index:value'"),
        (b"5:1 123:0.5", b"5:1 7", "line 4: entry '7' is not 'index:value'"),
        (b"5:1 123:0.5", b"5:1 99999999999:1", "line 4: feature index 99999999999 is too large"),
    ],
)
def test_read_svmlight_malformed_names_line(old, new, what):
    with pytest.raises(DataFormatError, match=rf"f\.svm: malformed LIBSVM/svmlight file: {what}"):
        read_svmlight(SVM.replace(old, new), 123, name="f.svm")


# ------------------------------------------------------------------------------------------
# IDX
# ------------------------------------------------------------------------------------------


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
        (lambda b: b[:4] + b"\xff" * 12 + b[16:], "data length"),  # no overflow
    ],
)
def test_read_idx_malformed_names_header_field(mutate, field):
    with pytest.raises(DataFormatError, match=field):
        read_idx(mutate(idx_bytes(np.zeros((2, 3, 3)))), "f.idx")


def test_read_idx_refuses_non_finite_floats():
    a = np.zeros((2, 3))
    a[1, 2] = np.nan
    with pytest.raises(DataFormatError, match=r"f\.idx: IDX data holds 1 non-finite .*\(1, 2\)"):
        read_idx(idx_bytes(a, 0x0E), "f.idx")


# ------------------------------------------------------------------------------------------
# properties (hypothesis)
# ------------------------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def sparse_matrices(draw, max_rows=8, max_cols=12):
    """A dense float64 array with many zeros, as the ground truth of a sparse file."""
    n = draw(st.integers(0, max_rows))
    d = draw(st.integers(1, max_cols))
    mask = draw(st.lists(st.booleans(), min_size=n * d, max_size=n * d))
    vals = draw(st.lists(finite, min_size=n * d, max_size=n * d))
    return np.where(np.array(mask, bool), np.array(vals, float), 0.0).reshape(n, d)


def arff_text(A, draw_order, dense_rows):
    lines = ["% generated", "@relation r"]
    lines += [f"@attribute 'a {j}' numeric" for j in range(A.shape[1])]
    lines.append("@data")
    for i, row in enumerate(A):
        if i in dense_rows:
            lines.append(",".join(repr(float(v)) for v in row))
        else:
            nz = list(np.flatnonzero(row))
            nz = [nz[k] for k in draw_order(len(nz))]
            lines.append("{" + ",".join(f"{j} {float(row[j])!r}" for j in nz) + "}")
    return "\n".join(lines) + "\n"


def svmlight_bytes(A, y):
    lines = []
    for label, row in zip(y, A):
        nz = np.flatnonzero(row)
        lines.append(" ".join([repr(float(label))] + [f"{j + 1}:{float(row[j])!r}" for j in nz]))
    return ("\n".join(lines) + "\n").encode()


def assert_well_formed(X, n_cols=None):
    assert sp.isspmatrix_csr(X) and X.dtype == np.float64 and X.has_canonical_format
    assert np.isfinite(X.data).all()
    if X.nnz:
        assert 0 <= X.indices.min() and X.indices.max() < X.shape[1]
    if n_cols is not None:
        assert X.shape[1] == n_cols


@PROPERTY
@given(A=sparse_matrices(), data=st.data())
def test_arff_roundtrip(A, data):
    dense_rows = set(data.draw(st.sets(st.integers(0, max(A.shape[0] - 1, 0)))))
    text = arff_text(A, lambda m: data.draw(st.permutations(range(m))), dense_rows)
    X, names = read_arff(text.encode())
    assert names == [f"a {j}" for j in range(A.shape[1])]
    assert_well_formed(X, A.shape[1])
    np.testing.assert_array_equal(X.toarray(), A)  # repr() round-trips floats exactly


@PROPERTY
@given(A=sparse_matrices(), data=st.data())
def test_svmlight_roundtrip(A, data):
    y = data.draw(st.lists(finite, min_size=A.shape[0], max_size=A.shape[0]))
    X, y2 = read_svmlight(svmlight_bytes(A, y), A.shape[1])
    assert_well_formed(X, A.shape[1])
    np.testing.assert_array_equal(X.toarray(), A)
    np.testing.assert_array_equal(y2, y)


@PROPERTY
@given(data=st.data())
def test_idx_roundtrip(data):
    code = data.draw(st.sampled_from(sorted(IDX_DTYPES)))
    shape = tuple(data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)))
    dtype = np.dtype(IDX_DTYPES[code])
    if dtype.kind == "f":
        elems = st.floats(allow_nan=False, allow_infinity=False, width=8 * dtype.itemsize)
    else:
        elems = st.integers(int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    vals = data.draw(st.lists(elems, min_size=math.prod(shape), max_size=math.prod(shape)))
    a = np.array(vals, dtype=dtype).reshape(shape)
    b = read_idx(idx_bytes(a, code))
    assert b.shape == shape and b.dtype == dtype.newbyteorder("=")
    np.testing.assert_array_equal(b, a)


@st.composite
def corrupted(draw, content):
    """``content`` with a few random byte-level edits (replace, delete, insert)."""
    b = bytearray(content)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["replace", "delete", "insert"]))
        pos = draw(st.integers(0, len(b)))
        junk = draw(st.one_of(
            st.binary(min_size=1, max_size=4),
            st.sampled_from([b"nan", b"inf", b"-", b",", b" ", b":", b"{", b"}", b"\n", b"?",
                             b"1e999", b"0", b"99999999999", b"#", b"\x00", b"\xff"]),
        ))
        if op == "replace":
            b[pos:pos + len(junk)] = junk
        elif op == "delete":
            del b[pos:pos + draw(st.integers(1, 8))]
        else:
            b[pos:pos] = junk
    return bytes(b)


BASE = np.array([[0, 1.5, 0, -2, 0], [3, 0, 0, 0, 0.25], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])


@PROPERTY
@given(blob=corrupted(arff_text(BASE, lambda m: range(m), {3}).encode()))
def test_arff_corruption_gives_a_clear_error_or_a_valid_matrix(blob):
    try:
        X, names = read_arff(blob, "c.arff")
    except DataFormatError as exc:
        event("DataFormatError")
        assert str(exc).startswith("c.arff")
        return
    event("parsed")
    assert_well_formed(X, len(names))


@PROPERTY
@given(blob=corrupted(svmlight_bytes(BASE, [1, -1, 2, 0])))
def test_svmlight_corruption_gives_a_clear_error_or_valid_arrays(blob):
    try:
        X, y = read_svmlight(blob, 5, name="c.svm")
    except DataFormatError as exc:
        event("DataFormatError")
        assert str(exc).startswith("c.svm: malformed LIBSVM/svmlight file")
        return
    event("parsed")
    assert_well_formed(X, 5)
    assert y.shape == (X.shape[0],) and np.isfinite(y).all()


@PROPERTY
@given(blob=corrupted(idx_bytes(np.arange(24.0).reshape(2, 3, 4), 0x0D)))
def test_idx_corruption_gives_a_clear_error_or_a_valid_array(blob):
    try:
        a = read_idx(blob, "c.idx")
    except DataFormatError as exc:
        event("DataFormatError")
        assert str(exc).startswith("c.idx: IDX")
        return
    event("parsed")
    assert a.size * a.dtype.itemsize == len(blob) - 4 - 4 * a.ndim
    if a.dtype.kind == "f":
        assert np.isfinite(a).all()
