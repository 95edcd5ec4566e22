"""Where one Seed + goes, on Heads and Step by step: a timeline of the change, in parts, timed in Chromium.

One app server (our own, on loopback), one Chromium tab per page. The page script of the "browser"
section (bench/bench_browser.py: the input's time, every figure watched each animation frame) plus
``TRACE_SCRIPT`` below: every websocket message received (its time and size) and sent (a BackMsg:
a rerun request), the app's script-state changes, and every ``Plotly.react`` call (start, the end of
its synchronous part, the end of its promise). After one untimed press, Seed + is pressed
``samples`` times; each part is the median over those presses, in ms. The parts follow each other:

    input -> first message         the browser's BackMsg, the server starting our script, its first delta
    first -> last message          the rest of the script's run, sent while it runs (script_finished last)
    last message -> first react    Streamlit's React render and the component's own work before plotly
    first react -> last react end  plotly redrawing every chart (its synchronous work summed in react_sync_ms)
    last react end -> on screen    the frame in which the last figure shows its new data

Beside them: reruns and BackMsgs per press, messages and kB received, long tasks (> 50 ms) between the
input and the last redraw, and the server's CPU per press (/proc, 10 ms ticks).

    python -m bench.trace_redraw             # both pages, medians of 5
    python -m bench.trace_redraw --samples 3 --port 8620
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from bench.bench_browser import fresh_tab, redrawn, step_seed, wait_idle, watch
from bench.report import text_table
from tools.launch import app_command, free_port, run_coroutine, running_server

TIMEOUT_MS = 90_000
QUIET_S = 1.0
PAGES = (("Heads", "?seed=3"), ("Step by step", "step_by_step?seed=3"))

# Installed before the app loads: every websocket message in and out, script states, every Plotly.react.
TRACE_SCRIPT = """
window.__mhaTrace = {received: [], sent: [], states: [], reacts: []};
const MhaTraceSocket = window.WebSocket;
window.WebSocket = class extends MhaTraceSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", event => {
      const data = event.data, size = data.byteLength ?? data.size ?? data.length ?? 0;
      window.__mhaTrace.received.push([performance.now(), size]);
    });
  }
  send(data) { window.__mhaTrace.sent.push([performance.now(), data.byteLength ?? data.length ?? 0]); return super.send(data); }
};
let mhaPlotly;
Object.defineProperty(window, "Plotly", {
  configurable: true,
  get() { return mhaPlotly; },
  set(plotly) {
    mhaPlotly = plotly;
    if (!plotly || plotly.__mhaTraced) return;
    const react = plotly.react;
    plotly.react = function (gd, ...rest) {
      const key = ([...(gd.closest('[class*="st-key-"]')?.classList || [])].find(c => c.startsWith("st-key-")) || "?").slice(7);
      const entry = {key, start: performance.now()};
      window.__mhaTrace.reacts.push(entry);
      const result = react.call(this, gd, ...rest);
      entry.sync = performance.now();
      Promise.resolve(result).then(() => { entry.done = performance.now(); });
      return result;
    };
    plotly.__mhaTraced = true;
  },
});
document.addEventListener("DOMContentLoaded", () => {
  const app = () => document.querySelector('[data-testid="stApp"]');
  const observe = () => {
    const el = app();
    if (!el) return setTimeout(observe, 20);
    new MutationObserver(() => window.__mhaTrace.states.push([performance.now(), el.dataset.testScriptState]))
      .observe(el, {attributes: true, attributeFilter: ["data-test-script-state"]});
  };
  observe();
});
"""
CLEAR_JS = "() => { for (const list of Object.values(window.__mhaTrace)) list.length = 0; }"
# One press's timeline, in ms from the input (window.__mhaChangeAt, set by the page script on pointerdown).
READ_JS = """() => {
  const t = window.__mhaTrace, at = window.__mhaChangeAt, last = window.__mhaLastRedraw;
  const received = t.received.filter(([time]) => time >= at && time <= last + 1000);
  const reacts = t.reacts.filter(r => r.start >= at);
  const longTasks = window.__mhaLongTasks.filter(([start]) => start >= at && start <= last)
    .reduce((total, [, duration]) => total + duration, 0);
  return {
    first_message: received.length ? received[0][0] - at : null,
    last_message: received.length ? received[received.length - 1][0] - at : null,
    messages: received.length, kb: received.reduce((total, [, size]) => total + size, 0) / 1024,
    backmsgs: t.sent.filter(([time]) => time >= at).length,
    reruns: t.states.filter(([time, state]) => time >= at && state === "running").length,
    first_react: reacts.length ? Math.min(...reacts.map(r => r.start)) - at : null,
    last_react_done: reacts.length ? Math.max(...reacts.map(r => r.done ?? r.sync)) - at : null,
    react_sync: reacts.reduce((total, r) => total + (r.sync - r.start), 0),
    per_chart: Object.fromEntries(reacts.map(r => [r.key, r.sync - r.start])),
    reacts: reacts.length, on_screen: last - at, long_tasks: longTasks,
  };
}"""
PARTS = (  # (row, start field, end field): contiguous spans of one press, in ms from the input
    ("input -> first websocket message (BackMsg, script start, first delta)", None, "first_message"),
    ("first -> last message of the run (the script's run, streamed)", "first_message", "last_message"),
    ("last message -> first Plotly.react (React render, component, JSON.parse)", "last_message", "first_react"),
    ("first Plotly.react -> last one done (plotly redrawing every chart)", "first_react", "last_react_done"),
    ("last Plotly.react done -> last figure on screen (frame)", "last_react_done", "on_screen"),
)
COUNTS = (  # (row, field): per press, not a span
    ("input -> every heatmap redrawn (the bench's Seed + measurement)", "on_screen"),
    ("  of which plotly's synchronous work, summed over charts", "react_sync"),
    ("  long tasks (> 50 ms) on the main thread", "long_tasks"),
    ("server CPU per press (ms, /proc ticks)", "server_cpu"),
    ("Plotly.react calls per press", "reacts"),
    ("script runs per press", "reruns"),
    ("BackMsgs sent per press", "backmsgs"),
    ("websocket messages received per press", "messages"),
    ("kB received per press", "kb"),
)


async def presses(playwright, url: str, query: str, server_pid: int, samples: int, directory: Path) -> list[dict]:
    """Open ``query`` in a fresh tab, press Seed + once untimed and ``samples`` times timed: each press's timeline."""
    context, page = await fresh_tab(playwright, directory)
    await context.add_init_script(TRACE_SCRIPT)
    try:
        await page.goto(f"{url}/{query}", timeout=TIMEOUT_MS)
        await watch(page, TIMEOUT_MS)
        timelines = []
        for _ in range(samples + 1):
            await page.evaluate(CLEAR_JS)
            redraw = await redrawn(page, lambda: step_seed(page), server_pid, QUIET_S, TIMEOUT_MS)
            timelines.append(await page.evaluate(READ_JS) | {"server_cpu": redraw.server_cpu_ms})
        await wait_idle(page, TIMEOUT_MS)
        return timelines[1:]
    finally:
        await context.close()


def span(timeline: dict, start: str | None, end: str) -> float:
    """Milliseconds between two fields of a press (from the input for None); NaN when one is missing."""
    begin = 0.0 if start is None else timeline[start]
    return float("nan") if begin is None or timeline[end] is None else timeline[end] - begin


def median(values: list[float]) -> float:
    kept = [v for v in values if v == v]
    return statistics.median(kept) if kept else float("nan")


def table(measured: dict[str, list[dict]]) -> list[dict]:
    """Rows: each part (a median of the presses, ms) per page, then the counts per press."""
    rows = []
    for label, start, end in PARTS:
        rows.append({"part": label} | {page: median([span(t, start, end) for t in timelines])
                                        for page, timelines in measured.items()})
    for label, field in COUNTS:
        rows.append({"part": label} | {page: median([float(t[field]) for t in timelines])
                                        for page, timelines in measured.items()})
    return rows


async def measure(url: str, server_pid: int, samples: int, directory: Path) -> dict[str, list[dict]]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        return {name: await presses(playwright, url, query, server_pid, samples, directory / f"page{i}")
                for i, (name, query) in enumerate(PAGES)}


def chart_rows(measured: dict[str, list[dict]]) -> list[dict]:
    """Rows: each chart's synchronous Plotly.react time (ms, median of the presses), by page and key."""
    rows = []
    for page, timelines in measured.items():
        for key in timelines[0]["per_chart"]:
            rows.append({"page": page, "chart": key,
                         "react_sync_ms": median([t["per_chart"].get(key, float("nan")) for t in timelines])})
    return rows


def run(samples: int = 5, port: int | None = None) -> tuple[list[dict], list[dict]]:
    """Both pages on one fresh server: the breakdown table of one Seed +, and plotly's time per chart."""
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="mha-trace-redraw-") as directory, \
            running_server(app_command(port), port, Path(directory) / "server.log", env={**os.environ}) as (server, _):
        measured = run_coroutine(measure(server.url, server.pid, samples, Path(directory)))
    return table(measured), chart_rows(measured)


if __name__ == "__main__":
    from bench.machine import machine_info, machine_line

    parser = argparse.ArgumentParser(prog="python -m bench.trace_redraw", description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--port", type=int)
    arguments = parser.parse_args()
    print(machine_line(machine_info()) + f", load average {os.getloadavg()[0]:.2f}")
    parts, charts = run(arguments.samples, arguments.port)
    print(text_table(parts))
    print(text_table(charts))
