"""Streamlit renderers for the attention variants (issue 26): the Decoding page's variant stepper.

The numbers come from ``ui.pages.decoding.variants`` (pure); this module only draws them.
"""

from __future__ import annotations

import streamlit as st

from mha_core.config import MHAConfig
from mha_core.variant_decoding import decode_variant_run
from ui.charts.kernels import weights_signed
from ui.charts.numbers import count
from ui.i18n import _
from ui.pages.decoding import qk_axes
from ui.pages.decoding.variants import (
    assembled_variant_weights,
    cache_comparison,
    held_words,
    max_variant_difference,
    memory_table,
    shown_memory_table,
)
from ui.pipeline.records import Panel, dim_labels
from ui.run.compute import result_later
from ui.widgets import step_views as views
from ui.widgets.presentation import figure_font_size
from ui.widgets.state import KEEP, clamp_choice


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
    t = left.slider(_("Step t (the token being generated)"), 0, last, key="w_dec_step", persist_state=KEEP)
    head = right.selectbox(_("Head"), range(trace.n_heads), key="w_dec_head", persist_state=KEEP,
                           format_func=lambda h: _("head {h}").format(h=h))
    steps = decode_variant_run(result, t)  # tokens 0..t: the last step holds what is kept (one state, not t+1)
    step = steps[t]
    delta = max_variant_difference(steps, t, trace.weights)
    table = memory_table(steps, labels, config)
    metrics = st.columns(4)
    metrics[0].metric(_("Tokens seen"), t + 1)
    metrics[1].metric(_("Numbers kept (this layer)"), count(step.numbers))
    cache = cache_comparison(table, config, t)
    metrics[2].metric(cache.label, count(cache.numbers),
                      help=_("What a softmax layer with these K/V heads would have cached by now."))
    metrics[3].metric(_("max |Δ| vs full causal"), f"{delta:.1e}", help=_("Over the rows decoded so far, all heads."))
    st.markdown(_("Step {t} generates **{token}**. This decoder keeps {kept}. {comparison}").format(
        t=t, token=labels[t], kept=held_words(config), comparison=cache.sentence))
    panels = held_panels(step.held, labels, t, trace.kv_head_of(head), head)
    views.show_panels(panels, "dec_variant_held", font_size=figure_font_size())
    kind = "signed" if weights_signed(trace) else "weights"
    left, right = st.columns(2)
    width = views.plot_px(1 / 2)
    with left:
        views.show_panel(Panel(_("Decoded rows 0..{t} (head {head})").format(t=t, head=head),
                               assembled_variant_weights(steps, t, len(labels))[head], labels, labels, _("weight"),
                               kind=kind, row_block=(t, t + 1), axis_titles=qk_axes(), allowed=result.mask),
                         "dec_variant_assembled", width_px=width, font_size=figure_font_size())
    with right:
        views.show_panel(Panel(_("Full causal attention (head {head})").format(head=head), trace.weights[head],
                               labels, labels, _("weight"), kind=kind, row_block=(t, t + 1), axis_titles=qk_axes(),
                               allowed=result.mask),
                         "dec_variant_full", width_px=width, font_size=figure_font_size())
    with st.expander(_("What is kept, step by step (numbers)")):
        st.dataframe(shown_memory_table(table), key="dec_variant_table")
        st.caption(_("The KV cache columns are what a softmax layer of the same heads would keep (2·heads·d_k numbers "
                     "per token; 2·kv_heads·d_k with shared key/value heads)."))


def held_panels(held, labels: list[str], t: int, g: int, head: int = 0) -> tuple[Panel, ...]:
    """What the decoder keeps after token ``t``, one panel per kept array (K/V head ``g``'s part, or query head
    ``head``'s for a state kept per query head), titles translated."""
    panels = []
    for name, array in held:
        if name in ("latent cache c", "RoPE key cache k_R"):
            matrix = array if array.ndim == 2 else array[0]  # (t+1, r) or (t+1, d_rope)
            panels.append(Panel(_(name), matrix, labels[: t + 1], dim_labels(matrix.shape[1]), name.split()[0],
                                row_block=(t, t + 1)))
        elif name == "state S":
            panels.append(Panel(_("S (K/V head {g}), after token {t}").format(g=g, t=t), array[g],
                                dim_labels(array.shape[1]), dim_labels(array.shape[2]), _("state"),
                                axis_titles=(_("φ(k) feature"), _("value feature"))))
        elif name == "state S per query head":  # Gated DeltaNet: β and α are per query head, so is its state
            panels.append(Panel(_("S (head {head}), after token {t}").format(head=head, t=t), array[head],
                                dim_labels(array.shape[1]), dim_labels(array.shape[2]), _("state"),
                                axis_titles=(_("key feature"), _("value feature"))))
        elif name == "state sum z":
            panels.append(Panel(_("z (K/V head {g})").format(g=g), array[g][None], ["z"], dim_labels(array.shape[1]),
                                "z"))
        else:  # the differential layer's K and V caches
            panels.append(Panel(_("{name} (K/V head {g})").format(name=_(name), g=g), array[g], labels[: t + 1],
                                dim_labels(array.shape[2]), name[0].lower(), row_block=(t, t + 1)))
    return tuple(panels)
