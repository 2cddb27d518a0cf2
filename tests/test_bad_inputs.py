"""Bad input never crashes and never passes silently: the matrix of ``tests/_bad_inputs.py``.

Each exported estimator and MIPS oracle runs its matrix (bad values of every parameter, NaN
and inf, extreme feature scales, wrong widths, one class, no rows; for the oracles wrong
widths, out-of-range indices, short or invalid ``exclude``, bad index parameters) in a child
process (a few classes per process), so a segfault fails one test instead of ending the run.
Every case must end in a clear error, a warning that says what happened, or a sound result. The counts of all outcomes are
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


def _run_group(cases):
    """Run ``cases`` one after the other in child processes: one child while none crashes
    (each child pays the imports once); after a crash the class last started is recorded
    as crashed and the classes after it run in a new child. Returns name -> (exit, rows,
    stderr)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    out, todo = {}, list(cases)
    while todo:
        proc = subprocess.run([sys.executable, str(WORKER), *(x for c in todo for x in c)],
                              capture_output=True, text=True, timeout=1200, cwd=ROOT, env=env)
        started, rows = [], {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                rec = json.loads(line)
                if "start" in rec:
                    started.append(rec["start"])
                    rows[rec["start"]] = []
                elif started:
                    rows[started[-1]].append(rec)
        if not started:  # died before the first class: blame it, go on with the rest
            started = [todo[0][1]]
        for name in started:
            last = name == started[-1]
            out[name] = (proc.returncode if last else 0, rows.get(name, []),
                         proc.stderr if last else "")
        todo = todo[len(started):]
    return out


@pytest.fixture(scope="module")
def children():
    """The classes split into as many groups as there are cores, each group run by
    :func:`_run_group`: the matrix is one file (its summary is written by one process) but
    need not take one core's time, nor one interpreter start per class."""
    n = max(1, min(os.cpu_count() or 1, 4))
    groups = [CASES[i::n] for i in range(n)]
    with ThreadPoolExecutor(max_workers=n) as pool:
        done = [pool.submit(_run_group, g) for g in groups]
        yield {name: result for f in done for name, result in f.result().items()}


@pytest.mark.parametrize("kind,name", CASES, ids=[n for _, n in CASES])
def test_bad_inputs(children, kind, name):
    returncode, rows, stderr = children[name]
    SUMMARY[name] = rows
    _save()
    assert returncode == 0, (
        f"{name} crashed (exit {returncode}) after case "
        f"{rows[-1]['case'] if rows else 'none'}:\n{stderr[-2000:]}")
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
