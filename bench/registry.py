"""The benchmark sections, in the order they run and print.

Each entry names a function ``run(quick: bool) -> list[dict]`` as "module:function"; the
module is imported only when the section runs, so a section that needs torch or a browser
costs nothing to the others.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """One table of ``python -m bench``."""

    name: str  # what --only takes
    title: str  # the table's heading
    target: str  # "module:function", the function returning the rows
    # the test file that runs this section's quick mode and checks its rows ("": none); ``--untested`` leaves it out,
    # as CI does: that quick run is already made, and its rows checked, by the test
    tested_by: str = ""

    def function(self) -> Callable[[bool], list[dict]]:
        """Import the section's module and return its ``run(quick)`` function."""
        module_name, function_name = self.target.split(":")
        return getattr(importlib.import_module(module_name), function_name)

    def notes(self) -> str:
        """How to read the table: the function's docstring."""
        return inspect.getdoc(self.function()) or ""


SMOKE, APP_SMOKE = "tests/test_bench_smoke.py", "tests/test_bench_app_smoke.py"
SECTIONS = (
    Section("engine", "Engine vs torch", "bench.bench_engine:run", SMOKE),
    Section("seeds", "Engine vs the seeds' loops over heads", "bench.bench_seeds:run", SMOKE),
    Section("kernels", "Engine kernels: each performance choice against its alternative", "bench.bench_kernels:run", SMOKE),
    Section("minilm", "Real model (all-MiniLM-L6-v2) budgets", "bench.bench_minilm:run"),
    Section("smollm2", "Real decoder (SmolLM2-135M, 4-bit) budgets", "bench.bench_smollm2:run"),
    Section("long", "SmolLM2 longer than trained: the default view's long runs", "bench.bench_long:run"),
    Section("whatif", "SmolLM2 what-ifs: first view with and without the shipped sweep, QK-norm", "bench.bench_whatif:run"),
    Section("app", "App reruns per page: time and figure bytes", "bench.bench_app:run", APP_SMOKE),
    Section("server", "Server CPU per control change, real server on one core", "bench.bench_server:run"),
    Section("browser", "Browser: control change to updated heatmap", "bench.bench_browser:run", APP_SMOKE),
    Section("livechart", "Browser: Heads and Step by step against the floor page (ratios)", "bench.bench_livechart:run"),
    Section("load", "Classroom load test: N sessions at once", "bench.bench_load:run", APP_SMOKE),
    Section("capacity", "Capacity: protocol clients against one server on one core", "bench.bench_capacity:run"),
    Section("replicas", "Capacity behind nginx: 2 replicas against 1", "bench.bench_capacity:run_replicas"),
    Section("memory", "Server memory: both real models, then 48 pages at the caps", "bench.bench_memory:run",
            "tests/test_bench_memory.py"),
    Section("pack", "Static lesson pack: size and build time", "bench.bench_pack:run", "tests/test_bench_pack.py"),
    Section("i18n", "Interface language: catalog load, a switch's lookups, a switching rerun", "bench.bench_i18n:run"),
)


def select(only: str | None) -> list[Section]:
    """The sections named in a comma-separated list (all of them for None), in registry order."""
    if not only:
        return list(SECTIONS)
    wanted = {name.strip() for name in only.split(",") if name.strip()}
    known = {section.name for section in SECTIONS}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(sorted(known))}")
    return [section for section in SECTIONS if section.name in wanted]
