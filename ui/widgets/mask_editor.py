"""The custom mask: where the sidebar's grid starts from, and the grid of checkboxes on the page."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from mha_core.config import MHAConfig, build_mask
from mha_core.inputs import token_labels
from ui.i18n import _
from ui.state.settings import MASK_LABELS
from ui.widgets.state import KEEP, set_grid


def _fitted_grid(tq: int, tk: int) -> tuple[tuple[bool, ...], ...]:
    """The custom mask, or all allowed when it was made for another sentence."""
    grid = st.session_state.get("custom_grid")
    if grid is None or len(grid) != tq or any(len(r) != tk for r in grid):
        grid = tuple(tuple(True for _col in range(tk)) for _row in range(tq))
        set_grid(grid)
    return grid


def custom_grid(tokens, key_tokens, start: MHAConfig) -> tuple[tuple[bool, ...], ...]:
    """In the sidebar: which mask the grid starts from. The grid itself is edited on the page (``mask_editor``),
    where there is room for a column per key, and kept outside widget state."""
    tq, tk = len(tokens), len(key_tokens)
    grid = _fitted_grid(tq, tk)
    base = st.selectbox(
        _("Start the grid from"),
        ["none", "causal", "padding", "window"],
        key="w_grid_start",
        persist_state=KEEP,
        format_func={mask: _(label) for mask, label in MASK_LABELS.items()}.get,
    )
    if st.button(_("Reset the grid to it"), key="grid_reset"):
        mask = build_mask(replace(start, mask=base))
        grid = tuple(tuple(bool(c) for c in row) for row in (np.ones((tq, tk), bool) if mask is None else mask))
        set_grid(grid)
    st.caption(_("Edit the grid on the page, beside the heatmap: a click on a cell allows or blocks that key."))
    return grid


def _apply_grid_edits(editor_key: str, columns: list[str]) -> None:
    """The editor's changes (cells set since it was drawn from ``grid_base``) onto the custom mask, before the run."""
    ss = st.session_state
    grid = [list(row) for row in ss.grid_base]
    for row, changes in ss[editor_key]["edited_rows"].items():
        for column, allowed in changes.items():
            grid[int(row)][columns.index(column)] = bool(allowed)
    ss.custom_grid = tuple(tuple(row) for row in grid)


def mask_editor(config: MHAConfig) -> None:
    """The custom mask as a grid of checkboxes in the main area: rows = queries, columns = keys, a click
    toggles a cell. Draws nothing unless the mask is custom. Its edits reach the sidebar's configuration
    through a callback, before the next run computes anything."""
    import pandas as pd  # only this control needs pandas

    if config.mask != "custom":
        return
    ss = st.session_state
    base = ss.get("grid_base")
    if base is None or np.shape(base) != (len(config.tokens), len(config.key_tokens)):
        set_grid(config.custom_mask)
        base = ss.grid_base
    columns = token_labels(config.key_tokens)
    key = f"grid_{ss.grid_version}"
    st.markdown(_("**Custom mask** — ticked: the query (row) may attend to the key (column)."))
    st.data_editor(
        pd.DataFrame(list(base), index=token_labels(config.tokens), columns=columns),
        key=key,
        num_rows="fixed",
        width="content",
        on_change=_apply_grid_edits,
        args=(key, columns),
        column_config={c: st.column_config.CheckboxColumn(c, width="small") for c in columns},
    )

