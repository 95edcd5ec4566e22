"""How a table's number columns print (Streamlit's column config), one rule for every page: fixed decimals
(``ui.charts.numbers``), and a column's meaning on hover where the page has one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import streamlit as st

from ui.charts.numbers import DECIMALS, column_format

NUMBER_FORMAT = column_format(DECIMALS)  # every table's numbers: fixed decimals


def number_columns(columns: Iterable, number_format: str = NUMBER_FORMAT,
                   help_texts: Mapping[str, str] | None = None) -> dict:
    """A column_config that prints every one of ``columns`` with ``number_format`` (help from ``help_texts``)."""
    helps = help_texts or {}
    return {c: st.column_config.NumberColumn(c, help=helps.get(c), format=number_format) for c in columns}
