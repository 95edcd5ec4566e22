"""Cells whose weight is 0 because the row cannot see the key (masked, or evicted from a cache) are drawn as the
attention grid draws a masked cell: blank in the weights, under a solid grey layer with a × in each."""

from __future__ import annotations

import numpy as np
import shown_charts

from ui.charts.figures import MASKED_SOLID, matrix_heatmap
from ui.pipeline.panels import panel_figure, panels_figure
from ui.pipeline.records import Panel

LABELS = ["0:a", "1:b", "2:c", "3:d"]
WEIGHTS = np.array([[1.0, 0.0, 0.0, 0.0], [0.3, 0.7, 0.0, 0.0], [0.0, 0.4, 0.6, 0.0], [0.0, 0.0, 0.5, 0.5]])
HELD = WEIGHTS > 0  # (4, 4) what a window of 2 keeps: the zeros are the cells it cannot see


def as_array(z) -> np.ndarray:
    return shown_charts.decode(z).astype(float) if isinstance(z, dict) else np.array(z, dtype=float)


def check_covered(data: list, hidden: np.ndarray, hover: str) -> None:
    weights, grey = data
    shown = as_array(weights["z"])
    np.testing.assert_array_equal(np.isnan(shown), hidden)
    np.testing.assert_allclose(shown[~hidden], WEIGHTS[~hidden], atol=1e-7)  # float32 on the wire
    assert grey["colorscale"] == [[0.0, MASKED_SOLID], [1.0, MASKED_SOLID]] and grey["showscale"] is False
    np.testing.assert_array_equal(~np.isnan(as_array(grey["z"])), hidden)
    assert (np.array(grey["text"]) == "×").tolist() == hidden.tolist()
    assert hover in grey["hovertemplate"]
    assert (grey["x"], grey["y"]) == (weights["x"], weights["y"])


def test_a_panel_draws_the_cells_it_cannot_see_grey_with_a_cross():
    panel = Panel("window", WEIGHTS, LABELS, LABELS, "weight", kind="weights", allowed=HELD, masked_hover="evicted")
    data = panel_figure(panel).to_dict()["data"]
    check_covered(data, ~HELD, "evicted")
    assert all(text == "" for row, hide in zip(data[0]["text"], ~HELD, strict=True)
               for text, h in zip(row, hide, strict=True) if h)  # no dark "0.00" under the grey
    assert "0.70" in data[0]["text"][1]


def test_a_row_of_panels_covers_each_panel_on_its_own_axes():
    masked = Panel("window", WEIGHTS, LABELS, LABELS, "weight", kind="weights", allowed=HELD)
    plain = Panel("plain", WEIGHTS, LABELS, LABELS, "weight", kind="weights")
    data = panels_figure((plain, masked)).to_dict()["data"]
    assert len(data) == 3 and not np.isnan(as_array(data[0]["z"])).any()
    check_covered(data[1:], ~HELD, "masked")
    assert data[2]["xaxis"] == data[1]["xaxis"] == "x2"


def test_a_heatmap_with_a_causal_triangle_greys_it():
    causal = np.tri(4, dtype=bool)
    data = matrix_heatmap(WEIGHTS * causal, LABELS, LABELS, signed=False, zmin=0.0, zmax=1.0,
                          allowed=causal).to_dict()["data"]
    check_covered(data, ~causal, "masked")


def test_nothing_masked_adds_nothing():
    assert len(panel_figure(Panel("all", WEIGHTS, LABELS, LABELS, kind="weights", allowed=np.ones((4, 4), bool)))
               .to_dict()["data"]) == 1
    assert len(matrix_heatmap(WEIGHTS, LABELS, LABELS).to_dict()["data"]) == 1
