"""Bad input never crashes and never passes silently: the matrix of ``tests/_bad_inputs.py``.

Each exported estimator and MIPS oracle runs its matrix (bad values of every parameter, NaN
and inf, extreme feature scales, wrong widths, one class, no rows; for the oracles wrong
widths, out-of-range indices, short or invalid ``exclude``, bad index parameters) in a child
process, so a segfault fails one test instead of ending the run. Every case must end in a clear
error, a warning that says what happened, or a sound result. The counts of all outcomes are
written to ``_build/bad_inputs.json``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import BUILD, ROOT, exported_estimators

WORKER = ROOT / "tests" / "_bad_inputs.py"
ORACLES = ["ExactMIPS", "SimpleLSH", "HNSWMIPS"]
CASES = [("estimator", cls.__name__) for cls in exported_estimators()] + [
    ("oracle", name) for name in ORACLES]
FAILURES = ("unclear", "exception", "garbage", "degenerate")
SUMMARY: dict = {}


def _run_child(kind, name):
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    return subprocess.run([sys.executable, str(WORKER), kind, name], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def children():
    """Every child started at once, as many running as there are cores: the matrix is one
    file (its summary is written by one process) but need not take one core's time."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        yield {name: pool.submit(_run_child, kind, name) for kind, name in CASES}


@pytest.mark.parametrize("kind,name", CASES, ids=[n for _, n in CASES])
def test_bad_inputs(children, kind, name):
    proc = children[name].result()
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    SUMMARY[name] = rows
    _save()
    assert proc.returncode == 0, (
        f"{name} crashed (exit {proc.returncode}) after case "
        f"{rows[-1]['case'] if rows else 'none'}:\n{proc.stderr[-2000:]}")
    assert len(rows) > 5
    bad = [f"{r['case']}: {r['outcome']}: {r['detail']}" for r in rows
           if r["outcome"] in FAILURES]
    assert not bad, f"{name}:\n" + "\n".join(bad)


def _save():
    counts: dict = {}
    for rows in SUMMARY.values():
        for r in rows:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    BUILD.mkdir(exist_ok=True)
    (BUILD / "bad_inputs.json").write_text(json.dumps(
        {"counts": counts, "cases": SUMMARY}, indent=1))
