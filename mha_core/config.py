"""One frozen configuration for everything a user can set, and ``run`` that turns it into a trace.

``run(config)`` builds the inputs, the weights and the mask, calls ``multi_head_attention`` once and returns
every piece in a ``RunResult``. Invalid configurations raise ``ValueError`` with a message that says what would work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np

from mha_core.attention import AttentionTrace, AttentionWeights, multi_head_attention
from mha_core.inputs import (
    RANDOM_INITS,
    one_hot_embeddings,
    random_embeddings,
    random_weights,
    token_labels,
    vocabulary,
)
from mha_core.kernels import KERNELS, DifferentialParams, Kernel, attention_kernel, kernel_refusal
from mha_core.marks import N_, Message
from mha_core.masks import causal_mask, padding_mask, window_mask
from mha_core.mla import MLAWeights, default_mla_rope, mla_weights
from mha_core.positions import ROPE_BASE, SCHEMES, PositionScheme, position_scheme, scheme_problem
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
    pe: str = "none"  # a positional scheme of mha_core.positions.SCHEMES
    rope_base: float = ROPE_BASE  # the base of a scheme that turns q and k (RoPE's theta)
    kv_heads: int | None = None  # key/value heads dividing n_heads (1: MQA); None = n_heads (MHA)
    kernel: str = "softmax"  # a row of mha_core.kernels.KERNELS (its name)
    mla_rank: int = 0  # multi-head latent attention: keys and values from a latent of this rank; 0 = off
    mla_rope: int = 0  # MLA's decoupled RoPE dimensions per head (even, below the head size; needs pe=rope)
    sparse_block: int = 2  # MoBA's block size B (keys per block)
    sparse_topk: int = 2  # sparse selection's k: blocks kept per query (MoBA), keys kept per query (DSA)

    def __post_init__(self) -> None:
        # kv_heads equal to n_heads is stored as None, so that one layer has one configuration (and one cache entry).
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

    @property
    def positions(self) -> PositionScheme:
        """The record of the positional scheme ``pe``."""
        return position_scheme(self.pe)

    @property
    def attention_kernel(self) -> Kernel:
        """The record of the attention kernel ``kernel``."""
        return attention_kernel(self.kernel)

    @property
    def uses_embeddings(self) -> bool:
        """False for hand-built heads, which build their own inputs (presets.py)."""
        return self.init not in PRESET_INITS

    def problem(self) -> Problem | None:
        """The first thing wrong with this configuration, in the order of ``CHECKS``, or None."""
        return next((found for check in CHECKS if (found := check(self)) is not None), None)

    def validate(self) -> None:
        """Raise ValueError with a message a student understands, saying what would work."""
        found = self.problem()
        if found is not None:
            raise ValueError(found.message)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a configuration: what to tell the user, and the smallest change that removes it."""

    message: str  # a ``Message``: English, and translated where shown
    fix: Callable[[MHAConfig], MHAConfig]


def _set(**changes) -> Callable[[MHAConfig], MHAConfig]:
    """A fix that sets fields: ``_set(embedding="random")``."""
    return lambda config: replace(config, **changes)


def _default(name: str):
    return next(f.default for f in fields(MHAConfig) if f.name == name)


# ---- the checks, in order: each finds one problem and says how to remove it ------------------


def _check_sentences(config: MHAConfig) -> Problem | None:
    for what, name in ((Message(N_("sentence")), "tokens"), (Message(N_("key/value sentence")), "kv_tokens")):
        tokens = getattr(config, name)
        if name == "kv_tokens" and tokens is None:
            continue
        if not tokens:
            return Problem(Message(N_("the {what} is empty: type at least one word, e.g. 'the cat sat'"), what=what),
                           _set(**{name: _default(name)}))
        if len(tokens) > LIMITS["max_tokens"]:
            return Problem(Message(N_("the {what} has {n} tokens; the limit is {limit}: shorten it"), what=what,
                                   n=len(tokens), limit=LIMITS["max_tokens"]),
                           _set(**{name: tuple(tokens[: LIMITS["max_tokens"]])}))
    return None


def _check_sizes(config: MHAConfig) -> Problem | None:
    found = (_whole_number("d_model", "d_model", config.d_model, 1, LIMITS["max_d_model"])
             or _whole_number(Message(N_("heads")), "n_heads", config.n_heads, 1, LIMITS["max_heads"]))
    if found or not config.d_model % config.n_heads:
        return found
    choices = valid_head_counts(config.d_model)
    fitting = max(h for h in choices if h <= config.n_heads)
    return Problem(Message(N_("d_model {d_model} is not divisible by {heads} heads: choose {choices}"),
                           d_model=config.d_model, heads=config.n_heads, choices=_or_list(choices)),
                   _set(n_heads=fitting))


def _check_seed_and_choices(config: MHAConfig) -> Problem | None:
    found = _whole_number(Message(N_("seed")), "seed", config.seed, 0, LIMITS["max_seed"])
    for what, name, choices in ((Message(N_("weight init")), "init", INITS),
                                (Message(N_("scale rule")), "scale_rule", SCALE_RULES)):
        found = found or _choice(what, name, getattr(config, name), choices)
    return found


def _check_temperature(config: MHAConfig) -> Problem | None:
    t = config.temperature
    if config.scale_rule != "temperature" or _is_number(t) and 0 < t <= LIMITS["max_temperature"]:
        return None
    return Problem(Message(N_("temperature {t!r} must be a number above 0 and at most {limit}, e.g. 1.0"), t=t,
                           limit=f"{LIMITS['max_temperature']:g}"),
                   _set(temperature=_default("temperature")))


def _check_mask(config: MHAConfig) -> Problem | None:
    tq, tk = len(config.tokens), len(config.key_tokens)
    found = _choice(Message(N_("mask")), "mask", config.mask, MASKS)
    if found is None and config.mask == "padding" and config.valid_len is not None:
        found = _whole_number(Message(N_("valid length")), "valid_len", config.valid_len, 0, tk)
    if found is None and config.mask == "window":
        found = _whole_number(Message(N_("window")), "window", config.window, 0, LIMITS["max_tokens"])
    if found is not None or config.mask != "custom":
        return found
    back = _set(mask="none", custom_mask=None)
    rows = config.custom_mask
    if rows is None:
        return Problem(Message(N_("mask 'custom' needs a grid of checkboxes: start it from another mask")), back)
    if len(rows) != tq or any(len(r) != tk for r in rows):
        return Problem(Message(N_("the custom mask must have {tq} rows (queries) and {tk} columns (keys); it was made "
                                  "for another sentence: reset it"), tq=tq, tk=tk), back)
    return None


def _check_embedding(config: MHAConfig) -> Problem | None:
    found = _choice(Message(N_("embedding")), "embedding", config.embedding, EMBEDDINGS)
    back = _set(embedding="random", custom_embedding=None)
    if found is not None or not config.uses_embeddings:
        return found
    if config.embedding == "onehot":
        words = len(vocabulary(config.tokens, config.key_tokens))
        if words > config.d_model:
            return Problem(Message(N_("one-hot embeddings need d_model >= {words} (the number of distinct words), "
                                      "d_model is {d_model}"), words=words, d_model=config.d_model), back)
    if config.embedding != "custom":
        return None
    rows = config.custom_embedding
    n_rows = len(config.tokens) + (len(config.kv_tokens) if config.is_cross else 0)
    if rows is None:
        return Problem(Message(N_("embedding 'custom' needs an uploaded matrix (CSV or .npy)")), back)
    shape = (len(rows), len(rows[0]) if rows else 0)
    if shape != (n_rows, config.d_model):
        return Problem(Message(N_("the uploaded embedding has shape {shape}, but {n} tokens need a ({n}, {d_model}) "
                                  "matrix: one row per token, d_model columns"), shape=shape, n=n_rows,
                               d_model=config.d_model), back)
    if not np.all(np.isfinite(np.asarray(rows, dtype=np.float64))):
        return Problem(Message(N_("the uploaded embedding contains NaN or infinite values")), back)
    return None


def _check_hand_built(config: MHAConfig) -> Problem | None:
    if config.uses_embeddings or (config.head_size >= 2 and config.d_model >= 4):
        return None
    return Problem(Message(N_("hand-built heads need d_model >= 4 and a head size of at least 2 (d_model {d_model} / "
                              "{heads} heads = {hs}): use fewer heads"), d_model=config.d_model, heads=config.n_heads,
                           hs=config.head_size), _set(init="xavier"))


def _check_kv_heads(config: MHAConfig) -> Problem | None:
    kv, heads = config.key_value_heads, config.n_heads
    choices = valid_kv_head_counts(heads)
    nearest = _set(kv_heads=min(choices, key=lambda k: (abs(k - kv), k)) if _is_number(kv) else None)
    found = _whole_number(Message(N_("key/value heads")), "kv_heads", kv, 1, heads)
    if found is not None:
        return Problem(found.message, nearest)
    if heads % kv:
        return Problem(Message(N_("{kv} key/value heads do not divide {heads} heads (each serves an equal group of "
                                  "query heads): choose {choices}"), kv=kv, heads=heads, choices=_or_list(choices)),
                       nearest)
    return None


def _check_positions(config: MHAConfig) -> Problem | None:
    found = _choice(Message(N_("positional scheme")), "pe", config.pe, tuple(SCHEMES))
    if found is not None:
        return found
    scheme = config.positions
    b = config.rope_base
    if scheme.turns and not (_is_number(b) and 1 < b <= MAX_ROPE_BASE):
        return Problem(Message(N_("RoPE base {base!r} must be a number above 1 and at most {limit}, e.g. 10000"),
                               base=b, limit=f"{MAX_ROPE_BASE:g}"),
                       _set(rope_base=ROPE_BASE))
    reason = scheme_problem(config.pe, config.head_size, config.is_cross, b)
    if reason is None and scheme.inside_attention and not config.uses_embeddings:
        reason = Message(N_("hand-built heads carry their own positions (dims 0-1); {pe} would bend their pattern: "
                            "choose random weights to see it"), pe=config.pe)
    return None if reason is None else Problem(reason, _set(pe="none"))


def _check_kernel(config: MHAConfig) -> Problem | None:
    found = _choice(Message(N_("attention kernel")), "kernel", config.kernel, tuple(KERNELS))
    if found is not None:
        return found
    refusal = kernel_refusal(config.kernel, config)
    return None if refusal is None else Problem(refusal.reason, _set(**refusal.fix))


def _check_mla(config: MHAConfig) -> Problem | None:
    hs, rank, rope = config.head_size, config.mla_rank, config.mla_rope
    found = _whole_number(Message(N_("latent rank")), "mla_rank", rank, 0, config.d_model)
    if found is not None or not rank:
        if found is None and config.mla_rope != 0:
            return Problem(Message(N_("decoupled RoPE dimensions belong to multi-head latent attention: set a latent "
                                      "rank or 0 RoPE dimensions")), _set(mla_rope=0))
        return found
    off = _set(mla_rank=0, mla_rope=0)
    if not config.uses_embeddings:
        return Problem(Message(N_("hand-built heads set their own W_K and W_V; multi-head latent attention draws keys "
                                  "and values from a latent: choose random weights to see it")), off)
    if config.kv_heads is not None:
        return Problem(Message(N_("multi-head latent attention gives each of the {heads} heads its own keys from one "
                                  "latent; it replaces shared key/value heads (GQA): set key/value heads = heads"),
                               heads=config.n_heads), _set(kv_heads=None))
    if config.bias:
        return Problem(Message(N_("DeepSeek's latent projections have no biases: turn biases off for multi-head latent "
                                  "attention")), _set(bias=False))
    found = _whole_number(Message(N_("decoupled RoPE dims")), "mla_rope", rope, 0, max(hs - 1, 0))
    if found is None and rope % 2:
        found = Problem(Message(N_("decoupled RoPE dims turn in pairs: {rope} is odd, choose an even number below {hs}"),
                                rope=rope, hs=hs), _set(mla_rope=rope - 1))
    if found is not None:
        return found
    turns = config.positions.turns
    if turns and not rope:
        fix = _set(mla_rope=default_mla_rope(hs)) if default_mla_rope(hs) else _set(pe="none")
        return Problem(Message(N_("{name} cannot turn the latent's keys (W_UK could no longer be folded into the "
                                  "query); MLA carries positions in decoupled RoPE dimensions: give it some (e.g. "
                                  "{example})"), name=Message(config.positions.short_label),
                               example=default_mla_rope(hs) or Message(N_("a wider head"))), fix)
    if rope and not turns:
        return Problem(Message(N_("decoupled RoPE dimensions carry RoPE: choose RoPE positions, or 0 RoPE dims")),
                       _set(mla_rope=0))
    return None


CHECKS: tuple[Callable[[MHAConfig], Problem | None], ...] = (
    _check_sentences,
    _check_sizes,
    _check_seed_and_choices,
    _check_temperature,
    _check_mask,
    _check_embedding,
    _check_hand_built,
    _check_kv_heads,
    _check_positions,
    _check_kernel,
    _check_mla,
)


def _is_number(value) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool) \
        and math.isfinite(value)


def _whole_number(what: Message | str, name: str, value, low: int, high: int) -> Problem | None:
    """A problem when ``value`` is not a whole number in low..high; the fix clamps it (or takes the default)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        return Problem(Message(N_("{what} must be a whole number from {low} to {high}, got {value!r}"), what=what,
                               low=low, high=high, value=value),
                       _set(**{name: _default(name) if name != "kv_heads" else None}))
    if not low <= value <= high:
        return Problem(Message(N_("{what} {value} is out of range: choose a whole number from {low} to {high}"),
                               what=what, value=value, low=low, high=high),
                       _set(**{name: min(max(int(value), low), high)}))
    return None


def _choice(what: Message, name: str, value, choices) -> Problem | None:
    if value in choices:
        return None
    return Problem(Message(N_("unknown {what} {value!r}: choose one of {choices}"), what=what, value=value,
                           choices=", ".join(choices)), _set(**{name: _default(name)}))


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
    mla_weights: MLAWeights | None = None  # the latent's projections, with mla_rank > 0 (weights.w_k, w_v are None)
    kernel_params: DifferentialParams | None = None  # the differential kernel's lambda vectors


def run(config: MHAConfig) -> RunResult:
    """Validate ``config``, build inputs, weights and mask, and run the engine once (float64)."""
    config.validate()
    tq, tk = len(config.tokens), len(config.key_tokens)
    if config.init in PRESET_INITS:
        emb_q, emb_k = preset_inputs(config.tokens, config.key_tokens, config.d_model)
        positional = None
    else:
        emb_q, emb_k = _embeddings(config)
        add = config.positions.add_to_tokens
        positional = None if add is None else add(max(tq, tk), config.d_model)  # (max(Tq, Tk), C)
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
    latent = None
    if config.mla_rank:
        latent = mla_weights(config.d_model, config.n_heads, config.head_size, config.mla_rank, config.mla_rope,
                             config.seed, config.init)
        weights = replace(weights, w_k=None, w_v=None, b_k=None, b_v=None)  # keys and values come from the latent
    kernel = attention_kernel(config.kernel)
    params = None if kernel.params is None else kernel.params(config)  # its learned parameters (differential: λ)
    mask = build_mask(config)
    trace = multi_head_attention(x_q, weights, config.n_heads, x_k=x_kv, mask=mask, scale=scale,
                                 kv_heads=config.key_value_heads, pe=attention_scheme(config), rope_base=config.rope_base,
                                 null_key=config.null_key, kernel=config.kernel, kernel_params=params, mla=latent)
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
        mla_weights=latent,
        kernel_params=params,
    )


def attention_scheme(config: MHAConfig) -> str:
    """The ``pe`` the attention call takes: the scheme when it acts inside attention, else "none"
    (one that adds to the tokens was added to x already)."""
    return config.pe if config.positions.inside_attention else "none"


def scale_factor(config: MHAConfig) -> float:
    """The number the raw scores are multiplied by, from the scale rule."""
    if config.scale_rule == "sqrt_dk":
        return 1.0 / math.sqrt(config.head_size / config.attention_kernel.sub_heads)  # differential: the half's d
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


def _or_list(items) -> str | Message:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else Message(N_("{items} or {last}"), items=", ".join(items[:-1]), last=items[-1])
