"""Unit tests of tools/build.py's pure parts (the full pipeline is exercised by `make test`)."""
from __future__ import annotations

import nbformat
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
    params = nbformat.v4.new_code_cell('scale = "ci"')
    params.metadata["tags"] = ["parameters"]
    injected = nbformat.v4.new_code_cell('scale = "paper"')
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
    a, b = bt.input_hash(nb, "ci"), bt.input_hash(nb, "paper")
    nb.write_text("{ }")
    assert len({a, b, bt.input_hash(nb, "ci")}) == 3
