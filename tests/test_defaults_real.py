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
#: paper's own finding); NCE: a biased surrogate (chapter 1); ALOI: 50 rows a class.
SHORTFALLS = {
    ("Bibtex", "VanillaSGD()"): -0.164, ("Bibtex", "UMax()"): -0.089,
    ("Bibtex", "NCE()"): -0.102, ("Bibtex", "Memoir()"): -0.123, ("Bibtex", "DSMLR()"): -0.051,
    ("Delicious", "UMax()"): -0.088, ("Delicious", "NCE()"): -0.151,
    ("Delicious", "Memoir()"): -0.052,
    ("ALOI", "VanillaSGD()"): -0.368, ("ALOI", "UMax()"): -0.263,
    ("ALOI", "ImplicitSGD()"): -0.063, ("ALOI", "OVE()"): -0.070, ("ALOI", "NCE()"): -0.200,
    ("ALOI", "ImportanceSampling()"): -0.079, ("ALOI", "AugmentReduce()"): -0.054,
    ("ALOI", "Memoir()"): -0.337, ("ALOI", "MultinomialSQB()"): -0.161,
    ("ALOI", "DSMLR()"): -0.269,
    ("CLEF", "VanillaSGD()"): -0.136, ("CLEF", "UMax()"): -0.071, ("CLEF", "NCE()"): -0.157,
    ("CLEF", "ImportanceSampling()"): -0.055, ("CLEF", "Memoir()"): -0.066,
    ("covtype", "UMax()"): -0.051, ("covtype", "ImplicitSGD()"): -0.085,
    ("covtype", "OVE()"): -0.112, ("covtype", "NCE()"): -0.095,
    ("covtype", "Memoir()"): -0.050, ("covtype", "Memoir(oracle='exact')"): -0.051,
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
