"""Section "server": CPU time of one rerun after a control change, on a real server.

The "app" section times reruns inside AppTest, which recompiles the page on every run and leaves out
the websocket; this one measures what a deployed server spends. One ``streamlit run`` pinned to
core 1 (``taskset``), one protocol client (bench/st_client.py) on core 0. Per row the client opens
the page from a link, then changes one control to values never computed before, one change at a
time, waiting for each run to finish: the server's CPU time over those changes (all its threads:
the script, the websocket, the event loop) divided by their number is the row's cost.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from bench.bench_app import CAPS, REAL_MODEL_PIECES, default_sentence_variant, real_model_sentence
from bench.bench_capacity import CLIENT_CPU, clients_on, pinned_server
from bench.processes import cpu_seconds
from bench.report import skipped_row
from bench.st_client import StreamlitClient
from tools.launch import run_coroutine

# Issue 11: CPU time per rerun after a control change, at the defaults and at the caps.
GOAL_DEFAULT_MS = {"heads": 15.0, "step_by_step": 30.0, "real_model": 40.0}
GOAL_CAPS_MS = 100.0
FULL_CHANGES = 30
QUICK_CHANGES = 3
WARM_CHANGES = 2  # untimed changes first: the page's imports and first figures


@dataclass(frozen=True)
class Row:
    """A page, the link's settings and the control changed (its key and its i-th value).

    The key is a page widget's (``w_rm_text``) or a setting's (``w_seed``: a control of the settings' one element,
    changed by its trigger; a plain ``st.number_input`` on the floor page): ``StreamlitClient.set_widget`` sends
    either, by what the page drew."""

    page: str
    settings: str
    params: dict
    control: str
    key: str
    value: Callable[[int], int | str]

    @property
    def goal_ms(self) -> float | None:
        return GOAL_CAPS_MS if self.settings == "caps" else GOAL_DEFAULT_MS.get(self.page)


def seed(i: int) -> int:
    return 50_000 + i  # seeds no other section or row uses: the caches cannot answer


def rows() -> list[Row]:
    """The three pages with goals at the defaults and at the caps, then the other pages that read the seed."""
    sentence = lambda i: default_sentence_variant(10_000 + i)  # noqa: E731 - a value rule, like seed
    long_sentence = lambda i: real_model_sentence(10_000 + i, REAL_MODEL_PIECES)  # noqa: E731
    return [
        Row("heads", "defaults", {}, "seed", "w_seed", seed),
        Row("step_by_step", "defaults", {}, "seed", "w_seed", seed),
        Row("real_model", "defaults", {}, "sentence", "w_rm_text", sentence),
        Row("compare", "defaults", {"b_scale": "none"}, "seed", "w_seed", seed),
        Row("decoding", "defaults", {}, "seed", "w_seed", seed),
        Row("heads", "caps", CAPS, "seed", "w_seed", seed),
        Row("step_by_step", "caps", CAPS, "seed", "w_seed", seed),
        Row("real_model", "caps", {}, "sentence", "w_rm_text", long_sentence),
    ]


def missed_note(cpu_ms: float, goal: float | None) -> str:
    """By how much a row misses its goal ("" when met or without one): milliseconds, and the ratio to two places (a
    row at 102 ms read "missed by 1.0x")."""
    return f"missed by {cpu_ms - goal:.0f} ms ({cpu_ms / goal:.2f}x the goal)" if goal and cpu_ms > goal else ""


async def measure(url: str, pid: int, row: Row, changes: int, first: int) -> dict:
    """Open the row's page, make its warm-up changes, then time ``changes`` changes (values from ``first``) one at a time."""
    client = StreamlitClient(url)
    await client.connect()
    try:
        page = "" if row.page == "heads" else row.page
        opened = await client.open_page(urlencode(row.params), page)
        for i in range(WARM_CHANGES):
            await client.set_widget(row.key, row.value(-1 - i))
        runs, cpu_start = [], cpu_seconds(pid)
        for i in range(changes):
            runs.append(await client.set_widget(row.key, row.value(first + i)))
        cpu_ms = (cpu_seconds(pid) - cpu_start) * 1e3 / changes
    finally:
        await client.close()
    exceptions = sum(len(run.exceptions) for run in [opened, *runs])
    goal = row.goal_ms
    return {
        "page": row.page,
        "settings": row.settings,
        "control": row.control,
        "changes": changes,
        "cpu_ms_per_change": cpu_ms,
        "wall_p50_ms": statistics.median(run.ms for run in runs),
        "kb_per_change": statistics.mean(run.bytes for run in runs) / 1024,
        "messages_per_change": statistics.mean(run.messages for run in runs),
        "exceptions": exceptions,
        "goal": f"<= {goal:.0f} ms" if goal else "-",
        "met": (cpu_ms <= goal and exceptions == 0) if goal else None,
        "note": missed_note(cpu_ms, goal),
        "load_avg_1m": os.getloadavg()[0],
    }


FLOOR_SCRIPT = """
import streamlit as st

seed = st.sidebar.number_input("seed", value=0, step=1, key="w_seed")
for i in range({elements}):
    st.caption(f"element {{i}} of the run with seed {{seed}}")
"""


def floor_row(directory: Path, elements: int, changes: int) -> dict:
    """Streamlit alone: a page of ``elements`` one-line captions and a seed, no computation, measured like a page."""
    script = directory / "floor_app.py"
    script.write_text(FLOOR_SCRIPT.format(elements=elements))
    with pinned_server(directory, script=script) as server:
        row = Row("streamlit floor", "defaults", {}, "seed", "w_seed", seed)
        result = run_coroutine(measure(server.url, server.pid, row, changes, 0))
    return result | {"page": f"Streamlit alone: {elements} captions", "goal": "-", "met": None, "note": ""}


def run(quick: bool) -> list[dict]:
    """Server CPU per control change, per page, on one real server on one core (goal: issue 11).

    One ``streamlit run`` on core 1 (``taskset -c 1``), one protocol client on core 0 (light: a
    protobuf parse per message). Per row: open the page from a link with the row's settings, make
    2 untimed changes, then 30 timed changes (quick: 3), one at a time, each to a value never used
    before (seeds from 50,000; sentences with a marker word moved), so every change computes and
    draws anew. ``cpu_ms_per_change``: the server process's CPU time (every thread: script run,
    websocket, event loop; from /proc, 10 ms ticks) over the timed changes, divided by their number;
    ``wall_p50_ms``: change sent to run finished, median; ``kb_per_change``: bytes received per run.
    "caps": 64 tokens, d_model 512, 16 heads, causal (Real model: 128 word pieces). Goals (issue
    11): Heads <= 15 ms, Step by step <= 30 ms, Real model <= 40 ms at the defaults, <= 100 ms at the
    caps. ``messages_per_change``: ForwardMsgs per run (one per element or layout block). The last row,
    "Streamlit alone", is a generated page of as many one-line captions as the Heads page sends
    messages, measured the same way on a server of its own: Streamlit's own cost for that many
    elements, with no computation and no figure. ``load_avg_1m``: other programs share these cores.
    """
    if not shutil.which("taskset") or len(os.sched_getaffinity(0)) < 2:
        return [skipped_row("needs taskset and 2 cores (server on core 1, the client on core 0)")]
    changes = QUICK_CHANGES if quick else FULL_CHANGES
    results = []
    with tempfile.TemporaryDirectory(prefix="mha-bench-server-") as directory, \
            pinned_server(Path(directory)) as server, clients_on(CLIENT_CPU):
        for index, row in enumerate(rows()):
            try:
                results.append(run_coroutine(measure(server.url, server.pid, row, changes, 1_000 * index)))
            except Exception as error:  # a page that does not load is a row that says so, not a lost table
                results.append(skipped_row(f"{row.page} ({row.settings}): {type(error).__name__}: {error}"[:300],
                                           page=row.page, settings=row.settings))
            time.sleep(0.2)
        heads = next((row for row in results if row.get("page") == "heads" and "messages_per_change" in row), None)
        if heads is not None:  # the same number of messages as the Heads page at the defaults
            results.append(floor_row(Path(directory), round(heads["messages_per_change"]), changes))
    return results
