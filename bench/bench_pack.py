"""Section "pack": the static lesson pack (deploy/static_pack.py): its size and how long it takes to build."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from deploy.static_pack import PLOTLY_JS, build_pack

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "ran", "off", "to", "see", "the", "dog"]
CAPS_LINK = "?tokens=" + "+".join((WORDS * 5)[:64]) + "&d_model=512&heads=16&mask=causal"  # the largest heads page
TEACHER_LINKS = [f"?tokens=the+cat+sat+on+the+mat&seed={seed}&mask=causal" for seed in range(20)]
CASES = (("lessons + presets", []), ("+ 20 teacher's links", TEACHER_LINKS), ("+ 1 link at the caps", [CAPS_LINK]))
REPEATS, QUICK_REPEATS = 3, 1


def build_row(name: str, links: list[str], repeats: int) -> dict:
    """Build the pack ``repeats`` times into fresh folders: the median build time, and what was written."""
    seconds = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="mha-bench-pack-") as directory:
            start = time.perf_counter()
            report = build_pack(Path(directory) / "pack", links)
            seconds.append(time.perf_counter() - start)
            html = [f.stat().st_size for f in report.out_dir.glob("*.html")]  # bytes of each page
    return {
        "pack": name,
        "pages": len(report.pages),
        "size_mb": report.total_bytes / 1e6,
        "plotly_js_mb": PLOTLY_JS.stat().st_size / 1e6,
        "pages_mb": sum(html) / 1e6,
        "largest_page_kb": max(html) / 1e3,
        "build_s": statistics.median(seconds),
        "repeats": repeats,
    }


def run(quick: bool) -> list[dict]:
    """The pack's size on disk (one plotly.js, shared by every page) and its build time (median of 3 builds,
    engine runs, figures and writing included). Rows: the lessons and presets alone; with a teacher's file of
    20 small links; with one link at the caps (64 tokens, d_model 512, 16 heads). Quick mode: one build of each."""
    repeats = QUICK_REPEATS if quick else REPEATS
    return [build_row(name, links, repeats) for name, links in CASES]


if __name__ == "__main__":
    from bench.report import text_table

    print(text_table(run(quick="--quick" in sys.argv)))
