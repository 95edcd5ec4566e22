"""Section "memory": the server's resident memory while one browser opens many pages at the caps.

One Streamlit server of our own (it reads .streamlit/config.toml, as a deployed app does) and
one Debian chromium tab driven by Playwright. The tab first opens both real models on the Real
model page, as on a busy day: MiniLM, then SmolLM2 with prompts at its 128-token cap (more prompts
than its forward cache keeps); then it opens Step by step (the heaviest page: 11 charts, 1.7 MB of
figures) and Heads in turn, at the caps (64 tokens, d_model 512, 16 heads) with a new seed each
time: every ``goto`` is a new Streamlit session, and the one before it is left behind as a closed
tab's session is (kept for ``server.disconnectedSessionTTL``). The server's VmRSS is read from
/proc after every page, its VmHWM (the peak) at the end.

Issue 15 measured 196 MB -> 922 MB over 40 Heads pages: each left-behind session's download
buttons held that session's RunResult (~11 MB at the caps) in their callables. Issue 38 measured
576 MB after 48 Step by step pages, 4.3 MB more per page until page ~35: the figure caches kept
256 panels, each with three copies of its arrays (ui/run/cached_figures.py). With both real models opened
first, the peak was 780 MB: 163 MB lay free inside malloc's arenas (ui/run/server.py now trims them) and the
result cache kept 12 results of 11.8 MB (ui/run/compute.py now keeps 4).
"""

from __future__ import annotations

import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import numpy as np

from bench.bench_browser import chromium_page, exceptions_shown, wait_idle
from bench.bench_smollm2 import CAP_PROMPTS, cap_prompt
from bench.processes import status_kb
from bench.report import skipped_row
from tools.launch import missing_browser, run_coroutine, streamlit_server
from ui.run.cached_figures import CONFIGURATIONS_KEPT
from ui.run.compute import MAX_RESULTS

FULL_PAGES = 48
QUICK_PAGES = 6
SAMPLE_EVERY = 4  # pages between two rows of the table (QUICK_SAMPLE_EVERY in quick mode); RSS is read after each
QUICK_SAMPLE_EVERY = 2
# Every cache is full after this many configurations at the caps: the results (ui/run/compute.py) and the
# figures (ui/run/cached_figures.py) of MAX_RESULTS configurations; 4 more pages let the last evictions settle.
CACHES_FULL_AT = max(MAX_RESULTS, CONFIGURATIONS_KEPT) + 4
JUDGED_FROM = 16  # the page from which the growth is judged (issue 38's goal), after CACHES_FULL_AT
GOAL_GROWTH_MB = 1.0  # at most this much RSS per page once the caches are full
GOAL_MB = 600.0  # the resident memory at any point, and its peak (VmHWM), both real models loaded
QUICK_CAP_PROMPTS = 1  # SmolLM2 prompts at the cap in quick mode (CAP_PROMPTS in full mode)
CAP_TOKENS = " ".join(f"w{i}" for i in range(64))  # 64 distinct words: the token cap
PAGE_TIMEOUT_MS = 120_000
# The pages opened at the caps, in turn: (title, URL path, what shows once the page has run to its middle;
# wait_idle does the rest). Heads is the default page: its path is the root.
PAGES = (
    ("Step by step", "step_by_step", ".st-key-sbs_softmax_0"),
    ("Heads", "", ".st-key-heads_grid"),
)
REAL_MODEL_READY = '[data-testid="stPlotlyChart"], [data-testid="stAlert"]'  # a figure, or why not


def caps_query(seed: int) -> str:
    """The explorer's query string at the caps, distinct for each seed."""
    return "?" + urllib.parse.urlencode({"tokens": CAP_TOKENS, "d_model": 512, "heads": 16, "seed": seed})


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    """A memory field of the server process in MB (0 if it is gone)."""
    return (status_kb(pid, key) or 0) / 1024


async def open_and_wait(page, url: str, ready: str) -> None:
    """Open ``url`` (a new session) and wait until ``ready`` shows and the script has finished."""
    await page.goto(url, timeout=PAGE_TIMEOUT_MS)
    await page.wait_for_selector(ready, timeout=PAGE_TIMEOUT_MS)
    await wait_idle(page, PAGE_TIMEOUT_MS)


def smollm2_query(seed: int) -> str:
    """The Real model page's query string: SmolLM2 on a prompt at its 128-token cap, distinct for each seed."""
    return "?" + urllib.parse.urlencode({"model": "smollm2", "rm_text": cap_prompt(seed)})


async def open_checked(page, url: str, ready: str, what: str) -> None:
    """``open_and_wait``, then fail if the page shows an exception (``what`` names it in the error)."""
    await open_and_wait(page, url, ready)
    if await exceptions_shown(page):
        raise RuntimeError(f"{what} shows an exception")


async def memory_series(pages: int, every: int, prompts: int, directory: Path) -> dict:
    """The table's rows (one every ``every`` pages), the RSS after both real models and after every page, and the
    server's peak, in MB: {"rows", "after_models", "after_page", "peak"}."""
    from playwright.async_api import async_playwright

    rows, after_page = [], {}
    with streamlit_server(directory) as server:
        async with async_playwright() as playwright:
            context, page = await chromium_page(playwright, directory)
            try:
                rows.append({"pages": 0, "step": "server started", "rss_mb": rss_mb(server.pid)})
                await open_checked(page, f"{server.url}/real_model", REAL_MODEL_READY, "Real model (MiniLM)")
                rows.append({"pages": 0, "step": "Real model page opened (MiniLM)", "rss_mb": rss_mb(server.pid)})
                for seed in range(prompts):
                    await open_checked(page, f"{server.url}/real_model{smollm2_query(seed)}", REAL_MODEL_READY,
                                       f"Real model (SmolLM2, prompt {seed})")
                after_models = rss_mb(server.pid)
                rows.append({"pages": 0, "step": f"then SmolLM2, {prompts} prompts at the 128-token cap",
                             "rss_mb": after_models})
                start = time.perf_counter()
                for seed in range(1, pages + 1):
                    title, path, ready = PAGES[(seed - 1) % len(PAGES)]
                    await open_checked(page, f"{server.url}/{path}{caps_query(seed)}", ready, f"{title}, seed {seed}")
                    after_page[seed] = rss_mb(server.pid)
                    if seed % every == 0:
                        seconds = (time.perf_counter() - start) / seed
                        rows.append({"pages": seed, "step": f"{title} at the caps", "rss_mb": after_page[seed],
                                     "s_per_page": seconds})
            finally:
                await context.close()
        peak = rss_mb(server.pid, "VmHWM")
    return {"rows": rows, "after_models": after_models, "after_page": after_page, "peak": peak}


def growth_per_page(after_page: dict[int, float], first: int) -> float:
    """MB per page from page ``first`` on: the median of the slopes between every two pages (Theil-Sen).

    One sample read just before a garbage collection, or just after it, moves a least-squares line; the
    median of all pairwise slopes ignores it."""
    pages = sorted(page for page in after_page if page >= first)
    slopes = [(after_page[b] - after_page[a]) / (b - a) for i, a in enumerate(pages) for b in pages[i + 1:]]
    return float(np.median(slopes)) if slopes else float("nan")


def verdict_rows(after_models: float, after_page: dict[int, float], peak: float, first: int,
                 judged: bool = True) -> list[dict]:
    """The judgements, each against its goal (``met`` None: not judged): the RSS after both real models, after
    page ``first`` (the caches full) and after the last page, the peak, and the growth per page from page
    ``first`` on."""
    last = max(after_page)
    first = min(first, last - 1)
    growth = growth_per_page(after_page, first)
    within = f"<= {GOAL_MB:.0f} MB"
    sizes = [("RSS after both real models", after_models), (f"RSS after page {first}", after_page[first]),
             (f"RSS after page {last}", after_page[last]), ("peak (VmHWM)", peak)]
    return [{"step": step, "rss_mb": mb, "goal": within, "met": mb <= GOAL_MB if judged else None}
            for step, mb in sizes] + [
        {"step": f"growth per page after the caches fill (pages {first}..{last}, median slope)", "rss_mb": growth,
         "goal": f"< {GOAL_GROWTH_MB:.0f} MB", "met": growth < GOAL_GROWTH_MB if judged else None},
    ]


def run(quick: bool) -> list[dict]:
    """Server RSS while one tab opens both real models, then Step by step and Heads at the caps, a new seed each time.

    A fresh server (reading .streamlit/config.toml); the Real model page with MiniLM, then with
    SmolLM2 on 4 prompts at its 128-token cap (both models stay loaded, the last run cached); then 48
    pages at the caps (64 tokens, d_model 512, 16 heads, seeds 1..48; Step by step on odd seeds,
    Heads on even ones), each ``goto`` a new session while the previous ones stay kept for the
    disconnected-session TTL. ``rss_mb``: the server's VmRSS after every 4th page; ``s_per_page``:
    mean wall time per page so far (render included). Judged (the smallest Community Cloud host has
    690 MB): the RSS after both models, after page 16 (every cache full since page 8) and after
    page 48, and the peak VmHWM, each <= 600 MB; and from page 16 on the RSS grows < 1 MB per page
    (the median slope between any two pages from 16 to 48). Quick mode: one SmolLM2 prompt, 6
    pages, a row every 2, nothing judged (a smoke test: the caches are still filling).
    """
    reason = missing_browser()
    if reason:
        return [skipped_row(reason, step="memory series")]
    pages, every, prompts = (QUICK_PAGES, QUICK_SAMPLE_EVERY, QUICK_CAP_PROMPTS) if quick else (
        FULL_PAGES, SAMPLE_EVERY, CAP_PROMPTS)
    first = 1 if quick else JUDGED_FROM
    with tempfile.TemporaryDirectory(prefix="mha-bench-memory-") as directory:
        series = run_coroutine(memory_series(pages, every, prompts, Path(directory)))
    return series["rows"] + verdict_rows(series["after_models"], series["after_page"], series["peak"], first,
                                         judged=not quick)


if __name__ == "__main__":
    from bench.report import text_table

    print(text_table(run(quick="--quick" in sys.argv)))
