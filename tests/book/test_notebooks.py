"""Regression tests of the executed notebooks (read from the build; nothing is executed here).

For every notebook of ``_toc.yml``: it executed cleanly (else: the cell index and the error),
its results JSON matches ``tests/references/<name>.json`` (every mismatch listed at once), and
every reproduction claim it tested holds. Run by ``make test`` after ``tools/build.py``.
"""
from __future__ import annotations

import json
import math
from numbers import Number

import pytest

from conftest import BUILD, NOT_BUILT, ROOT, toc_notebook_names

pytestmark = pytest.mark.notebooks
NAMES = toc_notebook_names()


def _status(execution_status, name):
    st = execution_status.get(name)
    if st is None:
        pytest.fail(f"{name} was not executed by the last build; "
                    + NOT_BUILT.format(f"its entry in _build/execution.json"), pytrace=False)
    return st


def _results(execution_status, name):
    st = _status(execution_status, name)
    if st.get("status") != "ok":
        pytest.fail(f"{name} did not execute cleanly ({st.get('status')}), no results to check",
                    pytrace=False)
    path = BUILD / "results" / f"{name}.json"
    if not path.exists():
        pytest.fail(f"{name} executed but wrote no results JSON ({path.relative_to(ROOT)}): "
                    "does it call report.save() with results_path?", pytrace=False)
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", NAMES)
def test_executed(execution_status, name):
    st = _status(execution_status, name)
    if st.get("status") != "ok":
        where = f" at cell index {st['cell']}" if st.get("cell") is not None else ""
        msg = [f"notebooks/{name}.ipynb {st.get('status')}{where} "
               f"(after {st.get('seconds')} s, {st.get('attempts')} attempt(s)): {st.get('error')}"]
        if st.get("source"):
            msg.append("cell source:\n" + st["source"])
        if st.get("traceback"):
            msg.append("traceback (end):\n" + st["traceback"][-2000:])
        msg.append(f"log: {st.get('log')}; executed copy: {st.get('executed')}")
        pytest.fail("\n".join(msg), pytrace=False)


def _close(ours, ref, rtol, atol):
    if isinstance(ref, bool) or isinstance(ours, bool):
        return ours == ref
    if isinstance(ref, Number) and isinstance(ours, Number):
        if math.isnan(ref) or math.isnan(ours):
            return math.isnan(ref) and math.isnan(ours)
        return abs(ours - ref) <= atol + rtol * abs(ref)
    if isinstance(ref, list) and isinstance(ours, list):
        return len(ours) == len(ref) and all(_close(o, r, rtol, atol) for o, r in zip(ours, ref))
    if isinstance(ref, dict) and isinstance(ours, dict):
        return ref.keys() == ours.keys() and all(_close(ours[k], ref[k], rtol, atol) for k in ref)
    return ours == ref


@pytest.mark.parametrize("name", NAMES)
def test_results_match_references(execution_status, name):
    results = _results(execution_status, name)
    ref_path = ROOT / "tests" / "references" / f"{name}.json"
    if not ref_path.exists():
        pytest.fail(f"no reference file {ref_path.relative_to(ROOT)}: write "
                    '{"key": {"value": v, "rtol": r, "atol": a}} for the deterministic values '
                    "of the notebook's results JSON", pytrace=False)
    if results.get("scale") not in (None, "book"):
        pytest.skip(f"references are for scale 'book'; this build ran at {results['scale']!r}")
    references = json.loads(ref_path.read_text())
    values = results.get("values", {})
    problems = []
    for key, ref in sorted(references.items()):
        if key not in values:
            problems.append(f"  {key}: missing from the results (expected {ref['value']!r})")
            continue
        rtol, atol = float(ref.get("rtol", 0.0)), float(ref.get("atol", 0.0))
        if not _close(values[key], ref["value"], rtol, atol):
            problems.append(f"  {key}: got {values[key]!r}, expected {ref['value']!r} "
                            f"(rtol={rtol:g}, atol={atol:g})")
    if problems:
        pytest.fail(f"notebooks/{name}.ipynb: {len(problems)} of {len(references)} reference "
                    f"values do not match {ref_path.relative_to(ROOT)}:\n" + "\n".join(problems),
                    pytrace=False)


@pytest.mark.parametrize("name", NAMES)
def test_reproduction_claims_hold(execution_status, name):
    """Each claim's outcome agrees with its status: a ``reproduced`` claim held, a ``not
    reproduced`` one still fails here (else its evidence is out of date)."""
    from xclib.book.report import _disagrees

    results = _results(execution_status, name)
    claims = results.get("claims", [])
    if not claims:
        pytest.fail(f"notebooks/{name}.ipynb recorded no reproduction claims "
                    "(report.claim(...) before report.save())", pytrace=False)
    failed = [c for c in claims if _disagrees(c)]
    if failed:
        pytest.fail(f"notebooks/{name}.ipynb: claims whose outcome disagrees with their "
                    "status:\n" + "\n".join(
                        f"  [{c['status']}] {c['claim']} (held: {c.get('holds')}, ours "
                        f"{c.get('ours')!r}, paper {c.get('paper')!r})" for c in failed),
                    pytrace=False)


@pytest.mark.parametrize("name", NAMES)
def test_claim_statuses_match_references(execution_status, name):
    """At the book's scale and default seed every claim keeps the status of
    ``tests/references/claim_statuses.json`` (written by ``tools/claim_statuses.py``): a
    notebook computes each status from its measurement, so that another seed reports rather
    than crashes, and this test is where a status that moved is caught. A claim on wall-clock
    time lists every status: the machine that builds the book decides it."""
    results = _results(execution_status, name)
    if results.get("scale") not in (None, "book"):
        pytest.skip(f"statuses are for scale 'book'; this build ran at {results['scale']!r}")
    reference = json.loads((ROOT / "tests" / "references" / "claim_statuses.json")
                           .read_text()).get(name)
    if reference is None:
        pytest.fail(f"tests/references/claim_statuses.json has no entry for {name}",
                    pytrace=False)
    allowed = {claim: [s] if isinstance(s, str) else s for claim, s in reference}
    ours = {c["claim"]: c["status"] for c in results.get("claims", [])}
    moved = [f"  {c[:90]!r}: {s} (reference {allowed.get(c, 'absent')})"
             for c, s in ours.items() if s not in allowed.get(c, ())]
    gone = [f"  {c[:90]!r}: absent (reference {s})" for c, s in allowed.items()
            if c not in ours]
    assert not moved and not gone, (
        f"notebooks/{name}.ipynb: claim statuses differ from the references:\n"
        + "\n".join(moved + gone))


@pytest.mark.parametrize("name", NAMES)
def test_every_claim_has_a_status(execution_status, name):
    """reproduced / not reproduced / not testable (with why), and ours from recorded values."""
    from xclib.book.report import STATUSES

    claims = _results(execution_status, name).get("claims", [])
    bad = [c["claim"] for c in claims if c.get("status") not in STATUSES]
    assert not bad, f"notebooks/{name}.ipynb: claims without a status: {bad}"
    empty = [c["claim"] for c in claims
             if c["status"] != "not testable" and not c.get("ours")]
    assert not empty, f"notebooks/{name}.ipynb: claims with nothing measured: {empty}"
    untestable = [c["claim"] for c in claims if c["status"] != "reproduced" and not c.get("why")]
    assert not untestable, f"notebooks/{name}.ipynb: claims without why: {untestable}"


def _epoch_series(values, key=""):
    """Every list recorded under a key ending in ``_epoch_seconds`` (lists or dicts of lists)."""
    for k, v in values.items():
        path = f"{key}/{k}" if key else k
        if isinstance(v, dict):
            yield from _epoch_series(v, path if key or k.endswith("_epoch_seconds") else "")
        elif isinstance(v, list) and (k.endswith("_epoch_seconds") or key):
            yield path, [float(x) for x in v if isinstance(x, (int, float))]


@pytest.mark.parametrize("name", NAMES)
def test_epoch_times_exclude_compilation(execution_status, name):
    """A per-epoch time series whose first entry is far above its median timed the compiler."""
    values = _results(execution_status, name).get("values", {})
    slow = []
    for path, series in _epoch_series(values):
        if len(series) >= 3:
            med = sorted(series)[len(series) // 2]
            if series[0] > 4.0 * med + 0.02:
                slow.append(f"  {path}: first {series[0]:.3g} s, median {med:.3g} s")
    if slow:
        pytest.fail(f"notebooks/{name}.ipynb: first epochs far above the median (numba "
                    "compilation inside a reported time?):\n" + "\n".join(slow), pytrace=False)
