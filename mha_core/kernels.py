"""Attention kernels: how a head turns its queries and keys into the weights it averages the values with.

One table of records, ``KERNELS``, read by the engine, the configuration's checks and every page:

- **softmax** (Vaswani et al. 2017): softmax(q k^T * scale) over the keys; rows sum to 1.
- **differential** (Ye et al. 2024, "Differential Transformer"): each head splits its q and k in two
  halves of hs/2 and takes two softmax maps, A1 from the first halves and A2 from the second; its
  weights are A1 - lambda * A2 (signed: a row sums to 1 - lambda), with the paper's
  lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init, lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for
  layer l = 1, 2, .... Each head's output A V is normalised on its own (RMSNorm over hv, no learned gain)
  and multiplied by 1 - lambda_init before the concatenation.
- **linear** (Katharopoulos et al. 2020): phi(x) = elu(x) + 1 > 0 replaces exp; the weights are
  phi(q_i) . phi(k_j) divided by their row sum (no scale, as in the paper). With a causal mask the same heads come from a recurrence whose state has a constant size:
  S_t = S_{t-1} + phi(k_t) v_t^T (hs x hv), z_t = z_{t-1} + phi(k_t) (hs,), out_t = phi(q_t)^T S_t / phi(q_t)^T z_t.

A kernel's function takes q (nh,Tq,hs), k (kv,Tk,hs), v (kv,Tk,hv) after positions, the mask, the
scale and the bias, and returns a ``KernelOutput``: the implied (nh,Tq,Tk) weights, the heads
weights @ v, what the heads concatenate (the normalised heads for differential) and its own
intermediates in a frozen record. ``Refusal`` rows say what a kernel cannot combine with, and how
to remove the conflict; ``mha_core.config`` turns them into messages.
"""

from __future__ import annotations

import inspect
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mha_core.decoder_state import Decoder
from mha_core.kernel_records import SOFTMAX_INPUTS, Refusal, RowScale, WeightInputs, default_words
from mha_core.linear_state import LINEAR_STATE, add_to_state, elu_plus_one, read_state
from mha_core.marks import N_, Message
from mha_core.positions import PositionScheme, position_scheme
from mha_core.steps import (
    apply_mask,
    attention_scores,
    scale_scores,
    softmax,
    weighted_sum,
)

DIFF_NORM_EPS = 1e-5  # RMSNorm's epsilon on each differential head (the paper's code and DiffLlama's default)
LAMBDA_STD = 0.1  # the paper's initialisation of the lambda vectors: normal(0, 0.1)


def _read_only(record) -> None:
    for value in record.__dict__.values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)


@dataclass(frozen=True)
class KernelOutput:
    """What a kernel returns: ``scores``, ``logits``, ``weights (nh,Tq,Tk)``, ``heads (nh,Tq,hv)`` = weights @ v,
    ``mixed (nh,Tq,hv)``: what the heads concatenate, and ``parts``: the kernel's own record (or None).

    ``scores`` is always the raw q . k of the whole head and ``logits`` scores * scale (+ bias), masked
    with -inf, with the layer's scale (a differential layer's is its half-head's, 1/sqrt(hs/2)): a softmax
    head's weights come from it; another kernel's from the maps its record's ``inputs`` names.
    """

    scores: np.ndarray
    logits: np.ndarray
    weights: np.ndarray
    heads: np.ndarray
    mixed: np.ndarray
    parts: object | None = None


def _scaled_logits(q, k, mask, scale: float, bias) -> tuple[np.ndarray, np.ndarray]:
    """Raw q . k and scaled (+ bias), masked logits, (nh, Tq, Tk) each."""
    scores = attention_scores(q, k)  # (nh, Tq, Tk)
    logits = scale_scores(scores, scale)  # (nh, Tq, Tk)
    if bias is not None:
        logits += bias
    return scores, apply_mask(logits, mask)  # (nh, Tq, Tk) x2


# ---- softmax ---------------------------------------------------------------------------------


def softmax_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False, params=None) -> KernelOutput:
    """softmax(q k^T * scale + bias, masked) @ v: the 2017 head. Rows sum to 1 (at most 1 with the null key)."""
    scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, Tq, Tk) x2
    weights = softmax(logits, axis=-1, null_key=null_key)  # (nh, Tq, Tk)
    heads = weighted_sum(weights, v)  # (nh, Tq, hv)
    return KernelOutput(scores, logits, weights, heads, heads)


# ---- differential ----------------------------------------------------------------------------


def lambda_init_for_layer(layer: int) -> float:
    """The paper's lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for layer l = 1, 2, ... (0.2 for the first)."""
    return 0.8 - 0.6 * math.exp(-0.3 * (layer - 1))


@dataclass(frozen=True)
class DifferentialParams:
    """The learned scalars of a differential layer: four vectors of hs/2 (shared by the heads) and lambda_init.

    ``lambda_q1, lambda_k1, lambda_q2, lambda_k2 : (hs/2,)``; ``lambda_init`` from the layer's depth;
    ``norm_eps`` the epsilon of each head's RMSNorm.
    """

    lambda_q1: np.ndarray
    lambda_k1: np.ndarray
    lambda_q2: np.ndarray
    lambda_k2: np.ndarray
    lambda_init: float = 0.2
    norm_eps: float = DIFF_NORM_EPS

    def __post_init__(self) -> None:
        _read_only(self)

    @property
    def lam(self) -> float:
        """lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init (the paper's re-parameterisation)."""
        return float(math.exp(self.lambda_q1 @ self.lambda_k1) - math.exp(self.lambda_q2 @ self.lambda_k2)
                     + self.lambda_init)


def differential_params(head_size: int, seed: int, layer: int = 1) -> DifferentialParams:
    """The lambda vectors drawn as the paper initialises them, normal(0, 0.1), from their own stream of ``seed``."""
    rng = np.random.default_rng([seed, 2410, 5258])  # not the weights' stream: the layer's weights stay as they were
    q1, k1, q2, k2 = rng.normal(0.0, LAMBDA_STD, size=(4, head_size // 2))  # (hs/2,) each
    return DifferentialParams(q1, k1, q2, k2, lambda_init_for_layer(layer))


def plain_differential_params(head_size: int) -> DifferentialParams:
    """Zero lambda vectors: lambda = lambda_init (0.2 for the first layer)."""
    zero = np.zeros(head_size // 2)  # (hs/2,)
    return DifferentialParams(zero, zero, zero, zero)


@dataclass(frozen=True)
class DifferentialParts:
    """A differential layer's own intermediates; arrays are read-only.

    ``map1``, ``map2 (nh,Tq,Tk)``: softmax of the first and of the second halves' scaled, masked
    logits (``logits1``, ``logits2``); the weights are map1 - lam * map2. ``lam`` is lambda,
    ``output_gain`` = 1 - lambda_init; ``normed_heads (nh,Tq,hv)`` = RMSNorm(heads) * output_gain,
    what the heads concatenate. ``row_total`` = 1 - lam, the sum of a row that sees a key.
    """

    logits1: np.ndarray
    logits2: np.ndarray
    map1: np.ndarray
    map2: np.ndarray
    lam: float
    output_gain: float
    normed_heads: np.ndarray

    def __post_init__(self) -> None:
        _read_only(self)

    @property
    def row_total(self) -> float:
        return 1.0 - self.lam


def split_halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A head's features in two halves: (n, T, hs) -> (n, T, hs/2) twice."""
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]  # (n, T, hs/2) each


def rms_norm(x: np.ndarray, eps: float, gain: np.ndarray | None = None) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) over the last axis (times ``gain``); shape kept."""
    normed = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)  # x's shape
    return normed if gain is None else normed * gain


def differential_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False,
                        params: DifferentialParams | None = None) -> KernelOutput:
    """(softmax(q1 k1^T s) - lambda softmax(q2 k2^T s)) @ v per head, each head RMS-normalised, times 1 - lambda_init.

    ``scale`` s is the sub-head's, 1/sqrt(hs/2) in the paper. Rows of the weights sum to 1 - lambda.
    """
    params = plain_differential_params(q.shape[-1]) if params is None else params
    scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, Tq, Tk) x2: the whole head's
    (q1, q2), (k1, k2) = split_halves(q), split_halves(k)  # (nh, Tq, hs/2), (kv, Tk, hs/2)
    _, logits1 = _scaled_logits(q1, k1, mask, scale, bias)  # (nh, Tq, Tk)
    _, logits2 = _scaled_logits(q2, k2, mask, scale, bias)  # (nh, Tq, Tk)
    map1, map2 = softmax(logits1, axis=-1), softmax(logits2, axis=-1)  # (nh, Tq, Tk) each
    lam = params.lam
    weights = map1 - lam * map2  # (nh, Tq, Tk), signed
    heads = weighted_sum(weights, v)  # (nh, Tq, hv)
    normed = rms_norm(heads, params.norm_eps) * (1.0 - params.lambda_init)  # (nh, Tq, hv)
    parts = DifferentialParts(logits1, logits2, map1, map2, lam, 1.0 - params.lambda_init, normed)
    return KernelOutput(scores, logits, weights, heads, normed, parts)


# ---- linear ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearParts:
    """A linear-attention layer's own intermediates; arrays are read-only.

    ``phi_q (nh,Tq,hs)``, ``phi_k (kv,Tk,hs)``: the feature maps; ``similarity (nh,Tq,Tk)`` = phi(q) . phi(k),
    0 where masked; ``normaliser (nh,Tq)`` its row sums (the weights are similarity / normaliser).
    With a causal mask over one sentence, the recurrent form: ``recurrent_heads (nh,Tq,hv)``,
    and the state after the last token, ``state (nh,hs,hv)`` = S_T and ``state_sum (nh,hs)`` = z_T;
    None otherwise.
    """

    phi_q: np.ndarray
    phi_k: np.ndarray
    similarity: np.ndarray
    normaliser: np.ndarray
    recurrent_heads: np.ndarray | None = None
    state: np.ndarray | None = None
    state_sum: np.ndarray | None = None

    def __post_init__(self) -> None:
        _read_only(self)


@dataclass(frozen=True)
class LinearRecurrence:
    """The recurrent form over T tokens: ``heads (nh,T,hv)``, the last state ``state (nh,hs,hv)`` = S_T and
    ``state_sum (nh,hs)`` = z_T (only the running state is ever held: T of them would cost T times its size)."""

    heads: np.ndarray
    state: np.ndarray
    state_sum: np.ndarray


def linear_step(state: np.ndarray, state_sum: np.ndarray, phi_q_t, phi_k_t, v_t):
    """One token of the recurrence: add phi(k_t) v_t^T to S and phi(k_t) to z, then let phi(q_t) read them.

    ``state (nh,hs,hv)``, ``state_sum (nh,hs)``, ``phi_q_t (nh,hs)``, ``phi_k_t (nh,hs)``, ``v_t (nh,hv)``;
    returns the new state, the new sum and the head output ``(nh,hv)``. The token's own key is in
    the state it reads: query t attends to keys 0..t, as under a causal mask.
    """
    state, state_sum = add_to_state(state, state_sum, phi_k_t, v_t)  # (nh, hs, hv), (nh, hs)
    return state, state_sum, read_state(state, state_sum, phi_q_t)  # (nh, hs, hv), (nh, hs), (nh, hv)


def linear_recurrence(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray) -> LinearRecurrence:
    """Run ``linear_step`` over the tokens: phi_q (nh,T,hs), phi_k (kv,T,hs), v (kv,T,hv), query head h
    reading key/value head h // (nh/kv)."""
    n_heads, t, size = phi_q.shape
    group = n_heads // phi_k.shape[0]
    phi_k, v = np.repeat(phi_k, group, axis=0), np.repeat(v, group, axis=0)  # (nh, T, hs), (nh, T, hv)
    state = np.zeros((n_heads, size, v.shape[-1]), dtype=phi_q.dtype)  # (nh, hs, hv), constant size
    state_sum = np.zeros((n_heads, size), dtype=phi_q.dtype)  # (nh, hs)
    heads = []
    for i in range(t):
        state, state_sum, out = linear_step(state, state_sum, phi_q[:, i], phi_k[:, i], v[:, i])
        heads.append(out)
    return LinearRecurrence(np.stack(heads, axis=1), state, state_sum)  # (nh, T, hv), (nh, hs, hv), (nh, hs)


def _is_causal_square(mask, tq: int, tk: int) -> bool:
    return mask is not None and tq == tk and np.array_equal(np.broadcast_to(mask, mask.shape[:-2] + (tq, tk)),
                                                            np.broadcast_to(np.tri(tq, tk, dtype=bool),
                                                                            mask.shape[:-2] + (tq, tk)))


def linear_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False, params=None) -> KernelOutput:
    """phi(q) phi(k)^T, masked, divided by its row sums, @ v (Katharopoulos et al. 2020). No scale: the
    ratio is taken of phi's values. Rows sum to 1; a row with every key masked is 0."""
    scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, Tq, Tk) x2: the softmax head's view
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # (nh, Tq, hs), (kv, Tk, hs)
    similarity = attention_scores(phi_q, phi_k)  # (nh, Tq, Tk), > 0
    if mask is not None:
        similarity = np.where(mask, similarity, 0.0).astype(q.dtype)  # (nh, Tq, Tk)
    normaliser = similarity.sum(axis=-1)  # (nh, Tq)
    weights = similarity / np.where(normaliser > 0, normaliser, 1.0)[..., None]  # (nh, Tq, Tk)
    heads = weighted_sum(weights, v)  # (nh, Tq, hv)
    recurrent = None
    if _is_causal_square(mask, q.shape[1], k.shape[1]):
        recurrent = linear_recurrence(phi_q, phi_k, v)
    parts = LinearParts(phi_q, phi_k, similarity, normaliser,
                        None if recurrent is None else recurrent.heads,  # (nh, Tq, hv)
                        None if recurrent is None else recurrent.state,  # (nh, hs, hv)
                        None if recurrent is None else recurrent.state_sum)  # (nh, hs)
    return KernelOutput(scores, logits, weights, heads, heads, parts)


def map_kernel(weights_of: Callable[[np.ndarray], np.ndarray]) -> Callable[..., KernelOutput]:
    """The kernel function of a row whose weights are ``weights_of(logits)``: the scaled (+ bias), masked
    logits (nh, Tq, Tk), -inf where masked, in; the weights (nh, Tq, Tk), 0 where masked, out."""

    def attend(q, k, v, mask, scale: float, bias=None, null_key: bool = False, params=None) -> KernelOutput:
        scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, Tq, Tk) x2
        weights = np.asarray(weights_of(logits), dtype=logits.dtype)  # (nh, Tq, Tk)
        heads = weighted_sum(weights, v)  # (nh, Tq, hv)
        return KernelOutput(scores, logits, weights, heads, heads)

    return attend


# ---- the table of kernels --------------------------------------------------------------------


def _rms_norm_scale(parts: DifferentialParts, heads: np.ndarray) -> np.ndarray:
    """c_i = (1 - lambda_init) / sqrt(mean(row i of A·V ^ 2) + eps): ``rms_norm`` and the gain, per row. (nh, Tq)."""
    return parts.output_gain / np.sqrt(np.mean(heads * heads, axis=-1) + DIFF_NORM_EPS)  # (nh, Tq)


@dataclass(frozen=True)
class Kernel:
    """One attention kernel: its names, what is true of its weights, what it refuses, its function, and every
    hook a page reads instead of asking which kernel it is.

    Its words for the pages: ``weights_label`` names its weights, ``inputs`` the maps it makes them from
    (None: no such view is offered), ``scores_caption`` what the whole head's raw q . k is to it ("": the
    page's own caption holds).

    A kernel whose weights are one map of the scaled, masked logits gives ``weights_of`` (a module-level ``def``
    using only ``np``: the notebook embeds its source) instead of ``attend``; its words default from its names.
    """

    name: str  # the configuration's ``kernel`` and the link's value
    label: str  # the sidebar's words
    short_label: str  # a heading
    summary: str  # one sentence: what it does
    rows_sum_to_one: bool  # every row of weights that sees a key sums to 1
    row_sums: str  # what is true of a row's sum, in words for captions
    signed: bool  # weights can be negative: show them on a diverging scale
    attend: Callable[..., KernelOutput] | None = None  # None: ``map_kernel(weights_of)``
    row_sum: Callable[[object], float] | None = None  # a row's sum in this run, from the kernel's parts; None: 1
    row_sum_formula: str = "1"  # the same sum as a formula, e.g. "1 − λ"
    sub_heads: int = 1  # q and k split into this many parts per head (positions act on each; scale is the part's)
    recurrent: bool = False  # causal heads come from a constant-size state instead of a growing cache
    refuses: tuple[Refusal, ...] = ()
    paper: str = ""
    formula: str = ""
    weights_label: str = ""  # "": "weights (<short_label>)"
    inputs: WeightInputs | None = SOFTMAX_INPUTS  # a map kernel's default: its logits, in its words
    scores_caption: str = ""
    row_scale: RowScale | None = None  # None: a head's row i is Σ_j w_ij v_j as it is (c_i = 1)
    decoder: Decoder | None = None  # what its decoder keeps per token and how a step reads it; None: a KV cache
    cache_policies: bool = False  # a sliding window or attention sinks may evict from its cache (StreamingLLM)
    tiled: bool = False  # FlashAttention's online softmax tiles its rows (its weights are a softmax of the logits)
    # --- hooks the pages read (Step by step, the notebook, captions, the drill-down, the engine's setup)
    variant: bool = True  # pages say what it changes from the 2017 softmax head (row-sum captions, Decoding)
    drill_down: bool = False  # Step by step's drill-down re-derives one of its rows (a softmax row)
    params: Callable[[object], object] | None = None  # its learned parameters from a configuration; None: none
    steps: tuple[str, ...] = ("kernel_weights",)  # Step by step's step slugs where the softmax step stands
    drops: tuple[str, ...] = ()  # the softmax head's steps before that it has no use for ("scores", "scale", ...)
    after_mix: tuple[str, ...] = ()  # its own steps after A·V
    mix_why: str = ""  # what A·V is under it, when not an average ("": the page's own words)
    weights_of: Callable[[np.ndarray], np.ndarray] | None = None  # logits (nh,Tq,Tk) -> weights, for a map kernel
    weights_title: str = ""  # its weights step's title; "": "<Short label> weights, entry by entry"
    weights_tex: str = ""  # its weights step's formula (LaTeX); "": ``formula`` as text
    weights_why: str = ""  # its weights step's words; "": ``summary`` and ``row_sums``
    scale_why: str = ""  # what the scale step is for under it ("": the softmax head's words)
    mask_why: str = ""  # what a masked logit becomes under it ("": the softmax head's words)

    def __post_init__(self) -> None:
        if self.attend is None:
            if self.weights_of is None:
                raise ValueError(f"kernel {self.name!r} needs attend or weights_of: how its weights are made")
            object.__setattr__(self, "attend", map_kernel(self.weights_of))
        for field, value in default_words(self).items():  # the words the row leaves out, made from its names
            object.__setattr__(self, field, value)

    @property
    def rows_are_distributions(self) -> bool:
        """Every row of weights is a probability distribution (no weight below 0, sum 1): it has an entropy."""
        return self.rows_sum_to_one and not self.signed

    @property
    def weights_source(self) -> str:
        """The NumPy source of ``weights_of`` (its ``def``), as a notebook cell embeds it; "" without one."""
        return "" if self.weights_of is None else textwrap.dedent(inspect.getsource(self.weights_of)).strip()


def _no_null_key(what: Message) -> Refusal:
    return Refusal("null_key", Message(N_("the null key is a softmax₁ idea (+1 in a softmax's denominator); {what} has "
                                          "no such denominator: turn the null key off"), what=what), lambda c: bool(getattr(c, "null_key", False)),
                   {"null_key": False})


def _no_latent(what: Message) -> Refusal:
    return Refusal("mla_rank", Message(N_("multi-head latent attention is built on softmax heads (DeepSeek-V2); {what} "
                                          "with a latent key/value cache is not defined here: set the latent rank to 0"),
                                       what=what),
                   lambda c: bool(getattr(c, "mla_rank", 0)), {"mla_rank": 0, "mla_rope": 0})


def _scheme_of(config) -> PositionScheme:
    """The positional scheme record of ``config`` (none for a configuration without one)."""
    return position_scheme(getattr(config, "pe", "none"))


def _no_bias(what: Message) -> Refusal:
    """Refuses a positional scheme that adds a bias to the logits: what it does (ALiBi's, or any other), not its name."""
    return Refusal("pe", Message(N_("the positional scheme adds a bias to softmax logits (as ALiBi's distance penalty "
                                    "does); {what} has no reference with a bias: choose a scheme that turns q and k, one "
                                    "added to the tokens, or no positions"), what=what), lambda c: _scheme_of(c).has_bias, {"pe": "none"})


_DIFFERENTIAL = Message(N_("differential attention"))  # what a refusal names
_LINEAR = Message(N_("linear attention"))

KERNELS: dict[str, Kernel] = {
    kernel.name: kernel
    for kernel in (
        Kernel("softmax", N_("softmax (2017)"), N_("softmax"),
               N_("Each query's scores go through a softmax: positive weights that sum to 1."),
               rows_sum_to_one=True, row_sums=N_("each row sums to 1"), signed=False, attend=softmax_kernel,
               cache_policies=True, tiled=True, paper="Vaswani et al. 2017", formula="A = softmax(QKᵀ/√d_k)", variant=False,
               drill_down=True, steps=("softmax",)),
        Kernel("differential", N_("differential (A₁ − λA₂)"), N_("differential"),
               N_("Two softmax maps per head, from the two halves of q and k; the weights are the first minus λ "
                  "times the second, so common-mode attention cancels and weights can be negative."),
               rows_sum_to_one=False, row_sums=N_("each row sums to 1 − λ, and weights can be negative"), signed=True,
               attend=differential_kernel, sub_heads=2, row_sum=lambda parts: 1.0 - parts.lam, row_sum_formula="1 − λ",
               refuses=(_no_null_key(_DIFFERENTIAL), _no_bias(_DIFFERENTIAL), _no_latent(_DIFFERENTIAL),
                        Refusal("n_heads", N_("differential attention splits each head's q and k in two halves: the "
                                              "head size must be even (with RoPE a multiple of 4, each half turning in "
                                              "pairs); use fewer heads"),
                                lambda c: c.head_size % (4 if _scheme_of(c).turns else 2) != 0,
                                {"kernel": "softmax"})),
               paper="Ye et al. 2024", formula="A = softmax(Q₁K₁ᵀ/√d) − λ·softmax(Q₂K₂ᵀ/√d)",
               row_scale=RowScale(_rms_norm_scale, N_("(1 − λ_init) / rms of row i of A·V (the head's RMSNorm)")),
               weights_label=N_("weights A₁ − λA₂"),
               params=lambda c: differential_params(c.head_size, c.seed), steps=("diff_maps", "diff_combine"),
               drops=("scores", "scale", "mask"), after_mix=("diff_norm",),
               mix_why=N_("Each query's output is the sum of the value rows weighted by A₁ − λA₂: not an average, "
                          "since the weights can be negative and sum to 1 − λ. The next step normalises each head on "
                          "its own."),
               inputs=WeightInputs(
                   ("L₁", "L₂"), lambda logits, parts: (parts.logits1, parts.logits2),
                   N_("half-head logits L₁, L₂ (scaled + masked)"), "L₁, L₂", N_("scaled, masked half-head logit"),
                   N_("Colour = each half of the head scoring on its own, scaled and masked, centred on 0 (red above, "
                      "blue below): L₁ from the first halves of q and k, L₂ from the second (scale 1/√(d_k/2) under "
                      "the standard rule). A₁ = softmax(L₁) and A₂ = softmax(L₂) make the weights A₁ − λA₂. "
                      "Grey cells are masked (−∞): both softmaxes give them 0."), "half_logits_L1_L2"),
               scores_caption=N_("Colour = the raw dot product q·k of the whole head, centred on 0. A differential "
                                 "head never uses this sum: it scores the two halves on their own (L₁ and L₂, the view "
                                 "before, are its two terms, each scaled). Grey cells are masked.")),
        Kernel("linear", N_("linear (φ = elu + 1)"), N_("linear"),
               N_("φ(q)·φ(k) with φ = elu + 1 > 0 replaces exp, divided by its row sum; under a causal mask the "
                  "heads come from a running state of constant size."),
               rows_sum_to_one=True, row_sums=N_("each row sums to 1"), signed=False, attend=linear_kernel,
               recurrent=True, decoder=LINEAR_STATE,
               refuses=(_no_null_key(_LINEAR), _no_bias(_LINEAR), _no_latent(_LINEAR),
                        Refusal("scale_rule", N_("linear attention has no scale: φ(q)·φ(k) is divided by its row sum; "
                                                 "keep the standard scale rule"), lambda c: getattr(c, "scale_rule", "sqrt_dk") != "sqrt_dk",
                                {"scale_rule": "sqrt_dk"})),
               paper="Katharopoulos et al. 2020", formula="A_ij = φ(q_i)·φ(k_j) / Σ_j' φ(q_i)·φ(k_j')",
               weights_label=N_("weights φ(q)·φ(k) / row sum"),
               steps=("linear_phi", "linear_weights", "linear_state"), drops=("scores", "scale", "mask"),
               inputs=WeightInputs(
                   ("",), lambda logits, parts: (parts.similarity,), N_("φ(q)·φ(k), masked (before the row sum)"),
                   "φ(q)·φ(k)", "φ(q)·φ(k)",
                   N_("Colour = φ(q)·φ(k) with φ = elu + 1 > 0, from 0 up: what each query gives each key before its "
                      "row is divided by its sum, which gives the weights. No scale, no logits, no softmax. Grey cells "
                      "are masked: 0."), "phi_q_phi_k", signed=False, masked_is_neginf=False),
               scores_caption=N_("Colour = the raw dot product q·k, centred on 0. A linear head never forms it: φ = "
                                 "elu + 1 acts on q and on k before their product (φ(q)·φ(k), the view before). Grey "
                                 "cells are masked.")),
    )
}


def attention_kernel(name: str) -> Kernel:
    """The record of kernel ``name``; ValueError naming the choices otherwise."""
    if name not in KERNELS:
        raise ValueError(Message(N_("unknown attention kernel {name!r}: choose one of {choices}"), name=name,
                                 choices=", ".join(KERNELS)))
    return KERNELS[name]


def kernel_refusal(name: str, settings) -> Refusal | None:
    """The first refusal of kernel ``name`` that applies to ``settings`` (a configuration), or None."""
    return next((r for r in attention_kernel(name).refuses if r.applies(settings)), None)
