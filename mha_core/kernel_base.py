"""The record of an attention kernel (``Kernel``), what its function returns (``KernelOutput``), the softmax
head every other kernel is measured against, ``map_kernel`` for a kernel whose weights are one map of the
logits, and the refusals several kernels share. A kernel's own module defines its function and its row from
these; ``mha_core.kernels`` gathers the rows into the table ``KERNELS``."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mha_core.decoder_state import Decoder
from mha_core.kernel_records import SOFTMAX_INPUTS, Refusal, RowScale, WeightInputs, default_words
from mha_core.marks import N_, Message
from mha_core.positions import PositionScheme, position_scheme
from mha_core.steps import apply_mask, attention_scores, scale_scores, softmax, weighted_sum


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


def map_kernel(weights_of: Callable[[np.ndarray], np.ndarray]) -> Callable[..., KernelOutput]:
    """The kernel function of a row whose weights are ``weights_of(logits)``: the scaled (+ bias), masked
    logits (nh, Tq, Tk), -inf where masked, in; the weights (nh, Tq, Tk), 0 where masked, out."""

    def attend(q, k, v, mask, scale: float, bias=None, null_key: bool = False, params=None) -> KernelOutput:
        scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, Tq, Tk) x2
        weights = np.asarray(weights_of(logits), dtype=logits.dtype)  # (nh, Tq, Tk)
        heads = weighted_sum(weights, v)  # (nh, Tq, hv)
        return KernelOutput(scores, logits, weights, heads, heads)

    return attend


# ---- the record of a kernel ------------------------------------------------------------


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
    reads_input: bool = False  # its function also takes x= (Tq, C): the query side's input (a gate, a decay, a step size)
    # (q (nh,T,hs), k (kv,T,hs), params) -> (q, k) of the same shapes, applied right after the heads are split and
    # before any positional scheme turns them (QK-norm's RMSNorm); None: q and k go on as projected
    before_positions: Callable[[np.ndarray, np.ndarray, object], tuple[np.ndarray, np.ndarray]] | None = None
    decoder: Decoder | None = None  # what its decoder keeps per token and how a step reads it; None: a KV cache
    cache_policies: bool = False  # a sliding window or attention sinks may evict from its cache (StreamingLLM)
    tiled: bool = False  # FlashAttention's online softmax tiles its rows (its weights are a softmax of the logits)
    # (its parts, head) -> (Tq, hv): what multiplies the tiled kernel's finished O = softmax(S)·V, feature by feature,
    # after the kernel (gated attention's gate); None: O is what the head hands on. ``after_tiles_words`` says it.
    after_tiles: Callable[[object, int], np.ndarray] | None = None
    after_tiles_words: str = ""
    # --- hooks the pages read (Step by step, the notebook, captions, the drill-down, the engine's setup)
    variant: bool = True  # pages say what it changes from the 2017 softmax head (row-sum captions, Decoding)
    drill_down: bool = False  # Step by step's drill-down re-derives one of its rows (a softmax row)
    params: Callable[[object], object] | None = None  # its learned parameters from a configuration; None: none
    steps: tuple[str, ...] = ("kernel_weights",)  # Step by step's step slugs where the softmax step stands
    drops: tuple[str, ...] = ()  # the softmax head's steps before that it has no use for ("scores", "scale", ...)
    after_mix: tuple[str, ...] = ()  # its own steps after A·V
    output_words: str = ""  # what a head puts into the concatenation when more than A·V ({fields} of its parts)
    early_steps: tuple[str, ...] = ()  # its own steps after the heads are split, before positions (``before_positions``)
    mix_why: str = ""  # what A·V is under it, when not an average ("": the page's own words)
    weights_of: Callable[[np.ndarray], np.ndarray] | None = None  # logits (nh,Tq,Tk) -> weights, for a map kernel
    weights_title: str = ""  # its weights step's title; "": "<Short label> weights, entry by entry"
    weights_tex: str = ""  # its weights step's formula (LaTeX); "": ``formula`` as text
    weights_why: str = ""  # its weights step's words; "": ``summary`` and ``row_sums``
    scale_why: str = ""  # what the scale step is for under it ("": the softmax head's words)
    mask_why: str = ""  # what a masked logit becomes under it ("": the softmax head's words)
    tunes: tuple[str, ...] = ()  # the configuration fields of its own settings (top-k...): their rows apply only then
    softmax_rows: bool = False  # its weights are a softmax over some keys (sparse): captions do not say "no softmax"
    heads_sections: tuple[str, ...] = ()  # its own sections on the Heads page, by slug (ui/pages/heads/kernel_sections.py)
    # (nh, Tq): the weight each row gives to no key (a learned sink), from its parts; captions give the run's range
    # in ``spare_words`` ({kernel}, {low}, {high}). None: every row that sees a key sums to ``row_sum`` (or 1)
    spare: Callable[[object], np.ndarray] | None = None
    spare_words: str = ""

    def __post_init__(self) -> None:
        if self.attend is None:
            if self.weights_of is None:
                raise ValueError(f"kernel {self.name!r} needs attend or weights_of: how its weights are made")
            object.__setattr__(self, "attend", map_kernel(self.weights_of))
        for field, value in default_words(self).items():  # the words the row leaves out, made from its names
            object.__setattr__(self, field, value)

    @property
    def rows_are_distributions(self) -> bool:
        """Every row of weights is a probability distribution (no weight below 0, sum 1; or, as with the null key,
        with the rest on a ``spare`` sink of no value): it has an entropy."""
        return (self.rows_sum_to_one or self.spare is not None) and not self.signed

    @property
    def weights_source(self) -> str:
        """The NumPy source of ``weights_of`` (its ``def``), as a notebook cell embeds it; "" without one."""
        return "" if self.weights_of is None else textwrap.dedent(inspect.getsource(self.weights_of)).strip()


def no_null_key(what: Message) -> Refusal:
    return Refusal("null_key", Message(N_("the null key is a softmax₁ idea (+1 in a softmax's denominator); {what} has "
                                          "no such denominator: turn the null key off"), what=what), lambda c: bool(getattr(c, "null_key", False)),
                   {"null_key": False})


def no_latent(what: Message) -> Refusal:
    return Refusal("mla_rank", Message(N_("multi-head latent attention is built on softmax heads (DeepSeek-V2); {what} "
                                          "with a latent key/value cache is not defined here: set the latent rank to 0"),
                                       what=what),
                   lambda c: bool(getattr(c, "mla_rank", 0)), {"mla_rank": 0, "mla_rope": 0})


def scheme_of(config) -> PositionScheme:
    """The positional scheme record of ``config`` (none for a configuration without one)."""
    return position_scheme(getattr(config, "pe", "none"))


def no_bias(what: Message) -> Refusal:
    """Refuses a positional scheme that adds a bias to the logits: what it does (ALiBi's, or any other), not its name."""
    return Refusal("pe", Message(N_("the positional scheme adds a bias to softmax logits (as ALiBi's distance penalty "
                                    "does); {what} has no reference with a bias: choose a scheme that turns q and k, one "
                                    "added to the tokens, or no positions"), what=what), lambda c: scheme_of(c).has_bias, {"pe": "none"})


def before_positions(kernel: Kernel, q: np.ndarray, k: np.ndarray, params) -> tuple[np.ndarray, np.ndarray]:
    """q (nh,T,hs) and k (kv,T,hs) as the kernel's row wants them before positions (``Kernel.before_positions``)."""
    return (q, k) if kernel.before_positions is None else kernel.before_positions(q, k, params)
