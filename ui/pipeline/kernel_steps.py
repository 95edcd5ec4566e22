"""The steps of the attention variants (issue 26): what Step by step shows instead of, or besides, a softmax head's.

``variant_steps`` takes the softmax pipeline ``ui.pipeline.steps.build_steps`` made and returns the variant's, as
the kernel's record names them (``Kernel.steps``, ``drops``, ``after_mix``; builders by slug in ``KERNEL_STEPS``):

- MLA: the projection step becomes "compress to a latent, up-project keys and values"; an "absorbed scores"
  step follows the scores (the same scores without building K, max |Δ| shown);
- differential: scores, scale, mask and softmax become "two softmax maps" and "A₁ − λA₂" (signed), and a
  "normalise each head" step follows A·V;
- linear: they become "feature map φ", "φ(q)·φ(k) over its row sum" and, under a causal mask, "the
  recurrent form" (a state of constant size, max |Δ| against the parallel form shown);
- a kernel whose weights are one map of the logits (``Kernel.weights_of``): the softmax step becomes its weights
  step, in the row's words.

Every matrix is an array of the engine's trace (``trace.kernel_parts``, ``trace.mla``). Pure: no streamlit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from mha_core.kernels import KERNELS
from ui.i18n import _, ngettext, sentences
from ui.pipeline.kernel_steps_deltanet import DELTANET_STEPS
from ui.pipeline.kernel_steps_gated import output_gate_step, sink_weights_step
from ui.pipeline.kernel_steps_qknorm import qk_norm_step
from ui.pipeline.kernel_steps_sparse import SPARSE_STEPS
from ui.pipeline.records import (
    Panel,
    Step,
    StepInputs,
    dim_labels,
    head_block,
    latex_number,
    qk_axes,
    shape_text,
)
from ui.pipeline.step_kinds import StepKind


def variant_steps(inputs: StepInputs, head: int, cell, steps: list[Step]) -> list[Step]:
    """The steps of ``inputs``' variant, made from the softmax pipeline ``steps`` (the same list for a softmax head).

    The kernel's record says which of the softmax head's steps it drops (``Kernel.drops``), which steps stand
    where the softmax step stands (``Kernel.steps``) and which follow A·V (``Kernel.after_mix``); each is built
    by its slug (``KERNEL_STEPS``).
    """
    trace = inputs.trace
    kernel = KERNELS[trace.kernel]
    out: list[Step] = []
    early = [KERNEL_STEPS[slug](inputs, head, cell) for slug in kernel.early_steps]  # before positions (QK-norm)
    for step in steps:
        if early and step.slug in ("rope", "scores"):  # the first step after the heads are split and shared
            out.extend(early)
            early = []
        if step.slug == "rope" and (trace.mla is not None or kernel.sub_heads > 1):
            out.append(part_rope_step(inputs, head))
        elif step.slug == "softmax":
            out.extend(made for slug in kernel.steps
                       if (made := step if slug == step.slug else KERNEL_STEPS[slug](inputs, head, cell)) is not None)
        elif step.slug not in kernel.drops:
            out.append(_in_kernel_words(step, kernel, inputs))
        if step.slug == "positional" and trace.mla is not None:
            out.append(latent_step(inputs, head))  # in place of the projection step (no W_K, W_V)
        if step.slug == "scores" and trace.mla is not None:
            out.append(absorbed_step(inputs, head, cell))
        if step.slug == "mix":
            if kernel.mix_why:  # not an average (differential: signed weights that sum to 1 − λ)
                out[-1] = replace(step, why=_(kernel.mix_why))
            out.extend(KERNEL_STEPS[slug](inputs, head, cell) for slug in kernel.after_mix)
    return out


def _in_kernel_words(step: Step, kernel, inputs: StepInputs) -> Step:
    """A softmax head's scale or mask step as the kernel's record words it (``Kernel.scale_why``, ``mask_why``)."""
    if step.slug == "scale" and kernel.scale_why:
        return replace(step, why=_(kernel.scale_why))
    if step.slug == "mask" and kernel.mask_why and inputs.mask is not None:
        return replace(step, why=_("Mask '{mask}': {why}").format(mask=inputs.mask_name, why=_(kernel.mask_why)))
    return step


def _mask_words(inputs: StepInputs) -> str:
    if inputs.mask is None:
        return ""
    return _("Mask '{mask}': masked cells get weight 0 (blank logits).").format(mask=inputs.mask_name)


# ---- MLA -------------------------------------------------------------------------------------


def latent_step(inputs: StepInputs, head: int) -> Step:
    trace, parts = inputs.trace, inputs.trace.mla
    hs, r, dr = trace.q.shape[-1], parts.rank, parts.rope_dims
    q = trace.q if trace.q_unrotated is None else trace.q_unrotated  # (nh, Tq, hs) before any turn
    q_all = q.transpose(1, 0, 2).reshape(q.shape[1], -1)  # (Tq, nh*hs)
    panels = [
        Panel(_("Q = X W_Q (queries, as in MHA)"), q_all, inputs.query_labels, dim_labels(q_all.shape[1]), "q",
              block=head_block(head, hs)),
        Panel(_("c = RMSNorm(X W_DKV): the latent, {r} numbers per token (cached)").format(r=r), parts.latent,
              inputs.key_labels, dim_labels(r), _("latent")),
        Panel(f"K_{head} = [c W_UK,{head} | k_R]", trace.k[head], inputs.key_labels, dim_labels(hs), "k"),
        Panel(f"V_{head} = c W_UV,{head}", trace.v[head], inputs.key_labels, dim_labels(trace.v.shape[-1]), "v"),
    ]
    if dr:
        panels.insert(2, Panel(_("k_R = RoPE(X W_KR): {dr} features shared by every head (cached)").format(dr=dr),
                               parts.k_rope[0], inputs.key_labels, dim_labels(dr, hs - dr), "k"))
    nh = trace.n_heads
    rope = (_("The last {dr} features of every query and key carry RoPE: the keys' part k_R is one projection shared "
              "by all heads.").format(dr=dr) if dr else _("No decoupled RoPE features (RoPE is off)."))
    why = sentences(
        _("Keys and values are not projected per head from X: X is first **compressed** to a latent c of rank "
          "r = {r}, and head {head}'s keys and values are **up-projected** from it (W_UK, W_UV).").format(r=r, head=head),
        rope,
        _("A decoder caches c and k_R: **{cached}** numbers per token, against 2·nh·d_k = {mha} for multi-head "
          "attention.").format(cached=r + dr, mha=2 * nh * hs),
    )
    formula = (r"c = \mathrm{RMSNorm}(X W_{DKV}),\quad K_h = \big[\,c\,W_{UK,h}\ \big|\ \mathrm{RoPE}(X W_{KR})\,\big],"
               r"\quad V_h = c\,W_{UV,h},\quad Q = X W_Q")
    shapes = (f"X {shape_text(inputs.x_kv)} @ W_DKV -> c {shape_text(parts.latent)};  c @ W_UK,h -> "
              f"{shape_text(parts.k_content[head])};  k_R {shape_text(parts.k_rope[0])}")
    return Step("mla_latent", _("Compress keys and values to a latent (MLA)"), why, formula, shapes, tuple(panels))


def absorbed_step(inputs: StepInputs, head: int, cell) -> Step:
    trace, parts = inputs.trace, inputs.trace.mla
    gap = np.abs(parts.absorbed_scores[head] - trace.scores[head])  # (Tq, Tk)
    panels = (
        Panel(_("q̃_{head} = q_C W_UK,{head}ᵀ (absorbed queries)").format(head=head), parts.absorbed_query[head],
              inputs.query_labels, dim_labels(parts.rank), _("absorbed q")),
        Panel(f"S̃_{head} = q̃·c + q_R·k_R", parts.absorbed_scores[head], inputs.query_labels, inputs.key_labels,
              _("absorbed score"), cell=cell, axis_titles=qk_axes()),
        Panel(f"|S̃_{head} − S_{head}|", gap, inputs.query_labels, inputs.key_labels, "|Δ|", cell=cell,
              axis_titles=qk_axes()),
    )
    why = _(
        "The same raw scores, computed the way a decoder does: W_UK is folded into the query, so the score is a dot "
        "product with the cached latent c, plus the RoPE part q_R·k_R. K is never built. "
        "Largest difference from the materialised scores, all heads: **{gap}** (rounding)."
    ).format(gap=f"{parts.score_gap:.1e}")
    formula = (r"q_{C}\cdot\big(c_j W_{UK,h}\big) = \big(q_{C} W_{UK,h}^\top\big)\cdot c_j,\qquad "
               r"\tilde S_{ij} = \tilde q_i \cdot c_j + q_{R,i}\cdot k_{R,j}")
    shapes = f"q̃ {shape_text(parts.absorbed_query[head])} @ cᵀ {shape_text(parts.latent.T)} -> {shape_text(gap)}"
    return Step("mla_absorb", _("Absorbed scores: the same scores without building K (MLA)"), why, formula, shapes,
                panels)


def part_rope_step(inputs: StepInputs, head: int) -> Step:
    trace = inputs.trace
    hs = trace.q.shape[-1]
    pairs = [f"p{p}" for p in range(trace.q_angles.shape[1])]
    panels = (angle_panel(trace.q_angles, inputs.query_labels, pairs), *rotation_panels(inputs, head))
    if trace.mla is not None:
        why = _("RoPE turns the last {n} features of each query head and the shared key part k_R, by an angle "
                "proportional to the position (base θ = {base}); the other features and the values do not turn.")
        n = trace.mla.rope_dims
    else:
        why = _("RoPE turns each half of the head ({n} features) on its own, in pairs, by an angle proportional to "
                "the position (base θ = {base}); the other features and the values do not turn.")
        n = hs // 2
    why = why.format(n=n, base=f"{inputs.rope_base:g}")
    formula = r"(q'_p, q'_{p+h/2}) = R(t\,\omega_p)\,(q_p, q_{p+h/2}),\quad \omega_p = \theta^{-2p/h}"
    shapes = _("θ {angles};  Q_{head} {shape} -> same shape").format(angles=shape_text(trace.q_angles), head=head,
                                                                   shape=shape_text(trace.q[head]))
    return Step("part_rope", _("Rotate the RoPE features by position"), why, formula, shapes, panels)

def angle_panel(angles: np.ndarray, query_labels: list[str], pairs: list[str]) -> Panel:
    """RoPE's angle of each query position and pair of features."""
    return Panel(_("θ: angle (radians) of each query position and pair"), angles, query_labels, pairs, _("angle"),
                 axis_titles=(_("position"), _("pair")))


def rotation_panels(inputs: StepInputs, head: int) -> list[Panel]:
    """The head's queries and its keys before and after RoPE's turn."""
    trace = inputs.trace
    hs, g = trace.q.shape[-1], trace.kv_head_of(head)
    return [
        Panel(_("Q_{head} before rotation").format(head=head), trace.q_unrotated[head], inputs.query_labels,
              dim_labels(hs, head * hs), "q"),
        Panel(_("Q_{head} rotated (what the scores use)").format(head=head), trace.q[head], inputs.query_labels,
              dim_labels(hs, head * hs), "q"),
        Panel(_("K_({g}) before rotation").format(g=g), trace.k_unrotated[g], inputs.key_labels, dim_labels(hs, g * hs),
              "k"),
        Panel(_("K_({g}) rotated").format(g=g), trace.k[g], inputs.key_labels, dim_labels(hs, g * hs), "k"),
    ]



# ---- a kernel whose weights are one map of the logits -----------------------------------------


def kernel_weights_step(inputs: StepInputs, head: int, cell) -> Step:
    """The weights of a kernel that makes them from the scaled, masked logits in one map (``Kernel.weights_of``),
    in the record's words: its title, its formula, its row-sum rule; its "Jump to" name is its short label."""
    trace = inputs.trace
    kernel = KERNELS[trace.kernel]
    q, k = inputs.query_labels, inputs.key_labels
    panels = (
        Panel(_("L_{head} (scaled, masked logits)").format(head=head), trace.logits[head], q, k, _("logit"), cell=cell,
              axis_titles=qk_axes()),
        Panel(f"A_{head}: {_(kernel.formula)}", trace.weights[head], q, k, _("weight"),
              kind="signed" if kernel.signed else "weights", cell=cell, axis_titles=qk_axes()),
    )
    kind = StepKind("kernel_weights", kernel.weights_title, kernel.short_label, kernel.summary)  # the row's words
    return Step("kernel_weights", _(kernel.weights_title), sentences(_(kernel.weights_why), _mask_words(inputs)),
                kernel.weights_tex, _("{shape} -> same shape, entry by entry").format(shape=shape_text(trace.logits[head])),
                panels, own_kind=kind)


# ---- differential ----------------------------------------------------------------------------


def differential_maps_step(inputs: StepInputs, head: int, cell) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    half = trace.q.shape[-1] // 2
    q, k = inputs.query_labels, inputs.key_labels
    panels = (
        Panel(_("L₁ = Q₁K₁ᵀ·s (first halves, head {head})").format(head=head), parts.logits1[head], q, k,
              _("logit 1"), cell=cell, axis_titles=qk_axes()),
        Panel(_("L₂ = Q₂K₂ᵀ·s (second halves, head {head})").format(head=head), parts.logits2[head], q, k,
              _("logit 2"), cell=cell, axis_titles=qk_axes()),
        Panel("A₁ = softmax(L₁)", parts.map1[head], q, k, "A₁", kind="weights", cell=cell, axis_titles=qk_axes()),
        Panel("A₂ = softmax(L₂)", parts.map2[head], q, k, "A₂", kind="weights", cell=cell, axis_titles=qk_axes()),
    )
    why = _("Head {head}'s query and key of {features} features are cut into two halves of d = {half}. Each pair of "
            "halves gives its own logits, scaled by s = 1/√{half} = {scale}, and its own softmax: two maps, each "
            "with rows that sum to 1.").format(head=head, features=2 * half, half=half, scale=f"{trace.scale:.4f}")
    why = sentences(why, _mask_words(inputs))
    formula = (r"[Q_1; Q_2] = Q_h,\ [K_1; K_2] = K_h,\qquad A_1 = \mathrm{softmax}\!\Big(\frac{Q_1K_1^\top}{\sqrt d}\Big),"
               r"\quad A_2 = \mathrm{softmax}\!\Big(\frac{Q_2K_2^\top}{\sqrt d}\Big)")
    shapes = f"Q₁, Q₂ ({len(q)}, {half});  K₁, K₂ ({len(k)}, {half});  A₁, A₂ {shape_text(parts.map1[head])}"
    return Step("diff_maps", _("Two softmax maps per head (differential)"), why, formula, shapes, panels)


def differential_combine_step(inputs: StepInputs, head: int, cell) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    lam, lambda_init = parts.lam, 1.0 - parts.output_gain
    panels = (
        Panel(_("A_{head} = A₁ − λA₂ (signed weights)").format(head=head), trace.weights[head], inputs.query_labels,
              inputs.key_labels, _("weight"), kind="signed", cell=cell, axis_titles=qk_axes()),
    )
    negative = int((trace.weights[head] < 0).sum())
    why = ngettext(
        "λ = {lam} times the second map is subtracted from the first: what both maps attend to cancels, what only "
        "the first sees stands out. **Weights can be negative** ({n} of head {head}'s cells is), so they are drawn "
        "on a diverging scale, and **each row sums to 1 − λ = {row_sum}**, not 1. λ is re-parameterised with four "
        "learned vectors, starting from λ_init = {init} (layer 1).",
        "λ = {lam} times the second map is subtracted from the first: what both maps attend to cancels, what only "
        "the first sees stands out. **Weights can be negative** ({n} of head {head}'s cells are), so they are drawn "
        "on a diverging scale, and **each row sums to 1 − λ = {row_sum}**, not 1. λ is re-parameterised with four "
        "learned vectors, starting from λ_init = {init} (layer 1).", negative,
    ).format(lam=f"{lam:.4f}", n=negative, head=head, row_sum=f"{1 - lam:.4f}", init=f"{lambda_init:.4f}")
    formula = (r"A = A_1 - \lambda A_2,\qquad \lambda = e^{\lambda_{q1}\cdot\lambda_{k1}} - e^{\lambda_{q2}\cdot\lambda_{k2}}"
               rf" + \lambda_{{\mathrm{{init}}}} = {latex_number(lam)},\qquad \sum_j A_{{ij}} = 1 - \lambda")
    shapes = f"{shape_text(parts.map1[head])} − λ × {shape_text(parts.map2[head])}"
    return Step("diff_combine", _("Subtract: A₁ − λA₂ (differential)"), why, formula, shapes, panels)


def differential_norm_step(inputs: StepInputs, head: int, cell=None) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    hv = trace.v.shape[-1]
    panels = (
        Panel(_("head_{head} = A_{head} V (before the norm)").format(head=head), trace.heads[head], inputs.query_labels,
              dim_labels(hv, head * hv), _("head output")),
        Panel(f"RMSNorm(head_{head}) × (1 − λ_init)", parts.normed_heads[head], inputs.query_labels,
              dim_labels(hv, head * hv), _("normalised")),
    )
    why = _("Each head's output row is divided by its root mean square (each head on its own), then multiplied by "
           "1 − λ_init = {gain}. The paper's reason: subtracting one map from another makes each "
           "head's pattern sparser, so the statistics of the heads' outputs differ more from head to head; "
           "normalising every head separately (GroupNorm, here a per-head RMSNorm) keeps training stable, and the "
           "fixed factor 1 − λ_init keeps the gradients on the scale a standard Transformer's have. "
           "These normalised rows are what the heads concatenate.").format(gain=f"{parts.output_gain:.4f}")
    formula = r"\bar o_i = \frac{o_i}{\sqrt{\tfrac{1}{d_v}\sum_d o_{i,d}^2 + \epsilon}}\,(1 - \lambda_{\mathrm{init}})"
    shapes = _("{shape} -> same shape").format(shape=shape_text(trace.heads[head]))
    return Step("diff_norm", _("Normalise each head, times 1 − λ_init (differential)"), why, formula, shapes, panels)


# ---- linear ----------------------------------------------------------------------------------


def linear_phi_step(inputs: StepInputs, head: int, cell=None) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    g = trace.kv_head_of(head)
    hs = trace.q.shape[-1]
    panels = (
        Panel(f"φ(Q_{head})", parts.phi_q[head], inputs.query_labels, dim_labels(hs, head * hs), "φ(q)"),
        Panel(f"φ(K_({g}))", parts.phi_k[g], inputs.key_labels, dim_labels(hs, g * hs), "φ(k)"),
    )
    why = _("Instead of exp(q·k), linear attention compares φ(q) with φ(k), where φ(x) = elu(x) + 1 is x + 1 above 0 "
           "and eˣ below: always positive, so every similarity is positive. There is no scale and no softmax.")
    formula = r"\varphi(x) = \mathrm{elu}(x) + 1 = \begin{cases} x + 1 & x > 0 \\ e^{x} & x \le 0 \end{cases}"
    return Step("linear_phi", _("Feature map φ = elu + 1 (linear)"), why, formula,
                _("φ applied entry by entry: {shape}").format(shape=shape_text(parts.phi_q[head])), panels)


def linear_weights_step(inputs: StepInputs, head: int, cell) -> Step:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    q, k = inputs.query_labels, inputs.key_labels
    panels = (
        Panel(_("φ(Q_{head}) φ(K)ᵀ (masked: 0)").format(head=head), parts.similarity[head], q, k, _("similarity"),
              cell=cell, axis_titles=qk_axes()),
        Panel(_("A_{head} = row / row sum").format(head=head), trace.weights[head], q, k, _("weight"), kind="weights",
              cell=cell, axis_titles=qk_axes()),
    )
    why = sentences(_("Each row of similarities is divided by its sum: weights ≥ 0 that **sum to 1**, like softmax "
                      "rows, but flatter (no exponential to sharpen them)."), _mask_words(inputs))
    formula = r"A_{ij} = \frac{\varphi(q_i)\cdot\varphi(k_j)\,M_{ij}}{\sum_{j'} \varphi(q_i)\cdot\varphi(k_{j'})\,M_{ij'}}"
    return Step("linear_weights", _("Similarities over their row sum (linear)"), why, formula,
                _("{shape}, row by row").format(shape=shape_text(parts.similarity[head])), panels)


def linear_state_step(inputs: StepInputs, head: int, cell=None) -> Step | None:
    trace, parts = inputs.trace, inputs.trace.kernel_parts
    if parts.recurrent_heads is None:  # no causal mask over one sentence: no recurrent form
        return None
    hs, hv = trace.q.shape[-1], trace.v.shape[-1]
    gap = float(np.max(np.abs(parts.recurrent_heads - trace.heads)))
    panels = (
        Panel(_("S_T (head {head}): the state after the last token").format(head=head), parts.state[head],
              dim_labels(hs), dim_labels(hv), _("state"), axis_titles=(_("φ(k) feature"), _("value feature"))),
        Panel(_("head_{head} from the state, token by token").format(head=head), parts.recurrent_heads[head],
              inputs.query_labels, dim_labels(hv, head * hv), _("head output")),
    )
    why = _("With a causal mask the same heads come from a running state: each token adds φ(k_t)v_tᵀ to S "
            "({hs}×{hv} numbers) and φ(k_t) to z ({hs}), then its query reads them. The state has the same size at "
            "every step, however long the sentence: no cache of keys and values. Largest difference from the "
            "parallel form above, all heads: **{gap}**.").format(hs=hs, hv=hv, gap=f"{gap:.1e}")
    formula = (r"S_t = S_{t-1} + \varphi(k_t)\,v_t^\top,\quad z_t = z_{t-1} + \varphi(k_t),\quad "
               r"o_t = \frac{\varphi(q_t)^\top S_t}{\varphi(q_t)^\top z_t}")
    return Step("linear_state", _("The recurrent form: a state of constant size (linear)"), why, formula,
                _("S {state}, z ({hs},) per head, whatever T").format(state=shape_text(parts.state[head]), hs=hs),
                panels)


# The builders of the kernels' own steps, by the slug a kernel's record names (``Kernel.steps``, ``.after_mix``);
# each takes (inputs, head, cell) and returns a Step, or None when the run has no such step.
KERNEL_STEPS: dict[str, Callable[[StepInputs, int, object], Step | None]] = {
    "kernel_weights": kernel_weights_step,
    "diff_maps": differential_maps_step,
    "diff_combine": differential_combine_step,
    "diff_norm": differential_norm_step,
    "linear_phi": linear_phi_step,
    "linear_weights": linear_weights_step,
    "linear_state": linear_state_step,
    **SPARSE_STEPS,  # MoBA's block gate, DSA's indexer, the softmax over the kept keys (kernel_steps_sparse.py)
    "output_gate": output_gate_step,
    "sink_weights": sink_weights_step,
    "qk_norm": qk_norm_step,
    **DELTANET_STEPS,
}
