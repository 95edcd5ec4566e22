"""Differential attention and MLA against Hugging Face transformers' own modules, our weights copied in.

- ``DiffLlamaAttention`` (transformers 5.23): 2nh query heads of hs/2 features; its diff head i pairs query
  heads i and i + nh and reads value heads j and j + kv, each of hs/2. Our head h is
  [first half | second half], so our columns are permuted into that order; W_O is the same.
- ``DeepseekV3Attention``: q_proj (no q LoRA), kv_a_proj_with_mqa = [W_DKV | W_KR], kv_b_proj = per head
  [W_UK,h | W_UV,h], o_proj = W_O; ``rope_interleave=False`` (half-split pairs, as ours).

Both modules are run in float64, with RoPE's cos/sin built in float64 from our angles (their rotary
modules compute them in float32). Their ``eager`` attention takes the softmax in float32 whatever the input
(``softmax(..., dtype=torch.float32).to(query.dtype)`` in ``eager_attention_forward``), so a 1e-10 comparison
runs them with ``attn_implementation="sdpa"`` (torch's SDPA, float64 on CPU; always with an explicit additive
mask, since SDPA would otherwise apply ``is_causal``), and the eager path, whose returned weights are the
softmax maps, is compared to 1e-6. Two more reference details are float32 whatever the input: DeepSeek's
``DeepseekV3RMSNorm`` casts to float32, so for the 1e-10 comparison ``kv_a_layernorm`` is swapped for
``torch.nn.RMSNorm`` (same formula, eps 1e-6, gain 1) and the unswapped module is checked to 1e-5 in float32
separately; DiffLlama computes lambda's dot products in float32 (``torch.sum(..., dtype=torch.float32)``),
so the 1e-10 test uses lambda vectors with zero dot products (lambda = lambda_init exactly, for layers 1
and 4) and random lambda vectors are compared to 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config  # noqa: E402
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention  # noqa: E402
from transformers.models.diffllama.configuration_diffllama import DiffLlamaConfig  # noqa: E402
from transformers.models.diffllama.modeling_diffllama import DiffLlamaAttention  # noqa: E402

from mha_core.attention import AttentionWeights, multi_head_attention  # noqa: E402
from mha_core.config import MHAConfig, run  # noqa: E402
from mha_core.kernels import DifferentialParams, lambda_init_for_layer  # noqa: E402
from mha_core.masks import causal_mask  # noqa: E402
from mha_core.positions import rope_angles  # noqa: E402


def t64(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a), dtype=torch.float64)


def cos_sin(positions: int, dims: int, dtype=torch.float64):
    angles = rope_angles(np.arange(positions), dims)  # (T, dims/2), float64
    both = np.concatenate([angles, angles], axis=-1)[None]  # (1, T, dims)
    return torch.tensor(np.cos(both), dtype=dtype), torch.tensor(np.sin(both), dtype=dtype)


def additive_mask(mask, dtype=torch.float64, t=None):
    """0 where a query may attend, the dtype's minimum elsewhere, (1, 1, T, T); no mask: all zeros."""
    if mask is None:
        return torch.zeros(1, 1, t, t, dtype=dtype)
    blocked = torch.full(mask.shape, torch.finfo(dtype).min, dtype=dtype)  # (T, T)
    return torch.where(torch.tensor(mask), torch.zeros((), dtype=dtype), blocked)[None, None]  # (1, 1, T, T)


def halves_order(heads: int, hs: int) -> np.ndarray:
    """Our columns in DiffLlama's head order: every head's first half, then every head's second half."""
    half = hs // 2
    first = [h * hs + f for h in range(heads) for f in range(half)]
    second = [h * hs + half + f for h in range(heads) for f in range(half)]
    return np.array(first + second)


def diffllama_attention(c, nh, kv, hs, w: AttentionWeights, params: DifferentialParams, layer_idx: int, impl: str):
    config = DiffLlamaConfig(hidden_size=c, num_attention_heads=2 * nh, num_key_value_heads=2 * kv, head_dim=hs // 2,
                             attention_bias=False, rms_norm_eps=params.norm_eps, attention_dropout=0.0)
    config._attn_implementation = impl
    module = DiffLlamaAttention(config, layer_idx=layer_idx).double().eval()
    with torch.no_grad():
        module.q_proj.weight.copy_(t64(w.w_q[:, halves_order(nh, hs)].T))
        module.k_proj.weight.copy_(t64(w.w_k[:, halves_order(kv, hs)].T))
        module.v_proj.weight.copy_(t64(w.w_v[:, halves_order(kv, hs)].T))
        module.o_proj.weight.copy_(t64(w.w_o.T))
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            getattr(module, name).copy_(t64(getattr(params, name)))
    return module


def run_diffllama(x, nh, kv, w, params, layer_idx, mask, pe, impl="sdpa"):
    t, c = x.shape
    hs = c // nh
    module = diffllama_attention(c, nh, kv, hs, w, params, layer_idx, impl)
    if pe == "rope":
        position = cos_sin(t, hs // 2)
    else:
        position = (torch.ones(1, t, hs // 2, dtype=torch.float64), torch.zeros(1, t, hs // 2, dtype=torch.float64))
    with torch.no_grad():
        out, maps = module(t64(x)[None], position, additive_mask(mask, t=t))
    return out[0].numpy(), None if maps is None else maps[0].numpy()  # (T, C), (2nh, T, T) from eager


def layer(seed, c, nh, kv):
    rng = np.random.default_rng(seed)
    hs = c // nh
    return rng.normal(size=(6, c)), AttentionWeights(rng.normal(0, 0.4, (c, c)), rng.normal(0, 0.4, (c, kv * hs)),
                                                     rng.normal(0, 0.4, (c, kv * hs)), rng.normal(0, 0.4, (c, c)))


def exact_lambda_params(half: int, layer_number: int) -> DifferentialParams:
    """Non-zero lambda vectors whose dot products are 0: lambda = lambda_init in float32 and float64 alike."""
    a, b = np.zeros(half), np.zeros(half)
    a[0], b[1] = 0.7, -0.4
    return DifferentialParams(a, b, b, a, lambda_init=lambda_init_for_layer(layer_number))


@pytest.mark.parametrize("nh, kv, pe, masked, layer_number", [(2, 2, "none", False, 1), (4, 2, "rope", True, 1),
                                                              (4, 1, "none", True, 4), (2, 1, "rope", False, 4)])
def test_differential_equals_diffllama_float64(nh, kv, pe, masked, layer_number):
    x, w = layer(11, 16, nh, kv)
    params = exact_lambda_params(16 // nh // 2, layer_number)
    mask = causal_mask(6) if masked else None
    ours = multi_head_attention(x, w, nh, kv_heads=kv, mask=mask, pe=pe, kernel="differential", kernel_params=params)
    theirs, _ = run_diffllama(x, nh, kv, w, params, layer_number - 1, mask, pe)
    assert np.max(np.abs(ours.output - theirs)) <= 1e-10
    eager, maps = run_diffllama(x, nh, kv, w, params, layer_number - 1, mask, pe, impl="eager")
    assert np.max(np.abs(ours.output - eager)) <= 1e-6  # eager's softmax is float32
    parts = ours.kernel_parts
    assert np.max(np.abs(parts.map1 - maps[:nh])) <= 1e-6  # the first call's weights: A1 for heads 0..nh-1,
    assert np.max(np.abs(parts.map2 - maps[nh:])) <= 1e-6  # and A2 (query heads nh..2nh-1 of DiffLlama)


def test_differential_with_random_lambda_vectors_equals_diffllama_to_float32_lambda():
    x, w = layer(12, 16, 2, 2)
    rng = np.random.default_rng(5)
    params = DifferentialParams(*rng.normal(0, 0.1, (4, 4)), lambda_init=0.2)
    ours = multi_head_attention(x, w, 2, mask=causal_mask(6), kernel="differential", kernel_params=params)
    theirs, _ = run_diffllama(x, 2, 2, w, params, 0, causal_mask(6), "none")
    assert np.max(np.abs(ours.output - theirs)) <= 1e-6


def test_lambda_on_the_wrong_map_differs_from_diffllama():
    x, w = layer(13, 16, 2, 2)
    params = exact_lambda_params(4, 1)
    ours = multi_head_attention(x, w, 2, kernel="differential", kernel_params=params)
    parts = ours.kernel_parts
    planted = params.lam * parts.map1 - parts.map2  # (nh, T, T)
    heads = planted @ ours.v  # (nh, T, hv)
    normed = heads / np.sqrt(np.mean(heads ** 2, axis=-1, keepdims=True) + params.norm_eps) * parts.output_gain
    theirs, _ = run_diffllama(x, 2, 2, w, params, 0, None, "none")
    planted_output = normed.transpose(1, 0, 2).reshape(6, 16) @ w.w_o
    assert np.max(np.abs(planted_output - theirs)) > 1e-3
    assert np.max(np.abs(ours.output - theirs)) <= 1e-10


# ---- MLA -------------------------------------------------------------------------------------


def deepseek_attention(result, float64_norm: bool, impl: str):
    c, nh = result.config.d_model, result.config.n_heads
    hs = c // nh
    lw = result.mla_weights
    rope, rank = lw.rope_dims, lw.rank
    config = DeepseekV3Config(hidden_size=c, num_attention_heads=nh, num_key_value_heads=nh, q_lora_rank=None,
                              kv_lora_rank=rank, qk_rope_head_dim=rope, qk_nope_head_dim=hs - rope, v_head_dim=hs,
                              rope_interleave=False, attention_bias=False, num_hidden_layers=1)
    config._attn_implementation = impl
    module = DeepseekV3Attention(config, layer_idx=0).double().eval()
    blocks = []
    for h in range(nh):
        blocks += [lw.w_uk[:, h * (hs - rope):(h + 1) * (hs - rope)], lw.w_uv[:, h * hs:(h + 1) * hs]]
    with torch.no_grad():
        module.q_proj.weight.copy_(t64(result.weights.w_q.T))
        module.kv_a_proj_with_mqa.weight.copy_(t64(np.concatenate([lw.w_dkv, lw.w_kr], axis=1).T))
        module.kv_b_proj.weight.copy_(t64(np.concatenate(blocks, axis=1).T))
        module.o_proj.weight.copy_(t64(result.weights.w_o.T))
        module.kv_a_layernorm.weight.copy_(t64(lw.latent_gain))
    if float64_norm:
        module.kv_a_layernorm = torch.nn.RMSNorm(rank, eps=lw.latent_eps, dtype=torch.float64)
    assert abs(module.scaling - result.trace.scale) <= 1e-15  # 1/sqrt(qk_head_dim) = 1/sqrt(hs)
    return module


def run_deepseek(result, dtype=torch.float64, float64_norm=True, impl="sdpa"):
    module = deepseek_attention(result, float64_norm, impl).to(dtype)
    t = result.x_q.shape[0]
    rope = result.mla_weights.rope_dims
    position = cos_sin(t, rope, dtype) if rope else (torch.ones(1, t, 0, dtype=dtype), torch.zeros(1, t, 0, dtype=dtype))
    with torch.no_grad():
        out, weights = module(torch.tensor(result.x_q, dtype=dtype)[None], position,
                              additive_mask(result.mask, dtype, t))
    return out[0].double().numpy(), None if weights is None else weights[0].double().numpy()


@pytest.mark.parametrize("options", [dict(mla_rank=4, mla_rope=2, pe="rope", mask="causal"),
                                     dict(mla_rank=6, mla_rope=4, pe="rope", n_heads=2),
                                     dict(mla_rank=5, mask="causal", pe="sinusoidal", d_model=12, n_heads=3),
                                     dict(mla_rank=3, mla_rope=2, pe="rope", mask="window", seed=3)])
def test_mla_equals_deepseek_v3_attention_float64(options):
    result = run(MHAConfig(**options))
    theirs, _ = run_deepseek(result)
    assert np.max(np.abs(result.trace.output - theirs)) <= 1e-10
    _, weights = run_deepseek(result, impl="eager")
    assert np.max(np.abs(result.trace.weights - weights)) <= 1e-6  # eager's softmax is float32
    assert result.trace.mla.score_gap <= 1e-12  # absorbed = materialised


def test_mla_equals_the_unmodified_deepseek_module_in_float32():
    result = run(MHAConfig(mla_rank=4, mla_rope=2, pe="rope", mask="causal"))
    theirs, _ = run_deepseek(result, torch.float32, float64_norm=False, impl="eager")
    assert np.max(np.abs(result.trace.output - theirs)) <= 1e-5
