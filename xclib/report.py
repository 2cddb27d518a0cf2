"""What a chapter notebook reports: key numbers (JSON + myst-nb glue) and its reproduction check.

Every notebook does the same three things with it::

    from xclib.report import Report
    report = Report(results_path)                 # the papermill parameter
    report.record("bibtex_optimum_loss", value)   # JSON entry + glue for the prose ({glue:}`…`)
    report.claim("Implicit SGD beats U-max on Bibtex", ours=a, paper=b, holds=a < c)
    report.save(); report.check()                 # writes the JSON, shows the table, asserts

The tests (``tests/test_notebooks.py``) compare the JSON with ``tests/references/<name>.json``.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

__all__ = ["Report", "ReproductionError"]


class ReproductionError(AssertionError):
    """A claim of the paper that the chapter asserts did not hold in this run."""


def _plain(value):
    """JSON-friendly copy of numpy scalars/arrays, dicts and lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    return value


def _verdict(claim):
    if claim["tested"]:
        return "holds" if claim["holds"] else "FAILS"
    # shown, never asserted: our data or scale cannot test it, or it does not reproduce here
    return "not asserted (holds here)" if claim["holds"] else "not asserted (does not hold here)"


class Report:
    """Collects a notebook's key numbers and claims; writes ``results_path`` as JSON.

    Parameters
    ----------
    results_path : str or None
        Where :meth:`save` writes the JSON (None: nowhere, e.g. when run by hand).
    glue : bool
        Also ``myst_nb.glue`` each recorded scalar so prose can quote it.
    """

    def __init__(self, results_path=None, glue=True):
        self.results_path = results_path
        self.glue = glue
        self.values = {}
        self.claims = []

    def record(self, name, value, fmt=None):
        """Store ``value`` under ``name``; glue it (hidden) for ``{glue:text}`name:fmt``."""
        self.values[name] = _plain(value)
        if isinstance(value, np.generic):
            value = value.item()  # myst-nb formats plain Python numbers, not numpy reprs
        if self.glue and isinstance(value, (int, float, str)):
            try:
                from myst_nb import glue as _glue

                _glue(name, value, display=False)
            except ImportError:  # outside the book tool chain
                pass
        return value

    def claim(self, text, holds, ours=None, paper=None, tested=True):
        """A claim of the paper with our number beside the paper's.

        ``tested=False`` marks a claim that is shown but never asserted: one our data or scale
        cannot test, or one that does not reproduce here (``holds=False``: the chapter says
        why). The table's verdict then says whether it held in this run.
        """
        self.claims.append(
            {"claim": text, "ours": _plain(ours), "paper": _plain(paper),
             "holds": bool(holds), "tested": bool(tested)}
        )
        return bool(holds)

    def save(self):
        """Write ``{"values": …, "claims": …}`` to ``results_path`` (creating folders)."""
        if self.results_path:
            path = Path(self.results_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            payload = {"values": self.values, "claims": self.claims,
                       "scale": os.environ.get("XCLIB_SCALE")}
            path.write_text(json.dumps(payload, indent=1, sort_keys=True))
        return self.results_path

    def table(self):
        """The reproduction-check table as a pandas DataFrame (claim, paper, ours, verdict)."""
        import pandas as pd

        rows = [
            {"claim": c["claim"], "paper": c["paper"], "ours": c["ours"],
             "verdict": _verdict(c)}
            for c in self.claims
        ]
        return pd.DataFrame(rows, columns=["claim", "paper", "ours", "verdict"])

    def check(self):
        """Display the table and raise :class:`ReproductionError` if a tested claim failed."""
        try:
            from IPython.display import display

            display(self.table())
        except ImportError:  # pragma: no cover
            print(self.table().to_string())
        failed = [c["claim"] for c in self.claims if c["tested"] and not c["holds"]]
        if failed:
            raise ReproductionError("claims that did not hold: " + "; ".join(failed))
