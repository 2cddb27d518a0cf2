"""The learning-rate explorer every chapter reuses.

A chapter gives a function ``run(method, rate, n_epochs) -> history`` (a fitted estimator's
``history_`` works: a dict with the key ``"epoch"`` and the metric) and a grid of learning
rates. :func:`explore_learning_rates` then

1. precomputes the sweep over every (method, rate) pair (:func:`sweep_learning_rates`);
2. shows it as a matplotlib animation with one frame per learning rate, embedded as
   JavaScript (``FuncAnimation.to_jshtml``) so that its slider works in the static HTML of
   the book, without a kernel and without the internet (:func:`sweep_html` removes the Font
   Awesome stylesheet matplotlib links from a CDN and puts text on the buttons);
3. when run live in Jupyter (an IPython kernel, and ``XCLIB_BUILD`` unset), adds
   ``ipywidgets`` controls (method, learning rate on a log slider, epochs) that re-run
   ``run`` and redraw the curves (:class:`LiveRefit`: changes are debounced and coalesced,
   so a burst of slider steps costs one fit, for the last value, and a status line says
   "fitting…" while it runs);
4. returns the sweep ``{method: {rate: history}}`` so the notebook can record numbers.

A run *diverged* when its history stops before ``n_epochs``, holds a non-finite value, says
``history["diverged"]``, or the run raised a :class:`~xclib.base.DivergenceWarning` (or an
``ArithmeticError``). Its curve ends with a cross and the legend says "diverged".
"""
from __future__ import annotations

import math
import os
import re
import warnings

import numpy as np

__all__ = [
    "explore_learning_rates",
    "sweep_learning_rates",
    "sweep_animation",
    "sweep_html",
    "offline_jshtml",
    "is_diverged",
    "LiveRefit",
]

#: Text for the buttons of matplotlib's JS animation (Font Awesome icon → offline text).
_BUTTON_TEXT = {
    "fa-minus": "&minus;",
    "fa-fast-backward": "|&#9664;&#9664;",
    "fa-step-backward": "|&#9664;",
    "fa-play fa-flip-horizontal": "&#9664;",
    "fa-pause": "||",
    "fa-play": "&#9654;",
    "fa-step-forward": "&#9654;|",
    "fa-fast-forward": "&#9654;&#9654;|",
    "fa-plus": "+",
}
_UNNAMED = ""


def _history_dict(history, metric):
    """``{"epoch": array, metric: array, "diverged": bool}`` from whatever ``run`` returned."""
    if history is None:
        return {"epoch": np.zeros(0), metric: np.zeros(0), "diverged": True}
    if not hasattr(history, "keys") and hasattr(history, "history_"):  # a fitted estimator
        diverged = bool(getattr(history, "diverged_", False))
        history = dict(history.history_, diverged=diverged or history.history_.get("diverged", False))
    if "epoch" not in history or metric not in history:
        raise KeyError(
            f"run(...) must return a dict with the keys 'epoch' and {metric!r}; "
            f"got keys {sorted(history)}"
        )
    out = {k: (np.asarray(v, dtype=float) if k != "diverged" else v) for k, v in history.items()}
    out["diverged"] = bool(history.get("diverged", False))
    if out["epoch"].shape != out[metric].shape:
        raise ValueError(
            f"history['epoch'] and history[{metric!r}] differ in length: "
            f"{out['epoch'].shape} vs {out[metric].shape}"
        )
    return out


def is_diverged(history, metric="train_loss", n_epochs=None):
    """True when a run's history shows divergence (see the module docstring)."""
    values = np.asarray(history[metric], dtype=float)
    if history.get("diverged", False) or not np.all(np.isfinite(values)):
        return True
    if n_epochs is not None and len(values) and np.max(history["epoch"]) < n_epochs:
        return True
    return n_epochs is not None and len(values) == 0


def _sweep_one(run, method, rate, n_epochs, metric):
    """One run of the sweep: ``(history, warnings to pass on)``. DivergenceWarnings and
    ``ArithmeticError`` mark the history diverged; other warnings are returned as
    ``(message, category, filename, lineno)`` for the caller to re-issue (a worker process
    cannot show them)."""
    from ..base import DivergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DivergenceWarning)
        try:
            h = run(None if method == _UNNAMED else method, rate, n_epochs)
        except ArithmeticError:
            h = None
    h = _history_dict(h, metric)
    others = []
    for w in caught:
        if issubclass(w.category, DivergenceWarning):
            h["diverged"] = True
        else:  # not ours to swallow
            others.append((w.message, w.category, w.filename, w.lineno))
    h["diverged"] = is_diverged(h, metric, n_epochs)
    return h, others


def sweep_learning_rates(run, rates, methods=None, n_epochs=10, metric="train_loss",
                         n_jobs=1):
    """Call ``run(method, rate, n_epochs)`` for every pair; ``{method: {rate: history}}``.

    Each history is a dict of float arrays with the extra key ``"diverged"``. Warnings of
    category :class:`~xclib.base.DivergenceWarning` and ``ArithmeticError`` exceptions mark the
    run as diverged instead of reaching the notebook's output. With ``n_jobs`` > 1 (``None``:
    one per core) the runs go to worker processes (:func:`xclib.book.one_per_core`; ``run``
    and what it uses are pickled), which changes nothing in the result: each run is
    independent and seeded by ``run`` itself.
    """
    rates = _check_rates(rates)
    methods = [_UNNAMED] if methods is None else list(methods)
    if not methods:
        raise ValueError("methods must be None or a non-empty list of names")
    pairs = [(method, rate) for method in methods for rate in rates]
    jobs = [(run, method, rate, n_epochs, metric) for method, rate in pairs]
    if n_jobs == 1:
        results = [_sweep_one(*job) for job in jobs]
    else:
        from . import one_per_core

        results = one_per_core(_sweep_one, jobs, n_jobs=n_jobs)
    sweep = {method: {} for method in methods}
    for (method, rate), (h, others) in zip(pairs, results):
        for message, category, filename, lineno in others:
            warnings.warn_explicit(message, category, filename, lineno)
        sweep[method][rate] = h
    return sweep


def _check_rates(rates):
    rates = [float(r) for r in np.atleast_1d(np.asarray(rates, dtype=float))]
    if not rates or not all(math.isfinite(r) and r > 0 for r in rates):
        raise ValueError(f"rates must be a non-empty list of positive numbers, got {rates}")
    return sorted(set(rates))


def _finite(values, logy):
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return v[v > 0] if logy else v


def _limits(sweep, metric, reference, logy):
    """Fixed y-limits for all frames: from the reference (or the best value) up to the typical
    starting value, so the frames compare at a glance; blown-up curves leave the axes."""
    firsts, lows = [], []
    for runs in sweep.values():
        for h in runs.values():
            v = _finite(h[metric], logy)
            if len(v):
                firsts.append(v[0])
                lows.append(v.min())
    if reference is not None and (not logy or reference > 0):
        lows.append(float(reference))
    if not firsts:
        return (0.1, 10.0) if logy else (0.0, 1.0)
    lo, med = min(lows), float(np.median(firsts))
    hi = max(firsts) if max(firsts) <= 3 * abs(med) else med  # ignore starts that blew up
    if logy:
        lo, hi = lo / 1.15, hi * 1.15
        if hi <= lo:
            hi = lo * 10
    else:
        pad = 0.05 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.05
        lo, hi = lo - pad, hi + pad
    return lo, hi


def _label(method, diverged):
    name = method if method != _UNNAMED else "run"
    return f"{name} (diverged)" if diverged else name


def _draw(ax, curves, rate, n_epochs, metric, reference, ylabel, title, logy, ylim,
          xlabel="epoch", reference_label="optimum"):
    """Draw one frame: ``curves`` is a list of (method, history)."""
    ax.clear()
    colors = [f"C{i}" for i in range(10)]
    for i, (method, h) in enumerate(curves):
        c = colors[i % len(colors)]
        x, y = np.asarray(h["epoch"], float), np.asarray(h[metric], float)
        ok = np.isfinite(y) & ((y > 0) if logy else True)
        above = ok & (y > ylim[1])  # off the axes: drawn on the top edge as triangles
        yc = np.where(above, ylim[1], y)
        ax.plot(x[ok], yc[ok], "-o", color=c, ms=3, lw=1.5, label=_label(method, h["diverged"]),
                clip_on=False)
        if above.any():
            ax.plot(x[above], yc[above], "^", color=c, ms=7, clip_on=False)
        if h["diverged"]:
            if ok.any():
                xe, ye = x[ok][-1], min(max(y[ok][-1], ylim[0]), ylim[1])
            else:
                xe, ye = 0.0, ylim[1]
            ax.plot([xe], [ye], "x", color=c, ms=12, mew=3)
    if reference is not None and (not logy or reference > 0):
        ax.axhline(reference, color="k", ls="--", lw=1, label=reference_label)
    if logy:
        ax.set_yscale("log")
    ax.set_ylim(*ylim)
    ax.set_xlim(0, max(1, n_epochs))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel or metric.replace("_", " "))
    head = f"{title}: " if title else ""
    ax.set_title(f"{head}learning rate {rate:.3g}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    if any(np.any(np.asarray(h[metric], float) > ylim[1]) for _, h in curves):
        ax.text(0.01, 0.99, "\u25b2 above the axes", transform=ax.transAxes, va="top",
                fontsize="small")


def sweep_animation(sweep, n_epochs, metric="train_loss", reference=None, ylabel=None,
                    title=None, logy=False, interval=900, figsize=(6.4, 4.0), dpi=80,
                    xlabel="epoch", reference_label="optimum"):
    """A ``FuncAnimation`` with one frame per learning rate (ascending), all methods as lines."""
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    methods = list(sweep)
    rates = sorted({r for runs in sweep.values() for r in runs})
    ylim = _limits(sweep, metric, reference, logy)
    fig, ax = plt.subplots(figsize=figsize, dpi=dpi, layout="constrained")

    def frame(i):
        rate = rates[i]
        curves = [(m, sweep[m][rate]) for m in methods if rate in sweep[m]]
        _draw(ax, curves, rate, n_epochs, metric, reference, ylabel, title, logy, ylim,
              xlabel, reference_label)
        return ()

    anim = FuncAnimation(fig, frame, frames=len(rates), interval=interval, repeat=False,
                         init_func=lambda: frame(0))
    return anim


def offline_jshtml(html):
    """``to_jshtml`` output that loads nothing from the internet: the Font Awesome
    ``<link>`` goes, and the buttons show text instead of its icons. The result is wrapped in
    a ``<div data-lm-suppress-shortcuts>``, and its controls carry the attribute too, so that,
    run live in JupyterLab or Notebook 7, the arrow keys step the slider instead of moving
    between the notebook's cells."""
    html = re.sub(r"<link[^>]*font-awesome[^>]*>", "", html, flags=re.S)

    def button(m):
        return _BUTTON_TEXT.get(m.group(1).replace("fa ", "", 1).strip(), "&middot;")

    html = re.sub(r'<i class="(fa [^"]*)"></i>', button, html)
    # Inside JupyterLab and Notebook 7 the arrow keys on the slider would move between the
    # notebook's cells: Lumino skips its shortcuts for keys pressed within this attribute. It
    # must sit on the focused control itself, not only on an ancestor: Lumino tests the target
    # against a shortcut's selector (".jp-Notebook.jp-mod-commandMode … :focus") before it
    # looks for the attribute, and the ancestors after.
    html = re.sub(r"<(input|button|select)\b", r'<\1 data-lm-suppress-shortcuts="true"', html)
    html = f'<div class="xclib-sweep" data-lm-suppress-shortcuts="true">{html}</div>'
    if re.search(r"""(href|src)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?(https?:)?//""", html):
        raise RuntimeError("the animation HTML still references an external resource")
    return html


def sweep_html(sweep, n_epochs, metric="train_loss", reference=None, ylabel=None, title=None,
               logy=False, **kwargs):
    """The sweep as offline HTML (a JS slider, one frame per learning rate); closes the figure."""
    import matplotlib.pyplot as plt

    anim = sweep_animation(sweep, n_epochs, metric, reference, ylabel, title, logy, **kwargs)
    try:
        html = anim.to_jshtml(default_mode="once")
    finally:
        plt.close(anim._fig)
    return offline_jshtml(html)


def _in_kernel():
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


class LiveRefit:
    """Debounced, coalescing re-fit for the live controls: one fit for the last value.

    Every control change calls :meth:`request`, which only restarts a short timer on the
    kernel's event loop. The fit runs when no change came for ``delay`` seconds, with the
    controls' values *at that moment*. While a fit runs the kernel processes no messages;
    the changes that arrive meanwhile are handled after it, each restarting the timer, so a
    burst of slider steps during a fit costs one more fit (for the final value), never a queue
    of stale ones. ``status`` shows "fitting…" from the request until the fit is drawn.

    Parameters
    ----------
    fit : callable ``fit() -> str``
        Reads the controls, fits, draws; returns the text of the status line.
    status : object with a ``value`` attribute (an ``ipywidgets.Label``)
    delay : float
        Seconds without a change before the fit starts.
    """

    def __init__(self, fit, status, delay=0.2):
        self.fit, self.status, self.delay = fit, status, float(delay)
        self.n_fits = 0
        self._timer = None

    def request(self, _change=None):
        """A control changed: show "fitting…", (re)start the timer; fit now if no loop runs."""
        import asyncio

        self.status.value = "fitting\u2026"
        if self._timer is not None:
            self._timer.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (called from plain Python): fit at once
            self._timer = None
            self.run()
            return
        self._timer = loop.call_later(self.delay, self.run)

    def run(self):
        """Fit once with the current values; errors go to the status line, not the log."""
        self._timer = None
        self.n_fits += 1
        try:
            self.status.value = self.fit()
        except Exception as exc:  # noqa: BLE001 - a callback: the reader must see it
            self.status.value = f"error: {type(exc).__name__}: {exc}"


def _png(curves, rate, epochs, metric, reference, ylabel, title, logy, ylim, labels=()):
    """One frame as PNG bytes (a bare ``Figure``: no pyplot state, nothing shown)."""
    import io

    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=80, layout="constrained")
    _draw(fig.subplots(), curves, rate, epochs, metric, reference, ylabel, title, logy, ylim,
          *labels)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


#: Notebook 7 handles keys before the page does (JupyterLab after): without this attribute on
#: the controls, its shortcuts (".jp-Notebook.jp-mod-commandMode … :focus": the focused
#: element itself matches) take the slider's arrow keys. Lumino tests the focused element
#: before it looks for the attribute, so every element of the box carries it, the slider's
#: handles included. Widgets cannot set attributes, so a script marks the box and what is in
#: it once the widget manager has drawn them.
_SUPPRESS_SHORTCUTS = """
(function () {
  var tries = 0;
  var timer = setInterval(function () {
    document.querySelectorAll('.xclib-live-box').forEach(function (box) {
      [box].concat(Array.from(box.querySelectorAll('*'))).forEach(function (e) {
        if (!e.hasAttribute('data-lm-suppress-shortcuts')) {
          e.setAttribute('data-lm-suppress-shortcuts', 'true');
        }
      });
    });
    if (++tries > 300) { clearInterval(timer); }
  }, 100);
})();
"""


def _plural(word):
    return word if word.endswith("s") else word + "s"


def _live_controls(run, rates, methods, n_epochs, metric, reference, ylabel, title, logy, ylim,
                   delay=0.2, labels=()):
    """ipywidgets: method, learning rate (log slider), epochs → re-run ``run`` and redraw.

    Returns the :class:`LiveRefit` driving them (after its first, synchronous, fit).
    """
    import time

    import ipywidgets as widgets
    from IPython.display import Javascript, display

    names = list(methods)
    options = names + (["all methods"] if len(names) > 1 else [])
    lo, hi = math.log10(min(rates)), math.log10(max(rates))
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    method_w = widgets.Dropdown(options=[(o if o else "run", o) for o in options],
                                value=options[-1], description="method")
    rate_w = widgets.FloatLogSlider(value=10 ** ((lo + hi) / 2), base=10, min=lo, max=hi,
                                    step=(hi - lo) / 40, description="rate",
                                    continuous_update=False, readout_format=".3g")
    epochs_w = widgets.IntSlider(value=n_epochs, min=1, max=max(2 * n_epochs, 2),
                                 description=_plural(labels[0] if labels else "epoch"),
                                 continuous_update=False)
    status = widgets.Label(value="fitting\u2026")
    image = widgets.Image(format="png")
    for w in (method_w, rate_w, epochs_w, status, image):
        w.add_class("xclib-live")

    def fit():
        chosen = names if method_w.value == "all methods" else [method_w.value]
        rate, epochs = float(rate_w.value), int(epochs_w.value)
        t0 = time.perf_counter()
        sweep = sweep_learning_rates(run, [rate], chosen, epochs, metric)
        seconds = time.perf_counter() - t0
        lim = _limits(sweep, metric, reference, logy)
        lim = (min(lim[0], ylim[0]), max(lim[1], ylim[1]))
        curves = [(m, sweep[m][rate]) for m in sweep]
        image.value = _png(curves, rate, epochs, metric, reference, ylabel, title, logy, lim,
                           labels)
        return f"rate {rate:.3g}, {epochs} epochs: fitted in {seconds:.2f} s"

    refit = LiveRefit(fit, status, delay)
    for w in (method_w, rate_w, epochs_w):
        w.observe(refit.request, names="value")
    box = widgets.VBox([widgets.HTML("<b>Live:</b> re-runs the fit (needs a kernel)"),
                        widgets.HBox([method_w, rate_w, epochs_w]), status, image])
    box.add_class("xclib-live-box")
    display(box)
    display(Javascript(_SUPPRESS_SHORTCUTS))
    refit.run()
    return refit


def explore_learning_rates(run, rates, methods=None, n_epochs=10, metric="train_loss",
                           reference=None, ylabel=None, title=None, logy=False, live=None,
                           xlabel="epoch", reference_label="optimum", n_jobs=1):
    """Precompute a learning-rate sweep, show it as an offline JS-slider animation, and (live in
    Jupyter) add ipywidgets controls that re-run the fit.

    Parameters
    ----------
    run : callable ``run(method, rate, n_epochs) -> dict``
        Fits one method at one learning rate and returns its history: a dict with the key
        ``"epoch"`` and ``metric`` (an estimator's ``history_``), or the fitted estimator.
        With ``methods=None`` it is called with ``method=None``.
    rates : sequence of float > 0
        The learning rates of the precomputed sweep, one animation frame each (ascending).
    methods : list of str or None
        Method names, drawn as one line each.
    n_epochs : int
        Epochs per run (choose cheap settings: the sweep runs ``len(methods)·len(rates)`` fits).
    metric : str
        History key to plot (``"train_loss"``, ``"eval_loss"``, ``"train_error"``, …).
    reference : float or None
        A dashed horizontal line, e.g. the exact optimum's loss.
    ylabel, title : str or None
    logy : bool
        Log-scale y axis.
    live : bool or None
        Show the ipywidgets controls; default: an IPython kernel runs and the environment
        variable ``XCLIB_BUILD`` is unset (the book build sets it).
    xlabel, reference_label : str
        What the x axis counts (``history["epoch"]``: epochs, or batches, passes, ...) and the
        name of the reference line (say which optimum: its ridge, its solver).
    n_jobs : int or None
        Runs of the precomputed sweep at once, in worker processes (``None``: one per core);
        see :func:`sweep_learning_rates`. The live controls always fit here.

    Returns
    -------
    dict ``{method: {rate: history}}`` (the unnamed method is ``""``); each history is a dict of
    arrays plus ``"diverged"``.
    """
    from IPython.display import HTML, display

    n_epochs = int(n_epochs)
    if n_epochs < 1:
        raise ValueError(f"n_epochs must be >= 1, got {n_epochs}")
    rates = _check_rates(rates)
    sweep = sweep_learning_rates(run, rates, methods, n_epochs, metric, n_jobs=n_jobs)
    display(HTML(sweep_html(sweep, n_epochs, metric, reference, ylabel, title, logy,
                            xlabel=xlabel, reference_label=reference_label)))
    if live is None:
        live = _in_kernel() and not os.environ.get("XCLIB_BUILD")
    if live:
        ylim = _limits(sweep, metric, reference, logy)
        _live_controls(run, rates, list(sweep), n_epochs, metric, reference, ylabel, title,
                       logy, ylim, labels=(xlabel, reference_label))
    return sweep
