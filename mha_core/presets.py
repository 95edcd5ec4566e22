"""Hand-built heads: weights constructed, not drawn, so the attention pattern is known in advance.

A preset writes each token's position and word into a few dimensions of its input vector:

    dims 0-1  position t as a point on a half circle, angle pi * t / T
    dims 2-3  the word as a point on a full circle, angle 2 pi * v / V (v = its index among the
              V distinct words)
    the rest  zero

Every head reads those dimensions through its first two query/key columns:

    identity      q_t = a * pos(t),   k_s = pos(s)   -> largest when s = t
    previous      q_t = a * pos(t-1), k_s = pos(s)   -> largest when s = t - 1 (a rotation)
    first         q_t = a * pos(0),   k_s = pos(s)   -> largest when s = 0
    same          q_t = a * word(t),  k_s = word(s)  -> largest on every copy of the same word
    uniform_head  q_t = 0                            -> every logit 0, weights 1/T

The gain ``a`` is chosen so that, after the scale, the best key beats the runner-up by a
logit gap of ln(1e8 * T): every other key together gets less than 1e-8 of the weight.
W_V copies dims 0-3 (position and word) into the first columns of every head, so a head's
output is the average position and word code of the tokens it attends to; W_O is the identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mha_core.inputs import vocabulary
from mha_core.marks import N_
from mha_core.steps import AttentionWeights


@dataclass(frozen=True)
class Preset:
    """One hand-built head: its ``init`` value and every name the app gives it."""

    init: str  # MHAConfig.init and the link's ?init=
    name: str  # short name, for titles: 'previous token'
    label: str  # the Weights menu's entry: 'hand-built: previous-token head'
    description: str  # one sentence: the pattern it promises


# The table every reader walks (the config's INITS, the settings' menu, the sidebar, the Lessons page);
# a new hand-built head is one row here plus its branch in ``preset_weights``.
PRESETS: dict[str, Preset] = {
    preset.init: preset
    for preset in (
        Preset("identity", N_("identity"), N_("hand-built: identity head"),
               N_("Identity head: each token attends to itself.")),
        Preset("previous", N_("previous token"), N_("hand-built: previous-token head"),
               N_("Previous-token head: each token attends to the one before it (the first to itself).")),
        Preset("first", N_("first token (sink)"), N_("hand-built: first-token (sink) head"),
               N_("First-token (sink) head: every token attends to token 0.")),
        Preset("same", N_("same token"), N_("hand-built: same-token head"),
               N_("Same-token head: a word attends to every copy of itself, so repeated words find each other.")),
        Preset("uniform_head", N_("uniform"), N_("hand-built: uniform head"),
               N_("Uniform head: queries are zero, so every key gets the same weight 1/T.")),
    )
}
PRESET_INITS = tuple(PRESETS)  # the init values, in table order


def _circle(angles: np.ndarray) -> np.ndarray:
    """Angles (T,) -> points on the unit circle, shape (T, 2)."""
    return np.stack([np.cos(angles), np.sin(angles)], axis=1)  # (T, 2)


def _position_step(n_positions: int) -> float:
    """Angle between neighbouring positions on the half circle."""
    return math.pi / max(n_positions, 1)


def preset_inputs(tokens, key_tokens, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs with position in dims 0-1 and word in dims 2-3: shapes (Tq, C) and (Tk, C)."""
    step = _position_step(max(len(tokens), len(key_tokens)))
    vocab = vocabulary(tokens, key_tokens)

    def encode(toks) -> np.ndarray:
        x = np.zeros((len(toks), d_model))  # (T, C)
        x[:, 0:2] = _circle(step * np.arange(len(toks)))
        x[:, 2:4] = _circle(2 * math.pi * np.array([vocab.index(t) for t in toks]) / len(vocab))
        return x

    x_q = encode(tokens)
    return x_q, (x_q if tuple(key_tokens) == tuple(tokens) else encode(key_tokens))


def _rotation(angle: float) -> np.ndarray:
    """2x2 matrix that turns a row vector by ``angle``: (cos t, sin t) @ R = (cos(t+angle), sin(t+angle))."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, s], [-s, c]])


def _margin(kind: str, n_positions: int, n_words: int) -> float:
    """cos(0) - cos(smallest angle to a rival key): the unscaled gap the gain must widen."""
    if kind == "same":
        return 1 - math.cos(2 * math.pi / n_words) if n_words > 1 else 1.0
    return 1 - math.cos(_position_step(n_positions))


def preset_weights(kind: str, config, scale: float) -> AttentionWeights:
    """W_Q, W_K, W_V, W_O of shape (C, C) that make every head follow the pattern ``kind``."""
    d_model, n_heads = config.d_model, config.n_heads
    hs = d_model // n_heads
    n_positions = max(len(config.tokens), len(config.key_tokens))
    n_words = len(vocabulary(config.tokens, config.key_tokens))
    gap = math.log(1e8 * n_positions)
    gain = gap / (_margin(kind, n_positions, n_words) * abs(scale)) if scale else 0.0

    read_q = np.zeros((2, 2))  # maps the 2 input dims read by the query to 2 query dims
    src = slice(0, 2)  # position dims
    if kind == "identity":
        read_q = np.eye(2)
    elif kind == "previous":
        read_q = _rotation(-_position_step(n_positions))
    elif kind == "same":
        src, read_q = slice(2, 4), np.eye(2)
    w_q = np.zeros((d_model, d_model))  # (C, nh*hs)
    w_k = np.zeros((d_model, d_model))  # (C, nh*hs)
    w_v = np.zeros((d_model, d_model))  # (C, nh*hv)
    copied = min(hs, 4)
    for h in range(n_heads):
        cols = slice(h * hs, h * hs + 2)  # the first two columns of head h
        w_k[src, cols] = np.eye(2)
        w_q[src, cols] = gain * read_q
        w_v[:copied, h * hs : h * hs + copied] = np.eye(copied)
    if kind == "first":
        # The query is the constant vector a * pos(0) = (a, 0); it comes from a bias, not from x.
        b_q = np.zeros(d_model)
        b_q[[h * hs for h in range(n_heads)]] = gain
        return AttentionWeights(w_q, w_k, w_v, _output(config), b_q=b_q)
    return AttentionWeights(w_q, w_k, w_v, _output(config))


def _output(config) -> np.ndarray | None:
    return np.eye(config.d_model) if config.output_projection else None
