"""Every estimator at its defaults on the real sets in the raw forms users load them.

The fits are run once, by the book's notation page (``book/notation.ipynb``, which calls
:func:`xclib.defaults_check.run`); these tests read its results (``_build/results/
notation.json``) and check each row: no divergence, and test accuracy within
``ACCURACY_MARGIN`` of scikit-learn's ``LogisticRegression()`` on the same rows, or, for the
recorded shortfalls, at most 0.1 below the recorded gap. The table is printed (``pytest -s``).
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


#: Default fits that end more than ``ACCURACY_MARGIN`` below ``LogisticRegression()`` (the
#: gap measured when this list was written). These are checked against a floor 0.1 below
#: that gap, so that they cannot get worse unseen; every other case must meet the margin.
#: Vanilla SGD and U-max: the double sum's exponential gradients bound the stable step (the
#: paper's own finding); Memoir(oracle='simple_lsh'): SimpleLSH ranks dense non-negative rows
#: by noise (chapter 5; the default takes the exact margin at these K); covtype: a hinge
#: on unscaled features (an intercept column does not close it).
SHORTFALLS = {
    ("Bibtex", "VanillaSGD()"): -0.051, ("Bibtex", "UMax()"): -0.063,
    ("Bibtex", "Memoir(oracle='simple_lsh')"): -0.123,
    ("Delicious", "Memoir(oracle='simple_lsh')"): -0.052, ("ALOI", "VanillaSGD()"): -0.120,
    ("ALOI", "UMax()"): -0.126, ("ALOI", "Memoir(oracle='simple_lsh')"): -0.337,
    ("CLEF", "Memoir(oracle='simple_lsh')"): -0.066,
    ("covtype", "Memoir()"): -0.051, ("covtype", "Memoir(oracle='simple_lsh')"): -0.051,
}

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
    """No divergence; within the margin of scikit-learn, or not below its recorded shortfall.
    (Seconds are measured and shown on the page, never asserted: timings are not tests.)"""
    row = table.get((name, estimator))
    assert row is not None, f"{estimator} on {name}: not in the notation page's table"
    assert not row["diverged"], f"{estimator} diverged on {name}"
    floor = SHORTFALLS.get((name, estimator), 0.1 - dc.ACCURACY_MARGIN) - 0.1
    assert row["gap"] >= floor, (
        f"{estimator} on {name}: test accuracy {row['accuracy']:.3f}, "
        f"LogisticRegression() {row['sklearn_accuracy']:.3f} (gap floor {floor:+.3f})")


def test_every_case_is_in_the_table(table):
    assert set(table) == set(CASES)
