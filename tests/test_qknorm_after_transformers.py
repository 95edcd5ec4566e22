"""QK-norm after the fact on SmolLM2 (mha_core.smollm2_qknorm) against transformers: in transformers' own Llama read
from the same GGUF file, the chosen layers' attention is swapped for transformers' Qwen3Attention (q_norm and k_norm
over each head's features, before RoPE) holding the same W_Q, W_K, W_V, W_O, with q_norm's weight = our gain and
k_norm's = 1. Same logits within 1e-4, same loss within 1e-5."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import smollm2_qknorm as qn
from mha_core.qk_norm import QK_NORM_EPS

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
for needed in ("transformers", "gguf", "accelerate"):  # transformers reads GGUF files only with gguf and accelerate
    pytest.importorskip(needed, reason=f"{needed} is not installed")

ATOL_LOSS = 1e-5
ATOL_LOGITS = 1e-4
PROMPT = "The lighthouse keeper climbed the stairs every evening to light the lamp before the ships came"
LAYERS = (4, 13, 26)


def qwen3_attention(llama, index: int, gain: float):
    """transformers' Qwen3Attention with layer ``index``'s projections and the norms' weights (gain, 1)."""
    from transformers.models.qwen3.configuration_qwen3 import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention

    theirs = llama.config
    config = Qwen3Config(hidden_size=theirs.hidden_size, num_attention_heads=theirs.num_attention_heads,
                         num_key_value_heads=theirs.num_key_value_heads, head_dim=theirs.head_dim,
                         num_hidden_layers=theirs.num_hidden_layers, rms_norm_eps=QK_NORM_EPS,
                         attention_bias=False, attention_dropout=0.0, use_sliding_window=False)
    config._attn_implementation = "eager"
    old = llama.model.layers[index].self_attn
    new = Qwen3Attention(config, index).eval()
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            getattr(new, name).weight.copy_(getattr(old, name).weight)
        new.q_norm.weight.fill_(gain)
        new.k_norm.weight.fill_(1.0)
    return new


def logits_with_qk_norm(llama, ids: np.ndarray, gains: dict[int, float]) -> np.ndarray:
    """transformers' logits (T, V) with layer l's attention a Qwen3Attention of gain ``gains[l]``."""
    originals = {index: llama.model.layers[index].self_attn for index in gains}
    try:
        for index, gain in gains.items():
            llama.model.layers[index].self_attn = qwen3_attention(llama, index, gain)
        with torch.no_grad():
            return llama(torch.tensor(np.array(ids))[None]).logits[0].numpy()
    finally:
        for index, module in originals.items():
            llama.model.layers[index].self_attn = module


@pytest.mark.parametrize("gain", qn.GAINS)
def test_qk_norm_run_equals_transformers_with_qwen3_attention(smollm2, llama, gain):
    run = smollm2.forward(PROMPT)
    ours = qn.qk_norm_run(smollm2, run, LAYERS, gain)
    theirs = logits_with_qk_norm(llama, run.token_ids, {index: float(ours.gains[index]) for index in LAYERS})
    their_loss = torch.nn.functional.cross_entropy(torch.from_numpy(theirs[:-1]).double(),
                                                   torch.from_numpy(np.array(run.token_ids[1:]))).item()
    assert ours.loss == pytest.approx(their_loss, abs=ATOL_LOSS)
    assert abs(ours.loss - ours.dense) > 100 * ATOL_LOSS  # QK-norm changed the loss
    x = run.layers[LAYERS[0]].input  # our logits at every position, from the same changed pass
    for index in range(LAYERS[0], 30):
        if index in LAYERS:
            trace = qn.layer_attention(smollm2, x, index, float(ours.gains[index]))
            x = smollm2.after_attention(x, trace.output, index)
        else:
            x = smollm2.layer(x, index, keep_trace=False).output
    np.testing.assert_allclose(smollm2.unembed(smollm2.norm(x)), theirs, atol=ATOL_LOGITS, rtol=0)
