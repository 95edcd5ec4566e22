"""DSA's lightning indexer and top-k against transformers 5.23's ``DeepseekV32Indexer`` (DeepSeek-V3.2), on CPU.

A tiny config (hidden 16, 2 indexer heads of 4, q_lora_rank = hidden so that ``q_resid`` can be x itself), the app's
indexer weights copied in, and RoPE made the identity (cos 1, sin 0): the toy's indexer carries no positions, where
DeepSeek's turns part of q^I and k^I. transformers returns the top-k indices in order of their index score, so with
k = T the order of every earlier key is the order of I_{t,s}; with a small k the kept set is the app's. float32.
"""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run

torch = pytest.importorskip("torch")
modeling = pytest.importorskip("transformers.models.deepseek_v32.modeling_deepseek_v32")
configuration = pytest.importorskip("transformers.models.deepseek_v32.configuration_deepseek_v32")

TOKENS = ("the", "cat", "sat", "on", "the", "mat", "and", "slept")
T = len(TOKENS)


def indexer_of(params, topk: int):
    config = configuration.DeepseekV32Config(hidden_size=params.w_q.shape[0], q_lora_rank=params.w_q.shape[0],
                                             qk_rope_head_dim=2, index_topk=topk, index_head_dim=params.size,
                                             index_n_heads=params.heads)
    indexer = modeling.DeepseekV32Indexer(config, 0).eval()
    with torch.no_grad():
        indexer.wq_b.weight.copy_(torch.tensor(params.w_q.T))
        indexer.wk.weight.copy_(torch.tensor(params.w_k.T))
        indexer.weights_proj.weight.copy_(torch.tensor(params.w_w.T))
    return indexer


def transformers_topk(result, topk: int) -> np.ndarray:
    """transformers' (T, topk) indices for the app's tokens x and indexer weights."""
    x = torch.tensor(result.x_q, dtype=torch.float32)[None]  # (1, T, C)
    identity = (torch.ones(1, T, 2), torch.zeros(1, T, 2))  # RoPE by angle 0
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))[None]  # (1, T, T), True = may attend
    with torch.no_grad():
        return indexer_of(result.kernel_params, topk)(x, x, identity, causal, None)[0].numpy()


@pytest.mark.parametrize("seed", [0, 5, 11])
def test_the_order_of_every_earlier_key_is_transformers_index_order(seed):
    result = run(MHAConfig(tokens=TOKENS, d_model=16, n_heads=4, mask="causal", kernel="dsa", seed=seed,
                           sparse_topk=T))
    index = result.trace.kernel_parts.index  # (T, T), -inf after the query
    order = transformers_topk(result, T)
    for t in range(T):
        theirs = [int(s) for s in order[t] if s <= t]  # their earlier keys, best first
        scores = index[t, theirs]
        assert np.all(np.diff(scores) <= 1e-6), (t, theirs, scores)  # they rank as the app's I_{t,s}
        assert sorted(theirs) == list(range(t + 1))


@pytest.mark.parametrize("topk", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", [0, 7])
def test_the_kept_keys_are_transformers_top_k(topk, seed):
    result = run(MHAConfig(tokens=TOKENS, d_model=16, n_heads=4, mask="causal", kernel="dsa", seed=seed,
                           sparse_topk=topk))
    parts = result.trace.kernel_parts
    chosen = transformers_topk(result, topk)
    for t in range(T):
        theirs = {int(s) for s in chosen[t] if s <= t}  # a masked key they pad with never reaches the softmax
        ours = set(np.flatnonzero(parts.kept[0, t]).tolist())
        gap = np.sort(parts.index[t, : t + 1])[::-1]
        tie = topk <= t and abs(gap[topk - 1] - gap[topk]) < 1e-5  # a tie at the edge: either key is right
        assert tie or theirs == ours, (t, theirs, ours)
