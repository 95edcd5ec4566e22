"""The Real model page's "Attention rollout and flow" for either model (Streamlit; numbers: mha_core/attention_flow.py).

Drawn only while its expander is open: raw attention of a layer (mean over heads) beside rollout and flow after
that layer, for every token, and one token's row as a table; with what each can and cannot claim.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import attention_flow as af
from ui.charts import describe
from ui.i18n import N_, _
from ui.run import cached_figures
from ui.state.device import chart_config, on_phone
from ui.widgets.live import show_chart
from ui.widgets.state import KEEP, clamp_choice

CAVEATS = N_(
    "**What they can and cannot claim.** Both read only the attention weights, averaged over heads, with the "
    "residual connection as 0.5·A + 0.5·I: they ignore the values, W_O, the feed-forward layers and the norms, and "
    "they say nothing about which head matters. Abnar & Zuidema (2020) found them closer than raw attention to "
    "what removing input tokens and input gradients show, but called them approximations; flow is a maximum over "
    "paths, so it is not a share that sums to 1 and is costly to compute. Later work showed that weights alone can "
    "mislead: what a key passes on depends on its value vector's size (Kobayashi et al. 2020), rollout is not "
    "specific to a prediction and can blur toward uniform in deep models (Chefer et al. 2021), and attention "
    "weights in general need not be an explanation (Jain & Wallace 2019)."
)


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_flow(text: str, model: str, layer: int, _attentions: np.ndarray) -> np.ndarray:
    """Flow after ``layer`` from every token to every input token of the prompt ``text`` (T, T): ~2 s at 12 tokens."""
    return af.flow(_attentions[: layer + 1])


def flow_section(prefix: str, text: str, attentions_of: Callable[[], np.ndarray], labels: list[str],
                 causal: bool) -> None:
    """``prefix`` "sm" or "rm" (widget keys); ``attentions_of()`` the run's (L, nh, T, T), asked for only while the
    expander is open; ``labels`` the tokens with their positions."""
    box = st.expander(_("Attention rollout and flow, layer by layer"), key=f"w_{prefix}_flow", on_change="rerun")
    if not box.open:
        return
    with box:
        flow_body(prefix, text, attentions_of(), labels, causal)


def flow_body(prefix: str, text: str, attentions: np.ndarray, labels: list[str], causal: bool) -> None:
    n_layers, t = attentions.shape[0], attentions.shape[-1]
    st.markdown(_(
        "How much of each input token reaches a token after a layer, through all the layers below? **Rollout** "
        "multiplies each layer's attention, averaged over heads with the residual added (0.5·A + 0.5·I), from the "
        "first layer up. **Flow** treats those matrices as a network of pipes and asks how much can flow from a "
        "token after the layer down to each input token (a maximum flow) (Abnar & Zuidema 2020). {direction}"
    ).format(direction=_("This decoder is causal: a token can only draw on itself and the tokens before it.")
             if causal else _("This encoder reads in both directions: every token can draw on every token.")))
    clamp_choice(f"w_{prefix}_flow_layer", n_layers)
    left, right = st.columns(2)
    layer = left.selectbox(_("After layer"), range(n_layers), key=f"w_{prefix}_flow_layer", persist_state=KEEP,
                           index=n_layers - 1, format_func=lambda n: _("layer {layer}").format(layer=n))
    clamp_choice(f"w_{prefix}_flow_token", t)
    token = right.selectbox(_("Token (a row)"), range(t), key=f"w_{prefix}_flow_token", persist_state=KEEP,
                            index=t - 1, format_func=labels.__getitem__)
    raw = attentions[layer].astype(np.float64).mean(axis=0)  # (T, T)
    rolled = af.rollout(attentions[: layer + 1])[-1]  # (T, T)
    flowed = None
    if t <= af.MAX_FLOW_TOKENS:
        with st.spinner(_("Computing {n} maximum flows…").format(n=t * t)):
            flowed = cached_flow(text, prefix, int(layer), attentions)
    panels = [(_("raw attention, layer {layer} (mean over heads)").format(layer=layer), _("raw attention"), raw),
              (_("rollout after layer {layer}").format(layer=layer), _("rollout"), rolled)]
    if flowed is not None:
        panels.append((_("flow after layer {layer}").format(layer=layer), _("flow"), flowed))
    columns = st.columns(1 if on_phone() else len(panels))
    mask = np.tri(t, dtype=bool) if causal else None
    for n, (title, value_name, matrix) in enumerate(panels):
        show_chart(cached_figures.matrix_heatmap(matrix, labels, labels, title=title, value_name=value_name, signed=False,
                                                 zmin=0.0, zmax=1.0, row_name=_("token"), col_name=_("input token"),
                                                 height=380, allowed=mask),
                   key=f"{prefix}_flow_{n}", where=columns[n % len(columns)], config=chart_config(),
                   alt=describe.describe_matrix(matrix, labels, labels, title=title, value_name=value_name,
                                                row_name=_("token"), col_name=_("input token")))
    if flowed is None:
        st.info(_("Flow is left out at {n} tokens: it takes {n}² maximum flows through a graph of {nodes} nodes. "
                  "Shorten the text to at most {limit} tokens to see it.").format(
            n=t, nodes=(layer + 2) * t, limit=af.MAX_FLOW_TOKENS))
    row = {"input token": labels, "raw attention": raw[token], "rollout": rolled[token]}
    if flowed is not None:
        row["flow"] = flowed[token]
    st.markdown("**" + _("Row of {token}").format(token=labels[token]) + "**")
    st.dataframe(pd.DataFrame(row), key=f"{prefix}_flow_row", hide_index=True, column_config={
        "input token": st.column_config.TextColumn(_("input token")),
        "raw attention": st.column_config.NumberColumn(_("raw attention"), format="%.3f"),
        "rollout": st.column_config.NumberColumn(_("rollout"), format="%.3f"),
        "flow": st.column_config.NumberColumn(_("flow"), format="%.3f")})
    st.markdown(_(CAVEATS))
