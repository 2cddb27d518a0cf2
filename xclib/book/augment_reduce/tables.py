"""Chapter 2's tables after the fits: Table 3 (held-out scores, and P@k on the full label
sets), Table 2 (seconds per epoch), the learning-rate sweep's summary, the comparison with the
exact solver, and the reproduction check's claims.

As in :mod:`xclib.book.augment_reduce`, a function that computes recorded values returns them
as a ``{key: value}`` dict; ``v`` is always the dict of the values recorded so far.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["KEYS", "PAPER2", "PAPER3", "held_out_scores", "test_scores", "table3",
           "show_table3", "label_table", "timing_values", "timing_tables", "sweep_values",
           "plot_sweep_by_time", "buys_table", "claims"]

#: the key of each method in the recorded values
KEYS = {"OVE": "OVE", "A&R softmax": "ar_softmax", "A&R probit": "ar_probit",
        "A&R logistic": "ar_logistic"}
_SHORT = {"A&R softmax": "ar", "OVE": "ove", "A&R probit": "probit",
          "A&R logistic": "logistic", "OVE again": "ove2"}
#: Table 2 of the paper: seconds per epoch
PAPER2 = pd.DataFrame([[0.336, 0.337, 0.431, 0.511], [0.181, 0.188, 0.244, 0.246]],
                      index=["mnist", "bibtex"],
                      columns=["OVE", "A&R softmax", "A&R probit", "A&R logistic"])
_nan = np.nan
#: Table 3 of the paper: (test log-likelihood, accuracy)
PAPER3 = pd.DataFrame({
    "exact": [(-0.261, 0.927), (-3.188, 0.361), (_nan, _nan), (_nan, _nan)],
    "OVE": [(-0.276, 0.919), (-3.300, 0.352), (-5.667, 0.179), (-4.241, 0.247)],
    "A&R softmax": [(-0.271, 0.924), (-3.036, 0.361), (-5.171, 0.201), (-4.593, 0.207)],
    "A&R probit": [(-0.302, 0.918), (-4.184, 0.346), (-7.350, 0.178), (-4.193, 0.263)],
    "A&R logistic": [(-0.287, 0.917), (-3.151, 0.353), (-5.395, 0.184), (-4.299, 0.226)]},
    index=["mnist", "bibtex", "omniglot (paper: full)", "delicious (paper: EURLex-4K)"])


def _exact_name(a):
    return "exact, alpha=" + ("0" if a == 0 else "10/N")


def _exact_key(name, a):
    return f"{name}_exact" + ("0" if a == 0 else "ridge")


def held_out_scores(est, Xe, ye, Xt, yt):
    """Mean test log-likelihood on ``(Xe, ye)`` (eq. (1), or eq. (5) by importance sampling)
    and accuracy on ``(Xt, yt)``."""
    return est.log_likelihood(Xe, ye), est.score(Xt, yt)


def _eval_rows(test, model, is_rows):
    """The rows of the log-likelihood: importance sampling (probit, logistic) scores the
    first ``is_rows`` (None: all)."""
    Xt, yt = test
    if model in ("ove", "softmax") or is_rows is None:
        return Xt, yt
    return Xt[:is_rows], yt[:is_rows]


def test_scores(fits, data, models, is_rows):
    """:func:`held_out_scores` of every fit ``{(set, label, seed): est}``, side by side, one
    per core; the importance-sampling ones (rows × K × samples) first, so that no core waits
    alone at the end. ``models`` maps a label to its model."""
    from xclib.book import one_per_core

    def rows(key):
        return _eval_rows(data[key[0]][2:], models[key[1]], is_rows)

    keys = sorted(fits, key=lambda key: -(models[key[1]] in ("probit", "logistic"))
                  * rows(key)[1].size * fits[key].classes_.size)
    return dict(zip(keys, one_per_core(held_out_scores, [
        (fits[key], *rows(key), *data[key[0]][2:]) for key in keys])))


def table3(fits, scores, exact, labels, seeds, v):
    """Table 3 of this page: each method's mean test log-likelihood and accuracy over its
    seeds (and their spread), the exact fits' beside them. ``labels`` maps a set to its
    methods, ``seeds`` to its seeds. Returns ``(rows, values)``."""
    rows, values = [], {}
    for name in labels:
        for label in labels[name]:
            lls = [scores[key][0] for key in fits if key[:2] == (name, label)]
            accs = [scores[key][1] for key in fits if key[:2] == (name, label)]
            key = f"{name}_{KEYS[label]}"
            values[f"{key}_test_ll"] = float(np.mean(lls))
            values[f"{key}_test_acc"] = float(np.mean(accs))
            if len(lls) > 1:
                values[f"{key}_test_ll_seeds"] = lls
                values[f"{key}_test_acc_seeds"] = accs
                values[f"{key}_test_ll_spread"] = float(np.ptp(lls))
                values[f"{key}_test_acc_spread"] = float(np.ptp(accs))
            rows.append(dict(dataset=name, method=label, log_lik=np.mean(lls),
                             acc=np.mean(accs), seeds=len(lls),
                             spread=np.ptp(lls) if len(lls) > 1 else np.nan))
        for (n, a), ex in exact.items():
            if n == name:
                rows.append(dict(dataset=name, method=_exact_name(a),
                                 log_lik=v[f"{_exact_key(name, a)}_test_ll"],
                                 acc=v[f"{_exact_key(name, a)}_test_acc"], seeds=1,
                                 spread=np.nan))
    for name in labels:
        values[f"{name}_seeds"] = len(seeds[name])
        margin = values[f"{name}_ar_softmax_test_ll"] - values[f"{name}_OVE_test_ll"]
        values[f"{name}_ll_margin"] = margin
        if f"{name}_OVE_test_ll_spread" in values:
            values[f"{name}_margin_over_spread"] = margin / max(
                values[f"{name}_ar_softmax_test_ll_spread"],
                values[f"{name}_OVE_test_ll_spread"])
    return pd.DataFrame(rows), values


def show_table3(ours3, exact, v, stand_ins):
    """Display Table 3 of this page (log-likelihood with the seeds' spread, accuracy), an
    unregularised exact fit without a maximum flagged, and the paper's Table 3."""
    from IPython.display import Markdown, display

    sets = list(dict.fromkeys(ours3.dataset))
    show = ours3.pivot(index="dataset", columns="method", values="log_lik").reindex(sets)
    acc3 = ours3.pivot(index="dataset", columns="method", values="acc").reindex(sets)
    spr = ours3.pivot(index="dataset", columns="method", values="spread").reindex(sets)
    display(Markdown("**Test log-likelihood, this page** (spread over seeds in brackets)"))
    ll4, spr4, acc4 = (t.map(lambda x: f"{x:.{d}f}" if x == x else "—")   # MNIST's: 1e-3
                       for t, d in ((show, 4), (spr, 4), (acc3, 3)))
    ll4 = ll4.where(spr.isna(), ll4 + " (" + spr4 + ")")
    # an unregularised exact fit that nearly interpolates its training labels (separable
    # data: no maximum of the likelihood) is flagged
    unbounded = [(n, a) for (n, a), ex in exact.items()
                 if a == 0 and v[f"{n}_exact0_train_ll"] > -0.01]
    for n, a in unbounded:
        for t in (ll4, acc4):
            t.loc[n, "exact, alpha=0"] += " †"
    display(ll4)
    display(Markdown("**Test accuracy, this page**"))
    display(acc4)
    if unbounded:
        display(Markdown(
            "† maximum likelihood without a maximum: " + "; ".join(
                f"on {n} the training log-likelihood reached "
                f"{v[f'{n}_exact0_train_ll']:.4f} after {exact[n, a].n_iter_} L-BFGS "
                "iterations: the training set is separable, and the likelihood rises "
                "toward 0 as the weights grow" for n, a in unbounded) + ". The test values "
            "are where the solver happened to stop on that path, not a property of the "
            "model; the light ridge's row is the exact reference."))
    display(Markdown("**The paper's Table 3** (log-lik, accuracy)"))
    display(PAPER3.map(lambda c: "—" if c[0] != c[0] else f"{c[0]:.3f}, {c[1]:.3f}"))
    if stand_ins:
        lls = {k: " and ".join(f"{v[f'{n}_{k}_test_ll']:.3f} ({n})" for n in stand_ins)
               for k in ("ar_softmax", "OVE")}
        display(Markdown(f"On the other sets softmax A&R's test log-likelihood is "
                         f"{lls['ar_softmax']}, OVE's {lls['OVE']}."))


ML_KEYS = ("P@1", "P@3", "P@5", "nDCG@3", "nDCG@5")


def _label_metrics(est, name, X_test, labels):
    """P@k and nDCG@k of the top 5 codes against the test rows' label sets."""
    from xclib import datasets
    from xclib.metrics import ranking_metrics

    top = datasets.label_columns(name, est.predict_topk(X_test, 5))
    got = ranking_metrics(labels, top, ks=(1, 3, 5))
    return [got[key] for key in ML_KEYS]


def label_table(fits, exact, data, labels, methods, v):
    """P@k and nDCG@k on the full label sets ``labels`` (``{set: label matrix}``) of every
    method (the mean over its seeds) and exact fit. Returns ``(table, values)``."""
    rows, values = [], {}
    for name in [n for n in data if n in labels]:
        values[f"{name}_test_labels_per_row"] = float(labels[name].sum(axis=1).mean())
        Xt = data[name][2]
        for label in methods:   # the mean over the seeds that ran
            per_seed = [_label_metrics(est, name, Xt, labels[name])
                        for key, est in fits.items() if key[:2] == (name, label)]
            rows.append(dict(dataset=name, method=label,
                             **dict(zip(ML_KEYS, np.mean(per_seed, axis=0)))))
        for (n, a), ex in exact.items():
            if n == name:
                rows.append(dict(dataset=name, method=_exact_name(a),
                                 **dict(zip(ML_KEYS, _label_metrics(ex, name, Xt,
                                                                    labels[name])))))
    ml3 = pd.DataFrame(rows).set_index(["dataset", "method"])
    for (name, method), r in ml3.iterrows():
        key = KEYS.get(method) or ("exact0" if method.endswith("=0") else "exactridge")
        for col in ("P@1", "P@3", "P@5", "nDCG@5"):
            values[f"{name}_{key}_test_{col.lower().replace('@', '')}"] = float(r[col])
    if "bibtex" in labels:
        values["bibtex_p1_minus_acc_min"] = min(
            values[f"bibtex_{k}_test_p1"] - v[f"bibtex_{k}_test_acc"] for k in KEYS.values())
    return ml3, values


def timing_values(name, secs, fits, seed):
    """Table 2's values of one set from ``secs`` (``{label: [seconds of the timed epoch,
    one per round]}``): each method's median, and the median and range over the rounds of
    its ratio to OVE's epoch of the same round; and the ratio of the whole Table 3 fits'
    training seconds. Returns ``(medians, values)``."""
    medians, values = {}, {}
    for label, key in _SHORT.items():
        medians[label] = float(np.median(secs[label]))
        values[f"{name}_sec_per_epoch_{key}"] = medians[label]
        if key != "ove":   # the median over rounds of the ratio within each round
            r = np.asarray(secs[label]) / np.asarray(secs["OVE"])
            values[f"{name}_time_ratio_{key}_ove"] = float(np.median(r))
            values[f"{name}_time_ratio_{key}_ove_lo"] = float(r.min())
            values[f"{name}_time_ratio_{key}_ove_hi"] = float(r.max())
    for label in ("A&R softmax", "A&R probit", "A&R logistic"):
        values[f"{name}_fit_ratio_{_SHORT[label]}_ove"] = (
            fits[name, label, seed].time_trace_[-1] / fits[name, "OVE", seed].time_trace_[-1])
    return medians, values


def timing_tables(medians, v):
    """Table 2: ``(seconds, ratios)``, this page's median seconds per epoch beside the
    paper's, and each method's per-round ratio to OVE (median, lowest–highest)."""
    timing_df = pd.DataFrame(medians).T.sort_index()[[*PAPER2.columns, "OVE again"]]
    ratio_df = pd.DataFrame({label: [
        "{:.3f} ({:.3f}–{:.3f})".format(*(v[f"{n}_time_ratio_{k}_ove{e}"]
                                          for e in ("", "_lo", "_hi")))
        for n in timing_df.index] for label, k in _SHORT.items() if k != "ove"},
        index=timing_df.index)
    seconds = pd.concat({"this page (s)": timing_df, "paper (s)": PAPER2}, axis=1).round(3)
    return seconds, ratio_df


def sweep_values(final, methods, rates):
    """The learning-rate sweep's summary: each method's final training log-loss at the
    paper's rate 0.02 and at the largest rate, and its best rate; ``final`` maps
    ``(method, rate)`` to the final log-loss."""
    values = {}
    for m in methods:
        key = m.replace("A&R softmax |S|=", "ar_s").replace("OVE |S|=", "ove_s")
        values[f"lr_{key}_loss_at_0.02"] = float(final[m, 0.02])
        values[f"lr_{key}_loss_last_rate"] = float(final[m, rates[-1]])
        values[f"lr_{key}_best_rate"] = float(min(rates, key=lambda r: final[m, r]))
    return values


def plot_sweep_by_time(curves, rate, ref_loss, alpha):
    """Training log-loss against seconds of the three sweep methods at ``rate``; ``curves``
    maps ``(method, rate)`` to ``(seconds, losses)``."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.4))
    for m, style in [("A&R softmax |S|=5", "C0--"), ("A&R softmax |S|=20", "C0-"),
                     ("OVE |S|=20", "C1-")]:
        secs, loss = curves[m, rate]
        ax.semilogy(secs, loss, style, marker=".", label=m)
    ax.axhline(ref_loss, color="k", ls="--", lw=1,
               label=f"SoftmaxRegression(alpha={alpha:.3g}) optimum")
    ax.set_xlabel("training seconds")
    ax.set_ylabel("training log-loss")
    ax.set_title(f"Bibtex, learning_rate = {rate:g}: |S| per second")
    ax.legend(fontsize=8)
    plt.tight_layout()
    plt.show()


def buys_table(fits, exact, data, v, seed):
    """Softmax A&R and OVE (seed ``seed``) against the exact fits on MNIST, Bibtex and ALOI:
    fit seconds, seconds to a training log-loss within 10 % of the better of A&R's and OVE's
    final values, final training log-loss, test accuracy. Returns ``(table, values, note)``:
    ``note`` says, in words, who reached the target."""
    rows, values = [], {}
    for name in [n for n in ("mnist", "bibtex", "aloi") if n in data]:
        X, y, Xt, yt = data[name]
        finals = {lab: fits[name, lab, seed].history_["train_loss"][-1]
                  for lab in ("OVE", "A&R softmax")}
        target = 1.1 * min(finals.values())
        values[f"{name}_buy_target"] = target
        for (n, a), ex in exact.items():
            if n == name:
                loss = -v[f"{_exact_key(name, a)}_train_ll"]
                rows.append(dict(dataset=name, method=f"SoftmaxRegression(alpha={a:.2g})",
                                 seconds=ex.fit_time_,
                                 to_target=ex.fit_time_ if loss <= target else np.nan,
                                 train_loss=loss, test_acc=v[f"{_exact_key(name, a)}_test_acc"]))
        for label in ("OVE", "A&R softmax"):
            est = fits[name, label, seed]
            h = est.history_
            hit = [tm for tm, loss in zip(h["time"], h["train_loss"]) if loss <= target]
            rows.append(dict(dataset=name, method=label, seconds=est.time_trace_[-1],
                             to_target=hit[0] if hit else np.nan,
                             train_loss=h["train_loss"][-1], test_acc=est.score(Xt, yt)))
    notes = []
    for r in rows:
        if r["method"] in ("OVE", "A&R softmax"):
            k = "ar" if r["method"] == "A&R softmax" else "ove"
            n = r["dataset"]
            values[f"{n}_{k}_seconds_to_target"] = r["to_target"]
            if r["to_target"] != r["to_target"]:   # never reached
                other = "OVE" if k == "ar" else "ar_softmax"
                mine = v[f"{n}_{KEYS[r['method']]}_test_ll"]
                worse = v[f"{n}_{other}_test_ll"] < mine   # the winner's test log-lik
                notes.append(
                    f"on {n} {r['method']} never reaches the target: its final training "
                    f"log-loss is {r['train_loss']:.3f}, the target "
                    f"{values[n + '_buy_target']:.3f}; " + (
                        "the method that set the target has the lower test log-likelihood "
                        "(Table 3): without a ridge, fitting the training rows further is "
                        "overfitting them" if worse else "it is also behind on the test "
                        "log-likelihood (Table 3)"))
    buys = pd.DataFrame(rows)
    buys["to_target"] = buys["to_target"].map(
        lambda s: f"{s:.1f}" if s == s else "not reached")
    table = buys.rename(columns={
        "seconds": "fit seconds", "to_target": "seconds to target",
        "train_loss": "final train log-loss", "test_acc": "test accuracy"}).round(3)
    note = ("The target is 1.1 × the lower of the two final training log-losses, so the "
            "method that ends lower always reaches it; "
            + ("; ".join(notes) if notes else "here both methods reach it") + ".")
    return table, values, note


def _claim(text, holds, ours, paper, why):
    """A claim whose status follows from its measurement (``holds``)."""
    holds = bool(holds)
    return dict(text=text, status="reproduced" if holds else "not reproduced", holds=holds,
                ours=ours, paper=paper, why=None if holds else why)


def _toy_claims(v, toy_tol):
    def stop(key):   # where the toy's fit stopped, for the why of its claims
        its = v[f"toy_{key}_iterations"]
        return (f"{its:,} iterations" + (" (the convergence test passed)"
                                         if its < v["toy_iterations"] else ""))

    return [
        _claim("Toy (K≈10^4, N=3·10^5): the A&R bound is tighter than OVE's by orders of "
               "magnitude", v["toy_ar_bound"] / v["toy_ove_bound"] < 0.01,
               ["toy_ar_bound", "toy_ove_bound", "toy_ar_iterations", "toy_ove_iterations"],
               "-2.62e6 vs -1.40e9 after 5e5 iterations",
               f"the bounds of the toy's table after {stop('ar')} (A&R)"),
        _claim("Toy: the probabilities estimated by A&R and OVE are similarly accurate: "
               "against the true probabilities, errors within 10 % of each other",
               max(v["toy_ar_mae_truth"], v["toy_ove_mae_truth"])
               < 1.1 * min(v["toy_ar_mae_truth"], v["toy_ove_mae_truth"]),
               ["toy_ar_mae_truth", "toy_ove_mae_truth", "toy_mle_mae_truth",
                "toy_uniform_mae_truth"],
               "3.00e-6 vs 3.65e-6 (measured against the frequencies, see the text)",
               f"the toy's table, A&R after {stop('ar')}, OVE after {stop('ove')}"),
        _claim("Toy: against the frequencies (the MLE), A&R's and OVE's errors are within a "
               "factor 2 of each other",
               max(v["toy_ar_mae_freq"], v["toy_ove_mae_freq"])
               < 2 * min(v["toy_ar_mae_freq"], v["toy_ove_mae_freq"]),
               ["toy_ar_mae_freq", "toy_ove_mae_freq", "toy_uniform_mae_freq",
                "toy_ar_iterations", "toy_ove_iterations"],
               "3.00e-6 vs 3.65e-6 after 5e5 iterations",
               f"the toy's right panel: A&R stopped after {stop('ar')}, OVE after "
               f"{stop('ove')}, with their KL to the frequencies still falling"
               + (" (the book scale's convergence test; the paper's 5·10⁵ iterations run "
                  "at the full scale)" if toy_tol is not None else ""))]


def _table2_claims(v):
    return [
        _claim("Table 2: softmax A&R is almost as fast as OVE per epoch (median per-round "
               "ratio below 1.5 on MNIST and Bibtex)",
               max(v["mnist_time_ratio_ar_ove"], v["bibtex_time_ratio_ar_ove"]) < 1.5,
               [f"{n}_time_ratio_{k}" for n in ("mnist", "bibtex")
                for k in ("ar_ove", "ar_ove_lo", "ar_ove_hi", "ove2_ove")],
               "1.003 (MNIST), 1.04 (Bibtex)", "Table 2's per-round ratios"),
        _claim("Table 2: probit and logistic A&R are slower than OVE but competitive "
               "(median per-round ratio below 2 on MNIST and Bibtex)",
               max(v[f"{n}_time_ratio_{m}_ove"] for n in ("mnist", "bibtex")
                   for m in ("probit", "logistic")) < 2.0,
               [f"{n}_time_ratio_{m}_ove" for n in ("mnist", "bibtex")
                for m in ("probit", "logistic")],
               "1.28, 1.52 (MNIST); 1.35, 1.36 (Bibtex)", "Table 2's per-round ratios")]


def _seeds(v, key):
    return v.get(f"{key}_seeds", [v[key]])


def _seeds_above(v, n, hi, lo):   # every seed's value of hi above every seed's of lo
    return min(_seeds(v, f"{n}_{hi}")) > max(_seeds(v, f"{n}_{lo}"))


def _figure2_claims(v, sets, stand_ins):
    seeds_m, seeds_b = v["mnist_seeds"], v["bibtex_seeds"]
    ridge_ok = v["mnist_exactridge_converged"]
    return [
        _claim(f"Figure 2: the A&R bound is tighter than OVE's on MNIST (Table 1's "
               f"iterations, each of {seeds_m} seeds above each of OVE's)",
               _seeds_above(v, "mnist", "elbo_ar", "elbo_ove"),
               ["mnist_elbo_ar_seeds", "mnist_elbo_ove_seeds"],
               "tighter on all but Bibtex (figure)", "Figure 2's MNIST panel"),
        _claim("Figure 2: the A&R bound is tighter than OVE's on the other sets (here "
               + ", ".join(stand_ins) + ", K up to 1,000)",
               all(_seeds_above(v, n, "elbo_ar", "elbo_ove") for n in stand_ins),
               [f"{n}_elbo_{k}" for n in stand_ins for k in ("ar", "ove")]
               + [f"{n}_iterations" for n in stand_ins],
               "tighter on all but Bibtex (figure)",
               "Figure 2's panels and the values under it"),
        _claim(f"Figure 2: on Bibtex the A&R bound is close to OVE's (within 10 % of OVE's "
               f"value, each of {seeds_b} seeds)", max(v["bibtex_elbo_rel_diff_seeds"]) < 0.1,
               ["bibtex_elbo_ar_seeds", "bibtex_elbo_ove_seeds",
                "bibtex_elbo_rel_diff_seeds"], "close (figure)",
               "OVE's bound ends above A&R's on every seed, by more than 10 % of its value "
               "(the values under Figure 2)" if min(v["bibtex_ove_minus_ar_seeds"]) > 0 else
               "the seeds' bounds under Figure 2 differ by more than 10 %"),
        _claim(f"Figure 2: on MNIST the A&R ELBO nearly achieves the exact softmax's "
               f"log-likelihood (within 0.05 nats per datapoint of the converged "
               f"SoftmaxRegression(alpha={v['mnist_alpha_ref']:.2g}), each of {seeds_m} "
               "seeds)", ridge_ok and max(v["mnist_total_gap_ar_seeds"]) < 0.05,
               ["mnist_total_gap_ar_seeds", "mnist_bound_gap_ar_seeds",
                "mnist_opt_gap_ar_seeds", "mnist_exactridge_train_ll",
                "mnist_exactridge_converged"],
               "nearly achieves (figure)",
               "the reference fit did not pass its gradient test" if not ridge_ok else
               "the gaps under Figure 2: the bound gap is small, the optimisation gap is not"),
        _claim("Figure 2: on Bibtex the A&R ELBO nearly achieves the exact maximum "
               "log-likelihood (within 0.05 nats per datapoint of "
               "SoftmaxRegression(alpha=0))", v["bibtex_elbo_gap_exact"] < 0.05,
               ["bibtex_elbo_ar", "bibtex_exact0_train_ll", "bibtex_elbo_gap_exact"],
               "nearly achieves (figure)",
               "the unregularised maximum likelihood does not exist on Bibtex (separable "
               "training set): SoftmaxRegression(alpha=0) climbs toward 0, see the exact "
               "table of Section 4.2; the paper's line is an exact fit stopped early"),
        _claim("The A&R ELBO (8) is a bound: at the fitted weights and ζ_n it is below the "
               "exact training log-likelihood (every set, every seed)",
               all(min(v[f"{n}_bound_gap_ar_seeds"]) >= 0 for n in sets),
               [f"{n}_bound_gap_ar_seeds" for n in sets], "a bound (eq. 8)",
               "a negative gap under Figure 2")]


#: Table 3 of the paper, as its claims quote it: (log-likelihoods, accuracies)
_TABLE3 = {"mnist": ("-0.271 vs -0.276", "0.924 vs 0.919"),
           "bibtex": ("-3.036 vs -3.300", "0.361 vs 0.352"),
           "aloi": ("A&R above OVE on 4 of the paper's 5 sets (not on ALOI)",) * 2}


def _table3_claims(v, sets):
    out = []
    for n in [n for n in _TABLE3 if n in sets]:
        paper_ll, paper_acc = _TABLE3[n]
        # with seeds, every seed of softmax A&R must beat every seed of OVE: a margin
        # larger than the spread of either; with one seed, the one comparison
        runs = v[f"{n}_seeds"]
        how = (f"; each of {runs} seeds above each of OVE's" if runs > 1 else "; one seed")
        spreads = [f"{n}_{m}_test_ll_spread" for m in ("ar_softmax", "OVE")] * (runs > 1)
        its = ("Table 1's iterations" if n != "aloi"
               else f"{v['aloi_iterations']:,} iterations")
        out.append(_claim(
            f"Table 3 ({n}, {its}{how}): softmax A&R's test log-likelihood is higher "
            "than OVE's", _seeds_above(v, n, "ar_softmax_test_ll", "OVE_test_ll"),
            [f"{n}_ar_softmax_test_ll", f"{n}_OVE_test_ll"] + spreads, paper_ll,
            f"Table 3's log-likelihoods after {its}" + (
                " (the book scale; Omniglot's 45,000 iterations run at the full scale)"
                if n == "aloi" and v["aloi_iterations"] < 45000 else "")))
        out.append(_claim(
            f"Table 3 ({n}, {its}{how}): softmax A&R's test accuracy is at least OVE's",
            min(_seeds(v, f"{n}_ar_softmax_test_acc"))
            >= max(_seeds(v, f"{n}_OVE_test_acc")),
            [f"{n}_ar_softmax_test_acc", f"{n}_OVE_test_acc"], paper_acc,
            "Table 3's accuracies"))
    return out + [
        _claim("Table 3: probit and logistic A&R are competitive (MNIST accuracy within "
               "0.03 of softmax A&R)",
               min(v["mnist_ar_probit_test_acc"], v["mnist_ar_logistic_test_acc"])
               > v["mnist_ar_softmax_test_acc"] - 0.03,
               ["mnist_ar_probit_test_acc", "mnist_ar_logistic_test_acc",
                "mnist_ar_softmax_test_acc"], "0.918, 0.917 vs 0.924",
               "Table 3's accuracies"),
        _claim("Table 3: logistic A&R predicts better than OVE on Bibtex (test "
               "log-likelihood)", v["bibtex_ar_logistic_test_ll"] > v["bibtex_OVE_test_ll"],
               ["bibtex_ar_logistic_test_ll", "bibtex_OVE_test_ll"], "-3.151 vs -3.300",
               "Table 3's log-likelihoods")]


def claims(v, sets, toy_tol):
    """The chapter's reproduction check: each claim of the paper (``report.claim``'s
    arguments) with its status computed from the recorded values ``v``; ``sets`` are the
    sets that ran, ``toy_tol`` the toy's convergence test (None: the paper's iterations)."""
    stand_ins = [n for n in sets if n not in ("mnist", "bibtex")]
    return (_toy_claims(v, toy_tol) + _table2_claims(v) + _figure2_claims(v, sets, stand_ins)
            + _table3_claims(v, sets) + [dict(
                text="Tables 2-3 and Figure 2 on the full Omniglot, EURLex-4K and "
                "AmazonCat-13K", status="not testable",
                why="data not available here: only 8 of Omniglot's 50 alphabets; no "
                "EURLex-4K or AmazonCat-13K (ALOI has their number of classes; a partial "
                "Omniglot and Delicious stand in for the first two)")])
