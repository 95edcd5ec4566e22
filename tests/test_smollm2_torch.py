"""Optional cross-checks of mha_core.smollm2 against transformers' Llama on the same GGUF file.

transformers reads the file with its own GGUF loader (dequantized to float32, llama.cpp's Q/K rows
put back by its own code) and runs ``LlamaForCausalLM`` with eager attention; the sentences below
were not used while writing the NumPy code. The model is loaded once for this module (~30 s).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package (pip install gguf)")
pytest.importorskip("accelerate", reason="transformers loads GGUF files only with accelerate installed")

ATOL_ATTENTION = 1e-5  # float32, as the issue asks
ATOL_LOGITS = 1e-3
SENTENCES = (
    "Rivers carve valleys slowly, over thousands of years.",
    "When Mary and John went to the store, John gave a drink to",
)
TOKENIZER_TEXTS = (
    "Pi is 3.14159, and 2024 + 17 = 2041.",
    "Crème brûlée, naïve façade, Ærøskøbing, São Paulo.",
    "東京は日本の首都です。北京欢迎你！",
    "Emoji: 🐍👩‍💻❤️🇫🇷 and tabs\tand\nnew lines  double  spaces",
    "<|im_start|>user\nWhat is 12*12?<|im_end|>",
)


@pytest.fixture(scope="module")
def model(smollm2):
    """SmolLM2 (the session's, tests/conftest.py) under this module's name for it."""
    return smollm2


@pytest.fixture(scope="module")
def reference(model, llama):
    """transformers' tokenizer and LlamaForCausalLM (eager, float32; the session's, tests/conftest.py) from the same
    .gguf file."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder, name = str(model.source.path.parent), model.source.path.name
    return transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name), llama


def run_transformers(llama, ids: np.ndarray):
    with torch.no_grad():
        out = llama(torch.tensor(ids)[None], output_attentions=True, output_hidden_states=True)
    attentions = torch.stack(out.attentions)[:, 0].numpy()  # (L, nh, T, T)
    return out, attentions


@pytest.fixture(scope="module")
def runs(model, reference):
    """Ours and theirs on each sentence, computed once."""
    _, llama = reference
    pairs = []
    for text in SENTENCES:
        ours = model.forward(text, traces=())
        theirs, attentions = run_transformers(llama, ours.token_ids)
        pairs.append((ours, theirs, attentions))
    return pairs


@pytest.mark.parametrize("text", TOKENIZER_TEXTS)
def test_tokenizer_equals_transformers(model, reference, text):
    tokenizer, _ = reference
    assert model.encode(text).tolist() == tokenizer(text, add_special_tokens=False)["input_ids"]


def test_every_head_attention(runs):
    for ours, _, attentions in runs:
        assert attentions.shape == (30, 9, ours.n_tokens, ours.n_tokens)
        np.testing.assert_allclose(ours.attentions, attentions, atol=ATOL_ATTENTION, rtol=0)
        above = np.triu(np.ones((ours.n_tokens, ours.n_tokens), dtype=bool), 1)
        assert np.all(ours.attentions[..., above] == 0)
        assert np.all(np.abs(attentions[..., above]) <= ATOL_ATTENTION)


def test_logits_and_predictions(model, runs):
    for ours, theirs, _ in runs:
        logits, expected = model.logits(ours), theirs.logits[0].numpy()  # (T, V)
        np.testing.assert_allclose(logits, expected, atol=ATOL_LOGITS, rtol=0)
        np.testing.assert_array_equal(logits.argmax(axis=1), expected.argmax(axis=1))
        np.testing.assert_allclose(ours.next_logits, expected[-1], atol=ATOL_LOGITS, rtol=0)


def test_logit_lens_equals_lm_head_of_norm(model, reference, runs):
    _, llama = reference
    for ours, theirs, _ in runs:
        lens = model.logit_lens(ours)
        hidden = theirs.hidden_states  # embeddings, then the input of layers 1..29, then the normed output
        with torch.no_grad():
            expected = [llama.lm_head(llama.model.norm(h[0, -1])).numpy() for h in hidden[:-1]]
        expected.append(theirs.logits[0, -1].numpy())  # transformers' last hidden state is already normed
        np.testing.assert_allclose(lens.logits, np.stack(expected), atol=ATOL_LOGITS, rtol=0)


def test_cached_decoding_matches_transformers(model, runs):
    ours, theirs, attentions = runs[1]
    ids = ours.token_ids
    caches = model.forward(ids[:3], traces=()).caches()
    for position in range(3, len(ids)):
        step = model.decode_next(ids[position], caches)
        for layer_index, layer_step in enumerate(step.layers):
            np.testing.assert_allclose(layer_step.weights[:, 0], attentions[layer_index, :, position, : position + 1],
                                       atol=ATOL_ATTENTION, rtol=0)
        np.testing.assert_allclose(step.logits, theirs.logits[0, position].numpy(), atol=ATOL_LOGITS, rtol=0)
        caches = step.caches
