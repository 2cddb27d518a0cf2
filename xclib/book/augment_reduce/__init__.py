"""What chapter 2 (Augment and Reduce) needs around its experiments: a store of fits, the data
and the protocol card, and the tables and figures of the toy, the exact reference and Figure 2.

The notebook shows each experiment (the estimator, its settings, the data); the functions here
turn fitted estimators into the chapter's tables, figures and recorded values. A function that
computes recorded values returns them as a ``{key: value}`` dict, which the notebook records
with :meth:`Recorded.record_all`. Table 2, Table 3, the learning-rate sweep, the comparison
with the exact solver and the reproduction check are in :mod:`xclib.book.augment_reduce.tables`.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import logsumexp

__all__ = ["Recorded", "FitStore", "SOURCES", "PAPER1", "load_pair", "load_sets",
           "protocol_card", "plot_clock", "toy_table", "plot_toy", "toy_stop_note",
           "mean_ll", "exact_table", "fit_jobs", "smooth", "plot_bounds", "exact_elbo",
           "bound_values", "bound_note"]

#: the library files whose source keys a stored fit (xclib/ relative globs)
SOURCES = ("augment_reduce/*.py", "datasets/*.py", "base.py", "fitloop.py", "_numba.py",
           "metrics.py", "exact.py", "lbfgs.py", "steps.py", "streaming.py")

#: Table 1 of the paper: what it ran
PAPER1 = pd.DataFrame(
    [["MNIST", 60000, 10000, 10, 784, 500, 1, 35000],
     ["Bibtex", 4880, 2413, 148, 1836, 488, 20, 5000],
     ["Omniglot", 25968, 6492, 1623, 784, 541, 50, 45000],
     ["EURLex-4K", 15539, 3809, 896, 5000, 279, 50, 100000]],
    columns=["dataset", "N", "N test", "K", "D", "|B|", "|S|", "iterations"])
_TOY_ROW = ["toy (Sec. 4.1)", 300000, 0, 10000, 0, 500, 100, 500000]
#: each of our sets beside the paper's set it stands for (ALOI: the size class of both)
STANDS_FOR = {"mnist": "MNIST", "bibtex": "Bibtex", "omniglot": "Omniglot",
              "delicious": "EURLex-4K", "aloi": "Omniglot, EURLex-4K",
              "toy": "toy (Sec. 4.1)"}


class Recorded(dict):
    """The values a chapter recorded, as numbers (``report.values`` holds their JSON form)."""

    def __init__(self, report):
        super().__init__()
        self.report = report

    def record(self, name, value):
        """Keep ``value`` under ``name`` and record it in the report (JSON and glue)."""
        self[name] = value
        return self.report.record(name, value)

    def record_all(self, values):
        """:meth:`record` each item of the dict ``values``, in its order."""
        for name, value in values.items():
            self.record(name, value)


def source_hash(paths):
    """SHA-256 (hex) of the concatenated bytes of ``paths``, in sorted order."""
    return hashlib.sha256(b"".join(Path(p).read_bytes() for p in sorted(paths))).hexdigest()


class FitStore:
    """Fits stored under a hash of their inputs and of the library's source.

    A rebuild with unchanged code loads a fit instead of running it again; delete the folder
    (``_build/cache/<name>`` beside the library) to refit everything. ``other_cpu`` collects
    the CPU seconds of the fits loaded from the store or run in worker processes.
    """

    def __init__(self, name, folder=None, sources=SOURCES):
        import xclib

        lib = Path(xclib.__file__).resolve().parent
        self.folder = Path(folder) if folder else lib.parent / "_build" / "cache" / name
        files = [p for pattern in sources for p in lib.glob(pattern)]
        self.src = source_hash(files)
        self.other_cpu = []

    def path(self, tag, parts):
        """The file of the fit ``tag`` whose inputs are the tuple ``parts``."""
        key = hashlib.sha256(repr(tuple(parts) + (self.src,)).encode()).hexdigest()[:24]
        return self.folder / f"{tag}_{key}.pkl"

    @staticmethod
    def load(path):
        """``(fitted object, CPU seconds it took)``."""
        return pickle.loads(Path(path).read_bytes())

    def save(self, path, result, cpu):
        """Store ``(result, cpu)``: written to a temporary file, then renamed (complete
        files only)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps((result, cpu)))
        tmp.replace(path)

    def fits(self, specs, fit):
        """``fit(*job)`` for each ``(tag, parts, job)`` of ``specs``: the stored fits are
        loaded, the others run side by side, one per core (``fit`` sets ``cpu_seconds_``)."""
        from xclib.book import one_per_core

        paths = [self.path(tag, parts) for tag, parts, _ in specs]
        todo = [i for i, path in enumerate(paths) if not path.exists()]
        for i, est in zip(todo, one_per_core(fit, [specs[i][2] for i in todo])):
            self.save(paths[i], est, est.cpu_seconds_)
        out = [self.load(path) for path in paths]
        self.other_cpu.extend(cpu for _, cpu in out)
        return [est for est, _ in out]


def load_pair(name, seed):
    """``(X, y, X_test, y_test), labels`` of a data set; ``labels`` is the full label matrix
    of the kept test rows of a multi-label set (Bibtex, Delicious), else None.

    Test rows whose label never occurs in training are dropped. The partial Omniglot has no
    test split: 80 / 20 per character, drawn with ``seed``.
    """
    from sklearn.model_selection import train_test_split

    from xclib import datasets

    if name == "omniglot":
        Xa, ya = datasets.load(name, "train")
        tr, te = train_test_split(np.arange(ya.size), test_size=0.2, stratify=ya,
                                  random_state=seed)
        return (Xa[np.sort(tr)], ya[np.sort(tr)], Xa[te], ya[te]), None  # test rows shuffled
    X, y = datasets.load(name, "train")
    Xt, yt = datasets.load(name, "test")
    keep = np.isin(yt, np.unique(y))
    labels = None
    if name in ("bibtex", "delicious"):   # the same rows, all their labels
        labels = datasets.load(name, "test", labels="all")[1][keep]
    return (X, y, Xt[keep], yt[keep]), labels


def load_sets(names, seed):
    """``data, labels``: :func:`load_pair` of each name (``labels`` holds the multi-label
    sets only)."""
    data, labels = {}, {}
    for name in names:
        data[name], lab = load_pair(name, seed)
        if lab is not None:
            labels[name] = lab
    return data, labels


def protocol_card(data, cfg, scale, seeds, toy_seed):
    """The paper's Table 1 above this page's runs, and the recorded numbers of iterations.

    ``cfg`` is the chapter's configuration (``sets`` and ``toy``), ``seeds`` maps a set to
    the seeds of its runs. Returns ``(card, values)``.
    """
    card, values = [], {}
    for name in cfg["sets"]:
        X, y, Xt, yt = data[name]
        c = cfg["sets"][name]
        per_epoch = X.shape[0] // c["B"]
        card.append(dict(dataset=name, N=X.shape[0], **{"N test": Xt.shape[0]},
                         K=len(np.unique(y)), D=X.shape[1],
                         **{"|B|": c["B"], "|S|": c["S"]},
                         iterations=c["epochs"] * per_epoch, epochs=c["epochs"],
                         seeds=", ".join(map(str, seeds[name]))))
        values[f"{name}_iterations"] = c["epochs"] * per_epoch
    toy = cfg["toy"]
    toy_its = toy["epochs"] * (toy["n_samples"] // toy["B"])
    card.append(dict(dataset="toy", N=toy["n_samples"], **{"N test": 0},
                     K=toy["n_classes"], D=0, **{"|B|": toy["B"], "|S|": toy["S"]},
                     iterations=toy_its, epochs=toy["epochs"], seeds=str(toy_seed)))
    values["toy_iterations"] = toy_its
    paper1 = pd.concat([PAPER1, pd.DataFrame([_TOY_ROW], columns=PAPER1.columns)])
    paper1["seeds"] = "1 (not stated)"
    ours1 = pd.DataFrame(card).drop(columns="epochs")
    ours1["in place of"] = ours1.dataset.map(STANDS_FOR)
    ours1["iterations"] = ours1["iterations"].astype(object)
    if toy["tol"] is not None:   # the convergence test ends the toy: at most this
        ours1.loc[ours1.dataset == "toy", "iterations"] = f"up to {toy_its:,}"
    card1 = pd.concat({"paper (Table 1, Sec. 4.1)": paper1.set_index("dataset"),
                       f"this page ({scale!r})": ours1.set_index("dataset")})
    return card1.rename_axis(["", "dataset"]), values


def plot_clock(clock, per, n_epochs):
    """The two local step sizes, and the bound of the fits in ``clock`` (``{"visits": est,
    "global": est}``, ``per`` iterations an epoch); returns the last epoch's mean bounds."""
    import matplotlib.pyplot as plt

    values = {}
    v = np.arange(1, n_epochs + 1)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.3))
    a1.loglog(v, (1 + v) ** -0.9, "C0-", label="per-row clock: $(1+v)^{-0.9}$")
    a1.loglog(v, (1 + per * v) ** -0.9, "C3:", label=f"global clock: $(1+{per}v)^{{-0.9}}$")
    a1.set_xlabel("visit v of a row")
    a1.set_ylabel("local step size")
    a1.legend(fontsize=8)
    for how, style in [("visits", "C0-"), ("global", "C3:")]:
        e = np.convolve(clock[how].elbo_trace_, np.ones(50) / 50, mode="valid")
        a2.plot(np.arange(e.size) / per, e, style, label=f"local_clock={how!r}")
        values[f"mnist_elbo_clock_{how}"] = float(np.mean(clock[how].elbo_trace_[-per:]))
    a2.set_xlabel("epoch")
    a2.set_ylabel("ELBO per datapoint (50-iteration mean)")
    a2.set_ylim(-3, 0)
    a2.legend(fontsize=8)
    a2.set_title("MNIST, softmax A&R")
    plt.tight_layout()
    plt.show()
    return values


def _ove_bound(b, counts):
    """Exact eq. (10) summed over the data, with biases ``b`` only: O(K^2) in blocks."""
    total = 0.0
    for s in range(0, b.size, 1000):
        z = b[s:s + 1000, None] - b[None, :]
        lsig = -np.logaddexp(0.0, -z)
        total += np.sum(counts[s:s + 1000] * (lsig.sum(axis=1) - np.log(0.5)))
    return total


def toy_table(fits, y, counts, p_eff, tol):
    """The toy's table (bound, log-likelihood, errors against the frequencies and the truth)
    of the fits ``{"A&R": est, "OVE": est}``, the uniform model and the exact MLE.

    ``y`` are the label codes, ``counts`` their counts, ``p_eff`` the true probabilities of
    the classes that occur, ``tol`` the convergence test's (None: none). Returns
    ``(table, values)``.
    """
    K = counts.size
    freq = counts / counts.sum()                          # the maximum-likelihood answer
    mle_ll = float(np.sum(counts * np.log(freq)))
    toy, values = {}, {}
    for name, est in fits.items():
        b = est.intercept_
        lse = logsumexp(b)
        if name == "A&R":   # exact eq. (8) at the fitted ζ_n: O(N + K) without covariates
            bound = np.sum(1.0 - est.log_eta_ - np.exp(lse - b[y] - est.log_eta_))
        else:
            bound = _ove_bound(b, counts)
        p_hat = np.exp(b - lse)
        toy[name] = dict(bound=bound, loglik=np.sum(counts * (b - lse)),
                         mae_freq=np.mean(np.abs(p_hat - freq)),
                         mae_truth=np.mean(np.abs(p_hat - p_eff)))
        key = "ar" if name == "A&R" else "ove"
        for col in ("bound", "mae_truth", "mae_freq"):
            values[f"toy_{key}_{col}"] = float(toy[name][col])
        epochs = np.diff(est.history_["time"], prepend=0.0)
        values[f"toy_{key}_epoch_seconds"] = epochs
        values[f"toy_{key}_iterations"] = int(est.n_iter_)
        values[f"toy_{key}_epoch_median"] = float(np.median(epochs))
        # the convergence test's last window: log-loss fall over the last 5 epochs
        loss = np.asarray(est.history_["train_loss"])
        values[f"toy_{key}_last_fall"] = (float(loss[-6] - loss[-1]) if loss.size > 5
                                          else np.nan)
    uni = np.full(K, 1.0 / K)
    toy["uniform (untrained)"] = dict(bound=np.nan, loglik=-y.size * np.log(K),
                                      mae_freq=np.mean(np.abs(uni - freq)),
                                      mae_truth=np.mean(np.abs(uni - p_eff)))
    toy["exact MLE (frequencies)"] = dict(bound=np.nan, loglik=mle_ll, mae_freq=0.0,
                                          mae_truth=np.mean(np.abs(freq - p_eff)))
    values.update(
        toy_K=K, toy_tol=np.nan if tol is None else tol, toy_N=int(y.size),
        toy_uniform_mae_truth=float(toy["uniform (untrained)"]["mae_truth"]),
        toy_uniform_mae_freq=float(toy["uniform (untrained)"]["mae_freq"]),
        toy_mle_mae_truth=float(toy["exact MLE (frequencies)"]["mae_truth"]),
        toy_ar_kl=float((mle_ll - toy["A&R"]["loglik"]) / y.size),
        toy_ove_kl=float((mle_ll - toy["OVE"]["loglik"]) / y.size))
    paper_toy = {"A&R": dict(bound=-2.62e6, mae_freq=3.00e-6),
                 "OVE": dict(bound=-1.40e9, mae_freq=3.65e-6)}
    table = pd.DataFrame(toy).T
    for col, key in [("paper: bound", "bound"), ("paper: error", "mae_freq")]:
        table[col] = [paper_toy.get(n, {}).get(key, np.nan) for n in table.index]
    table = table.rename(columns={
        "bound": "bound (summed)", "loglik": "log-lik (summed)",
        "mae_freq": "error vs frequencies", "mae_truth": "error vs truth"})
    return table, values


def plot_toy(fits, counts, batch_size):
    """Left: the maximum log-likelihood minus each fit's bound per iteration; right: the KL
    from the frequencies to each fit per epoch, against the frequencies' own KL from the
    truth, ``(K − 1) / 2N``, which it returns."""
    import matplotlib.pyplot as plt

    n = int(counts.sum())
    K = counts.size
    mle_ll = float(np.sum(counts * np.log(counts / n)))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4))
    per = n // batch_size
    for name, style in [("A&R", "C0-"), ("OVE", "C1-")]:
        est = fits[name]
        gap = mle_ll / n - est.elbo_trace_   # ≥ 0 up to minibatch noise
        g = np.convolve(gap, np.ones(100) / 100, mode="valid")
        a1.plot(np.arange(g.size) + 100, g, style, label=name)
        kl = np.asarray(est.history_["train_loss"]) + mle_ll / n
        a2.loglog(np.asarray(est.history_["epoch"]) * per, kl, style, label=name)
        a2.axvline(est.n_iter_, color=style[:2], ls=":", lw=1)   # where its fit stopped
    a1.set_yscale("log")
    a1.set_xscale("log")
    a1.set_xlabel("iteration")
    a1.set_ylabel("nats per datapoint")
    a1.set_title("max log-lik − bound (100-iteration mean)")
    floor = 0.5 * (K - 1) / n
    a2.axhline(floor, color="k", ls="--", label="(K−1)/2N: expected KL, frequencies vs truth")
    a2.set_xlabel("iteration")
    a2.set_ylabel("nats per datapoint")
    a2.set_title("KL(frequencies ‖ fitted) = log-lik gap to the MLE")
    for a in (a1, a2):
        a.legend(fontsize=8)
    plt.tight_layout()
    plt.show()
    return floor


def toy_stop_note(v):
    """What the book scale's convergence test settles, from the recorded values ``v``."""
    below = [n for n, k in (("A&R", "ar"), ("OVE", "ove"))
             if v[f"toy_{k}_kl"] < v["toy_floor_kl"]]
    return (
        f"The fits stopped (dotted lines) with a KL to the frequencies of "
        f"{v['toy_ar_kl']:.1e} (A&R) and {v['toy_ove_kl']:.1e} (OVE) nats, against "
        f"{v['toy_floor_kl']:.1e} between the frequencies and the truth. "
        + (f"{' and '.join(below)} stopped below that floor: further iterations move "
           "the fit by less than the frequencies' own distance from the truth, so the "
           "error against the truth is settled. " if below else "")
        + "On the log-log panel the KL to the frequencies is still falling: the test "
        "stops where one more epoch gains little in absolute terms, not where the "
        "fit has reached the frequencies, so the comparison against the frequencies "
        "is the paper's 5·10⁵ iterations, run at the `full` scale.")


def mean_ll(model, X, y):
    """Mean log-likelihood of the labels ``y`` of the rows ``X`` under ``model``."""
    lp = model.predict_log_proba(X)
    return float(np.mean(lp[np.arange(len(y)), np.searchsorted(model.classes_, y)]))


def exact_table(exact, data):
    """The exact fits ``{(set, alpha): est}``: their table and recorded values (``exact0``
    for ``alpha=0``, ``exactridge`` for the light ridge). Returns ``(table, values)``."""
    rows, values = [], {}
    for (name, a), ex in exact.items():
        X, y, Xt, yt = data[name]
        key = f"{name}_exact" + ("0" if a == 0 else "ridge")
        got = {f"{key}_train_ll": mean_ll(ex, X, y), f"{key}_test_ll": mean_ll(ex, Xt, yt),
               f"{key}_test_acc": float(ex.score(Xt, yt)),
               f"{key}_seconds": float(ex.fit_time_),
               f"{key}_converged": bool(ex.converged_)}
        values.update(got)
        rows.append(dict(dataset=name, alpha=f"{a:.3g}", iterations=ex.n_iter_,
                         converged=ex.converged_, seconds=ex.fit_time_,
                         **{"train log-lik": got[f"{key}_train_ll"],
                            "test log-lik": got[f"{key}_test_ll"],
                            "test acc": got[f"{key}_test_acc"]}))
    return pd.DataFrame(rows).round(4), values


def fit_jobs(jobs, data, sets, paper, store, fit):
    """The fits of ``jobs`` (``(set, label, model, seed)``), from ``store`` or run two at a
    time, the costliest first so that the last one does not run alone for long.

    ``fit(X, y, settings, model, seed)`` fits one; ``sets`` holds each set's settings,
    ``paper`` the settings every fit shares (both key the store). Returns
    ``{(set, label, seed): est}`` in the order of ``jobs``.
    """
    import scipy.sparse as sp

    specs, cost = [], []
    for name, label, model, seed in jobs:
        c = sets[name]
        X, y = data[name][:2]
        parts = (name, model, seed, sorted(c.items()), sorted(paper.items()))
        specs.append((f"{name}_{model}_{seed}", parts, (X, y, c, model, seed)))
        nnz = sp.csr_matrix(X).nnz
        cost.append(c["epochs"] * nnz * (c["S"] + 1) * (2 if model == "probit" else 1))
    order = sorted(range(len(jobs)), key=lambda i: -cost[i])
    done = dict(zip(order, store.fits([specs[i] for i in order], fit)))
    return {tuple(jobs[i][k] for k in (0, 1, 3)): done[i] for i in range(len(jobs))}


def smooth(v, w=100):
    """Moving average over ``w`` points (at most a fifth of the series)."""
    w = max(1, min(w, len(v) // 5))
    return np.convolve(v, np.ones(w) / w, mode="valid")


def plot_bounds(fits, names, refs, seed):
    """Figure 2: the bound of softmax A&R and OVE (seed ``seed``) against training seconds,
    minus ``refs[name]`` (the exact log-likelihood) where a set has one."""
    import matplotlib.pyplot as plt

    n_rows = (len(names) + 1) // 2
    fig, axes = plt.subplots(n_rows, 2, figsize=(10, 3.5 * n_rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        ref = refs.get(name, 0.0)
        for label, style in [("A&R softmax", "C0-"), ("OVE", "C1-")]:
            est = fits[name, label, seed]
            e = smooth(est.elbo_trace_) - ref
            ax.plot(est.time_trace_[len(est.time_trace_) - len(e):], e, style, label=label)
        ax.set_yscale("symlog", linthresh=0.01)
        ax.axhline(0.0, color="k", ls="--", lw=1,
                   label="SoftmaxRegression(alpha=0) log-lik" if ref else "0")
        ax.set_title(name)
        ax.set_xlabel("training seconds")
        ax.set_ylabel("ELBO − exact log-lik" if ref else "ELBO per datapoint")
        ax.legend(fontsize=8)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    plt.tight_layout()
    plt.show()


def exact_elbo(est, X, y):
    """Eq. (8) over every training row at the final weights and ζ_n, and the mean
    log-likelihood of the same weights (scored in blocks: no N × K matrix)."""
    from xclib.augment_reduce import softmax_elbo
    from xclib.metrics import score_blocks

    code = np.searchsorted(est.classes_, y)
    nll = np.concatenate([logsumexp(s, axis=1) - s[np.arange(b - a), code[a:b]]
                          for a, b, s in score_blocks(est.coef_, X, est.intercept_)])
    elbo = [softmax_elbo(a, b) for a, b in zip(nll, est.log_eta_)]
    return float(np.mean(elbo)), float(-np.mean(nll))


def bound_values(fits, data, seeds, batch_sizes, v):
    """The bounds under Figure 2, per set and seed: each method's mean bound over the last
    epoch, softmax A&R's exact bound (8) at its final weights and ζ_n and the gaps to the
    log-likelihood of those weights and to the light-ridge reference (where ``v``, the
    recorded values, has it)."""
    values = {}
    for name, (X, y) in ((n, data[n][:2]) for n in seeds):
        per = X.shape[0] // batch_sizes[name]
        for label, key in [("A&R softmax", "ar"), ("OVE", "ove")]:
            ends = [float(np.mean(fits[name, label, s].elbo_trace_[-per:]))
                    for s in seeds[name]]   # the last epoch's mean, each seed
            values[f"{name}_elbo_{key}"] = ends[0]
            if len(ends) > 1:
                values[f"{name}_elbo_{key}_seeds"] = ends
        both = [exact_elbo(fits[name, "A&R softmax", s], X, y) for s in seeds[name]]
        values[f"{name}_exact_elbo_ar"] = both[0][0]
        values[f"{name}_train_ll_ar"] = both[0][1]
        values[f"{name}_bound_gap_ar_seeds"] = [ll - e for e, ll in both]
        if f"{name}_exactridge_train_ll" in v:   # against the converged ridge reference
            ref = v[f"{name}_exactridge_train_ll"]
            values[f"{name}_opt_gap_ar_seeds"] = [ref - ll for e, ll in both]
            values[f"{name}_total_gap_ar_seeds"] = [ref - e for e, ll in both]
    for name in ("mnist", "bibtex"):
        values[f"{name}_elbo_gap_exact"] = (v[f"{name}_exact0_train_ll"]
                                            - values[f"{name}_elbo_ar"])
    b_ar, b_ove = (values.get(f"bibtex_elbo_{k}_seeds", [values[f"bibtex_elbo_{k}"]])
                   for k in ("ar", "ove"))
    values["bibtex_ove_minus_ar_seeds"] = [o - a for a, o in zip(b_ar, b_ove)]
    values["bibtex_elbo_rel_diff_seeds"] = [abs(o - a) / abs(o) for a, o in zip(b_ar, b_ove)]
    return values


def bound_note(v, stand_ins):
    """The values under Figure 2, in words: Bibtex's bounds per seed, MNIST's gaps to the
    converged reference, and the other sets' bounds."""
    b_ar, b_ove = (v.get(f"bibtex_elbo_{k}_seeds", [v[f"bibtex_elbo_{k}"]])
                   for k in ("ar", "ove"))
    higher = {True: "OVE's", False: "A&R's"}
    diff = v["bibtex_ove_minus_ar_seeds"]
    which = (f"{higher[diff[0] > 0]} bound is the higher one on every seed"
             if len(set(d > 0 for d in diff)) == 1 else "which bound is higher varies")
    gaps = {k: v[f"mnist_{k}_gap_ar_seeds"] for k in ("bound", "opt", "total")}

    def fmt(xs):
        return ", ".join(f"{x:.4f}" for x in xs)

    text = (
        f"On Bibtex {which} ({len(diff)} seeds: A&R {fmt(b_ar)}, OVE {fmt(b_ove)}; "
        f"OVE − A&R = {fmt(diff)} nats, "
        f"{fmt(v['bibtex_elbo_rel_diff_seeds'])} of OVE's value). "
        f"On MNIST, per seed, against the converged SoftmaxRegression("
        f"alpha={v['mnist_alpha_ref']:.2g}) (training log-likelihood "
        f"{v['mnist_exactridge_train_ll']:.4f}): the bound gap (log-likelihood of A&R's "
        f"weights − its exact ELBO) is {fmt(gaps['bound'])}, the optimisation gap (the "
        f"reference's log-likelihood − that of A&R's weights) {fmt(gaps['opt'])}, and "
        f"their sum, the reference − A&R's exact ELBO, {fmt(gaps['total'])} nats per "
        "datapoint, against the threshold of 0.05 in the check below.")
    if stand_ins:
        ends = {k: " and ".join(f"{v[f'{n}_elbo_{k}']:.3f} ({n})" for n in stand_ins)
                for k in ("ar", "ove")}
        text += (f"\n\nOn the other sets the A&R bound ends at {ends['ar']}, OVE's at "
                 f"{ends['ove']} (nats per datapoint).")
    return text
