"""The inputs of a toy attention layer: tokens, embeddings, positional encoding, weights.

All randomness comes from ``np.random.default_rng`` seeded with (seed, stream): the
embeddings, the weights and the biases each have their own stream, so turning biases on
does not change the weights, and changing the init does not change the embeddings.
"""

from __future__ import annotations

import zlib

import numpy as np

from mha_core.steps import AttentionWeights

# Independent random streams under one user seed.
STREAM_EMBEDDING, STREAM_WEIGHTS, STREAM_BIAS = 0, 1, 2

RANDOM_INITS = ("xavier", "uniform", "normal", "he")


def tokenize(sentence: str) -> tuple[str, ...]:
    """Split on whitespace; repeated words stay separate tokens."""
    return tuple(sentence.split())


def token_labels(tokens) -> list[str]:
    """Unique display labels that carry the position: ``['0:the', '1:cat', '2:the']``."""
    return [f"{i}:{tok}" for i, tok in enumerate(tokens)]


def random_embeddings(tokens, d_model: int, seed: int, dtype=np.float64) -> np.ndarray:
    """One standard-normal vector per distinct word, the same wherever the word appears. Shape (T, C).

    Each word's vector depends only on (seed, word), like a row of an embedding table, so
    editing the sentence does not change the other words' vectors.
    """
    rows = []
    for tok in tokens:
        word_id = zlib.crc32(tok.encode("utf-8"))
        rng = np.random.default_rng((seed, STREAM_EMBEDDING, word_id))
        rows.append(rng.standard_normal(d_model))  # (C,)
    return np.array(rows, dtype=dtype).reshape(len(rows), d_model)  # (T, C)


def vocabulary(*token_lists) -> list[str]:
    """Distinct words in order of first appearance across the lists."""
    return list(dict.fromkeys(tok for tokens in token_lists for tok in tokens))


def one_hot_embeddings(tokens, vocab: list[str], d_model: int, dtype=np.float64) -> np.ndarray:
    """Row t is the unit vector of the word's index in ``vocab``. Shape (T, C); needs C >= len(vocab)."""
    if len(vocab) > d_model:
        raise ValueError(
            f"one-hot embeddings need d_model >= the number of distinct words ({len(vocab)}): "
            f"choose d_model >= {len(vocab)} or use random embeddings"
        )
    x = np.zeros((len(tokens), d_model), dtype=dtype)  # (T, C)
    x[np.arange(len(tokens)), [vocab.index(tok) for tok in tokens]] = 1
    return x


def init_matrix(rng: np.random.Generator, init: str, fan_in: int, fan_out: int) -> np.ndarray:
    """One (fan_in, fan_out) weight matrix drawn by the named scheme.

    xavier: normal, std sqrt(2 / (fan_in + fan_out)) (Glorot; keeps q.k/sqrt(d_k) near unit
    variance, so the softmax stays informative); uniform: [0, 1) as in seed 000 (saturates
    the softmax); normal: standard normal as in seed 003; he: normal, std sqrt(2 / fan_in) as
    in seed 004.
    """
    if init == "xavier":
        return rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / (fan_in + fan_out))
    if init == "uniform":
        return rng.random((fan_in, fan_out))
    if init == "normal":
        return rng.standard_normal((fan_in, fan_out))
    if init == "he":
        return rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)
    raise ValueError(f"unknown weight init {init!r}: choose one of {', '.join(RANDOM_INITS)}")


def random_weights(
    d_model: int, seed: int, init: str = "xavier", *, bias: bool = False, output_projection: bool = True, dtype=np.float64
) -> AttentionWeights:
    """W_q, W_k, W_v, W_o of shape (C, C) and optional biases of shape (C,), drawn by ``init``."""
    rng = np.random.default_rng((seed, STREAM_WEIGHTS))
    w_q, w_k, w_v, w_o = (init_matrix(rng, init, d_model, d_model).astype(dtype) for _ in range(4))  # (C, C) each
    b_q = b_k = b_v = b_o = None
    if bias:
        rng_b = np.random.default_rng((seed, STREAM_BIAS))
        b_q, b_k, b_v, b_o = (init_matrix(rng_b, init, d_model, 1)[:, 0].astype(dtype) for _ in range(4))  # (C,) each
    if not output_projection:
        w_o = b_o = None
    return AttentionWeights(w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o)
