"""Shared fixtures: where the build is, which notebooks and pages the toc lists.

The build (``tools/build.py``, run by ``make test`` before pytest) writes ``_build/``; the
notebook and HTML tests only read it, so nothing is executed twice.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
NOT_BUILT = "run `make test` (it builds first): {} is missing"


def _load_build_tool():
    spec = importlib.util.spec_from_file_location("softmax_book_build", ROOT / "tools" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_tool = _load_build_tool()


def toc_entries() -> list[str]:
    """Every ``file:`` of ``_toc.yml`` (no extension), root first."""
    return build_tool.toc_files(ROOT)


def toc_notebook_names() -> list[str]:
    """Names (``NN_name``) of the toc's notebooks: entries under notebooks/ or with an .ipynb."""
    return [Path(e).name for e in toc_entries()
            if e.startswith("notebooks/") or (ROOT / f"{e}.ipynb").exists()]


@pytest.fixture(scope="session")
def execution_status() -> dict:
    """``_build/execution.json``: per-notebook status written by tools/build.py."""
    path = BUILD / "execution.json"
    if not path.exists():
        pytest.fail(NOT_BUILT.format(path.relative_to(ROOT)), pytrace=False)
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def html_dir() -> Path:
    path = BUILD / "html"
    if not (path / "index.html").exists():
        pytest.fail(NOT_BUILT.format("_build/html/index.html"), pytrace=False)
    return path


def exported_estimators() -> list[type]:
    """Every estimator class ``xclib`` exports (not the abstract bases), sorted by name."""
    import inspect

    from sklearn.base import BaseEstimator

    import xclib
    from xclib import base

    return sorted(
        (obj for name in xclib.__all__
         if inspect.isclass(obj := getattr(xclib, name)) and issubclass(obj, BaseEstimator)
         and obj not in (base.LinearSoftmaxClassifier, base.IterativeSoftmaxEstimator)),
        key=lambda cls: cls.__name__,
    )
