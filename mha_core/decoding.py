"""The one decoding loop: per token, project -> keep -> attend -> output, whatever the layer keeps.

    project  the new token's q (nh,1,hs), and its k (kv,1,hs), v (kv,1,hv) unless they come from a latent
    keep     the decoder's record places the token (its positions) and stores what it leaves behind
    attend   the new query's row over what is kept, by the decoder's record
    output   merge the heads, W_O

What is kept is one ``mha_core.decoder_state.Decoder`` record: MLA's latent cache when the layer has a latent,
else the kernel's own (``Kernel.decoder``, e.g. linear attention's state), else the KV cache read by the kernel's
own ``attend`` (softmax, differential, or any new kernel row). A cache policy passes its window record instead.
``kv_cache``, ``cache_policy``, ``variant_decoding`` and SmolLM2 all decode through ``decode_token``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from mha_core.decoder_state import KV_CACHE, Attended, Decoder, DecoderLayer, NewToken, Reading
from mha_core.kernel_base import before_positions
from mha_core.kernels import attention_kernel
from mha_core.mla import LATENT_CACHE
from mha_core.positions import ROPE_BASE
from mha_core.steps import (
    AttentionWeights,
    compute_dtype,
    default_scale,
    merge_heads,
    output_projection,
    project,
    split_heads,
)


def decoder_layer(weights: AttentionWeights, n_heads: int, *, kernel: str = "softmax", kernel_params=None,
                  mla=None, kv_heads: int | None = None, pe: str = "none", rope_base: float = ROPE_BASE,
                  scale: float | None = None, null_key: bool = False) -> DecoderLayer:
    """The layer's options resolved once: the kernel's record and the scale (default 1/sqrt of the sub-head's size)."""
    chosen = attention_kernel(kernel)
    if scale is None:
        scale = default_scale(weights.w_q.shape[1] // n_heads // chosen.sub_heads)
    return DecoderLayer(weights, n_heads, n_heads if kv_heads is None else kv_heads, float(scale), chosen, pe,
                        rope_base, null_key, kernel_params, mla)


def decoder_for(kernel: str, latent: bool) -> Decoder:
    """What a layer of kernel ``kernel`` keeps per token: the latent cache with MLA (``latent``), the kernel's own
    record, or the KV cache read by the kernel's own attention."""
    if latent:
        return LATENT_CACHE
    chosen = attention_kernel(kernel)
    return KV_CACHE if chosen.decoder is None else chosen.decoder


def decoder_of(layer: DecoderLayer) -> Decoder:
    """``decoder_for`` this layer."""
    return decoder_for(layer.kernel.name, layer.mla is not None)


def cast_for_decoding(x: np.ndarray, weights: AttentionWeights, mla=None):
    """x, the weights (and MLA's) in the engine's compute dtype: float32 stays float32, the rest float64."""
    dtype = compute_dtype(x, *weights.arrays())
    return np.asarray(x, dtype=dtype), weights.astype(dtype), None if mla is None else mla.astype(dtype)


def project_token(layer: DecoderLayer, x_t: np.ndarray, position: int) -> NewToken:
    """The new token's projections, split into heads: x_t (1, C) -> q (nh,1,hs), k (kv,1,hs), v (kv,1,hv)."""
    w = layer.weights
    q = split_heads(project(x_t, w.w_q, w.b_q), layer.n_heads)  # (nh, 1, hs)
    if w.w_k is None:  # keys and values come from a latent (MLA)
        return NewToken(position, x_t, q, None, None)
    k = split_heads(project(x_t, w.w_k, w.b_k), layer.kv_heads)  # (kv, 1, hs)
    v = split_heads(project(x_t, w.w_v, w.b_v), layer.kv_heads)  # (kv, 1, hv)
    q, k = before_positions(layer.kernel, q, k, layer.kernel_params)  # QK-norm acts here, before positions
    return NewToken(position, x_t, q, k, v)


def project_prompt(layer: DecoderLayer, x: np.ndarray) -> list[NewToken]:
    """Every token of a prompt x (T, C) projected at once (one matrix product per projection, as a prefill does),
    then taken one at a time: token t's q (nh,1,hs), k (kv,1,hs), v (kv,1,hv)."""
    w = layer.weights
    q = split_heads(project(x, w.w_q, w.b_q), layer.n_heads)  # (nh, T, hs)
    k = split_heads(project(x, w.w_k, w.b_k), layer.kv_heads)  # (kv, T, hs)
    v = split_heads(project(x, w.w_v, w.b_v), layer.kv_heads)  # (kv, T, hv)
    q, k = before_positions(layer.kernel, q, k, layer.kernel_params)  # QK-norm acts here, before positions
    return [NewToken(t, x[t : t + 1], q[:, t : t + 1], k[:, t : t + 1], v[:, t : t + 1]) for t in range(x.shape[0])]


@dataclass(frozen=True)
class DecodedToken:
    """One step of the loop: the ``token`` projected, its ``reading`` (q placed), the ``attended`` row and heads,
    ``output (1, C_out)``, and ``kept``: the decoder's state after the step."""

    token: NewToken
    reading: Reading
    attended: Attended
    output: np.ndarray
    kept: object

    @property
    def position(self) -> int:
        return self.token.position


def decode_token(layer: DecoderLayer, decoder: Decoder, kept, x_t: np.ndarray, position: int,
                 token: NewToken | None = None) -> DecodedToken:
    """project -> keep -> attend -> output for one token x_t (1, C) standing at ``position`` (``token``: its
    projections when they were made already, by ``project_prompt``)."""
    token = project_token(layer, x_t, position) if token is None else token
    kept, reading = decoder.keep(layer, kept, token)  # the token placed and stored: it attends to itself
    reading = replace(reading, x=token.x)  # (1, C): for a kernel that reads the layer's input
    attended = decoder.attend(layer, kept, reading)  # (nh, 1, n) row, (nh, 1, hv) heads
    output = output_projection(merge_heads(attended.heads), layer.weights.w_o, layer.weights.b_o)  # (1, C_out)
    return DecodedToken(token, reading, attended, output, kept)


def decode_tokens(x: np.ndarray, layer: DecoderLayer, decoder: Decoder | None = None, *,
                  prompt: bool = False) -> Iterator[DecodedToken]:
    """The tokens of x (T, C) one at a time from an empty state, step after step (a generator: a caller keeps
    only what it needs of each step's state). ``prompt``: project them all at once first (``project_prompt``),
    as a prefill does; otherwise each token is projected in its own step, as a generated one is."""
    decoder = decoder_of(layer) if decoder is None else decoder
    projected = project_prompt(layer, x) if prompt else [None] * x.shape[0]
    kept = decoder.start(layer, x.dtype)
    for t in range(x.shape[0]):
        step = decode_token(layer, decoder, kept, x[t : t + 1], t, projected[t])
        kept = step.kept
        yield step
