"""What a chapter notebook reports: key numbers (JSON + myst-nb glue) and its reproduction check.

Every notebook does the same three things with it::

    from xclib.book.report import Report
    report = Report(results_path)                 # the papermill parameter
    report.record("bibtex_loss_implicit", value)  # JSON entry + glue for the prose ({glue:}`…`)
    report.claim("Implicit SGD beats U-max on Bibtex", paper="yes",
                 ours=["bibtex_loss_implicit", "bibtex_loss_umax"],
                 holds=a < b, status="reproduced")
    report.save(); report.check()                 # writes the JSON, shows the table, asserts

A claim carries one of three statuses:

``reproduced``
    asserted: :meth:`check` fails if ``holds`` is not true.
``not reproduced``
    asserted the other way: :meth:`check` fails if ``holds`` becomes true (then the chapter's
    evidence is out of date); ``why`` says where the evidence is (a derivation, a control run,
    the authors' settings).
``not testable``
    ``why`` names the missing data or hardware. Never a matter of scale: a reason that blames
    epochs, run length or the build's scale is refused.

Per-epoch times are recorded under keys ending in ``_epoch_seconds`` (a list, or a dict of
lists); the tests check that none starts far above its median (compilation inside the time).

A claim's ``ours`` names recorded values (a key or a list of keys of :meth:`record`), so the
number shown is the one the run measured, never a literal. The tests
(``tests/book/test_notebooks.py``) compare the JSON with ``tests/references/<name>.json``.
"""
from __future__ import annotations

import html
import json
import math
import os
import re
from pathlib import Path

import numpy as np

__all__ = ["Report", "ReproductionError", "STATUSES"]

STATUSES = ("reproduced", "not reproduced", "not testable")
#: words that make a "not testable" reason a matter of scale, which it may never be
_SCALE_EXCUSES = re.compile(r"\b(epochs?|too short|short runs?|ci scale|budget|scale|"
                            r"iterations?|run length|longer run)\b", re.IGNORECASE)
_MARK = {"reproduced": ("✓", "#1a7f37"), "not reproduced": ("✗", "#b42318"),
         "not testable": ("–", "#6b7280"), "unclassified": ("?", "#6b7280")}


class ReproductionError(AssertionError):
    """A claim's measured outcome disagrees with its status."""


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


def _short(value):
    """A compact text for a table cell (floats to 4 significant digits)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_short(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_short(v) for v in value)
    return "" if value is None else str(value)


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

    def claim(self, text, holds=None, ours=None, paper=None, tested=None, *, status=None,
              why=None):
        """A claim of the paper, the paper's number and ours (recorded keys), and its status.

        Parameters
        ----------
        text : str, the claim in full.
        status : one of :data:`STATUSES`.
        holds : bool, whether the claim held in this run (required unless not testable).
        ours : str or list of str, keys of :meth:`record` whose values are shown (required
            unless not testable).
        paper : what the paper reports (a number or a short text).
        why : the evidence for ``not reproduced``; the missing data or hardware for
            ``not testable``.

        Without ``status`` the claim is recorded in the form of earlier versions (``tested``,
        ``ours`` a literal), which the tests no longer accept from a chapter.
        """
        claim = _legacy_claim(text, holds, tested, ours, paper, why) if status is None \
            else _checked_claim(self.values, text, holds, ours, paper, status, why)
        self.claims.append(claim)
        return bool(holds) if status is None else holds

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
        """The reproduction check as a pandas DataFrame (claim, paper, ours, status, why)."""
        import pandas as pd

        rows = [{"claim": c["claim"], "paper": _short(c["paper"]), "ours": _short(c["ours"]),
                 "status": c["status"], "why": c["why"] or ""} for c in self.claims]
        return pd.DataFrame(rows, columns=["claim", "paper", "ours", "status", "why"])

    def html(self):
        """The table as HTML: full text of every claim, its status (marked and coloured) beside
        it, then the paper's value and ours."""
        return _claims_html(self.claims)

    def counts(self):
        """Number of claims per status."""
        return {s: sum(c["status"] == s for c in self.claims) for s in STATUSES}

    def check(self):
        """Display the table; raise :class:`ReproductionError` where outcome and status differ."""
        try:
            from IPython.display import HTML, display

            display(HTML(self.html()))
        except ImportError:  # pragma: no cover
            print(self.table().to_string())
        wrong = [f"{c['claim']} (status {c['status']}, held: {c['holds']})"
                 for c in self.claims if _disagrees(c)]
        if wrong:
            raise ReproductionError("claims whose outcome disagrees with their status: "
                                    + "; ".join(wrong))


def _disagrees(claim):
    """True when a run contradicts the claim's status."""
    status = claim.get("status", "unclassified")
    if status == "unclassified":
        return claim.get("tested", True) and not claim.get("holds")
    if status == "reproduced":
        return claim["holds"] is not True
    if status == "not reproduced":
        return claim["holds"] is not False
    return False


def _legacy_claim(text, holds, tested, ours, paper, why):
    """A claim in the form of earlier versions (no status: ``tested``, ``ours`` a literal)."""
    return {"claim": text, "status": "unclassified", "holds": bool(holds),
            "tested": True if tested is None else bool(tested),
            "ours": _plain(ours), "paper": _plain(paper), "why": why}


def _checked_claim(values, text, holds, ours, paper, status, why):
    """The record of a claim of :meth:`Report.claim`, after its rules: a known status, ``ours``
    naming recorded values, ``holds`` and ``ours`` unless not testable, ``why`` unless
    reproduced, and never "not testable" for scale."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    keys = [ours] if isinstance(ours, str) else list(ours or [])
    missing = [k for k in keys if k not in values]
    if missing:
        raise ValueError(f"claim {text!r}: ours names values never recorded: {missing}")
    if status != "not testable":
        if holds is None or not keys:
            raise ValueError(f"claim {text!r}: a {status} claim needs holds= and ours= "
                             "(recorded keys): a claim with nothing measured is no claim")
    if status != "reproduced" and not why:
        raise ValueError(f"claim {text!r}: a {status} claim needs why=")
    if status == "not testable" and _SCALE_EXCUSES.search(why):
        raise ValueError(f"claim {text!r}: not testable only for missing data or hardware, "
                         f"never for scale: {why!r}")
    return {"claim": text, "status": status, "holds": None if holds is None else bool(holds),
            "ours": {k: values[k] for k in keys}, "paper": _plain(paper), "why": why}


def _claims_html(claims):
    """The claims as an HTML table: claim, status (marked and coloured, with its why), the
    paper's value, ours."""
    head = "".join(f"<th>{h}</th>" for h in ("claim", "status", "paper", "ours"))
    wrap = ' style="overflow-wrap:anywhere"'  # long value names break, not the page
    body = []
    for c in claims:
        mark, colour = _MARK[c["status"]]
        why = f"<br><small>{html.escape(c['why'])}</small>" if c["why"] else ""
        body.append(
            f"<tr><td>{html.escape(c['claim'])}</td>"
            f'<td style="color:{colour};font-weight:600">{mark} {c["status"]}{why}</td>'
            f"<td{wrap}>{html.escape(_short(c['paper']))}</td>"
            f"<td{wrap}>{html.escape(_short(c['ours']))}</td></tr>"
        )
    return ('<table class="reproduction-check" style="text-align:left">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
