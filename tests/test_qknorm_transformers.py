"""QK-norm against transformers 5.23's ``Qwen3Attention`` (``models/qwen3``), our weights and gains copied in.

Qwen3 normalises each head on its own: ``q_norm``/``k_norm`` are RMSNorms of ``head_dim`` features (one gain vector
shared by the heads), applied to ``q_proj(x).view(..., -1, head_dim)`` before ``apply_rotary_pos_emb``. That is what
``kernel=qknorm`` does, so Qwen3 is the reference. (OLMo 2 normalises the whole projection, nh·hs features at
once, before splitting the heads: a different number whenever the heads' root mean squares differ; not matched.)

The module runs in float32 with its own rotary embedding (``Qwen3RotaryEmbedding``, base 10000, half-split pairs
as ours) and its eager attention; ours runs in float32 too. Outputs and weights agree within 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.models.qwen3.configuration_qwen3 import Qwen3Config  # noqa: E402
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3RotaryEmbedding  # noqa: E402

from mha_core.attention import AttentionWeights, multi_head_attention  # noqa: E402
from mha_core.masks import causal_mask  # noqa: E402
from mha_core.qk_norm import QKNormParams, qk_norm_params  # noqa: E402

TOLERANCE = 1e-5  # float32 on both sides


def t32(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a), dtype=torch.float32)


def qwen3_attention(c: int, nh: int, kv: int, hs: int, w: AttentionWeights, params: QKNormParams):
    config = Qwen3Config(hidden_size=c, num_attention_heads=nh, num_key_value_heads=kv, head_dim=hs,
                         rms_norm_eps=params.eps, attention_bias=False, attention_dropout=0.0,
                         max_position_embeddings=64, rope_theta=10000.0)
    config._attn_implementation = "eager"
    module = Qwen3Attention(config, layer_idx=0).float().eval()
    with torch.no_grad():
        module.q_proj.weight.copy_(t32(w.w_q.T))
        module.k_proj.weight.copy_(t32(w.w_k.T))
        module.v_proj.weight.copy_(t32(w.w_v.T))
        module.o_proj.weight.copy_(t32(w.w_o.T))
        module.q_norm.weight.copy_(t32(params.gain_q))
        module.k_norm.weight.copy_(t32(params.gain_k))
    return module, Qwen3RotaryEmbedding(config)


def run_qwen3(x: np.ndarray, nh: int, kv: int, w: AttentionWeights, params: QKNormParams, masked: bool):
    t, c = x.shape
    module, rotary = qwen3_attention(c, nh, kv, c // nh, w, params)
    hidden = t32(x)[None]  # (1, T, C)
    position = rotary(hidden, torch.arange(t)[None])  # cos, sin (1, T, hs)
    mask = torch.zeros(1, 1, t, t)
    if masked:
        mask = torch.where(torch.tensor(causal_mask(t)), 0.0, torch.finfo(torch.float32).min)[None, None]
    with torch.no_grad():
        out, weights = module(hidden, position, mask)
    return out[0].numpy(), weights[0].numpy()  # (T, C), (nh, T, T)


def layer(seed: int, c: int, nh: int, kv: int, spread: float = 0.4):
    rng = np.random.default_rng(seed)
    hs = c // nh
    x = rng.normal(size=(7, c)).astype(np.float32)
    w = AttentionWeights(*(rng.normal(0, spread, shape).astype(np.float32)
                           for shape in ((c, c), (c, kv * hs), (c, kv * hs), (c, c))))
    return x, w


@pytest.mark.parametrize("c, nh, kv, masked, seed", [(16, 4, 2, True, 1), (16, 2, 2, False, 2), (32, 4, 1, True, 3),
                                                     (24, 3, 3, True, 4)])
def test_qk_norm_equals_qwen3_attention_float32(c, nh, kv, masked, seed):
    x, w = layer(seed, c, nh, kv)
    params = qk_norm_params(c // nh, seed)  # the app's gains: near 1, different within every rotated pair
    ours = multi_head_attention(x, w, nh, kv_heads=kv, mask=causal_mask(7) if masked else None, pe="rope",
                                kernel="qknorm", kernel_params=params)
    theirs, weights = run_qwen3(x, nh, kv, w, params, masked)
    assert ours.output.dtype == np.float32
    assert np.max(np.abs(ours.output - theirs)) <= TOLERANCE
    assert np.max(np.abs(ours.weights - weights)) <= TOLERANCE


def test_large_weights_still_agree_and_the_plain_head_would_not():
    x, w = layer(5, 16, 4, 2, spread=4.0)  # ten times the spread: plain logits grow a hundredfold
    params = qk_norm_params(4, 5)
    ours = multi_head_attention(x, w, 4, kv_heads=2, mask=causal_mask(7), pe="rope", kernel="qknorm",
                                kernel_params=params)
    theirs, _weights = run_qwen3(x, 4, 2, w, params, True)
    assert np.max(np.abs(ours.output - theirs)) <= TOLERANCE * np.max(np.abs(theirs))
    plain = multi_head_attention(x, w, 4, kv_heads=2, mask=causal_mask(7), pe="rope")
    assert np.max(np.abs(plain.output - theirs)) > 1.0
