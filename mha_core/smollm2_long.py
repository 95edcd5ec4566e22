"""Longer than trained (issue 36): SmolLM2 on a long repeated text with its RoPE as trained, scaled, partial or
switched off in every fourth layer. Pure NumPy.

SmolLM2 was trained on L_train = 8192 positions (``SmolConfig.context``); one core cannot afford a text that long
here, so the run is capped at ``MAX_LONG_TOKENS`` tokens and the text is read *as if a long stretch had been cut out
of it*: the first copy of the repeated text keeps positions 0..n-1 and every later token moves G positions on,
G = round(s * L_train) - T, so the last token sits at position s * L_train - 1 and the farthest pairs (a later token
and the first copy, the first token among them) lie about s times the trained length apart, while neighbours stay 1
apart. The G tokens in between are not run. The "inside" run (positions 0..T-1, no gap) is the reference inside the
trained length. Every method but "inside" uses the moved positions:

- **trained**: RoPE as trained, theta_p = base^(-2p/hs) (extrapolation);
- **linear** (position interpolation, Chen et al. 2023): theta_p / s, every distance shrunk s times;
- **ntk** (NTK-aware, bloc97 2023): base' = base * s^(hs/(hs-2)): the slowest pair is interpolated by s, the
  fastest nearly untouched;
- **dynamic** (dynamic NTK): the NTK base with s replaced by s * n/L_train - (s - 1), n = the largest position + 1
  (transformers' ``_compute_dynamic_ntk_parameters``); equal to the trained RoPE while n <= L_train;
- **yarn** (Peng et al. 2023): per pair, interpolation theta_p / s where a pair turns fewer than beta_slow = 1
  times over L_train, the trained theta_p where it turns more than beta_fast = 32 times, and a linear ramp between
  (pair indices low..high of ``yarn_range``); q and k are both multiplied by 0.1 ln s + 1, the attention temperature;
- **partial** (p-RoPE, Barbero et al. 2024): only the fastest ``fraction`` of each head's pairs turn, the rest
  keep angle 0;
- **nope4**: RoPE as trained, but no rotation at all in every fourth layer (3, 7, 11, ...).

Attention runs a block of query rows at a time (the (nh, T, T) weights never exist at once); the per-layer
measures read ``SAMPLED_ROWS`` query rows spread evenly over the copies after the first. Shapes: T tokens,
C = 576, nh = 9, kv = 3, hs = 64, L = 30 layers (``mha_core``'s glossary).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mha_core.marks import N_
from mha_core.positions import rotate
from mha_core.smollm2 import SmolLM2, rms_norm
from mha_core.steps import merge_heads, softmax, split_heads

METHODS = {
    "inside": N_("inside the trained length (positions 0..T−1)"),
    "trained": N_("RoPE as trained"),
    "linear": N_("position interpolation (linear)"),
    "ntk": N_("NTK-aware"),
    "dynamic": N_("dynamic NTK"),
    "yarn": N_("YaRN"),
    "partial": N_("partial RoPE"),
    "nope4": N_("no RoPE in every fourth layer"),
}
MAX_LONG_TOKENS = 2048  # the cap on T: a run at 2048 takes ~1 min on one core
DEFAULT_LONG_TOKENS = 256
MIN_LONG_TOKENS = 64
SAMPLED_ROWS = 64  # query rows the per-layer measures read
QUERY_BLOCK = 256  # query rows of attention computed at a time: (nh, 256, T) float32 = 19 MB at T = 2048
BETA_FAST, BETA_SLOW = 32.0, 1.0  # YaRN's defaults (turns over the trained length)
NOPE_EVERY = 4
LONG_TEXT = (
    "The lighthouse keeper climbs the stairs each evening, trims the wick, and watches the ships pass the reef. "
    "When fog rolls in, she rings the bell every minute until dawn."
)  # ~40 tokens, repeated to T

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class LongSetting:
    """One run: ``method`` (a key of ``METHODS``), ``factor`` s (the farthest pair lies s times the trained length
    apart, and the scaling's factor), ``fraction`` of pairs turned by partial RoPE, ``n_tokens`` T."""

    method: str = "yarn"
    factor: float = 2.0
    fraction: float = 0.5
    n_tokens: int = DEFAULT_LONG_TOKENS

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method {self.method!r} is not one of {', '.join(METHODS)}")
        if not 1.0 <= self.factor <= 16.0:
            raise ValueError(f"factor must lie in 1..16, got {self.factor}")
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"fraction must lie in 0..1, got {self.fraction}")
        if not MIN_LONG_TOKENS <= self.n_tokens <= MAX_LONG_TOKENS:
            raise ValueError(f"T must lie in {MIN_LONG_TOKENS}..{MAX_LONG_TOKENS}, got {self.n_tokens}")


def gap(setting: LongSetting, trained: int) -> int:
    """G: 0 for "inside", else round(s * L_train) - T, at least 0 (the positions left out after the first copy)."""
    if setting.method == "inside":
        return 0
    return max(0, round(setting.factor * trained) - setting.n_tokens)


def long_positions(setting: LongSetting, trained: int, period: int) -> np.ndarray:
    """RoPE positions of the T tokens: i for the first copy (i < n), i + G after it, (T,) int64."""
    positions = np.arange(setting.n_tokens, dtype=np.int64)  # (T,)
    positions[period:] += gap(setting, trained)
    return positions


def yarn_range(head_size: int, base: float, trained: int) -> tuple[float, float]:
    """YaRN's pair indices (low, high): pair p turns L_train * theta_p / 2π times over the trained length; low is
    where it turns ``BETA_FAST`` times, high where it turns ``BETA_SLOW`` times (floored, ceiled, clipped)."""

    def pair_turning(turns: float) -> float:
        return head_size * math.log(trained / (turns * 2 * math.pi)) / (2 * math.log(base))

    return max(math.floor(pair_turning(BETA_FAST)), 0), min(math.ceil(pair_turning(BETA_SLOW)), head_size - 1)


def yarn_ramp(head_size: int, base: float, trained: int) -> np.ndarray:
    """Each pair's share of interpolation (hs/2,): 0 for the fast pairs (below low), 1 for the slow (above high)."""
    low, high = yarn_range(head_size, base, trained)
    high = high + 0.001 if high == low else high
    return np.clip((np.arange(head_size // 2) - low) / (high - low), 0.0, 1.0)  # (hs/2,)


def inverse_frequencies(method: str, factor: float, head_size: int, base: float, trained: int,
                        seq_len: int) -> tuple[np.ndarray, float]:
    """theta_p of each pair (hs/2,) float64 and the factor q and k are multiplied by, for a scaling ``method``
    ("partial" and "nope4" turn as trained here; ``layer_angles`` drops their pairs). ``seq_len`` = largest
    position + 1 (dynamic NTK only)."""
    exponent = np.arange(0, head_size, 2) / head_size  # (hs/2,): 2p/hs
    trained_theta = base ** -exponent  # (hs/2,)
    if method == "linear":
        return trained_theta / factor, 1.0
    if method == "ntk":
        return (base * factor ** (head_size / (head_size - 2))) ** -exponent, 1.0
    if method == "dynamic":
        grown = factor * max(seq_len, trained) / trained - (factor - 1)
        return (base * grown ** (head_size / (head_size - 2))) ** -exponent, 1.0
    if method == "yarn":
        ramp = yarn_ramp(head_size, base, trained)  # (hs/2,)
        temperature = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
        return trained_theta / factor * ramp + trained_theta * (1 - ramp), temperature
    return trained_theta, 1.0


def layer_angles(setting: LongSetting, index: int, positions: np.ndarray, head_size: int, base: float,
                 trained: int) -> tuple[np.ndarray, float]:
    """The angle of every (token, pair) in layer ``index`` (T, hs/2) and the q, k multiplier."""
    theta, multiplier = inverse_frequencies(setting.method, setting.factor, head_size, base, trained,
                                            int(positions.max()) + 1)  # (hs/2,)
    if setting.method == "nope4" and index % NOPE_EVERY == NOPE_EVERY - 1:
        theta = np.zeros_like(theta)
    if setting.method == "partial":
        turned = round(setting.fraction * head_size / 2)  # the fastest pairs: p = 0..turned-1
        theta = np.where(np.arange(head_size // 2) < turned, theta, 0.0)  # (hs/2,)
    return positions.astype(np.float64)[:, None] * theta, multiplier  # (T, hs/2)


def sampled_rows(n_tokens: int, period: int, count: int = SAMPLED_ROWS) -> np.ndarray:
    """``count`` query rows spread evenly over period..T-1 (the copies after the first), sorted, unique."""
    start = min(period, n_tokens - 1)
    return np.unique(np.linspace(start, n_tokens - 1, count).round().astype(np.int64))  # (S,)


@dataclass(frozen=True)
class LongRun:
    """One long run: ``positions (T,)``; ``rows (S,)`` the sampled queries; per layer and head (L, nh) over those
    rows: ``entropy`` of the weights (nats), ``first`` the weight on token 0, ``induction`` the weight on key
    i − n + 1 (the token after the earlier copy, n = ``period``); ``losses (T-1,)`` the loss on each next token;
    ``final (T, C)`` the normed last residual."""

    setting: LongSetting
    period: int
    positions: np.ndarray
    rows: np.ndarray
    entropy: np.ndarray
    first: np.ndarray
    induction: np.ndarray
    losses: np.ndarray
    final: np.ndarray

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    def mean_loss(self, start: int = 0) -> float:
        """Mean loss over next-token predictions from position ``start`` on."""
        return float(self.losses[start:].mean())


def long_token_ids(model: SmolLM2, text: str, n_tokens: int) -> tuple[np.ndarray, int]:
    """``text``'s tokens repeated to T tokens (the tokens tiled, so every copy is the same ids) and the period n."""
    ids = model.encode(text)  # (n,)
    if ids.size < 2:
        raise ValueError("the repeated text needs at least 2 tokens")
    if ids.size * 2 > n_tokens:
        raise ValueError(f"the text has {ids.size} tokens: T = {n_tokens} holds fewer than two copies")
    return np.resize(ids, n_tokens), int(ids.size)  # (T,)


def attend_in_blocks(q: np.ndarray, k: np.ndarray, v: np.ndarray, rows: np.ndarray,
                     period: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Causal attention a block of queries at a time: q (nh, T, hs), k, v (nh, T, hs) -> heads (nh, T, hs) and the
    measures (nh,) each over the sampled ``rows``."""
    n_heads, n_tokens, head_size = q.shape
    heads = np.empty_like(q)  # (nh, T, hs)
    entropy, first, induction = (np.zeros((n_heads, rows.size)) for _i in range(3))  # (nh, S) each
    keys_t = np.ascontiguousarray(k.transpose(0, 2, 1) / np.sqrt(head_size, dtype=k.dtype))  # (nh, hs, T): BLAS
    for start in range(0, n_tokens, QUERY_BLOCK):
        stop = min(start + QUERY_BLOCK, n_tokens)
        logits = np.matmul(q[:, start:stop], keys_t[:, :, :stop])  # (nh, b, stop)
        future = np.arange(stop)[None, :] > np.arange(start, stop)[:, None]  # (b, stop)
        weights = softmax(np.where(future, -np.inf, logits), axis=-1)  # (nh, b, stop), rows sum to 1
        heads[:, start:stop] = weights @ v[:, :stop]  # (nh, b, hs)
        inside = (rows >= start) & (rows < stop)  # (S,)
        picked = weights[:, rows[inside] - start].astype(np.float64)  # (nh, s, stop)
        entropy[:, inside] = -(picked * np.log(np.where(picked > 0, picked, 1.0))).sum(axis=-1)
        first[:, inside] = picked[:, :, 0]
        induction[:, inside] = picked[:, np.arange(picked.shape[1]), rows[inside] - period + 1]
    return heads, {"entropy": entropy.mean(axis=1), "first": first.mean(axis=1), "induction": induction.mean(axis=1)}


def long_forward(model: SmolLM2, token_ids: np.ndarray, period: int, setting: LongSetting,
                 progress: Progress | None = None) -> LongRun:
    """Run ``token_ids`` (T,) (a text of ``period`` tokens repeated) through SmolLM2 with ``setting``'s RoPE."""
    config, ids = model.config, np.asarray(token_ids, dtype=np.int64)  # (T,)
    if ids.size != setting.n_tokens:
        raise ValueError(f"{ids.size} token ids for a setting of T = {setting.n_tokens}")
    positions = long_positions(setting, config.context, period)  # (T,)
    rows = sampled_rows(ids.size, period)  # (S,)
    hs, group = config.head_size, config.group_size
    measures = {name: np.empty((config.n_layers, config.n_heads)) for name in ("entropy", "first", "induction")}
    x = model.embed(ids)  # (T, C)
    for index in range(config.n_layers):
        weights = model.layers[index]
        attention = weights.attention()
        normed = rms_norm(x, weights.attn_norm, config.eps)  # (T, C)
        angles, multiplier = layer_angles(setting, index, positions, hs, config.rope_base, config.context)
        q = rotate(split_heads(normed @ attention.w_q, config.n_heads), angles) * np.float32(multiplier)  # (nh,T,hs)
        k = rotate(split_heads(normed @ attention.w_k, config.kv_heads), angles) * np.float32(multiplier)  # (kv,T,hs)
        v = split_heads(normed @ attention.w_v, config.kv_heads)  # (kv, T, hs)
        heads, measured = attend_in_blocks(q, np.repeat(k, group, axis=0), np.repeat(v, group, axis=0), rows,
                                           period)  # (nh, T, hs)
        for name, values in measured.items():
            measures[name][index] = values
        x = model.after_attention(x, merge_heads(heads) @ attention.w_o, index)  # (T, C)
        if progress is not None:
            progress(index + 1, config.n_layers + 1)
    final = model.norm(x)  # (T, C)
    losses = model.read_out(final, ids)[0]  # (T-1,)
    if progress is not None:
        progress(config.n_layers + 1, config.n_layers + 1)
    return LongRun(setting, period, positions, rows, measures["entropy"], measures["first"], measures["induction"],
                   losses, final)
