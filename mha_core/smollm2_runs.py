"""What a SmolLM2-135M run returns: frozen records of every layer's intermediates, the logit lens, the
induction scores and one decoding step (``mha_core.smollm2`` computes them). Pure NumPy.

Shapes: T tokens, C = 576 model width, nh = 9 query heads, kv = 3 key/value heads, hs = 64, V = 49,152.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.attention import AttentionTrace
from mha_core.kv_cache import DecodeStep, KVCache


def _freeze(arrays) -> None:
    for value in arrays:
        if isinstance(value, np.ndarray):
            value.flags.writeable = False


@dataclass(frozen=True)
class SmolLayerRun:
    """What one decoder layer did; arrays read-only.

    ``input (T, C)``, the residual stream before the layer; ``weights (nh, T, T)`` its attention
    (rows sum to 1, zero above the diagonal); ``keys (kv, T, hs)`` after RoPE and ``values
    (kv, T, hs)``, what a KV cache holds; ``output (T, C)`` = input + attention output + feed-forward
    of that sum (the sum itself is not kept: 9 MB per run at 128 tokens). ``trace`` is the engine's full
    ``AttentionTrace`` (q, k before and after RoPE, scores, ...) when it was asked for, else None.
    """

    input: np.ndarray
    weights: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    output: np.ndarray
    trace: AttentionTrace | None = None

    def __post_init__(self) -> None:
        _freeze(self.__dict__.values())


@dataclass(frozen=True)
class SmolRun:
    """One prompt through the whole model.

    ``token_ids (T,)``, ``tokens`` each token's label (``mha_core.bpe.label_tokens``); ``layers`` one ``SmolLayerRun`` each;
    ``final (T, C)`` = RMSNorm of the last layer's output; ``next_logits (V,)`` the logits of the
    token after the last one.
    """

    token_ids: np.ndarray
    tokens: tuple[str, ...]
    layers: tuple[SmolLayerRun, ...]
    final: np.ndarray
    next_logits: np.ndarray

    def __post_init__(self) -> None:
        _freeze(self.__dict__.values())

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def attentions(self) -> np.ndarray:
        """Attention weights of every layer and head, (n_layers, nh, T, T). A new array each time."""
        return np.stack([layer.weights for layer in self.layers])  # (L, nh, T, T)

    @property
    def residuals(self) -> tuple[np.ndarray, ...]:
        """The residual stream before each layer and after the last: n_layers + 1 arrays (T, C)."""
        return (*(layer.input for layer in self.layers), self.layers[-1].output)

    def caches(self) -> tuple[KVCache, ...]:
        """Each layer's key/value cache after the prompt: k (kv, T, hs) rotated, v (kv, T, hs)."""
        return tuple(KVCache(layer.keys, layer.values) for layer in self.layers)


def softmax_1d(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Probabilities of a logit vector at a temperature > 0, in float64. (V,) -> (V,), sums to 1."""
    z = np.asarray(logits, dtype=np.float64) / temperature  # (V,)
    z -= z.max()
    p = np.exp(z)  # (V,)
    return p / p.sum()


@dataclass(frozen=True)
class LogitLens:
    """The final norm and the unembedding applied to the residual stream after every layer.

    ``position`` of the token read; ``logits (n_layers + 1, V)``: row 0 reads the embeddings,
    row l the stream after layer l (the last row is the model's own prediction); ``target`` the
    model's final top token; ``target_rank (n_layers + 1,)`` its rank at each depth (0 = top) and
    ``target_prob (n_layers + 1,)`` its probability; ``top_ids (n_layers + 1,)`` each depth's top token.
    """

    position: int
    logits: np.ndarray
    target: int
    target_rank: np.ndarray
    target_prob: np.ndarray
    top_ids: np.ndarray

    def __post_init__(self) -> None:
        _freeze(self.__dict__.values())


@dataclass(frozen=True)
class InductionScores:
    """Heads measured on a random sequence repeated twice (Olsson et al. 2022).

    ``token_ids (2n,)`` the sequence; ``induction (L, nh)``: mean weight a token of the second
    copy puts on the token right after its earlier occurrence (i -> i - n + 1); ``previous
    (L, nh)``: mean weight a token puts on the one before it (i -> i - 1, i >= 1); ``loss (2n - 1,)``
    the cross-entropy of predicting token i + 1 at position i (falls in the second copy when the
    model copies); ``attentions (L, nh, 2n, 2n)`` the patterns themselves.
    """

    token_ids: np.ndarray
    induction: np.ndarray
    previous: np.ndarray
    loss: np.ndarray
    attentions: np.ndarray

    def __post_init__(self) -> None:
        _freeze(self.__dict__.values())

    @property
    def half(self) -> int:
        return len(self.token_ids) // 2

    def ranking(self, score: str = "induction") -> list[tuple[int, int, float]]:
        """(layer, head, score) from the highest ``induction`` or ``previous`` score down."""
        table = getattr(self, score)  # (L, nh)
        order = np.argsort(-table, axis=None, kind="stable")
        return [(int(i // table.shape[1]), int(i % table.shape[1]), float(table.flat[i])) for i in order]


@dataclass(frozen=True)
class SmolDecodeStep:
    """One generated position through every layer with the caches: ``layers[l]`` the engine's
    ``DecodeStep`` of layer l (its ``weights (nh, 1, t+1)`` equal row t of the full forward);
    ``logits (V,)`` of the next token; ``caches`` every layer's cache after this step."""

    token_id: int
    position: int
    layers: tuple[DecodeStep, ...]
    logits: np.ndarray
    caches: tuple[KVCache, ...]

    def __post_init__(self) -> None:
        _freeze([self.logits])

    @property
    def cache_nbytes(self) -> int:
        return sum(cache.nbytes for cache in self.caches)
