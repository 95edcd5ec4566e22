"""The Real model page's "Token sets" for either model (Streamlit; numbers: mha_core/token_sets.py).

Drawn only while its expander is open. Read the query set and the key set (widgets ``w_<prefix>_set_q``,
``w_<prefix>_set_k``; on the session's first visit the link's ``rm_sq`` and ``rm_sk``: positions joined by commas,
the box opened) -> the share of the queries' attention on the keys as a layer × head grid, and per token.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import token_sets as ts
from ui.charts import describe, figures
from ui.charts.sent import figure
from ui.i18n import _
from ui.pages.real_model.section_links import sync_params
from ui.state.address import address
from ui.state.device import chart_config, on_phone
from ui.widgets.live import show_chart
from ui.widgets.phone import swipe_hint
from ui.widgets.state import KEEP

SET_PARAMS = {"q": "rm_sq", "k": "rm_sk"}


def positions_from_link(params: Mapping[str, str], name: str, n_tokens: int, messages: list[str]) -> list[int] | None:
    """The positions of the link's ``name`` (None when absent); a message for each entry left out."""
    if name not in params:
        return None
    kept = []
    for piece in (p.strip() for p in params[name].split(",") if p.strip()):
        if not piece.isdigit() or int(piece) >= n_tokens:
            messages.append(_("`{param}`: '{piece}' is not a token position (0..{last}); it is left out.").format(
                param=name, piece=piece, last=n_tokens - 1))
            continue
        kept.append(int(piece))
    return sorted(set(kept))


def read_link(prefix: str, n_tokens: int) -> None:
    ss = st.session_state
    if f"{prefix}_sets_link_read" in ss:
        return
    params, messages = address().to_dict(), []
    for side, name in SET_PARAMS.items():
        found = positions_from_link(params, name, n_tokens, messages)
        ss[f"w_{prefix}_set_{side}"] = found if found else ([n_tokens - 1] if side == "q" else list(range(n_tokens)))
    ss[f"w_{prefix}_sets"] = any(name in params for name in SET_PARAMS.values())
    ss[f"{prefix}_sets_messages"] = messages
    ss[f"{prefix}_sets_link_read"] = True


def write_link(queries: list[int], keys: list[int], n_tokens: int, shown: bool) -> None:
    values = {"rm_sq": ",".join(map(str, queries)), "rm_sk": ",".join(map(str, keys))} if shown else {}
    sync_params(address(), SET_PARAMS.values(), values)


def token_sets_section(prefix: str, attentions_of: Callable[[], np.ndarray], labels: list[str]) -> None:
    """``prefix`` "sm" or "rm"; ``attentions_of()`` the run's (L, nh, T, T), asked for only while the box is open."""
    t = len(labels)
    read_link(prefix, t)
    for side in ("q", "k"):  # a shorter text: positions past its end go
        key = f"w_{prefix}_set_{side}"
        st.session_state[key] = [p for p in st.session_state.get(key, []) if p < t]
    box = st.expander(_("Token sets: what a set of tokens attends to"), key=f"w_{prefix}_sets", on_change="rerun")
    if not box.open:
        write_link([], [], t, False)
        return
    with box:
        for message in st.session_state.get(f"{prefix}_sets_messages", []):
            st.warning(_("Link: {message}").format(message=message))
        token_sets_body(prefix, attentions_of(), labels)


def grid_figure(grid: np.ndarray, layers: list[str], heads: list[str]):
    """The layer × head grid (L, nh) with its x-axis named: its head numbers alone read as nothing (a 30 × 9 grid
    is small: built at each run, not cached). Its title is the page's, above it."""
    trace, layout = figures.matrix_heatmap_parts(grid, layers, heads, value_name=_("share"), signed=False,
                                                 zmin=0.0, zmax=1.0, row_name="", col_name=_("head"),
                                                 height=max(280, 18 * grid.shape[0] + 100))
    layout["xaxis"]["title"] = dict(text=_("head"), standoff=6)
    return figure([trace], layout)


def token_sets_body(prefix: str, attentions: np.ndarray, labels: list[str]) -> None:
    t = len(labels)
    left, right = st.columns(2)
    queries = left.multiselect(_("Query tokens (the ones that look)"), range(t), key=f"w_{prefix}_set_q",
                               persist_state=KEEP, format_func=labels.__getitem__)
    keys = right.multiselect(_("Key tokens (the ones looked at)"), range(t), key=f"w_{prefix}_set_k",
                             persist_state=KEEP, format_func=labels.__getitem__)
    write_link(sorted(queries), sorted(keys), t, True)
    if not queries or not keys:
        st.info(_("Choose at least one query token and one key token."))
        return
    grid = ts.set_grid(attentions, queries, keys)  # (L, nh)
    received, given = ts.per_token(attentions, queries, keys)  # (T,), (T,)
    layers = [_("layer {layer}").format(layer=n) for n in range(grid.shape[0])]
    heads = [str(h) for h in range(grid.shape[1])]
    title = _("Share of the query tokens' attention on the key tokens")
    st.markdown(f"**{title}**")  # above the figure, where it wraps on a phone (a plotly title is cut there)
    show_chart(grid_figure(grid, layers, heads), key=f"{prefix}_sets_grid", config=chart_config(),
               alt=describe.describe_matrix(grid, [str(n) for n in range(grid.shape[0])], heads, title=title,
                                            value_name=_("share"), row_name=_("layer"), col_name=_("head")))
    st.caption(_("Cell (layer, head) = (1/|Q|) Σ over the query tokens Q and the key tokens K of the attention "
                 "weight: 1 when the queries look only at the keys, 0 when never. Mean over all cells: {mean}.").format(
        mean=f"{grid.mean():.3f}"))
    if on_phone():  # three columns are wider than a phone: it scrolls sideways, with no scroll bar
        st.caption(swipe_hint([_("token"), _("received from the queries"), _("given to the keys")]))
    st.dataframe(pd.DataFrame({"token": labels, "received": received, "given": given}), key=f"{prefix}_sets_tokens",
                 hide_index=True, column_config={
                     "token": st.column_config.TextColumn(_("token")),
                     "received": st.column_config.NumberColumn(_("received from the queries"), format="%.3f"),
                     "given": st.column_config.NumberColumn(_("given to the keys"), format="%.3f")})
    st.caption(_("Per token, averaged over every layer and head: the weight it receives from the query tokens (a "
                 "mean over them) and the weight it gives to the key tokens (its row's sum over them)."))
