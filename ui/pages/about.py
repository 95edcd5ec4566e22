"""The About page's builders: the glossary of shapes read from the engine's docstring."""

from __future__ import annotations

import re


def glossary_rows(docstring: str) -> list[tuple[str, str]]:
    """(symbol, meaning) pairs from the indented 'Glossary of shapes' block of a docstring."""
    rows = []
    in_glossary = False
    for line in docstring.splitlines():
        if line.lower().startswith("glossary"):
            in_glossary = True
            continue
        if in_glossary:
            match = re.match(r"^\s{2,}(\S+)\s{2,}(.+)$", line)
            if match:
                rows.append((match.group(1), match.group(2).strip()))
            elif rows and line.strip():
                break
    return rows

