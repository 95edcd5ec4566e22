"""How the app prints a number: one format for tables, cell texts and sentences. No streamlit in here.

Fixed decimals (``0.7480`` above ``0.7002``, never ``0.748``: a column of numbers lines up and a
trailing zero is not mistaken for a missing digit), and never a negative zero: ``-0.00003`` at two
decimals is ``0.00``, not ``-0.00`` (the sign of a number that rounds to zero tells nothing).
Masked logits (-inf) are written ``−∞``; a missing value (NaN) is blank.

Streamlit's table drops trailing zeros unless a column has a format, and prints ``-0.0000`` for a tiny
negative value even with one: ``table_values`` rounds a frame's float columns and clears negative
zeros, ``column_format`` is the printf format every number column gets.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

DECIMALS = 4  # a table's numbers
CELL_DECIMALS = 2  # a number printed inside a heatmap cell


def fixed(value: float, decimals: int = DECIMALS) -> str:
    """``value`` with exactly ``decimals`` decimals, no negative zero; ``−∞`` / ``∞`` for infinities, '' for NaN."""
    value = float(value)
    if math.isnan(value):
        return ""
    if math.isinf(value):
        return "−∞" if value < 0 else "∞"
    text = f"{value:.{decimals}f}"
    if text.startswith("-") and float(text) == 0.0:  # -0.00: rounds to zero, the sign says nothing
        text = text[1:]
    return text


def column_format(decimals: int = DECIMALS) -> str:
    """The printf format of a table's number column: fixed ``decimals`` decimals (Streamlit's NumberColumn)."""
    return f"%.{decimals}f"


def rounded(values: np.ndarray, decimals: int = DECIMALS) -> np.ndarray:
    """``values`` rounded to ``decimals`` with every negative zero made +0 (infinities and NaN kept)."""
    out = np.round(np.asarray(values, dtype=np.float64), decimals)
    return out + 0.0  # IEEE: -0.0 + 0.0 is +0.0, every other value is unchanged


def table_values(frame: pd.DataFrame, decimals: int = DECIMALS) -> pd.DataFrame:
    """A copy of ``frame`` whose float columns are ``rounded``: what a table shows at ``decimals`` decimals."""
    out = frame.copy()
    for column in out.columns:
        if pd.api.types.is_float_dtype(out[column]):
            out[column] = rounded(out[column].to_numpy(), decimals)
    return out


def float_columns(frame: pd.DataFrame) -> list:
    """The names of ``frame``'s float columns (those that get a fixed-decimals format)."""
    return [column for column in frame.columns if pd.api.types.is_float_dtype(frame[column])]
