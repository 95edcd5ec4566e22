"""Section "memory": the server's resident memory while one browser opens many configurations.

One Streamlit server of our own (it reads .streamlit/config.toml, as a deployed app does) and
one Debian chromium tab driven by Playwright. The tab first opens the Real model page once, so
the real model is loaded in the server as on a busy day; then it opens the Heads page at the
caps (64 tokens, d_model 512, 16 heads) with a new seed each time: every ``goto`` is a new
Streamlit session, and the one before it is left behind as a closed tab's session is (kept for
``server.disconnectedSessionTTL``). The server's VmRSS is read from /proc every SAMPLE_EVERY
configurations, its VmHWM (the peak) at the end.

Issue 15 measured 196 MB -> 922 MB over 40 such pages: each left-behind session's download
buttons held that session's RunResult (~11 MB at the caps) in their callables.
"""

from __future__ import annotations

import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from bench.bench_browser import chromium_page, exceptions_shown, wait_idle
from bench.processes import status_kb
from bench.report import skipped_row
from deploy.launch import missing_browser, run_coroutine, streamlit_server

FULL_CONFIGS = 200
QUICK_CONFIGS = 6
SAMPLE_EVERY = 10  # configurations between two RSS samples (QUICK_SAMPLE_EVERY in quick mode)
QUICK_SAMPLE_EVERY = 2
PLATEAU_WINDOW = 100  # the last configurations whose RSS growth is judged
GOAL_PLATEAU_MB = 30.0  # at most this much growth over the last PLATEAU_WINDOW configurations
GOAL_PEAK_MB = 600.0  # the peak resident memory (VmHWM), real model loaded
CAP_TOKENS = " ".join(f"w{i}" for i in range(64))  # 64 distinct words: the token cap
PAGE_TIMEOUT_MS = 120_000
HEADS_READY = ".st-key-heads_grid"  # the Heads figure's element: the page ran to its chart
REAL_MODEL_READY = '[data-testid="stPlotlyChart"], [data-testid="stAlert"]'  # a figure, or why not


def caps_query(seed: int) -> str:
    """The Heads page's query string at the caps, distinct for each seed."""
    return "?" + urllib.parse.urlencode({"tokens": CAP_TOKENS, "d_model": 512, "heads": 16, "seed": seed})


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    """A memory field of the server process in MB (0 if it is gone)."""
    return (status_kb(pid, key) or 0) / 1024


async def open_and_wait(page, url: str, ready: str) -> None:
    """Open ``url`` (a new session) and wait until ``ready`` shows and the script has finished."""
    await page.goto(url, timeout=PAGE_TIMEOUT_MS)
    await page.wait_for_selector(ready, timeout=PAGE_TIMEOUT_MS)
    await wait_idle(page, PAGE_TIMEOUT_MS)


async def memory_series(configs: int, every: int, directory: Path) -> tuple[list[dict], float]:
    """The RSS samples (one row every ``every`` configurations) and the server's peak, in MB."""
    from playwright.async_api import async_playwright

    rows = []
    with streamlit_server(directory) as server:
        async with async_playwright() as playwright:
            context, page = await chromium_page(playwright, directory)
            try:
                rows.append({"configs": 0, "step": "server started", "rss_mb": rss_mb(server.pid)})
                await open_and_wait(page, f"{server.url}/real_model", REAL_MODEL_READY)
                rows.append({"configs": 0, "step": "Real model page opened", "rss_mb": rss_mb(server.pid)})
                start = time.perf_counter()
                for seed in range(1, configs + 1):
                    await open_and_wait(page, f"{server.url}/{caps_query(seed)}", HEADS_READY)
                    if seed % every == 0:
                        if await exceptions_shown(page):
                            raise RuntimeError(f"the Heads page shows an exception at seed {seed}")
                        seconds = (time.perf_counter() - start) / seed
                        rows.append({"configs": seed, "step": "Heads at the caps", "rss_mb": rss_mb(server.pid),
                                     "s_per_config": seconds})
            finally:
                await context.close()
        peak = rss_mb(server.pid, "VmHWM")
    return rows, peak


def verdict_rows(series: list[dict], peak: float, window: int, judged: bool = True) -> list[dict]:
    """The two judgements: growth over the last ``window`` configurations, and the peak (None: not judged)."""
    by_count = {row["configs"]: row["rss_mb"] for row in series if row["configs"]}
    last = max(by_count)
    first = max(last - window, min(by_count))
    growth = by_count[last] - by_count[first]
    return [
        {"step": f"growth over configs {first}..{last}", "rss_mb": growth,
         "goal": f"< {GOAL_PLATEAU_MB:.0f} MB", "met": growth < GOAL_PLATEAU_MB if judged else None},
        {"step": "peak (VmHWM)", "rss_mb": peak, "goal": f"<= {GOAL_PEAK_MB:.0f} MB",
         "met": peak <= GOAL_PEAK_MB if judged else None},
    ]


def run(quick: bool) -> list[dict]:
    """Server RSS while one tab opens the Heads page at the caps with a new seed each time.

    A fresh server (reading .streamlit/config.toml), the Real model page opened once first (the
    real model stays loaded), then 200 configurations (64 tokens, d_model 512, 16 heads, seeds
    1..200), each ``goto`` a new session while the previous ones stay kept for the
    disconnected-session TTL. ``rss_mb``: the server's VmRSS after every 10th configuration;
    ``s_per_config``: mean wall time per configuration so far (render included). Judged: the
    last 100 configurations add < 30 MB (a plateau) and the peak VmHWM is <= 600 MB (the
    smallest Community Cloud host has 690 MB). Quick mode: 6 configurations, a sample every 2,
    nothing judged (a smoke test: the cache is still filling).
    """
    reason = missing_browser()
    if reason:
        return [skipped_row(reason, step="memory series")]
    configs, every = (QUICK_CONFIGS, QUICK_SAMPLE_EVERY) if quick else (FULL_CONFIGS, SAMPLE_EVERY)
    window = configs - every if quick else PLATEAU_WINDOW
    with tempfile.TemporaryDirectory(prefix="mha-bench-memory-") as directory:
        series, peak = run_coroutine(memory_series(configs, every, Path(directory)))
    return series + verdict_rows(series, peak, window, judged=not quick)


if __name__ == "__main__":
    from bench.report import text_table

    print(text_table(run(quick="--quick" in sys.argv)))
