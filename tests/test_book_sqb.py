"""The SQB chapter's fits, rankings, tables and claims (xclib.book.sqb), on tiny inputs."""
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest
import scipy.sparse as sp

from xclib.book import sqb as page
from xclib.book.report import Report
from xclib.sqb import LogisticLBFGS

matplotlib.use("Agg")


def _h(passes, loss, error=0.1, **extra):
    return {"passes": list(passes), "train_loss": list(loss),
            "eval_loss": list(loss), "eval_error": [error] * len(passes), **extra}


def test_split_90_10_subsamples_and_splits_reproducibly():
    X, y = sp.csr_matrix(np.arange(200.0).reshape(100, 2)), np.arange(100)
    a = page.split_90_10(X, y, 0.5, seed=3)
    b = page.split_90_10(X, y, 0.5, seed=3)
    assert len(a["ytr"]) == 45 and len(a["yte"]) == 5
    assert np.array_equal(a["ytr"], b["ytr"]) and not set(a["ytr"]) & set(a["yte"])
    whole = page.split_90_10(X, y, None, seed=3)
    assert len(whole["ytr"]) + len(whole["yte"]) == 100
    assert np.array_equal(whole["Xtr"].toarray()[:, 0], 2.0 * whole["ytr"])


class _Fake:
    """An estimator that records its parameters and reports a pass per round."""

    def __init__(self):
        self.params = {}

    def set_params(self, **params):
        self.params.update(params)
        return self

    def fit(self, X, y, eval_set=None):
        self.eval_set = eval_set
        self.history_ = {"passes": [0.0, 1.5, 3.0, 4.5], "train_loss": [4, 3, 2, 1]}
        return self


def test_fit_sets_the_protocol_and_trims_to_the_passes():
    d = dict(Xtr=1, ytr=2, Xte=3, yte=4, alpha=0.5)
    est = page.fit(_Fake(), d, 3, seed=7)
    assert est.params == dict(n_epochs=3, random_state=7, alpha=0.5)
    assert est.eval_set == (3, 4) and est.history_["train_loss"] == [4, 3, 2]
    assert len(page.fit(_Fake(), d, 3, trim=False).history_["passes"]) == 4
    lbfgs = LogisticLBFGS()
    lbfgs.fit = _Fake.fit.__get__(lbfgs)
    page.fit(lbfgs, d, 5)
    assert lbfgs.get_params()["max_iter"] == 5 and lbfgs.get_params()["tol"] == 0.0


def test_tuning_table_picks_the_lowest_final_excess_per_method():
    final = {("a", "SGD", 0.1): 1.0, ("a", "SGD", 1.0): np.inf, ("a", "SGD", 0.01): 0.5,
             ("a", "ASGD", 0.1): 0.2, ("a", "ASGD", 1.0): 0.3}
    tuned, table = page.tuning_table(final, {"a": {"SGD": 1.0, "ASGD": 0.1}})
    assert tuned == {("a", "SGD"): 0.01, ("a", "ASGD"): 0.1}
    assert list(table.columns[:4]) == ["data", "method", "tuned_step", "paper_step"]
    assert table.loc[0, "excess@0.01"] == 0.5 and np.isnan(table.loc[1, "excess@0.01"])


def test_passes_to_and_ahead():
    h = _h([1, 2, 3], [1.5, 1.0005, 1.0])
    assert page.passes_to(h, 1.0, 1e-3) == 2.0
    assert page.passes_to(h, 1.0, 1e-5) == 3.0 and page.passes_to(h, 2.0, 1e-3) == 1.0
    assert page.passes_to(h, 0.5, 1e-3) == np.inf
    assert page.ahead(2, 0.1, np.inf, 0.0) and not page.ahead(np.inf, 0.0, 2, 0.1)
    assert page.ahead(np.inf, 0.1, np.inf, 0.2) and not page.ahead(np.inf, 0.3, np.inf, 0.2)


def _data(err=0.2, n_test=100):
    return dict(f_star=1.0, err_star=err, yte=np.zeros(n_test), Xte=np.zeros((n_test, 2)),
                alpha=0.1)


def test_ranking_against_the_baselines():
    d = _data()
    seeds = [_h([1, 2], [1.5, 1.0001], error=0.21), _h([1, 2], [1.5, 1.1], error=0.25),
             _h([1, 2], [1.5, 1.2], error=0.3)]
    base = {"SGD": _h([1, 2], [1.5, 1.01]), "ASGD": _h([1, 2], [1.5, 1.01]),
            "SAG": _h([1, 2, 3], [1.5, 1.01, 1.0]), "L-BFGS": _h([1, 2], [2, 1.0])}
    r = page.ranking(d, seeds, base, 1e-3)
    assert r["passes to ε (best seed)"] == 2.0
    assert r["final excess (median)"] == pytest.approx(0.1)
    assert r["ahead of SGD and ASGD"] and r["within 2× SAG/L-BFGS passes"]
    # median test error 0.25; two standard errors of 0.2 on 100 rows: 0.08
    assert r["test error close to θ*'s"]
    assert not page.ranking(_data(n_test=100_000), seeds, base, 1e-3)[
        "test error close to θ*'s"]
    base["L-BFGS"] = _h([0.5], [1.0])
    assert not page.ranking(d, seeds, base, 1e-3)["within 2× SAG/L-BFGS passes"]


def test_record_fig1_and_the_tables():
    data = {"a9a": _data()}
    readings = {"rows": "SQB (γ rows)", "fraction": "SQB (γ·T rows)"}
    sqb = [_h([1, 2], [1.5, 1.2], diverged=False), _h([1, 2], [1.5, 1.1], diverged=True),
           _h([1, 2], [1.5, 1.4], diverged=False)]
    runs = {("a9a", label): dict(_h([1, 2], [1.5, 1.0]), seconds=1.0, diverged=False)
            for label in page.KEYS}
    report = Report(glue=False)
    summary = page.record_fig1(report, data, runs, {("a9a", u): sqb for u in readings},
                               readings, page.STANDS_IN, 1e-3)
    v = report.values
    assert v["a9a_sqb_final_excess_median"] == pytest.approx(0.2)
    assert v["a9a_sqb_final_excess_spread"] == pytest.approx(4.0)
    assert v["a9a_sqb_best_seed_passes_to_eps"] == "inf"
    assert v["a9a_sqb_runs_diverged"] == 2 and v["a9a_sag_passes_to_eps"] == 2.0
    assert len(summary) == len(page.KEYS) and set(summary.paper_dataset) == {"adult"}
    fig1 = {("a9a", u): page.ranking(data["a9a"], sqb, {m: runs["a9a", m] for m in
                                     ("SGD", "ASGD", "SAG", "L-BFGS")}, 1e-3)
            for u in readings}
    page.ranking_table(report, data, fig1, readings)
    assert report.values["fig1_datasets_ranked"] == 0
    page.settings_table(report, {("rows", 200, 1.0): fig1["a9a", "rows"]})
    assert report.values["a9a_settings_tried"] == 1
    assert report.values["a9a_settings_recovering_figure1"] == 0


def _values():
    v = dict(bound_worst_violation=0.0, lemma1_relative_error=0.01,
             a9a_exact_bound_max_increase=0.0, a9a_exact_bound_excess_10=1e-3,
             a9a_exact_bound_excess_50=1e-8, a9a_exact_bound_excess_150=0.0,
             log2cosh_max_second_difference=-1e-9, log2cosh_max_above_tangent=0.0,
             a9a_sklearn_sag_gap=1e-9, a9a_sag_passes_to_eps=2.0, a9a_f_star=0.3,
             a9a_one_step_excess_S5=10.0, a9a_one_step_excess_S50=1.0,
             a9a_one_step_excess_S200=0.01, a9a_one_step_excess_full=0.0,
             lsqr_rel_error_l5=0.9, lsqr_rel_error_l6=1e-3, lsqr_rel_error_l7=1e-9,
             a9a_l10_l20_iterate_rel_diff=0.0, a9a_sqb_same_final_excess_seeds=[0.1],
             a9a_sqb_independent_final_excess_seeds=[0.2], a9a_sqb_both_final_excess=0.0,
             a9a_sqb_same_alpha_test_error=0.15, a9a_sklearn_same_alpha_test_error=0.151,
             mnist_msqb_lr1_final_excess=0.1, **{"mnist_msqb_lr0.1_final_excess": 0.2})
    for k in ("sqb", "sqbfrac"):
        v.update({f"a9a_{k}_best_seed_passes_to_eps": "inf",
                  f"a9a_{k}_final_excess_median": 0.1, f"a9a_{k}_test_error_median": 0.2})
    for m in ("sgd", "asgd", "sag", "lbfgs"):
        v.update({f"a9a_{m}_passes_to_eps": 3.0, f"a9a_{m}_final_excess": 0.0})
    v["a9a_opt_test_error"] = 0.2
    return v


def test_claims_follow_the_runs_and_the_recorded_values():
    report = Report(glue=False)
    for k, x in _values().items():
        report.record(k, x)
    data = {"a9a": _data()}
    ranked = dict(zip(["ahead of SGD and ASGD", "within 2× SAG/L-BFGS passes",
                       "test error close to θ*'s"], [False, False, True]))
    fig1 = {("a9a", u): ranked for u in ("rows", "fraction")}
    runs = {("a9a", "SAG"): _h([1, 2], [1.5, 1.0])}
    setting = {(u, 200, r, s): _h([1], [1.001]) for u in ("rows", "fraction")
               for r in (1.0, 0.1) for s in (0, 1, 2)}
    fast = {"both batches at the full data, CG l = 50": _h([1, 2, 3], [2, 1.5, 1.0])}
    msqb = {1.0: np.array([1.0, 0.1]), 0.1: np.array([1.0, 0.2])}
    paper, ours = page.add_claims(report, data, fig1, runs, setting, fast, msqb,
                                  (0, 1, 2), {"rows": "", "fraction": ""}, 1e-3)
    status = {c["claim"]: c["status"] for c in report.claims}
    assert len(report.claims) == len(paper.claims) + len(ours.claims) == 6 + 10
    assert sum(s == "not reproduced" for s in status.values()) == 2  # Figure 1 ranking
    assert report.values["a9a_sqb_l5_lr1_final_excess_seeds"] == pytest.approx([1e-3] * 3)
    paper.check()
    ours.check()
    fast["both batches at the full data, CG l = 50"]["train_loss"][2] = 1.6  # cost rose
    _, ours = page.add_claims(report, data, fig1, runs, setting, fast, msqb, (0, 1, 2),
                              {"rows": "", "fraction": ""}, 1e-3)
    rose = [c for c in ours.claims if "never increases" in c["claim"]][0]
    assert rose["status"] == "not reproduced" and rose["why"] == "the cost rose at some step"


def test_protocol_card_tables_and_figures():
    d = dict(Xtr=np.zeros((90, 4)), f_star=1.0)
    data = {n: d for n in ("a9a", "covtype", "20news", "mnist_eo")}
    card = page.protocol_card(data, {"covtype": 0.05}, 50, [0.1], 3).data
    assert len(card) == 8 and card.loc[3, "N (train)"] == "90 (5% subsample)"
    assert card.loc[5, "dataset"] == "20news (for rcv1)"
    buys = page.what_it_buys([("SAG", _h([1, 2, 4], [1.5, 1.0005, 1.0]), 8.0),
                              {"method": "exact", "passes to ε": np.nan}], d, 1e-3).data
    assert buys.loc[0, "passes to ε"] == 2.0 and buys.loc[0, "seconds to ε"] == 4.0
    ests = {(r, k): SimpleNamespace(history_=_h([1, 2], [1.5, 1.0 + k]), diverged_=k > 1)
            for r in (1.0, 0.1) for k in (1, 2)}
    fig, table = page.plot_l_sweep(ests, d)
    assert len(fig.axes) == 2 and table.final_excess.tolist() == [1.0, 2.0, 1.0, 2.0]
    fig = page.plot_curves({"a": ([1, 2], [[1, 2], [3, 4]]), "b": ([1, 2], [1, 2], "k--")},
                           "y", eps=1e-3)
    assert len(fig.axes[0].lines) == 3
