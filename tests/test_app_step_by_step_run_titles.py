"""Step by step draws a run of steps (scores, scale, mask; mix, concat; ...) as ONE chart under all their headings
(issue 38), so step 5's heading stands a screen above its panel at 1280x720. Each panel of such a chart names its
step: its title starts with the step's number, the number of a heading shown on the page, and the headings' block
says which steps the chart below holds. A step drawn alone keeps its own titles (its heading is right above)."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
import shown_charts
from app_opener import open_app
from shown_steps import step_titles, step_words

from mha_core.config import MHAConfig, run
from ui.pipeline.panels import panel_parts
from ui.pipeline.records import Panel, step_inputs
from ui.pipeline.steps import build_steps

PAGE = "app_pages/step_by_step.py"
NUMBERED = re.compile(r"^(\d+)\. (.*)$")


def written(title: str) -> str:
    """A panel title as a chart writes it over the panel (``panel_parts``: subscripts, ᵀ, ...)."""
    return panel_parts(Panel(title, np.zeros((1, 1)), ["a"], ["b"]), numbers=False)[1]["title"]["text"]


@pytest.mark.parametrize("link", [{}, {"mask": "causal"}, {"mask": "causal", "pe": "alibi", "heads": "2"}],
                         ids=["plain", "causal", "alibi"])
def test_each_panel_of_a_run_names_its_step(link):
    at = open_app(PAGE, **link, seed=3)
    config = MHAConfig(seed=3, mask=link.get("mask", "none"), pe=link.get("pe", "none"),
                       n_heads=int(link.get("heads", 4)))
    steps = build_steps(step_inputs(run(config)), 0, (0, 0))  # the page's head 0 and cell (0, 0)
    headings = step_titles(at)
    by_number = {number: step for number, step in enumerate(steps, start=1)}
    assert [f"{n}. " for n in by_number] == [h[: len(f"{n}. ")] for n, h in zip(by_number, headings, strict=False)]
    captions = html.unescape(step_words(at))  # the run's line under its steps' words, in their element
    runs = 0
    for key, figure in shown_charts.charts(at).items():
        notes = [a["text"] for a in figure["layout"].get("annotations", [])]
        numbered = [NUMBERED.match(text) for text in notes]
        if not notes or not all(numbered):
            assert not any(numbered), (key, notes)  # a chart numbers all its panels or none
            continue
        numbers = [int(m.group(1)) for m in numbered]
        shown_steps = sorted(set(numbers))
        assert len(shown_steps) >= 2, (key, notes)  # only a run of steps numbers its panels
        assert numbers == sorted(numbers)
        expected = [f"{n}. {panel.title}" for n in shown_steps for panel in by_number[n].panels]
        assert [m.group(0) for m in numbered] == [written(title) for title in expected], key
        assert (f"The chart below holds steps {shown_steps[0]} to {shown_steps[-1]}: each panel's title starts with "
                f"its step's number.") in captions
        runs += 1
    assert runs >= (2 if link else 1)  # E and P (positional: off here), the scores' run, the mix's run


def test_a_step_drawn_alone_keeps_its_titles():
    at = open_app(PAGE, seed=3)
    qkv = shown_charts.charts(at)["sbs_qkv_rows"]
    notes = [a["text"] for a in qkv["layout"]["annotations"]]
    assert notes and not any(NUMBERED.match(text) for text in notes), notes
