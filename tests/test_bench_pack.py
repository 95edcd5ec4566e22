"""Smoke test of the bench section "pack": its rows are sane (timings are not judged here)."""

from __future__ import annotations

import math

from bench import bench_pack
from bench.registry import select
from mha_core.presets import PRESET_INITS


def test_the_pack_rows_count_the_pages_and_one_copy_of_plotly():
    assert [s.name for s in select("pack")] == ["pack"]
    rows = bench_pack.run(quick=True)
    base = 1 + len(PRESET_INITS) + 1  # quick mode's one lesson (the whole pack: test_static_pack_links), presets, index
    assert [r["pages"] for r in rows] == [base, base + len(bench_pack.TEACHER_LINKS), base + 1]
    for row in rows:
        assert math.isfinite(row["command_s"]) and row["command_s"] > 0
        assert row["plotly_js_mb"] < row["size_mb"] < row["plotly_js_mb"] + row["pages_mb"] + 0.1  # plotly.js once
    assert rows[2]["largest_page_kb"] > rows[0]["largest_page_kb"]  # the link at the caps is the heaviest page
