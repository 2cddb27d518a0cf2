"""Repository hygiene: clean notebooks with papermill parameters, a valid toc, exact pins."""
from __future__ import annotations

import ast
import json
import re
import subprocess

import nbformat
import pytest
import yaml

from conftest import ROOT, build_tool, toc_entries


def committed_notebooks():
    try:
        out = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
        paths = [ROOT / p for p in out]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        paths = [p for p in ROOT.glob("notebooks/**/*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(p for p in paths if p.exists())


NOTEBOOKS = committed_notebooks()
IDS = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, (f"{path.relative_to(ROOT)}: code cells {dirty} carry outputs or execution "
                       "counts; clear them (e.g. `jupyter nbconvert --clear-output --inplace`)")
    assert "widgets" not in nb.metadata, f"{path.relative_to(ROOT)}: widget state in metadata"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_code_fits_the_page(path):
    """Code a reader sees (or unfolds) fits the page: no line over 88 characters."""
    nb = nbformat.read(path, as_version=4)
    long = [f"cell {i}: {len(line)} chars: {line.strip()[:60]}"
            for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for line in c.source.splitlines() if len(line) > 88]
    assert not long, f"{path.relative_to(ROOT)}:\n" + "\n".join(long)


#: cell tags under which the rendered page folds or drops a cell's code
HIDING_TAGS = {"hide-input", "remove-input", "hide-cell", "remove-cell"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_shows_its_experiments(path):
    """A reader sees how each figure is made: at most 30 % of a notebook's code lines
    (non-blank) sit in folded or removed cells, and the median code cell is at most 15
    lines. Plumbing (stores, pools, claim tables) belongs in ``xclib.book``."""
    nb = nbformat.read(path, as_version=4)
    sizes, hidden = [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        n = sum(1 for line in cell.source.splitlines() if line.strip())
        sizes.append(n)
        if HIDING_TAGS & set(cell.metadata.get("tags", [])):
            hidden += n
    sizes.sort()
    mid = len(sizes) // 2
    median = sizes[mid] if len(sizes) % 2 else (sizes[mid - 1] + sizes[mid]) / 2
    share = hidden / max(sum(sizes), 1)
    assert share <= 0.30 and median <= 15, (
        f"{path.relative_to(ROOT)}: {share:.0%} of {sum(sizes)} code lines hidden "
        f"(at most 30 %), median code cell {median} lines (at most 15)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_has_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{path.relative_to(ROOT)}: needs exactly one cell tagged 'parameters'"
    assigned = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    try:
                        assigned[target.id] = ast.literal_eval(node.value)
                    except ValueError:
                        assigned[target.id] = ...
    assert assigned.get("scale") == "book", (
        f"{path.relative_to(ROOT)}: parameters need scale = \"book\"")
    assert "results_path" in assigned, f"{path.relative_to(ROOT)}: parameters need results_path"
    draws = re.search(r"random_state|default_rng|np\.random|\bseed\b",
                      "\n".join(c.source for c in nb.cells if c.cell_type == "code"
                                 and c is not cells[0]))
    assert not draws or isinstance(assigned.get("seed"), int), (
        f"{path.relative_to(ROOT)}: it draws random numbers, so its parameters need an int "
        "seed (papermill -p seed 1 reruns it with other draws)")


#: words that speak of how the project is organised, not of the book's subject
ORGANISATION = re.compile(
    r"\b(CI|issues?|helpers?|the lead|lead.s|sessions?|TODO|FIXME|committed|make test|"
    r"tests/references|pull request|this repository|closing note)\b")
#: phrases where one of those words speaks of the subject
ORGANISATION_OK = re.compile(r"Jupyter session|live session|at issue|session of the kernel")


def _reader_text(path):
    """What a reader sees of a page: markdown, and code with its comments."""
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return [(i, c.source) for i, c in enumerate(nb.cells)
                if "parameters" not in c.get("metadata", {}).get("tags", [])]
    return [(0, path.read_text())]


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb"))
                         + sorted((ROOT / "book").glob("*.md")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_speak_of_their_subject_only(path):
    found = []
    for cell, text in _reader_text(path):
        text = ORGANISATION_OK.sub("", text)
        for m in ORGANISATION.finditer(text):
            found.append(f"cell {cell}: …{text[max(0, m.start() - 40):m.end() + 20]!r}…")
    assert not found, (f"{path.relative_to(ROOT)} speaks of how the project is organised:\n"
                       + "\n".join(found[:20]))


def test_toc_entries_exist():
    missing = []
    for entry in toc_entries():
        try:
            build_tool.resolve(entry, ROOT)
        except build_tool.BuildError as exc:
            missing.append(str(exc))
    assert not missing, "\n".join(missing)


def test_config_builds_offline_from_executed_notebooks():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["only_build_toc_files"] is True
    text = (ROOT / "_config.yml").read_text()
    urls = re.findall(r"https?://\S+", "\n".join(l.split("#")[0] for l in text.splitlines()))
    assert not urls, f"_config.yml points at remote resources: {urls}"


def test_requirements_are_exact_pins():
    bad, pins = [], {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([A-Za-z0-9_.+!\-]+)(\s*;.*)?", line)
        if not m:
            bad.append(line)
        else:
            pins[m.group(1).lower().replace("_", "-")] = m.group(3)
    assert not bad, f"requirements.txt lines that are not exact pins (name==version): {bad}"
    assert "jupyter-book" in pins, "requirements.txt must pin jupyter-book"
    assert pins["jupyter-book"].split(".")[0] == "1", \
        "jupyter-book must be 1.x (jupyter-book<2): 2.x is a different, Node-based tool"


def test_node_packages_are_pinned():
    package = json.loads((ROOT / "package.json").read_text())
    loose = {k: v for k, v in package.get("dependencies", {}).items()
             if not re.fullmatch(r"\d+\.\d+\.\d+", v)}
    assert not loose, f"package.json: pin exact versions, not ranges: {loose}"
    assert (ROOT / "package-lock.json").exists(), "package-lock.json must be committed"


def test_library_rooms_stay_small():
    """No module of xclib over 500 lines, no function or class over 120, no numba kernel
    over 15 parameters (its inputs come in typed bundles instead)."""
    big = []
    for path in sorted((ROOT / "xclib").rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(ROOT)
        if text.count("\n") > 500:
            big.append(f"{where}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                continue
            n = node.end_lineno - node.lineno + 1
            if n > 120:
                big.append(f"{where}:{node.lineno} {node.name}: {n} lines")
            jitted = isinstance(node, ast.FunctionDef) and any(
                "jit" in ast.unparse(d) for d in node.decorator_list)
            if jitted and len(node.args.args) > 15:
                big.append(f"{where}:{node.lineno} kernel {node.name}: "
                           f"{len(node.args.args)} parameters")
    assert not big, "\n".join(big)


#: the chapter packages of xclib (a paper each); the shared modules sit beside them
CHAPTER_PACKAGES = ("unbiased", "augment_reduce", "dsmlr", "sqb", "mips")


def test_no_chapter_package_imports_another():
    """Shared parts live in shared modules: a chapter package imports only its own modules
    and the top-level ones (``base``, ``_numba``, ``steps``, ``metrics``, ...)."""
    found = []
    for pkg in CHAPTER_PACKAGES:
        for path in sorted((ROOT / "xclib" / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    name = ("xclib." if node.level == 2 else "") + (node.module or "") \
                        if node.level in (0, 2) else None
                elif isinstance(node, ast.Import):
                    name = " ".join(a.name for a in node.names)
                else:
                    continue
                if name is None:
                    continue
                hit = [o for o in CHAPTER_PACKAGES if o != pkg
                       and re.search(rf"\bxclib\.{o}\b", name)]
                if hit:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {hit[0]}")
    assert not found, "\n".join(found)


def test_chapter_packages_share_one_layout():
    """One file-name convention (``xclib/__init__.py``): ``estimators.py``, ``kernels.py``,
    ``objective.py``, never their variants."""
    odd = {"estimator.py", "_estimators.py", "_kernels.py", "kernel.py", "objectives.py"}
    for pkg in CHAPTER_PACKAGES:
        names = {p.name for p in (ROOT / "xclib" / pkg).glob("*.py")}
        assert not odd & names, f"xclib/{pkg}: {sorted(odd & names)}"
