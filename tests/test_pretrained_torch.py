"""Optional cross-checks of mha_core.pretrained against transformers and sentence-transformers.

Run when torch, transformers and sentence-transformers are installed and the model files are
available; both libraries load the very same local files as our loader (no network).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
sentence_transformers = pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")

ATOL = 1e-5  # float32, as the issue asks
SENTENCES = (
    "café naïve",
    "Hello, world! Isn't attention wonderful?",
    "the cat saw the cat",
    "Tokenization splits unbelievable words.",
    "",
    # a long one: 100+ word pieces, close to the cap of 128
    "Attention lets every token look at every other token; some heads look at the previous word, "
    "some at the separator, and some link the pieces of one word, like token and ##ization. "
    "Transformers stack many such layers, each with its own heads, its own queries, keys and values, "
    "and a feed-forward network that works on each position by itself. A small model like MiniLM "
    "has six layers of twelve heads; reading their patterns, layer by layer, is how one learns what they do.",
)


@pytest.fixture(scope="module")
def reference(model):
    """transformers' tokenizer and BertModel (eager attention) from the same local folder."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = str(model.source.directory)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    bert = transformers.BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    return tokenizer, bert


@pytest.fixture(scope="module")
def sentence_model(model):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return sentence_transformers.SentenceTransformer(str(model.source.directory), device="cpu")


def run_transformers(reference, text):
    tokenizer, bert = reference
    encoded = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = bert(**encoded, output_attentions=True, output_hidden_states=True)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0].tolist())
    attentions = torch.stack(out.attentions)[:, 0].numpy()  # (L, nh, T, T)
    hidden = [h[0].numpy() for h in out.hidden_states]  # L + 1 of (T, C)
    return tokens, attentions, hidden


@pytest.mark.parametrize("text", SENTENCES, ids=range(len(SENTENCES)))
def test_every_layer_and_head_matches_transformers(model, reference, text):
    tokens, expected_attentions, expected_hidden = run_transformers(reference, text)
    run = model.forward(text)
    assert list(run.tokens) == tokens
    assert run.attentions.shape == expected_attentions.shape
    for layer in range(model.config.n_layers):
        for head in range(model.config.n_heads):
            np.testing.assert_allclose(
                run.attentions[layer, head],
                expected_attentions[layer, head],
                rtol=0,
                atol=ATOL,
                err_msg=f"layer {layer} head {head}",
            )
    for i, (ours, theirs) in enumerate(zip(run.hidden_states, expected_hidden, strict=True)):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-5, err_msg=f"hidden state {i}")


@pytest.mark.parametrize("text", SENTENCES, ids=range(len(SENTENCES)))
def test_sentence_embedding_matches_sentence_transformers(model, sentence_model, text):
    expected = sentence_model.encode([text], convert_to_numpy=True)[0]  # (C,)
    np.testing.assert_allclose(model.forward(text).sentence_embedding(), expected, rtol=0, atol=ATOL)


def test_the_engine_trace_matches_transformers_queries_and_keys(model, reference):
    """Not only the weights: q and k of the engine's trace are BertSelfAttention's projections."""
    _, bert = reference
    text = "the cat saw the cat"
    run = model.forward(text)
    layer = 4
    x = torch.from_numpy(np.array(run.layers[layer].input))  # (T, C)
    self_attention = bert.encoder.layer[layer].attention.self
    with torch.no_grad():
        q = self_attention.query(x).reshape(run.n_tokens, 12, 32).transpose(0, 1).numpy()  # (nh, T, hs)
        k = self_attention.key(x).reshape(run.n_tokens, 12, 32).transpose(0, 1).numpy()  # (nh, T, hs)
    np.testing.assert_allclose(run.traces[layer].q, q, rtol=0, atol=ATOL)
    np.testing.assert_allclose(run.traces[layer].k, k, rtol=0, atol=ATOL)
