"""Section "pack": the static lesson pack (deploy/static_pack.py): its size and how long it takes to build.

The pack is built as a teacher builds it, ``python -m deploy.static_pack OUT_DIR [--links FILE]`` in a process of
its own: the benchmarks import nothing of deploy/ (nor deploy of bench/), so the time is the command's."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.launch import ROOT

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "ran", "off", "to", "see", "the", "dog"]
CAPS_LINK = "?tokens=" + "+".join((WORDS * 5)[:64]) + "&d_model=512&heads=16&mask=causal"  # the largest heads page
TEACHER_LINKS = [f"?tokens=the+cat+sat+on+the+mat&seed={seed}&mask=causal" for seed in range(20)]
CASES = (("lessons + presets", []), ("+ 20 teacher's links", TEACHER_LINKS), ("+ 1 link at the caps", [CAPS_LINK]))
REPEATS, QUICK_REPEATS = 3, 1
# Quick mode (the smoke test, tests/test_bench_pack.py) builds one lesson: the whole pack's command is run and checked
# by tests/test_static_pack_links.py, and SmolLM2's lessons cost ~15 s per new process.
QUICK_LESSONS = "wo"


def build_pack(directory: Path, links: list[str], lessons: str | None = None) -> tuple[Path, float]:
    """Run the pack's command into ``directory``/pack (``lessons``: only these, as ``--lessons`` takes them): the folder
    written and the command's wall time in seconds."""
    out = directory / "pack"
    command = [sys.executable, "-m", "deploy.static_pack", str(out)]
    if lessons is not None:
        command += ["--lessons", lessons]
    if links:
        (directory / "links.txt").write_text("\n".join(links) + "\n", encoding="utf-8")
        command += ["--links", str(directory / "links.txt")]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[1:])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return out, seconds


def build_row(name: str, links: list[str], repeats: int, lessons: str | None = None) -> dict:
    """Build the pack ``repeats`` times into fresh folders: the median time of the command, and what it wrote."""
    seconds = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="mha-bench-pack-") as directory:
            out, took = build_pack(Path(directory), links, lessons)
            seconds.append(took)
            html = [f.stat().st_size for f in out.glob("*.html")]  # bytes of each page, the index included
            size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
            plotly_js = (out / "assets" / "plotly.min.js").stat().st_size
    return {
        "pack": name,
        "lessons": lessons or "all",
        "pages": len(html),
        "size_mb": size / 1e6,
        "plotly_js_mb": plotly_js / 1e6,
        "pages_mb": sum(html) / 1e6,
        "largest_page_kb": max(html) / 1e3,
        "command_s": statistics.median(seconds),
        "repeats": repeats,
    }


def run(quick: bool) -> list[dict]:
    """The pack's size on disk (one plotly.js, shared by every page) and the time of its command (median of 3
    runs: Python's start and imports, engine runs, figures and writing included). Rows: the lessons and presets alone;
    with a teacher's file of 20 small links; with one link at the caps (64 tokens, d_model 512, 16 heads). Quick mode:
    one build of each, with one lesson (QUICK_LESSONS)."""
    if quick:
        return [build_row(name, links, QUICK_REPEATS, QUICK_LESSONS) for name, links in CASES]
    return [build_row(name, links, REPEATS) for name, links in CASES]


if __name__ == "__main__":
    from bench.report import text_table

    print(text_table(run(quick="--quick" in sys.argv)))
