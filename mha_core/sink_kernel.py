"""Learned attention sinks (gpt-oss, OpenAI 2025): one logit s_h per head joins every row of logits as an extra
column, the softmax is taken over the row with it, and the column is dropped, so a row sums to less than 1.

    A_ij = exp(L_ij) / (exp(s_h) + Σ_j' exp(L_ij')) = softmax₁(L − s_h)_ij,   sink share_i = 1 − Σ_j A_ij

transformers' ``gpt_oss`` ``eager_attention_forward`` concatenates the sinks to the logits, softmaxes and drops
the last column; dividing through by exp(s_h) shows the same row is the null key's softmax₁ of the logits shifted
by −s_h, which is how it is computed here: s_h = 0 for every head is the null key (``null_key=True``) exactly.
Not to be confused with ``mha_core.sinks`` (how much weight a key draws) or StreamingLLM's cache sinks
(``mha_core.cache_policy``): here the sink is a learned logit with no key and no value.

Shapes: ``nh`` heads, ``Tq`` queries, ``Tk`` keys, ``hv`` value size per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.kernel_base import Kernel, KernelOutput, _read_only, _scaled_logits, no_latent
from mha_core.kernel_records import Refusal
from mha_core.marks import N_, Message
from mha_core.steps import softmax, weighted_sum

SINK_SEED = (2508, 10925)  # the sinks' own stream of the configuration's seed: the layer's weights stay as they were
SINK_STD = 1.0  # the spread of the drawn sink logits: trained sinks are of the order of the logits themselves


@dataclass(frozen=True)
class SinkParams:
    """One learned sink logit per head: ``logits (nh,)``. Read-only."""

    logits: np.ndarray

    def __post_init__(self) -> None:
        _read_only(self)


def sink_params(n_heads: int, seed: int) -> SinkParams:
    """s_h drawn normal(0, 1) from its own stream of ``seed`` (gpt-oss starts them normal(0, std) and trains them)."""
    rng = np.random.default_rng([seed, *SINK_SEED])
    return SinkParams(rng.normal(0.0, SINK_STD, size=n_heads))  # (nh,)


@dataclass(frozen=True)
class SinkParts:
    """A sink layer's own intermediates; arrays are read-only.

    ``sinks (nh,)`` the sink logits s_h; ``sink_share (nh,Tq)`` = 1 − each row's sum: the weight the sink took
    (a row with every key masked gives it all: 1).
    """

    sinks: np.ndarray
    sink_share: np.ndarray

    def __post_init__(self) -> None:
        _read_only(self)


def sink_softmax(logits: np.ndarray, sinks: np.ndarray) -> np.ndarray:
    """exp(L_ij) / (exp(s_h) + Σ_j exp(L_ij)) over the keys: softmax₁ of L − s_h. (nh,Tq,Tk), (nh,) -> (nh,Tq,Tk).

    −inf (masked) stays −inf and gets 0; s_h = 0 leaves L as it is (x − 0 = x), so it is ``softmax(L, null_key=True)``.
    """
    shifted = logits - sinks.astype(logits.dtype, copy=False)[:, None, None]  # (nh, Tq, Tk)
    return softmax(shifted, axis=-1, null_key=True)  # (nh, Tq, Tk), rows sum to < 1


def sink_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False,
                params: SinkParams | None = None) -> KernelOutput:
    """softmax over [L_i, s_h] with the sink's column dropped, @ v (gpt-oss). ``params`` default: every s_h = 0
    (the null key). ``null_key`` is refused by the row: the sink is a learned null key."""
    scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, Tq, Tk) x2
    sinks = np.zeros(q.shape[0]) if params is None else params.logits  # (nh,)
    weights = sink_softmax(logits, sinks)  # (nh, Tq, Tk)
    heads = weighted_sum(weights, v)  # (nh, Tq, hv)
    parts = SinkParts(np.asarray(sinks, dtype=float), 1.0 - weights.sum(axis=-1))  # (nh,), (nh, Tq)
    return KernelOutput(scores, logits, weights, heads, heads, parts)


_SINKS = Message(N_("learned attention sinks"))

SINK = Kernel(
    "sink", N_("learned sinks (gpt-oss)"), N_("sinks"),
    N_("Each head has one learned sink logit s_h: it joins every row of logits, the softmax is taken, and its "
       "column is dropped, so a row gives the sink a share and sums to less than 1."),
    rows_sum_to_one=False, row_sums=N_("each row sums to less than 1: the head's sink takes the rest"), signed=False,
    attend=sink_kernel,
    refuses=(Refusal("null_key", N_("learned sinks generalise the null key (a sink of logit 0 is the null key): turn "
                                    "the null key off"), lambda c: bool(getattr(c, "null_key", False)),
                     {"null_key": False}),
             no_latent(_SINKS)),
    paper="OpenAI 2025 (gpt-oss)", formula="A = softmax([QKᵀ/√d_k | s_h])[:, :−1]",
    params=lambda c: sink_params(c.n_heads, c.seed), steps=("sink_weights",), heads_sections=("sink_share",),
    weights_label=N_("weights (with a sink)"),
    spare=lambda parts: parts.sink_share,
    spare_words=N_("{kernel}: each row sums to less than 1: the head's sink (a logit s_h with no value) takes the "
                   "rest, 1 − Σ = {low} to {high} of a row here (all heads and queries)."),
    mix_why=N_("Each query receives the sum of the value rows weighted by its attention weights; the sink has no "
               "value, so its share adds nothing and the row is shorter than an average would be."),
)
