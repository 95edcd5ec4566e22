"""How the app prints a number: one format for tables, cell texts and sentences. No streamlit in here.

Fixed decimals (``0.7480`` above ``0.7002``, never ``0.748``: a column of numbers lines up and a
trailing zero is not mistaken for a missing digit), and never a negative zero: ``-0.00003`` at two
decimals is ``0.00``, not ``-0.00`` (the sign of a number that rounds to zero tells nothing).
Masked logits (-inf) are written ``−∞``; a missing value (NaN) is blank.

A count a sentence or a metric states in words (tokens, bytes, numbers kept) is written with the reader's digit
grouping (``count``: Babel's CLDR data, 49,152 / 49.152); every decimal keeps the point in every language, because
the same numbers appear in tables, charts, formulas and downloads that must read and parse alike everywhere.

Streamlit's table drops trailing zeros unless a column has a format, and prints ``-0.0000`` for a tiny
negative value even with one: ``table_values`` turns the values that print as zero into +0 (the others keep
every digit), ``column_format`` is the printf format every number column gets.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
from babel import Locale
from babel.numbers import format_decimal, get_decimal_symbol, get_group_symbol

from ui.i18n import LANGUAGES, current_language

DECIMALS = 4  # a table's numbers
CELL_DECIMALS = 2  # a number printed inside a heatmap cell
EMPTY_CELL = "—"  # a table's cell with no value (st.dataframe's ``placeholder``; Streamlit would print "None")


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


@functools.cache
def number_locale(code: str) -> Locale:
    """The Babel locale whose digit grouping a language's counts use: its catalog's ("zh_CN" -> zh_Hans_CN)."""
    return Locale.parse(LANGUAGES[code].locale)


NARROW_SPACE = "\u202f"  # the SI's digit-group mark: no language reads it as a decimal mark


def group_mark(code: str) -> str:
    """The mark between digit groups of a count in language ``code``: the locale's own (Babel's CLDR data) when
    its decimal mark is the point, as every decimal here is written; otherwise the SI's narrow space, because the
    locale's group mark would then be a point (Spanish: 1536 as "1.536" beside a decimal 1.536)."""
    locale = number_locale(code)
    return get_group_symbol(locale) if get_decimal_symbol(locale) == "." else NARROW_SPACE


def count(n: int) -> str:
    """An integer stated in words, grouped as the reader's language groups digits: 49152 -> '49,152' (en, zh-CN),
    '49 152' with a narrow space (es: the RAE's 2010 rule and the SI's, four digits ungrouped). Decimals never go
    through here: they keep the point in every language, as in the tables, charts, CSV files and notebooks."""
    code = current_language()
    if group_mark(code) != NARROW_SPACE:
        return format_decimal(int(n), locale=number_locale(code))
    n = int(n)
    return str(n) if abs(n) < 10_000 else f"{n:,}".replace(",", NARROW_SPACE)


def column_format(decimals: int = DECIMALS) -> str:
    """The printf format of a table's number column: fixed ``decimals`` decimals (Streamlit's NumberColumn)."""
    return f"%.{decimals}f"


def without_negative_zeros(values: np.ndarray, decimals: int = DECIMALS) -> np.ndarray:
    """``values`` with every value that prints as zero at ``decimals`` decimals made +0.0 (so none prints as
    ``-0.00``); every other value is kept to the last digit (a table's cells are copied with all of them)."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        zero = np.round(values, decimals) == 0  # includes -0.0 and tiny negatives
    return np.where(zero, 0.0, values)


def table_values(frame: pd.DataFrame, decimals: int = DECIMALS) -> pd.DataFrame:
    """A copy of ``frame`` whose float columns have no value that would print as ``-0.00…`` at ``decimals``."""
    out = frame.copy()
    for column in float_columns(out):
        out[column] = without_negative_zeros(out[column].to_numpy(), decimals)
    return out


def float_columns(frame: pd.DataFrame) -> list:
    """The names of ``frame``'s float columns (those that get a fixed-decimals format)."""
    return [column for column in frame.columns if pd.api.types.is_float_dtype(frame[column])]
