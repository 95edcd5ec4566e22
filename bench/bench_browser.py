"""Section "browser": time from a control change to the updated heatmap in a real Chromium.

A Streamlit server of our own (a free loopback port, output to a log file, stopped at the end)
and Debian's chromium driven by Playwright. The Heads page at its default settings: a change is
a click on the seed's "+" button or a pick in the heads selectbox, interleaved, and the time runs
from the browser's own pointerdown event to the moment the live figure (``.js-plotly-plot`` of
the ``heads_grid`` chart) holds different z data, both read in the page with ``performance.now()``
(checked on every animation frame), so Playwright's own round trips are not counted. Then the run
waits for the script to finish before the next change. The shared helpers here (server, chromium,
page script, /proc readers) are used by the "load" section too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
# Flags that keep Debian's chromium quiet on a machine with a closed network (docs/TESTING.md).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 720}
CHART_KEY = "heads_grid"  # the Heads page's figure of every head
HEAD_CHOICES = (2, 8, 1, 16, 4)  # divisors of the default d_model 16, visited in turn
GOAL_MS = 1000.0
# Issue 11: a control change on Heads redrawn in <= 0.25 s; a link opened to its first heatmap in <= 2.5 s.
GOAL_HEADS_MS = 250.0
GOAL_FIRST_HEATMAP_MS = 2500.0
SHELL_SELECTOR = '[data-testid="stApp"]'  # Streamlit's own page, mounted before our script's first element
FULL_CHANGES = 10  # of each control
QUICK_CHANGES = 1
GOAL_STEP_BY_STEP_MS = 400.0  # issue 11: a control change on Step by step, every figure redrawn
STEP_BY_STEP_QUIET_S = 1.0  # no figure changed for this long after the run: the page has finished drawing
SETTLE_S = 0.3  # pause between changes: the previous rerun's last elements finish drawing
SERVER_START_S = 60.0

# Installed in every page before the app loads: when the user last pressed a pointer or a key,
# and a fingerprint of a live figure's z data (plotly 7 sends numpy arrays as base64 "bdata").
PAGE_SCRIPT = """
window.__mhaChangeAt = null;
for (const type of ["pointerdown", "keydown"]) {
  window.addEventListener(type, () => { window.__mhaChangeAt = performance.now(); }, true);
}
window.__mhaFingerprint = key => {
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
// Every figure on the page, watched each animation frame: __mhaLastRedraw is when any of them last
// showed new data (started only where a page's figures are timed together).
window.__mhaAll = () => Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'),
  (chart, i) => { const el = chart.querySelector(".js-plotly-plot"); if (!el) return `${i}:none`;
    let hash = 0; for (const trace of el.data || []) { const z = trace.z;
      const text = z && typeof z.bdata === "string" ? z.bdata : JSON.stringify(z);
      for (let j = 0; j < text.length; j++) hash = (Math.imul(hash, 31) + text.charCodeAt(j)) | 0; }
    return `${i}:${hash}`; }).join("|");
window.__mhaWatch = () => {
  let last = window.__mhaAll();
  const tick = () => { const now = window.__mhaAll();
    if (now !== last) { last = now; window.__mhaLastRedraw = performance.now(); }
    requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
};
"""
# Truthy (the latency in ms) once the figure differs from the fingerprint taken before the change.
CHANGED_JS = """([key, before]) => {
  const now = window.__mhaFingerprint(key);
  return now !== null && now !== before ? Math.max(performance.now() - window.__mhaChangeAt, 1e-3) : null;
}"""
DRAWN_JS = "key => window.__mhaFingerprint(key) !== null"
IDLE_SELECTOR = '[data-testid="stApp"][data-test-script-state="notRunning"]'
EXCEPTION_SELECTOR = '[data-testid="stException"]'


def run_coroutine(coroutine):
    """``asyncio.run`` that also works where this thread already runs an event loop.

    Playwright's sync API (the browser tests' session fixture) keeps a loop running in the
    main thread; there the coroutine runs in a thread of its own instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def missing_browser() -> str | None:
    """Why the browser sections cannot run here, or None when they can."""
    if not CHROMIUM.exists():
        return f"no chromium at {CHROMIUM}"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "no playwright package"
    return None


def skipped_row(reason: str, **columns) -> dict:
    """The single row of a section that cannot run on this machine."""
    return columns | {"note": f"skipped: {reason}"}


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Processes, read from /proc: memory and CPU time of the server and of the browser.


def status_kb(pid: int, key: str) -> int | None:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after "pid (name)": field 3 (state) is [0], ppid [1], utime [11], stime [12]."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants_cpu_seconds(root: int, exclude: int) -> float:
    """CPU seconds of every living process descended from ``root``, leaving out ``exclude`` and its descendants."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):  # a process may end while we read
                parents[int(entry)] = int(stat_fields(int(entry))[1])
    total = 0.0
    for pid in parents:
        ancestor = pid
        while ancestor in parents and ancestor not in (root, exclude):
            ancestor = parents[ancestor]
        if ancestor == root and pid != root:
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += cpu_seconds(pid)
    return total


@dataclass(frozen=True)
class Server:
    """A running Streamlit server: where to reach it, its process id, its log file."""

    url: str
    pid: int
    log: Path


def wait_healthy(server: Server, process: subprocess.Popen, timeout: float) -> None:
    """Poll /_stcore/health until it answers ok; RuntimeError (with the log's tail) otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {process.returncode}:\n{server.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"streamlit was not healthy within {timeout:.0f} s:\n{server.log.read_text()[-3000:]}")


def app_command(port: int, script: Path = ROOT / "app.py") -> list[str]:
    """``streamlit run app.py`` (or ``script``) on loopback, with the flags every test and benchmark server uses."""
    return [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
            "--server.headless", "true", "--server.address", "127.0.0.1",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]


@contextlib.contextmanager
def running_server(command: list[str], port: int, log: Path, start_s: float = SERVER_START_S,
                   **popen) -> Iterator[tuple[Server, subprocess.Popen]]:
    """Start ``command`` (a server on ``port``), its output in ``log``; wait until healthy; always stopped."""
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, **popen)
    server = Server(f"http://127.0.0.1:{port}", process.pid, log)
    try:
        wait_healthy(server, process, start_s)
        yield server, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def streamlit_server(directory: Path) -> Iterator[Server]:
    """``streamlit run app.py`` on a free loopback port, its output in ``directory``/server.log; always stopped."""
    port = free_port()
    with running_server(app_command(port), port, directory / "server.log", env={**os.environ}) as (server, _):
        yield server


async def wait_idle(page, timeout_ms: float) -> None:
    """Wait until the app's script has finished its run."""
    await page.wait_for_selector(IDLE_SELECTOR, timeout=timeout_ms)


async def open_heads(page, url: str, query: str, timeout_ms: float) -> tuple[float, float]:
    """Load the Heads page (``query`` like "?seed=3") and wait for its figure: milliseconds to Streamlit's
    own page (its bundle loaded and mounted) and to the first heatmap."""
    start = time.perf_counter()
    await page.goto(f"{url}/{query}", timeout=timeout_ms, wait_until="commit")
    await page.wait_for_selector(SHELL_SELECTOR, timeout=timeout_ms, state="attached")
    shell = (time.perf_counter() - start) * 1e3
    await page.wait_for_function(DRAWN_JS, arg=CHART_KEY, timeout=timeout_ms, polling="raf")
    elapsed = (time.perf_counter() - start) * 1e3
    await wait_idle(page, timeout_ms)
    return shell, elapsed


async def step_seed(page) -> None:
    """Press the seed's "+" button: a new seed, so the engine runs again."""
    await page.locator('.st-key-w_seed [data-testid="stNumberInputStepUp"]').click()


async def choose_heads(page, heads: int) -> None:
    """Open the heads selectbox and pick ``heads`` (the pick's pointerdown starts the clock)."""
    await page.locator(".st-key-w_heads input[role='combobox']").click()
    await page.get_by_role("option", name=str(heads), exact=True).click()


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


async def all_redrawn(page, action: Callable[[], Awaitable[None]], timeout_ms: float) -> float:
    """Do ``action``; milliseconds from the user's input to the last figure of the page showing new data."""
    before = await page.evaluate("() => window.__mhaAll()")
    await action()
    await page.wait_for_function("before => window.__mhaAll() !== before", arg=before, timeout=timeout_ms,
                                 polling="raf")
    await wait_idle(page, timeout_ms)
    await asyncio.sleep(STEP_BY_STEP_QUIET_S)
    return float(await page.evaluate("() => window.__mhaLastRedraw - window.__mhaChangeAt"))


async def step_by_step_changes(page, url: str, changes: int, server_pid: int, timeout_ms: float) -> list[Change]:
    """Open Step by step and step the seed ``changes`` times: every figure of the page changes."""
    await page.goto(f"{url}/step_by_step", timeout=timeout_ms)
    await wait_idle(page, timeout_ms)
    await page.wait_for_selector('[data-testid="stPlotlyChart"] .js-plotly-plot', timeout=timeout_ms)
    await page.evaluate("() => window.__mhaWatch()")
    measured = []
    for _ in range(changes + 1):  # the first is a warm-up
        server, browser = cpu_seconds(server_pid), descendants_cpu_seconds(os.getpid(), exclude=server_pid)
        latency = await all_redrawn(page, lambda: step_seed(page), timeout_ms)
        server = cpu_seconds(server_pid) - server
        browser = descendants_cpu_seconds(os.getpid(), exclude=server_pid) - browser
        measured.append(Change(latency, server * 1e3, browser * 1e3))
    if await exceptions_shown(page):
        raise RuntimeError("the Step-by-step page shows an exception after the changes")
    return measured[1:]


async def exceptions_shown(page) -> int:
    """How many Streamlit exception boxes the page shows."""
    return await page.locator(EXCEPTION_SELECTOR).count()


@dataclass(frozen=True)
class Change:
    """One timed change: input to new heatmap, and the CPU the server and the browser spent on it."""

    latency_ms: float
    server_cpu_ms: float
    browser_cpu_ms: float  # every Chromium process (and Playwright's driver, which is idle meanwhile)


async def measured_change(page, action, server_pid: int, timeout_ms: float) -> Change:
    """A timed change, then SETTLE_S for the rest of the page to draw; the CPU read around both."""
    server, browser = cpu_seconds(server_pid), descendants_cpu_seconds(os.getpid(), exclude=server_pid)
    latency = await timed_change(page, action, timeout_ms)
    await asyncio.sleep(SETTLE_S)
    server = cpu_seconds(server_pid) - server
    browser = descendants_cpu_seconds(os.getpid(), exclude=server_pid) - browser
    return Change(latency, server * 1e3, browser * 1e3)


async def measure_changes(page, changes: int, server_pid: int, timeout_ms: float) -> dict[str, list[Change]]:
    """``changes`` seed steps and ``changes`` head-count picks, interleaved."""
    measured: dict[str, list[Change]] = {"seed": [], "heads": []}
    heads = 4  # the default
    for turn in range(changes):
        measured["seed"].append(await measured_change(page, lambda: step_seed(page), server_pid, timeout_ms))
        heads = next_heads(heads, turn)
        action = lambda h=heads: choose_heads(page, h)  # noqa: E731
        measured["heads"].append(await measured_change(page, action, server_pid, timeout_ms))
    if await exceptions_shown(page):
        raise RuntimeError("the Heads page shows an exception after the changes")
    return measured


def latency_row(measurement: str, changes: list[Change], goal_ms: float | None = GOAL_MS) -> dict:
    """One table row: the changes' latencies (median, range) and their median CPU on each side."""
    latencies = [change.latency_ms for change in changes]
    median = statistics.median(latencies)
    return {
        "measurement": measurement,
        "changes": len(latencies),
        "median_ms": median,
        "min_ms": min(latencies),
        "max_ms": max(latencies),
        "server_cpu_ms": statistics.median(change.server_cpu_ms for change in changes),
        "browser_cpu_ms": statistics.median(change.browser_cpu_ms for change in changes),
        "goal": f"<= {goal_ms:.0f} ms" if goal_ms else "",
        "x_goal": median / goal_ms if goal_ms else None,
        "met": median <= goal_ms if goal_ms else None,
    }


async def chromium_page(playwright, directory: Path):
    """Debian's chromium with a fresh profile in ``directory``, and its first tab: (context, page)."""
    context = await playwright.chromium.launch_persistent_context(
        str(directory / "profile"), executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True,
        viewport=VIEWPORT,
    )
    return context, context.pages[0] if context.pages else await context.new_page()


async def browser_rows(changes: int, directory: Path) -> list[dict]:
    """Start the server and chromium, open the Heads page, time the changes; everything stopped after."""
    from playwright.async_api import async_playwright

    timeout_ms = 60_000
    with streamlit_server(directory) as server:
        async with async_playwright() as playwright:
            context, page = await chromium_page(playwright, directory)
            try:
                await context.add_init_script(PAGE_SCRIPT)
                server_cpu, browser_cpu = cpu_seconds(server.pid), descendants_cpu_seconds(os.getpid(), server.pid)
                shell, first = await open_heads(page, server.url, "", timeout_ms)
                await asyncio.sleep(SETTLE_S)
                server_cpu = cpu_seconds(server.pid) - server_cpu
                browser_cpu = descendants_cpu_seconds(os.getpid(), server.pid) - browser_cpu
                await timed_change(page, lambda: step_seed(page), timeout_ms)  # untimed warm-up
                measured = await measure_changes(page, changes, server.pid, timeout_ms)
                steps = await step_by_step_changes(page, server.url, changes, server.pid, timeout_ms)
            finally:
                await context.close()
    opening = Change(first, server_cpu * 1e3, browser_cpu * 1e3)
    return [
        latency_row("seed + (step-up button)", measured["seed"], GOAL_HEADS_MS),
        latency_row("heads (selectbox pick)", measured["heads"], GOAL_HEADS_MS),
        latency_row("Step by step: seed +, every figure redrawn", steps, GOAL_STEP_BY_STEP_MS),
        latency_row("page load to first heatmap (cold server)", [opening], GOAL_FIRST_HEATMAP_MS),
        latency_row("  of which Streamlit's page mounted", [Change(shell, math.nan, math.nan)], None),
    ]


def run(quick: bool) -> list[dict]:
    """Control change to updated heatmap in Chromium, Heads page, default settings.

    ``median_ms``: from the pointerdown of the click (seed's "+" button; an option of the heads
    selectbox) to the first animation frame where the live plotly figure holds new z data, timed
    inside the page; the two controls interleaved, a fresh server, one Chromium tab, 0.3 s between
    changes. It includes the rerun on the server, the websocket and plotly's redraw. Goals (issue 11):
    <= 250 ms on Heads (``x_goal`` = median / goal; the older goal was 1 s), and <= 2.5 s from
    opening the link to the first heatmap. "of which Streamlit's page mounted": from the same start to
    Streamlit's own page in the DOM (its JavaScript bundle loaded and run), before our script's
    first element; the rest of the page-load row is the session, our script's run and plotly.
    "Step by step": the seed stepped on that page, timed from the click to the last of its figures
    showing new data (every figure watched each frame; server and browser CPU include the 1 s of
    quiet after the run). Goal: <= 400 ms.
    ``server_cpu_ms`` / ``browser_cpu_ms``: median CPU time per change of the server process and of
    all Chromium processes, read around the change and the 0.3 s after it (what a change costs each
    side; the load test's clients pay the browser's share N times on the same 2 cores). The
    page-load row (goto to the first heatmap on a server that has not run the app yet, which
    imports the libraries then) is for information. Quick mode: one change of each control.
    """
    reason = missing_browser()
    if reason:
        return [skipped_row(reason, measurement="control change to heatmap")]
    with tempfile.TemporaryDirectory(prefix="mha-bench-browser-") as directory:
        return run_coroutine(browser_rows(QUICK_CHANGES if quick else FULL_CHANGES, Path(directory)))


if __name__ == "__main__":
    from bench.report import text_table

    print(text_table(run(quick="--quick" in sys.argv)))
