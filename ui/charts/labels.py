"""Axis and column labels that several figures and tables print the same way."""

from __future__ import annotations


def concat_columns(width: int, n_heads: int) -> list[str]:
    """Column labels of the concatenated head outputs, (Tq, nh*hv): 'h<head>·<column within the head>'."""
    hv = width // n_heads
    return [f"h{c // hv}·{c % hv}" for c in range(width)]


def max_title(title: str, top: float) -> str:
    """A panel's title with the top of its colour range, 3 significant digits: 'head 3 · max 0.412'."""
    return f"{title} · max {top:.3g}"
