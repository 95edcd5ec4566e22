"""Section "load": a classroom at once. N browser sessions on one server, each changing controls.

One server of our own per N (so each N starts cold, as a class at nine o'clock does) and one
Chromium with N separate contexts (separate cookies and websockets: N Streamlit sessions),
driven by Playwright's async API from one event loop. Two phases, as in a lesson: every session
opens the Heads page at the same moment with a seed of its own ("open the link"); when all have
it, all make their changes at once: the seed's "+" button and a pick in the heads' select in
turn, with a short random pause before each (a student reading the figure), so no two sessions
ask for the same configuration and the cache cannot answer. Latency is timed inside each page as
in the "browser" section. A thread reads the server's resident memory (/proc/<pid>/status VmRSS)
every 100 ms.

Mind what this machine is: the N Chromium tabs draw their figures on the same 2 cores as the
server, so the latencies include the clients' share of the CPU, which a real classroom (one
laptop per student) does not have. ``server_cpu_s`` and ``clients_cpu_s`` (Chromium and
Playwright's driver) say who used the two cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.bench_browser import (
    PAGE_SCRIPT,
    choose_heads,
    exceptions_shown,
    next_heads,
    open_heads,
    step_seed,
    timed_change,
    wait_idle,
)
from bench.processes import cpu_seconds, descendants_cpu_seconds, status_kb
from bench.report import skipped_row
from tools.launch import VIEWPORT, chromium_browser, missing_browser, run_coroutine, streamlit_server

FULL_PLAN = ((10, 10), (20, 10))  # (sessions, changes per session)
QUICK_PLAN = ((2, 2),)
GOAL_SESSIONS = 20
GOAL_P95_MS = 3000.0
GOAL_RSS_MB = 1000.0
CHANGE_TIMEOUT_MS = 30_000  # one change that takes longer is an error (a timeout)
OPEN_TIMEOUT_MS = 120_000  # opening the page while the whole class does
SECTION_TIMEOUT_S = 300.0  # hard limit for one N: what is not done by then counts as errors
THINK_S = (0.2, 1.0)  # pause between a session's changes, uniform
RSS_INTERVAL_S = 0.1


class PeakRss(threading.Thread):
    """Samples a process's resident memory every RSS_INTERVAL_S until stopped; keeps the peak."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0
        self.samples = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            rss = status_kb(self.pid, "VmRSS")
            if rss is not None:
                self.peak_kb = max(self.peak_kb, rss)
                self.samples += 1
            self._stop_event.wait(RSS_INTERVAL_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


@dataclass
class SessionResult:
    """What one session saw; filled in as it goes, so a session cut by the hard timeout still counts."""

    planned: int
    open_ms: float | None = None
    latencies: list[float] = field(default_factory=list)
    timeouts: int = 0
    exceptions: int = 0
    page_errors: list[str] = field(default_factory=list)
    failure: str | None = None  # the page could not be opened, or the session died

    @property
    def errors(self) -> int:
        """Changes that did not end in a new heatmap, exception boxes, JavaScript errors, a dead session."""
        not_done = self.planned - len(self.latencies) - self.timeouts
        return self.timeouts + self.exceptions + len(self.page_errors) + max(not_done, 0)


async def open_session(browser, url: str, index: int, result: SessionResult, contexts: list):
    """A context of its own (a separate Streamlit session) on the Heads page with this session's seed; its page."""
    context = await browser.new_context(viewport=VIEWPORT)
    contexts.append(context)  # closed by the caller, after the clients' CPU time is read
    await context.add_init_script(PAGE_SCRIPT)
    page = await context.new_page()
    page.on("pageerror", lambda error: result.page_errors.append(str(error)[:200]))
    result.open_ms = await open_heads(page, url, f"?seed={1000 * (index + 1)}", OPEN_TIMEOUT_MS)
    return page


async def change_controls(page, index: int, result: SessionResult) -> None:
    """The session's changes: seed "+" and a heads pick in turn, a random pause before each."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    rng = random.Random(index)
    heads = 4  # the default
    for turn in range(result.planned):
        await asyncio.sleep(rng.uniform(*THINK_S))
        if turn % 2 == 0:
            action = lambda: step_seed(page)  # noqa: E731
        else:
            heads = next_heads(heads, index + turn // 2)
            action = lambda h=heads: choose_heads(page, h)  # noqa: E731
        try:
            result.latencies.append(await timed_change(page, action, CHANGE_TIMEOUT_MS))
        except PlaywrightTimeout:
            result.timeouts += 1
            with contextlib.suppress(PlaywrightTimeout):
                await wait_idle(page, CHANGE_TIMEOUT_MS)
        result.exceptions += await exceptions_shown(page)


async def guarded(step, result: SessionResult):
    """Run one session's step; a failure is recorded in ``result`` (its remaining changes count as errors)."""
    try:
        return await step
    except Exception as error:  # the page did not open or the browser broke
        result.failure = f"{type(error).__name__}: {str(error)[:200]}"
        return None


async def both_phases(browser, url: str, results: list[SessionResult], contexts: list) -> None:
    """Every session opens the page at once; when all have it (or failed), all make their changes at once."""
    opened = await asyncio.gather(
        *(guarded(open_session(browser, url, i, result, contexts), result) for i, result in enumerate(results))
    )
    await asyncio.gather(
        *(guarded(change_controls(page, i, result), result)
          for i, (page, result) in enumerate(zip(opened, results, strict=True)) if page is not None)
    )


async def classroom(url: str, sessions: int, changes: int, server_pid: int) -> tuple[list[SessionResult], float]:
    """All sessions in one Chromium, cut at SECTION_TIMEOUT_S: their results and the clients' CPU seconds."""
    from playwright.async_api import async_playwright

    results = [SessionResult(changes) for _ in range(sessions)]
    contexts: list = []
    async with async_playwright() as playwright:
        browser = await chromium_browser(playwright)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(both_phases(browser, url, results, contexts), timeout=SECTION_TIMEOUT_S)
            clients_cpu = descendants_cpu_seconds(os.getpid(), exclude=server_pid)  # before any tab closes
        finally:
            for context in contexts:
                with contextlib.suppress(Exception):
                    await context.close()
            await browser.close()
    return results, clients_cpu


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (linear interpolation), or None for no values."""
    return float(np.percentile(values, q)) if values else None


def load_row(sessions: int, changes: int, results: list[SessionResult], memory: dict, wall_s: float) -> dict:
    """One table row: errors, latencies, memory and the server's CPU for one classroom."""
    latencies = [ms for result in results for ms in result.latencies]
    opens = [result.open_ms for result in results if result.open_ms is not None]
    errors = sum(result.errors for result in results)
    p95 = percentile(latencies, 95)
    row = {
        "sessions": sessions,
        "changes": sessions * changes,
        "done": len(latencies),
        "errors": errors,
        "timeouts": sum(result.timeouts for result in results),
        "exceptions": sum(result.exceptions for result in results),
        "js_errors": sum(len(result.page_errors) for result in results),
        "open_p50_ms": percentile(opens, 50),
        "open_max_ms": max(opens, default=None),
        "p50_ms": percentile(latencies, 50),
        "p95_ms": p95,
        "max_ms": max(latencies, default=None),
        "wall_s": wall_s,
    } | memory
    if sessions == GOAL_SESSIONS:
        row["goal"] = f"0 errors, p95 <= {GOAL_P95_MS / 1e3:.0f} s, peak <= {GOAL_RSS_MB:.0f} MB"
        row["met"] = errors == 0 and p95 is not None and p95 <= GOAL_P95_MS and memory["rss_peak_mb"] <= GOAL_RSS_MB
    failures = sorted({result.failure for result in results if result.failure})
    if failures:
        row["note"] = "; ".join(failures)[:300]
    return row


def measure(sessions: int, changes: int) -> dict:
    """Start a fresh server, run one classroom against it, stop it (always)."""
    with tempfile.TemporaryDirectory(prefix="mha-bench-load-") as directory, \
            streamlit_server(Path(directory)) as server:
        idle_kb = status_kb(server.pid, "VmRSS") or 0
        cpu_start = cpu_seconds(server.pid)
        sampler = PeakRss(server.pid)
        sampler.start()
        start = time.perf_counter()
        try:
            results, clients_cpu = run_coroutine(classroom(server.url, sessions, changes, server.pid))
        finally:
            sampler.stop()
        wall_s = time.perf_counter() - start
        memory = {
            "rss_idle_mb": idle_kb / 1024,
            "rss_peak_mb": sampler.peak_kb / 1024,
            "rss_end_mb": (status_kb(server.pid, "VmRSS") or 0) / 1024,
            "server_cpu_s": cpu_seconds(server.pid) - cpu_start,
            "clients_cpu_s": clients_cpu,
        }
    return load_row(sessions, changes, results, memory, wall_s)


def run(quick: bool) -> list[dict]:
    """A classroom: N Chromium sessions at once on one server, each making control changes.

    Per N a fresh server; all sessions open the Heads page together (``open_p50_ms``: to the first
    heatmap); once all have it, all make their changes (seed "+", heads pick, in turn; 0.2-1 s
    pauses; seeds differ per session so the cache misses). ``p50_ms``/``p95_ms``: input to updated heatmap, timed
    in the page. ``errors``: timeouts (> 30 s), exception boxes, JavaScript errors and changes not
    made (a session that failed, or the 5-minute limit per N). Memory: the server's VmRSS before
    any session and its peak (sampled every 100 ms). ``server_cpu_s``: the server's CPU seconds
    during the run, ``clients_cpu_s`` Chromium's and Playwright's (wall_s x 2 would be both cores):
    the clients run on the same 2 cores as the server.
    Goal at N = 20: 0 errors, p95 <= 3 s, peak RSS <= 1 GB. Quick mode: 2 sessions x 2 changes.
    """
    reason = missing_browser()
    if reason:
        return [skipped_row(reason, sessions=None)]
    plan = QUICK_PLAN if quick else FULL_PLAN
    return [measure(sessions, changes) for sessions, changes in plan]


if __name__ == "__main__":
    from bench.report import text_table

    print(text_table(run(quick="--quick" in sys.argv)))
