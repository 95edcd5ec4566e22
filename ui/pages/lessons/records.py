"""What a lesson is made of, and the numbers several lessons share.

A ``Lesson`` names the confusion it answers and where learners raised it, the configurations
that show the point (each opens in the explorer and has a link), two or three sentences of
explanation, and a pure function that computes what the lesson shows (``Findings``): figure data on
one shared colour scale (``Grid``, ``Heatmap``), tables, and its claims as numbers (``Claim``).
No streamlit in here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mha_core.config import MHAConfig, run
from mha_core.contributions import head_contributions
from ui.i18n import _

# A sentence without repeated words: repeated words share one embedding, so they split the
# weight between their copies, which would blur the row-maximum numbers of several lessons.
SENTENCE = ("the", "cat", "sat", "on", "a", "mat")
BASE = MHAConfig(tokens=SENTENCE, d_model=16, n_heads=4, seed=0)
MEASURE_SEEDS = range(10)  # seeds averaged over in the measured tables


@dataclass(frozen=True)
class LessonPanel:
    """One configuration a lesson shows, and the explorer view it opens with."""

    caption: str
    config: MHAConfig
    view: Mapping[str, object] = field(default_factory=dict)  # keys of urlstate.VIEW_DEFAULTS


@dataclass(frozen=True)
class Grid:
    """Data for one ``attention_grid`` figure: every panel on one shared colour scale."""

    matrices: np.ndarray  # (n, Tq, Tk)
    row_labels: list[str]
    col_labels: list[str]
    titles: list[str]
    kind: str = "weights"
    max_cols: int = 4
    mask: np.ndarray | None = None  # True = may attend, broadcast to (n, Tq, Tk); masked cells are drawn grey


@dataclass(frozen=True)
class Heatmap:
    """Data for one ``matrix_heatmap``; a lesson's heatmaps are drawn side by side, same 0..1 range."""

    matrix: np.ndarray  # (R, C)
    row_labels: list[str]
    col_labels: list[str]
    title: str
    value_name: str
    row_name: str = "row"  # what a row is, for the hover text
    col_name: str = "column"
    allowed: np.ndarray | None = None  # (R, C) bool; False: a cell the row cannot see (grey with a ×, as if masked)


@dataclass(frozen=True)
class Claim:
    """The lesson's point as a sentence with live numbers, and whether the numbers bear it out."""

    text: str
    holds: bool


@dataclass(frozen=True)
class Findings:
    """Everything a lesson shows besides its text."""

    figures: tuple[Grid | Heatmap, ...]
    claims: tuple[Claim, ...]
    tables: tuple[tuple[str, pd.DataFrame], ...] = ()  # (caption, table)
    note: str = ""  # how to read the figures
    warning: str = ""  # what could not be computed on this server (a model file missing), shown as a warning


@dataclass(frozen=True)
class Lesson:
    """One confusion, the configurations that answer it, and the numbers that prove the answer."""

    key: str  # the value of ?lesson=
    title: str
    short_title: str  # the lesson picker's few words: 'Causal mask'
    question: str  # the confusion, as a learner asks it
    source: str  # where the confusion shows up, as a phrase: 'asked in llm-viz #13'
    source_url: str
    panels: tuple[LessonPanel, ...]
    explanation: str
    findings: Callable[[tuple[LessonPanel, ...]], Findings]


def contributions_of(config: MHAConfig) -> np.ndarray:
    """What each head adds to the output of ``config``'s run, shape (nh, Tq, C_out) (``head_contributions``)."""
    result = run(config)
    return head_contributions(result.trace.heads, result.weights.w_o)


def tiny(x: float) -> str:
    """A rounding-error-sized number: '0' when exactly zero, else one significant digit ('1e-16')."""
    return "0" if x == 0 else f"{x:.0e}"


def pct(x: float) -> str:
    """A share as a whole percent: 0.254 -> '25%'."""
    return f"{100 * x:.0f}%"


def head_titles(prefix: str, n_heads: int) -> list[str]:
    """Panel titles 'head 0', 'head 1', ... (in the run's language) after ``prefix``."""
    return [prefix + _("head {h}").format(h=h) for h in range(n_heads)]
