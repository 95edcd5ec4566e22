"""``python -m bench``: run the benchmark sections, print their tables, write bench/results/."""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

from bench.machine import machine_info, machine_line
from bench.registry import SECTIONS, Section, select
from bench.report import previous_results, text_table, write_results

RESULTS = Path(__file__).resolve().parent / "results"


def run_section(section: Section, quick: bool) -> dict:
    """Run one section; its rows, or the error it raised, with the machine it ran on."""
    info = machine_info()
    start = time.perf_counter()
    result = {"title": section.title, "quick": quick, "machine": info, "machine_line": machine_line(info)}
    try:
        result["notes"] = section.notes()
        result["rows"] = section.function()(quick)
    except Exception:  # a broken section is reported and fails the run, the others still run
        result["rows"] = []
        result["error"] = traceback.format_exc()
    result["seconds"] = time.perf_counter() - start
    if hasattr(os, "getloadavg"):  # a busy machine explains noisy numbers
        result["machine_line"] += f", {os.getloadavg()[0]:.2f} at the end"
    return result


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="every section once at tiny sizes (smoke test)")
    parser.add_argument("--only", metavar="NAMES", help="comma-separated sections, e.g. engine,seeds")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"directory for the results (default {RESULTS})")
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    parser.add_argument("--untested", action="store_true",
                        help="leave out the sections whose quick mode a test runs (Section.tested_by): CI's step")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the selected sections; 1 if any of them failed, else 0.

    A full run merges its sections into ``latest.json`` / ``latest.md`` (sections not run keep
    their earlier tables); a quick run writes ``quick.json`` / ``quick.md`` and nothing else.
    """
    arguments = parse_arguments(argv)
    if arguments.list:
        for section in SECTIONS:
            print(f"{section.name:8s} {section.title}")
        return 0
    try:
        sections = [s for s in select(arguments.only) if not (arguments.untested and s.tested_by)]
    except ValueError as error:
        print(f"python -m bench: {error}", file=sys.stderr)
        return 2
    stem = "quick" if arguments.quick else "latest"
    results = {} if arguments.quick else previous_results(arguments.out, stem)
    failed = False
    for section in sections:
        print(f"\n== {section.title} ({section.name}) ==", flush=True)
        result = run_section(section, arguments.quick)
        results[section.name] = result
        print(result["machine_line"])
        if result.get("error"):
            failed = True
            print(result["error"], file=sys.stderr)
        else:
            print(text_table(result["rows"]))
        print(f"({result['seconds']:.1f} s)", flush=True)
    paths = write_results(results, [section.name for section in SECTIONS], arguments.out, stem)
    print("\nwritten: " + ", ".join(str(path) for path in paths))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
