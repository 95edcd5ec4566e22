"""The Real model page's "Attention rollout and flow" for either model (Streamlit; numbers: mha_core/attention_flow.py).

Drawn only while its expander is open: raw attention of a layer (mean over heads) beside rollout or flow after
that layer, for every token (two heatmaps) or for one token (its row, or for the encoder its column, as a table);
with what each can and cannot claim. The link opens it with its choices (``section_links``: rm_flow, ...).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import attention_flow as af
from ui.charts import describe
from ui.i18n import N_, _
from ui.pages.real_model import section_links as sl
from ui.run import cached_figures
from ui.state.address import address
from ui.state.device import chart_config, on_phone
from ui.widgets.live import show_chart
from ui.widgets.phone import swipe_hint
from ui.widgets.state import KEEP

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


def read_link(prefix: str, n_layers: int, n_tokens: int, causal: bool) -> None:
    """First visit of a model's view in a session: the link's rm_flow* open the section and fill its widgets."""
    ss = st.session_state
    if f"{prefix}_flow_link_read" in ss:
        return
    messages: list[str] = []
    values = sl.flow_from_link(address().to_dict(), n_layers, n_tokens, causal, messages)
    ss[f"w_{prefix}_flow"] = values is not None or bool(ss.get(f"w_{prefix}_flow"))
    for name, value in {"flow_method": "rollout", "flow_token": sl.ALL_TOKENS, "flow_dir": "from"}.items():
        ss.setdefault(f"w_{prefix}_{name}", value)
    for name, value in (values or {}).items():
        ss[f"w_{prefix}_{name}"] = value
    ss[f"{prefix}_flow_messages"] = messages
    ss[f"{prefix}_flow_link_read"] = True


def write_link(params: dict[str, str]) -> None:
    sl.sync_params(address(), sl.flow_param_names(), params)


def flow_section(prefix: str, text: str, attentions_of: Callable[[], np.ndarray], labels: list[str],
                 causal: bool, n_layers: int) -> None:
    """``prefix`` "sm" or "rm" (widget keys); ``attentions_of()`` the run's (L, nh, T, T), asked for only while the
    expander is open; ``labels`` the tokens with their positions. The link opens it (``section_links``)."""
    read_link(prefix, n_layers, len(labels), causal)
    box = st.expander(_("Attention rollout and flow, layer by layer"), key=f"w_{prefix}_flow", on_change="rerun")
    if not box.open:
        write_link({})
        return
    with box:
        for message in st.session_state.get(f"{prefix}_flow_messages", []):
            st.warning(_("Link: {message}").format(message=message))
        flow_body(prefix, text, attentions_of(), labels, causal)


def flow_choices(prefix: str, n_layers: int, labels: list[str], causal: bool) -> dict:
    """The section's widgets: what beside raw attention, the layer, every token or one, (encoder) its direction."""
    ss, t = st.session_state, len(labels)
    if ss.get(f"w_{prefix}_flow_layer") not in range(n_layers):
        ss[f"w_{prefix}_flow_layer"] = n_layers - 1
    if ss.get(f"w_{prefix}_flow_token", sl.ALL_TOKENS) not in (sl.ALL_TOKENS, *range(t)):  # a shorter text
        ss[f"w_{prefix}_flow_token"] = sl.ALL_TOKENS
    left, middle, right = st.columns(3, vertical_alignment="bottom")
    method = left.segmented_control(_("Beside raw attention"), list(sl.FLOW_METHODS), key=f"w_{prefix}_flow_method",
                                    persist_state=KEEP, format_func=lambda m: _(sl.FLOW_METHODS[m]),
                                    required=True) or "rollout"
    layer = middle.selectbox(_("After layer"), range(n_layers), key=f"w_{prefix}_flow_layer", persist_state=KEEP,
                             format_func=lambda n: _("layer {layer}").format(layer=n))
    token = right.selectbox(_("Tokens"), [sl.ALL_TOKENS, *range(t)], key=f"w_{prefix}_flow_token", persist_state=KEEP,
                            format_func=lambda k: _("every token") if k == sl.ALL_TOKENS else labels[k])
    values = {"flow_method": method, "flow_layer": int(layer), "flow_token": token}
    if not causal and token != sl.ALL_TOKENS:
        values["flow_dir"] = st.segmented_control(
            _("One token's"), list(sl.DIRECTIONS), key=f"w_{prefix}_flow_dir", persist_state=KEEP, required=True,
            format_func=lambda d: _(sl.DIRECTIONS[d])) or "from"
    elif not causal:
        values["flow_dir"] = st.session_state.get(f"w_{prefix}_flow_dir") or "from"
    write_link(sl.flow_params(values, n_layers, causal))
    return values


def flow_body(prefix: str, text: str, attentions: np.ndarray, labels: list[str], causal: bool) -> None:
    n_layers, t = attentions.shape[0], attentions.shape[-1]
    st.markdown(_(
        "How much of each input token reaches a token after a layer, through all the layers below? **Rollout** "
        "multiplies each layer's attention, averaged over heads with the residual added (0.5·A + 0.5·I), from the "
        "first layer up. **Flow** treats those matrices as a network of pipes and asks how much can flow from a "
        "token after the layer down to each input token (a maximum flow) (Abnar & Zuidema 2020). {direction}"
    ).format(direction=_("This decoder is causal: a token can only draw on itself and the tokens before it.")
             if causal else _("This encoder reads in both directions: every token can draw on every token.")))
    values = flow_choices(prefix, n_layers, labels, causal)
    method, layer, token = values["flow_method"], values["flow_layer"], values["flow_token"]
    raw = attentions[layer].astype(np.float64).mean(axis=0)  # (T, T)
    if method == "rollout":
        shown = af.rollout(attentions[: layer + 1])[-1]  # (T, T)
    elif t <= af.MAX_FLOW_TOKENS:
        with st.spinner(_("Computing {n} maximum flows…").format(n=t * t)):
            shown = cached_flow(text, prefix, int(layer), attentions)  # (T, T)
    else:
        st.info(_("Flow is left out at {n} tokens: it takes {n}² maximum flows through a graph of {nodes} nodes. "
                  "Shorten the text to at most {limit} tokens to see it.").format(
            n=t, nodes=(layer + 2) * t, limit=af.MAX_FLOW_TOKENS))
        shown = None
    if shown is not None and token == sl.ALL_TOKENS:
        flow_matrices(prefix, layer, labels, causal, {_("raw attention"): raw, _(sl.FLOW_METHODS[method]): shown})
    elif shown is not None:
        flow_token(prefix, labels, raw, shown, token, values.get("flow_dir", "from"), _(sl.FLOW_METHODS[method]),
                   causal)
    st.markdown(_(CAVEATS))


def flow_matrices(prefix: str, layer: int, labels: list[str], causal: bool, matrices: dict) -> None:
    """Raw attention (mean over heads) beside rollout or flow after ``layer``, every token: name -> (T, T)."""
    t = len(labels)
    titles = [_("raw attention, layer {layer} (mean over heads)").format(layer=layer),
              _("{method} after layer {layer}").format(method=list(matrices)[1], layer=layer)]
    columns = st.columns(1 if on_phone() else 2)
    mask = np.tri(t, dtype=bool) if causal else None
    for n, (title, (value_name, matrix)) in enumerate(zip(titles, matrices.items(), strict=True)):
        show_chart(cached_figures.matrix_heatmap(matrix, labels, labels, title=title, value_name=value_name,
                                                 signed=False, zmin=0.0, zmax=1.0, row_name=_("token"),
                                                 col_name=_("input token"), height=380, allowed=mask),
                   key=f"{prefix}_flow_{n}", where=columns[n % len(columns)], config=chart_config(),
                   alt=describe.describe_matrix(matrix, labels, labels, title=title, value_name=value_name,
                                                row_name=_("token"), col_name=_("input token")))
    st.caption(_("Rows: the token after the layer; columns: the input token it draws on. Choose one token above for "
                 "its numbers."))


def flow_token(prefix: str, labels: list[str], raw: np.ndarray, shown: np.ndarray, token: int, direction: str,
               name: str, causal: bool) -> None:
    """One token's numbers: its row (what it draws from each input token) or, ``direction`` "to", its column (how
    much of it reaches each token after the layer). Causal: only the tokens it can see (a masked 0 is no number)."""
    if direction == "to":
        heading, other = _("Column of {token}: how much of it reaches each token").format(token=labels[token]), _("token")
        raw_part, shown_part = raw[:, token], shown[:, token]  # (T,), (T,)
    else:
        heading, other = _("Row of {token}: what it draws from each input token").format(token=labels[token]), \
            _("input token")
        raw_part, shown_part = raw[token], shown[token]  # (T,), (T,)
    seen = slice(0, token + 1) if causal else slice(None)  # a causal row: keys 0..token
    st.markdown("**" + heading + "**")
    if on_phone():  # wider than a phone: it scrolls sideways, with no scroll bar
        st.caption(swipe_hint([other, _("raw attention"), name]))
    st.dataframe(pd.DataFrame({"other": labels[seen], "raw": raw_part[seen], "shown": shown_part[seen]}),
                 key=f"{prefix}_flow_row",
                 hide_index=True, column_config={
                     "other": st.column_config.TextColumn(other),
                     "raw": st.column_config.NumberColumn(_("raw attention"), format="%.3f"),
                     "shown": st.column_config.NumberColumn(name, format="%.3f")})
