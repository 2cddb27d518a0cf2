"""The rendered book: a clean Sphinx log, and every page checked in headless Chromium.

Chromium is driven with the Chrome DevTools Protocol over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON), so no Python package beyond the standard library is
needed. Pages are served from a local http server; every network request a page makes is
recorded and must stay on localhost. One screenshot lands in ``_build/screenshots/``.
"""
from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import BUILD, ROOT, toc_entries

pytestmark = pytest.mark.browser
ALLOWED_WARNINGS = ROOT / "tools" / "allowed-warnings.txt"
PAGES = toc_entries()
NOTEBOOK_PAGES = [e for e in PAGES if e.startswith("notebooks/")]
#: notebook pages that measure the kernels instead of fitting a model: no rate explorer
MEASUREMENT_PAGES = {"notebooks/06_performance"}


# --------------------------------------------------------------------------- page content
BARE_NUMBER = re.compile(r"^\s*(np\.(float|int|bool)\w*\()?\(?[-+]?(\d[\d_]*\.?\d*|\.\d+)"
                         r"([eE][-+]?\d+)?\)?\s*$|^\s*(True|False|None)\s*$")


def _page(html_dir, entry):
    from bs4 import BeautifulSoup

    path = html_dir / f"{entry}.html"
    assert path.exists(), f"{path.relative_to(html_dir)} missing from the build"
    return BeautifulSoup(path.read_text(errors="replace"), "html.parser")


def _words(text):
    return " ".join(text.split())


@pytest.mark.parametrize("entry", NOTEBOOK_PAGES)
def test_claim_tables_are_complete(html_dir, entry):
    """The reproduction check shows every claim in full (no truncated cells), with a status."""
    results = BUILD / "results" / f"{Path(entry).name}.json"
    if not results.exists():
        pytest.skip(f"no results for {entry}")
    claims = json.loads(results.read_text()).get("claims", [])
    tables = _page(html_dir, entry).select("table.reproduction-check")
    assert tables, f"{entry}: no reproduction-check table on the page"
    shown = _words(" ".join(t.get_text(" ") for t in tables))
    missing = [c["claim"] for c in claims if _words(c["claim"]) not in shown]
    assert not missing, f"{entry}: claims not shown in full: {missing}"
    statuses = [c["status"] for c in claims if c["status"] not in shown]
    assert not statuses, f"{entry}: statuses missing from the table: {statuses}"


@pytest.mark.parametrize("entry", NOTEBOOK_PAGES)
def test_no_bare_numbers_under_code_cells(html_dir, entry):
    """A code cell's output is a figure, a table or prose: never a stray value like ``1.0``."""
    soup = _page(html_dir, entry)
    stray = []
    for out in soup.select("div.cell_output"):
        for pre in out.select("pre"):
            text = pre.get_text()
            if BARE_NUMBER.match(text):
                stray.append(text.strip()[:60])
    assert not stray, f"{entry}: bare values printed under code cells: {stray}"


# --------------------------------------------------------------------------- build log
def test_build_has_no_unexpected_warnings(html_dir):
    path = BUILD / "sphinx-warnings.txt"
    assert path.exists(), "run `make test` (it builds first): _build/sphinx-warnings.txt missing"
    allowed = [re.compile(line.strip()) for line in ALLOWED_WARNINGS.read_text().splitlines()
               if line.strip() and not line.lstrip().startswith("#")]
    unexpected = [w for w in path.read_text().splitlines()
                  if w.strip() and not any(p.search(w) for p in allowed)]
    assert not unexpected, (f"{len(unexpected)} Sphinx warning(s) not in "
                            f"{ALLOWED_WARNINGS.relative_to(ROOT)}:\n" + "\n".join(unexpected))


def test_html_references_no_remote_assets(html_dir):
    """Scripts, stylesheets, images and frames come from the book itself (links may go out)."""
    pattern = re.compile(r"<(script|img|iframe|source|link)\b[^>]*?\b(src|href)\s*=\s*"
                         r"[\"']?\s*(https?:)?//", re.I)
    offenders = {}
    for page in html_dir.rglob("*.html"):
        for m in pattern.finditer(page.read_text(errors="replace")):
            tag = page.read_text(errors="replace")[m.start():m.start() + 200]
            if m.group(1).lower() == "link" and not re.search(
                    r"rel\s*=\s*[\"']?(stylesheet|preload|icon|modulepreload)", tag, re.I):
                continue
            offenders.setdefault(str(page.relative_to(html_dir)), []).append(tag.split(">")[0])
    assert not offenders, f"pages load remote assets: {json.dumps(offenders, indent=1)[:3000]}"


# --------------------------------------------------------------------------- Chromium over CDP
def find_chromium():
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Chromium:
    """Minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe``."""

    def __init__(self, executable, profile):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds():  # Chromium reads commands on fd 3 and writes replies on fd 4
            a, b = os.dup(to_chrome_r) + 100, os.dup(from_chrome_w) + 100
            os.dup2(to_chrome_r, a)
            os.dup2(from_chrome_w, b)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = open(Path(profile) / "chromium.log", "wb")
        self.proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--disable-default-apps", "--metrics-recording-only", "--mute-audio",
             "--disable-features=Translate,OptimizationHints,MediaRouter",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "--window-size=1280,900",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=child_fds, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._replies = {}
        self.events = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._replies[None] = "closed"
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cond.notify_all()

    def send(self, method, params=None, session=None, timeout=60):
        with self._cond:
            self._next_id += 1
            mid = self._next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._replies:
                if None in self._replies:
                    raise RuntimeError(f"Chromium exited (log: {self.log.name})")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no reply to {method} within {timeout} s")
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method, session, start, timeout=60):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for ev in self.events[start:]:
                    if ev.get("method") == method and ev.get("sessionId") == session:
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {method} within {timeout} s")
                self._cond.wait(left)

    def evaluate(self, expression, session, timeout=60):
        result = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, session, timeout)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome,):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


# What a page shows once MathJax has finished: math, images, sliders, widgets.
INSPECT = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const t0 = Date.now();
  const hasMath = document.querySelectorAll('.math').length;
  if (hasMath) {
    while (!(window.MathJax && MathJax.startup && MathJax.startup.promise) && Date.now() - t0 < 30000) await sleep(100);
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  }
  const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  while (views && !document.querySelector('.jupyter-widgets') && Date.now() - t0 < 30000) await sleep(100);
  await sleep(300);
  const imgs = Array.from(document.querySelectorAll('main img, article img, .bd-article img'));
  for (const img of imgs) { if (!img.complete) await new Promise(r => { img.onload = img.onerror = r; setTimeout(r, 5000); }); }
  return {
    math: hasMath,
    mjx: document.querySelectorAll('mjx-container').length,
    mathErrors: document.querySelectorAll('mjx-merror, .MathJax_Error').length,
    images: imgs.map(i => ({src: i.src.slice(0, 120), ok: i.complete && i.naturalWidth > 0})),
    sliders: document.querySelectorAll('input[type=range]').length,
    widgetViews: views,
    widgetsRendered: document.querySelectorAll('.jupyter-widgets').length,
    title: document.title,
  };
})()
"""

# Move every JS-animation slider (matplotlib to_jshtml) and report whether its frame changed.
SLIDE = r"""
(async () => {
  const out = [];
  for (const s of document.querySelectorAll('input[type=range]')) {
    const box = s.closest('.animation') || s.parentElement.parentElement;
    const img = box && box.querySelector('img');
    const before = img ? img.src : null;
    const target = (parseInt(s.value) === parseInt(s.max)) ? parseInt(s.min) : parseInt(s.max);
    s.value = String(target);
    s.dispatchEvent(new Event('input', {bubbles: true}));
    s.dispatchEvent(new Event('change', {bubbles: true}));
    await new Promise(r => setTimeout(r, 300));
    out.push({id: s.id, frames: parseInt(s.max) - parseInt(s.min) + 1,
              changed: !!img && img.src !== before});
  }
  return out;
})()
"""


@pytest.fixture(scope="module")
def browser(html_dir):
    exe = find_chromium()
    if exe is None:
        pytest.fail("Chromium not found: `apt-get install -y chromium` (make test does this "
                    "when run as root) or set CHROMIUM=/path/to/chromium", pytrace=False)
    profile = tempfile.mkdtemp(prefix="book-chromium-")
    chrome = Chromium(exe, profile)  # started before the server thread (fork + threads)
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        target = chrome.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = chrome.send("Target.attachToTarget",
                              {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime"):
            chrome.send(f"{domain}.enable", session=session)
        chrome.send("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session)
        yield {"chrome": chrome, "session": session,
               "base": f"http://127.0.0.1:{server.server_address[1]}/", "visits": {}}
    finally:
        server.shutdown()
        chrome.close()
        shutil.rmtree(profile, ignore_errors=True)


def visit(browser, page):
    """Open ``page`` once; return what it requested and showed (cached per page)."""
    if page in browser["visits"]:
        return browser["visits"][page]
    chrome, session = browser["chrome"], browser["session"]
    html = BUILD / "html" / f"{page}.html"
    if not html.exists():
        pytest.fail(f"{page}.html is missing from _build/html (is it in the build?)",
                    pytrace=False)
    start = len(chrome.events)
    chrome.send("Page.navigate", {"url": browser["base"] + f"{page}.html"}, session)
    chrome.wait_event("Page.loadEventFired", session, start, timeout=90)
    state = chrome.evaluate(INSPECT, session, timeout=90)
    state["slides"] = chrome.evaluate(SLIDE, session) if state["sliders"] else []
    events = chrome.events[start:]
    state["requests"] = [e["params"]["request"]["url"] for e in events
                         if e.get("method") == "Network.requestWillBeSent"]
    state["failed"] = [e["params"].get("errorText") for e in events
                       if e.get("method") == "Network.loadingFailed"
                       and not e["params"].get("canceled")]
    state["missing"] = [f'{e["params"]["response"]["status"]} {e["params"]["response"]["url"]}'
                        for e in events if e.get("method") == "Network.responseReceived"
                        and e["params"]["response"]["status"] >= 400
                        and not e["params"]["response"]["url"].endswith("/favicon.ico")]
    state["exceptions"] = [e["params"]["exceptionDetails"].get("exception", {}).get(
        "description", e["params"]["exceptionDetails"].get("text"))[:500]
        for e in events if e.get("method") == "Runtime.exceptionThrown"]
    if not browser["visits"] or page.startswith("notebooks/") and not any(
            p.startswith("notebooks/") for p in browser["visits"]):
        shot = chrome.send("Page.captureScreenshot", {"format": "png"}, session)
        out = BUILD / "screenshots" / (page.replace("/", "_") + ".png")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(shot["data"]))
    browser["visits"][page] = state
    return state


def _local(url, base):
    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob", "about", "chrome", "chrome-extension"):
        return True
    return parsed.hostname in ("127.0.0.1", "localhost", "::1") and url.startswith(base)


@pytest.mark.parametrize("page", PAGES)
def test_page_makes_no_remote_requests(browser, page):
    state = visit(browser, page)
    remote = sorted({u for u in state["requests"] if not _local(u, browser["base"])})
    assert not remote, f"{page}: requests leave the machine: {remote}"


@pytest.mark.parametrize("page", PAGES)
def test_page_math_is_typeset(browser, page):
    state = visit(browser, page)
    if not state["math"]:
        pytest.skip(f"{page} has no math")
    assert state["mjx"] > 0, f"{page}: {state['math']} math elements but MathJax typeset none"
    assert state["mathErrors"] == 0, f"{page}: {state['mathErrors']} MathJax errors"


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_cleanly(browser, page):
    """Images load, every file the page asks for exists, no JavaScript error, widgets drawn."""
    state = visit(browser, page)
    assert not state["missing"], f"{page}: requests that failed: {state['missing']}"
    assert not state["failed"], f"{page}: loads that failed: {state['failed']}"
    broken = [i["src"] for i in state["images"] if not i["ok"]]
    assert not broken, f"{page}: images that did not load: {broken}"
    assert not state["exceptions"], f"{page}: JavaScript errors: {state['exceptions']}"
    if state["widgetViews"]:
        assert state["widgetsRendered"], \
            f"{page}: {state['widgetViews']} embedded widgets but the widget manager drew none"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_chapter_has_figures_and_a_working_rate_slider(browser, page):
    state = visit(browser, page)
    assert state["images"], f"{page}: a chapter without figures"
    if page in MEASUREMENT_PAGES:
        return
    assert state["slides"], f"{page}: no learning-rate slider (input[type=range])"
    stuck = [s for s in state["slides"] if s["frames"] > 1 and not s["changed"]]
    assert not stuck, f"{page}: moving the slider did not change the frame: {stuck}"
    assert (BUILD / "screenshots").is_dir() and any((BUILD / "screenshots").glob("*.png"))
