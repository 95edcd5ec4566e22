"""A Step-by-step step's matrices as one table, for its CSV download. No streamlit in here.

A step shows one to three matrices (``Step.panels``) of different shapes; the table stacks them:
index (matrix title, row label), one column per column label (a column another matrix has is empty).
The numbers are the panels' own, every digit kept; masked logits stay -inf.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_core.config import RunResult
from ui.pipeline.records import Step, step_inputs
from ui.pipeline.steps import build_steps


def step_frame(step: Step) -> pd.DataFrame | None:
    """Every matrix of ``step`` stacked into one long table (see the module docstring); None for a step without any."""
    if not step.panels:
        return None
    frames = [pd.DataFrame(np.asarray(panel.matrix, dtype=np.float64), index=list(panel.row_labels),
                           columns=list(panel.col_labels)) for panel in step.panels]
    titles = [panel.title for panel in step.panels]
    frame = pd.concat(frames, keys=titles, names=["matrix", "row"], sort=False)
    return frame


def run_step_frame(result: RunResult, head: int, slug: str, cell: tuple[int, int] | None = None) -> pd.DataFrame:
    """The table of step ``slug`` of ``result``'s pipeline for ``head`` (as Step by step builds it)."""
    found = [step for step in build_steps(step_inputs(result), head, cell) if step.slug == slug]
    if not found:
        raise ValueError(f"this run has no step {slug!r}")
    return step_frame(found[0])


def step_file_name(number: int, step: Step) -> str:
    """'step_07_mask.csv'."""
    return f"step_{number:02d}_{step.slug}.csv"
