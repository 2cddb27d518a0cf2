"""Run the build's child processes safely and tell how a papermill run ended.

Used by ``tools/build.py`` (which re-exports these names); kept apart so that each module
stays short. Nothing here knows where the book is: every path is an argument.

* ``run_child`` starts a command in a session of its own and, however it returns or raises
  (exit, timeout, exception, SIGINT, SIGTERM, SIGHUP), ends the child, its process group and
  every descendant recorded while it ran.
* ``python tools/build_runner.py SPEC`` (``papermill_child``) runs papermill in-process and
  writes an exit record: the type of papermill's exception and its bases.
* ``classify`` turns an exit code and that record into a status (``ok`` / ``failed`` /
  ``timed out``) and says whether a retry is warranted (only when the kernel died or did not
  start), without reading the log, where the notebook's own output is mixed in.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

# --------------------------------------------------------------------------- child processes
# Every process the build starts (papermill, its kernel and whatever the kernel starts, npm,
# jupyter-book) is ended before build.py exits, however it exits: ``run_child`` starts each one
# in a session of its own, records its descendants while it runs (the kernel has a session of
# its own too and is orphaned when papermill dies) and ends them all in ``finally``.
# ``install_signal_handlers`` turns SIGTERM and SIGHUP into ``Interrupted`` (a
# KeyboardInterrupt, like Ctrl-C / SIGINT) so that those ``finally`` clauses run.
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_RUNNING: dict[int, tuple[subprocess.Popen, dict]] = {}


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP received: unwinds like Ctrl-C, so every child is ended and recorded."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_stop_signal(signum, frame):
    raise Interrupted(signum)


def install_signal_handlers() -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP ``Interrupted`` (unless ignored,
    e.g. SIGHUP under ``nohup``), so that ``run_child`` ends the children and the caller can
    record the interruption."""
    for sig, handler in ((signal.SIGINT, signal.default_int_handler),
                         (signal.SIGTERM, _on_stop_signal), (signal.SIGHUP, _on_stop_signal)):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, handler)


@contextlib.contextmanager
def _stop_signals_held():
    """Hold SIGINT/SIGTERM/SIGHUP (delivered on exit) while a child is started or ended."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _release_stop_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _record_descendants(proc: subprocess.Popen, seen: dict) -> None:
    """Add the live descendants of ``proc`` to ``seen`` (pid -> creation time)."""
    try:
        for child in psutil.Process(proc.pid).children(recursive=True):
            seen.setdefault(child.pid, child.create_time())
    except psutil.Error:
        pass


def _alive(proc: subprocess.Popen, seen: dict) -> list:
    """``proc`` (until reaped) and the recorded descendants still running (no reused PIDs)."""
    out = []
    for pid, created in ([(proc.pid, None)] if proc.poll() is None else []) + list(seen.items()):
        try:
            p = psutil.Process(pid)
            if created in (None, p.create_time()) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out


def _end(proc: subprocess.Popen, seen: dict, grace: float = 5.0) -> None:
    """End ``proc``, the process groups of it and its descendants, and those descendants."""
    with _stop_signals_held():
        if proc.poll() is None:
            _record_descendants(proc, seen)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            procs = _alive(proc, seen)
            if not procs:
                break
            groups = set()
            for p in procs:
                with contextlib.suppress(OSError):
                    groups.add(os.getpgid(p.pid))
            groups.discard(os.getpgrp())
            for group in groups:
                with contextlib.suppress(OSError):
                    os.killpg(group, sig)
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    p.send_signal(sig)
            deadline = time.monotonic() + grace
            while _alive(proc, seen) and time.monotonic() < deadline:
                time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)


def run_child(cmd: list[str], timeout: float | None = None, **popen_kwargs) -> int | None:
    """Run ``cmd`` in a session of its own: its exit code, or None after ``timeout`` seconds.

    However this returns or raises (exit, timeout, exception, SIGINT, SIGTERM, SIGHUP), the
    child, its process group and every descendant recorded while it ran are ended first.
    """
    seen: dict = {}
    with _stop_signals_held():
        # the child must not inherit the held mask (it survives exec): it could not be stopped
        proc = subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.DEVNULL,
                                preexec_fn=_release_stop_signals, **popen_kwargs)
        _RUNNING[proc.pid] = (proc, seen)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            _record_descendants(proc, seen)
            with contextlib.suppress(subprocess.TimeoutExpired):
                return proc.wait(timeout=0.5)
            if deadline is not None and time.monotonic() > deadline:
                return None
    finally:
        with _stop_signals_held():
            _end(proc, seen)
            _RUNNING.pop(proc.pid, None)


@atexit.register
def _end_all() -> None:
    """Last resort at interpreter exit: end any child still registered."""
    for proc, seen in list(_RUNNING.values()):
        _end(proc, seen)


# --------------------------------------------------------------------------- papermill runs
CELL_TIMEOUT = "nbclient.exceptions.CellTimeoutError"
DEAD_KERNEL = "nbclient.exceptions.DeadKernelError"
# jupyter_client's KernelClient.wait_for_ready (a RuntimeError) when the kernel does not start
KERNEL_START = re.compile(r"^Kernel (didn't respond|died before replying)")


def _source_cells(nb):
    """(index in the SOURCE notebook, cell), without papermill's injected and banner cells."""
    cells = [c for c in nb.cells if not {"injected-parameters", "papermill-error-cell-tag"}
             & set(c.get("metadata", {}).get("tags", []))]
    return enumerate(cells)


def first_error(executed: Path) -> dict | None:
    """Index (in the SOURCE notebook), source head and error of the first failing cell.

    Without an error output: the last cell papermill started (the one that was running when
    the run was stopped or timed out).
    """
    import nbformat  # slow to import (jsonschema formats): only when needed

    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception:
        return None
    started = None
    for index, cell in _source_cells(nb):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                tb = "\n".join(out.get("traceback", []))
                tb = re.sub(r"\x1b\[[0-9;]*m", "", tb)
                return {
                    "cell": index,
                    "execution_count": cell.get("execution_count"),
                    "source": cell.source[:300],
                    "error": f"{out.get('ename')}: {out.get('evalue')}",
                    "traceback": tb[-3000:],
                }
        if cell.get("metadata", {}).get("papermill", {}).get("start_time"):
            started = (index, cell)
    if started:
        return {"cell": started[0], "execution_count": None, "source": started[1].source[:300],
                "error": "still running when stopped", "traceback": ""}
    return None


def mark_injected_cell(executed: Path) -> bool:
    """Tag papermill's injected-parameters cell ``remove-cell`` so the HTML hides it.

    False when ``executed`` is not a readable notebook (e.g. truncated).
    """
    import nbformat

    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception:
        return False
    changed = False
    for cell in nb.cells:
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
            changed = True
    if changed:
        nbformat.write(nb, executed)
    return True


def check_outputs(out: Path, results: Path) -> str | None:
    """Why the outputs of a clean papermill exit are not usable; None when they are."""
    import nbformat

    if not out.exists():
        return "papermill wrote no executed notebook"
    try:
        nbformat.read(out, as_version=4)
    except Exception as exc:
        return f"the executed notebook is not readable ({type(exc).__name__}: {str(exc)[:200]})"
    if results.exists():
        try:
            json.loads(results.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            return f"the results file {results.name} is not valid JSON ({exc})"
    return None


def classify(rc: int | None, record: dict | None, out: Path, results: Path,
             cell_timeout: int, nb_timeout: int) -> dict:
    """Status of one papermill run from its exit code and exit record, never from its log.

    ``rc`` is None after the outer timeout; ``record`` is what ``papermill_child`` wrote (the
    type of papermill's exception and its bases). ``retry`` is True only when the kernel died
    or did not start, never for a cell that failed or ran longer than ``cell_timeout``.
    """
    record = record or {}
    etype, bases, message = record.get("type"), record.get("bases") or [], record.get("message", "")
    err = first_error(out) if out.exists() else None
    verdict = {"status": "failed", "retry": False, "error": None,
               "cell": err["cell"] if err else None, "source": err["source"] if err else None,
               "traceback": err["traceback"] if err else None}
    if rc is None:
        verdict.update(status="timed out", error=f"no result after {nb_timeout} s (outer timeout)")
    elif rc == 0 and etype is None:
        problem = check_outputs(out, results)
        verdict.update(status="ok" if problem is None else "failed", error=problem)
        if problem is None:
            verdict.update(cell=None, source=None, traceback=None)
    elif CELL_TIMEOUT in bases:
        verdict.update(status="timed out", error=f"a cell ran longer than {cell_timeout} s "
                       f"({etype})")
    elif DEAD_KERNEL in bases or (etype == "builtins.RuntimeError" and KERNEL_START.match(message)):
        verdict.update(retry=True, error=f"the kernel died or did not start ({etype}: {message})")
    elif record.get("ename"):
        verdict["error"] = f"{record['ename']}: {record.get('evalue', '')}"
    elif etype:
        verdict["error"] = f"{etype}: {message}"[:1000]
    else:
        verdict["error"] = f"papermill exited {rc} without recording why (killed?)"
    return verdict


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def papermill_child(spec: dict) -> int:
    """Run papermill here (``python tools/build_runner.py SPEC``) and record how it ended.

    The exit record (``spec["exit"]``, JSON) holds the type of papermill's exception and its
    bases, so that the parent tells a cell timeout, a dead kernel and a failing cell apart
    without reading the log, where the notebook's own output is mixed in.
    """
    import logging
    import traceback

    # jsonschema checks the "iri" format with rfc3987_syntax when it is installed (the lab
    # environment brings it), and that module builds its grammar on import: 2.8 s of the 4.3 s
    # papermill takes to import, for every notebook. nbformat's schema has no such format.
    sys.modules.setdefault("rfc3987_syntax", None)
    import papermill

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    record: dict = {"type": None}
    try:
        papermill.execute_notebook(
            spec["input"], spec["output"], parameters=spec["parameters"], kernel_name="python3",
            cwd=spec["cwd"], execution_timeout=spec["cell_timeout"], progress_bar=False,
            log_output=True, shutdown_kernel="immediate")
    except Exception as exc:
        traceback.print_exc()
        record = {"type": _qualname(type(exc)), "message": str(exc)[-3000:],
                  "bases": [_qualname(c) for c in type(exc).__mro__]}
        record.update({k: getattr(exc, k) for k in ("ename", "evalue", "cell_index")
                       if isinstance(getattr(exc, k, None), (str, int))})
    tmp = Path(spec["exit"] + ".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(spec["exit"])
    return 0 if record["type"] is None else 1


if __name__ == "__main__":
    sys.exit(papermill_child(json.loads(sys.argv[1])))
