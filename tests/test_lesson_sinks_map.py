"""The attention-sinks lesson's map (11 tokens, a window of 3): drawn with square cells at a size that fits a
1280x720 projector, and the keys the window no longer holds grey with a x, as masked cells are everywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from tests.test_cache_policy import policy_mask
from ui.pages.lessons.flash import LESSONS, SINK_WINDOW

ROOT = Path(__file__).resolve().parents[1]
SINKS = next(lesson for lesson in LESSONS if lesson.key == "sinks")


def test_the_map_marks_the_keys_the_window_does_not_hold():
    heat = SINKS.findings(SINKS.panels).figures[0]
    t = heat.matrix.shape[0]
    held = policy_mask("window", t, SINK_WINDOW, 0)  # (T, T) from the definition, by loops
    np.testing.assert_array_equal(heat.allowed, held)
    assert np.all(heat.matrix[~held] == 0)


@pytest.fixture(scope="module")
def presented() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["lesson"], at.query_params["present"] = "sinks", "1"
    at.switch_page("app_pages/lessons.py").run()
    assert not at.exception
    return at


def test_presented_the_map_has_square_cells_and_fits_a_projector(presented):
    chart = next(e for e in shown_charts.chart_elements(presented) if shown_charts.key_of(e) == "lesson_sinks_heatmap_0")
    layout = shown_charts.figure_of(chart)["layout"]
    assert shown_charts.settings_of(chart)["width"] == "content"  # its own width, not the page's
    assert layout["height"] <= 720 - 80 and layout["width"] < layout["height"] * 1.5, layout
    labels = shown_charts.figure_of(chart)["data"][0]["x"]
    assert layout["xaxis"]["tickvals"] == labels  # every token named: the cells are wide enough


def test_presented_the_evicted_keys_are_grey(presented):
    chart = next(e for e in shown_charts.chart_elements(presented) if shown_charts.key_of(e) == "lesson_sinks_heatmap_0")
    weights, grey = shown_charts.figure_of(chart)["data"]
    held = policy_mask("window", 11, SINK_WINDOW, 0)
    np.testing.assert_array_equal(np.isnan(shown_charts.decode(weights["z"])), ~held)
    assert (np.array(grey["text"]) == "×").tolist() == (~held).tolist()
