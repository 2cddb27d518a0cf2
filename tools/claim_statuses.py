"""Write ``tests/references/claim_statuses.json`` from the last build's results.

Run after a build at the book's scale and default seed, when a claim's status moved for a
reason the commit states (``tests/book/test_notebooks.py::test_claim_statuses_match_references``
compares every build with this file)::

    .venv/bin/python tools/claim_statuses.py [NAME ...]   # default: every built notebook
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "_build" / "results"
REFERENCE = ROOT / "tests" / "references" / "claim_statuses.json"


def main(names):
    reference = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
    for name in names or sorted(p.stem for p in RESULTS.glob("*.json")):
        results = json.loads((RESULTS / f"{name}.json").read_text())
        if results.get("scale") not in (None, "book"):
            sys.exit(f"{name} was built at scale {results['scale']!r}, not 'book'")
        kept = dict(reference.get(name, []))  # a list of statuses (wall-clock claims) stays
        reference[name] = [[c["claim"], kept[c["claim"]] if isinstance(
            kept.get(c["claim"]), list) else c["status"]] for c in results.get("claims", [])]
        print(f"{name}: {len(reference[name])} claims")
    REFERENCE.write_text(json.dumps(dict(sorted(reference.items())), indent=1,
                                    ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
