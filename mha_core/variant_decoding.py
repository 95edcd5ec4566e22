"""Decoding one token at a time with the attention variants: what each keeps between steps.

- **differential**: the same key/value cache as softmax heads (kv (hs + hv) numbers per token); each step's
  query row is A1 - lambda A2 over the cache.
- **linear**: no keys are kept at all. A state S (kv, hs, hv) and its sum z (kv, hs) absorb each token
  (S += phi(k_t) v_t^T, z += phi(k_t)) and the new query reads them: kv hs (hv + 1) numbers, whatever t.
- **MLA**: the cache holds the latent c_t (r numbers) and the shared RoPE key k_R,t (d_rope), r + d_rope
  per token for all heads together; the scores are the absorbed ones, (q_C W_UK,h^T) . c + q_R . k_R,
  and the heads (A c) W_UV,h: K and V are never built.

Each step's row equals the row of full causal attention (``multi_head_attention`` with a causal mask). Every
layer decodes through the engine's one loop (``mha_core.decoding``); what it keeps is its record's: the kernel's
``decoder`` (linear: ``kernels.LINEAR_STATE``), MLA's ``mla.LATENT_CACHE``, or the KV cache read by the kernel's
own attention (differential, softmax, or any new kernel row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.config import RunResult, attention_scheme
from mha_core.decoding import DecodedToken, cast_for_decoding, decode_tokens, decoder_layer, decoder_of
from mha_core.mla import MLAWeights
from mha_core.positions import ROPE_BASE
from mha_core.steps import AttentionWeights


@dataclass(frozen=True)
class VariantStep:
    """One decoding step of a variant; arrays are read-only.

    ``position`` of the new token; ``weights (nh, t+1)``: its query's row over tokens 0..t (for linear
    attention the row the state implies, computed for display from keys the decoder does not keep);
    ``heads (nh, hv)``, ``output (C_out,)``; ``numbers``: how many numbers the decoder keeps after the step;
    ``held``: those arrays by name, on the last step only (a linear state per step would cost T times its
    size: 134 MB at d_model 512 with one head and 64 tokens).
    """

    position: int
    weights: np.ndarray
    heads: np.ndarray
    output: np.ndarray
    numbers: int
    held: tuple[tuple[str, np.ndarray], ...] = ()

    def __post_init__(self) -> None:
        for value in (self.weights, self.heads, self.output, *(a for _, a in self.held)):
            value.setflags(write=False)


def decode_variant(x: np.ndarray, weights: AttentionWeights, n_heads: int, *, kernel: str = "softmax",
                   kernel_params=None, mla: MLAWeights | None = None, kv_heads: int | None = None, pe: str = "none",
                   rope_base: float = ROPE_BASE, scale: float | None = None,
                   null_key: bool = False) -> list[VariantStep]:
    """Feed the tokens of ``x`` (T, C) one at a time through the engine's decoding loop, keeping what the layer
    keeps (``mha_core.decoding.decoder_of``: MLA's latent cache, the kernel's own record, or a KV cache).

    The options are ``multi_head_attention``'s.
    """
    x, weights, mla = cast_for_decoding(x, weights, mla)
    layer = decoder_layer(weights, n_heads, kernel=kernel, kernel_params=kernel_params, mla=mla, kv_heads=kv_heads,
                          pe=pe, rope_base=rope_base, scale=scale, null_key=null_key)
    decoder = decoder_of(layer)
    last = x.shape[0] - 1
    return [_variant_step(step, decoder.held(step.kept), step.position == last)
            for step in decode_tokens(x, layer, decoder)]


def _variant_step(step: DecodedToken, held, last: bool) -> VariantStep:
    """One step of the loop as the variant stepper reads it; only the last step holds its arrays."""
    attended = step.attended
    return VariantStep(step.position, attended.weights[:, 0], attended.heads[:, 0], step.output[0],
                       sum(a.size for _, a in held), tuple(held) if last else ())


def decode_variant_run(result: RunResult, upto: int | None = None) -> list[VariantStep]:
    """Decode ``result``'s tokens 0..upto (default: all) one at a time with its variant (``result`` from
    ``mha_core.decoder.decoder_config``); the last step holds what the decoder keeps."""
    config = result.config
    x = result.x_q if upto is None else result.x_q[: upto + 1]  # (t+1, C)
    return decode_variant(x, result.weights, config.n_heads, kernel=config.kernel,
                          kernel_params=result.kernel_params, mla=result.mla_weights, kv_heads=config.key_value_heads,
                          pe=attention_scheme(config), rope_base=config.rope_base, scale=result.trace.scale,
                          null_key=config.null_key)
