"""Streamlit renderers for the attention variants (issue 26): the Decoding page's variant stepper.

The numbers come from ``ui.pages.decoding.variants`` (pure); this module only draws them.
"""

from __future__ import annotations

import streamlit as st

from mha_core.config import MHAConfig
from mha_core.variant_decoding import decode_variant_run
from ui.charts.kernels import weights_signed
from ui.pages.decoding.variants import (
    assembled_variant_weights,
    cache_comparison,
    held_words,
    max_variant_difference,
    memory_table,
)
from ui.pipeline.records import Panel, dim_labels
from ui.run.compute import result_later
from ui.widgets import step_views as views
from ui.widgets.presentation import figure_font_size
from ui.widgets.state import KEEP, clamp_choice

QK_AXES = ("query i", "key j")


@st.fragment
def variant_stepper(config: MHAConfig) -> None:
    """The decoding stepper of a layer whose decoder record keeps something else than the plain KV cache (another
    kernel, a linear state, a latent cache): what it keeps, step by step, checked live."""
    result = result_later(config)
    trace, labels = result.trace, result.query_labels
    last = len(labels) - 1
    clamp_choice("w_dec_step", last + 1)
    clamp_choice("w_dec_head", trace.n_heads)
    left, right = st.columns([6, 3], vertical_alignment="bottom")
    t = left.slider("Step t (the token being generated)", 0, last, key="w_dec_step", persist_state=KEEP)
    head = right.selectbox("Head", range(trace.n_heads), key="w_dec_head", persist_state=KEEP,
                           format_func=lambda h: f"head {h}")
    steps = decode_variant_run(result, t)  # tokens 0..t: the last step holds what is kept (one state, not t+1)
    step = steps[t]
    delta = max_variant_difference(steps, t, trace.weights)
    table = memory_table(steps, labels, config)
    metrics = st.columns(4)
    metrics[0].metric("Tokens seen", t + 1)
    metrics[1].metric("Numbers kept (this layer)", f"{step.numbers:,}")
    cache = cache_comparison(table, config, t)
    metrics[2].metric(cache.label, f"{cache.numbers:,}", help="What a softmax layer with these K/V heads would have cached by now.")
    metrics[3].metric("max |Δ| vs full causal", f"{delta:.1e}", help="Over the rows decoded so far, all heads.")
    st.markdown(f"Step {t} generates **{labels[t]}**. This decoder keeps {held_words(config)}. {cache.sentence}")
    g = trace.kv_head_of(head)
    panels = []
    for name, array in step.held:
        if name in ("latent cache c", "RoPE key cache k_R"):
            matrix = array if array.ndim == 2 else array[0]  # (t+1, r) or (t+1, d_rope)
            panels.append(Panel(name, matrix, labels[: t + 1], dim_labels(matrix.shape[1]), name.split()[0],
                                row_block=(t, t + 1)))
        elif name == "state S":
            panels.append(Panel(f"S (K/V head {g}), after token {t}", array[g], dim_labels(array.shape[1]),
                                dim_labels(array.shape[2]), "state", axis_titles=("φ(k) feature", "value feature")))
        elif name == "state sum z":
            panels.append(Panel(f"z (K/V head {g})", array[g][None], ["z"], dim_labels(array.shape[1]), "z"))
        else:  # the differential layer's K and V caches
            panels.append(Panel(f"{name} (K/V head {g})", array[g], labels[: t + 1], dim_labels(array.shape[2]),
                                name[0].lower(), row_block=(t, t + 1)))
    views.show_panels(tuple(panels), "dec_variant_held", font_size=figure_font_size())
    kind = "signed" if weights_signed(trace) else "weights"
    left, right = st.columns(2)
    width = views.plot_px(1 / 2)
    with left:
        views.show_panel(Panel(f"Decoded rows 0..{t} (head {head})", assembled_variant_weights(steps, t, len(labels))[head], labels,
                               labels, "weight", kind=kind, row_block=(t, t + 1), axis_titles=QK_AXES,
                               allowed=result.mask),
                         "dec_variant_assembled", width_px=width, font_size=figure_font_size())
    with right:
        views.show_panel(Panel(f"Full causal attention (head {head})", trace.weights[head], labels, labels, "weight",
                               kind=kind, row_block=(t, t + 1), axis_titles=QK_AXES, allowed=result.mask),
                         "dec_variant_full", width_px=width, font_size=figure_font_size())
    with st.expander("What is kept, step by step (numbers)"):
        st.dataframe(table, key="dec_variant_table")
        st.caption("The KV cache columns are what a softmax layer of the same heads would keep (2·heads·d_k numbers "
                   "per token; 2·kv_heads·d_k with shared key/value heads).")
