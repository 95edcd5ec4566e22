"""Axis and column labels that several figures and tables print the same way."""

from __future__ import annotations

import unicodedata

from ui.i18n import _


def said(text: str) -> str:
    """A marked word or sentence held in a variable (a record's field, a page's argument) in the current language;
    "" stays "" (gettext's "" is the catalog's header, never a word a page shows)."""
    return _(text) if text else text


def concat_columns(width: int, n_heads: int) -> list[str]:
    """Column labels of the concatenated head outputs, (Tq, nh*hv): 'h<head>·<column within the head>'."""
    hv = width // n_heads
    return [f"h{c // hv}·{c % hv}" for c in range(width)]


def max_title(title: str, top: float) -> str:
    """A panel's title with the top of its colour range, 3 significant digits: 'head 3 · max 0.412'."""
    return _("{title} · max {top}").format(title=title, top=f"{top:.3g}")


def shown_token(text: str) -> str:
    """A token's label made visible: a leading space as '␣', a newline as '↵', a tab as '⇥'; a character that
    draws nothing alone (a zero-width joiner, a variation selector) by its short name, a combining mark on '◌'."""
    text = text.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")
    return "".join(_visible(char) for char in text)


INVISIBLE_NAMES = {"\u200d": "ZWJ", "\u200c": "ZWNJ", "\ufe0f": "VS16", "\ufe0e": "VS15", "\ufeff": "BOM"}


def _visible(char: str) -> str:
    if char in INVISIBLE_NAMES:
        return f"‹{INVISIBLE_NAMES[char]}›"
    if unicodedata.combining(char):
        return "◌" + char
    return char


def axis_labels(tokens) -> list[str]:
    """Heatmap labels that carry the position ('3:␣the'): plotly merges repeated tick labels."""
    return [f"{i}:{shown_token(t)}" for i, t in enumerate(tokens)]
