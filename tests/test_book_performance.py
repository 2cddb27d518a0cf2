"""The performance appendix's plumbing (xclib.book.performance), on hand-made results."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from xclib.book import performance as perf  # noqa: E402
from xclib.book.report import Report  # noqa: E402

SCRIPT = '''
import argparse, json, sys
ap = argparse.ArgumentParser()
ap.add_argument("--json")
ap.add_argument("--fail", action="store_true")
ap.add_argument("--n", type=int, default=1)
a = ap.parse_args()
if a.fail:
    sys.exit("it broke")
print("hello")
json.dump({"n": a.n}, open(a.json, "w"))


def twice(x):
    return 2 * x
'''


def test_bench_returns_the_json_and_the_printout_and_raises_on_failure(tmp_path):
    (tmp_path / "tool.py").write_text(SCRIPT)
    results, out = perf.bench("tool.py", "--n", "3", folder=tmp_path)
    assert results == {"n": 3} and out.strip() == "hello"
    with pytest.raises(RuntimeError, match=r"tool.py failed \(1\):\nit broke"):
        perf.bench("tool.py", "--fail", folder=tmp_path)


def test_the_benchmarks_folder_holds_the_scripts_and_load_benchmark_imports_them():
    assert (perf.BENCH / "floors.py").exists() and (perf.BENCH / "bench_exact.py").exists()
    floors = perf.load_benchmark("floors.py")
    assert callable(floors.sgd_access_epoch) and callable(floors._chase)


def test_machine_names_the_processor_and_the_libraries():
    table = perf.machine()
    assert list(table.index) == ["CPU", "cores", "Python", "NumPy", "numba", "BLAS"]
    assert table.iloc[:, 0]["cores"] >= 1


@pytest.mark.parametrize("mnist", [True, False])
def test_floors_with_and_without_the_mnist_passes(mnist):
    floors = dict(stream_GBps=10.0, chase_ns_K100=2.0, chase_ns_K100000=90.0)
    if mnist:
        floors.update(mnist_random_pass_s=0.012345678, mnist_sequential_pass_s=0.01)
    report = Report(glue=False)
    perf.record_floors(report, floors)
    assert report.values["chase_ratio"] == 45.0
    assert ("mnist_random_pass_s" in report.values) is mnist
    table = perf.floors_table(floors)
    assert len(table) == (5 if mnist else 3)
    if mnist:
        assert table.loc["MNIST rows, random order (s per pass)", "measured"] == 0.0123


def _ch1():
    ch1 = {key: 1.0 for key in perf.STEP_KEYS}
    for z in (10, 200):
        for key in perf._PER_STEP.values():
            ch1.setdefault(f"nnz{z}_{key}", 0.5)
    for m in perf._KERNELS:
        ch1[f"{m}_K1e5_over_K1e2"] = 0.4
        ch1[f"{m}_K1e5_of_floor"] = 0.8
    ch1.update(floor_K1e5_over_K1e2=0.5, nnz10_implicit_bisection_evals=33.0,
               nnz10_implicit_newton_evals=1.2, nnz200_implicit_newton_over_vanilla=0.9,
               nnz200_implicit_bisection_over_vanilla=0.6,
               nnz10_implicit_newton_over_vanilla=0.7, max_abs_diff_numpy_vs_newton=1e-12,
               max_abs_diff_numpy_vs_bisection=1e-12)
    return ch1


def test_record_step_and_its_tables():
    ch1 = _ch1()
    report = Report(glue=False)
    perf.record_step(report, ch1, others_cores=0.25)
    assert set(report.values) == set(perf.STEP_KEYS) | {"ch1_others_cores"}
    step = perf.per_step_table(ch1)
    assert list(step.columns) == ["nnz = 10", "nnz = 200"] and len(step) == 12
    assert step.loc["Implicit (Halley) / vanilla, steps/s", "nnz = 200"] == 0.9
    large = perf.large_k_table(ch1)
    assert list(large.columns) == [*perf._KERNELS, "floor"]
    assert large["floor"].tolist() == [0.5, 1.0]
    del ch1["nnz10_solve_ns"]
    with pytest.raises(KeyError):
        perf.record_step(Report(glue=False), ch1, others_cores=0.0)


def _ar():
    return {"mnist_seconds_per_epoch": {"softmax": 2.0, "ove": 1.0},
            "mnist_floor_random_pass_s": 0.5, "mnist_floor_access_s": 1.9,
            "bibtex_seconds_per_epoch": {"softmax": 3.0, "ove": 3.0},
            "bibtex_floor_access_s": 2.0}


def test_record_ar_its_table_and_its_verdict():
    ar = _ar()
    report = Report(glue=False)
    perf.record_ar(report, ar, ["mnist", "bibtex"])
    v = report.values
    assert v["mnist_ar_over_ove_epoch"] == 2.0 and v["mnist_ar_epoch_over_pass"] == 4.0
    assert v["mnist_ar_at_floor"] is True and v["bibtex_ar_at_floor"] is False
    assert v["bibtex_ar_epoch_over_pass"] == "nan"  # no pass measured on Bibtex
    table = perf.ar_table(ar, ["mnist", "bibtex"]).data
    assert table.loc[("mnist", "ove"), "epoch / loads and stores"] == pytest.approx(1 / 1.9)
    assert len(table) == 4
    text = perf.ar_verdict(ar, ["mnist", "bibtex"]).data
    assert "mnist at it (1.05×), bibtex above it (1.50×)" in text
    assert "on bibtex is the local step" in text
    assert "No work is left" in perf.ar_verdict(ar, ["mnist"]).data


def _ex1():
    rows = [dict(dataset=name, threads="1", t_xclib=1.0, t_sklearn=r, ratio=r, it_xclib=10,
                 fev_xclib=12, it_sklearn=20, fev_sklearn=25.0, xclib_over_floor=30.0,
                 gap_xclib=g, gap_sklearn=1e-8, max_dp=1e-7, f_xclib=1.0, f_sklearn=1.0 + g,
                 pass_s=0.002)
            for name, r, g in (("mnist", 1.5, 1e-9), ("bibtex", 2.0, 2e-7))]
    return pd.DataFrame(rows).set_index("dataset")


def test_record_exact_and_its_table():
    report = Report(glue=False)
    perf.record_exact(report, _ex1())
    v = report.values
    assert v["bibtex_sklearn_over_xclib"] == 2.0 and v["mnist_pass_ms"] == 2.0
    assert v["bibtex_fev_sklearn"] == 25 and isinstance(v["bibtex_fev_sklearn"], int)
    assert v["bibtex_exact_f_rel_diff"] == pytest.approx(2e-7, rel=1e-6)
    table = perf.exact_table(_ex1()).data
    assert "sklearn / xclib" in table.columns and len(table.columns) == 11


def test_references_table_and_its_figure():
    refs = perf.references_table(_ch1(), _ar(), _ex1())
    assert len(refs) == 10
    assert refs.loc["vanilla SGD, steps/s at K = 10⁵ over K = 10²", "reference"] == 0.5
    assert refs.loc["A&R softmax epoch, MNIST: floor's time over ours",
                    "measured"] == pytest.approx(0.95)
    assert refs.loc["exact optimum: ours over scikit-learn's speed, Bibtex",
                    "measured"] == 2.0
    plt.close("all")
    perf.plot_references(refs)
    assert len(plt.gcf().axes[0].patches) == 10
    plt.close("all")


@pytest.mark.parametrize("others, steps", [
    (0.2, ["not reproduced", "reproduced"]),  # bisection at 0.6, Halley at 0.9 of vanilla
    (1.0, ["not testable", "not testable"])])  # no free core of two
def test_claims_test_the_step_speed_only_with_a_free_core(others, steps):
    ch1, ex1 = _ch1(), _ex1()
    report = Report(glue=False)
    perf.record_step(report, ch1, others_cores=others)
    perf.record_exact(report, ex1)
    perf.claims(report, ch1, ex1, others_cores=others, cores=2)
    statuses = [c["status"] for c in report.claims]
    assert statuses == ["reproduced", *steps, "reproduced", "reproduced"]
    assert all(c["holds"] is True for c in report.claims if c["status"] == "reproduced")


def test_the_exact_claim_fails_when_a_solver_stops_short_of_the_optimum():
    ch1, ex1 = _ch1(), _ex1()
    ex1.loc["mnist", "gap_sklearn"] = 3e-6
    report = Report(glue=False)
    perf.record_step(report, ch1, others_cores=0.0)
    perf.record_exact(report, ex1)
    perf.claims(report, ch1, ex1, others_cores=0.0, cores=2)
    assert report.claims[-1]["holds"] is False
