"""Section "browser": what the eye sees in a real Chromium, timed inside the page.

A Streamlit server of our own (a free loopback port, output to a log file, stopped at the end)
and Debian's chromium driven by Playwright. Two measurements, each a median of 5: a control
change until every plotly figure of the page shows its new data (Heads, Step by step), and a
shared link opened in a fresh browser until its first heatmap is on screen (warm and cold
server), split into parts with Navigation/Resource Timing and marks taken in the page. Times are
read with ``performance.now()`` in the page, so Playwright's own round trips are not counted.
The server and Chromium come from tools/launch.py; the page scripts and the timed changes here are
used by the "load" and "memory" sections too.
"""

from __future__ import annotations

import asyncio
import gzip
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bench.processes import cpu_seconds, descendants_cpu_seconds
from bench.report import skipped_row
from tools.launch import chromium_context, missing_browser, run_coroutine, streamlit_server

CHART_KEY = "heads_grid"  # the Heads page's figure of every head
HEAD_CHOICES = (2, 8, 1, 16, 4)  # divisors of the default d_model 16, visited in turn
# Issue 11's goals for what the eye sees, each against a median of FULL_SAMPLES.
GOAL_HEADS_MS = 250.0  # a control change on Heads, every figure redrawn
GOAL_STEP_BY_STEP_MS = 400.0  # the same on Step by step
GOAL_FIRST_HEATMAP_MS = 2500.0  # a shared link opened to its first heatmap
FULL_SAMPLES = 5
QUICK_SAMPLES = 1  # CI: a smoke run of every measurement, not a measurement
QUIET_S = 1.0  # no figure changed for this long after the script's run: the page has finished drawing
QUICK_QUIET_S = 0.5
LINK_QUERY = "?seed=3"  # the shared link: the Heads page with a setting in its URL
HEATMAP_SELECTOR = ".js-plotly-plot .hm image"  # plotly draws a heatmap's cells as one <image>
# A live chart (static/mha/live.js) says which figure is on screen, drawn on its canvas first or by plotly:
# data-mha-shown holds the figure's digest once either has drawn it, data-mha-plotly once plotly has.
SHOWN_SELECTOR = "[data-mha-shown]"

# Installed in every page before the app loads: when the user last pressed a pointer or a key, or picked an option
# of a native <select> (its "input" event: the option list is the browser's own, no pointer event of the pick reaches
# the page), and a fingerprint of a live figure's z data (plotly 7 sends numpy arrays as base64 "bdata"); y for bars.
PAGE_SCRIPT = """
window.__mhaChangeAt = null;
window.__mhaChanged = new Set();
const mhaInput = () => {
  window.__mhaChangeAt = performance.now();
  window.__mhaFirstRedraw = window.__mhaLastRedraw = window.__mhaLastPlotly = null;
  window.__mhaChanged = new Set();
};
for (const type of ["pointerdown", "keydown"]) window.addEventListener(type, mhaInput, true);
window.addEventListener("input", event => { if (event.target instanceof HTMLSelectElement) mhaInput(); }, true);
window.__mhaFingerprint = key => {
  const box = document.querySelector(`.st-key-${key} [data-testid="stPlotlyChart"][data-mha-shown]`);
  if (box) return `shown:${box.dataset.mhaShown}`;
  const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  if (!el || !el.data || !el.data.length) return null;
  let hash = 0;
  for (const trace of el.data) {
    const z = trace.z;
    const text = z && typeof z.bdata === "string" ? z.bdata : JSON.stringify(z);
    for (let i = 0; i < text.length; i++) hash = (Math.imul(hash, 31) + text.charCodeAt(i)) | 0;
  }
  return `${el.data.length}:${hash}`;
};
// Every figure on the page, watched each animation frame once __mhaWatch() has run: after the last
// input, when the first and the last figure showed new data (or a new figure was drawn), and which
// figures did; and when plotly last finished drawing one (a live chart's canvas shows the data before).
// Figures are told apart by their chart element: a rerun may add or remove figures.
window.__mhaHash = el => {
  let hash = 0;
  for (const trace of el.data || []) {
    const values = trace.z ?? trace.y ?? null;  // a heatmap's cells, a bar chart's bars
    const text = values && typeof values.bdata === "string" ? values.bdata : JSON.stringify(values);
    for (let j = 0; j < text.length; j++) hash = (Math.imul(hash, 31) + text.charCodeAt(j)) | 0;
  }
  return hash;
};
const mhaPlotted = box => {  // plotly's figure in a chart element (st.plotly_chart or a live chart), or null
  const el = box.querySelector('.js-plotly-plot');
  return el && el.data && el.data.length ? window.__mhaHash(el) : null;
};
window.__mhaShownHash = box => box.dataset.mhaShown ?? mhaPlotted(box);
window.__mhaPlotlyHash = box => (box.dataset.mhaShown === undefined ? mhaPlotted(box) : box.dataset.mhaPlotly ?? null);
window.__mhaWatch = () => {
  const seen = new WeakMap(), plotted = new WeakMap();
  const figures = () => document.querySelectorAll('[data-testid="stPlotlyChart"]');
  const changed = (map, box, hash) => {  // a new figure in the element, or a first one after an input
    const before = map.get(box);
    if (hash !== null) map.set(box, hash);
    return hash !== null && (before !== undefined ? hash !== before : window.__mhaChangeAt !== null);
  };
  const tick = () => {
    const at = performance.now();
    for (const box of figures()) {
      if (changed(seen, box, window.__mhaShownHash(box))) {
        window.__mhaChanged.add(box); window.__mhaFirstRedraw ??= at; window.__mhaLastRedraw = at;
      }
      if (changed(plotted, box, window.__mhaPlotlyHash(box))) window.__mhaLastPlotly = at;
    }
    requestAnimationFrame(tick);
  };
  for (const box of figures()) { changed(seen, box, window.__mhaShownHash(box)); changed(plotted, box, window.__mhaPlotlyHash(box)); }
  requestAnimationFrame(tick);
};
"""
# Truthy (the latency in ms) once the figure differs from the fingerprint taken before the change.
CHANGED_JS = """([key, before]) => {
  const now = window.__mhaFingerprint(key);
  return now !== null && now !== before ? Math.max(performance.now() - window.__mhaChangeAt, 1e-3) : null;
}"""
DRAWN_JS = "key => window.__mhaFingerprint(key) !== null"
# Installed in a fresh browser before a shared link opens: when each stage of the page first shows in the
# DOM (a MutationObserver, so a mark is taken at the end of the script task that made the element), and the
# websocket's first message (the server has started our script). "heatmap": the first heatmap on screen, a live
# chart's canvas or plotly's image; "plotly_heatmap": plotly's. Compared with performance.now(), whose zero is the
# navigation's start.
OPENING_SCRIPT = f"const mhaHeatmap = '{HEATMAP_SELECTOR}', mhaShown = '{SHOWN_SELECTOR}';" + """
window.__mhaMarks = {};
const mhaMark = name => { if (!(name in window.__mhaMarks)) window.__mhaMarks[name] = performance.now(); };
const mhaStages = {shell: '[data-testid="stApp"]', chart: '[data-testid="stPlotlyChart"] .js-plotly-plot'};
const mhaObserver = new MutationObserver(() => {
  for (const [name, selector] of Object.entries(mhaStages)) if (document.querySelector(selector)) mhaMark(name);
  if (document.querySelector(mhaShown) || document.querySelector(mhaHeatmap)) {
    requestAnimationFrame(() => mhaMark("heatmap"));  // the frame that puts it on screen
  }
  if (document.querySelector(mhaHeatmap)) {
    mhaObserver.disconnect();
    requestAnimationFrame(() => { mhaMark("heatmap"); mhaMark("plotly_heatmap"); });
  }
});
mhaObserver.observe(document, {childList: true, subtree: true, attributes: true, attributeFilter: ["data-mha-shown"]});
window.__mhaLongTasks = [];
new PerformanceObserver(list => {
  for (const task of list.getEntries()) window.__mhaLongTasks.push([task.startTime, task.duration]);
}).observe({type: "longtask", buffered: true});
const MhaSocket = window.WebSocket;
window.WebSocket = class extends MhaSocket {
  constructor(...args) { super(...args); this.addEventListener("message", () => mhaMark("session")); }
};
"""
# Read once the heatmap is on screen: the marks, and the PlotlyChart chunk's Resource Timing entry.
OPENING_JS = """() => {
  const marks = window.__mhaMarks;
  // plotly.js: Streamlit's PlotlyChart chunk (st.plotly_chart), or the live charts' file (ui/widgets/live.py)
  const chunk = performance.getEntriesByType("resource").find(
    entry => /\\/PlotlyChart[^/]*\\.js$|\\/app\\/static\\/plotly[^/]*\\.js$/.test(entry.name));
  const bundle = performance.getEntriesByType("resource").find(entry => /\\/index[^/]*\\.js$/.test(entry.name));
  const page = performance.getEntriesByType("navigation")[0];
  if (!chunk || !bundle) return null;
  const longest = Math.max(0, ...window.__mhaLongTasks
    .filter(([start]) => start >= chunk.responseEnd && start < marks.chart).map(([, duration]) => duration));
  return {html_end: page.responseEnd, dom_loaded: page.domContentLoadedEventEnd, bundle_end: bundle.responseEnd,
          bundle_kb: bundle.transferSize / 1024, chunk_longest_task: longest, shell: marks.shell,
          session: marks.session, chunk_start: chunk.startTime, chunk_end: chunk.responseEnd,
          chart: marks.chart, heatmap: marks.heatmap, plotly_heatmap: marks.plotly_heatmap, chunk_transfer_kb: chunk.transferSize / 1024,
          chunk_encoded_kb: chunk.encodedBodySize / 1024, chunk_decoded_kb: chunk.decodedBodySize / 1024};
}"""
IDLE_SELECTOR = '[data-testid="stApp"][data-test-script-state="notRunning"]'
EXCEPTION_SELECTOR = '[data-testid="stException"]'


async def wait_idle(page, timeout_ms: float) -> None:
    """Wait until the app's script has finished its run."""
    await page.wait_for_selector(IDLE_SELECTOR, timeout=timeout_ms)


async def open_heads(page, url: str, query: str, timeout_ms: float) -> float:
    """Load the Heads page (``query`` like "?seed=3") and wait for its figure: milliseconds to the first heatmap."""
    start = time.perf_counter()
    await page.goto(f"{url}/{query}", timeout=timeout_ms)
    await page.wait_for_function(DRAWN_JS, arg=CHART_KEY, timeout=timeout_ms, polling="raf")
    elapsed = (time.perf_counter() - start) * 1e3
    await wait_idle(page, timeout_ms)
    return elapsed


# The Seed box's "+": the app's settings element's (static/mha/controls.js), a floor page's Streamlit number input, or
# the prototype's one-element controls' (bench/one_element_controls.js; floor pages of bench/bench_livechart.py).
SEED_PLUS = ('.st-key-controls [data-key="w_seed"] [data-testid="mhaStepUp"], '
             '.st-key-w_seed [data-testid="stNumberInputStepUp"], '
             '[data-testid="mhaOneControls"] [data-name="seed"] [data-testid="mhaOneStepUp"]')
HEADS_SELECT = '.st-key-controls [data-key="w_heads"] select'  # the settings element's native <select> of heads


async def step_seed(page) -> None:
    """Press the seed's "+" button: a new seed, so the engine runs again (its pointerdown starts the clock)."""
    await page.locator(SEED_PLUS).click()


async def choose_heads(page, heads: int) -> None:
    """Pick ``heads`` in the heads' native <select>, by its label (an option's value is its index).

    The clock starts at the select's "input" event, the moment the option is picked (PAGE_SCRIPT): the browser
    draws a native select's list itself, and Playwright's ``select_option`` sends no pointer or key event. Before,
    Streamlit's selectbox was opened by a click and the clock started at the pointerdown on the option; both are the
    pick, before anything is sent to the server."""
    await page.locator(HEADS_SELECT).select_option(label=str(heads))


def next_heads(current: int, turn: int) -> int:
    """The turn-th entry of HEAD_CHOICES that differs from the current head count."""
    choices = [h for h in HEAD_CHOICES if h != current]
    return choices[turn % len(choices)]


async def timed_change(page, action: Callable[[], Awaitable[None]], timeout_ms: float) -> float:
    """Do ``action`` and wait until the heatmap shows new data: milliseconds from the user's input to it."""
    before = await page.evaluate("key => window.__mhaFingerprint(key)", CHART_KEY)
    await action()
    handle = await page.wait_for_function(CHANGED_JS, arg=[CHART_KEY, before], timeout=timeout_ms, polling="raf")
    latency = float(await handle.json_value())
    await wait_idle(page, timeout_ms)
    return latency


async def exceptions_shown(page) -> int:
    """How many Streamlit exception boxes the page shows."""
    return await page.locator(EXCEPTION_SELECTOR).count()


async def chromium_page(playwright, directory: Path):
    """Debian's chromium with a fresh profile in ``directory``, and its first tab: (context, page)."""
    context = await chromium_context(playwright, directory)
    return context, context.pages[0] if context.pages else await context.new_page()


# What the eye sees after a control change: every figure of the page redrawn.


@dataclass(frozen=True)
class Redraw:
    """One control change, timed in the page from the user's input: the first and the last figure showing
    new data, how many figures did of how many, and the CPU each side spent on the change."""

    first_ms: float
    last_ms: float
    redrawn: int
    charts: int
    server_cpu_ms: float
    browser_cpu_ms: float  # every Chromium process (and Playwright's driver, which is idle meanwhile)
    plotly_ms: float = math.nan  # plotly's last figure drawn (a live chart's canvas shows the data before it)


async def redrawn(page, action: Callable[[], Awaitable[None]], server_pid: int, quiet_s: float,
                  timeout_ms: float) -> Redraw:
    """Do ``action``; wait for a first figure to change, for the script to finish, then for ``quiet_s``
    with no figure changing (the page has drawn everything). CPU read around all of it."""
    server, browser = cpu_seconds(server_pid), descendants_cpu_seconds(os.getpid(), exclude=server_pid)
    await action()
    await page.wait_for_function("() => window.__mhaLastRedraw !== null", timeout=timeout_ms, polling="raf")
    await wait_idle(page, timeout_ms)
    await asyncio.sleep(quiet_s)
    await page.wait_for_function("q => performance.now() - Math.max(window.__mhaLastRedraw, window.__mhaLastPlotly) >= q",
                                 arg=quiet_s * 1e3, timeout=timeout_ms, polling=50)
    server = cpu_seconds(server_pid) - server
    browser = descendants_cpu_seconds(os.getpid(), exclude=server_pid) - browser
    seen = await page.evaluate("""() => [window.__mhaFirstRedraw - window.__mhaChangeAt,
        window.__mhaLastRedraw - window.__mhaChangeAt, [...window.__mhaChanged].filter(el => el.isConnected).length,
        document.querySelectorAll('[data-testid="stPlotlyChart"]').length,
        window.__mhaLastPlotly === null ? null : window.__mhaLastPlotly - window.__mhaChangeAt]""")
    first, last, changed, charts, plotly = seen
    return Redraw(float(first), float(last), int(changed), int(charts), server * 1e3, browser * 1e3,
                  math.nan if plotly is None else float(plotly))


async def watch(page, timeout_ms: float) -> None:
    """On a page already opened: wait until its script has run and a figure is drawn, start the watcher."""
    await page.wait_for_selector(f"{HEATMAP_SELECTOR}, {SHOWN_SELECTOR}", timeout=timeout_ms, state="attached")
    await wait_idle(page, timeout_ms)
    await page.evaluate("() => window.__mhaWatch()")


async def heads_redraws(page, samples: int, warm_up: bool, server_pid: int, quiet_s: float,
                        timeout_ms: float) -> dict[str, list[Redraw]]:
    """On Heads (opened in ``page``): ``samples`` seed steps and ``samples`` head-count picks, interleaved."""
    await watch(page, timeout_ms)
    if warm_up:
        await redrawn(page, lambda: step_seed(page), server_pid, quiet_s, timeout_ms)
    measured: dict[str, list[Redraw]] = {"seed": [], "heads": []}
    heads = 4  # the default
    for turn in range(samples):
        measured["seed"].append(await redrawn(page, lambda: step_seed(page), server_pid, quiet_s, timeout_ms))
        heads = next_heads(heads, turn)
        action = lambda h=heads: choose_heads(page, h)  # noqa: E731
        measured["heads"].append(await redrawn(page, action, server_pid, quiet_s, timeout_ms))
    if await exceptions_shown(page):
        raise RuntimeError("the Heads page shows an exception after the changes")
    return measured


async def step_by_step_redraws(page, samples: int, warm_up: bool, server_pid: int, quiet_s: float,
                               timeout_ms: float) -> list[Redraw]:
    """On Step by step (opened in ``page``): ``samples`` seed steps (every figure of the page changes)."""
    await watch(page, timeout_ms)
    measured = []
    for _ in range(samples + warm_up):
        measured.append(await redrawn(page, lambda: step_seed(page), server_pid, quiet_s, timeout_ms))
    if await exceptions_shown(page):
        raise RuntimeError("the Step-by-step page shows an exception after the changes")
    return measured[warm_up:]


# What the eye sees after opening a shared link: the first heatmap, in parts timed by the browser.


@dataclass(frozen=True)
class Opening:
    """A shared link opened in a fresh browser: milliseconds from the navigation's start (performance.now()
    of the new document) to each mark, and the PlotlyChart chunk's sizes from Resource Timing."""

    html_end: float  # Navigation Timing: the HTML received (responseEnd)
    dom_loaded: float  # Navigation Timing: domContentLoadedEventEnd (Streamlit's module scripts have run)
    bundle_end: float  # Resource Timing: Streamlit's main bundle (index*.js) received
    bundle_kb: float  # its bytes over the wire
    chunk_longest_task: float  # the longest task (PerformanceObserver "longtask") between the chunk and the chart
    shell: float  # Streamlit's own page mounted: [data-testid="stApp"] in the DOM
    session: float  # the websocket's first message: the server has started our script for this session
    chunk_start: float  # the PlotlyChart chunk requested: our script's first chart has reached the page
    chunk_end: float  # its last byte received
    chart: float  # plotly's graph div (.js-plotly-plot) in a chart element: plotly.js has run and started drawing
    heatmap: float  # the first animation frame with a heatmap on screen: a live chart's canvas, or plotly's image
    plotly_heatmap: float  # the first animation frame after plotly drew a heatmap's image
    chunk_transfer_kb: float  # bytes over the wire (headers included), as Resource Timing reports them
    chunk_encoded_kb: float  # the body as sent (compressed if it was)
    chunk_decoded_kb: float  # the body after decoding


async def fresh_tab(playwright, directory: Path):
    """A fresh chromium (new profile in ``directory``: empty cache, a new session) with the page scripts that
    time an opening and the changes after it: (context, page)."""
    directory.mkdir(parents=True, exist_ok=True)
    context, page = await chromium_page(playwright, directory)
    await context.add_init_script(PAGE_SCRIPT + OPENING_SCRIPT)
    return context, page


async def open_link(page, url: str, query: str, timeout_ms: float) -> Opening:
    """Open ``url``/``query`` in a fresh tab (see fresh_tab) and wait for the first heatmap; its Opening."""
    await page.goto(f"{url}/{query}", timeout=timeout_ms, wait_until="commit")
    await page.wait_for_function("() => 'plotly_heatmap' in window.__mhaMarks", timeout=timeout_ms, polling=50)
    marks = await page.evaluate(OPENING_JS)
    if marks is None:
        raise RuntimeError("no plotly.js (PlotlyChart*.js, app/static/plotly*.js) or index*.js in the page's "
                           "Resource Timing: did Streamlit rename them?")
    return Opening(**{name: float(value) for name, value in marks.items()})  # JSON gives 3854 for 3854.0


async def opened(playwright, url: str, directory: Path, timeout_ms: float) -> Opening:
    """The shared link opened once in a fresh chromium, closed after."""
    context, page = await fresh_tab(playwright, directory)
    try:
        return await open_link(page, url, LINK_QUERY, timeout_ms)
    finally:
        await context.close()


OPENING_PARTS = (  # (row name, start mark, end mark): contiguous, so the parts add up to the whole
    ("Streamlit's page: its bundle until the app skeleton", None, "shell"),
    ("wait for our script: session, then its run to the first chart", "shell", "chunk_start"),
    ("plotly.js (PlotlyChart chunk or live charts' file): download, parse, run", "chunk_start", "chart"),
    ("plotly drawing: chart element to plotly's heatmap on screen", "chart", "plotly_heatmap"),
)


def span(opening: Opening, start: str | None, end: str) -> float:
    """Milliseconds between two marks of an opening (from the navigation's start for None)."""
    return getattr(opening, end) - (getattr(opening, start) if start else 0.0)


def goal_columns(median: float, goal_ms: float | None) -> dict:
    """The goal, whether the median meets it, and by how much it misses (or how much room is left)."""
    if goal_ms is None:
        return {"goal": "", "met": None, "note": ""}
    if median <= goal_ms:
        return {"goal": f"<= {goal_ms:.0f} ms", "met": True, "note": f"met, {goal_ms - median:.0f} ms to spare"}
    return {"goal": f"<= {goal_ms:.0f} ms", "met": False,
            "note": f"missed by {median - goal_ms:.0f} ms ({median / goal_ms:.1f}x the goal)"}


def quick_note(samples: int, quick: bool) -> str:
    """Said on every row of a quick run: its medians are of one or two samples, not a measurement."""
    return f"; quick run: {samples} sample{'s' * (samples > 1)}, not a median of {FULL_SAMPLES}" if quick else ""


def redraw_row(measurement: str, measured: list[Redraw], goal_ms: float, quick: bool) -> dict:
    """One table row of control changes: median input-to-last-figure time and its spread, the goal."""
    last = [redraw.last_ms for redraw in measured]
    median = statistics.median(last)
    row = {
        "measurement": measurement,
        "samples": len(last),
        "median_ms": median,
        "min_ms": min(last),
        "max_ms": max(last),
        "first_ms": statistics.median(redraw.first_ms for redraw in measured),
        "charts": f"{min(r.redrawn for r in measured)}/{max(r.charts for r in measured)}",
        "server_cpu_ms": statistics.median(redraw.server_cpu_ms for redraw in measured),
        "browser_cpu_ms": statistics.median(redraw.browser_cpu_ms for redraw in measured),
        "plotly_ms": statistics.median(redraw.plotly_ms for redraw in measured),
    } | goal_columns(median, goal_ms)
    row["note"] += quick_note(len(last), quick)
    return row


def opening_rows(label: str, openings: list[Opening], quick: bool) -> list[dict]:
    """The whole opening (median to the first heatmap, against the goal) and its parts, each a median."""
    totals = [opening.heatmap for opening in openings]
    median = statistics.median(totals)
    whole = {"measurement": f"link to first heatmap, {label}", "samples": len(totals), "median_ms": median,
             "min_ms": min(totals), "max_ms": max(totals)} | goal_columns(median, GOAL_FIRST_HEATMAP_MS)
    whole["note"] += quick_note(len(totals), quick)
    plotted = [opening.plotly_heatmap for opening in openings]
    rows = [whole, {"measurement": "  plotly's heatmap on screen (the parts below add up to it)", "samples": len(plotted),
                    "median_ms": statistics.median(plotted), "min_ms": min(plotted), "max_ms": max(plotted),
                    "note": "the row above: a live chart's canvas, or plotly's heatmap when it came first"}]
    for name, start, end in OPENING_PARTS:
        parts = [span(opening, start, end) for opening in openings]
        rows.append({"measurement": f"  {name}", "samples": len(parts), "median_ms": statistics.median(parts),
                     "min_ms": min(parts), "max_ms": max(parts), "note": part_note(end, openings)})
    return rows


def part_note(end: str, openings: list[Opening]) -> str:
    """What a part of the opening is made of, from the finer marks (medians)."""
    def median(start: str | None, stop: str) -> float:
        return statistics.median(span(opening, start, stop) for opening in openings)

    first = openings[0]
    if end == "shell":
        return (f"HTML {median(None, 'html_end'):.0f} ms, main bundle ({first.bundle_kb:.0f} KB) received "
                f"{median(None, 'bundle_end'):.0f} ms, DOMContentLoaded {median(None, 'dom_loaded'):.0f} ms")
    if end == "chunk_start":
        return (f"websocket to the script's first message {median('shell', 'session'):.0f} ms, "
                f"then the run to the first chart {median('session', 'chunk_start'):.0f} ms")
    if end == "chart":
        compressed = "uncompressed" if first.chunk_encoded_kb >= first.chunk_decoded_kb else "compressed"
        return (f"download {median('chunk_start', 'chunk_end'):.0f} ms ({first.chunk_transfer_kb:.0f} KB over "
                f"the wire, {compressed}; {first.chunk_decoded_kb:.0f} KB of JS; gzip -6 would send "
                f"{gzip_kb(PLOTLY_CHUNK):.0f} KB), then parse + run + mount {median('chunk_end', 'chart'):.0f} ms "
                f"(its longest task {statistics.median(o.chunk_longest_task for o in openings):.0f} ms)")
    return ""


def plotly_chunk() -> Path | None:
    """Streamlit's PlotlyChart chunk (plotly.js bundled), as installed."""
    import streamlit

    found = sorted((Path(streamlit.__file__).parent / "static" / "static" / "js").glob("PlotlyChart*.js"))
    return found[0] if found else None


def gzip_kb(path: Path | None) -> float:
    """KB of ``path`` gzipped at level 6 (what a compressing proxy would send), NaN without the file."""
    if path is None:
        return math.nan
    return len(gzip.compress(path.read_bytes(), compresslevel=6)) / 1024


PLOTLY_CHUNK = plotly_chunk()


async def cold_openings(playwright, count: int, directory: Path, timeout_ms: float) -> list[Opening]:
    """``count`` openings, each on a server of its own that has served nobody yet (its imports still to do)."""
    openings = []
    for index in range(count):
        here = directory / f"cold{index}"
        here.mkdir()
        with streamlit_server(here) as server:
            openings.append(await opened(playwright, server.url, here, timeout_ms))
    return openings


async def browser_rows(quick: bool, directory: Path) -> list[dict]:
    """Start the server and chromium, time the openings and the changes; everything stopped after.

    The changes are made in the tab of the last warm opening (its page already drawn)."""
    from playwright.async_api import async_playwright

    samples = QUICK_SAMPLES if quick else FULL_SAMPLES
    quiet_s = QUICK_QUIET_S if quick else QUIET_S
    timeout_ms = 60_000
    async with async_playwright() as playwright:
        with streamlit_server(directory) as server:
            cold = [await opened(playwright, server.url, directory / "first", timeout_ms)]
            warm = [await opened(playwright, server.url, directory / f"warm{index}", timeout_ms)
                    for index in range(samples - 1)]
            context, page = await fresh_tab(playwright, directory / "changes")
            try:
                warm.append(await open_link(page, server.url, LINK_QUERY, timeout_ms))
                heads = await heads_redraws(page, samples, not quick, server.pid, quiet_s, timeout_ms)
                await page.goto(f"{server.url}/step_by_step", timeout=timeout_ms)
                steps = await step_by_step_redraws(page, samples, not quick, server.pid, quiet_s, timeout_ms)
            finally:
                await context.close()
        cold += await cold_openings(playwright, samples - 1, directory, timeout_ms)
    return [
        redraw_row("Heads: seed +, every figure redrawn", heads["seed"], GOAL_HEADS_MS, quick),
        redraw_row("Heads: heads pick, every figure redrawn", heads["heads"], GOAL_HEADS_MS, quick),
        redraw_row("Step by step: seed +, every figure redrawn", steps, GOAL_STEP_BY_STEP_MS, quick),
        *opening_rows("warm server", warm, quick),
        *opening_rows("cold server", cold, quick),
    ]


def run(quick: bool) -> list[dict]:
    """What the eye sees in Chromium: control change to every figure redrawn, shared link to first heatmap.

    Every row is the median of 5 samples (``min_ms``/``max_ms`` their spread); a quick run (CI) takes
    one sample each and says so in its notes. ``goal``/``met``/``note``: issue 11's goals and by how
    much the median misses them.
    Control changes (default settings, a fresh server, the tab of the last warm opening below): from
    the browser's own pointerdown on the seed's "+" button (or the "input" event of the heads' <select>) to
    the last animation frame in which any figure of the page showed new data (a live chart's
    data-mha-shown digest, set when its canvas or plotly drew it; for st.plotly_chart plotly's z, or y
    for bars; every figure watched each frame, timed inside the page with performance.now(); the run
    waits for the script to finish and then 1 s, 0.5 s in a quick run, with no change, plotly's
    drawing included). ``plotly_ms``: to the last figure plotly finished drawing. ``first_ms``:
    to the first figure redrawn; ``charts``: figures redrawn / on the page (a figure whose data does
    not change is not sent again, so not redrawn); ``server_cpu_ms``/``browser_cpu_ms``: median CPU
    per change of the server process and of all Chromium processes, quiet time included. A full run
    starts each page with one untimed change. Goals: Heads <= 250 ms, Step by step <= 400 ms.
    Link to first heatmap: the Heads page with a seed in its query, opened in a fresh Chromium (new
    profile: empty cache, a new session), from the navigation's start to the first animation frame
    with a heatmap on screen (a live chart's canvas, or plotly's image); the next row to plotly's
    image. "Warm server": a server that has already served a
    session; "cold server": a fresh server (its first session imports the libraries; one server per
    sample). The parts are contiguous, so they add up to plotly's heatmap (each row is a median, so their
    sum is close to the whole's median, not equal): Streamlit's page (its HTML and JS bundle until
    [data-testid="stApp"] is in the DOM); the wait for our script (websocket, session, our script's
    run until its first chart reaches the page and React requests the PlotlyChart chunk); the
    PlotlyChart chunk (plotly.js inside Streamlit's bundle: Resource Timing's startTime to
    responseEnd for the download, then until the chart's [data-testid="stPlotlyChart"] element is in
    the DOM; the longest task in between from a "longtask" PerformanceObserver); plotly drawing (that
    element to the frame after the heatmap's image is drawn). Streamlit 1.67 serves its /static files
    uncompressed on purpose (its gzip middleware skips them); the note gives the chunk's size over
    the wire and gzipped. Goal: <= 2500 ms.
    """
    reason = missing_browser()
    if reason:
        return [skipped_row(reason, measurement="control change to heatmap")]
    with tempfile.TemporaryDirectory(prefix="mha-bench-browser-") as directory:
        return run_coroutine(browser_rows(quick, Path(directory)))


if __name__ == "__main__":
    from bench.report import text_table

    print(text_table(run(quick="--quick" in sys.argv)))
