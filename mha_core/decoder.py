"""A layer run as a decoder: its tokens decoded one at a time through the KV cache, and what each step costs.

A decoder is causal self-attention over the tokens generated so far, so ``decoder_config`` turns any
layer into that and ``decode_run`` decodes the sentence's own tokens with every option that changes a
row; ``assembled_weights`` stacks the decoded rows so they can be set beside full causal attention.
The Decoding page and the KV-cache lesson read these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mha_core.config import MHAConfig, RunResult, attention_scheme
from mha_core.kv_cache import DecodeStep, decode


def decoder_config(config: MHAConfig) -> MHAConfig:
    """The layer as a decoder runs it: self-attention over the sentence, causal mask, the rest unchanged."""
    return replace(config, kv_tokens=None, mask="causal", valid_len=None, custom_mask=None,
                   custom_embedding=_queries_only(config))


def _queries_only(config: MHAConfig):
    """An uploaded embedding's query rows (a cross-attention upload also holds the keys' rows)."""
    if config.custom_embedding is None:
        return None
    return config.custom_embedding[: len(config.tokens)]


def decode_run(result: RunResult) -> list[DecodeStep]:
    """Decode ``result``'s tokens one at a time through the engine's KV cache, with every option that changes a row.

    ``result`` must come from ``decoder_config``: the rows to compare with are its causal weights. The
    options are the layer's own: its weights (K/V heads cut already), key/value heads, positions and
    RoPE base, null key, its kernel (read over the cache by the kernel's own attention), and the one scale
    full attention used. With scale rule ``sqrt_t`` that is
    1/sqrt(T) of the whole sentence at every step (not 1/sqrt(t+1) of the keys cached so far), so that
    every decoded row is the row of full causal attention.
    """
    config, trace = result.config, result.trace
    return decode(result.x_q, result.weights, config.n_heads, kv_heads=config.key_value_heads,
                  pe=attention_scheme(config), rope_base=config.rope_base, scale=trace.scale,
                  null_key=config.null_key, kernel=config.kernel, kernel_params=result.kernel_params)


def assembled_weights(steps: list[DecodeStep], upto: int) -> np.ndarray:
    """The weight rows of steps 0..upto stacked into (nh, T, T); rows not decoded yet are NaN (blank)."""
    n_heads, t = steps[0].weights.shape[0], len(steps)
    rows = np.full((n_heads, t, t), np.nan)  # (nh, T, T)
    for step in steps[: upto + 1]:
        rows[:, step.position, : step.position + 1] = step.weights[:, 0]  # (nh, t+1)
        rows[:, step.position, step.position + 1 :] = 0.0  # the future: weight 0, as the causal mask gives
    return rows


def max_difference(steps: list[DecodeStep], upto: int, causal_weights: np.ndarray) -> float:
    """max |Δ| between the decoded rows 0..upto and the same rows of full causal attention (nh, T, T)."""
    rows = assembled_weights(steps, upto)[:, : upto + 1]  # (nh, upto+1, T)
    return float(np.max(np.abs(rows - causal_weights[:, : upto + 1])))


@dataclass(frozen=True)
class StepCost:
    """What step t computes fresh and what it reads from the cache, in numbers."""

    fresh: int  # q for nh heads + k and v for kv heads: nh*hs + kv*(hs+hv)
    reused: int  # the cached keys and values of the t earlier tokens: kv*t*(hs+hv)
    cache_numbers: int  # after the step: kv*(t+1)*(hs+hv)
    cache_bytes: int  # ... times the bytes per number


def step_cost(step: DecodeStep) -> StepCost:
    """Fresh, reused and cached numbers of one decoding step, read from the step's arrays."""
    fresh = step.q.size + step.k_new.size + step.v_new.size
    return StepCost(fresh, step.cache.numbers - step.k_new.size - step.v_new.size, step.cache.numbers,
                    step.cache.nbytes)
