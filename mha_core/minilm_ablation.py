"""Head ablation on all-MiniLM-L6-v2: turn heads off and see how far the sentence's vectors move. Pure NumPy.

MiniLM is an encoder: it predicts no next token, so what an ablation changes is what it outputs, each token's
final vector and the sentence embedding (their mean, unit length), compared by cosine similarity with the clean
run's. Heads are turned off as in ``mha_core.ablation`` (their columns of the concatenation before W_O set to 0
or to their mean over the reference text); the layers before the first changed one are the clean run's.
transformers' BertModel computes the same with a forward pre-hook on each layer's ``attention.output.dense``
(tests/test_ablation_transformers.py).

Shapes: T word pieces, C = 384, nh = 12, hs = 32, L = 6 layers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mha_core.ablation import ABLATIONS, REFERENCE_TEXT, Head, ablate_concat, checked_heads
from mha_core.pretrained import MiniLM, MiniLMRun, after_attention_output, l2_normalize, mean_pool, self_attention
from mha_core.steps import output_projection


def ablated_encoder_layer(model: MiniLM, x: np.ndarray, index: int, heads_off: Iterable[int],
                          means: np.ndarray | None = None) -> np.ndarray:
    """Encoder layer ``index`` on x (T, C) with ``heads_off`` turned off (``ablate_concat``). -> (T, C)."""
    layer, config = model.layers[index], model.config
    trace = self_attention(x, layer.attention, config.n_heads)
    concat = ablate_concat(trace.concat, heads_off, config.head_size, means)  # (T, nh*hs)
    attention_output = output_projection(concat, layer.attention.w_o, layer.attention.b_o)  # (T, C)
    return after_attention_output(x, attention_output, layer, config)[2]  # (T, C)


def head_means(model: MiniLM, text: str = REFERENCE_TEXT) -> np.ndarray:
    """Each head's output averaged over every word piece of ``text`` (the clean model): (L, nh, hs)."""
    return np.stack([layer.attention.heads.mean(axis=1) for layer in model.forward(text).layers])  # (L, nh, hs)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of matching rows (or of two vectors): (..., C), (..., C) -> (...)."""
    return np.sum(a * b, axis=-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)


@dataclass(frozen=True)
class EncoderAblation:
    """The clean run beside the run with ``heads`` off: ``output (T, C)`` the last layer's output with the heads
    off, ``sentence (C,)`` its sentence embedding, ``token_cosine (T,)`` each token's final vector against the
    clean one's, ``sentence_cosine`` the sentence embeddings' (1 = unchanged)."""

    heads: tuple[Head, ...]
    mode: str
    first_layer: int
    output: np.ndarray
    sentence: np.ndarray
    token_cosine: np.ndarray
    sentence_cosine: float


def ablate(model: MiniLM, run: MiniLMRun, heads: Iterable[Head], mode: str = "zero",
           means: np.ndarray | None = None) -> EncoderAblation:
    """Run ``run``'s sentence again with ``heads`` off, from the first layer that has one (``mode`` zero or mean,
    then ``means`` (L, nh, hs) from ``head_means``). ValueError for an unknown mode or a head that does not exist."""
    if mode not in ABLATIONS:
        raise ValueError(f"ablation mode {mode!r} is not one of {', '.join(ABLATIONS)}")
    if mode == "mean" and means is None:
        raise ValueError("mean ablation needs each head's mean output (head_means)")
    off = checked_heads(heads, model.config.n_layers, model.config.n_heads)
    first = off[0][0] if off else model.config.n_layers
    x = run.layers[first].input if off else run.layers[-1].output  # (T, C): the layers before are the clean run's
    for index in range(first, model.config.n_layers):
        in_layer = [head for layer, head in off if layer == index]
        x = ablated_encoder_layer(model, x, index, in_layer, None if mode == "zero" else means[index])
    clean = run.layers[-1].output  # (T, C)
    sentence = l2_normalize(mean_pool(x))  # (C,)
    return EncoderAblation(off, mode, first, x, sentence, cosine(x, clean),
                           float(cosine(sentence, run.sentence_embedding())))
