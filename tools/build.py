#!/usr/bin/env python
"""Build *Softmax at scale*: execute every notebook of ``_toc.yml`` once, then render offline HTML.

Steps (each one writes into ``_build/``, never into the sources)::

    1. execute   papermill runs notebooks/<name>.ipynb  -> _build/executed/notebooks/<name>.ipynb
                 with parameters scale and results_path -> _build/results/<name>.json;
                 status, seconds, failing cell          -> _build/execution.json
    2. stage     _config.yml (+ bib files, local JS), _toc.yml, book/, executed notebooks,
                 MathJax / require.js / widget manager from node_modules -> _build/src/
    3. render    jupyter-book build _build/src (execute_notebooks: off) -> _build/html/
                 Sphinx warnings                         -> _build/sphinx-warnings.txt

A notebook is executed again only when its inputs changed since its last successful run
(the notebook, ``xclib/**/*.py``, ``requirements.txt`` and the scale), so ``make book`` then
``make test`` executes each notebook once. The tests (``tests/book/test_notebooks.py``,
``tests/book/test_book_html.py``) read the same outputs.

Status of a notebook in ``execution.json``: ``running`` (and no hash) from before it starts,
so a build killed meanwhile leaves it to be executed again; ``interrupted`` when the build is
stopped by Ctrl-C, SIGTERM or SIGHUP; ``ok`` only when papermill succeeded AND the executed
notebook reads with nbformat AND the results JSON (if written) parses; else ``failed`` or
``timed out`` (a cell longer than --cell-timeout, or the notebook longer than --timeout:
not retried). Only a kernel that died or did not start is retried, once. Papermill, its
kernel and everything they started are ended whenever build.py exits (tools/build_runner.py).

Usage::

    python tools/build.py                      # everything at $XCLIB_SCALE (default "book")
    python tools/build.py --only 01_unbiased_softmax --scale full
    python tools/build.py --keep-going         # record failures, build anyway (make test)
    python tools/build.py --root DIR --no-html # the book whose _toc.yml is in DIR (tests)
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

if str(Path(__file__).resolve().parent) not in sys.path:  # also when loaded by path (tests)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_runner import (Interrupted, check_outputs, classify, first_error,  # noqa: E402,F401
                          install_signal_handlers, mark_injected_cell, run_child)

# where the book is and where its build goes: set by set_root() below (and by --root)
ROOT = BUILD = EXECUTED = RESULTS = LOGS = SRC = HTML = STATUS_FILE = WARNINGS_FILE = Path()
NODE_MODULES = Path()


def set_root(root: Path) -> None:
    """Build the book whose ``_toc.yml`` is in ``root`` (``--root``; default: this repository)."""
    global ROOT, BUILD, EXECUTED, RESULTS, LOGS, SRC, HTML, STATUS_FILE, WARNINGS_FILE
    global NODE_MODULES
    ROOT = Path(root).resolve()
    BUILD = ROOT / "_build"
    EXECUTED, RESULTS, LOGS = BUILD / "executed", BUILD / "results", BUILD / "logs"
    SRC, HTML = BUILD / "src", BUILD / "html"
    STATUS_FILE, WARNINGS_FILE = BUILD / "execution.json", BUILD / "sphinx-warnings.txt"
    NODE_MODULES = ROOT / "node_modules"


set_root(Path(__file__).resolve().parents[1])

# Seconds: (per cell, per notebook).  CI scale keeps every chapter to minutes; paper scale is long.
TIMEOUTS = {"book": (1200, 2400), "full": (6 * 3600, 24 * 3600)}

# Local copies of the JavaScript that jupyter-book would otherwise fetch from CDNs:
# (npm package folder, files/folders to copy, destination under <html>/vendor/).
VENDOR = [
    ("mathjax", ["es5"], "mathjax"),
    ("requirejs", ["require.js"], "requirejs"),
    # kept at <html>/vendor/<npm name>/dist/: require.js (baseUrl <html>/vendor/, set by
    # widgets-offline.js) resolves the manager's module, and its fonts, there
    ("@jupyter-widgets/html-manager", ["dist"], "@jupyter-widgets/html-manager"),
]

# Loaded on pages with embedded widgets, after require.js and before the widget manager.
WIDGETS_SHIM = """\
// Softmax at scale: make the Jupyter widget manager work offline with MathJax 3.
(function () {
  // 1. AMD modules (and the manager's fonts, found relative to its module URI) resolve under
  //    <book>/vendor/, wherever the page is, instead of the page's own folder.
  var me = document.currentScript && document.currentScript.src;
  if (me && window.require && window.require.config) {
    window.require.config({baseUrl: new URL("./", me).href});
  }
  // 2. ipywidgets 8 calls the MathJax 2 API MathJax.Hub.Queue(["Typeset", Hub, el]);
  //    the book serves MathJax 3, whose equivalent is MathJax.typesetPromise([el]).
  function install() {
    var mj = window.MathJax;
    if (!mj || !mj.version || mj.Hub) { return; }
    mj.Hub = {
      Queue: function () {
        for (var i = 0; i < arguments.length; i++) {
          var job = arguments[i], el = Array.isArray(job) ? job[2] : undefined;
          if (mj.typesetPromise) { mj.typesetPromise(el ? [el] : undefined).catch(function () {}); }
        }
      }
    };
  }
  install();
  document.addEventListener("DOMContentLoaded", install);
  window.addEventListener("load", install);
})();
"""


class BuildError(RuntimeError):
    """A problem with the sources or the tool chain (not a failing notebook)."""


# --------------------------------------------------------------------------- table of contents
def toc_files(root: Path | None = None) -> list[str]:
    """Every ``file:`` of ``_toc.yml`` in reading order (root first), without extension."""
    toc = yaml.safe_load(((root or ROOT) / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk({k: v for k, v in toc.items() if k != "root"})
    return [str(Path(f).with_suffix("")) if Path(f).suffix in {".md", ".ipynb", ".rst"} else f
            for f in files]


def resolve(entry: str, root: Path | None = None) -> Path:
    """The source file of a toc entry; a clear error when the toc lists a missing file."""
    root = root or ROOT
    for suffix in (".ipynb", ".md", ".rst"):
        path = root / (entry + suffix)
        if path.exists():
            return path
    raise BuildError(
        f"_toc.yml lists '{entry}' but none of {entry}.ipynb / .md / .rst exists in {root}; "
        "add the file or remove the entry from _toc.yml")


def toc_notebooks(root: Path | None = None) -> list[Path]:
    """The notebooks of the toc (``notebooks/NN_name.ipynb``) that exist, in order."""
    out = []
    for entry in toc_files(root):
        try:
            path = resolve(entry, root)
        except BuildError:
            continue
        if path.suffix == ".ipynb":
            out.append(path)
    return out


def missing_entries(root: Path | None = None) -> list[str]:
    """Toc entries whose file does not exist."""
    missing = []
    for entry in toc_files(root):
        try:
            resolve(entry, root)
        except BuildError:
            missing.append(entry)
    return missing


def pruned_toc(missing: list[str], root: Path | None = None) -> dict:
    """``_toc.yml`` without the ``missing`` entries (``--keep-going`` builds the rest)."""
    toc = yaml.safe_load(((root or ROOT) / "_toc.yml").read_text())
    gone = {str(Path(m)) for m in missing}

    def keep(node):
        if isinstance(node, dict):
            if "file" in node and str(Path(node["file"]).with_suffix("")) in gone:
                return None
            node = dict(node)
            for key in ("parts", "chapters", "sections"):
                if key in node:
                    node[key] = [c for c in (keep(c) for c in node[key] or []) if c is not None]
            return node
        return node

    return keep(toc)


# --------------------------------------------------------------------------- execution
def input_hash(notebook: Path, scale: str) -> str:
    """Hash of what an execution depends on: the notebook, the library, the pins, the scale."""
    h = hashlib.sha256()
    h.update(f"scale={scale}\n".encode())
    files = [notebook, ROOT / "requirements.txt", *sorted((ROOT / "xclib").rglob("*.py"))]
    for path in files:
        if path.exists():
            name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
            h.update(str(name).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def load_status() -> dict:
    if STATUS_FILE.exists():
        try:
            return json.loads(STATUS_FILE.read_text())
        except json.JSONDecodeError:
            return {}
    return {}


def update_status(changes: dict, keep: set | None = None) -> dict:
    """Merge ``changes`` into ``execution.json`` (dropping entries not in ``keep``); the result.

    Under a lock, over the file's current content: builds running at the same time (e.g. two
    ``--only``) must not overwrite each other's entries with stale copies.
    """
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / "execution.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        status = {**load_status(), **changes}
        if keep is not None:
            status = {k: v for k, v in status.items() if k in keep}
        tmp = STATUS_FILE.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(status, indent=1, sort_keys=True))
        tmp.replace(STATUS_FILE)
    return status


def kernel_env(scale: str) -> dict:
    """Environment of papermill and its kernel."""
    env = dict(os.environ)
    env["XCLIB_BUILD"] = "1"          # the explorer shows the static sweep, no live widgets
    env["XCLIB_SCALE"] = scale
    env.setdefault("NUMBA_CACHE_DIR", str(BUILD / "numba_cache"))
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    env["PYTHONUNBUFFERED"] = "1"
    # the kernelspec says "python": make it this interpreter's (the venv's)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def execute(notebook: Path, scale: str, cell_timeout: int, nb_timeout: int) -> dict:
    """Run one notebook with papermill; return its status (retried once if the kernel died)."""
    name = notebook.stem
    out = EXECUTED / notebook.relative_to(ROOT)
    results, log = RESULTS / f"{name}.json", LOGS / f"{name}.log"
    exit_file = LOGS / f"{name}.exit.json"
    spec = {"input": str(notebook), "output": str(out), "cwd": str(notebook.parent),
            "exit": str(exit_file), "cell_timeout": cell_timeout,
            "parameters": {"scale": scale, "results_path": str(results)}}
    cmd = [sys.executable, str(Path(__file__).resolve().with_name("build_runner.py")),
           json.dumps(spec)]
    status = {"notebook": str(notebook.relative_to(ROOT)), "scale": scale,
              "executed": str(out.relative_to(ROOT)), "results": str(results.relative_to(ROOT)),
              "log": str(log.relative_to(ROOT)), "attempts": 0}
    start = time.monotonic()
    for attempt in (1, 2):
        for path in (out, results, exit_file):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)  # a failed run must not leave older outputs behind
        status["attempts"] = attempt
        t0 = time.monotonic()
        with open(log, "w" if attempt == 1 else "a") as fh:
            fh.write(f"$ {shlex.join(cmd)}\n# attempt {attempt}\n")
            fh.flush()
            rc = run_child(cmd, timeout=nb_timeout, stdout=fh, stderr=subprocess.STDOUT,
                           cwd=ROOT, env=kernel_env(scale))
        try:
            record = json.loads(exit_file.read_text())
        except (OSError, ValueError):
            record = None
        verdict = classify(rc, record, out, results, cell_timeout, nb_timeout)
        retry = verdict.pop("retry")
        status.update(verdict, exception=(record or {}).get("type"),
                      seconds=round(time.monotonic() - start, 1),
                      last_attempt_seconds=round(time.monotonic() - t0, 1))
        if not (retry and attempt == 1):
            break
        print(f"  {name}: {status['error']}; retrying once", flush=True)
    if status["status"] != "ok" and not status.get("traceback"):
        status["traceback"] = log.read_text(errors="replace")[-3000:]
    if out.exists() and not mark_injected_cell(out):
        kept = LOGS / f"{name}.unreadable.ipynb"  # staged, it would break the HTML build
        out.replace(kept)
        status["unreadable_copy"] = str(kept.relative_to(ROOT))
    return status


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def run_notebooks(notebooks: list[Path], scale: str, keep_going: bool, force: bool,
                  cell_timeout: int, nb_timeout: int) -> dict:
    """Execute the notebooks whose inputs changed; ``status`` is saved before and after each.

    A notebook is ``running`` (no hash) while it runs, so a build that is killed there leaves
    it not ``ok`` and the next build executes it again; ``ok`` only once its outputs are valid.
    """
    for nb in notebooks:
        name = nb.stem
        digest = input_hash(nb, scale)
        prev = load_status().get(name, {})
        out = EXECUTED / nb.relative_to(ROOT)
        if (not force and prev.get("status") == "ok" and prev.get("hash") == digest
                and out.exists() and (RESULTS / f"{name}.json").exists()):
            print(f"  {name}: unchanged since its last successful run, not executed again",
                  flush=True)
            continue
        print(f"  {name}: executing (scale={scale}) ...", flush=True)
        running = {"notebook": str(nb.relative_to(ROOT)), "scale": scale, "status": "running",
                   "hash": None, "started": _now(), "pid": os.getpid()}
        update_status({name: running})
        try:
            st = execute(nb, scale, cell_timeout, nb_timeout)
        except BaseException as exc:  # recorded, then handled by main(): children are ended
            if isinstance(exc, KeyboardInterrupt):
                signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
                change = {"status": "interrupted",
                          "error": f"build.py stopped by {signal.Signals(signum).name}"}
            else:
                change = {"status": "failed", "error": f"build.py error: {exc!r}"}
            update_status({name: {**running, **change, "finished": _now()}})
            raise
        st.update(hash=digest if st["status"] == "ok" else None, finished=_now())
        update_status({name: st})
        where = f" at cell index {st['cell']}" if st.get("cell") is not None else ""
        print(f"  {name}: {st['status']}{where} in {st['seconds']} s"
              + (f" -- {st['error']}" if st["status"] != "ok" else ""), flush=True)
        if st["status"] != "ok" and not keep_going:
            raise SystemExit(
                f"notebook {nb.relative_to(ROOT)} {st['status']}{where}: {st['error']}\n"
                f"log: {st['log']}; executed copy: {st['executed']}")
    return update_status({}, keep={Path(e).name for e in toc_files()})  # forget the toc's leavers


# --------------------------------------------------------------------------- staging
def ensure_node_modules() -> None:
    """npm ci (pinned by package-lock.json) when the local JS copies are missing."""
    missing = [pkg for pkg, _, _ in VENDOR if not (NODE_MODULES / pkg / "package.json").exists()]
    if not missing:
        return
    if shutil.which("npm") is None:
        raise BuildError(f"node packages {missing} are missing and npm is not installed: "
                         "install Node.js/npm, then run `npm ci` in " + str(ROOT))
    print(f"  npm ci (missing: {', '.join(missing)})", flush=True)
    rc = run_child(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=ROOT)
    if rc != 0:
        raise BuildError(f"npm ci failed (exit {rc}) in {ROOT}")


def _sync_file(src: Path, dst: Path) -> None:
    """Copy when the content differs (unchanged files keep their mtime for Sphinx)."""
    if dst.exists() and dst.stat().st_size == src.stat().st_size and \
            dst.read_bytes() == src.read_bytes():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def _sync_tree(src: Path, dst: Path, skip=lambda p: False) -> None:
    for path in src.rglob("*"):
        if path.is_file() and not skip(path):
            _sync_file(path, dst / path.relative_to(src))


def staged_config() -> dict:
    """``_config.yml`` plus what is only known at build time (bib files)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    bibs = list(sphinx.get("bibtex_bibfiles") or config.get("bibtex_bibfiles") or [])
    for path in sorted((ROOT / "book" / "bib").glob("*.bib")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in bibs:
            bibs.append(rel)
    bibs = [b for b in bibs if (ROOT / b).exists()]
    config["bibtex_bibfiles"] = bibs
    sphinx.pop("bibtex_bibfiles", None)
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    config["only_build_toc_files"] = True
    return config


def stage(notebooks: list[Path], missing: list[str]) -> None:
    """Assemble ``_build/src``: config, toc (minus ``missing``), pages, executed notebooks, JS."""
    SRC.mkdir(parents=True, exist_ok=True)
    (SRC / "_config.yml").write_text(yaml.safe_dump(staged_config(), sort_keys=False))
    if missing:
        (SRC / "_toc.yml").write_text(yaml.safe_dump(pruned_toc(missing), sort_keys=False))
    else:
        _sync_file(ROOT / "_toc.yml", SRC / "_toc.yml")
    if (ROOT / "book").is_dir():
        _sync_tree(ROOT / "book", SRC / "book", skip=lambda p: "_build" in p.parts)
    for nb in notebooks:
        executed = EXECUTED / nb.relative_to(ROOT)
        # a notebook that never produced an executed copy is rendered as written (no outputs)
        _sync_file(executed if executed.exists() else nb, SRC / nb.relative_to(ROOT))
    # other files the notebooks may reference (images, data snippets) next to them
    for path in (ROOT / "notebooks").rglob("*"):
        if path.is_file() and path.suffix != ".ipynb" and ".ipynb_checkpoints" not in path.parts:
            _sync_file(path, SRC / path.relative_to(ROOT))
    # JavaScript served from the book itself (copied into the HTML root by html_extra_path;
    # deliberately not a folder named _static, whose every .js jupyter-book injects everywhere)
    ensure_node_modules()
    extra = SRC / "_extra" / "vendor"
    for pkg, parts, dest in VENDOR:
        for part in parts:
            src = NODE_MODULES / pkg / part
            if src.is_dir():
                _sync_tree(src, extra / dest / part, skip=lambda p: p.suffix == ".map")
            else:
                _sync_file(src, extra / dest / part)
    (extra / "widgets-offline.js").write_text(WIDGETS_SHIM)


# --------------------------------------------------------------------------- rendering
_INLINE_CONST = re.compile(r"<script>\s*const [^<]*</script>\n?")


def drop_duplicate_inline_scripts(page: Path) -> None:
    """Keep the first of identical inline ``<script>const …</script>`` elements.

    sphinx-thebe 0.3.1 registers its configuration script once per read phase, and jupyter-book
    triggers that twice, so every page declares ``const THEBE_JS_URL`` twice: a SyntaxError in
    the console of every page. (Thebe itself is off: nothing is fetched.)
    """
    text = page.read_text()
    seen = set()

    def once(m):
        if m.group(0) in seen:
            return ""
        seen.add(m.group(0))
        return m.group(0)

    new = _INLINE_CONST.sub(once, text)
    if new != text:
        page.write_text(new)


def render() -> None:
    """``jupyter-book build`` of the staged tree into ``_build/html``; warnings to a file."""
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(SRC), "--all",
           "--path-output", str(BUILD / "jb")]
    print("  jupyter-book build ...", flush=True)
    env = dict(os.environ, NO_COLOR="1", PATH=str(Path(sys.executable).parent) + os.pathsep
               + os.environ.get("PATH", ""))
    with open(BUILD / "book-build.log", "w") as fh:
        rc = run_child(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    log = re.sub(r"\x1b\[[0-9;]*m", "", (BUILD / "book-build.log").read_text(errors="replace"))
    (BUILD / "book-build.log").write_text(log)
    warnings = [line for line in log.splitlines()
                if re.search(r"\b(WARNING|ERROR|CRITICAL|SEVERE)\b:", line)]
    src_prefix = str(SRC) + os.sep
    WARNINGS_FILE.write_text("".join(w.replace(src_prefix, "") + "\n" for w in warnings))
    if rc != 0 or not (BUILD / "jb" / "_build" / "html" / "index.html").exists():
        sys.stderr.write(log[-5000:])
        raise BuildError(f"jupyter-book build failed (exit {rc}); "
                         f"full log: {BUILD / 'book-build.log'}")
    if HTML.exists():
        shutil.rmtree(HTML)
    shutil.copytree(BUILD / "jb" / "_build" / "html", HTML)
    for page in HTML.rglob("*.html"):
        drop_duplicate_inline_scripts(page)
    print(f"  HTML: {HTML / 'index.html'} ({len(warnings)} Sphinx warnings listed in "
          f"{WARNINGS_FILE.relative_to(ROOT)})", flush=True)


# --------------------------------------------------------------------------- CLI
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Statuses in _build/execution.json: running, interrupted, ok, failed, timed out, "
               "missing (see the docstring of tools/build.py). Ctrl-C, SIGTERM and SIGHUP end "
               "papermill and its kernel and mark the notebook interrupted.")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="execute only this notebook (e.g. 01_unbiased_softmax); repeatable")
    parser.add_argument("--scale", default=os.environ.get("XCLIB_SCALE", "book"),
                        choices=sorted(TIMEOUTS),
                        help="notebook scale (default $XCLIB_SCALE or book)")
    parser.add_argument("--keep-going", action="store_true",
                        help="record failing notebooks and go on (the tests report them)")
    parser.add_argument("--force", action="store_true", help="execute even unchanged notebooks")
    parser.add_argument("--no-html", action="store_true", help="execute only, do not render")
    parser.add_argument("--no-execute", action="store_true",
                        help="render the last executed copies only (no notebook is run)")
    parser.add_argument("--cell-timeout", type=int, help="seconds per cell")
    parser.add_argument("--timeout", type=int, help="seconds per notebook (outer timeout)")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the book to build: folder of its _toc.yml (default: this repository)")
    args = parser.parse_args(argv)
    set_root(args.root)
    install_signal_handlers()

    cell_timeout, nb_timeout = TIMEOUTS[args.scale]
    cell_timeout = args.cell_timeout or cell_timeout
    nb_timeout = args.timeout or nb_timeout
    os.environ.setdefault("NUMBA_CACHE_DIR", str(BUILD / "numba_cache"))
    try:
        toc = toc_files()
        if toc[0] in missing_entries():
            resolve(toc[0])  # the root page: nothing to build without it
        missing = missing_entries()
        if missing and not args.keep_going:
            resolve(missing[0])  # raises: "_toc.yml lists ... but ... exists"
        notebooks = toc_notebooks()
        selected = notebooks
        if args.only:
            by_name = {nb.stem: nb for nb in notebooks}
            unknown = [n for n in args.only if Path(n).stem not in by_name]
            if unknown:
                raise BuildError(f"--only {unknown}: not a notebook of _toc.yml "
                                 f"(known: {', '.join(by_name)})")
            selected = [by_name[Path(n).stem] for n in args.only]
        if args.no_execute:
            status, selected = load_status(), []
        else:
            print(f"Executing {len(selected)} notebook(s) at scale '{args.scale}'", flush=True)
            status = run_notebooks(selected, args.scale, args.keep_going, args.force,
                                   cell_timeout, nb_timeout)
        gone = {}
        for entry in missing:  # --keep-going: recorded for the tests, left out of the HTML
            print(f"  {entry}: listed in _toc.yml but missing; left out of the book", flush=True)
            if entry.startswith("notebooks/"):
                gone[Path(entry).name] = {
                    "notebook": entry + ".ipynb", "status": "missing", "cell": None,
                    "error": f"_toc.yml lists {entry} but {entry}.ipynb does not exist",
                    "seconds": 0, "attempts": 0}
        status = update_status(gone)
        if not args.no_html:
            stage(notebooks, missing)
            render()
    except BuildError as exc:
        print(f"build error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: children ended, status saved
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        print(f"build stopped by {signal.Signals(signum).name}; every child process ended",
              file=sys.stderr, flush=True)
        return 128 + signum
    bad = {k: v for k, v in status.items() if v.get("status") != "ok"
           and k in {nb.stem for nb in selected}}
    if bad:
        print("Notebooks that did not execute cleanly (details in _build/execution.json):")
        for name, st in bad.items():
            print(f"  {name}: {st['status']} at cell index {st.get('cell')}: {st.get('error')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
