"""Pure builders for the Step-by-step page's steps: from the inputs X to the output Y, every matrix.

Everything here takes a ``StepInputs`` (the engine's trace and what went into it; the toy pages
make one with ``step_inputs(result)``, the Real model page from one layer of the checkpoint) and the
chosen head, and returns data: ``Step`` records with a LaTeX formula, the shapes with the actual
numbers and the matrices to show (drawn by ``ui.pipeline.panels``; records in ``ui.pipeline.records``).
The drill-down into one cell is ``ui.pipeline.drill_down``, predict-then-reveal ``ui.pipeline.predict``.
No streamlit in here, so all of it is testable without a server.

Shapes follow the glossary of ``mha_core``: T tokens (Tq queries, Tk keys), C = d_model,
nh heads, hs head size. Rows are tokens; heads are contiguous column blocks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_core.attention import AttentionTrace, merge_heads
from mha_core.grouping import group_size, kv_sharing_matrix
from mha_core.positions import PositionScheme, SchemeAt, position_scheme
from ui.charts.figures import MAX_DRAWN_CELLS
from ui.i18n import N_, _, ngettext, sentences
from ui.pipeline.kernel_steps import angle_panel, rotation_panels, variant_steps
from ui.pipeline.records import (
    SCALE_RULE_LATEX,
    Panel,
    Step,
    StepInputs,
    dim_labels,
    head_block,
    latex_number,
    matmul_shapes,
    qk_axes,
    shape_text,
)


def build_steps(inputs: StepInputs, head: int, cell: tuple[int, int] | None = None) -> list[Step]:
    """Every step from the inputs X to the output Y, for head ``head``; ``cell`` = (query, key) to outline."""
    if not 0 <= head < inputs.trace.n_heads:
        raise ValueError(f"head {head} does not exist: choose 0 to {inputs.trace.n_heads - 1}")
    trace = inputs.trace
    sharing = [_kv_share_step(inputs, head)] if trace.kv_heads < trace.n_heads else []
    rope = [_rope_step(inputs, head)] if trace.q_unrotated is not None else []  # a scheme turned q and k
    alibi = [_alibi_step(inputs, head, cell)] if trace.bias is not None else []  # a scheme added a bias
    steps = [
        _input_step(inputs),
        _positional_step(inputs),
        *([_projection_step(inputs, head)] if trace.mla is None else []),  # MLA: ui/kernel_steps.latent_step
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
    return variant_steps(inputs, head, cell, steps)  # the kernels' and MLA's own steps (ui/pipeline/kernel_steps.py)


def _input_step(inputs: StepInputs) -> Step:
    c = inputs.embeddings.shape[1]
    why = _("Each token starts as a vector of d_model numbers: one row per token.")
    if inputs.is_cross:
        why = _(
            "Cross-attention: the **queries** come from the first sentence, the **keys and values** from the "
            "second. Each token is one row of d_model numbers."
        )
        panels = (
            Panel(_("E_q: query sentence"), inputs.embeddings, inputs.query_labels, dim_labels(c), _("embedding")),
            Panel(_("E_kv: key/value sentence"), inputs.key_embeddings, inputs.key_labels, dim_labels(c),
                  _("embedding")),
        )
        shapes = _("E_q {q}, E_kv {kv}: (tokens, d_model)").format(q=shape_text(inputs.embeddings),
                                                                  kv=shape_text(inputs.key_embeddings))
        formula = r"E_q \in \mathbb{R}^{T_q \times C},\quad E_{kv} \in \mathbb{R}^{T_k \times C}"
    else:
        panels = (Panel(_("E: token embeddings"), inputs.embeddings, inputs.query_labels, dim_labels(c),
                        _("embedding")),)
        shapes = _("E {shape}: (T tokens, C = d_model)").format(shape=shape_text(inputs.embeddings))
        formula = r"E \in \mathbb{R}^{T \times C}"
    return Step("input", _("Token embeddings E"), why, formula, shapes, panels)


def _scheme_words(scheme: PositionScheme, at: SchemeAt, formula: str) -> tuple[str, str]:
    """The scheme's "why" and formula for its step, from its record (``formula`` when the record has none)."""
    why = (_(scheme.why(at)) if scheme.why is not None
           else _("{scheme}: {summary}").format(scheme=_(scheme.short_label), summary=_(scheme.summary)))
    return why, scheme.formula(at) if scheme.formula is not None else formula


def _at(inputs: StepInputs, head: int) -> SchemeAt:
    return SchemeAt(head, inputs.trace.n_heads, inputs.trace.q.shape[-1], inputs.rope_base)


def _positional_step(inputs: StepInputs) -> Step:
    title = _("Add positional encoding")
    if inputs.positional is None:
        note = _("**Positional encoding is off**, so X = E (turn it on in the sidebar under *Inputs*).")
        if inputs.hand_built:
            note = _("**Positional encoding is off**: the hand-built heads write each token's position into dims 0-1 "
                     "of E.")
        return Step("positional", title, "", "", "", note=note)  # one line, nothing else to show
    c = inputs.x_q.shape[1]
    scheme = position_scheme(inputs.pe)
    title = _(scheme.title())
    why, formula = _scheme_words(scheme, _at(inputs, 0), r"X = E + P")
    panels = [
        Panel(_("P: positional encoding"), inputs.positional, inputs.query_labels, dim_labels(c), "P"),
        Panel("X = E + P", inputs.x_q, inputs.query_labels, dim_labels(c), "x"),
    ]
    shapes = f"{shape_text(inputs.embeddings)} + {shape_text(inputs.positional)} -> {shape_text(inputs.x_q)}"
    if inputs.is_cross:
        panels.append(Panel("X_kv = E_kv + P", inputs.x_kv, inputs.key_labels, dim_labels(c), "x"))
        shapes += _("; keys/values: {e} + P -> {x}").format(e=shape_text(inputs.key_embeddings),
                                                           x=shape_text(inputs.x_kv))
    return Step("positional", title, why, formula, shapes, tuple(panels))


def weight_panel(name: str, w: np.ndarray, *, columns=None, rows=None) -> Panel:
    """A weight matrix with the chosen head's columns (or rows) outlined; when it is too large to draw
    (more than MAX_DRAWN_CELLS), only that head's slice, so a page at the caps stays light."""
    labels_in, labels_out = dim_labels(w.shape[0]), dim_labels(w.shape[1])
    if w.size <= MAX_DRAWN_CELLS:
        return Panel(name, w, labels_in, labels_out, _("weight"), block=columns, row_block=rows)
    if columns is not None:
        start, stop = columns
        title = _("{name}[:, {start}:{stop}] (the head's columns)").format(name=name, start=start, stop=stop)
        return Panel(title, w[:, start:stop], labels_in, labels_out[start:stop], _("weight"))
    start, stop = rows
    title = _("{name}[{start}:{stop}, :] (the head's rows)").format(name=name, start=start, stop=stop)
    return Panel(title, w[start:stop], labels_in[start:stop], labels_out, _("weight"))


def _too_big_note(w: np.ndarray) -> str:
    """A line saying that only the head's slice of a large weight matrix is drawn (empty when all of it is)."""
    if w.size <= MAX_DRAWN_CELLS:
        return ""
    return _("The weight matrices are {rows}×{cols}: too big to draw whole, so only the head's slice is shown.").format(
        rows=w.shape[0], cols=w.shape[1])


def _projection_step(inputs: StepInputs, head: int) -> Step:
    w, trace = inputs.weights, inputs.trace
    hs = trace.q.shape[-1]
    block = head_block(head, hs)
    x_q, x_kv = (r"X_q", r"X_{kv}") if inputs.is_cross else ("X", "X")
    b = {name: (f" + b_{name}" if getattr(w, f"b_{name.lower()}") is not None else "") for name in "QKV"}
    formula = rf"Q = {x_q} W_Q{b['Q']},\quad K = {x_kv} W_K{b['K']},\quad V = {x_kv} W_V{b['V']}"
    # X W_Q and X W_K as projected: with RoPE, trace.q and trace.k are already turned (a later step turns them)
    q = merge_heads(trace.projected_q)  # (Tq, nh*hs)
    k = merge_heads(trace.projected_k)  # (Tk, kv*hs)
    v = merge_heads(trace.v)  # (Tk, kv*hv)
    group = trace.kv_head_of(head)  # the key/value head this query head reads (itself unless shared)
    kv_block, hv_block = head_block(group, hs), head_block(group, trace.v.shape[-1])
    panels = (
        weight_panel("W_Q", w.w_q, columns=block),
        weight_panel("W_K", w.w_k, columns=kv_block),
        weight_panel("W_V", w.w_v, columns=hv_block),
        Panel(_("Q (queries)"), q, inputs.query_labels, dim_labels(q.shape[1]), "q", block=block),
        Panel(_("K (keys)"), k, inputs.key_labels, dim_labels(k.shape[1]), "k", block=kv_block),
        Panel(_("V (values)"), v, inputs.key_labels, dim_labels(v.shape[1]), "v", block=hv_block),
    )
    shapes = f"Q: {matmul_shapes(inputs.x_q, w.w_q)};  K, V: {matmul_shapes(inputs.x_kv, w.w_k)}"
    whose = (_("The weights shown are head {head}'s.") if w.w_q.size > MAX_DRAWN_CELLS
             else _("The outlined columns are head {head}'s.")).format(head=head)
    why = sentences(_(
        "Three learned matrices turn every token into a **query** (what it looks for), a **key** (what it offers "
        "to be found by) and a **value** (what it passes on)."
    ), whose)
    if trace.kv_heads < trace.n_heads:
        shapes = (f"Q: {matmul_shapes(inputs.x_q, w.w_q)};  K: {matmul_shapes(inputs.x_kv, w.w_k)};  "
                  f"V: {matmul_shapes(inputs.x_kv, w.w_v)}")
        why = sentences(why, ngettext(
            "K and V have only {kv} head's columns (grouped-query attention): head {head} reads key/value head {g}.",
            "K and V have only {kv} heads' columns (grouped-query attention): head {head} reads key/value head {g}.",
            trace.kv_heads).format(kv=trace.kv_heads, head=head, g=group))
    return Step("qkv", _("Project to queries, keys and values"), why, formula, shapes, panels, _too_big_note(w.w_q))


def _split_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    nh, tq, hs = trace.q.shape
    start, stop = head_block(head, hs)
    g = trace.kv_head_of(head)
    kv_start = g * hs
    panels = (
        Panel(f"Q_{head}", trace.projected_q[head], inputs.query_labels,
              dim_labels(hs, start), "q"),
        Panel(_kv_name("K", head, g), trace.projected_k[g], inputs.key_labels,
              dim_labels(hs, kv_start), "k"),
        Panel(_kv_name("V", head, g), trace.v[g], inputs.key_labels, dim_labels(trace.v.shape[-1], g * trace.v.shape[-1]),
              "v"),
    )
    shapes = _("{merged} -> {split} = (nh, T, hs); head {head} takes columns {start}..{last}: {shape}").format(
        merged=shape_text(merge_heads(trace.q)), split=shape_text(trace.q), head=head, start=start, last=stop - 1,
        shape=shape_text(trace.q[head]))
    formula = rf"Q_{{{head}}} = Q[:,\ {start}{{:}}{stop}],\quad K_{{{head}}} = K[:,\ {start}{{:}}{stop}],\quad V_{{{head}}} = V[:,\ {start}{{:}}{stop}]"
    why = _("No new numbers: the {nh} heads are {nh} column blocks of Q, K and V, each hs = {hs} wide. "
            "Every head then attends on its own.").format(nh=nh, hs=hs)
    return Step("split", _("Split into heads"), why, formula, shapes, panels)


def _kv_name(matrix: str, head: int, g: int) -> str:
    """'K_2' for multi-head attention; 'K_(0) (shared)' when head ``head`` reads the shared key/value head g."""
    return f"{matrix}_{head}" if g == head else _("{matrix}_({g}) (K/V head {g}, shared)").format(matrix=matrix, g=g)


def _kv_share_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    nh, kv = trace.n_heads, trace.kv_heads
    g, group = trace.kv_head_of(head), group_size(nh, kv)
    readers = [h for h in range(nh) if trace.kv_head_of(h) == g]
    panels = (
        Panel(_("Which K/V head each query head reads (1 = reads)"), kv_sharing_matrix(nh, kv),
              [_("q head {h}").format(h=h) for h in range(nh)], [_("K/V head {k}").format(k=k) for k in range(kv)],
              _("reads"), kind="mask", cell=(head, g), axis_titles=(_("query head"), _("key/value head"))),
        Panel(_("K_({g}): the keys heads {readers} all read").format(g=g, readers=", ".join(map(str, readers))),
              trace.projected_k[g], inputs.key_labels,  # RoPE comes next
              dim_labels(trace.k.shape[-1], g * trace.k.shape[-1]), "k"),
    )
    kind = _("Multi-query attention (MQA): one K/V head for all.") if kv == 1 else _("Grouped-query attention (GQA).")
    why = sentences(kind, ngettext(
        "{nh} query heads share {kv} key/value head, {group} query heads per group: head {head} reads K/V head {g}, "
        "together with heads {readers}.",
        "{nh} query heads share {kv} key/value heads, {group} query heads per group: head {head} reads K/V head {g}, "
        "together with heads {readers}.", kv,
    ).format(nh=nh, kv=kv, group=group, head=head, g=g, readers=", ".join(map(str, readers))), _(
        "They still ask different questions (their own Q), but look them up in the same keys and mix the same "
        "values. K and V are {group}× smaller, and so is the KV cache of a decoder."
    ).format(group=group))
    formula = rf"g(h) = \left\lfloor h \,/\, (n_h / n_{{kv}}) \right\rfloor,\qquad g({head}) = \lfloor {head} / {group} \rfloor = {g}"
    shapes = f"Q {shape_text(trace.q)} = (nh, T, hs);  K {shape_text(trace.k)}, V {shape_text(trace.v)} = (kv, T, ·)"
    return Step("kv_share", _("Share keys and values among query heads"), why, formula, shapes, panels)


def _rope_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    hs = trace.q.shape[-1]
    half = hs // 2
    pairs = [f"p{p} (d{p},d{p + half})" for p in range(half)]
    panels = [angle_panel(trace.q_angles, inputs.query_labels, pairs), *rotation_panels(inputs, head)]
    if inputs.is_cross:
        panels.insert(1, Panel(_("θ_k: angle of each key position and pair"), trace.k_angles, inputs.key_labels, pairs,
                               _("angle"), axis_titles=(_("position"), _("pair"))))
    scheme = position_scheme(trace.pe)
    why, formula = _scheme_words(scheme, _at(inputs, head), r"q'_i = R(\theta_i)\, q_i,\quad k'_j = R(\theta_j)\, k_j")
    shapes = _("θ {angles} = (T, hs/2);  Q_{head} {shape} -> same shape").format(
        angles=shape_text(trace.q_angles), head=head, shape=shape_text(trace.q[head]))
    return Step("rope", _(scheme.title()), why, formula, shapes, tuple(panels))


def _alibi_step(inputs: StepInputs, head: int, cell) -> Step:
    """The step of a scheme that adds a bias to the logits (its slug is ALiBi's, the first such scheme)."""
    trace = inputs.trace
    scheme = position_scheme(trace.pe)
    scaled = trace.scores[head] * trace.scale  # (Tq, Tk) before the bias
    bias_text = f" = {_(scheme.bias_text)}" if scheme.bias_text else ""
    panels = (
        Panel(_("B_{head}{formula} ({scheme} bias)").format(head=head, formula=bias_text, scheme=_(scheme.short_label)),
              trace.bias[head] + 0.0, inputs.query_labels,  # -0 -> 0
              inputs.key_labels, _("bias"), cell=cell, axis_titles=qk_axes()),
        Panel(_("S_{head} × scale + B_{head}").format(head=head), scaled + trace.bias[head], inputs.query_labels,
              inputs.key_labels, _("logit before mask"), cell=cell, axis_titles=qk_axes()),
    )
    why, formula = _scheme_words(scheme, _at(inputs, head), rf"L_{{ij}} = S_{{ij}}\, s + B^{{({head})}}_{{ij}}")
    shapes = _("B {bias} = (nh, Tq, Tk); head {head}: {shape}").format(bias=shape_text(trace.bias), head=head,
                                                                      shape=shape_text(trace.bias[head]))
    return Step("alibi", _(scheme.title()), why, formula, shapes, panels)


def _scores_step(inputs: StepInputs, head: int, cell) -> Step:
    trace = inputs.trace
    panels = (
        Panel(_("S_{head} = Q_{head} K_{head}ᵀ (raw scores)").format(head=head), trace.scores[head],
              inputs.query_labels, inputs.key_labels, _("raw score q·k"), cell=cell, axis_titles=qk_axes()),
    )
    why = _("Row i, column j is the dot product of query i with key j: large when the two vectors point the same way.")
    formula = rf"S_{{{head}}} = Q_{{{head}}} K_{{{head}}}^\top,\qquad S_{{ij}} = q_i \cdot k_j = \sum_{{d}} q_{{i,d}}\, k_{{j,d}}"
    shapes = (matmul_shapes(trace.q[head], np.swapaxes(trace.k[trace.kv_head_of(head)], 0, 1)) + "  "
              + _("(queries × keys)"))
    return Step("scores", _("Scores QKᵀ"), why, formula, shapes, panels)


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


SCALE_WHY = {  # the scale step's words, by scale rule
    "sqrt_dk": N_("A dot product of d_k random terms grows like √d_k; dividing by √d_k keeps the logits near 1 "
                  "so the softmax does not saturate into one-hot rows."),
    "sqrt_t": N_("Scaled by 1/√T (the number of keys), as seed 001 does: not the standard rule."),
    "none": N_("No scaling: with larger head sizes the softmax saturates and each row becomes nearly one-hot."),
    "temperature": N_("Dividing by a temperature: above 1 flattens the softmax, below 1 sharpens it."),
}


def _scale_step(inputs: StepInputs, head: int, cell) -> Step:
    trace = inputs.trace
    scaled = trace.scores[head] * trace.scale  # (Tq, Tk) before the mask
    why = _(SCALE_WHY[inputs.scale_rule])
    panels = (
        Panel(_("S_{head} × scale").format(head=head), scaled, inputs.query_labels, inputs.key_labels,
              _("scaled score"), cell=cell, axis_titles=qk_axes()),
    )
    formula = rf"L = S \times s,\qquad s = {scale_latex(inputs)}"
    shapes = _("{shape} × scalar -> {shape}").format(shape=shape_text(scaled))
    return Step("scale", _("Scale"), why, formula, shapes, panels)


def _mask_step(inputs: StepInputs, head: int, cell) -> Step:
    trace = inputs.trace
    formula = (r"L_{ij} = \begin{cases} S_{ij}\, s & \text{" + _("if") + r" } M_{ij} \text{ (" + _("may attend")
               + r")} \\ -\infty & \text{" + _("otherwise") + r"} \end{cases}")
    if inputs.mask is None:
        note = _("**No mask**: every query may attend to every key, so the scaled scores go to the softmax unchanged.")
        return Step("mask", _("Mask"), _("A mask forbids some (query, key) pairs."), formula,
                    shape_text(trace.logits[head]), note=note)
    blocked = int((~inputs.mask).sum())
    full = int(trace.fully_masked[head].sum())
    note = _("{blocked} of {cells} cells are masked.").format(blocked=blocked, cells=inputs.mask.size)
    if full:
        note = sentences(note, ngettext(
            "**{n} row has every key masked** (see the softmax step).",
            "**{n} rows have every key masked** (see the softmax step).", full).format(n=full))
    panels = (
        Panel(_("M: mask (1 = may attend)"), inputs.mask.astype(np.float64), inputs.query_labels, inputs.key_labels,
              _("may attend"), kind="mask", cell=cell, axis_titles=qk_axes()),
        Panel(_("L_{head}: logits, masked cells blank").format(head=head), trace.logits[head], inputs.query_labels,
              inputs.key_labels, _("logit"), cell=cell, axis_titles=qk_axes()),
    )
    if trace.null_key:
        why = _("Mask '{mask}': a masked cell's logit becomes −∞, so after the softmax its weight is exactly 0 and the "
                "other keys of the row and the null key share all the weight.")
    else:
        why = _("Mask '{mask}': a masked cell's logit becomes −∞, so after the softmax its weight is exactly 0 and the "
                "other keys of the row share all the weight.")
    why = why.format(mask=inputs.mask_name)
    shapes = _("M {mask} (True = may attend) applied to L {logits}").format(mask=shape_text(inputs.mask),
                                                                           logits=shape_text(trace.logits[head]))
    return Step("mask", _("Mask"), why, formula, shapes, panels, note)


FULLY_MASKED_POLICY = N_(
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
        Panel(_("A_{head} = softmax(L_{head}) (attention weights)").format(head=head), trace.weights[head],
              inputs.query_labels, inputs.key_labels, _("weight"), kind="weights", cell=cell, axis_titles=qk_axes()),
    )
    shapes = _("{logits} -> {weights}, row by row").format(logits=shape_text(trace.logits[head]),
                                                         weights=shape_text(trace.weights[head]))
    if trace.null_key:
        why = _(
            "Each row is turned into weights that are ≥ 0. With the **null key** (softmax₁) every row has one more, "
            "implicit key of logit 0 and value 0 in the denominator, so the real keys' weights **sum to less than 1**: "
            "the rest, 1 − Σⱼ Aᵢⱼ, goes to the null key and adds nothing to the output. Subtracting the row's "
            "maximum (the null key's 0 included) first changes nothing mathematically and prevents overflow."
        )
        formula = (r"A_{ij} = \frac{e^{L_{ij} - m_i}}{e^{0 - m_i} + \sum_{k} e^{L_{ik} - m_i}},\qquad "
                   r"m_i = \max\big(0,\ \max_k L_{ik}\big),\qquad \sum_j A_{ij} = 1 - A_{i\varnothing} < 1")
        return Step("softmax", _("Softmax₁ (with the null key), row by row"), why, formula, shapes, panels)
    why = _(
        "Each row is turned into weights that are ≥ 0 and **sum to 1**: how query i shares its attention among "
        "the keys. Subtracting the row's maximum first changes nothing mathematically and prevents overflow."
    )
    formula = r"A_{ij} = \frac{e^{L_{ij} - m_i}}{\sum_{k} e^{L_{ik} - m_i}},\qquad m_i = \max_k L_{ik},\qquad \sum_j A_{ij} = 1"
    return Step("softmax", _("Softmax, row by row"), why, formula, shapes, panels)


NULL_SHARE_COLUMN = N_("null key (1 − sum)")  # shown as _(NULL_SHARE_COLUMN)


def row_sums_heading(trace: AttentionTrace) -> str:
    """What the row-sums table beside the weights shows, true with and without the null key."""
    if trace.null_key:
        return _("**Row sums** (below 1: the null key takes the rest; 0 for a fully masked row)")
    return _("**Row sums** (1, or 0 for a fully masked row)")


def row_sums_table(inputs: StepInputs, head: int) -> pd.DataFrame:
    """One row per query: the sum of its weights and the all-masked flag.

    The sum is 1, or 0 when every key is masked; with the null key it is below 1 and a column
    ``NULL_SHARE_COLUMN`` gives the null key's share, 1 − sum (1 for a fully masked row). Headers in the run's
    language (``_(NULL_SHARE_COLUMN)``).
    """
    trace = inputs.trace
    sums = trace.weights[head].sum(axis=-1)  # (Tq,)
    columns = {_("sum"): sums}
    if trace.null_key:
        columns[_(NULL_SHARE_COLUMN)] = 1.0 - sums
    columns[_("all masked")] = trace.fully_masked[head]
    return pd.DataFrame(columns, index=pd.Index(inputs.query_labels, name=_("query")))


def _mix_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    hv = trace.v.shape[-1]
    panels = (
        Panel(f"head_{head} = A_{head} V_{head}", trace.heads[head], inputs.query_labels,
              dim_labels(hv, head * hv), _("head output")),
    )
    why = _("Each query's output is the weighted average of the value rows, with its attention weights as the "
            "weights.")
    formula = rf"\mathrm{{head}}_{{{head}}} = A_{{{head}}} V_{{{head}}},\qquad \mathrm{{head}}_i = \sum_j A_{{ij}}\, v_j"
    return Step("mix", _("Weighted sum of values A·V"), why, formula,
                matmul_shapes(trace.weights[head], trace.v[trace.kv_head_of(head)]), panels)


def _concat_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    hv = trace.v.shape[-1]
    panels = (
        Panel(_("concat of all heads"), trace.concat, inputs.query_labels, dim_labels(trace.concat.shape[1]),
              "concat", block=head_block(head, hv)),
    )
    nh = trace.n_heads
    why = _("The {nh} head outputs are laid side by side again, head 0 first (head {head}'s block is outlined).").format(
        nh=nh, head=head)
    formula = r"\mathrm{concat} = [\,\mathrm{head}_0 \mid \mathrm{head}_1 \mid \dots \mid \mathrm{head}_{" + str(nh - 1) + r"}\,]"
    shapes = f"{shape_text(trace.heads)} = (nh, T, hv) -> {shape_text(trace.concat)}"
    return Step("concat", _("Concatenate the heads"), why, formula, shapes, panels)


def _output_step(inputs: StepInputs, head: int) -> Step:
    trace, w = inputs.trace, inputs.weights
    title = _("Output projection W_O")
    if w.w_o is None:
        note = _("**W_O is off**: the output is the concatenation itself, Y = concat, and the heads never mix.")
        return Step("output", title, _("W_O mixes the heads."), r"Y = \mathrm{concat}", shape_text(trace.output),
                    note=note)
    bias = " + b_O" if w.b_o is not None else ""
    hv = trace.v.shape[-1]
    panels = (
        weight_panel("W_O", w.w_o, rows=head_block(head, hv)),
        Panel(_("Y: output"), trace.output, inputs.query_labels, dim_labels(trace.output.shape[1]), _("output")),
    )
    start, stop = head_block(head, hv)
    why = _(
        "Without W_O each output column would come from one head only. With it, every output column mixes **all** "
        "heads: the outlined rows {start}..{last} of W_O are the ones that read head {head}."
    ).format(start=start, last=stop - 1, head=head)
    formula = rf"Y = \mathrm{{concat}}\, W_O{bias}"
    return Step("output", title, why, formula, matmul_shapes(trace.concat, w.w_o), panels, _too_big_note(w.w_o))

