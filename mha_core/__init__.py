"""MHA Explorer's engine: multi-head attention in pure NumPy, every intermediate kept.

Glossary of shapes, used in every shape comment of this package:

    T    number of tokens (Tq queries, Tk keys and values when they differ)
    C    model width, d_model (C_q, C_k, C_v, C_out when the widths differ)
    nh   number of heads (query heads)
    kv   number of key/value heads (nh: multi-head, 1: multi-query, a divisor between: grouped-query)
    hs   head size of queries and keys, also called d_k (= C / nh in the app)
    hv   head size of values, d_v
    t    tokens held in a decoder's key/value cache
    r    rank of multi-head latent attention's latent (kv_lora_rank): numbers cached per token
    d_rope  decoupled RoPE features per head in multi-head latent attention

Conventions: row vectors, ``y = x @ w + b``; heads are contiguous column blocks of the
fused projection (head i owns columns i*hs:(i+1)*hs), as in torch; query head h reads
key/value head h // (nh/kv); a boolean mask is True where a query may attend to a key.
Positions: one table of schemes (``positions.SCHEMES``): sinusoidal is added to the tokens,
RoPE and ALiBi act inside attention (``positions.apply_positions``, ``pe=`` of
``multi_head_attention``); ``kv_cache`` decodes one token at a time. Kernels: one table
(``kernels.KERNELS``: softmax, differential, linear) that ``multi_head_attention`` dispatches through
(``kernel=``); multi-head latent attention (``mla``, ``mla=``) draws keys and values from a latent;
``variant_decoding`` decodes both one token at a time.
Layers, imported one way: ``steps`` (the primitive steps) <- ``kernels``, ``mla`` <- ``attention``
(``multi_head_attention``); ``decoder_state`` (what a decoder keeps) <- ``decoding`` (the one decoding loop:
project -> keep -> attend per token) <- ``kv_cache``, ``cache_policy``, ``variant_decoding``.
This package never imports streamlit, plotly or pandas: it knows nothing of screens.
"""

from mha_core.attention import (
    AttentionTrace,
    AttentionWeights,
    merge_heads,
    multi_head_attention,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)
from mha_core.config import LIMITS, MHAConfig, RunResult, run
from mha_core.masks import causal_mask, combine_masks, padding_mask, window_mask

__all__ = [
    "LIMITS",
    "AttentionTrace",
    "AttentionWeights",
    "MHAConfig",
    "RunResult",
    "causal_mask",
    "combine_masks",
    "merge_heads",
    "multi_head_attention",
    "padding_mask",
    "run",
    "scaled_dot_product_attention",
    "softmax",
    "split_heads",
    "window_mask",
]
