"""Gated attention (Qiu et al. 2025, "Gated Attention for Large Language Models", arXiv 2505.06708; Qwen3-Next):
each head's output A·V is multiplied, feature by feature, by a gate made from the layer's input before W_O.

    Y'_h = Y_h ⊙ σ(X W_θ,h),   Y_h = softmax(Q_h K_hᵀ s) V_h,   out = concat_h(Y'_h) W_O

The gate is **elementwise**, as Qwen3-Next has it: one number per head, token and value feature
(nh × hv per token), made from the same input X as the queries (Qwen3-Next's ``q_proj`` makes both, and
``Qwen3NextAttention`` multiplies the flattened heads by ``sigmoid(gate)`` before ``o_proj``). The weights A are
the softmax head's: the gate changes what a head hands on, never where it looks. A gate of 1 is the plain head.

Shapes: ``nh`` heads, ``T`` tokens, ``C`` model width, ``hv`` value size per head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mha_core.contributions import output_rows_per_head
from mha_core.kernel_base import Kernel, KernelOutput, _read_only, no_latent, softmax_kernel
from mha_core.marks import N_, Message
from mha_core.steps import project, split_heads

GATE_SEED = (2505, 6708)  # the gate's own stream of the configuration's seed (the arXiv number): weights stay as they were


def sigmoid(z: np.ndarray) -> np.ndarray:
    """σ(z) = 1 / (1 + e^(−z)) entry by entry, without overflow for any finite z; shape and dtype kept."""
    e = np.exp(-np.abs(z))  # z's shape, in (0, 1]
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(z.dtype, copy=False)


@dataclass(frozen=True)
class GateParams:
    """The gate's learned projection: ``w_gate (C, nh*hv)`` = W_θ (head h's gate is column block h), ``b_gate
    (nh*hv,)`` or None. Arrays are read-only."""

    w_gate: np.ndarray
    b_gate: np.ndarray | None = None

    def __post_init__(self) -> None:
        _read_only(self)


def gate_params(d_model: int, n_heads: int, head_size: int, seed: int) -> GateParams:
    """W_θ drawn normal(0, 1/√C) from its own stream of ``seed``: gate logits of order 1 for inputs of order 1."""
    rng = np.random.default_rng([seed, *GATE_SEED])
    return GateParams(rng.normal(0.0, 1.0 / math.sqrt(d_model), size=(d_model, n_heads * head_size)))  # (C, nh*hv)


@dataclass(frozen=True)
class GatedParts:
    """A gated layer's own intermediates; arrays are read-only.

    ``gate_logits (nh,Tq,hv)`` = X W_θ (+ b) per head, ``gate (nh,Tq,hv)`` = σ(gate_logits) in (0, 1),
    ``gated_heads (nh,Tq,hv)`` = heads ⊙ gate: what the heads concatenate.
    """

    gate_logits: np.ndarray
    gate: np.ndarray
    gated_heads: np.ndarray

    def __post_init__(self) -> None:
        _read_only(self)

    @property
    def opening(self) -> np.ndarray:
        """(nh, Tq): how far each head's gate opens for each query token, the mean of its hv gates."""
        return self.gate.mean(axis=-1)  # (nh, Tq)


def output_gate(x: np.ndarray, params: GateParams, n_heads: int) -> tuple[np.ndarray, np.ndarray]:
    """Gate logits and gates per head: x (Tq, C) -> (nh, Tq, hv) twice."""
    w = params.w_gate.astype(x.dtype, copy=False)
    b = None if params.b_gate is None else params.b_gate.astype(x.dtype, copy=False)
    logits = split_heads(project(x, w, b), n_heads)  # (nh, Tq, hv)
    return logits, sigmoid(logits)  # (nh, Tq, hv) x2


def gated_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False, params: GateParams | None = None,
                 *, x: np.ndarray) -> KernelOutput:
    """softmax(q kᵀ s + bias, masked) @ v per head, times σ(x W_θ) feature by feature (what the heads concatenate).

    ``x (Tq, C)`` is the queries' input; ``params`` default: W_θ drawn with seed 0 for x's width.
    The weights are the softmax head's (rows sum to 1, at most 1 with the null key).
    """
    plain = softmax_kernel(q, k, v, mask, scale, bias, null_key)  # weights (nh,Tq,Tk), heads (nh,Tq,hv)
    n_heads, _, hv = plain.heads.shape
    params = gate_params(x.shape[-1], n_heads, hv, 0) if params is None else params
    logits, gate = output_gate(x, params, n_heads)  # (nh, Tq, hv) x2
    gated = plain.heads * gate  # (nh, Tq, hv): Y ⊙ σ(X W_θ)
    return KernelOutput(plain.scores, plain.logits, plain.weights, plain.heads, gated,
                        GatedParts(logits, gate, gated))


def first_token_delivery(weights: np.ndarray, v_per_head: np.ndarray, gate: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per head, over the query rows: the mean weight on key 0, and the mean size of what key 0 hands on,
    ‖w_i0 v_0‖ with the gate off and ‖g_i ⊙ w_i0 v_0‖ with it on.

    (nh,Tq,Tk), (nh,Tk,hv), (nh,Tq,hv) -> three (nh,) arrays.
    """
    share = weights[..., 0]  # (nh, Tq)
    delivered = share[..., None] * v_per_head[:, None, 0]  # (nh, Tq, hv): w_i0 v_0
    off = np.linalg.norm(delivered, axis=-1)  # (nh, Tq)
    on = np.linalg.norm(delivered * gate, axis=-1)  # (nh, Tq)
    return share.mean(axis=-1), off.mean(axis=-1), on.mean(axis=-1)  # (nh,) x3



def gated_output_norm_weights(weights: np.ndarray, v: np.ndarray, w_o: np.ndarray | None,
                              gate: np.ndarray) -> np.ndarray:
    """‖w_ij (g_i ⊙ v_j) W_O(h)‖: the size of key j's exact share of row i of a gated head h's contribution.

    Row i of head h's contribution is Σ_j w_ij (g_i ⊙ v_j) W_O(h), so each term is key j's share (Kobayashi et al.
    2020 with the gate inside f). Computed as |w_ij| sqrt((g_i ⊙ v_j)ᵀ W_O(h) W_O(h)ᵀ (g_i ⊙ v_j)), never forming
    one vector per (i, j). (nh,Tq,Tk), (nh,Tk,hv), (nh*hv,C_out) or None, (nh,Tq,hv) -> (nh,Tq,Tk).
    """
    n_heads, _, hv = v.shape
    rows = output_rows_per_head(w_o, n_heads, hv)  # (nh, hv, C_out)
    gram = rows @ rows.transpose(0, 2, 1)  # (nh, hv, hv): W_O(h) W_O(h)ᵀ
    squared = np.einsum("hia,hja,hab,hib,hjb->hij", gate, v, gram, gate, v, optimize=True)  # (nh, Tq, Tk)
    return np.abs(weights) * np.sqrt(np.maximum(squared, 0.0))  # (nh, Tq, Tk)


GATED = Kernel(
    "gated", N_("gated (Y ⊙ σ(X W_θ))"), N_("gated"),
    N_("A softmax head whose output A·V is multiplied, feature by feature, by a gate σ(X W_θ) made from the token's "
       "own input, before W_O (Qwen3-Next's output gate)."),
    rows_sum_to_one=True, row_sums=N_("each row sums to 1"), signed=False, attend=gated_kernel, reads_input=True,
    refuses=(no_latent(Message(N_("gated attention"))),),
    paper="Qiu et al. 2025 (Qwen3-Next)", formula="Y′ = softmax(QKᵀ/√d_k)·V ⊙ σ(X W_θ)", variant=False,
    drill_down=True, params=lambda c: gate_params(c.d_model, c.n_heads, c.head_size, c.seed),
    steps=("softmax",), after_mix=("output_gate",), output_words=N_("weights × V, then ⊙ its gate σ(X W_θ)"),
    heads_sections=("gate_opening",), tiled=True, after_tiles=lambda parts, head: parts.gate[head],
    after_tiles_words=N_("The gate σ(X W_θ) of this head multiplies the kernel's finished O feature by feature, after "
                         "the kernel, as Qwen3-Next does: the tiles are the softmax head's."),
    weights_label=N_("weights (before the gate)"),
    mix_why=N_("Each query receives the sum of the value rows weighted by its attention weights, as in a softmax "
               "head; the next step gates this row before the heads are concatenated."),
)
