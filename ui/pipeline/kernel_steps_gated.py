"""Step by step's own steps of gated attention and of learned sinks (issue 34), registered by slug in
``ui.pipeline.kernel_steps.KERNEL_STEPS``:

- ``output_gate`` (after A·V): the gate σ(X W_θ) of the chosen head, its A·V before and after, how far every
  head's gate opens per token, and the first token's weight and what it hands on with the gate off and on;
- ``sink_weights`` (where the softmax stands): the logits with the head's sink column appended, the softmax over
  both, the column dropped, and the sink's share of every row.

Every matrix is an array of the engine's trace (``trace.kernel_parts``). Pure: no streamlit.
"""

from __future__ import annotations

import numpy as np

from mha_core.gated import first_token_delivery
from ui.i18n import _, sentences
from ui.pipeline.records import Panel, Step, StepInputs, dim_labels, latex_number, qk_axes, shape_text


def head_labels(n_heads: int) -> list[str]:
    return [_("head {h}").format(h=h) for h in range(n_heads)]


def output_gate_step(inputs: StepInputs, head: int, cell=None) -> Step:
    """Y′_h = Y_h ⊙ σ(X W_θ,h): the chosen head's gate, its output before and after, every head's opening."""
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    hv = trace.heads.shape[-1]
    columns = dim_labels(hv, head * hv)
    panels = (
        Panel(_("G_{head} = σ(X W_θ,{head}): the gate, per token and feature").format(head=head), parts.gate[head],
              inputs.query_labels, columns, _("gate"), kind="weights"),
        Panel(_("Y_{head} = A_{head} V (before the gate)").format(head=head), trace.heads[head], inputs.query_labels,
              columns, _("head output")),
        Panel(_("Y′_{head} = Y_{head} ⊙ G_{head} (what the heads concatenate)").format(head=head),
              parts.gated_heads[head], inputs.query_labels, columns, _("gated output")),
        Panel(_("How far each head's gate opens: the mean of its {hv} gates, per token").format(hv=hv), parts.opening,
              head_labels(trace.n_heads), inputs.query_labels, _("mean gate"), kind="weights",
              axis_titles=(_("head"), _("query"))),
    )
    share, off, on = first_token_delivery(trace.weights, trace.values_per_query_head(), parts.gate)  # (nh,) x3
    why = sentences(
        _("The gate is made from the same input X as the queries (Qwen3-Next's q_proj makes both) and is "
          "**elementwise**, as in Qwen3-Next: one number in (0, 1) per head, token and value feature, here "
          "{hv} per head and token. It multiplies A·V feature by feature before W_O, so a head can hand on less, or "
          "nothing, for a token without moving its weights.").format(hv=hv),
        _("Head {head}'s gate opens {mean} on average (from {low} to {high} over tokens).").format(
            head=head, mean=f"{parts.opening[head].mean():.3f}", low=f"{parts.opening[head].min():.3f}",
            high=f"{parts.opening[head].max():.3f}"),
        _("First token: head {head}'s mean weight on it is {share} with the gate on and off (the gate acts after "
          "A·V, so the weights are the same); what it hands on, the mean ‖w_i0·v_0‖, is {off} without the gate and "
          "{on} with it. The paper's point: a trained head that needs to say nothing closes its gate instead of "
          "parking its weight on the first token, so gated models lose the attention sink.").format(
            head=head, share=f"{share[head]:.3f}", off=f"{off[head]:.4f}", on=f"{on[head]:.4f}"),
    )
    formula = (r"G_h = \sigma(X W_{\theta,h}),\qquad Y'_h = \big(\mathrm{softmax}(Q_hK_h^\top s)\,V_h\big)\odot G_h,"
               r"\qquad \mathrm{out} = [Y'_0 \,|\, \dots \,|\, Y'_{n_h-1}]\,W_O")
    shapes = (f"X {shape_text(inputs.x_q)} @ W_θ ({inputs.x_q.shape[1]}, {trace.n_heads * hv}) -> "
              f"G {shape_text(parts.gate)};  Y_h ⊙ G_h {shape_text(parts.gated_heads[head])}")
    return Step("output_gate", _("Gate each head's output: Y ⊙ σ(X W_θ) (gated)"), why, formula, shapes, panels)


def sink_weights_step(inputs: StepInputs, head: int, cell) -> Step:
    """[L | s_h] row by row, its softmax, the sink's column dropped, and the sink's share of every row."""
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    sink = float(parts.sinks[head])
    with_sink = np.concatenate([trace.logits[head], np.full((trace.logits.shape[1], 1), sink)], axis=-1)  # (Tq, Tk+1)
    columns = [*inputs.key_labels, _("sink")]
    full = np.concatenate([trace.weights[head], parts.sink_share[head][:, None]], axis=-1)  # (Tq, Tk+1): sums to 1
    seen = None if inputs.mask is None else np.asarray(inputs.mask, dtype=bool)  # (Tq, Tk): masked cells drawn grey
    seen_with_sink = None if seen is None else np.concatenate([seen, np.ones((len(seen), 1), dtype=bool)], axis=-1)
    panels = (
        Panel(_("[L_{head} | s_{head}]: the logits with the sink's column").format(head=head), with_sink,
              inputs.query_labels, columns, _("logit"), axis_titles=qk_axes()),
        Panel(_("softmax over the row with the sink (sums to 1)"), full, inputs.query_labels, columns, _("weight"),
              kind="weights", axis_titles=qk_axes(), allowed=seen_with_sink),
        Panel(_("A_{head}: the sink's column dropped").format(head=head), trace.weights[head], inputs.query_labels,
              inputs.key_labels, _("weight"), kind="weights", cell=cell, axis_titles=qk_axes(), allowed=seen),
        Panel(_("The sink's share of each row, 1 − Σ_j A_ij"), parts.sink_share, head_labels(trace.n_heads),
              inputs.query_labels, _("sink share"), kind="weights", axis_titles=(_("head"), _("query"))),
    )
    share = parts.sink_share[head]
    why = _("Head {head} has one learned logit s_{head} = {sink}. It is appended to every row of logits as if it were "
            "one more key, the softmax is taken over the row with it, and its column is dropped: the keys' weights "
            "**sum to less than 1**, and the sink has no value, so its share adds nothing to the output. Here it "
            "takes {low} to {high} of head {head}'s rows (mean {mean}). A larger s_h takes more. With s_h = 0 it is "
            "exactly the null key (softmax₁): a sink is a learned null key, one per head.").format(
        head=head, sink=f"{sink:.4f}", low=f"{share.min():.3f}", high=f"{share.max():.3f}", mean=f"{share.mean():.3f}")
    if inputs.mask is not None:
        why = sentences(why, _("Mask '{mask}': masked cells get weight 0; the sink is never masked.").format(
            mask=inputs.mask_name))
    formula = (r"A_{ij} = \frac{e^{L_{ij}}}{e^{s_h} + \sum_{j'} e^{L_{ij'}}},\qquad s_h = " + latex_number(sink)
               + r",\qquad 1 - \sum_j A_{ij} = \frac{e^{s_h}}{e^{s_h} + \sum_{j'} e^{L_{ij'}}}")
    shapes = f"{shape_text(with_sink)} -> softmax -> {shape_text(trace.weights[head])}"
    return Step("sink_weights", _("Softmax with a learned sink, its column dropped (sinks)"), why, formula, shapes,
                panels)
