"""One frozen configuration for everything a user can set, and ``run`` that turns it into a trace.

``run(config)`` builds the inputs, the weights and the mask, calls
``multi_head_attention`` once and returns every piece in a ``RunResult``. Invalid
configurations raise ``ValueError`` with a message that says what would work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from mha_core.attention import AttentionTrace, AttentionWeights, multi_head_attention
from mha_core.inputs import (
    RANDOM_INITS,
    one_hot_embeddings,
    random_embeddings,
    random_weights,
    sinusoidal_positional_encoding,
    token_labels,
    vocabulary,
)
from mha_core.masks import causal_mask, padding_mask, window_mask
from mha_core.positions import ROPE_BASE
from mha_core.presets import PRESET_INITS, preset_inputs, preset_weights

# Upper limits, so that one request cannot exhaust a small public host.
LIMITS = {
    "max_tokens": 64,  # per sentence (queries, and keys/values in cross-attention)
    "max_d_model": 512,
    "max_heads": 16,
    "max_seed": 2**32 - 1,
    "max_temperature": 1000.0,
}

INITS = RANDOM_INITS + PRESET_INITS
SCALE_RULES = ("sqrt_dk", "sqrt_t", "none", "temperature")
MASKS = ("none", "causal", "padding", "window", "custom")
EMBEDDINGS = ("random", "onehot", "custom")
POSITIONS = ("none", "sinusoidal", "rope", "alibi")  # sinusoidal: added to X; rope, alibi: inside attention
MAX_ROPE_BASE = 1e7


@dataclass(frozen=True)
class MHAConfig:
    """A toy multi-head self- or cross-attention layer, exactly as the sidebar sets it."""

    tokens: tuple[str, ...] = ("the", "cat", "sat", "on", "the", "mat")
    kv_tokens: tuple[str, ...] | None = None  # set: cross-attention, keys/values from these tokens
    d_model: int = 16
    n_heads: int = 4
    seed: int = 0
    init: str = "xavier"  # one of INITS; the preset inits are hand-built heads (presets.py)
    bias: bool = False
    positional_encoding: bool = False  # the old spelling of pe="sinusoidal"; kept equal to it (see __post_init__)
    scale_rule: str = "sqrt_dk"  # sqrt_dk: 1/sqrt(hs); sqrt_t: 1/sqrt(Tk) (seed 001); none: 1; temperature: 1/temperature
    temperature: float = 1.0
    mask: str = "none"  # one of MASKS
    valid_len: int | None = None  # padding mask: keys 0..valid_len-1 are real; None = all
    window: int = 1  # window mask: |i - j| <= window
    custom_mask: tuple[tuple[bool, ...], ...] | None = None  # (Tq, Tk), True = may attend
    embedding: str = "random"  # one of EMBEDDINGS
    custom_embedding: tuple[tuple[float, ...], ...] | None = None  # (Tq [+ Tk], C) rows, queries first
    output_projection: bool = True  # False: output = concat of the heads, no W_O
    null_key: bool = False  # softmax_1: every row may also put weight on a key of logit 0 and value 0
    pe: str | None = None  # one of POSITIONS; None: from positional_encoding (old callers)
    rope_base: float = ROPE_BASE  # RoPE's theta; used only with pe="rope"
    kv_heads: int | None = None  # key/value heads dividing n_heads (1: MQA); None = n_heads (MHA)

    def __post_init__(self) -> None:
        # One truth for positions: pe. An old caller's positional_encoding=True means "sinusoidal";
        # afterwards positional_encoding always says whether pe is "sinusoidal". kv_heads equal to
        # n_heads is stored as None, so that one layer has one configuration (and one cache entry).
        if self.pe is None:
            object.__setattr__(self, "pe", "sinusoidal" if self.positional_encoding else "none")
        object.__setattr__(self, "positional_encoding", self.pe == "sinusoidal")
        if self.kv_heads is not None and self.kv_heads == self.n_heads:
            object.__setattr__(self, "kv_heads", None)

    @property
    def key_value_heads(self) -> int:
        """kv: the number of key/value heads (n_heads unless shared)."""
        return self.n_heads if self.kv_heads is None else self.kv_heads

    @property
    def is_cross(self) -> bool:
        return self.kv_tokens is not None

    @property
    def key_tokens(self) -> tuple[str, ...]:
        return self.tokens if self.kv_tokens is None else self.kv_tokens

    @property
    def head_size(self) -> int:
        return self.d_model // self.n_heads

    def validate(self) -> None:
        """Raise ValueError with a message a student understands, saying what would work."""
        _check_tokens("sentence", self.tokens)
        if self.kv_tokens is not None:
            _check_tokens("key/value sentence", self.kv_tokens)
        _check_int("d_model", self.d_model, 1, LIMITS["max_d_model"])
        _check_int("heads", self.n_heads, 1, LIMITS["max_heads"])
        if self.d_model % self.n_heads:
            choices = valid_head_counts(self.d_model)
            raise ValueError(
                f"d_model {self.d_model} is not divisible by {self.n_heads} heads: choose {_or_list(choices)}"
            )
        _check_int("seed", self.seed, 0, LIMITS["max_seed"])
        _check_choice("weight init", self.init, INITS)
        _check_choice("scale rule", self.scale_rule, SCALE_RULES)
        if self.scale_rule == "temperature":
            t = self.temperature
            if not isinstance(t, int | float) or not math.isfinite(t) or not 0 < t <= LIMITS["max_temperature"]:
                raise ValueError(
                    f"temperature {t!r} must be a number above 0 and at most {LIMITS['max_temperature']:g}, e.g. 1.0"
                )
        _check_choice("mask", self.mask, MASKS)
        tk = len(self.key_tokens)
        if self.mask == "padding" and self.valid_len is not None:
            _check_int("valid length", self.valid_len, 0, tk)
        if self.mask == "window":
            _check_int("window", self.window, 0, LIMITS["max_tokens"])
        if self.mask == "custom":
            self._check_custom_mask(len(self.tokens), tk)
        _check_choice("embedding", self.embedding, EMBEDDINGS)
        if self.embedding == "custom":
            self._check_custom_embedding()
        if self.init in PRESET_INITS and (self.head_size < 2 or self.d_model < 4):
            raise ValueError(
                f"hand-built heads need d_model >= 4 and a head size of at least 2 "
                f"(d_model {self.d_model} / {self.n_heads} heads = {self.head_size}): use fewer heads"
            )
        self._check_positions_and_kv_heads()

    def _check_positions_and_kv_heads(self) -> None:
        _check_choice("positional scheme", self.pe, POSITIONS)
        kv = self.key_value_heads
        _check_int("key/value heads", kv, 1, self.n_heads)
        if self.n_heads % kv:
            raise ValueError(
                f"{kv} key/value heads do not divide {self.n_heads} heads (each serves an equal group of "
                f"query heads): choose {_or_list(valid_kv_head_counts(self.n_heads))}"
            )
        if self.pe == "rope":
            b = self.rope_base
            if not isinstance(b, int | float) or not math.isfinite(b) or not 1 < b <= MAX_ROPE_BASE:
                raise ValueError(f"RoPE base {b!r} must be a number above 1 and at most {MAX_ROPE_BASE:g}, e.g. 10000")
            if self.head_size % 2:
                raise ValueError(
                    f"RoPE turns a head's features in pairs, so the head size must be even; d_model {self.d_model} "
                    f"/ {self.n_heads} heads = {self.head_size}: choose an even head size"
                )
        if self.pe == "alibi" and self.is_cross:
            raise ValueError(
                "ALiBi penalises the distance between positions of one sentence; in cross-attention the keys "
                "come from another sentence: use RoPE, sinusoidal or no positions there"
            )
        if self.init in PRESET_INITS and self.pe in ("rope", "alibi"):
            raise ValueError(
                f"hand-built heads carry their own positions (dims 0-1); {self.pe} would bend their "
                "pattern: choose random weights to see it"
            )

    def _check_custom_mask(self, tq: int, tk: int) -> None:
        if self.custom_mask is None:
            raise ValueError("mask 'custom' needs a grid of checkboxes: start it from another mask")
        rows = self.custom_mask
        if len(rows) != tq or any(len(r) != tk for r in rows):
            raise ValueError(
                f"the custom mask must have {tq} rows (queries) and {tk} columns (keys); "
                "it was made for another sentence: reset it"
            )

    def _check_custom_embedding(self) -> None:
        rows = self.custom_embedding
        n_rows = len(self.tokens) + (len(self.kv_tokens) if self.is_cross else 0)
        if rows is None:
            raise ValueError("embedding 'custom' needs an uploaded matrix (CSV or .npy)")
        shape = (len(rows), len(rows[0]) if rows else 0)
        if shape != (n_rows, self.d_model):
            raise ValueError(
                f"the uploaded embedding has shape {shape}, but {n_rows} tokens need a ({n_rows}, {self.d_model}) "
                f"matrix: one row per token, d_model columns"
            )
        if not np.all(np.isfinite(np.asarray(rows, dtype=np.float64))):
            raise ValueError("the uploaded embedding contains NaN or infinite values")


@dataclass(frozen=True)
class RunResult:
    """Everything one configuration produced: inputs, parameters, mask and the engine trace."""

    config: MHAConfig
    query_labels: list[str]
    key_labels: list[str]
    embeddings: np.ndarray  # (Tq, C) before positional encoding
    key_embeddings: np.ndarray  # (Tk, C); the same array as ``embeddings`` in self-attention
    positional: np.ndarray | None  # (Tq, C) added to the queries' embeddings, or None
    x_q: np.ndarray  # (Tq, C) what the queries are projected from
    x_kv: np.ndarray  # (Tk, C) what keys and values are projected from
    weights: AttentionWeights
    mask: np.ndarray | None  # (Tq, Tk), True = may attend; None = no mask
    trace: AttentionTrace


def run(config: MHAConfig) -> RunResult:
    """Validate ``config``, build inputs, weights and mask, and run the engine once (float64)."""
    config.validate()
    tq, tk = len(config.tokens), len(config.key_tokens)
    if config.init in PRESET_INITS:
        emb_q, emb_k = preset_inputs(config.tokens, config.key_tokens, config.d_model)
        positional = None
    else:
        emb_q, emb_k = _embeddings(config)
        positional = sinusoidal_positional_encoding(max(tq, tk), config.d_model) if config.pe == "sinusoidal" else None
    x_q = emb_q if positional is None else emb_q + positional[:tq]  # (Tq, C)
    x_kv = emb_k if positional is None else emb_k + positional[:tk]  # (Tk, C)
    scale = scale_factor(config)
    if config.init in PRESET_INITS:
        weights = preset_weights(config.init, config, scale)
    else:
        weights = random_weights(
            config.d_model, config.seed, config.init, bias=config.bias, output_projection=config.output_projection
        )
    weights = shared_kv_weights(weights, config)
    mask = build_mask(config)
    inside = config.pe if config.pe in ("rope", "alibi") else "none"  # sinusoidal was added to X above
    trace = multi_head_attention(x_q, weights, config.n_heads, x_k=x_kv, mask=mask, scale=scale,
                                 kv_heads=config.key_value_heads, pe=inside, rope_base=config.rope_base,
                                 null_key=config.null_key)
    return RunResult(
        config=config,
        query_labels=token_labels(config.tokens),
        key_labels=token_labels(config.key_tokens),
        embeddings=emb_q,
        key_embeddings=emb_k,
        positional=None if positional is None else positional[:tq],
        x_q=x_q,
        x_kv=x_kv,
        weights=weights,
        mask=mask,
        trace=trace,
    )


def scale_factor(config: MHAConfig) -> float:
    """The number the raw scores are multiplied by, from the scale rule."""
    if config.scale_rule == "sqrt_dk":
        return 1.0 / math.sqrt(config.head_size)
    if config.scale_rule == "sqrt_t":
        return 1.0 / math.sqrt(len(config.key_tokens))
    if config.scale_rule == "temperature":
        return 1.0 / config.temperature
    return 1.0


def build_mask(config: MHAConfig) -> np.ndarray | None:
    """The (Tq, Tk) boolean mask the configuration asks for, or None for no mask."""
    tq, tk = len(config.tokens), len(config.key_tokens)
    if config.mask == "causal":
        return causal_mask(tq, tk)
    if config.mask == "padding":
        return padding_mask(tq, tk, tk if config.valid_len is None else config.valid_len)
    if config.mask == "window":
        return window_mask(tq, tk, config.window)
    if config.mask == "custom":
        return np.array(config.custom_mask, dtype=bool).reshape(tq, tk)
    return None


def shared_kv_weights(weights: AttentionWeights, config: MHAConfig) -> AttentionWeights:
    """W_K, W_V (and their biases) cut to the first kv*hs columns: kv key/value heads, (C, kv*hs).

    With kv = nh nothing changes, so MHA is exactly the layer it always was; with fewer, the
    key/value heads are the first kv heads of that layer (grouped-query attention's layout).
    """
    kv = config.key_value_heads
    if kv == config.n_heads:
        return weights
    width = kv * config.head_size
    cut = {name: getattr(weights, name)[..., :width] for name in ("w_k", "w_v", "b_k", "b_v")
           if getattr(weights, name) is not None}  # (C, kv*hs) and (kv*hs,)
    return replace(weights, **cut)


def valid_kv_head_counts(n_heads: int) -> list[int]:
    """Key/value head counts that divide the head count: 1 (multi-query) .. n_heads (multi-head)."""
    return [k for k in range(1, n_heads + 1) if n_heads % k == 0]


def valid_head_counts(d_model: int) -> list[int]:
    """Head counts that divide d_model, within the limit."""
    return [h for h in range(1, min(d_model, LIMITS["max_heads"]) + 1) if d_model % h == 0]


def _embeddings(config: MHAConfig) -> tuple[np.ndarray, np.ndarray]:
    """(Tq, C) and (Tk, C) embeddings; the same array twice in self-attention."""
    if config.embedding == "custom":
        table = np.array(config.custom_embedding, dtype=np.float64)  # (Tq [+ Tk], C)
        tq = len(config.tokens)
        return (table[:tq], table[tq:]) if config.is_cross else (table, table)
    if config.embedding == "onehot":
        vocab = vocabulary(config.tokens, config.key_tokens)
        make = lambda toks: one_hot_embeddings(toks, vocab, config.d_model)  # noqa: E731
    else:
        make = lambda toks: random_embeddings(toks, config.d_model, config.seed)  # noqa: E731
    emb_q = make(config.tokens)
    return emb_q, (make(config.kv_tokens) if config.is_cross else emb_q)


def _check_tokens(what: str, tokens) -> None:
    if not tokens:
        raise ValueError(f"the {what} is empty: type at least one word, e.g. 'the cat sat'")
    if len(tokens) > LIMITS["max_tokens"]:
        raise ValueError(
            f"the {what} has {len(tokens)} tokens; the limit is {LIMITS['max_tokens']}: shorten it"
        )


def _check_int(what: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{what} must be a whole number from {low} to {high}, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is out of range: choose a whole number from {low} to {high}")


def _check_choice(what: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"unknown {what} {value!r}: choose one of {', '.join(choices)}")


def _or_list(items) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
