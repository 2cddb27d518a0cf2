"""Every estimator at its defaults on the real sets in the raw forms users load them.

The fits are run once, by the book's notation page (``book/notation.ipynb``, which calls
:func:`xclib.defaults_check.run`); these tests read its results (``_build/results/
notation.json``) and check each row: no divergence, test accuracy within
``ACCURACY_MARGIN`` of scikit-learn's ``LogisticRegression()`` on the same rows, training
time at most ``TIME_FACTOR`` times its time. The table is printed (``pytest -s``).
"""
from __future__ import annotations

import json

import pytest

from conftest import BUILD, NOT_BUILT
from xclib import defaults_check as dc

pytestmark = pytest.mark.notebooks


def _rows():
    path = BUILD / "results" / "notation.json"
    if not path.exists():
        pytest.fail(NOT_BUILT.format(path), pytrace=False)
    return json.loads(path.read_text())["values"]["defaults_rows"]


CASES = [(s, e) for s in dc.SETS for e in
         ({**dc.BINARY, **dc.MULTICLASS} if s in ("a9a", "covtype") else dc.MULTICLASS)]


@pytest.fixture(scope="module")
def table():
    rows = _rows()
    print("\n" + "\n".join(
        f"{r['set']:14s} {r['estimator']:24s} {r['accuracy']:.3f} ({r['gap']:+.3f}) "
        f"{r['seconds']:6.1f} s ({r['time_ratio']:4.1f}x) {' '.join(r['warnings'])}"
        for r in rows))
    return {(r["set"], r["estimator"]): r for r in rows}


@pytest.mark.parametrize("name, estimator", CASES, ids=[f"{s}-{e}" for s, e in CASES])
def test_default_fit_holds(table, name, estimator):
    row = table.get((name, estimator))
    assert row is not None, f"{estimator} on {name}: not in the notation page's table"
    assert not row["diverged"], f"{estimator} diverged on {name}"
    assert row["gap"] >= -dc.ACCURACY_MARGIN, (
        f"{estimator} on {name}: test accuracy {row['accuracy']:.3f}, "
        f"LogisticRegression() {row['sklearn_accuracy']:.3f}")
    assert row["time_ratio"] <= dc.TIME_FACTOR, (
        f"{estimator} on {name}: {row['seconds']:.1f} s, LogisticRegression() "
        f"{row['sklearn_seconds']:.1f} s")


def test_every_case_is_in_the_table(table):
    assert set(table) == set(CASES)
