"""Where tokens stand: the positional schemes, one table of records, and the steps that apply them.

Attention alone cannot tell word order. Each scheme in ``SCHEMES`` says it one way:

- **sinusoidal** ("Attention Is All You Need") adds sin/cos waves of the position to the tokens,
  before attention;
- **RoPE** (Su et al. 2021) turns each pair of a query's or key's features by an angle
  proportional to the token's position, so that q_i . k_j depends on i - j only. Pairs are
  half-split as in LLaMA and GPT-NeoX: feature f is paired with feature f + hs/2;
- **ALiBi** (Press et al. 2022) adds -m_h |i - j| to head h's logits: a penalty growing with
  the distance, steeper in some heads than in others.

A scheme is a ``PositionScheme`` record: what it does (add to the tokens, turn q and k, add a
bias to the logits), the rules it brings, and its words: Step by step's title, formula and "why"
for the step where it acts, and the NumPy lines of its notebook cell. Every list, label, rule,
step and grid of the app reads ``SCHEMES`` and never asks which scheme it holds; ``apply_positions``
is the one place that turns q and k and makes the bias, for full attention and for a decoding step alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mha_core.marks import N_, Message

ROPE_BASE = 10000.0  # theta of RoPE: pair p turns by position * theta^(-2p/hs)


def rope_angles(positions: np.ndarray, head_size: int, base: float = ROPE_BASE) -> np.ndarray:
    """Angle of every (position, pair): positions (T,) -> (T, hs/2), angle = position * base^(-2p/hs).

    Always float64: an angle of 60 radians in float32 is off by up to 4e-6, and so would be
    every rotated q and k; ``rotate`` rounds only the cosines and sines to the attention's dtype.
    """
    pair = np.arange(0, head_size, 2)  # (hs/2,), 0, 2, 4, ...
    frequency = 1.0 / base ** (pair / head_size)  # (hs/2,)
    return np.asarray(positions, dtype=np.float64)[:, None] * frequency  # (T, hs/2)


def rotate(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Turn every pair (x_p, x_{p+hs/2}) by its angle: (nh, T, hs), (T, hs/2) -> (nh, T, hs).

    The 2-D rotation [[cos, -sin], [sin, cos]] applied to each pair; the length of every
    query and key is unchanged.
    """
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]  # (nh, T, hs/2) each
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)  # (T, hs/2) each
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)  # (nh, T, hs)


def alibi_slopes(n_heads: int) -> np.ndarray:
    """The paper's slope m_h of every head, (nh,): the geometric series 2^(-8/n), 2^(-16/n), ...

    For a head count that is not a power of two, the slopes of the power of two below it,
    then every other slope of the power of two above it, as many as are missing (the paper's
    reference code; BLOOM does the same).
    """
    below = 2 ** math.floor(math.log2(n_heads))
    slopes = _power_of_two_slopes(below)  # (below,)
    if below < n_heads:
        slopes = np.concatenate([slopes, _power_of_two_slopes(2 * below)[0::2][: n_heads - below]])  # (nh,)
    return slopes


def _power_of_two_slopes(n: int) -> np.ndarray:
    """2^(-8/n) to the powers 1..n, (n,)."""
    return 2.0 ** (-8.0 / n * np.arange(1, n + 1))  # (n,)


def alibi_bias(slopes: np.ndarray, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
    """The bias -m_h |i - j| added to head h's logits: (nh,), (Tq,), (Tk,) -> (nh, Tq, Tk).

    Causal rows (j <= i) get the paper's -m_h (i - j). A key after its query (j > i, possible
    without a causal mask) is penalised by its distance too, as in bidirectional ALiBi (e.g.
    MosaicBERT); the paper's -m_h (i - j) would reward it instead.
    """
    distance = np.abs(np.subtract.outer(q_positions, k_positions))  # (Tq, Tk), |i - j|
    return -slopes[:, None, None] * distance  # (nh, Tq, Tk)


def sinusoidal_positional_encoding(n_positions: int, d_model: int, dtype=np.float64) -> np.ndarray:
    """PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(same angle). Shape (T, C)."""
    positions = np.arange(n_positions)[:, None]  # (T, 1)
    pair = np.arange(d_model)[None, :] // 2  # (1, C), i for columns 2i and 2i+1
    angles = positions / np.power(10000.0, 2 * pair / d_model)  # (T, C)
    pe = np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))  # (T, C)
    return pe.astype(dtype)


def distance_bias(n_heads: int, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
    """ALiBi's bias with the paper's slopes: (nh,), (Tq,), (Tk,) -> (nh, Tq, Tk)."""
    return alibi_bias(alibi_slopes(n_heads), q_positions, k_positions)  # (nh, Tq, Tk)


# ---- the words of each scheme: its step and its notebook cell -----------------------------------


@dataclass(frozen=True)
class SchemeAt:
    """What a scheme's words may put numbers in for: the head shown and the layer's sizes."""

    head: int
    n_heads: int
    head_size: int
    rope_base: float = ROPE_BASE


def _sinusoidal_formula(at: SchemeAt) -> str:
    return r"X = E + P,\quad P_{t,2i} = \sin\!\big(t / 10000^{2i/C}\big),\ P_{t,2i+1} = \cos\!\big(t / 10000^{2i/C}\big)"


def _sinusoidal_why(at: SchemeAt) -> str:
    return Message(N_("Attention itself ignores word order; adding a position signal lets 'the' at 0 differ from "
                      "'the' at 4."))


def _sinusoidal_source(at: SchemeAt) -> str:
    return ("# P[t, 2i] = sin(t / 10000^(2i/C)), P[t, 2i+1] = cos(same angle)\n"
            "t = np.arange(max(T_q, T_k))[:, None]  # (T, 1)\n"
            "i = np.arange(C)[None, :] // 2  # (1, C): i for columns 2i and 2i+1\n"
            "angle = t / 10000.0 ** (2 * i / C)  # (T, C)\n"
            "P = np.where(np.arange(C) % 2 == 0, np.sin(angle), np.cos(angle))  # (T, C)")


def _rope_formula(at: SchemeAt) -> str:
    return (r"\begin{pmatrix} q'_p \\ q'_{p+h/2} \end{pmatrix} = \begin{pmatrix} \cos t\omega_p & -\sin t\omega_p \\ "
            r"\sin t\omega_p & \cos t\omega_p \end{pmatrix} \begin{pmatrix} q_p \\ q_{p+h/2} \end{pmatrix},\quad "
            rf"\omega_p = {at.rope_base:g}^{{-2p/{at.head_size}}}")


def _rope_why(at: SchemeAt) -> str:
    return Message(N_("RoPE turns each pair of features (d_p, d_(p+{half})) of a query or key by an angle proportional "
                      "to its position t, one speed per pair (base θ = {base}). Lengths stay the same, only directions "
                      "turn; a dot product of two turned vectors depends on the **difference** of their angles, so the "
                      "score depends on the offset i − j, not on where the pair sits. Values are not rotated."),
                   half=at.head_size // 2, base=f"{at.rope_base:g}")


def _rope_source(at: SchemeAt) -> str:
    return (f"# RoPE: pair p of a head of hs features turns by position * base^(-2p/hs)\n"
            f"base = {float(at.rope_base)!r}\n"
            "frequency = 1.0 / base ** (np.arange(0, hs, 2) / hs)  # (hs/2,)\n"
            "theta_q = np.arange(T_q)[:, None] * frequency  # (T_q, hs/2)\n"
            "theta_k = np.arange(T_k)[:, None] * frequency  # (T_k, hs/2)")


def _alibi_formula(at: SchemeAt) -> str:
    slope = float(alibi_slopes(at.n_heads)[at.head])
    return rf"L_{{ij}} = S_{{ij}}\, s - m_{{{at.head}}}\, |i - j|,\qquad m_{{{at.head}}} = {slope:.4g}"


def _alibi_why(at: SchemeAt) -> str:
    slopes = alibi_slopes(at.n_heads)
    listed = ", ".join(f"{m:.4g}" for m in slopes)
    return Message(N_("ALiBi adds no vector to the tokens: it subtracts a penalty growing with the distance from each "
                      "logit. Head {head}'s slope is m = {slope} (all heads: {listed}); a steep head looks near, a "
                      "gentle one far. Nothing here was learned, so it works for longer sentences than those seen in "
                      "training."), head=at.head, slope=f"{float(slopes[at.head]):.4g}", listed=listed)


ALIBI_SLOPES_SOURCE = (  # the notebook's lines for alibi_slopes: m (nh,) from nh
    "below = 2 ** int(np.floor(np.log2(nh)))  # the power of two at or below nh\n"
    "m = 2.0 ** (-8.0 / below * np.arange(1, below + 1))  # (below,)\n"
    "if below < nh:  # then every other slope of the next power of two\n"
    "    m = np.concatenate([m, (2.0 ** (-4.0 / below * np.arange(1, 2 * below + 1)))[0::2][: nh - below]])  # (nh,)\n")


def _alibi_source(at: SchemeAt) -> str:
    return ("# ALiBi: head h's slope m_h (the paper's geometric series), and the penalty -m_h |i - j|\n"
            + ALIBI_SLOPES_SOURCE +
            "B = -m[:, None, None] * np.abs(np.arange(T_q)[:, None] - np.arange(T_k)[None, :])  # (nh, T_q, T_k)")


# ---- the table of schemes -------------------------------------------------------------------


@dataclass(frozen=True)
class PositionScheme:
    """One positional scheme: its names, what it does to the computation, and the rules it brings.

    At most one of the three actions is usual, but none is required: a scheme with none is "no positions".
    """

    name: str  # the configuration's ``pe`` and the link's value
    label: str  # the sidebar's words for it
    short_label: str  # a heading, a summary line
    summary: str  # one sentence: what it does
    # (T, C) added to the tokens before attention, from (positions, d_model)
    add_to_tokens: Callable[[int, int], np.ndarray] | None = None
    # (T, hs/2) angles of every (position, pair), from (positions, hs, base); q and k are turned by them
    angles: Callable[[np.ndarray, int, float], np.ndarray] | None = None
    # (nh, Tq, Tk) added to the scaled scores, from (nh, query positions, key positions)
    bias: Callable[[int, np.ndarray, np.ndarray], np.ndarray] | None = None
    self_attention_only: bool = False  # it measures distances within one sentence
    paper: str = ""
    # Its words, read by Step by step and the notebook for the step where it acts (every one optional: without
    # them the step has a title and formula naming ``short_label``, and the notebook embeds the app's numbers).
    step_title: str = ""  # Step by step's title of that step
    bias_text: str = ""  # the bias in plain text, e.g. "−m·|i − j|" (panel titles, the drill-down)
    formula: Callable[[SchemeAt], str] | None = None  # LaTeX of that step, numbers put in
    why: Callable[[SchemeAt], str] | None = None  # Markdown: what that step does, for the head shown
    # The notebook's NumPy lines making the scheme's array from the notebook's names (T_q, T_k, C, nh, hs):
    # P (T, C) to add to the tokens, theta_q (T_q, hs/2) and theta_k (T_k, hs/2) to turn q and k, or B (nh, T_q, T_k)
    numpy_source: Callable[[SchemeAt], str] | None = None

    @property
    def inside_attention(self) -> bool:
        """It acts on q, k or the logits (not on the tokens): hand-built heads, which carry their own
        positions, cannot take it."""
        return self.angles is not None or self.bias is not None

    @property
    def turns(self) -> bool:
        """It turns q and k in pairs of features: the head size must be even, and the base applies."""
        return self.angles is not None

    @property
    def has_bias(self) -> bool:
        """It adds a bias to the logits (a rule about logits applies to it)."""
        return self.bias is not None

    @property
    def acts(self) -> bool:
        """It changes the computation at all (``none`` does not)."""
        return self.add_to_tokens is not None or self.inside_attention

    def title(self) -> str:
        """Step by step's title of the step where the scheme acts."""
        if self.step_title:
            return self.step_title
        name = Message(self.short_label)
        if self.has_bias:
            return Message(N_("Add the {name} bias to the logits"), name=name)
        if self.turns:
            return Message(N_("Rotate queries and keys by position ({name})"), name=name)
        return Message(N_("Add positional encoding ({name})"), name=name)


SCHEMES: dict[str, PositionScheme] = {
    scheme.name: scheme
    for scheme in (
        PositionScheme("none", N_("none"), N_("none"), N_("No position signal: attention sees a bag of tokens.")),
        PositionScheme("sinusoidal", N_("sinusoidal, added to the tokens"), N_("sinusoidal"),
                       N_("Sine and cosine waves of the position are added to every token before attention."),
                       add_to_tokens=sinusoidal_positional_encoding, paper="Vaswani et al. 2017",
                       step_title=N_("Add positional encoding"), formula=_sinusoidal_formula, why=_sinusoidal_why,
                       numpy_source=_sinusoidal_source),
        PositionScheme("rope", N_("RoPE (rotate q and k)"), N_("RoPE"),
                       N_("Each pair of a query's and key's features is turned by an angle proportional to its "
                          "position, so q_i · k_j depends on i − j only."),
                       angles=rope_angles, paper="Su et al. 2021",
                       step_title=N_("Rotate queries and keys by position (RoPE)"), formula=_rope_formula, why=_rope_why,
                       numpy_source=_rope_source),
        PositionScheme("alibi", N_("ALiBi (distance penalty on logits)"), N_("ALiBi"),
                       N_("−m_h |i − j| is added to head h's logits: a penalty growing with the distance."),
                       bias=distance_bias, self_attention_only=True, paper="Press et al. 2022",
                       step_title=N_("Add the ALiBi distance bias"), bias_text="−m·|i − j|", formula=_alibi_formula,
                       why=_alibi_why, numpy_source=_alibi_source),
    )
}


def position_scheme(name: str) -> PositionScheme:
    """The record of scheme ``name``; ValueError naming the choices otherwise."""
    if name not in SCHEMES:
        raise ValueError(_unknown_scheme(name))
    return SCHEMES[name]


def scheme_problem(name: str, head_size: int, cross: bool, rope_base) -> str | None:
    """Why scheme ``name`` cannot run on heads of ``head_size`` (in cross-attention when ``cross``), or None."""
    if name not in SCHEMES:
        return _unknown_scheme(name)
    scheme = SCHEMES[name]
    if scheme.turns:
        base_ok = isinstance(rope_base, int | float | np.integer | np.floating) and math.isfinite(rope_base)
        if not (base_ok and rope_base > 1):
            return Message(N_("RoPE base {base!r} must be a number above 1 (LLaMA uses 10000)"), base=rope_base)
        if head_size % 2:
            return Message(N_("{name} turns a head's features in pairs, so the head size must be even; it is {hs}"),
                           name=Message(scheme.short_label), hs=head_size)
    if scheme.self_attention_only and cross:
        return Message(N_("{name} penalises the distance between positions of one sentence; in cross-attention the "
                          "keys come from another sentence: use RoPE, sinusoidal or no positions there"),
                       name=Message(scheme.short_label))
    return None


def _unknown_scheme(name: str) -> Message:
    return Message(N_("unknown positional scheme {name!r}: choose one of {choices}"), name=name,
                   choices=", ".join(SCHEMES))


def check_inside_attention(name: str, head_size: int, cross: bool, rope_base) -> None:
    """ValueError when scheme ``name`` cannot act inside this attention call (the engine's check)."""
    problem = scheme_problem(name, head_size, cross, rope_base)
    if problem is None and position_scheme(name).add_to_tokens is not None:
        problem = (f"pe={name!r} is added to the tokens before attention: add it to x (mha_core.positions) "
                   "and pass pe='none' here (MHAConfig runs do both)")
    if problem is not None:
        raise ValueError(problem)


@dataclass(frozen=True)
class Positioned:
    """q and k after a scheme acted on them, its bias, and what the trace keeps of it.

    ``q (nh,Tq,hs)``, ``k (kv,Tk,hs)`` turned or as they came; ``bias (nh,Tq,Tk')`` or None;
    for a scheme that turns: ``q_unrotated``, ``k_unrotated`` and the angles ``q_angles (Tq,hs/2)``,
    ``k_angles (Tk,hs/2)`` (always float64, see ``rope_angles``).
    """

    q: np.ndarray
    k: np.ndarray
    bias: np.ndarray | None = None
    q_unrotated: np.ndarray | None = None
    k_unrotated: np.ndarray | None = None
    q_angles: np.ndarray | None = None
    k_angles: np.ndarray | None = None


def apply_positions(
    name: str,
    q: np.ndarray,
    k: np.ndarray,
    q_positions: np.ndarray,
    k_positions: np.ndarray,
    *,
    rope_base: float = ROPE_BASE,
    key_positions: np.ndarray | None = None,
) -> Positioned:
    """What scheme ``name`` does inside attention: turn q (nh,Tq,hs) and k (kv,Tk,hs), make the bias.

    ``q_positions (Tq,)`` and ``k_positions (Tk,)`` are where the given queries and keys stand.
    ``key_positions (Tk',)``: every key the queries meet, when ``k`` holds only some of them (a
    decoding step turns its new key alone, while its query meets the whole cache); default k_positions.
    A scheme that adds to the tokens has already acted (on x) and changes nothing here.
    """
    scheme = position_scheme(name)
    key_positions = k_positions if key_positions is None else key_positions
    bias = None
    if scheme.bias is not None:
        bias = scheme.bias(q.shape[0], q_positions, key_positions).astype(q.dtype)  # (nh, Tq, Tk')
    if not scheme.turns:
        return Positioned(q, k, bias)
    q_angles = scheme.angles(q_positions, q.shape[-1], rope_base)  # (Tq, hs/2)
    k_angles = scheme.angles(k_positions, k.shape[-1], rope_base)  # (Tk, hs/2)
    return Positioned(rotate(q, q_angles), rotate(k, k_angles), bias, q, k, q_angles, k_angles)  # (nh,Tq,hs), (kv,Tk,hs)
