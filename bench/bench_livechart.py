"""Section "livechart": what the eye sees on Heads and Step by step, as ratios to the floor of the stack.

The floor page is the simplest Streamlit page with a heatmap: one ``st.plotly_chart`` of a 16 × 16
heatmap and a Seed box (``FLOOR_APP``, written to a temporary file and served by a server of its own).
Every page is timed in the same run, on the same machine, by the same page scripts as the "browser"
section (bench/bench_browser.py): a shared link opened in a fresh Chromium to its first heatmap on
screen, and Seed + to every figure of the page redrawn. Every page's server is up at once and the pages are
timed in turns, round by round, so the machine's drift falls on all of them alike. A link is a median of 5, a
Seed + of 10 (5 rounds of 2); the ratio column divides by the floor page's median of the same measurement. Goals are issue 22's. Heads and Step by
step are timed twice, their charts sent by st.plotly_chart and by the live charts (ui/widgets/live.py),
and Heads once more with plotly's full bundle (copied into static/ for the run). The floor page is timed twice more
with controls in its sidebar: the app's own (``FLOOR_SIDEBAR_APP``: the language's selectbox and the settings' controls
as ONE components-v2 element, ui/widgets/controls.py) and issue 38's prototype of the controls as one element
(``FLOOR_ONE_ELEMENT_APP``, bench/one_element_controls.py; the measurement that led to the app's element).

    python -m bench.bench_livechart          # prints the table (about 3 minutes)
    python -m bench.bench_livechart --quick  # three pages, one sample each (CI's smoke test)
    python -m bench --only livechart
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.bench_browser import (
    FULL_SAMPLES,
    QUICK_QUIET_S,
    QUICK_SAMPLES,
    fresh_tab,
    missing_browser,
    redrawn,
    run_coroutine,
    skipped_row,
    step_seed,
    wait_idle,
    watch,
)
from tools.launch import app_command, free_port, running_server

# The floor: one plotly heatmap and a Seed box whose "+" redraws it, nothing else.
FLOOR_APP = textwrap.dedent('''
    import numpy as np
    import plotly.graph_objects as go
    import streamlit as st

    seed = st.number_input("Seed", value=3, step=1, key="w_seed")
    z = np.random.default_rng(int(seed)).random((16, 16)).astype(np.float32)
    st.plotly_chart(go.Figure(go.Heatmap(z=z, zmin=0, zmax=1)), key="floor")
''')
# The floor with the app's own sidebar (the language's selectbox, the settings' controls as one element drawn by
# sidebar(), the address kept in step) and the same one heatmap, drawn from the sidebar's seed: what a rerun of the
# app's controls costs a page before any of its own content (a change reruns the whole page, and the page sends its
# controls again: the language's Streamlit selectbox and the settings' one element).
# Both floors with controls: the same one heatmap drawn from the controls' seed, the address kept in step after it.
_SIDEBAR_FLOOR = textwrap.dedent('''
    import numpy as np
    import plotly.graph_objects as go
    import streamlit as st

    from ui.state.address import begin
    from ui.widgets.address import send
    from ui.widgets.language import choose_language
    {imports}
    {first}begin()
    choose_language()
    {controls}
    z = np.random.default_rng(config.seed).random((16, 16)).astype(np.float32)
    st.plotly_chart(go.Figure(go.Heatmap(z=z, zmin=0, zmax=1)), key="floor")
    send()
''')
FLOOR_SIDEBAR_APP = _SIDEBAR_FLOOR.format(
    imports="from ui.widgets.language import language_switch\nfrom ui.widgets.sidebar import sidebar\n"
            "from ui.widgets.state import keep_widget_state\n",
    first="keep_widget_state()\n", controls="language_switch()\nconfig = sidebar()")
# The floor with the same controls drawn as ONE components-v2 element by issue 38's prototype
# (bench/one_element_controls.py, the language's choice inside it too): the measurement that led to the app's element;
# the address kept in step as the app keeps it.
FLOOR_ONE_ELEMENT_APP = _SIDEBAR_FLOOR.format(
    imports="from bench.one_element_controls import one_element_controls\n", first="",
    controls="config = one_element_controls()")
FLOORS = {"floor": FLOOR_APP, "floor+sidebar": FLOOR_SIDEBAR_APP,  # page -> its script, written for the run
          "floor+one element": FLOOR_ONE_ELEMENT_APP}
FULL_PLOTLY = "plotly-full-bench.min.js"  # copied into static/ for the run, removed after
OFF = {"MHA_LIVE_CHARTS": "0"}  # ui/widgets/live.py: the pages draw with st.plotly_chart, as before issue 22
NO_CANVAS = {"MHA_CANVAS_FIRST": "0"}  # live charts drawn by plotly alone, no canvas of the cells first (issue 38)
PAGES = (  # (row name, page, the shared link's path and query, environment of its server)
    ("floor page", "floor", "?seed=3", {}),
    ("floor page + the app's sidebar", "floor+sidebar", "?seed=3", {}),
    ("floor page + the controls as one element", "floor+one element", "?seed=3", {}),
    ("Heads, st.plotly_chart", "Heads", "?seed=3", OFF),
    ("Step by step, st.plotly_chart", "Step by step", "step_by_step?seed=3", OFF),
    ("Heads, live charts", "Heads", "?seed=3", {}),
    ("Step by step, live charts", "Step by step", "step_by_step?seed=3", {}),
    ("Heads, live, full plotly.js", "Heads", "?seed=3", {"MHA_PLOTLY_FILE": FULL_PLOTLY}),
    ("Heads, live, plotly only", "Heads", "?seed=3", NO_CANVAS),
    ("Step by step, live, plotly only", "Step by step", "step_by_step?seed=3", NO_CANVAS),
)
# A quick run (CI smoke) times the pages the goals judge, as the app draws them, once each with no untimed
# opening or press first; the st.plotly_chart and full-bundle comparisons are the full run's.
QUICK_PAGES = ("floor page", "Heads, live charts", "Step by step, live charts")
GOALS = {  # (measurement, page) -> the highest ratio to the floor page that meets issue 22's goal
    ("link", "Heads"): 1.0,
    ("seed", "Heads"): 1.2,
    ("seed", "Step by step"): 1.8,
}
TIMEOUT_MS = 90_000
# Milliseconds of long tasks (> 50 ms, a "longtask" PerformanceObserver) in the page between the input and
# the last redraw: the main thread's blocking work in a change (bench_browser.OPENING_SCRIPT records them).
LONG_TASKS_JS = """() => window.__mhaLongTasks
  .filter(([start]) => start >= window.__mhaChangeAt && start <= window.__mhaLastRedraw)
  .reduce((total, [, duration]) => total + duration, 0)"""
# When the app's script ran after the input: its state attribute turned "running" and back (every element it
# sent has reached the page by the second), in ms from the input; installed in each tab before a change.
SCRIPT_STATE_JS = """() => {
  window.__mhaScript = {};
  const app = document.querySelector('[data-testid="stApp"]');
  new MutationObserver(() => {
    const at = performance.now() - window.__mhaChangeAt, state = app.dataset.testScriptState;
    if (state === "running") window.__mhaScript.start ??= at;
    else if (window.__mhaScript.start !== undefined) window.__mhaScript.end ??= at;
  }).observe(app, {attributes: true, attributeFilter: ["data-test-script-state"]});
}"""
# Every websocket message the page receives (a ForwardMsg: one per element or layout block a run sends, plus the
# run's start and end), installed before the app loads; MESSAGES_JS counts those after the input.
MESSAGES_SCRIPT = """
window.__mhaReceived = [];
const MhaCountingSocket = window.WebSocket;
window.WebSocket = class extends MhaCountingSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", () => window.__mhaReceived.push(performance.now()));
  }
};
"""
MESSAGES_JS = "() => window.__mhaReceived.filter(time => time >= window.__mhaChangeAt).length"
STATIC = Path(__file__).resolve().parents[1] / "static"
QUIET_S = 1.0
PRESSES_PER_ROUND = 2  # a full run's timed Seed + per page and round: FULL_SAMPLES rounds, 10 presses a page


def full_plotly() -> bool:
    """Copy the plotly package's full plotly.min.js into static/ (True), or False when the app does not use it."""
    from ui.widgets import live

    if not live.static_plotly_path().exists():
        return False  # the pages draw with st.plotly_chart
    import plotly

    shutil.copyfile(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", STATIC / FULL_PLOTLY)
    return True


async def first_heatmap(playwright, url: str, query: str, directory: Path) -> tuple[float, float]:
    """Milliseconds from the navigation's start to the first animation frame with a heatmap on screen (a live
    chart's canvas or plotly's image), and to plotly's heatmap, in a fresh Chromium (empty cache, a new session)."""
    context, page = await fresh_tab(playwright, directory)
    try:
        await page.goto(f"{url}/{query}", timeout=TIMEOUT_MS, wait_until="commit")
        await page.wait_for_function("() => 'plotly_heatmap' in window.__mhaMarks", timeout=TIMEOUT_MS, polling=50)
        marks = await page.evaluate("() => [window.__mhaMarks.heatmap, window.__mhaMarks.plotly_heatmap]")
        return float(marks[0]), float(marks[1])
    finally:
        await context.close()


async def seed_redraws(playwright, url: str, query: str, server_pid: int, samples: int, directory: Path,
                       warm_up: bool = True, quiet_s: float = QUIET_S):
    """Seed + pressed ``samples`` times (after one untimed press when ``warm_up``) in one tab: the Redraw of each,
    its long tasks, when the script's run ended and the websocket messages the run sent (``MESSAGES_SCRIPT``)."""
    context, page = await fresh_tab(playwright, directory)
    await context.add_init_script(MESSAGES_SCRIPT)
    try:
        await page.goto(f"{url}/{query}", timeout=TIMEOUT_MS)
        await watch(page, TIMEOUT_MS)
        measured = []
        for _ in range(samples + warm_up):
            await page.evaluate(SCRIPT_STATE_JS)
            redraw = await redrawn(page, lambda: step_seed(page), server_pid, quiet_s, TIMEOUT_MS)
            script = await page.evaluate("() => window.__mhaScript")
            measured.append((redraw, await page.evaluate(LONG_TASKS_JS), script.get("end", float("nan")),
                             await page.evaluate(MESSAGES_JS)))
        await wait_idle(page, TIMEOUT_MS)
        return measured[warm_up:]
    finally:
        await context.close()


def write_floors(directory: Path) -> dict[str, Path]:
    """Each floor page's script written to ``directory``, with the app's served modules beside them: the floors with
    the app's controls load the elements' code from <the script's folder>/static/mha/ (ui/widgets/served.py)."""
    scripts = {page: directory / f"floor{index}_app.py" for index, page in enumerate(FLOORS)}
    for page, script in scripts.items():
        script.write_text(FLOORS[page])
    shutil.copytree(STATIC / "mha", directory / "static" / "mha")
    return scripts


def page_servers(stack: contextlib.ExitStack, pages, scripts: dict[str, Path], directory: Path) -> dict:
    """Every page's server, all up at once (each page's own environment; a floor's its own script): row name ->
    (server, query). A page needing plotly's full bundle is left out when the app has no static plotly.js."""
    if any(FULL_PLOTLY in settings.values() for *_, settings in pages) and full_plotly():
        stack.callback((STATIC / FULL_PLOTLY).unlink, missing_ok=True)
    servers = {}
    for index, (name, page, query, settings) in enumerate(pages):
        if FULL_PLOTLY in settings.values() and not (STATIC / FULL_PLOTLY).exists():
            continue
        port = free_port()
        command = app_command(port, scripts[page]) if page in scripts else app_command(port)
        here = directory / f"page{index}"
        here.mkdir()
        server, _ = stack.enter_context(running_server(command, port, here / "server.log", env={**os.environ, **settings}))
        servers[name] = (server, query, here)
    return servers


async def measure(quick: bool, directory: Path) -> dict[str, dict]:
    """Every page's openings and Seed + redraws, the pages in turns (round by round: each round opens, then presses
    on, every page once), so that a drift of the machine's speed during the run falls on every page alike and the
    ratios to the floor page stay side by side. A full run: one untimed opening per page first (the servers warm),
    ``FULL_SAMPLES`` openings, and ``FULL_SAMPLES`` rounds of ``PRESSES_PER_ROUND`` timed presses (each round's tab
    with one untimed press first). A quick run: ``QUICK_PAGES`` only, one opening and one press each."""
    from playwright.async_api import async_playwright

    samples = QUICK_SAMPLES if quick else FULL_SAMPLES
    presses = QUICK_SAMPLES if quick else PRESSES_PER_ROUND
    pages = [row for row in PAGES if row[0] in QUICK_PAGES] if quick else PAGES
    scripts = write_floors(directory)
    with contextlib.ExitStack() as stack:
        servers = page_servers(stack, pages, scripts, directory)
        measured = {name: {"link": [], "seed": [], "link_plotly": []} for name in servers}
        async with async_playwright() as playwright:
            if not quick:
                for server, query, here in servers.values():
                    await first_heatmap(playwright, server.url, query, here / "warm-up")
            for turn in range(samples):
                for name, (server, query, here) in servers.items():
                    shown, plotly = await first_heatmap(playwright, server.url, query, here / f"open{turn}")
                    measured[name]["link"].append(shown)
                    measured[name]["link_plotly"].append(plotly)
            for turn in range(samples):
                for name, (server, query, here) in servers.items():
                    measured[name]["seed"] += await seed_redraws(
                        playwright, server.url, query, server.pid, presses, here / f"seed{turn}",
                        warm_up=not quick, quiet_s=QUICK_QUIET_S if quick else QUIET_S)
    return measured


def rows_from(measured: dict[str, dict], quick: bool) -> list[dict]:
    """The table: per page and measurement, the median, its spread, its ratio to the floor page, the goal."""
    rows = []
    for measurement, label in (("link", "shared link -> first visible heatmap"),
                               ("seed", "Seed + -> every heatmap redrawn")):
        floor = None
        for name, page, _, _ in PAGES:
            if name not in measured:
                continue
            values = measured[name][measurement]
            if measurement == "seed":
                values, long_tasks, script_end, messages = (list(column) for column in zip(*values, strict=True))
            times = [v.last_ms for v in values] if measurement == "seed" else values
            median = statistics.median(times)
            floor = median if floor is None else floor
            ratio = median / floor
            goal = GOALS.get((measurement, page))
            row = {"measurement": label, "page": name, "samples": len(times), "median_ms": median,
                   "min_ms": min(times), "max_ms": max(times), "ratio": ratio,
                   "goal": f"<= {goal:.1f}x" if goal else "", "met": (ratio <= goal) if goal else None}
            if measurement == "link" and "link_plotly" in measured[name]:
                row["plotly_ms"] = statistics.median(measured[name]["link_plotly"])
            if measurement == "seed":
                row["plotly_ms"] = statistics.median(v.plotly_ms for v in values)
                row["charts"] = f"{min(v.redrawn for v in values)}/{max(v.charts for v in values)}"
                row["first_ms"] = statistics.median(v.first_ms for v in values)
                row["long_tasks_ms"] = statistics.median(long_tasks)
                row["script_end_ms"] = statistics.median(script_end)
                row["messages"] = statistics.median(messages)
                row["server_cpu_ms"] = statistics.median(v.server_cpu_ms for v in values)
                row["browser_cpu_ms"] = statistics.median(v.browser_cpu_ms for v in values)
            if goal and ratio > goal:
                row["note"] = f"missed by {ratio - goal:.2f}x ({(ratio - goal) * floor:.0f} ms)"
            if quick:
                row["note"] = (row.get("note", "") + f" quick run: {len(times)} sample(s)").strip()
            rows.append(row)
    return rows


def run(quick: bool) -> list[dict]:
    """Floor page, Heads, Step by step: shared link to the first heatmap and Seed + to every heatmap redrawn.

    Each page on a server of its own, every server up at once, the pages timed in turns (``measure``; one untimed
    opening of each first, so the servers are warm); openings in a fresh Chromium each (new profile), from the
    navigation's start to the frame after the first heatmap's image appeared (bench_browser.OPENING_SCRIPT); Seed +
    in a tab per round, from the browser's pointerdown to the last frame in which any figure showed new data, after
    1 s with no change (bench_browser.redrawn), one untimed press first in each round. ``charts``: figures redrawn / on the page;
    ``first_ms``: to the first figure redrawn; ``long_tasks_ms``: the page's long tasks (> 50 ms) in between;
    ``script_end_ms``: to the page showing the script's run as finished (every element it sent has arrived);
    ``messages``: websocket messages the page received after the input (one per element or layout block the run
    sent, plus its start and end: what the browser takes in, ~1 ms each).
    ``plotly_ms``: to plotly's heatmap on screen (a link) or to plotly's last figure drawn (Seed +); the median
    is earlier when a live chart's canvas showed the cells first (static/mha/live_canvas.js).
    ``ratio``: median / the floor page's median. Goals (issue 22): Heads' link <= 1.0x, Seed + on Heads
    <= 1.2x, on Step by step <= 1.8x. Each page is timed with its charts sent by st.plotly_chart
    (MHA_LIVE_CHARTS=0, as before issue 22) and by the live charts (ui/widgets/live.py), and Heads once
    more with plotly's full bundle (the plotly package's plotly.min.js) instead of the cartesian one; Heads and Step
    by step once more with their live charts drawn by plotly alone (MHA_CANVAS_FIRST=0: no canvas first).
    The floor page once more with the app's own sidebar (``FLOOR_SIDEBAR_APP``: the language's selectbox and the
    settings' controls as one components-v2 element, ui/widgets/controls.py): how much of a page's ratio is its
    controls, sent again by every rerun before anything of the page's own. And with issue 38's prototype of the
    controls as one element (``FLOOR_ONE_ELEMENT_APP``, bench/one_element_controls.py): the measurement that led to
    the app's element, kept beside it.
    A quick run (CI's smoke test) opens the floor page, Heads and Step by step with live charts, once each, and
    presses Seed + once, with nothing untimed first and a 0.5 s quiet.
    """
    reason = missing_browser()
    if reason:
        return [skipped_row(reason, measurement="floor page vs Heads and Step by step")]
    with tempfile.TemporaryDirectory(prefix="mha-bench-livechart-") as directory:
        return rows_from(run_coroutine(measure(quick, Path(directory))), quick)


if __name__ == "__main__":
    from bench.machine import machine_info, machine_line
    from bench.report import text_table

    print(machine_line(machine_info()))
    print(text_table(run(quick="--quick" in sys.argv)))
