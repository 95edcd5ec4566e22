"""Gated attention and learned sinks against code nobody here wrote (transformers 5.23, torch 2.13 on the CPU).

- Gated attention against ``Qwen3NextAttention`` (models/qwen3_next): our W_Q and W_θ interleaved head by head into
  its ``q_proj`` (it makes [q_h | gate_h] per head), W_K, W_V, W_O copied in, its q/k RMSNorm turned off (the
  engine has none), RoPE through its own ``Qwen3NextRotaryEmbedding`` with the full head turned
  (``partial_rotary_factor`` 1) at positions 0..T-1, a causal mask; float32, as its rotary computes its angles.
- Learned sinks against gpt-oss's ``eager_attention_forward`` (concatenate, softmax, drop) on the engine's own
  q, k, v, with the ALiBi bias passed inside its additive mask where a test uses one.
- NumPy identities in float64: a gate of 1 is the plain head, s_h = 0 is the null key, both exactly.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mha_core.attention import multi_head_attention
from mha_core.config import MHAConfig, attention_scheme, run
from mha_core.gated import GateParams, gate_params
from mha_core.kernels import kernel_refusal
from mha_core.sink_kernel import SinkParams

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.models.gpt_oss import modeling_gpt_oss  # noqa: E402
from transformers.models.qwen3_next import modeling_qwen3_next as qwen  # noqa: E402
from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig  # noqa: E402

FLOAT32 = 1e-5  # the layer's output and heads, float32 against float32
WEIGHTS32 = 1e-6  # attention weights in float32


def engine_layer(config: MHAConfig, dtype=np.float64, **options):
    """The run's layer on its own input, in ``dtype``: (result, trace)."""
    result = run(config)
    mask = result.mask
    trace = multi_head_attention(result.x_q.astype(dtype), result.weights.astype(dtype), config.n_heads,
                                 mask=mask, kv_heads=config.key_value_heads, pe=attention_scheme(config),
                                 rope_base=config.rope_base, kernel=config.kernel,
                                 kernel_params=options.pop("kernel_params", result.kernel_params), **options)
    return result, trace


def interleaved_q_proj(w_q: np.ndarray, w_gate: np.ndarray, n_heads: int) -> np.ndarray:
    """Qwen3-Next's q_proj weight (nh*2*hs, C): head h's rows are [W_Q,h ; W_θ,h] (it splits each head's 2hs in two)."""
    c = w_q.shape[0]
    q = w_q.T.reshape(n_heads, -1, c)  # (nh, hs, C)
    g = w_gate.T.reshape(n_heads, -1, c)  # (nh, hs, C)
    return np.concatenate([q, g], axis=1).reshape(-1, c)  # (nh*2*hs, C)


def causal_additive(t: int, dtype) -> torch.Tensor:
    blocked = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    return torch.zeros(1, 1, t, t, dtype=dtype).masked_fill(blocked, torch.finfo(dtype).min)  # (1, 1, T, T)


def qwen3_next_forward(result, w_gate: np.ndarray, pe: str):
    """Qwen3NextAttention's output (T, C) and weights (nh, T, T) with our weights, in float32."""
    c, config = result.config.d_model, result.config
    hf = Qwen3NextConfig(hidden_size=c, num_attention_heads=config.n_heads,
                         num_key_value_heads=config.key_value_heads, head_dim=config.head_size, attention_bias=False,
                         rope_parameters={"rope_type": "default", "rope_theta": config.rope_base,
                                          "partial_rotary_factor": 1.0}, num_hidden_layers=4)
    hf._attn_implementation = "eager"
    layer = qwen.Qwen3NextAttention(hf, layer_idx=3).eval()
    layer.q_norm, layer.k_norm = torch.nn.Identity(), torch.nn.Identity()  # the engine has no QK-norm
    w = result.weights
    with torch.no_grad():
        layer.q_proj.weight.copy_(torch.from_numpy(interleaved_q_proj(w.w_q, w_gate, config.n_heads)))
        layer.k_proj.weight.copy_(torch.from_numpy(w.w_k.T.copy()))
        layer.v_proj.weight.copy_(torch.from_numpy(w.w_v.T.copy()))
        layer.o_proj.weight.copy_(torch.from_numpy(w.w_o.T.copy()))
    x = torch.from_numpy(result.x_q.astype(np.float32))[None]  # (1, T, C)
    t = x.shape[1]
    positions = torch.arange(t)[None]  # (1, T)
    if pe == "rope":
        cos, sin = qwen.Qwen3NextRotaryEmbedding(hf)(x, positions)
    else:  # no positions: the identity turn
        cos, sin = torch.ones(1, t, config.head_size), torch.zeros(1, t, config.head_size)
    with torch.no_grad():
        out, weights = layer(x, (cos, sin), causal_additive(t, torch.float32))
    return out[0].numpy(), weights[0].numpy()


def replace_float32(result):
    return replace(result, weights=result.weights.astype(np.float32))


def merge(heads: np.ndarray) -> np.ndarray:
    return heads.transpose(1, 0, 2).reshape(heads.shape[1], -1)  # (T, nh*hv)


GATED_LINKS = [
    MHAConfig(tokens=("the", "cat", "sat", "on", "a", "mat"), d_model=16, n_heads=4, seed=3, mask="causal",
              kernel="gated", pe="rope"),
    MHAConfig(tokens=("a", "b", "c", "d", "e"), d_model=24, n_heads=4, kv_heads=2, seed=7, mask="causal",
              kernel="gated", pe="rope"),
    MHAConfig(tokens=("x", "y", "z", "w"), d_model=8, n_heads=2, seed=1, mask="causal", kernel="gated"),
]


@pytest.mark.parametrize("config", GATED_LINKS)
def test_gated_attention_is_qwen3_next_attention_with_its_output_gate(config):
    result, trace = engine_layer(config, np.float32)
    w_gate = result.kernel_params.w_gate.astype(np.float32)
    output, weights = qwen3_next_forward(replace_float32(result), w_gate, config.pe)
    np.testing.assert_allclose(trace.weights, weights, rtol=0, atol=WEIGHTS32)
    np.testing.assert_allclose(trace.output, output, rtol=0, atol=FLOAT32)
    # The gate matters at this tolerance: the same layer without it is far from Qwen3-Next's output.
    assert np.max(np.abs(merge(trace.heads) @ result.weights.w_o.astype(np.float32) - output)) > 100 * FLOAT32


def test_the_gate_is_elementwise_per_head_as_qwen3_next_splits_its_q_proj():
    """Head h's gate is column block h of X W_θ, feature by feature: a headwise gate (one number per head) or
    the features read across heads would not be Qwen3-Next's."""
    config = GATED_LINKS[0]
    result, trace = engine_layer(config)
    x, w = result.x_q, result.kernel_params.w_gate
    nh, hv = config.n_heads, config.head_size
    by_hand = 1.0 / (1.0 + np.exp(-(x @ w)))  # (T, nh*hv)
    np.testing.assert_allclose(trace.kernel_parts.gate, by_hand.reshape(-1, nh, hv).transpose(1, 0, 2),
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose(merge(trace.kernel_parts.gated_heads), merge(trace.heads) * by_hand, rtol=0,
                               atol=1e-15)
    np.testing.assert_allclose(trace.concat, merge(trace.heads) * by_hand, rtol=0, atol=1e-15)


def test_a_gate_of_one_is_the_plain_head_exactly():
    config = GATED_LINKS[1]
    result = run(config)
    c, width = result.kernel_params.w_gate.shape
    opened = GateParams(np.zeros((c, width)), np.full(width, 40.0))  # σ(40) == 1.0 in float64
    _, gated = engine_layer(config, kernel_params=opened)
    _, plain = engine_layer(replace(config, kernel="softmax"), kernel_params=None)
    assert np.all(gated.kernel_parts.gate == 1.0)
    assert np.array_equal(gated.output, plain.output) and np.array_equal(gated.weights, plain.weights)


def test_the_gate_params_come_from_the_seed_and_leave_the_layer_as_it_was():
    a, b = gate_params(16, 4, 4, 0), gate_params(16, 4, 4, 1)
    assert a.w_gate.shape == (16, 16) and not np.array_equal(a.w_gate, b.w_gate)
    assert np.array_equal(a.w_gate, gate_params(16, 4, 4, 0).w_gate)
    gated, plain = run(GATED_LINKS[0]), run(replace(GATED_LINKS[0], kernel="softmax"))
    assert np.array_equal(gated.weights.w_q, plain.weights.w_q)  # the gate has its own stream of the seed


# ---- learned sinks ---------------------------------------------------------------------------------


class SinkModule(torch.nn.Module):
    """What gpt-oss's eager attention reads of its module: the sinks and the K/V group size."""

    def __init__(self, sinks: np.ndarray, groups: int, dtype):
        super().__init__()
        self.sinks = torch.nn.Parameter(torch.tensor(sinks, dtype=dtype))
        self.num_key_value_groups = groups


SINK_LINKS = [
    MHAConfig(tokens=("the", "cat", "sat", "on", "a", "mat"), d_model=16, n_heads=4, seed=2, mask="causal",
              kernel="sink"),
    MHAConfig(tokens=("a", "b", "c", "d", "e"), d_model=16, n_heads=4, kv_heads=2, seed=5, mask="causal",
              kernel="sink", pe="rope"),
    MHAConfig(tokens=("a", "b", "c", "d", "e", "f"), d_model=16, n_heads=4, seed=4, mask="causal", kernel="sink",
              pe="alibi"),
    MHAConfig(tokens=("p", "q", "r"), d_model=8, n_heads=2, seed=6, kernel="sink"),  # no mask
]


def gpt_oss_eager(trace, sinks: np.ndarray, mask: np.ndarray | None, dtype):
    """gpt-oss's eager attention on the engine's q, k, v (B = 1): weights (nh, Tq, Tk), heads (nh, Tq, hv)."""
    def tensor(a):
        return torch.tensor(np.asarray(a), dtype=dtype)[None]

    n_heads, tq, tk = trace.weights.shape
    additive = torch.zeros(1, 1, tq, tk, dtype=dtype)
    if mask is not None:
        additive = additive.masked_fill(~torch.from_numpy(np.asarray(mask, dtype=bool)), torch.finfo(dtype).min)
    if trace.bias is not None:  # ALiBi's bias goes in with the mask, as an additive term of the logits
        additive = additive + torch.tensor(trace.bias, dtype=dtype)[None]
    module = SinkModule(sinks, n_heads // trace.kv_heads, dtype)
    with torch.no_grad():
        out, weights = modeling_gpt_oss.eager_attention_forward(module, tensor(trace.q), tensor(trace.k),
                                                                tensor(trace.v), additive, scaling=trace.scale)
    return weights[0].numpy(), out[0].transpose(0, 1).numpy()


@pytest.mark.parametrize("config", SINK_LINKS)
@pytest.mark.parametrize(("dtype", "np_dtype", "weights_tol", "heads_tol"), [
    (torch.float64, np.float64, 1e-12, 1e-12), (torch.float32, np.float32, WEIGHTS32, FLOAT32)])
def test_learned_sinks_are_gpt_oss_eager_attention(config, dtype, np_dtype, weights_tol, heads_tol):
    result, trace = engine_layer(config, np_dtype)
    weights, heads = gpt_oss_eager(trace, result.kernel_params.logits, result.mask, dtype)
    np.testing.assert_allclose(trace.weights, weights, rtol=0, atol=weights_tol)
    np.testing.assert_allclose(trace.heads, heads, rtol=0, atol=heads_tol)
    share = 1.0 - weights.sum(axis=-1)  # (nh, Tq): the dropped column's weight
    np.testing.assert_allclose(trace.kernel_parts.sink_share, share, rtol=0, atol=weights_tol)
    assert share.min() > 1e-3  # rows sum to less than 1: the sink's column is dropped


def test_a_sink_of_logit_zero_is_the_null_key_exactly():
    for config in SINK_LINKS:
        result = run(config)
        zero = SinkParams(np.zeros(config.n_heads))
        _, sink = engine_layer(config, kernel_params=zero)
        _, null = engine_layer(replace(config, kernel="softmax"), kernel_params=None,
                               null_key=True)
        assert np.array_equal(sink.weights, null.weights) and np.array_equal(sink.output, null.output)
        assert not np.array_equal(result.trace.weights, null.weights)  # the drawn sinks are not 0


def test_the_null_key_is_refused_with_sinks_and_mla_with_both():
    assert kernel_refusal("sink", MHAConfig(kernel="softmax", null_key=True)).fix == {"null_key": False}
    for name in ("sink", "gated"):
        assert kernel_refusal(name, MHAConfig(mla_rank=4)).setting == "mla_rank"
        assert kernel_refusal(name, MHAConfig()) is None
