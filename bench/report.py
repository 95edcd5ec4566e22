"""Tables of rows: plain text for the terminal, Markdown and JSON for bench/results/."""

from __future__ import annotations

import json
import math
from pathlib import Path


def format_value(value) -> str:
    """A cell: floats to about three significant digits, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        size = abs(value)
        if size >= 100:
            return f"{value:.0f}"
        if size >= 10:
            return f"{value:.1f}"
        if size >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def columns_of(rows: list[dict]) -> list[str]:
    """Every key of every row, in order of first appearance."""
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    return list(columns)


def text_table(rows: list[dict]) -> str:
    """Rows as aligned plain text."""
    if not rows:
        return "(no rows)"
    columns = columns_of(rows)
    cells = [columns] + [[format_value(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)) for line in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def markdown_table(rows: list[dict]) -> str:
    """Rows as a GitHub Markdown table."""
    if not rows:
        return "(no rows)"
    columns = columns_of(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(format_value(row.get(column)).replace("|", "/") for column in columns) + " |")
    return "\n".join(lines)


def section_markdown(result: dict) -> str:
    """One section's heading, machine line, table (or error) and notes."""
    parts = [f"## {result['title']}", "", f"*{result['machine_line']}; {result['seconds']:.0f} s"
             + (", quick mode (tiny sizes, one repetition: not a measurement)*" if result["quick"] else "*"), ""]
    if result.get("error"):
        parts += ["```", result["error"].rstrip(), "```"]
    else:
        parts.append(markdown_table(result["rows"]))
    if result.get("notes"):
        parts += ["", result["notes"]]
    return "\n".join(parts) + "\n"


def write_results(results: dict[str, dict], order: list[str], directory: Path, stem: str) -> tuple[Path, Path]:
    """Write ``stem.json`` (every section's rows and machine) and ``stem.md`` (the tables)."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, markdown_path = directory / f"{stem}.json", directory / f"{stem}.md"
    json_path.write_text(json.dumps({"sections": results}, indent=1) + "\n")
    sections = [section_markdown(results[name]) for name in order if name in results]
    markdown_path.write_text("# MHA Explorer benchmarks\n\nWritten by `python -m bench`.\n\n" + "\n".join(sections))
    return json_path, markdown_path


def previous_results(directory: Path, stem: str) -> dict[str, dict]:
    """The sections of an earlier ``stem.json``, or nothing when there is none or it is unreadable."""
    try:
        return json.loads((directory / f"{stem}.json").read_text())["sections"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def skipped_row(reason: str, **columns) -> dict:
    """The single row of a section that cannot run on this machine."""
    return columns | {"note": f"skipped: {reason}"}
