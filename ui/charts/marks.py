"""Marks that say whether a claim holds, drawn with fonts every browser has.

Emoji (✅ ❌ 🔶) need a colour-emoji font; Debian's chromium ships without one and draws an empty box.
In markdown the marks are Streamlit's Material Symbols (a font Streamlit serves itself); in a table cell,
where markdown is not read, they are plain glyphs DejaVu Sans has (✓ U+2713, ✗ U+2717). The shape says
it (a tick or a cross) and the colour only repeats it.
"""

from __future__ import annotations

HOLDS = ":green[:material/check_circle:]"
FAILS = ":red[:material/cancel:]"
UNSEEDED = ":orange[:material/casino:]"  # the icon of the Seed notebooks' "Unseeded randomness" warning
CELL_HOLDS = "✓"
CELL_FAILS = "✗"


def mark(holds: bool) -> str:
    """The markdown mark in front of a claim: a green tick when it holds, a red cross when not."""
    return HOLDS if holds else FAILS


def cell_mark(holds: bool) -> str:
    """The same mark for a table cell: ✓ or ✗."""
    return CELL_HOLDS if holds else CELL_FAILS


def claim_list(claims) -> str:
    """A markdown list, one marked line per claim (anything with ``.holds`` and ``.text``)."""
    return "\n".join(f"- {mark(c.holds)} {c.text}" for c in claims)
