"""No chart offers to upload itself (plotly.js 4's "Share chart..." sends it to Plotly Cloud), and every camera
saves an SVG: for the live charts and for the st.plotly_chart way back (MHA_LIVE_CHARTS=0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from ui.widgets import live

ROOT = Path(__file__).resolve().parents[1]
# A page of each kind of chart: the heads grid, Step by step's panels, Decoding's steps, the lessons' figures.
PAGES = ("heads", "step_by_step", "decoding", "lessons")


def assert_no_upload(config: dict) -> None:
    """plotly.js shows its upload button unless ``showSendToCloud`` is false; removing it by name covers a plotly.js
    that has another switch for it."""
    assert config["showSendToCloud"] is False
    assert {"sendChartToCloud", "sendDataToCloud"} <= set(config["modeBarButtonsToRemove"])
    assert config["toImageButtonOptions"]["format"] == "svg"


def test_settings_drop_the_upload_whatever_a_page_asks():
    asked = {"showSendToCloud": True, "modeBarButtonsToRemove": ["lasso2d"], "displayModeBar": "hover"}
    settings = live.chart_settings(asked)
    assert_no_upload(settings)
    assert "lasso2d" in settings["modeBarButtonsToRemove"] and settings["displayModeBar"] == "hover"
    assert_no_upload(live.chart_settings(None))  # the default camera is an SVG too
    named = {"toImageButtonOptions": {"format": "svg", "filename": "mha-explorer_heads_weights"}}
    assert live.chart_settings(named)["toImageButtonOptions"]["filename"] == "mha-explorer_heads_weights"


def chart_configs(at) -> list[dict]:
    """The plotly.js config of every chart the run sent, as the browser gets it."""
    configs = []
    for element in shown_charts.chart_elements(at):
        if hasattr(element.proto, "spec"):  # st.plotly_chart
            configs.append(json.loads(element.proto.config))
        else:
            configs.append(shown_charts.settings_of(element)["config"])
    return configs


@pytest.mark.parametrize("drawn_live", [True, False], ids=["live", "plotly_chart"])
@pytest.mark.parametrize("page", PAGES)
def test_no_chart_of_a_page_can_be_uploaded(page, drawn_live, monkeypatch):
    monkeypatch.setattr(live, "LIVE", drawn_live)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    if page != "heads":
        at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception
    configs = chart_configs(at)
    kinds = {"plotly_chart" if hasattr(e.proto, "spec") else "live" for e in shown_charts.chart_elements(at)}
    assert configs and kinds == {"live" if drawn_live else "plotly_chart"}, page
    for config in configs:
        assert_no_upload(config)
