"""One real layer through the Step-by-step builders: the layer's own input step, the toy pipeline's steps
that describe it, its add & norm, every matrix cut to what can be sent. Pure builders; no streamlit."""

from __future__ import annotations

from dataclasses import replace

from mha_core.attention import AttentionWeights
from mha_core.inputs import token_labels
from mha_core.pretrained import MiniLMRun
from ui.i18n import N_, _
from ui.pipeline.panels import slim_step
from ui.pipeline.records import Panel, Step, StepInputs, dim_labels, shape_text
from ui.pipeline.steps import build_steps

# ---- one real layer through the Step-by-step builders --------------------------------------


def layer_inputs(run: MiniLMRun, layer: int, weights: AttentionWeights) -> StepInputs:
    """Layer ``layer`` of a real run as the inputs of the Step-by-step builders.

    ``weights`` is that layer's ``AttentionWeights`` (``model.layers[layer].attention``). What the
    layer did, said as it is: X is the layer's input (positions are inside it, learned), no mask
    (one unpadded sentence may attend everywhere), scores scaled by 1/sqrt(hs).
    """
    if not 0 <= layer < len(run.layers):
        raise ValueError(f"layer {layer} does not exist: choose 0 to {len(run.layers) - 1}")
    x = run.layers[layer].input  # (T, C)
    labels = token_labels(run.tokens)
    return StepInputs(
        trace=run.layers[layer].attention,
        weights=weights,
        query_labels=labels,
        key_labels=labels,
        embeddings=x,
        key_embeddings=x,
        positional=None,
        x_q=x,
        x_kv=x,
        mask=None,
        mask_name="none",
        scale_rule="sqrt_dk",
    )


TOY_ONLY_STEPS = ("input", "positional")  # replaced by the real layer's own input step
ONE_SENTENCE_MASK = N_(
    "**Nothing is masked here.** BERT's only mask hides padding, the filler added when sentences of "
    "different lengths share a batch. One sentence has no padding, so every piece may attend to every piece, "
    "in both directions (no causal mask: an encoder reads the whole sentence at once)."
)


def real_steps(run: MiniLMRun, inputs: StepInputs, layer: int, head: int, cell=None) -> list[Step]:
    """The Step-by-step page's steps for one real head: the layer's input, Q/K/V ... W_O, then add & norm.

    The toy pages' first two steps (embeddings, sinusoidal encoding) do not describe BERT: here the
    position is already inside X, learned, so they are replaced by one step showing X itself.
    Matrices too large to send are cut to the chosen head's block (``slim_panel``).
    """
    steps = [_input_step(inputs, layer)]
    for step in build_steps(inputs, head, cell):
        if step.slug == "mask":
            step = replace(step, note=_(ONE_SENTENCE_MASK))
        if step.slug not in TOY_ONLY_STEPS:
            steps.append(step)
    steps.append(_add_norm_step(run, inputs, layer))
    return [slim_step(s) for s in steps]


def _input_step(inputs: StepInputs, layer: int) -> Step:
    x = inputs.x_q
    if layer == 0:
        why = _(
            "Each word piece's row is its word vector **plus a learned position vector** (and a segment vector), "
            "normalised by a LayerNorm. The position is inside X already: no separate positional-encoding step."
        )
        title = _("Layer 0's input X: embeddings")
    else:
        why = _(
            "Layer {layer} reads what layer {below} wrote: one row of {c} numbers per word piece, "
            "already mixed with the other tokens by the layers below."
        ).format(layer=layer, below=layer - 1, c=x.shape[1])
        title = _("Layer {layer}'s input X = layer {below}'s output").format(layer=layer, below=layer - 1)
    panel = Panel("X", x, inputs.query_labels, dim_labels(x.shape[1]), "x")
    return Step(
        "input",
        title,
        why,
        rf"X = h^{{({layer})}} \in \mathbb{{R}}^{{T \times C}}",
        _("X {shape}: (T pieces, C = d_model)").format(shape=shape_text(x)),
        (panel,),
    )


def _add_norm_step(run: MiniLMRun, inputs: StepInputs, layer: int) -> Step:
    layer_run = run.layers[layer]
    labels = inputs.query_labels
    c = layer_run.output.shape[1]
    panels = (
        Panel("LayerNorm(X + Y)", layer_run.after_attention, labels, dim_labels(c), "value"),
        Panel(_("layer output (next layer's X)"), layer_run.output, labels, dim_labels(c), "value"),
    )
    t, d_ff = layer_run.ffn_hidden.shape
    why = _(
        "BERT does not stop at Y. It **adds Y back to X** (the residual path: the layer only has to learn a "
        "change) and normalises each row; then a feed-forward network ({c} → {d_ff} → {c}, GELU) works on each "
        "piece alone, again with add & norm. Only the attention step lets the pieces exchange information."
    ).format(c=c, d_ff=d_ff)
    formula = (
        r"X' = \mathrm{LayerNorm}(X + Y),\qquad "
        r"\mathrm{out} = \mathrm{LayerNorm}\big(X' + \mathrm{GELU}(X' W_1 + b_1) W_2 + b_2\big)"
    )
    shapes = _("X + Y: {shape}; feed-forward: ({t}, {c}) -> ({t}, {d_ff}) -> ({t}, {c})").format(
        shape=shape_text(layer_run.after_attention), t=t, c=c, d_ff=d_ff)
    return Step("add_norm", _("Add & norm, feed-forward: the rest of the layer"), why, formula, shapes, panels)
