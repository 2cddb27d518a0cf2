"""Tests of the learning-rate explorer (xclib/book/explorer.py)."""
import re
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from xclib.base import DivergenceWarning  # noqa: E402
from xclib.book.explorer import (  # noqa: E402
    explore_learning_rates,
    offline_jshtml,
    sweep_html,
    sweep_learning_rates,
)


def gd_history(method, rate, n_epochs):
    """Gradient descent on f(w) = w²/2 from w = 1 (step 'rate'): diverges for rate > 2."""
    w, epochs, losses = 1.0, [], []
    scale = 2.0 if method == "double" else 1.0
    for e in range(1, n_epochs + 1):
        w = w - scale * rate * w
        loss = 0.5 * w * w
        if not np.isfinite(loss) or loss > 1e6:
            warnings.warn("blew up", DivergenceWarning)
            break
        epochs.append(e)
        losses.append(loss)
    return {"epoch": epochs, "train_loss": losses}


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, method, rate, n_epochs):
        self.calls.append((method, rate, n_epochs))
        return gd_history(method, rate, n_epochs)


def test_sweep_calls_run_for_every_pair():
    rec = Recorder()
    rates = [0.5, 0.1, 1.0]
    sweep = sweep_learning_rates(rec, rates, ["plain", "double"], n_epochs=4)
    assert sorted(rec.calls) == sorted(
        (m, r, 4) for m in ["plain", "double"] for r in rates
    )
    assert list(sweep) == ["plain", "double"]
    assert list(sweep["plain"]) == [0.1, 0.5, 1.0]  # ascending
    h = sweep["plain"][0.5]
    np.testing.assert_allclose(h["train_loss"], [0.5 * 0.5 ** (2 * e) for e in range(1, 5)])
    assert not h["diverged"]


def test_unnamed_method_gets_none():
    rec = Recorder()
    sweep = sweep_learning_rates(rec, [0.1], None, n_epochs=2)
    assert rec.calls == [(None, 0.1, 2)]
    assert list(sweep) == [""]


def test_diverged_runs_are_marked_and_warning_swallowed():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)  # must not escape the sweep
        sweep = sweep_learning_rates(gd_history, [0.5, 5.0], ["plain"], n_epochs=30)
    assert not sweep["plain"][0.5]["diverged"]
    assert sweep["plain"][5.0]["diverged"]
    assert len(sweep["plain"][5.0]["epoch"]) < 30


def test_nan_history_and_arithmetic_error_count_as_diverged():
    def run(method, rate, n):
        if rate > 1:
            raise FloatingPointError("overflow")
        return {"epoch": [1, 2], "train_loss": [1.0, np.nan]}

    sweep = sweep_learning_rates(run, [0.1, 2.0], None, n_epochs=2)
    assert sweep[""][0.1]["diverged"] and sweep[""][2.0]["diverged"]
    assert "type=\"range\"" in sweep_html(sweep, 2)  # drawing them must not fail


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="rates"):
        sweep_learning_rates(gd_history, [], None)
    with pytest.raises(ValueError, match="rates"):
        sweep_learning_rates(gd_history, [0.1, -1.0], None)
    with pytest.raises(KeyError, match="epoch"):
        sweep_learning_rates(lambda m, r, n: {"loss": [1.0]}, [0.1], None)
    with pytest.raises(ValueError, match="n_epochs"):
        explore_learning_rates(gd_history, [0.1], n_epochs=0, live=False)


def _frames(html):
    return sorted({int(i) for i in re.findall(r"frames\[(\d+)\]", html)})


def test_html_is_offline_with_slider_and_one_frame_per_rate():
    sweep = sweep_learning_rates(gd_history, [0.01, 0.1, 1.0, 1.9, 3.0], ["plain", "double"],
                                 n_epochs=8)
    before = set(plt.get_fignums())
    html = sweep_html(sweep, 8, reference=0.0, title="toy", logy=False)
    assert set(plt.get_fignums()) == before  # the figure is closed, not shown as a still
    assert 'type="range"' in html
    assert _frames(html) == list(range(5))
    assert not re.search(r"""(href|src)\s*=\s*["']?https?:""", html)
    assert "font-awesome" not in html and 'class="fa ' not in html
    assert "maxcdn" not in html


def test_offline_jshtml_replaces_icons():
    raw = ('<link rel="stylesheet"\nhref="https://maxcdn.bootstrapcdn.com/font-awesome/4.4.0/'
           'css/font-awesome.min.css"><button><i class="fa fa-play"></i></button>'
           '<button><i class="fa fa-play fa-flip-horizontal"></i></button>')
    out = offline_jshtml(raw)
    assert "http" not in out
    assert "&#9654;" in out and "&#9664;" in out
    with pytest.raises(RuntimeError):
        offline_jshtml('<script src="https://cdn.example/x.js"></script>')


def test_explore_returns_sweep_and_displays_html(monkeypatch):
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    sweep = explore_learning_rates(gd_history, [0.1, 0.5, 40.0], ["plain"], n_epochs=5,
                                   reference=1e-3, logy=True, live=False)
    assert set(sweep["plain"]) == {0.1, 0.5, 40.0}
    assert sweep["plain"][40.0]["diverged"]
    assert len(shown) == 1 and 'type="range"' in shown[0].data


def test_accepts_estimator_history():
    class Est:
        history_ = {"epoch": [1, 2, 3], "time": [0.1, 0.2, 0.3],
                    "train_loss": [2.0, 1.5, 1.2], "train_error": [0.5, 0.4, 0.3]}
        diverged_ = False

    sweep = sweep_learning_rates(lambda m, r, n: Est(), [0.1], ["sgd"], n_epochs=3,
                                 metric="train_error")
    np.testing.assert_allclose(sweep["sgd"][0.1]["train_error"], [0.5, 0.4, 0.3])
    assert not sweep["sgd"][0.1]["diverged"]


def test_live_controls_rerun_the_fit(monkeypatch):
    """The ipywidgets path (used live in Jupyter): controls exist and re-run ``run``."""
    ipywidgets = pytest.importorskip("ipywidgets")
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    monkeypatch.setattr(plt, "show", lambda *a, **k: None)
    rec = Recorder()
    explore_learning_rates(rec, [0.1, 1.0], ["plain", "double"], n_epochs=3, live=True)
    assert len(rec.calls) == 4 + 2  # the sweep, then the first live draw ("all methods")
    box = next(o for o in shown if isinstance(o, ipywidgets.VBox))
    assert any("data-lm-suppress-shortcuts" in getattr(o, "data", "") or "" for o in shown)
    controls = box.children[1].children
    kinds = {type(w).__name__ for w in controls}
    assert kinds == {"Dropdown", "FloatLogSlider", "IntSlider"}
    before = len(rec.calls)
    rate = next(w for w in controls if type(w).__name__ == "FloatLogSlider")
    rate.value = 0.5
    assert len(rec.calls) > before and rec.calls[-1][1] == pytest.approx(0.5)


def test_live_default_off_in_build(monkeypatch):
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: None)
    monkeypatch.setenv("XCLIB_BUILD", "1")
    rec = Recorder()
    explore_learning_rates(rec, [0.1], None, n_epochs=2)
    assert len(rec.calls) == 1  # sweep only, no live re-run


class _Status:
    value = ""


def test_live_refit_coalesces_a_burst_into_one_fit_for_the_last_value():
    """Five quick changes on a running event loop: "fitting…" at once, one fit, last value."""
    import asyncio

    from xclib.book.explorer import LiveRefit

    seen, current = [], {"rate": None}

    def fit():
        seen.append(current["rate"])
        return f"rate {current['rate']}"

    status = _Status()
    refit = LiveRefit(fit, status, delay=0.05)

    async def burst():
        for rate in (0.1, 0.2, 0.3, 0.4, 0.5):
            current["rate"] = rate
            refit.request()
            assert status.value.startswith("fitting")
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)

    asyncio.run(burst())
    assert seen == [0.5] and refit.n_fits == 1 and status.value == "rate 0.5"


def test_live_refit_without_loop_fits_at_once_and_reports_errors():
    from xclib.book.explorer import LiveRefit

    status = _Status()
    refit = LiveRefit(lambda: 1 / 0, status)
    refit.request()
    assert refit.n_fits == 1 and status.value.startswith("error: ZeroDivisionError")


def test_js_slider_is_shielded_from_notebook_shortcuts():
    sweep = sweep_learning_rates(gd_history, [0.1, 1.0], None, n_epochs=2)
    html = sweep_html(sweep, 2)
    assert html.startswith('<div class="xclib-sweep" data-lm-suppress-shortcuts="true">')
    # Lumino matches the focused control itself before it looks at its ancestors: each
    # control must carry the attribute too
    controls = re.findall(r"<(?:input|button|select)\b[^>]*>", html)
    assert controls and all("data-lm-suppress-shortcuts" in c for c in controls)
    assert any('type="range"' in c for c in controls)


def test_sweep_in_worker_processes_matches_the_serial_sweep():
    def run(method, rate, n_epochs):  # a closure: pickled by value for the workers
        import warnings as w

        from xclib.base import DivergenceWarning as DW

        if method == "warns":
            w.warn("a user warning from a run", UserWarning)
        loss = [0.5 * (1 - rate) ** (2 * e) for e in range(1, n_epochs + 1)]
        if rate > 2:
            w.warn("diverged", DW)
            loss = loss[:2]
        return {"epoch": list(range(1, len(loss) + 1)), "train_loss": loss}

    serial = sweep_learning_rates(run, [0.1, 3.0], ["plain"], n_epochs=4)
    with pytest.warns(UserWarning, match="a user warning"):
        parallel = sweep_learning_rates(run, [0.1, 3.0], ["plain", "warns"], n_epochs=4,
                                        n_jobs=2)
    for rate in (0.1, 3.0):
        a, b = serial["plain"][rate], parallel["plain"][rate]
        assert a["diverged"] == b["diverged"] == (rate > 2)
        np.testing.assert_array_equal(a["train_loss"], b["train_loss"])
