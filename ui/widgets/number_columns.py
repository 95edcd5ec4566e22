"""How a table's number columns print (Streamlit's column config), one rule for every page: fixed decimals
(``ui.charts.numbers``), and a column's meaning on hover where the page has one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd
import streamlit as st

from ui.charts.numbers import DECIMALS, column_format
from ui.i18n import _

NUMBER_FORMAT = column_format(DECIMALS)  # every table's numbers: fixed decimals


def number_columns(columns: Iterable, number_format: str = NUMBER_FORMAT,
                   help_texts: Mapping[str, str] | None = None) -> dict:
    """A column_config that prints every one of ``columns`` with ``number_format`` (help from ``help_texts``)."""
    helps = help_texts or {}
    return {c: st.column_config.NumberColumn(c, help=helps.get(c), format=number_format) for c in columns}


def in_language(frame: pd.DataFrame, help_texts: Mapping[str, str] | None = None) -> tuple[pd.DataFrame, dict]:
    """A table whose column and index names are marked English keys, renamed into the run's language, and its
    ``help_texts`` keyed by the shown names. The values are untouched; a CSV keeps the English keys."""
    names = {column: _(column) for column in frame.columns}
    shown = frame.rename(columns=names)
    if frame.index.name:
        shown.index.name = _(frame.index.name)
    return shown, {names[c]: text for c, text in (help_texts or {}).items() if c in names}
