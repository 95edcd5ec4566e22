"""What-ifs on SmolLM2 (mha_core.smollm2_whatif) against transformers.

- Sparse selection: transformers' Llama runs the same GGUF file (its own loader, eager attention, float32); a forward
  pre-hook on each chosen layer's self_attn hands it an explicit 4-D additive mask (1, nh, T, T): 0 on the keys our
  run kept, the float32 minimum elsewhere. Same loss within 1e-5, same logits within 1e-4. Which keys a top-k keeps is
  checked apart, against torch.topk on the same logits.
- Sinks: transformers' gpt_oss ``eager_attention_forward`` (the sinks concatenated to the logits, softmax, the column
  dropped) on one SmolLM2 layer's q and k, with the first token's column masked, against our fitted-sink weights.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mha_core import smollm2_whatif as wi

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package (pip install gguf)")
pytest.importorskip("accelerate", reason="transformers loads GGUF files only with accelerate installed")

ATOL_LOSS = 1e-5
ATOL_LOGITS = 1e-4
PROMPT = "Every morning the baker opens the shop at six, and every morning the first customer is"
LAYERS, K = (2, 9, 21), 4


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.forward(PROMPT)


def masked_logits(llama, ids: np.ndarray, masks: dict[int, np.ndarray]) -> np.ndarray:
    """transformers' logits (T, V) with layer l's attention mask replaced by the additive ``masks[l]`` (nh, T, T)."""

    def replacing(mask):
        def pre_hook(module, args, kwargs):
            kwargs["attention_mask"] = torch.from_numpy(mask)[None]  # (1, nh, T, T)
            return args, kwargs

        return pre_hook

    hooks = [llama.model.layers[layer].self_attn.register_forward_pre_hook(replacing(mask), with_kwargs=True)
             for layer, mask in masks.items()]
    try:
        with torch.no_grad():
            return llama(torch.tensor(np.array(ids))[None]).logits[0].numpy()
    finally:
        for hook in hooks:
            hook.remove()


def additive(kept: np.ndarray) -> np.ndarray:
    return np.where(kept, 0.0, np.finfo(np.float32).min).astype(np.float32)  # (nh, T, T)


def their_loss(logits: np.ndarray, ids: np.ndarray) -> float:
    return torch.nn.functional.cross_entropy(torch.from_numpy(logits[:-1]).double(),
                                             torch.from_numpy(np.array(ids[1:]))).item()


@pytest.mark.parametrize("method", ["topk", "moba"])
def test_sparse_run_equals_transformers_with_a_4d_mask(smollm2, llama, run, method):
    k = K if method == "topk" else 1  # MoBA: one block of 8, its own
    masks = {layer: additive(wi.kept_keys(smollm2, run, layer, k, LAYERS, method)) for layer in LAYERS}
    theirs = masked_logits(llama, run.token_ids, masks)  # (T, V)
    ours = (wi.sparse_losses if method == "topk" else wi.moba_losses)(smollm2, run, LAYERS, k)
    assert float(ours.mean()) == pytest.approx(their_loss(theirs, run.token_ids), abs=ATOL_LOSS)
    dense = masked_logits(llama, run.token_ids, {})
    assert abs(their_loss(dense, run.token_ids) - float(ours.mean())) > 100 * ATOL_LOSS  # sparsity changed the loss
    # the last position's logits, ours from the same sparse pass
    x = run.layers[LAYERS[0]].input
    for index in range(LAYERS[0], 30):
        x = (wi.attention_with(smollm2, x, index, lambda trace: wi.selection(method, k)(trace)[0], whole_trace=True)
             if index in LAYERS else smollm2.layer(x, index, keep_trace=False).output)
    np.testing.assert_allclose(smollm2.unembed(smollm2.norm(x)[-1:])[0], theirs[-1], atol=ATOL_LOGITS, rtol=0)


def test_kept_keys_are_torch_topk_of_the_logits(smollm2, run):
    _normed, trace, _w = smollm2.layer_trace(run, LAYERS[0])
    kept = wi.kept_keys(smollm2, run, LAYERS[0], K, LAYERS)
    logits = torch.from_numpy(np.array(trace.logits, dtype=np.float64))  # (nh, T, T), -inf above the diagonal
    t = run.n_tokens
    for i in range(t):
        top = torch.topk(logits[:, i, : i + 1], min(K, i + 1), dim=-1).indices.numpy()  # (nh, k)
        expected = np.zeros((9, t), dtype=bool)
        np.put_along_axis(expected, top, True, axis=-1)
        np.testing.assert_array_equal(kept[:, i], expected, err_msg=f"query {i}")


def test_fitted_sink_softmax_equals_gpt_oss_eager_attention(smollm2, run):
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    layer = 11
    sinks = wi.fit_sinks(smollm2, run)[layer]  # (nh,)
    _normed, trace, _w = smollm2.layer_trace(run, layer)
    t = run.n_tokens
    mask = np.where(np.tri(t, dtype=bool), 0.0, -np.inf)  # (T, T) causal
    mask[:, 0] = -np.inf  # the first token's column dropped
    module = SimpleNamespace(sinks=torch.from_numpy(sinks), num_key_value_groups=3, training=False)
    q, k, v = (torch.from_numpy(np.array(a, dtype=np.float64))[None] for a in (trace.q, trace.k, trace.v))
    _out, theirs = eager_attention_forward(module, q, k, v, torch.from_numpy(mask)[None, None], trace.scale)
    ours = wi.sink_weights("fitted", sinks)(np.array(trace.logits, dtype=np.float64))  # (nh, T, T)
    np.testing.assert_allclose(ours[:, 1:], theirs[0].numpy()[:, 1:], atol=1e-6, rtol=0)  # q.k in float32 on our side
    assert theirs[0, :, 1:, 0].abs().max().item() == 0.0 and not ours[:, :, 0].any()
