"""Pure builders for the Step-by-step page's steps: from the inputs X to the output Y, every matrix.

Everything here takes a ``StepInputs`` (the engine's trace and what went into it; the toy pages
make one with ``step_inputs(result)``, the Real model page from one layer of the checkpoint) and the
chosen head, and returns data: ``Step`` records with a LaTeX formula, the shapes with the actual
numbers and the matrices to show, and plotly figures of a panel built on ``ui.charts.figures.matrix_heatmap``.
The drill-down into one cell is ``ui.pipeline.drill_down``, predict-then-reveal ``ui.pipeline.predict``.
No streamlit in here, so all of it is testable without a server.

Shapes follow the glossary of ``mha_core``: T tokens (Tq queries, Tk keys), C = d_model,
nh heads, hs head size. Rows are tokens; heads are contiguous column blocks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_core.attention import AttentionTrace, AttentionWeights, merge_heads
from mha_core.config import RunResult
from mha_core.positions import alibi_slopes
from mha_core.presets import PRESET_INITS
from ui.charts.figures import FULL_WIDTH_PX, MASKED_SOLID, MAX_DRAWN_CELLS, figure, matrix_heatmap_parts
from ui.charts.numbers import CELL_DECIMALS, fixed

MAX_TEXT_ROWS = 16  # write the numbers inside the cells of heatmaps up to this size
MAX_TEXT_COLS = 10
OUTLINE = dict(color="black", width=3)
# A mask panel has two colours, not a weight scale: purple (viridis' 0) would mean "masked" there and "a weight
# near 0" everywhere else. Masked is the grey every attention figure gives a masked cell; allowed is near white.
ALLOWED_COLOUR = "rgb(248, 248, 248)"
MASK_SCALE = [[0.0, MASKED_SOLID], [0.5, MASKED_SOLID], [0.5, ALLOWED_COLOUR], [1.0, ALLOWED_COLOUR]]
QK_AXES = ("query i", "key j")

SCALE_RULE_LATEX = {
    "sqrt_dk": r"\frac{1}{\sqrt{d_k}}",
    "sqrt_t": r"\frac{1}{\sqrt{T_k}}",
    "none": "1",
    "temperature": r"\frac{1}{\tau}",
}


@dataclass(frozen=True)
class StepInputs:
    """What the step builders show: one attention call's trace, what went into it, and how to describe it.

    The toy pages make it from a ``RunResult`` (``step_inputs``), the Real model page from one layer
    of the checkpoint; neither needs a configuration it did not run.
    """

    trace: AttentionTrace
    weights: AttentionWeights
    query_labels: list[str]
    key_labels: list[str]
    embeddings: np.ndarray  # (Tq, C) before positional encoding
    key_embeddings: np.ndarray  # (Tk, C); the same array as ``embeddings`` in self-attention
    positional: np.ndarray | None  # (Tq, C) added to the embeddings, or None
    x_q: np.ndarray  # (Tq, C) what the queries are projected from
    x_kv: np.ndarray  # (Tk, C) what keys and values are projected from
    mask: np.ndarray | None  # (Tq, Tk), True = may attend; None = no mask
    mask_name: str = "none"  # how the mask was made ("causal", "padding", ...), for the text
    scale_rule: str = "sqrt_dk"  # a key of SCALE_RULE_LATEX: how trace.scale was chosen
    temperature: float = 1.0  # the divisor of scale_rule "temperature"
    is_cross: bool = False  # queries from one sentence, keys and values from another
    hand_built: bool = False  # a preset head: the positions are written into E, not added as P
    rope_base: float = 10000.0  # RoPE's theta, for the text (the angles themselves are in the trace)


def step_inputs(result: RunResult) -> StepInputs:
    """The step builders' inputs from a toy configuration's run."""
    config = result.config
    return StepInputs(
        trace=result.trace,
        weights=result.weights,
        query_labels=result.query_labels,
        key_labels=result.key_labels,
        embeddings=result.embeddings,
        key_embeddings=result.key_embeddings,
        positional=result.positional,
        x_q=result.x_q,
        x_kv=result.x_kv,
        mask=result.mask,
        mask_name=config.mask,
        scale_rule=config.scale_rule,
        temperature=config.temperature,
        is_cross=config.is_cross,
        hand_built=config.init in PRESET_INITS,
        rope_base=config.rope_base,
    )


@dataclass(frozen=True)
class Panel:
    """One matrix to show, as a heatmap or as a table of numbers.

    ``kind``: "signed" (diverging scale centred on 0), "weights" (fixed 0..1) or "mask"
    (1 = may attend, 0 = masked). ``block`` outlines columns [start, stop) (the chosen head's
    slice), ``row_block`` rows [start, stop); ``cell`` outlines one (row, column) cell (the
    drill-down's query and key).
    """

    title: str
    matrix: np.ndarray  # (R, K)
    row_labels: list[str]
    col_labels: list[str]
    value_name: str = "value"
    kind: str = "signed"
    block: tuple[int, int] | None = None
    row_block: tuple[int, int] | None = None
    cell: tuple[int, int] | None = None
    axis_titles: tuple[str, str] | None = None  # (rows, columns), e.g. ("query", "key")


@dataclass(frozen=True)
class StepKind:
    """A step of the pipeline as such, true of every run: its anchor, names and one line on why it exists."""

    slug: str  # the section's anchor, and ``Step.slug``
    title: str  # general title (a run's own may say more, e.g. "Softmax₁ (with the null key)")
    short_name: str  # the "Jump to" line of Step by step
    summary: str  # one line, true whatever the options: the About page's "why"


# Every step ``build_steps`` can make, in pipeline order (optional ones where they go when on).
STEP_KINDS: dict[str, StepKind] = {kind.slug: kind for kind in (
    StepKind("input", "Token embeddings E", "E",
             "Each token starts as a vector of d_model numbers, one row per token (in cross-attention the keys "
             "and values come from a second sentence)."),
    StepKind("positional", "Add positional encoding", "+\u00a0P",
             "Attention alone cannot tell word order; a scheme that adds to the tokens (sinusoidal) makes 'the' at "
             "position 0 differ from 'the' at 4."),
    StepKind("qkv", "Project to queries, keys and values", "Q,\u00a0K,\u00a0V",
             "Three learned views of each token: what it looks for (Q), what it can be found by (K), what it hands "
             "over (V)."),
    StepKind("split", "Split into heads", "heads",
             "The columns are cut into nh blocks so that several small attentions run side by side, each free to "
             "look for something different."),
    StepKind("kv_share", "Share keys and values among query heads", "K/V\u00a0sharing",
             "A group of query heads reads one key/value head: fewer keys and values to compute and to cache "
             "(grouped-query attention; one for all heads is multi-query)."),
    StepKind("rope", "Rotate queries and keys by position (RoPE)", "RoPE",
             "Each pair of features of q and k is turned by an angle proportional to its position, so a score "
             "depends on the offset i − j only."),
    StepKind("scores", "Scores QKᵀ", "QKᵀ", "One dot product per (query, key) pair: how well they match."),
    StepKind("scale", "Scale", "scale",
             "Dot products grow with the head size; scaling them (1/√d_k by default) keeps the softmax from "
             "saturating."),
    StepKind("alibi", "Add the ALiBi distance bias", "ALiBi",
             "A penalty growing with the distance |i − j| is added to the logits, steeper in some heads than in "
             "others."),
    StepKind("mask", "Mask", "mask",
             "Some pairs are forbidden (the future in a decoder, padding): their logit becomes −∞, their weight "
             "exactly 0."),
    StepKind("softmax", "Softmax, row by row", "softmax",
             "Each row becomes weights ≥ 0 that sum to 1; with the null key (softmax₁) to at most 1, the rest "
             "going to an implicit key of value 0."),
    StepKind("mix", "Weighted sum of values A·V", "A·V",
             "Each query receives the sum of the value rows weighted by its attention weights."),
    StepKind("concat", "Concatenate the heads", "concat",
             "The heads' outputs are laid side by side again, head 0 first, one row per token."),
    StepKind("output", "Output projection W_O", "W\\_O",
             "The output projection W_O mixes the heads; without it each output column belongs to one head."),
)}


@dataclass(frozen=True)
class Step:
    """One section of the page: why the step exists, its formula, its shapes and its matrices."""

    slug: str
    title: str
    why: str  # markdown, one or two sentences ("" for a step that is switched off)
    formula: str  # LaTeX ("" when off)
    shapes: str  # e.g. "(6, 16) @ (16, 16) -> (6, 16)" ("" when off)
    panels: tuple[Panel, ...] = ()
    note: str = ""  # markdown shown under the formula (e.g. "positional encoding is off")

    @property
    def kind(self) -> StepKind:
        """The step's record in ``STEP_KINDS`` (the toy pipeline's steps; the Real model adds one of its own)."""
        if self.slug not in STEP_KINDS:
            raise ValueError(f"step {self.slug!r} has no record in STEP_KINDS: add its names and summary there")
        return STEP_KINDS[self.slug]


# ---- shapes and labels ---------------------------------------------------------------------


def shape_text(a: np.ndarray) -> str:
    """'(6, 16)' for an array of shape (6, 16)."""
    return "(" + ", ".join(str(n) for n in np.shape(a)) + ")"


def matmul_shapes(a: np.ndarray, b: np.ndarray) -> str:
    """'(6, 16) @ (16, 16) -> (6, 16)', the product's shape worked out from the operands."""
    out = "(" + ", ".join(str(n) for n in np.shape(a)[:-1] + np.shape(b)[-1:]) + ")"
    return f"{shape_text(a)} @ {shape_text(b)} -> {out}"


def dim_labels(n: int, start: int = 0) -> list[str]:
    """Feature-column labels 'd0', 'd1', ...; ``start`` keeps a head's slice numbered as in the full matrix."""
    return [f"d{k}" for k in range(start, start + n)]


def head_block(head: int, size: int) -> tuple[int, int]:
    """Columns [start, stop) that head ``head`` owns in a matrix of heads laid side by side."""
    return head * size, (head + 1) * size


def latex_number(x: float, digits: int = 4) -> str:
    """A number for LaTeX: fixed decimals, -inf as -\\infty."""
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    return fixed(x, digits)


# ---- the steps -----------------------------------------------------------------------------


def build_steps(inputs: StepInputs, head: int, cell: tuple[int, int] | None = None) -> list[Step]:
    """Every step from the inputs X to the output Y, for head ``head``; ``cell`` = (query, key) to outline."""
    if not 0 <= head < inputs.trace.n_heads:
        raise ValueError(f"head {head} does not exist: choose 0 to {inputs.trace.n_heads - 1}")
    trace = inputs.trace
    sharing = [_kv_share_step(inputs, head)] if trace.kv_heads < trace.n_heads else []
    rope = [_rope_step(inputs, head)] if trace.q_unrotated is not None else []  # a scheme turned q and k
    alibi = [_alibi_step(inputs, head, cell)] if trace.bias is not None else []  # a scheme added a bias
    return [
        _input_step(inputs),
        _positional_step(inputs),
        _projection_step(inputs, head),
        _split_step(inputs, head),
        *sharing,
        *rope,
        _scores_step(inputs, head, cell),
        _scale_step(inputs, head, cell),
        *alibi,
        _mask_step(inputs, head, cell),
        _softmax_step(inputs, head, cell),
        _mix_step(inputs, head),
        _concat_step(inputs, head),
        _output_step(inputs, head),
    ]


def _input_step(inputs: StepInputs) -> Step:
    c = inputs.embeddings.shape[1]
    why = "Each token starts as a vector of d_model numbers: one row per token."
    if inputs.is_cross:
        why = (
            "Cross-attention: the **queries** come from the first sentence, the **keys and values** from the "
            "second. Each token is one row of d_model numbers."
        )
        panels = (
            Panel("E_q: query sentence", inputs.embeddings, inputs.query_labels, dim_labels(c), "embedding"),
            Panel("E_kv: key/value sentence", inputs.key_embeddings, inputs.key_labels, dim_labels(c), "embedding"),
        )
        shapes = f"E_q {shape_text(inputs.embeddings)}, E_kv {shape_text(inputs.key_embeddings)}: (tokens, d_model)"
        formula = r"E_q \in \mathbb{R}^{T_q \times C},\quad E_{kv} \in \mathbb{R}^{T_k \times C}"
    else:
        panels = (Panel("E: token embeddings", inputs.embeddings, inputs.query_labels, dim_labels(c), "embedding"),)
        shapes = f"E {shape_text(inputs.embeddings)}: (T tokens, C = d_model)"
        formula = r"E \in \mathbb{R}^{T \times C}"
    return Step("input", "Token embeddings E", why, formula, shapes, panels)


def _positional_step(inputs: StepInputs) -> Step:
    title = "Add positional encoding"
    why = "Attention itself ignores word order; adding a position signal lets 'the' at 0 differ from 'the' at 4."
    if inputs.positional is None:
        note = "**Positional encoding is off**, so X = E (turn it on in the sidebar under *Inputs*)."
        if inputs.hand_built:
            note = "**Positional encoding is off**: the hand-built heads write each token's position into dims 0-1 of E."
        return Step("positional", title, "", "", "", note=note)  # one line, nothing else to show
    c = inputs.x_q.shape[1]
    formula = r"X = E + P,\quad P_{t,2i} = \sin\!\big(t / 10000^{2i/C}\big),\ P_{t,2i+1} = \cos\!\big(t / 10000^{2i/C}\big)"
    panels = [
        Panel("P: positional encoding", inputs.positional, inputs.query_labels, dim_labels(c), "P"),
        Panel("X = E + P", inputs.x_q, inputs.query_labels, dim_labels(c), "x"),
    ]
    shapes = f"{shape_text(inputs.embeddings)} + {shape_text(inputs.positional)} -> {shape_text(inputs.x_q)}"
    if inputs.is_cross:
        panels.append(Panel("X_kv = E_kv + P", inputs.x_kv, inputs.key_labels, dim_labels(c), "x"))
        shapes += f"; keys/values: {shape_text(inputs.key_embeddings)} + P -> {shape_text(inputs.x_kv)}"
    return Step("positional", title, why, formula, shapes, tuple(panels))


def weight_panel(name: str, w: np.ndarray, *, columns=None, rows=None) -> Panel:
    """A weight matrix with the chosen head's columns (or rows) outlined; when it is too large to draw
    (more than MAX_DRAWN_CELLS), only that head's slice, so a page at the caps stays light."""
    labels_in, labels_out = dim_labels(w.shape[0]), dim_labels(w.shape[1])
    if w.size <= MAX_DRAWN_CELLS:
        return Panel(name, w, labels_in, labels_out, "weight", block=columns, row_block=rows)
    if columns is not None:
        start, stop = columns
        title = f"{name}[:, {start}:{stop}] (the head's columns)"
        return Panel(title, w[:, start:stop], labels_in, labels_out[start:stop], "weight")
    start, stop = rows
    title = f"{name}[{start}:{stop}, :] (the head's rows)"
    return Panel(title, w[start:stop], labels_in[start:stop], labels_out, "weight")


def _too_big_note(w: np.ndarray) -> str:
    """A line saying that only the head's slice of a large weight matrix is drawn (empty when all of it is)."""
    if w.size <= MAX_DRAWN_CELLS:
        return ""
    return f"The weight matrices are {w.shape[0]}×{w.shape[1]}: too big to draw whole, so only the head's slice is shown."


def _projection_step(inputs: StepInputs, head: int) -> Step:
    w, trace = inputs.weights, inputs.trace
    hs = trace.q.shape[-1]
    block = head_block(head, hs)
    x_q, x_kv = (r"X_q", r"X_{kv}") if inputs.is_cross else ("X", "X")
    b = {name: (f" + b_{name}" if getattr(w, f"b_{name.lower()}") is not None else "") for name in "QKV"}
    formula = rf"Q = {x_q} W_Q{b['Q']},\quad K = {x_kv} W_K{b['K']},\quad V = {x_kv} W_V{b['V']}"
    q, k, v = merge_heads(trace.q), merge_heads(trace.k), merge_heads(trace.v)  # (Tq, nh*hs), (Tk, kv*hs), (Tk, kv*hv)
    group = trace.kv_head_of(head)  # the key/value head this query head reads (itself unless shared)
    kv_block, hv_block = head_block(group, hs), head_block(group, trace.v.shape[-1])
    panels = (
        weight_panel("W_Q", w.w_q, columns=block),
        weight_panel("W_K", w.w_k, columns=kv_block),
        weight_panel("W_V", w.w_v, columns=hv_block),
        Panel("Q (queries)", q, inputs.query_labels, dim_labels(q.shape[1]), "q", block=block),
        Panel("K (keys)", k, inputs.key_labels, dim_labels(k.shape[1]), "k", block=kv_block),
        Panel("V (values)", v, inputs.key_labels, dim_labels(v.shape[1]), "v", block=hv_block),
    )
    shapes = f"Q: {matmul_shapes(inputs.x_q, w.w_q)};  K, V: {matmul_shapes(inputs.x_kv, w.w_k)}"
    why = (
        "Three learned matrices turn every token into a **query** (what it looks for), a **key** (what it offers "
        f"to be found by) and a **value** (what it passes on). The outlined columns are head {head}'s."
    )
    if trace.kv_heads < trace.n_heads:
        shapes = (f"Q: {matmul_shapes(inputs.x_q, w.w_q)};  K: {matmul_shapes(inputs.x_kv, w.w_k)};  "
                  f"V: {matmul_shapes(inputs.x_kv, w.w_v)}")
        why += (f" K and V have only {trace.kv_heads} heads' columns (grouped-query attention): head {head} "
                f"reads key/value head {group}.")
    if w.w_q.size > MAX_DRAWN_CELLS:
        why = why.replace("The outlined columns are", "The weights shown are")
    return Step("qkv", "Project to queries, keys and values", why, formula, shapes, panels, _too_big_note(w.w_q))


def _split_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    nh, tq, hs = trace.q.shape
    start, stop = head_block(head, hs)
    g = trace.kv_head_of(head)
    kv_start = g * hs
    panels = (
        Panel(f"Q_{head}", trace.q[head] if trace.q_unrotated is None else trace.q_unrotated[head], inputs.query_labels,
              dim_labels(hs, start), "q"),
        Panel(_kv_name("K", head, g), trace.k[g] if trace.k_unrotated is None else trace.k_unrotated[g], inputs.key_labels,
              dim_labels(hs, kv_start), "k"),
        Panel(_kv_name("V", head, g), trace.v[g], inputs.key_labels, dim_labels(trace.v.shape[-1], g * trace.v.shape[-1]),
              "v"),
    )
    shapes = (
        f"{shape_text(merge_heads(trace.q))} -> {shape_text(trace.q)} = (nh, T, hs); "
        f"head {head} takes columns {start}..{stop - 1}: {shape_text(trace.q[head])}"
    )
    formula = rf"Q_{{{head}}} = Q[:,\ {start}{{:}}{stop}],\quad K_{{{head}}} = K[:,\ {start}{{:}}{stop}],\quad V_{{{head}}} = V[:,\ {start}{{:}}{stop}]"
    why = (
        f"No new numbers: the {nh} heads are {nh} column blocks of Q, K and V, each hs = {hs} wide. "
        "Every head then attends on its own."
    )
    return Step("split", "Split into heads", why, formula, shapes, panels)


def _kv_name(matrix: str, head: int, g: int) -> str:
    """'K_2' for multi-head attention; 'K_(0) (shared)' when head ``head`` reads the shared key/value head g."""
    return f"{matrix}_{head}" if g == head else f"{matrix}_({g}) (K/V head {g}, shared)"


def kv_sharing_matrix(n_heads: int, kv_heads: int) -> np.ndarray:
    """(nh, kv) of 0/1: 1 where query head h reads key/value head g = h // (nh/kv)."""
    group = n_heads // kv_heads
    return (np.arange(n_heads)[:, None] // group == np.arange(kv_heads)[None, :]).astype(np.float64)  # (nh, kv)


def _kv_share_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    nh, kv = trace.n_heads, trace.kv_heads
    g, group = trace.kv_head_of(head), nh // kv
    readers = [h for h in range(nh) if trace.kv_head_of(h) == g]
    panels = (
        Panel("Which K/V head each query head reads (1 = reads)", kv_sharing_matrix(nh, kv),
              [f"q head {h}" for h in range(nh)], [f"K/V head {k}" for k in range(kv)], "reads", kind="mask",
              cell=(head, g), axis_titles=("query head", "key/value head")),
        Panel(f"K_({g}): the keys heads {', '.join(map(str, readers))} all read", trace.k[g], inputs.key_labels,
              dim_labels(trace.k.shape[-1], g * trace.k.shape[-1]), "k"),
    )
    kind = "multi-query attention (MQA): one K/V head for all" if kv == 1 else "grouped-query attention (GQA)"
    why = (
        f"{kind}. {nh} query heads share {kv} key/value head(s), {group} query heads per group: head {head} "
        f"reads K/V head {g}, together with heads {', '.join(map(str, readers))}. They still ask different "
        f"questions (their own Q), but look them up in the same keys and mix the same values. "
        f"K and V are {nh // kv}× smaller, and so is the KV cache of a decoder."
    )
    formula = rf"g(h) = \left\lfloor h \,/\, (n_h / n_{{kv}}) \right\rfloor,\qquad g({head}) = \lfloor {head} / {group} \rfloor = {g}"
    shapes = f"Q {shape_text(trace.q)} = (nh, T, hs);  K {shape_text(trace.k)}, V {shape_text(trace.v)} = (kv, T, ·)"
    return Step("kv_share", "Share keys and values among query heads", why, formula, shapes, panels)


def _rope_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    hs = trace.q.shape[-1]
    g = trace.kv_head_of(head)
    half = hs // 2
    pairs = [f"p{p} (d{p},d{p + half})" for p in range(half)]
    panels = [
        Panel("θ: angle (radians) of each query position and pair", trace.q_angles, inputs.query_labels, pairs,
              "angle", axis_titles=("position", "pair")),
        Panel(f"Q_{head} before rotation", trace.q_unrotated[head], inputs.query_labels, dim_labels(hs, head * hs), "q"),
        Panel(f"Q_{head} rotated (what the scores use)", trace.q[head], inputs.query_labels, dim_labels(hs, head * hs), "q"),
        Panel(f"K_({g}) before rotation", trace.k_unrotated[g], inputs.key_labels, dim_labels(hs, g * hs), "k"),
        Panel(f"K_({g}) rotated", trace.k[g], inputs.key_labels, dim_labels(hs, g * hs), "k"),
    ]
    if inputs.is_cross:
        panels.insert(1, Panel("θ_k: angle of each key position and pair", trace.k_angles, inputs.key_labels, pairs,
                               "angle", axis_titles=("position", "pair")))
    why = (
        f"RoPE turns each pair of features (d_p, d_(p+{half})) of a query or key by an angle proportional to its "
        f"position t, one speed per pair (base θ = {inputs.rope_base:g}). Lengths stay the same, only directions "
        "turn; a dot product of two turned vectors depends on the **difference** of their angles, so the score "
        "depends on the offset i − j, not on where the pair sits. Values are not rotated."
    )
    formula = (r"\begin{pmatrix} q'_p \\ q'_{p+h/2} \end{pmatrix} = \begin{pmatrix} \cos t\omega_p & -\sin t\omega_p \\ "
               r"\sin t\omega_p & \cos t\omega_p \end{pmatrix} \begin{pmatrix} q_p \\ q_{p+h/2} \end{pmatrix},\quad "
               rf"\omega_p = {inputs.rope_base:g}^{{-2p/{hs}}}")
    shapes = f"θ {shape_text(trace.q_angles)} = (T, hs/2);  Q_{head} {shape_text(trace.q[head])} -> same shape"
    return Step("rope", "Rotate queries and keys by position (RoPE)", why, formula, shapes, tuple(panels))


def _alibi_step(inputs: StepInputs, head: int, cell) -> Step:
    trace = inputs.trace
    slope = float(alibi_slopes(trace.n_heads)[head])
    scaled = trace.scores[head] * trace.scale  # (Tq, Tk) before the bias
    panels = (
        Panel(f"B_{head} = −m·|i − j| (ALiBi bias)", trace.bias[head] + 0.0, inputs.query_labels, inputs.key_labels,  # -0 -> 0
              "bias", cell=cell, axis_titles=QK_AXES),
        Panel(f"S_{head} × scale + B_{head}", scaled + trace.bias[head], inputs.query_labels, inputs.key_labels,
              "logit before mask", cell=cell, axis_titles=QK_AXES),
    )
    slopes = ", ".join(f"{m:.4g}" for m in alibi_slopes(trace.n_heads))
    why = (
        f"ALiBi adds no vector to the tokens: it subtracts a penalty growing with the distance from each logit. "
        f"Head {head}'s slope is m = {slope:.4g} (all heads: {slopes}); a steep head looks near, a gentle one far. "
        "Nothing here was learned, so it works for longer sentences than those seen in training."
    )
    formula = rf"L_{{ij}} = S_{{ij}}\, s - m_{{{head}}}\, |i - j|,\qquad m_{{{head}}} = {slope:.4g}"
    shapes = f"B {shape_text(trace.bias)} = (nh, Tq, Tk); head {head}: {shape_text(trace.bias[head])}"
    return Step("alibi", "Add the ALiBi distance bias", why, formula, shapes, panels)


def _scores_step(inputs: StepInputs, head: int, cell) -> Step:
    trace = inputs.trace
    panels = (
        Panel(f"S_{head} = Q_{head} K_{head}ᵀ (raw scores)", trace.scores[head], inputs.query_labels, inputs.key_labels,
              "raw score q·k", cell=cell, axis_titles=QK_AXES),
    )
    why = "Row i, column j is the dot product of query i with key j: large when the two vectors point the same way."
    formula = rf"S_{{{head}}} = Q_{{{head}}} K_{{{head}}}^\top,\qquad S_{{ij}} = q_i \cdot k_j = \sum_{{d}} q_{{i,d}}\, k_{{j,d}}"
    shapes = matmul_shapes(trace.q[head], np.swapaxes(trace.k[trace.kv_head_of(head)], 0, 1)) + "  (queries × keys)"
    return Step("scores", "Scores QKᵀ", why, formula, shapes, panels)


def scale_latex(inputs: StepInputs) -> str:
    """The scale rule with the numbers put in, e.g. '\\frac{1}{\\sqrt{d_k}} = \\frac{1}{\\sqrt{4}} = 0.5000'."""
    scale = inputs.trace.scale
    rule = inputs.scale_rule
    if rule == "sqrt_dk":
        put_in = rf"\frac{{1}}{{\sqrt{{{inputs.trace.q.shape[-1]}}}}}"
    elif rule == "sqrt_t":
        put_in = rf"\frac{{1}}{{\sqrt{{{inputs.trace.k.shape[1]}}}}}"
    elif rule == "temperature":
        put_in = rf"\frac{{1}}{{{inputs.temperature:g}}}"
    else:
        return "1"
    return f"{SCALE_RULE_LATEX[rule]} = {put_in} = {latex_number(scale)}"


def _scale_step(inputs: StepInputs, head: int, cell) -> Step:
    trace = inputs.trace
    scaled = trace.scores[head] * trace.scale  # (Tq, Tk) before the mask
    why = {
        "sqrt_dk": "A dot product of d_k random terms grows like √d_k; dividing by √d_k keeps the logits near 1 "
        "so the softmax does not saturate into one-hot rows.",
        "sqrt_t": "Scaled by 1/√T (the number of keys), as seed 001 does: not the standard rule.",
        "none": "No scaling: with larger head sizes the softmax saturates and each row becomes nearly one-hot.",
        "temperature": "Dividing by a temperature: above 1 flattens the softmax, below 1 sharpens it.",
    }[inputs.scale_rule]
    panels = (
        Panel(f"S_{head} × scale", scaled, inputs.query_labels, inputs.key_labels, "scaled score", cell=cell, axis_titles=QK_AXES),
    )
    formula = rf"L = S \times s,\qquad s = {scale_latex(inputs)}"
    shapes = f"{shape_text(scaled)} × scalar -> {shape_text(scaled)}"
    return Step("scale", "Scale", why, formula, shapes, panels)


def _mask_step(inputs: StepInputs, head: int, cell) -> Step:
    trace = inputs.trace
    formula = r"L_{ij} = \begin{cases} S_{ij}\, s & \text{if } M_{ij} \text{ (may attend)} \\ -\infty & \text{otherwise} \end{cases}"
    if inputs.mask is None:
        note = "**No mask**: every query may attend to every key, so the scaled scores go to the softmax unchanged."
        return Step("mask", "Mask", "A mask forbids some (query, key) pairs.", formula, shape_text(trace.logits[head]), note=note)
    blocked = int((~inputs.mask).sum())
    full = int(trace.fully_masked[head].sum())
    note = f"{blocked} of {inputs.mask.size} cells are masked."
    if full:
        note += f" **{full} row(s) have every key masked** (see the softmax step)."
    panels = (
        Panel("M: mask (1 = may attend)", inputs.mask.astype(np.float64), inputs.query_labels, inputs.key_labels,
              "may attend", kind="mask", cell=cell, axis_titles=QK_AXES),
        Panel(f"L_{head}: logits, masked cells blank", trace.logits[head], inputs.query_labels, inputs.key_labels,
              "logit", cell=cell, axis_titles=QK_AXES),
    )
    sharers = "the other keys of the row and the null key" if trace.null_key else "the other keys of the row"
    why = (
        f"Mask '{inputs.mask_name}': a masked cell's logit becomes −∞, so after the softmax its weight is exactly 0 "
        f"and {sharers} share all the weight."
    )
    shapes = f"M {shape_text(inputs.mask)} (True = may attend) applied to L {shape_text(trace.logits[head])}"
    return Step("mask", "Mask", why, formula, shapes, panels, note)


FULLY_MASKED_POLICY = (
    "A row whose keys are **all masked** has nothing to attend to. Computed literally, the softmax gives "
    "exp(−∞ − (−∞)) = NaN, which is what seed 000 does, and the NaN spreads into the output. torch does not agree "
    "with itself (torch 2.13, CPU): `F.scaled_dot_product_attention` returns zeros for such a row, "
    "`nn.MultiheadAttention` returns NaN when it also returns the weights and zeros when it does not, and "
    "`torch.softmax` gives NaN. **Our policy: weights 0 and head output 0, and the row is flagged**, so it is "
    "visible instead of silently poisoning the numbers."
)


def _softmax_step(inputs: StepInputs, head: int, cell) -> Step:
    trace = inputs.trace
    panels = (
        Panel(f"A_{head} = softmax(L_{head}) (attention weights)", trace.weights[head], inputs.query_labels,
              inputs.key_labels, "weight", kind="weights", cell=cell, axis_titles=QK_AXES),
    )
    shapes = f"{shape_text(trace.logits[head])} -> {shape_text(trace.weights[head])}, row by row"
    if trace.null_key:
        why = (
            "Each row is turned into weights that are ≥ 0. With the **null key** (softmax₁) every row has one more, "
            "implicit key of logit 0 and value 0 in the denominator, so the real keys' weights **sum to less than 1**: "
            "the rest, 1 − Σⱼ Aᵢⱼ, goes to the null key and adds nothing to the output. Subtracting the row's "
            "maximum (the null key's 0 included) first changes nothing mathematically and prevents overflow."
        )
        formula = (r"A_{ij} = \frac{e^{L_{ij} - m_i}}{e^{0 - m_i} + \sum_{k} e^{L_{ik} - m_i}},\qquad "
                   r"m_i = \max\big(0,\ \max_k L_{ik}\big),\qquad \sum_j A_{ij} = 1 - A_{i\varnothing} < 1")
        return Step("softmax", "Softmax₁ (with the null key), row by row", why, formula, shapes, panels)
    why = (
        "Each row is turned into weights that are ≥ 0 and **sum to 1**: how query i shares its attention among "
        "the keys. Subtracting the row's maximum first changes nothing mathematically and prevents overflow."
    )
    formula = r"A_{ij} = \frac{e^{L_{ij} - m_i}}{\sum_{k} e^{L_{ik} - m_i}},\qquad m_i = \max_k L_{ik},\qquad \sum_j A_{ij} = 1"
    return Step("softmax", "Softmax, row by row", why, formula, shapes, panels)


NULL_SHARE_COLUMN = "null key (1 − sum)"


def row_sums_heading(trace: AttentionTrace) -> str:
    """What the row-sums table beside the weights shows, true with and without the null key."""
    if trace.null_key:
        return "**Row sums** (below 1: the null key takes the rest; 0 for a fully masked row)"
    return "**Row sums** (1, or 0 for a fully masked row)"


def row_sums_table(inputs: StepInputs, head: int) -> pd.DataFrame:
    """One row per query: the sum of its weights and the all-masked flag.

    The sum is 1, or 0 when every key is masked; with the null key it is below 1 and a column
    ``NULL_SHARE_COLUMN`` gives the null key's share, 1 − sum (1 for a fully masked row).
    """
    trace = inputs.trace
    sums = trace.weights[head].sum(axis=-1)  # (Tq,)
    columns = {"sum": sums}
    if trace.null_key:
        columns[NULL_SHARE_COLUMN] = 1.0 - sums
    columns["all masked"] = trace.fully_masked[head]
    return pd.DataFrame(columns, index=pd.Index(inputs.query_labels, name="query"))


def _mix_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    hv = trace.v.shape[-1]
    panels = (
        Panel(f"head_{head} = A_{head} V_{head}", trace.heads[head], inputs.query_labels,
              dim_labels(hv, head * hv), "head output"),
    )
    why = "Each query's output is the weighted average of the value rows, with its attention weights as the weights."
    formula = rf"\mathrm{{head}}_{{{head}}} = A_{{{head}}} V_{{{head}}},\qquad \mathrm{{head}}_i = \sum_j A_{{ij}}\, v_j"
    return Step("mix", "Weighted sum of values A·V", why, formula,
                matmul_shapes(trace.weights[head], trace.v[trace.kv_head_of(head)]), panels)


def _concat_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    hv = trace.v.shape[-1]
    panels = (
        Panel("concat of all heads", trace.concat, inputs.query_labels, dim_labels(trace.concat.shape[1]),
              "concat", block=head_block(head, hv)),
    )
    nh = trace.n_heads
    why = f"The {nh} head outputs are laid side by side again, head 0 first (head {head}'s block is outlined)."
    formula = r"\mathrm{concat} = [\,\mathrm{head}_0 \mid \mathrm{head}_1 \mid \dots \mid \mathrm{head}_{" + str(nh - 1) + r"}\,]"
    shapes = f"{shape_text(trace.heads)} = (nh, T, hv) -> {shape_text(trace.concat)}"
    return Step("concat", "Concatenate the heads", why, formula, shapes, panels)


def _output_step(inputs: StepInputs, head: int) -> Step:
    trace, w = inputs.trace, inputs.weights
    title = "Output projection W_O"
    if w.w_o is None:
        note = "**W_O is off**: the output is the concatenation itself, Y = concat, and the heads never mix."
        return Step("output", title, "W_O mixes the heads.", r"Y = \mathrm{concat}", shape_text(trace.output), note=note)
    bias = " + b_O" if w.b_o is not None else ""
    hv = trace.v.shape[-1]
    panels = (
        weight_panel("W_O", w.w_o, rows=head_block(head, hv)),
        Panel("Y: output", trace.output, inputs.query_labels, dim_labels(trace.output.shape[1]), "output"),
    )
    start, stop = head_block(head, hv)
    why = (
        "Without W_O each output column would come from one head only. With it, every output column mixes **all** "
        f"heads: the outlined rows {start}..{stop - 1} of W_O are the ones that read head {head}."
    )
    formula = rf"Y = \mathrm{{concat}}\, W_O{bias}"
    return Step("output", title, why, formula, matmul_shapes(trace.concat, w.w_o), panels, _too_big_note(w.w_o))


# ---- figures and tables of a panel ---------------------------------------------------------


def panel_figure(panel: Panel, *, height: int | None = None, font_size: int = 12,
                 width_px: float = FULL_WIDTH_PX) -> go.Figure:
    """A heatmap of ``panel`` (via ``matrix_heatmap``), with its outlines and, when small, its numbers.

    ``font_size`` scales every text (presentation mode makes it larger); ``width_px`` is how wide the
    cells are drawn on the page, which decides how many column labels are printed.
    """
    trace, layout = panel_parts(panel, height=height, font_size=font_size, width_px=width_px)
    return figure([trace], layout)


def panel_parts(panel: Panel, *, height: int | None = None, font_size: int = 12,
                width_px: float = FULL_WIDTH_PX) -> tuple[dict, dict]:
    """The trace and layout of ``panel_figure``, as dictionaries (``panels_figure`` puts several side by side)."""
    rows, cols = panel.matrix.shape
    if height is None and panel.axis_titles is not None:
        height = int(np.clip(22 * rows + 150, 260, 600))  # matrix_heatmap's height plus room for axis titles
    colour_range = {"signed": True} if panel.kind == "signed" else {"signed": False, "zmin": 0.0, "zmax": 1.0}
    trace, layout = matrix_heatmap_parts(panel.matrix, panel.row_labels, panel.col_labels, title=panel.title,
                                         value_name=panel.value_name, height=height, font_size=font_size,
                                         width_px=width_px, **colour_range)
    if panel.kind == "mask":
        trace["showscale"] = False  # two values, written in the cells: no colour bar needed
        trace["colorscale"] = MASK_SCALE
    if rows <= MAX_TEXT_ROWS and cols <= MAX_TEXT_COLS:
        trace.update(text=cell_text(panel.matrix, panel.kind), texttemplate="%{text}", textfont=dict(size=font_size + 2))
    layout["margin"]["pad"] = 0  # the cells meet the axes, no grey frame
    if panel.axis_titles is not None:
        layout["yaxis"]["title"] = dict(text=panel.axis_titles[0])
        layout["xaxis"]["title"] = dict(text=panel.axis_titles[1])
    shapes = []
    if panel.block is not None:
        start, stop = panel.block
        shapes.append(dict(type="rect", x0=start - 0.5, x1=stop - 0.5, y0=-0.5, y1=rows - 0.5, line=OUTLINE))
    if panel.row_block is not None:
        start, stop = panel.row_block
        shapes.append(dict(type="rect", x0=-0.5, x1=cols - 0.5, y0=start - 0.5, y1=stop - 0.5, line=OUTLINE))
    if panel.cell is not None:
        i, j = panel.cell
        shapes.append(dict(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                           line=dict(color="magenta", width=4)))
    if shapes:
        layout["shapes"] = shapes
    return trace, layout


PANEL_GAP = 0.1  # of the figure's width between two panels of a row: the first one's colour bar and the next's labels


def panels_figure(panels: tuple[Panel, ...], *, font_size: int = 12, width_px: float = FULL_WIDTH_PX) -> go.Figure:
    """Panels with the same number of rows side by side in ONE figure, each on its own axes with its own
    colour bar, outlines, numbers and title: what ``panel_figure`` draws for each, as one chart.

    One chart instead of three: the browser lays out and redraws each chart on its own, so a row of
    three matrices costs it a third (``python -m bench --only browser``). ``width_px``: how wide each
    panel's cells are drawn. Row labels are printed on the first panel, and on any other whose rows
    are different tokens (cross-attention's K and V beside Q).
    """
    n = len(panels)
    size = (1.0 - PANEL_GAP * (n - 1)) / n
    data, layout, annotations, shapes = [], {}, [], []
    for index, panel in enumerate(panels):
        trace, part = panel_parts(panel, font_size=font_size, width_px=width_px)
        suffix = "" if index == 0 else str(index + 1)
        left = index * (size + PANEL_GAP)
        trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}")
        trace["colorbar"] = {**trace["colorbar"], "x": left + size + 0.005, "xanchor": "left", "thickness": 12,
                             "len": 0.9}
        data.append(trace)
        layout[f"xaxis{suffix}"] = {**part["xaxis"], "domain": [left, left + size], "anchor": f"y{suffix}"}
        same_rows = index > 0 and list(panel.row_labels) == list(panels[0].row_labels)
        layout[f"yaxis{suffix}"] = {**part["yaxis"], "anchor": f"x{suffix}", "showticklabels": not same_rows}
        shapes += [{**shape, "xref": f"x{suffix}", "yref": f"y{suffix}"} for shape in part.get("shapes", [])]
        annotations.append(dict(text=part["title"]["text"], font={**part["title"]["font"], "weight": "bold"},
                                showarrow=False,
                                xref="paper", yref="paper", x=left + size / 2, y=1.0, xanchor="center",
                                yanchor="bottom"))
        layout["height"] = max(layout.get("height", 0), part["height"])
        layout.update(margin=part["margin"], font=part["font"], plot_bgcolor=part["plot_bgcolor"])
    layout["annotations"] = annotations
    if shapes:
        layout["shapes"] = shapes
    return figure(data, layout)


def cell_text(matrix: np.ndarray, kind: str = "signed") -> list[list[str]]:
    """The number to print in each cell: 2 decimals (never -0.00), blank for a masked (-inf) logit, ✓/✗ for a mask."""
    if kind == "mask":
        return [["✓" if v else "✗" for v in row] for row in matrix]
    return [["" if not np.isfinite(v) else fixed(v, CELL_DECIMALS) for v in row] for row in matrix]


def panel_table(panel: Panel) -> pd.DataFrame:
    """The panel's numbers with its row and column labels; masked logits (-inf) become blank (NaN)."""
    if panel.kind == "mask":
        return pd.DataFrame(panel.matrix.astype(bool), index=panel.row_labels, columns=panel.col_labels)
    values = np.where(np.isneginf(panel.matrix), np.nan, panel.matrix)  # (R, K)
    return pd.DataFrame(values, index=panel.row_labels, columns=panel.col_labels)


# ---- the About page ------------------------------------------------------------------------


def glossary_rows(docstring: str) -> list[tuple[str, str]]:
    """(symbol, meaning) pairs from the indented 'Glossary of shapes' block of a docstring."""
    rows = []
    in_glossary = False
    for line in docstring.splitlines():
        if line.lower().startswith("glossary"):
            in_glossary = True
            continue
        if in_glossary:
            match = re.match(r"^\s{2,}(\S+)\s{2,}(.+)$", line)
            if match:
                rows.append((match.group(1), match.group(2).strip()))
            elif rows and line.strip():
                break
    return rows
