#!/usr/bin/env python3
"""Read and run the book's notebooks in JupyterLab without touching the committed copies.

``make lab`` runs ``tools/lab.py open``:

1. **working copies**: every ``notebooks/*.ipynb`` is copied once into the git-ignored folder
   ``lab/notebooks/``; JupyterLab opens those. Running and saving them (JupyterLab autosaves
   outputs) leaves ``notebooks/`` as committed, so the hygiene tests and the build's
   change detection are unaffected. A copy is never overwritten: ``tools/lab.py reset [NAME]``
   (``make lab-reset``) replaces it and keeps the old one in ``lab/.previous/``; a copy whose
   source changed since it was made is reported.
2. **MyST**: jupyterlab-myst renders the prose (roles, citations, admonitions, math) but has no
   ``{glue}``; the copies quote the chapter's numbers with MyST's ``{eval}`` role instead,
   reading the same value from the notebook's ``report`` (``{glue:text}`key:.3f``` becomes
   ``{eval}`format(report.values["key"], ".3f")```), shown once the cell that records it ran.
3. **kernel**: the venv's Python is registered for the user as the kernel
   ``softmax-at-scale`` ("Softmax at scale (.venv)"), so a JupyterLab installed elsewhere sees
   it too; the copies ask for it.
4. **server**: ``jupyter lab`` on 127.0.0.1 in ``lab/`` (``--allow-root`` when run as root), with
   no news feed and no update check (nothing is fetched from outside the machine).

A clean/smudge filter (nbstripout) was not chosen: it strips outputs only in what git stores,
while the working-tree notebook keeps them, and that file is what the tests and the build read.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "notebooks"
WORK = ROOT / "lab"
KERNEL_NAME = "softmax-at-scale"
KERNEL_DISPLAY = "Softmax at scale (.venv)"
META = "xclib_lab"  # notebook metadata key: the sha256 of the source the copy was made from

# {glue}`key`, {glue:text}`key:fmt`, {glue:md}`key` (myst-nb); {glue:any}/{glue:figure} stay.
GLUE = re.compile(r"\{glue(?::(text|md))?\}`([\w.-]+)(?::([^`]*))?`")
RECORD = re.compile(r"""report\.record\(\s*["']([\w.-]+)["']""")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def glue_to_eval(markdown: str, recorded: set[str] | None) -> str:
    """Rewrite myst-nb glue roles as MyST ``{eval}`` roles reading ``report.values``.

    ``recorded`` holds the keys to rewrite (``None``: all, for a notebook whose ``report``
    glues every value it records, also under computed names); a ``{glue:md}`` key ``*_md`` not
    recorded as such reads the key without the suffix (the notebooks' Markdown twin of a str).
    Other glue roles are left as they are.
    """

    def repl(m):
        kind, key, fmt = m.group(1), m.group(2), m.group(3) or ""
        if kind == "md" and key.endswith("_md") and (recorded is None or key not in recorded):
            key = key[:-3]
        if recorded is not None and key not in recorded:
            return m.group(0)
        return f'{{eval}}`format(report.values["{key}"], "{fmt}")`'

    return GLUE.sub(repl, markdown)


def lab_copy(source: Path, kernel_name: str = KERNEL_NAME):
    """The working copy of ``source``: the book's kernel, ``{eval}`` for glue, a source hash."""
    import nbformat

    nb = nbformat.read(source, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    recorded = None if "report = Report(" in code else set(RECORD.findall(code))
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = glue_to_eval(cell.source, recorded)
    nb.metadata["kernelspec"] = {"name": kernel_name, "display_name": KERNEL_DISPLAY,
                                 "language": "python"}
    nb.metadata[META] = {"source": source.name, "sha256": _sha256(source)}
    return nb


def _write(nb, path: Path) -> None:
    import nbformat

    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def prepare(source: Path = SOURCE, work: Path = WORK, kernel_name: str = KERNEL_NAME):
    """Make the missing working copies; return ``(made, stale)`` lists of notebook names.

    ``stale`` are copies whose source changed since they were made (``reset`` refreshes them).
    """
    import nbformat

    made, stale = [], []
    for src in sorted(source.glob("*.ipynb")):
        dest = work / "notebooks" / src.name
        if not dest.exists():
            _write(lab_copy(src, kernel_name), dest)
            made.append(src.stem)
            continue
        meta = nbformat.read(dest, as_version=4).metadata.get(META, {})
        if meta.get("sha256") != _sha256(src):
            stale.append(src.stem)
    book = work / "book"
    if (ROOT / "book").is_dir() and not book.exists() and not book.is_symlink():
        try:  # the notebooks link to ../book/*.md
            book.symlink_to(Path(os.path.relpath(ROOT / "book", work)), target_is_directory=True)
        except OSError:
            pass
    return made, stale


def reset(names=(), source: Path = SOURCE, work: Path = WORK, kernel_name: str = KERNEL_NAME):
    """Replace the working copies of ``names`` (all when empty) by fresh ones; the old copies
    move to ``lab/.previous/<name>-<time>.ipynb``. Returns the names reset."""
    wanted = {Path(n).stem for n in names}
    sources = [p for p in sorted(source.glob("*.ipynb")) if not wanted or p.stem in wanted]
    unknown = wanted - {p.stem for p in sources}
    if unknown:
        raise SystemExit(f"no such notebook in {source}: {sorted(unknown)}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for src in sources:
        dest = work / "notebooks" / src.name
        if dest.exists():
            keep = work / ".previous" / f"{src.stem}-{stamp}.ipynb"
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(dest), keep)
        _write(lab_copy(src, kernel_name), dest)
    return [p.stem for p in sources]


def register_kernel(kernel_name: str = KERNEL_NAME) -> str:
    """Register this Python (the venv's) as a user kernel; return the kernelspec folder.

    The kernel gets ``NUMBA_CACHE_DIR`` (the build's cache) and, when set, ``XCLIB_DATA``, so
    a JupyterLab started from elsewhere runs the notebooks the same way.
    """
    from ipykernel.kernelspec import install

    env = {"NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR",
                                             str(ROOT / "_build" / "numba_cache"))}
    if os.environ.get("XCLIB_DATA"):
        env["XCLIB_DATA"] = str(Path(os.environ["XCLIB_DATA"]).resolve())
    return install(user=True, kernel_name=kernel_name, display_name=KERNEL_DISPLAY, env=env)


def lab_command(work: Path = WORK, port=None, token=None, open_browser=True, extra=()):
    """The ``jupyter lab`` command line used by ``open`` (and by the browser test)."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={work}",
           "--ServerApp.ip=127.0.0.1", "--ServerApp.default_url=/lab/tree/notebooks",
           "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if port is not None:
        cmd += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    if not open_browser:
        cmd.append("--no-browser")
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    return cmd + list(extra)


def _report(made, stale):
    rel = WORK.relative_to(ROOT)
    if made:
        print(f"lab: new working copies in {rel}/notebooks/: {', '.join(made)}")
    for name in stale:
        print(f"lab: notebooks/{name}.ipynb changed since {rel}/notebooks/{name}.ipynb was "
              f"made; `make lab-reset NB={name}` replaces your copy (the old one is kept)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare", help="make the missing working copies in lab/notebooks/")
    p_reset = sub.add_parser("reset", help="replace working copies (all, or the NAMEs given)")
    p_reset.add_argument("names", nargs="*")
    sub.add_parser("kernel", help=f"register the venv's kernel as {KERNEL_NAME!r}")
    p_open = sub.add_parser("open", help="prepare, register the kernel, start JupyterLab")
    p_open.add_argument("extra", nargs=argparse.REMAINDER,
                        help="passed to jupyter lab (e.g. --port 8889 --no-browser)")
    args = parser.parse_args(argv)
    if args.command == "reset":
        names = reset(args.names)
        print(f"lab: fresh copies of {', '.join(names)} (old ones in lab/.previous/)")
        return 0
    if args.command == "kernel":
        print(f"lab: kernel {KERNEL_NAME!r} in {register_kernel()}")
        return 0
    _report(*prepare())
    if args.command == "open":
        print(f"lab: kernel {KERNEL_NAME!r} in {register_kernel()}")
        cmd = lab_command(extra=[a for a in args.extra if a != "--"])
        os.execv(cmd[0], cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
