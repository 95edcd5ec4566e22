"""What a step of the pipeline is made of: the inputs of a run (``StepInputs``), a matrix to show (``Panel``)
and a step (``Step``), with the small helpers that name shapes, feature columns and a head's block.

Shapes follow the glossary of ``mha_core``: T tokens (Tq queries, Tk keys), C = d_model,
nh heads, hs head size. Rows are tokens; heads are contiguous column blocks. No streamlit in here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mha_core.attention import AttentionTrace, AttentionWeights
from mha_core.config import RunResult
from mha_core.presets import PRESET_INITS
from ui.charts.numbers import fixed
from ui.i18n import N_, _
from ui.pipeline.step_kinds import STEP_KINDS, StepKind

MAX_TEXT_ROWS = 16  # write the numbers inside the cells of heatmaps up to this size


MAX_TEXT_COLS = 10


OUTLINE = dict(color="black", width=3)


QK_AXES = (N_("query i"), N_("key j"))


def qk_axes() -> tuple[str, str]:
    """The axis titles of a (query, key) matrix in the run's language (a panel carries its words translated, so
    the cached figure of each language is its own)."""
    return _(QK_AXES[0]), _(QK_AXES[1])


SCALE_RULE_LATEX = {
    "sqrt_dk": r"\frac{1}{\sqrt{d_k}}",
    "sqrt_t": r"\frac{1}{\sqrt{T_k}}",
    "none": "1",
    "temperature": r"\frac{1}{\tau}",
}


@dataclass(frozen=True)
class StepInputs:
    """What the step builders show: one attention call's trace, what went into it, and how to describe it.

    The toy pages make it from a ``RunResult`` (``step_inputs``), the Real model page from one layer
    of the checkpoint; neither needs a configuration it did not run.
    """

    trace: AttentionTrace
    weights: AttentionWeights
    query_labels: list[str]
    key_labels: list[str]
    embeddings: np.ndarray  # (Tq, C) before positional encoding
    key_embeddings: np.ndarray  # (Tk, C); the same array as ``embeddings`` in self-attention
    positional: np.ndarray | None  # (Tq, C) added to the embeddings, or None
    x_q: np.ndarray  # (Tq, C) what the queries are projected from
    x_kv: np.ndarray  # (Tk, C) what keys and values are projected from
    mask: np.ndarray | None  # (Tq, Tk), True = may attend; None = no mask
    mask_name: str = "none"  # how the mask was made ("causal", "padding", ...), for the text
    scale_rule: str = "sqrt_dk"  # a key of SCALE_RULE_LATEX: how trace.scale was chosen
    temperature: float = 1.0  # the divisor of scale_rule "temperature"
    is_cross: bool = False  # queries from one sentence, keys and values from another
    hand_built: bool = False  # a preset head: the positions are written into E, not added as P
    rope_base: float = 10000.0  # RoPE's theta, for the text (the angles themselves are in the trace)
    pe: str = "none"  # the run's positional scheme (mha_core.positions.SCHEMES): its words for the steps


def step_inputs(result: RunResult) -> StepInputs:
    """The step builders' inputs from a toy configuration's run."""
    config = result.config
    return StepInputs(
        trace=result.trace,
        weights=result.weights,
        query_labels=result.query_labels,
        key_labels=result.key_labels,
        embeddings=result.embeddings,
        key_embeddings=result.key_embeddings,
        positional=result.positional,
        x_q=result.x_q,
        x_kv=result.x_kv,
        mask=result.mask,
        mask_name=config.mask,
        scale_rule=config.scale_rule,
        temperature=config.temperature,
        is_cross=config.is_cross,
        hand_built=config.init in PRESET_INITS,
        rope_base=config.rope_base,
        pe=config.pe,
    )


@dataclass(frozen=True)
class Panel:
    """One matrix to show, as a heatmap or as a table of numbers.

    ``kind``: "signed" (diverging scale centred on 0), "weights" (fixed 0..1) or "mask"
    (1 = may attend, 0 = masked). ``block`` outlines columns [start, stop) (the chosen head's
    slice), ``row_block`` rows [start, stop); ``cell`` outlines one (row, column) cell (the
    drill-down's query and key). ``allowed`` False marks cells whose weight is 0 because the row cannot see the
    key (masked, or evicted from a cache): drawn as masked cells are, never as a dark "0.00".
    """

    title: str
    matrix: np.ndarray  # (R, K)
    row_labels: list[str]
    col_labels: list[str]
    value_name: str = "value"
    kind: str = "signed"
    block: tuple[int, int] | None = None
    row_block: tuple[int, int] | None = None
    cell: tuple[int, int] | None = None
    axis_titles: tuple[str, str] | None = None  # (rows, columns), e.g. ("query", "key")
    allowed: np.ndarray | None = None  # (R, K) bool; False: a cell the row cannot see, drawn grey with a ×
    masked_hover: str | None = None  # what hovering such a cell says (None: the masked cells' words)


@dataclass(frozen=True)
class Step:
    """One section of the page: why the step exists, its formula, its shapes and its matrices."""

    slug: str
    title: str
    why: str  # markdown, one or two sentences ("" for a step that is switched off)
    formula: str  # LaTeX ("" when off)
    shapes: str  # e.g. "(6, 16) @ (16, 16) -> (6, 16)" ("" when off)
    panels: tuple[Panel, ...] = ()
    note: str = ""  # markdown shown under the formula (e.g. "positional encoding is off")
    own_kind: StepKind | None = None  # a step a kernel's record describes (its weights): its kind in the row's words

    @property
    def kind(self) -> StepKind:
        """The step's record in ``STEP_KINDS`` (the toy pipeline's steps; the Real model adds one of its own), or
        the one it carries (``own_kind``)."""
        if self.own_kind is not None:
            return self.own_kind
        if self.slug not in STEP_KINDS:
            raise ValueError(f"step {self.slug!r} has no record in STEP_KINDS: add its names and summary there")
        return STEP_KINDS[self.slug]


def shape_text(a: np.ndarray) -> str:
    """'(6, 16)' for an array of shape (6, 16)."""
    return "(" + ", ".join(str(n) for n in np.shape(a)) + ")"


def matmul_shapes(a: np.ndarray, b: np.ndarray) -> str:
    """'(6, 16) @ (16, 16) -> (6, 16)', the product's shape worked out from the operands."""
    out = "(" + ", ".join(str(n) for n in np.shape(a)[:-1] + np.shape(b)[-1:]) + ")"
    return f"{shape_text(a)} @ {shape_text(b)} -> {out}"


def dim_labels(n: int, start: int = 0) -> list[str]:
    """Feature-column labels 'd0', 'd1', ...; ``start`` keeps a head's slice numbered as in the full matrix."""
    return [f"d{k}" for k in range(start, start + n)]


def head_block(head: int, size: int) -> tuple[int, int]:
    """Columns [start, stop) that head ``head`` owns in a matrix of heads laid side by side."""
    return head * size, (head + 1) * size


def latex_number(x: float, digits: int = 4) -> str:
    """A number for LaTeX: fixed decimals, -inf as -\\infty."""
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    return fixed(x, digits)

