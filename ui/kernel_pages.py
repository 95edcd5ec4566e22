"""What the pages need to show the attention variants (issue 26) truthfully: pure builders, no streamlit.

- ``grid_kind``: the colour scale of a weights figure: diverging, centred on 0, where the kernel's weights
  can be negative (``Kernel.signed``), the fixed 0..1 scale otherwise;
- ``row_sums_sentence``: what a row of weights sums to, for captions, from the kernel's record;
- the Decoding page's variant stepper: ``decode_variant_run``, ``assembled_variant_weights``, ``memory_table``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_core.attention import AttentionTrace
from mha_core.config import MHAConfig, RunResult, attention_scheme
from mha_core.kernels import KERNELS
from mha_core.mla import cache_per_token
from mha_core.variant_decoding import VariantStep, decode_variant


def is_variant(config: MHAConfig) -> bool:
    """Another kernel than softmax, or multi-head latent attention."""
    return config.kernel != "softmax" or bool(config.mla_rank)


def weights_signed(trace: AttentionTrace) -> bool:
    """The trace's weights can be negative (its kernel says so)."""
    return KERNELS[trace.kernel].signed


def grid_kind(trace: AttentionTrace, view: str) -> str:
    """The ``kind`` of a figure of ``view`` ("weights", "logits", "scores"): "signed" for signed weights."""
    return "signed" if view == "weights" and weights_signed(trace) else view


def row_sums_sentence(trace: AttentionTrace) -> str | None:
    """What the rows sum to under a kernel other than softmax, with the numbers of this run; None for softmax."""
    if trace.kernel == "softmax":
        return None
    kernel = KERNELS[trace.kernel]
    if trace.kernel == "differential":
        lam = trace.kernel_parts.lam
        return (f"Differential attention (A₁ − λA₂): each row sums to 1 − λ = {1 - lam:.3f}, not 1, and weights can "
                "be negative, so the colours are centred on 0 (blue below).")
    return f"{kernel.short_label.capitalize()} attention: {kernel.row_sums} ({kernel.formula}); no softmax."


KERNEL_COLUMNS = ["kernel", "name", "what it does", "rows sum to", "negative weights", "cannot combine with", "from"]


def kernel_rows() -> list[tuple[str, ...]]:
    """One row per kernel of the engine's table (the About page), and a last one for MLA."""
    rows = [(k.name, k.label, k.summary, k.row_sums, "yes" if k.signed else "no",
             "; ".join(r.setting for r in k.refuses) or "–", k.paper) for k in KERNELS.values()]
    rows.append(("mla_rank > 0", "multi-head latent attention (MLA)",
                 "Keys and values are up-projected from one latent of rank r per token; RoPE rides on a few decoupled "
                 "dimensions; a decoder caches r + d_rope numbers per token.", "each row sums to 1", "no",
                 "kernel ≠ softmax; kv_heads; bias; hand-built heads", "DeepSeek-AI 2024 (DeepSeek-V2)"))
    return rows


# ---- the Decoding page ------------------------------------------------------------------------


def decode_variant_run(result: RunResult, upto: int | None = None) -> list[VariantStep]:
    """Decode ``result``'s tokens 0..upto (default: all) one at a time with its variant (``result`` from
    ``ui.decoding.decoder_config``); the last step holds what the decoder keeps."""
    config = result.config
    x = result.x_q if upto is None else result.x_q[: upto + 1]  # (t+1, C)
    return decode_variant(x, result.weights, config.n_heads, kernel=config.kernel,
                          kernel_params=result.kernel_params, mla=result.mla_weights, kv_heads=config.key_value_heads,
                          pe=attention_scheme(config), rope_base=config.rope_base, scale=result.trace.scale,
                          null_key=config.null_key)


def assembled_variant_weights(steps: list[VariantStep], upto: int) -> np.ndarray:
    """The rows of steps 0..upto stacked into (nh, T, T); the future is 0, rows not decoded yet NaN (blank)."""
    n_heads, t = steps[0].weights.shape[0], len(steps)
    rows = np.full((n_heads, t, t), np.nan)  # (nh, T, T)
    for step in steps[: upto + 1]:
        rows[:, step.position, : step.position + 1] = step.weights  # (nh, t+1)
        rows[:, step.position, step.position + 1:] = 0.0
    return rows


def held_words(config: MHAConfig) -> str:
    """What the variant's decoder keeps, in words."""
    if config.mla_rank:
        return (f"the latent c (r = {config.mla_rank}) and the shared RoPE key k_R ({config.mla_rope}) of every token: "
                f"{config.mla_rank + config.mla_rope} numbers per token for all heads together")
    hs, kv = config.head_size, config.key_value_heads
    if config.kernel == "linear":
        return (f"a state S ({hs}×{hs}) and its sum z ({hs}) per key/value head: {kv * hs * (hs + 1)} numbers, "
                "the same at every step, and no keys or values at all")
    return f"the keys and values of every token, as softmax heads do: {2 * kv * hs} numbers per token"


def variant_intro(config: MHAConfig) -> str:
    """The Decoding page's opening sentence for a variant: what its decoder keeps instead of (or as) a KV cache."""
    if config.mla_rank:
        kept = ("a **latent cache**: one latent vector c and the shared RoPE key k_R per token, from which every "
                "head's scores are taken the absorbed way (K and V are never built)")
    elif config.kernel == "linear":
        kept = ("a **state of constant size**: S = Σ φ(k_t) v_tᵀ and z = Σ φ(k_t), updated once per token; no "
                "keys or values are kept")
    else:
        kept = "a **KV cache**, as softmax heads do; each step's row is A₁ − λA₂ over the whole cache"
    return (f"A decoder generates one token per step. This layer keeps {kept}. The rows it assembles are exactly "
            "the rows of full causal attention, shown beside them.")


def memory_table(steps: list[VariantStep], labels: list[str], config: MHAConfig) -> pd.DataFrame:
    """One row per step: the token, the numbers the variant keeps, and what MHA's (and GQA's) KV cache would."""
    per_token = cache_per_token(config.n_heads, config.head_size, config.key_value_heads)
    rows = []
    for step in steps:
        t = step.position + 1
        row = {"token": labels[step.position], "kept (this layer)": step.numbers}
        row.update({f"{name} KV cache": size * t for name, size in per_token.items()})
        rows.append(row)
    return pd.DataFrame(rows, index=pd.Index([step.position for step in steps], name="step t"))


def max_variant_difference(steps: list[VariantStep], upto: int, weights: np.ndarray) -> float:
    """max |Δ| between the decoded rows 0..upto and the same rows of full causal attention (nh, T, T)."""
    rows = assembled_variant_weights(steps, upto)[:, : upto + 1]  # (nh, upto+1, T)
    return float(np.max(np.abs(rows - weights[:, : upto + 1])))
