"""Heads' "What each head does": the per-head table and the head similarity, made without pandas, kept per result.

Every Seed + built a pandas DataFrame of the head summary, renamed its headers into the reader's language, and
Streamlit converted it to Arrow; a second DataFrame was made only to read the similarity back out: ~2 ms of a Heads
run's ~25 ms of server CPU (py-spy, issue 38), nearly all of it pandas. Here the Arrow table st.dataframe sends is
made from the engine's arrays directly (``arrow_table``), headers in the reader's language from the start: the same
bytes (tests/test_heads_diagnostics_table.py compares them with pandas' route for every kernel, cross-attention and
language).

What a result shows is also kept (``head_diagnostics``), shared by every session like the figures
(``ui.run.cached_figures``), read-only by contract: a rerun of the same configuration (a view switch, the average
toggle, a second student on the same settings) makes none of it again. The key is the configuration and the
language (``cached_figures.digest``): the result is the engine's for that configuration (``ui.run.compute.cached_run``
is keyed on it too), and every word here (headers, help texts, the "head h" rows, the similarity's sentence) is in
the run's language.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st
from streamlit import dataframe_util

from mha_core.diagnostics import head_similarity
from ui.charts import describe, tables
from ui.i18n import _
from ui.run import cached_figures
from ui.widgets.number_columns import number_columns

NOT_DEFINED = "—"  # the entropy of signed rows: a text column that says where it went
TEXT = "text"  # a column of NOT_DEFINED, in a table's shape (else the column's numpy dtype)


@dataclass(frozen=True)
class HeadDiagnostics:
    """What the section shows of one result in one language."""

    table: pa.Table  # the per-head table exactly as st.dataframe would make it of its DataFrame
    headers: tuple[str, ...]  # its index name and column headers as shown (a phone's swipe hint names them)
    column_config: Mapping[str, dict]  # each column's format and help (Streamlit copies it before changing it)
    similarity: np.ndarray  # (nh, nh) cosine similarity of the heads' weight matrices, read-only
    similarity_alt: str  # the similarity chart in words


def head_diagnostics(result) -> HeadDiagnostics:
    """``build_diagnostics(result)``, kept per configuration and language (bounded like the figures)."""
    return _head_diagnostics(cached_figures.digest("head diagnostics", result.config), result)


@st.cache_resource(max_entries=cached_figures.MAX_FIGURES, show_spinner=False)
def _head_diagnostics(key: str, _result) -> HeadDiagnostics:
    return build_diagnostics(_result)


def build_diagnostics(result) -> HeadDiagnostics:
    """The head summary (entropy, max weight, diagonal / previous / first mass; signed rows: "—" for the entropy)
    with its headers and help in the run's language, and the heads' similarity with its words."""
    trace = result.trace
    summary = tables.head_summary_columns(trace, cross=result.config.is_cross)  # English label -> (nh,)
    meanings = dict(tables.diagnostic_columns(trace).values())
    signed = "entropy" not in summary
    shown = {_(label): values for label, values in summary.items()}  # headers in the reader's language
    config = number_columns(list(shown), "%.3f", {_(label): meanings[label] for label in summary})
    if signed:  # signed rows: say where the entropy went, in its own column, first
        shown = {_("entropy"): np.full(trace.n_heads, NOT_DEFINED, dtype=object), **shown}
        config[_("entropy")] = st.column_config.TextColumn(_("entropy"), help=meanings["entropy"])
    similarity = head_similarity(trace.weights)  # (nh, nh)
    similarity.setflags(write=False)
    index_name = _("head")
    return HeadDiagnostics(
        table=arrow_table(index_name, tables.head_names(trace.n_heads), shown),
        headers=(index_name, *shown),
        column_config=config,
        similarity=similarity,
        similarity_alt=describe.describe_similarity(similarity, title=_("Head similarity")),
    )


def arrow_table(index_name: str, index: list[str], columns: Mapping[str, np.ndarray]) -> pa.Table:
    """The Arrow table Streamlit makes of ``pd.DataFrame(columns, index=pd.Index(index, name=index_name))``
    (``dataframe_util.convert_pandas_df_to_arrow_table``), made from the arrays directly: its columns in order, the
    index last, with the schema pandas' route gives a table of that shape (``_schema``)."""
    shape = tuple((name, TEXT if values.dtype == object else values.dtype.str) for name, values in columns.items())
    schema = _schema(index_name, shape)
    values = [*columns.values(), index]
    # from_pandas: NaN (a head with no row counted) becomes null, as pandas' route makes it
    return pa.Table.from_arrays([pa.array(column, type=field.type, from_pandas=True)
                                 for column, field in zip(values, schema, strict=True)], schema=schema)


@functools.lru_cache(maxsize=64)  # one per language, kernel kind (signed or not) and cross-attention, at most
def _schema(index_name: str, shape: tuple[tuple[str, str], ...]) -> pa.Schema:
    """The schema (field types and pandas' metadata) of the table a DataFrame of ``shape`` becomes: pandas' own
    route, on a one-row frame. It names the columns and their types, never their values or the row count."""
    frame = pd.DataFrame({name: [NOT_DEFINED] if kind == TEXT else np.zeros(1, dtype=kind) for name, kind in shape},
                         index=pd.Index(["h"], name=index_name))
    return dataframe_util.convert_pandas_df_to_arrow_table(frame).schema
