"""Smoke tests of the app, browser and load benchmarks: they run in quick mode and return sane rows.

Timings are never judged here (they belong to ``python -m bench``). What is asserted: every page
gets a row with finite positive times; a "miss" rerun really makes the engine run and a "hit"
rerun really does not; the helpers that build the inputs keep their promises (distinct sentences
of exactly 128 word pieces, a heads pick that always changes something); the memory and CPU
readers see real processes; and, where Chromium is installed, the browser and load sections
complete without errors.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest
import shown_charts

from bench import bench_app, bench_browser, bench_load, processes
from bench.registry import SECTIONS
from tools.launch import missing_browser

BROWSER_MISSING = missing_browser()
needs_browser = pytest.mark.skipif(BROWSER_MISSING is not None, reason=f"browser benchmark skipped: {BROWSER_MISSING}")
PAGES = {path.stem for path in (bench_app.ROOT / "app_pages").glob("*.py")}


def finite_positive(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def app_rows():
    return bench_app.run(quick=True)


def test_our_sections_are_registered_with_notes():
    registered = {section.name: section for section in SECTIONS}
    for name in ("app", "browser", "load"):
        assert name in registered
        assert "Goal" in registered[name].notes()


def test_app_quick_has_one_row_per_page_at_the_defaults(app_rows):
    assert {row["page"] for row in app_rows} == PAGES
    assert {row["settings"] for row in app_rows} == {"defaults"}


def test_app_rows_have_finite_times_and_consistent_figure_sizes(app_rows):
    for row in app_rows:
        if row.get("note", "").startswith("skipped"):
            continue
        for key in ("miss_ms", "cpu_ms", "hit_ms", "gc_ms", "switch_ms"):
            assert finite_positive(row[key]), (row["page"], key, row[key])
        assert row["reruns"] == bench_app.QUICK_REPETITIONS[0]
        assert 0 <= row["largest_kb"] <= row["figures_kb"] <= row["figures"] * row["largest_kb"] + 1e-9
        assert row["met"] == (row["miss_ms"] <= bench_app.GOAL_DEFAULT_MS)
    heads = next(row for row in app_rows if row["page"] == "heads")
    assert heads["figures"] >= 1 and heads["figures_kb"] > 0  # the heads grid at least


def test_app_rows_size_the_toy_cache_from_its_max_entries(app_rows):
    entries = bench_app.toy_cache_entries()
    assert isinstance(entries, int) and entries >= 1
    for row in app_rows:
        if row["page"] in ("heads", "step_by_step"):
            assert row["cache_entry_mb"] > 0
            assert row["cache_full_mb"] == pytest.approx(row["cache_entry_mb"] * entries, rel=1e-12)
        elif row["page"] in ("lessons", "seeds", "about"):
            assert row["cache_entry_mb"] is None  # these pages cache nothing


def test_a_miss_runs_the_engine_once_per_new_seed_and_a_hit_never(monkeypatch):
    import ui.run.compute

    seeds = []

    def recording_run(config):
        seeds.append(config.seed)
        return original(config)

    original = ui.run.compute.run
    monkeypatch.setattr(ui.run.compute, "run", recording_run)
    case = next(c for c in bench_app.cases() if c.page == "heads" and c.settings == "defaults")
    row = bench_app.measure(case, (3, 2))
    fresh = [seed for seed in seeds if seed >= 1_000_000]
    assert len(fresh) == 1 + 3  # the untimed first change, then three misses; the two hits computed nothing
    assert len(set(fresh)) == len(fresh)
    assert row["reruns"] == 3 and finite_positive(row["hit_ms"])


def real_model_or_skip():
    pretrained = pytest.importorskip("mha_core.pretrained")
    try:
        return pretrained.load_minilm(allow_download=False)
    except RuntimeError as error:
        pytest.skip(f"model files missing: {error}")


def test_the_real_model_row_runs_the_forward_pass_once_per_new_sentence_and_a_hit_never(monkeypatch):
    from mha_core.pretrained import MiniLM

    real_model_or_skip()
    texts = []
    original = MiniLM.forward

    def recording_forward(self, text):
        if threading.current_thread() is not threading.main_thread():  # the page's runs, not the row's sizing
            texts.append(text)
        return original(self, text)

    monkeypatch.setattr(MiniLM, "forward", recording_forward)
    import streamlit as st

    st.cache_resource.clear()  # earlier rows of this process may have run the same sentences (their values cycle)
    case = next(c for c in bench_app.cases() if c.page == "real_model" and c.settings == "defaults")
    row = bench_app.measure(case, (3, 2))
    marked = [text for text in texts if any(word in text.split() for word in bench_app.MARKER_WORDS)]
    assert len(marked) == 1 + 3  # the untimed first change, then three misses; the two hits computed nothing
    assert len(set(marked)) == len(marked)
    assert row["reruns"] == 3 and row["figures"] >= 2  # the grid and the similarity map at least


def test_the_real_model_caps_plus_session_draws_every_section():
    real_model_or_skip()
    caps_plus = next(c for c in bench_app.cases() if c.page == "real_model" and c.settings == "caps+")
    short = next(c for c in bench_app.cases() if c.page == "real_model" and c.settings == "defaults")
    at, _ = bench_app.open_session(replace(caps_plus, control=short.control))  # the same session, a short sentence
    shown = set(shown_charts.charts(at))
    assert {"rm_grid", "rm_overview", "rm_sink_0", "rm_softmax_0"} <= shown, shown


def test_caps_cases_are_at_the_limits_and_judged_by_the_caps_goal():
    from mha_core.config import LIMITS

    caps = [case for case in bench_app.cases() if case.at_caps]
    assert {case.page for case in caps} >= {"heads", "step_by_step", "real_model"}
    for case in caps:
        if case.page != "real_model":
            assert len(case.params["tokens"].split()) == LIMITS["max_tokens"]
            assert int(case.params["d_model"]) == LIMITS["max_d_model"]
            assert int(case.params["heads"]) == LIMITS["max_heads"]
        assert bench_app.goal_met(case, bench_app.GOAL_CAPS_MS, bench_app.GOAL_CAPS_FIGURE_BYTES)
        assert not bench_app.goal_met(case, bench_app.GOAL_CAPS_MS + 1, 0)
        assert not bench_app.goal_met(case, 0.0, bench_app.GOAL_CAPS_FIGURE_BYTES + 1)


def test_real_model_sentences_have_exactly_128_pieces_and_differ():
    pretrained = pytest.importorskip("mha_core.pretrained")
    try:
        model = pretrained.load_minilm(allow_download=False)
    except RuntimeError as error:
        pytest.skip(f"model files missing: {error}")
    sentences = [bench_app.real_model_sentence(i, bench_app.REAL_MODEL_PIECES) for i in (0, 1, 125, 126, 1000)]
    assert len(set(sentences)) == len(sentences)
    for sentence in sentences:
        assert len(model.tokenize(sentence)) == bench_app.REAL_MODEL_PIECES
    variants = {bench_app.default_sentence_variant(i) for i in range(20)}
    assert len(variants) == 20


def test_next_heads_always_changes_the_head_count():
    for current in bench_browser.HEAD_CHOICES:
        picks = {bench_browser.next_heads(current, turn) for turn in range(10)}
        assert current not in picks and picks <= set(bench_browser.HEAD_CHOICES)
        assert all(16 % heads == 0 for heads in picks)  # divisors of the default d_model


def test_goal_columns_say_by_how_much_a_median_misses():
    assert bench_browser.goal_columns(300.0, 250.0) == {"goal": "<= 250 ms", "met": False,
                                                        "note": "missed by 50 ms (1.2x the goal)"}
    assert bench_browser.goal_columns(200.0, 250.0) == {"goal": "<= 250 ms", "met": True,
                                                        "note": "met, 50 ms to spare"}
    assert bench_browser.goal_columns(250.0, 250.0)["met"] is True


def test_opening_rows_split_the_whole_into_contiguous_parts():
    marks = dict(shell=800.0, session=850.0, chunk_start=1100.0, chunk_end=1900.0, chart=3900.0, heatmap=3000.0,
                 plotly_heatmap=4300.0)  # a live chart's canvas on screen before plotly.js has run
    sizes = dict(chunk_transfer_kb=4606.0, chunk_encoded_kb=4605.0, chunk_decoded_kb=4605.0, html_end=20.0,
                 dom_loaded=700.0, bundle_end=300.0, bundle_kb=469.0, chunk_longest_task=1500.0)
    openings = [bench_browser.Opening(**marks, **sizes),
                bench_browser.Opening(**{k: 2 * v for k, v in marks.items()}, **sizes)]
    whole, plotted, *parts = bench_browser.opening_rows("warm server", openings, quick=False)
    assert whole["median_ms"] == 4500.0 and whole["samples"] == 2 and whole["met"] is False  # the canvas: the eye's
    assert plotted["median_ms"] == 6450.0  # plotly's heatmap, which the parts add up to
    assert [part["median_ms"] for part in parts] == [1200.0, 450.0, 4200.0, 600.0]  # medians of (x, 2x)
    assert "uncompressed" in parts[2]["note"] and "download 1200 ms" in parts[2]["note"]
    assert "quick run" not in whole["note"]


def test_session_errors_count_timeouts_exceptions_and_changes_not_made():
    result = bench_load.SessionResult(planned=10, latencies=[1.0] * 6, timeouts=2, exceptions=1)
    result.page_errors.append("TypeError")
    assert result.errors == 2 + 1 + 1 + (10 - 6 - 2)
    assert bench_load.SessionResult(planned=3, latencies=[1.0] * 3).errors == 0


def test_memory_and_cpu_readers_see_a_busy_child_process():
    # The child spins until it has used 0.6 s of CPU, then idles: on a busy machine a wall-clock second may give
    # it far less than 0.3 s of CPU (seen at load 14), so the reader is polled until the child has spun.
    spin = "import time\nwhile time.process_time() < 0.6: pass\ntime.sleep(4)"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        deadline, busy = time.monotonic() + 30, 0.0
        while busy < 0.5 and time.monotonic() < deadline:
            time.sleep(0.2)
            busy = processes.descendants_cpu_seconds(os.getpid(), exclude=-1)
        assert processes.status_kb(child.pid, "VmRSS") > 1000  # a Python interpreter: several MB
        assert busy >= 0.5  # the CPU the child has spun (0.6 s in all)
        assert processes.descendants_cpu_seconds(os.getpid(), exclude=child.pid) < busy
    finally:
        child.wait(timeout=20)
    assert processes.status_kb(child.pid, "VmRSS") is None  # gone


def test_peak_rss_sampler_reads_this_process():
    sampler = bench_load.PeakRss(os.getpid())
    sampler.start()
    time.sleep(0.35)
    sampler.stop()
    assert sampler.samples >= 2
    assert sampler.peak_kb >= processes.status_kb(os.getpid(), "VmRSS") * 0.5


@pytest.mark.browser
@needs_browser
def test_browser_quick_times_every_measurement_against_its_goal():
    rows = bench_browser.run(quick=True)
    by_name = {row["measurement"]: row for row in rows}
    goals = {"Heads: seed +, every figure redrawn": bench_browser.GOAL_HEADS_MS,
             "Heads: heads pick, every figure redrawn": bench_browser.GOAL_HEADS_MS,
             "Step by step: seed +, every figure redrawn": bench_browser.GOAL_STEP_BY_STEP_MS,
             "link to first heatmap, warm server": bench_browser.GOAL_FIRST_HEATMAP_MS,
             "link to first heatmap, cold server": bench_browser.GOAL_FIRST_HEATMAP_MS}
    for name, goal in goals.items():
        row = by_name[name]
        assert row["samples"] == bench_browser.QUICK_SAMPLES and "quick run" in row["note"]
        assert finite_positive(row["median_ms"]) and row["min_ms"] <= row["median_ms"] <= row["max_ms"]
        assert row["met"] == (row["median_ms"] <= goal)
        assert row["note"].startswith("met" if row["met"] else "missed by")
    for name in list(goals)[:3]:
        row = by_name[name]
        assert finite_positive(row["server_cpu_ms"]) and finite_positive(row["browser_cpu_ms"])
        redrawn, charts = map(int, row["charts"].split("/"))
        assert 1 <= redrawn <= charts  # a seed or heads change redraws figures that are on the page
        assert row["first_ms"] <= row["median_ms"]
    for server in ("warm", "cold"):  # plotly's heatmap follows the first one on screen (a canvas, or plotly's),
        start = [row["measurement"] for row in rows].index(f"link to first heatmap, {server} server")
        plotted = rows[start + 1]  # and the parts follow it and add up to it (one sample each)
        assert plotted["measurement"].startswith("  plotly") and plotted["median_ms"] >= rows[start]["median_ms"]
        parts = rows[start + 2:start + 2 + len(bench_browser.OPENING_PARTS)]
        assert all(row["measurement"].startswith("  ") and row["median_ms"] >= 0 for row in parts)
        assert sum(row["median_ms"] for row in parts) == pytest.approx(plotted["median_ms"], abs=1e-6)
        assert "KB over the wire" in parts[2]["note"]


@pytest.mark.browser
@needs_browser
def test_load_quick_makes_every_change_without_errors():
    (row,) = bench_load.run(quick=True)
    sessions, changes = bench_load.QUICK_PLAN[0]
    assert row["sessions"] == sessions and row["changes"] == sessions * changes
    assert row["errors"] == 0 and row["done"] == sessions * changes, row
    assert finite_positive(row["p95_ms"]) and row["p95_ms"] >= row["p50_ms"]
    assert row["rss_peak_mb"] >= row["rss_idle_mb"] > 0
    assert finite_positive(row["server_cpu_s"]) and finite_positive(row["clients_cpu_s"])
