"""The notation page's tables and claims: every estimator at its defaults beside
``LogisticRegression()`` (:func:`xclib.defaults_check.run`), and a stream of chunks through
``partial_fit`` beside one epoch of ``fit``.

The page runs the fits; what is here turns their rows into the wide table, the counts the
prose quotes and the reproduction claims.
"""
from __future__ import annotations

import pandas as pd
from sklearn.linear_model import LogisticRegression

from xclib import defaults_check

__all__ = ["defaults_table", "sizes_table", "record_defaults", "claim_defaults",
           "claim_stream", "unconverged"]

#: the reference the default fits are compared with (the last row of the wide table)
REFERENCE = "LogisticRegression()"


def defaults_table(rows):
    """One row per estimator, one column per set, in the order of ``rows``: the test
    accuracy minus ``LogisticRegression()``'s and the training time as a multiple of its
    time (``✗``: the fit diverged); empty where the estimator did not run on the set. The
    last row gives ``LogisticRegression()``'s own accuracy and seconds, marked
    "(max_iter)" where it stopped there without converging."""
    table = pd.DataFrame(rows)
    cell = table.apply(lambda r: f"{r.gap:+.3f} · {r.time_ratio:.1f}×"
                       + (" ✗" if r.diverged else ""), axis=1)
    wide = table.assign(cell=cell).pivot(index="estimator", columns="set", values="cell")
    wide = wide.loc[list(dict.fromkeys(table.estimator)),
                    list(dict.fromkeys(table.set))].fillna("")
    ref = table.drop_duplicates("set").set_index("set")
    wide.loc[REFERENCE] = [f"{ref.sklearn_accuracy[s]:.3f} · {ref.sklearn_seconds[s]:.1f} s"
                           + (" (max_iter)" if s in unconverged(rows) else "")
                           for s in wide.columns]
    return wide


def unconverged(rows):
    """The sets on which ``LogisticRegression()`` itself stopped at its ``max_iter`` (it
    warned ``ConvergenceWarning``), in the order of ``rows``."""
    return list(dict.fromkeys(r["set"] for r in rows
                              if "ConvergenceWarning" in r.get("sklearn_warnings", ())))


def sizes_table(rows):
    """Training rows, test rows and classes of each set of ``rows`` (one column a set)."""
    table = pd.DataFrame(rows)
    return table.drop_duplicates("set").set_index("set")[["n_train", "n_test", "K"]].T


def record_defaults(report, rows):
    """Record the rows and the counts the prose quotes; return ``(short, slow)``: the fits
    that end more than :data:`xclib.defaults_check.ACCURACY_MARGIN` below the reference or
    diverge, and the fits slower than the time limit, each as ``"label on set (number)"``."""
    table = pd.DataFrame(rows)
    within = (table.gap >= -defaults_check.ACCURACY_MARGIN) & ~table.diverged
    fast = table.within_time
    report.record("defaults_rows", rows)
    report.record("defaults_n_fits", len(table))
    report.record("defaults_n_within_margin", int(within.sum()))
    report.record("defaults_n_within_time", int(fast.sum()))
    report.record("defaults_n_diverged", int(table.diverged.sum()))
    exact = table[table.estimator == "SoftmaxRegression()"].set_index("set")
    sets = [f"{s} (its test accuracy {exact.sklearn_accuracy[s]:.3f}, SoftmaxRegression()'s "
            f"{exact.accuracy[s]:.3f})" for s in unconverged(rows) if s in exact.index]
    report.record("defaults_sklearn_unconverged", (
        f"it stopped at its max_iter = {LogisticRegression().max_iter} without converging "
        "on " + "; ".join(sets)
        + ": there the seconds compare with an unfinished fit") if sets else
        "it converged on every set")
    short = [f"{r.estimator} on {r.set} ({r.gap:+.3f})" for r in table[~within].itertuples()]
    slow = [f"{r.estimator} on {r.set} ({r.time_ratio:.1f}×)"
            for r in table[~fast].itertuples()]
    report.record("defaults_short", list(short))
    report.record("defaults_slow", list(slow))
    return short, slow


def claim_defaults(report, short, slow):
    """The two claims of the defaults table: accuracy within the margin, time within the
    limit (``short`` and ``slow`` from :func:`record_defaults`)."""
    ok = not short
    report.claim(
        "Every estimator at its defaults ends within 0.05 of LogisticRegression()'s test "
        "accuracy on every set, without diverging",
        status="reproduced" if ok else "not reproduced", holds=ok,
        ours=["defaults_n_within_margin", "defaults_n_fits", "defaults_short"],
        paper="scikit-learn's LogisticRegression() on the same rows",
        why=None if ok else "short of the margin: " + "; ".join(short))
    ok = not slow
    report.claim(
        "No default fit takes more than three times LogisticRegression()'s seconds (or "
        "three seconds where it takes less than one)",
        status="reproduced" if ok else "not reproduced", holds=ok,
        ours=["defaults_n_within_time", "defaults_n_fits", "defaults_slow"],
        paper="scikit-learn's LogisticRegression() on the same rows",
        why=None if ok else "slower: " + "; ".join(slow))


def claim_stream(report, gap, largest):
    """The claim of the stream: ``gap``, the largest coefficient difference between the
    streamed and the in-memory fit, within 1e-9 of ``largest``, their largest coefficient
    (recorded as ``stream_relative_gap`` and ``stream_rows`` before)."""
    ok = gap <= 1e-9 * largest
    report.claim(
        "A stream of chunks through partial_fit equals one epoch of fit over the same rows "
        "in the same order, with the same seed, to round-off",
        status="reproduced" if ok else "not reproduced", holds=ok,
        ours=["stream_relative_gap", "stream_rows"],
        paper="scikit-learn's partial_fit contract (SGDClassifier)",
        why=f"the largest coefficient difference on ALOI in ten chunks, {gap:.1e}, is "
            f"{gap / largest:.0e} of the largest coefficient")
