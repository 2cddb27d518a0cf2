"""The notation page's tables and claims (xclib.book.notation), on hand-made rows."""
import pytest

from xclib.book.notation import (claim_defaults, claim_stream, defaults_table,
                                 record_defaults, sizes_table, unconverged)
from xclib.book.report import Report


def _row(set_, est, gap, ratio, diverged=False, within_time=True, K=3):
    return dict(set=set_, estimator=est, accuracy=0.8 + gap, seconds=ratio * 2.0,
                sklearn_accuracy=0.8, sklearn_seconds=2.0, gap=gap, time_ratio=ratio,
                within_time=within_time, diverged=diverged, warnings=[], n_train=100,
                n_test=40, K=K)


#: set B comes first and has an estimator set A lacks; "Fast()" diverges on B and is
#: short of the margin on A; "Slow()" is too slow on B
ROWS = [_row("B", "Fast()", 0.01, 0.5, diverged=True, K=2),
        _row("B", "Slow()", -0.02, 4.0, within_time=False, K=2),
        _row("B", "Binary()", 0.0, 1.0, K=2),
        _row("A", "Fast()", -0.1, 0.25),
        _row("A", "Slow()", 0.03, 2.0)]


def test_defaults_table_keeps_the_order_of_the_rows_and_ends_with_the_reference():
    wide = defaults_table(ROWS)
    assert list(wide.columns) == ["B", "A"]
    assert list(wide.index) == ["Fast()", "Slow()", "Binary()", "LogisticRegression()"]
    assert wide.loc["Fast()", "B"] == "+0.010 · 0.5× ✗"
    assert wide.loc["Slow()", "B"] == "-0.020 · 4.0×"
    assert wide.loc["Binary()", "A"] == ""  # not run on A
    assert wide.loc["LogisticRegression()", "A"] == "0.800 · 2.0 s"


def test_an_unconverged_reference_is_marked_and_named_with_the_exact_solver():
    """Where LogisticRegression() stopped at max_iter, its cell says so and the recorded
    sentence sets SoftmaxRegression()'s accuracy beside its own."""
    rows = [dict(r, sklearn_warnings=["ConvergenceWarning"] if r["set"] == "A" else [])
            for r in ROWS] + [dict(_row("A", "SoftmaxRegression()", 0.15, 20.0),
                                   sklearn_warnings=["ConvergenceWarning"])]
    assert unconverged(rows) == ["A"]
    wide = defaults_table(rows)
    assert wide.loc["LogisticRegression()", "A"] == "0.800 · 2.0 s (max_iter)"
    assert wide.loc["LogisticRegression()", "B"] == "0.800 · 2.0 s"
    report = Report(glue=False)
    record_defaults(report, rows)
    assert report.values["defaults_sklearn_unconverged"] == (
        "it stopped at its max_iter = 100 without converging on A (its test accuracy 0.800, "
        "SoftmaxRegression()'s 0.950): there the seconds compare with an unfinished fit")
    report = Report(glue=False)
    record_defaults(report, ROWS)  # rows without the key: no warning recorded
    assert report.values["defaults_sklearn_unconverged"] == "it converged on every set"


def test_sizes_table_has_one_column_per_set():
    sizes = sizes_table(ROWS)
    assert list(sizes.columns) == ["B", "A"]
    assert sizes.loc["K"].tolist() == [2, 3] and sizes.loc["n_train"].tolist() == [100, 100]


def test_record_defaults_counts_and_names_the_fits_off_the_mark():
    report = Report(glue=False)
    short, slow = record_defaults(report, ROWS)
    assert short == ["Fast() on B (+0.010)", "Fast() on A (-0.100)"]  # diverged, then short
    assert slow == ["Slow() on B (4.0×)"]
    v = report.values
    assert (v["defaults_n_fits"], v["defaults_n_within_margin"], v["defaults_n_within_time"],
            v["defaults_n_diverged"]) == (5, 3, 4, 1)
    assert v["defaults_short"] == short and len(v["defaults_rows"]) == 5


def test_claim_defaults_is_reproduced_only_without_short_or_slow_fits():
    report = Report(glue=False)
    short, slow = record_defaults(report, ROWS)
    claim_defaults(report, short, slow)
    assert [c["status"] for c in report.claims] == ["not reproduced"] * 2
    assert "Fast() on A (-0.100)" in report.claims[0]["why"]
    assert "Slow() on B" in report.claims[1]["why"]
    report = Report(glue=False)
    fine = [r for r in ROWS if r["estimator"] == "Binary()"]
    claim_defaults(report, *record_defaults(report, fine))
    assert [(c["status"], c["holds"]) for c in report.claims] == [("reproduced", True)] * 2


@pytest.mark.parametrize("gap, status", [(1e-13, "reproduced"), (1e-6, "not reproduced")])
def test_claim_stream_holds_to_round_off_only(gap, status):
    report = Report(glue=False)
    report.record("stream_relative_gap", gap / 2.0)
    report.record("stream_rows", 10)
    claim_stream(report, gap, 2.0)
    assert report.claims[0]["status"] == status
    assert report.claims[0]["holds"] is (status == "reproduced")
