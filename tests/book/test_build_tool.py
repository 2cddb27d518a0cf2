"""Tests of tools/build.py: its pure parts, how it classifies and records a notebook run, and
(on a stub notebook, tests/fixtures/build/stub.ipynb, with a real kernel) that an interrupted
build ends every child process and executes the notebook again next time."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
import pytest
import yaml

from conftest import ROOT, build_tool as bt

TOC = """
format: jb-book
root: book/intro
parts:
  - caption: A
    chapters:
      - file: notebooks/01_a
        sections:
          - file: book/appendix.md
      - file: notebooks/02_gone
  - caption: B
    chapters:
      - file: book/refs
"""


def make_tree(tmp_path):
    (tmp_path / "_toc.yml").write_text(TOC)
    for name in ("book/intro.md", "book/appendix.md", "book/refs.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# x\n")
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "notebooks" / "01_a.ipynb")
    return tmp_path


def test_toc_order_missing_and_pruning(tmp_path):
    root = make_tree(tmp_path)
    assert bt.toc_files(root) == ["book/intro", "notebooks/01_a", "book/appendix",
                                  "notebooks/02_gone", "book/refs"]
    assert [p.name for p in bt.toc_notebooks(root)] == ["01_a.ipynb"]
    assert bt.missing_entries(root) == ["notebooks/02_gone"]
    pruned = yaml.safe_dump(bt.pruned_toc(["notebooks/02_gone"], root))
    assert "02_gone" not in pruned and "appendix" in pruned and "book/refs" in pruned
    try:
        bt.resolve("notebooks/02_gone", root)
    except bt.BuildError as exc:
        assert "_toc.yml lists 'notebooks/02_gone'" in str(exc)
    else:
        raise AssertionError("a missing toc entry must raise BuildError")


def test_first_error_counts_source_cells(tmp_path):
    nb = nbformat.v4.new_notebook()
    banner = nbformat.v4.new_markdown_cell("An Exception was encountered")
    banner.metadata["tags"] = ["papermill-error-cell-tag"]
    params = nbformat.v4.new_code_cell('scale = "book"')
    params.metadata["tags"] = ["parameters"]
    injected = nbformat.v4.new_code_cell('scale = "full"')
    injected.metadata["tags"] = ["injected-parameters"]
    bad = nbformat.v4.new_code_cell("1/0")
    bad.outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError",
                                          evalue="division by zero", traceback=["\x1b[31mtb"])]
    nb.cells = [banner, nbformat.v4.new_markdown_cell("# t"), params, injected,
                nbformat.v4.new_code_cell("x = 1"), bad]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    err = bt.first_error(path)
    assert err["cell"] == 3 and err["error"] == "ZeroDivisionError: division by zero"
    assert "\x1b" not in err["traceback"]
    bt.mark_injected_cell(path)
    tags = nbformat.read(path, as_version=4).cells[3].metadata["tags"]
    assert "remove-cell" in tags


def test_duplicate_inline_const_scripts_dropped(tmp_path):
    page = tmp_path / "p.html"
    dup = '<script>const THEBE_JS_URL = "x"; const a = 1</script>\n'
    page.write_text("<head>" + dup + "<script src='a.js'></script>\n" + dup + "</head>")
    bt.drop_duplicate_inline_scripts(page)
    assert page.read_text().count("THEBE_JS_URL") == 1 and "a.js" in page.read_text()


def test_staged_config_lists_every_chapter_bib():
    config = bt.staged_config()
    bibs = config["bibtex_bibfiles"]
    for path in sorted((ROOT / "book" / "bib").glob("*.bib")):
        assert path.relative_to(ROOT).as_posix() in bibs
    assert all((ROOT / b).exists() for b in bibs)
    assert config["execute"]["execute_notebooks"] == "off" and config["only_build_toc_files"]


def test_input_hash_depends_on_scale_and_notebook(tmp_path):
    nb = tmp_path / "n.ipynb"
    nb.write_text("{}")
    a, b = bt.input_hash(nb, "book"), bt.input_hash(nb, "full")
    nb.write_text("{ }")
    assert len({a, b, bt.input_hash(nb, "book")}) == 3


# --------------------------------------------------------------------------- execution outcomes
BUILD_PY = ROOT / "tools" / "build.py"
STUB = Path(__file__).parents[1] / "fixtures" / "build" / "stub.ipynb"
STUB_TOC = "format: jb-book\nroot: book/intro\nchapters:\n"


def stub_book(root: Path, names=("01_stub",)) -> Path:
    """A book whose chapters are copies of the stub notebook (tests/fixtures/build)."""
    (root / "_toc.yml").write_text(STUB_TOC + "".join(f"  - file: notebooks/{n}\n"
                                                      for n in names))
    (root / "book").mkdir(parents=True, exist_ok=True)
    (root / "book" / "intro.md").write_text("# x\n")
    (root / "notebooks").mkdir(exist_ok=True)
    for name in names:
        shutil.copy(STUB, root / "notebooks" / f"{name}.ipynb")
    return root


@pytest.fixture
def rooted(tmp_path):
    """The build module pointed at a temporary stub book (as ``--root`` does), then back."""
    bt.set_root(stub_book(tmp_path, ("01_a", "02_b")))
    yield tmp_path
    bt.set_root(ROOT)


def write_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def record_of(exc: BaseException) -> dict:
    """The exit record ``build_runner.papermill_child`` writes for ``exc``."""
    def name(cls):
        return f"{cls.__module__}.{cls.__qualname__}"

    return {"type": name(type(exc)), "message": str(exc),
            "bases": [name(c) for c in type(exc).__mro__]}


def test_classify_uses_exception_types_and_retries_only_kernel_failures(tmp_path):
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    out, results = tmp_path / "out.ipynb", tmp_path / "r.json"
    write_notebook(out)
    cell_error = PapermillExecutionError(
        3, 4, "print('nbclient.exceptions.CellTimeoutError: ...')", "ValueError",
        "the real error", ["nbclient.exceptions.CellTimeoutError: Cell execution timed out"])
    cell_record = {**record_of(cell_error), "ename": "ValueError", "evalue": "the real error"}

    def verdict(rc, record):
        v = bt.classify(rc, record, out, results, 900, 1500)
        return v["status"], v["retry"], v["error"]

    assert verdict(None, None) == ("timed out", False, "no result after 1500 s (outer timeout)")
    status, retry, error = verdict(1, record_of(CellTimeoutError("Cell execution timed out")))
    assert (status, retry) == ("timed out", False) and "longer than 900 s" in error
    assert verdict(1, cell_record) == ("failed", False, "ValueError: the real error")
    assert verdict(1, record_of(DeadKernelError("Kernel died")))[:2] == ("failed", True)
    for message, retry in [("Kernel didn't respond in 60 seconds", True),
                           ("Kernel died before replying to kernel_info", True),
                           ("something else", False)]:
        assert verdict(1, record_of(RuntimeError(message)))[1] is retry
    status, retry, error = verdict(1, None)
    assert (status, retry) == ("failed", False) and "without recording why" in error


def test_ok_only_with_a_readable_notebook_and_valid_results(tmp_path):
    out, results = tmp_path / "out.ipynb", tmp_path / "r.json"
    clean = {"type": None}

    def status():
        return bt.classify(0, clean, out, results, 900, 1500)["status"]

    assert status() == "failed"  # papermill "succeeded" but wrote nothing
    write_notebook(out)
    assert status() == "ok"  # a notebook need not write results
    results.write_text('{"acc": 0.5')
    assert status() == "failed" and "not valid JSON" in bt.check_outputs(out, results)
    results.write_text('{"acc": 0.5}')
    assert status() == "ok"
    out.write_text(out.read_text()[:40])  # truncated while being written
    assert status() == "failed" and "not readable" in bt.check_outputs(out, results)


def fake_papermill(outcomes: dict, seen_status: list):
    """A ``run_child`` stand-in: per notebook name, a list of (rc, exit record, notebook text)."""
    def run_child(cmd, timeout=None, **kwargs):
        spec = json.loads(cmd[-1])
        name = Path(spec["input"]).stem
        seen_status.append(json.loads(bt.STATUS_FILE.read_text())[name])
        rc, record, text = outcomes[name].pop(0)
        if isinstance(rc, BaseException):
            raise rc
        write_notebook(Path(spec["output"]))
        if text is not None:
            Path(spec["output"]).write_text(text)
        Path(spec["parameters"]["results_path"]).write_text("{}")
        Path(spec["exit"]).write_text(json.dumps(record))
        return rc
    return run_child


def test_keep_going_records_a_corrupt_notebook_and_retries_only_dead_kernels(
        rooted, monkeypatch):
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    ok, seen = (0, {"type": None}, None), []
    monkeypatch.setattr(bt, "run_child", fake_papermill({
        "01_a": [(0, {"type": None}, '{"cells": [')],  # clean exit, truncated notebook
        "02_b": [(1, record_of(DeadKernelError("Kernel died")), None), ok],
    }, seen))
    nbs = bt.toc_notebooks()
    status = bt.run_notebooks(nbs, "book", keep_going=True, force=False, cell_timeout=9,
                              nb_timeout=99)
    assert [s["status"] for s in seen] == ["running"] * 3 and seen[0]["hash"] is None
    a, b = status["01_a"], status["02_b"]
    assert a["status"] == "failed" and "not readable" in a["error"] and a["hash"] is None
    assert not (rooted / a["executed"]).exists() and (rooted / a["unreadable_copy"]).exists()
    assert b["status"] == "ok" and b["attempts"] == 2 and b["hash"]
    assert json.loads(bt.STATUS_FILE.read_text()) == status

    timeout = (1, record_of(CellTimeoutError("Cell execution timed out")), None)
    monkeypatch.setattr(bt, "run_child", fake_papermill({"02_b": [timeout, ok]}, seen))
    status = bt.run_notebooks(nbs[1:], "book", keep_going=True, force=True, cell_timeout=9,
                              nb_timeout=99)
    assert status["02_b"]["status"] == "timed out" and status["02_b"]["attempts"] == 1


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_interrupted_run_clears_the_old_ok_and_hash(rooted, monkeypatch, signame):
    stop = KeyboardInterrupt() if signame == "SIGINT" else bt.Interrupted(signal.SIGTERM)
    ok, seen = (0, {"type": None}, None), []
    nb = bt.toc_notebooks()[:1]
    monkeypatch.setattr(bt, "run_child", fake_papermill({"01_a": [ok, (stop, None, None), ok]},
                                                        seen))
    assert bt.run_notebooks(nb, "book", False, False, 9, 99)["01_a"]["status"] == "ok"
    with pytest.raises(KeyboardInterrupt):
        bt.run_notebooks(nb, "book", False, True, 9, 99)  # --force, stopped midway
    st = json.loads(bt.STATUS_FILE.read_text())["01_a"]
    assert st["status"] == "interrupted" and st["hash"] is None
    assert signame in st["error"]
    bt.run_notebooks(nb, "book", False, False, 9, 99)  # plain build: executed again
    assert len(seen) == 3 and json.loads(bt.STATUS_FILE.read_text())["01_a"]["status"] == "ok"


def test_status_updates_from_concurrent_builds_do_not_overwrite_each_other(rooted):
    bt.update_status({"01_a": {"status": "running"}})
    stale = bt.load_status()  # a second build read the file here
    bt.update_status({"01_a": {"status": "ok"}})
    bt.update_status({"02_b": {**stale.get("02_b", {}), "status": "failed"}})
    assert bt.load_status() == {"01_a": {"status": "ok"}, "02_b": {"status": "failed"}}
    assert bt.update_status({}, keep={"02_b"}) == {"02_b": {"status": "failed"}}


def alive(procs: dict) -> list[int]:
    """PIDs of ``procs`` (pid -> creation time) still running (zombies are dead)."""
    out = []
    for pid, created in procs.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.Error:
            pass
    return out


def kill_leftovers(procs: dict) -> None:
    for pid in alive(procs):
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


def test_run_child_ends_descendants_in_their_own_sessions():
    # the child starts a grandchild in a new session (as the kernel is), then exits / hangs
    code = ("import subprocess, sys, time; p = subprocess.Popen(['sleep', '60'], "
            "start_new_session=True); print(p.pid, flush=True); time.sleep(float(sys.argv[1]))")
    for pause, timeout, rc in [("1", None, 0), ("60", 1.5, None)]:
        t0 = time.monotonic()
        with tempfile.TemporaryFile("w+") as fh:
            returned = bt.run_child([sys.executable, "-c", code, pause], timeout=timeout,
                                    stdout=fh)
            fh.seek(0)
            pid = int(fh.read())
        grandchild = {}
        with contextlib.suppress(psutil.Error):
            grandchild = {pid: psutil.Process(pid).create_time()}
        survivors = alive(grandchild)
        kill_leftovers(grandchild)
        assert returned == rc and survivors == [] and time.monotonic() - t0 < 30


STOPPABLE = """
import subprocess, sys
sys.path.insert(0, sys.argv[1])
import build_runner
build_runner.install_signal_handlers()
spawn = ("import subprocess, time; p = subprocess.Popen(['sleep', '60'], start_new_session=True);"
         "print(p.pid, flush=True); time.sleep(60)")
try:
    build_runner.run_child([sys.executable, "-c", spawn], stdout=sys.stdout)
except KeyboardInterrupt as exc:
    sys.exit(128 + getattr(exc, "signum", 2))
"""


def _default_stop_signals():
    """In the child: the stop signals at their defaults, whatever this process inherited (a
    run under ``nohup`` ignores SIGHUP, a background job of a script SIGINT, and
    ``install_signal_handlers`` rightly leaves an ignored signal ignored)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_stop_signals_end_every_child(signum):
    proc = subprocess.Popen([sys.executable, "-c", STOPPABLE, str(ROOT / "tools")],
                            stdout=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_stop_signals)
    family = {}
    try:
        sleeper = int(proc.stdout.readline())  # the grandchild, in a session of its own
        family = {p.pid: p.create_time() for p in
                  [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(True)]}
        assert sleeper in family and len(family) == 3
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == 128 + signum
    finally:
        kill_leftovers(family)
        proc.stdout.close()
    assert alive(family) == []


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"no {what} after {timeout} s")


def run_build(root: Path, *args, sleep: float = 0, **kwargs):
    env = dict(os.environ, STUB_SLEEP=str(sleep))
    cmd = [sys.executable, str(BUILD_PY), "--root", str(root), "--no-html", "--keep-going",
           "--scale", "book", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, **kwargs)


def family_of(proc: subprocess.Popen, pids_file: Path) -> dict:
    """build.py, papermill, the kernel and the kernel's own child: pid -> creation time."""
    pids = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True)),
            *map(int, pids_file.read_text().split())]
    out = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            out[pid] = psutil.Process(pid).create_time()
    return out


def test_interrupted_build_ends_its_children_and_is_executed_again(tmp_path):
    signum = signal.SIGTERM  # SIGINT and SIGHUP take the same path (see the test above)
    root = stub_book(tmp_path)
    status_file, pids_file = root / "_build" / "execution.json", root / "notebooks" / "pids.txt"
    proc, family = run_build(root, sleep=120), {}
    try:
        wait_for(lambda: pids_file.exists() and pids_file.read_text().strip(), 90,
                 "kernel running the stub notebook")
        family = family_of(proc, pids_file)
        groups = {os.getpgid(pid) for pid in family}
        assert len(family) >= 4, family  # build.py, papermill, kernel, its sleeper
        running = json.loads(status_file.read_text())["01_stub"]
        assert running["status"] == "running" and running["hash"] is None
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=60)
    finally:
        kill_leftovers(family)
    assert proc.returncode == 128 + signum, output
    assert alive(family) == [], output
    in_groups = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if os.getpgid(p.pid) in groups and p.status() != psutil.STATUS_ZOMBIE:
                in_groups.append(p.pid)
    assert in_groups == [], output
    st = json.loads(status_file.read_text())["01_stub"]
    assert st["status"] == "interrupted" and st["hash"] is None, st
    again = run_build(root)
    output, _ = again.communicate(timeout=120)
    st = json.loads(status_file.read_text())["01_stub"]
    assert again.returncode == 0 and st["status"] == "ok" and st["hash"], output
    assert len(pids_file.read_text().splitlines()) == 2  # executed again
    assert json.loads((root / "_build" / "results" / "01_stub.json").read_text()) == {
        "scale": "book", "mode": "ok"}
    again = run_build(root)  # unchanged now: not executed a third time
    output, _ = again.communicate(timeout=60)
    assert "not executed again" in output and len(pids_file.read_text().splitlines()) == 2


def test_slow_cell_is_a_timeout_and_is_not_retried(tmp_path):
    root = stub_book(tmp_path)
    proc = run_build(root, "--cell-timeout", "2", sleep=60)
    output, _ = proc.communicate(timeout=120)
    st = json.loads((root / "_build" / "execution.json").read_text())["01_stub"]
    assert st["status"] == "timed out" and st["attempts"] == 1, output
    assert st["exception"] == "nbclient.exceptions.CellTimeoutError" and st["cell"] == 3
    assert len((root / "notebooks" / "pids.txt").read_text().splitlines()) == 1
