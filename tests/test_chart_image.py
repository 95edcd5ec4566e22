"""Every chart's camera button saves an SVG named after the page and the view (ui/charts/chart_image.py, chart_config)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from ui.charts.chart_image import file_stem, svg_button_options
from ui.state.device import current_page

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("heads", "step_by_step", "compare")


def test_the_page_is_read_from_the_url():
    pages = {"heads": 1, "step_by_step": 1}
    assert current_page("http://h:8501/step_by_step?x=1", pages, "heads") == "step_by_step"
    assert current_page("http://h:8501/", pages, "heads") == "heads"
    assert current_page(None, pages, "heads") == "heads"
    assert current_page("http://h/app/unknown", pages, "heads") == "heads"


def test_file_names_are_safe_and_name_page_and_view():
    assert file_stem("heads", "weights") == "mha-explorer_heads_weights"
    assert file_stem("step by step", "a/b") == "mha-explorer_step-by-step_a-b"
    assert svg_button_options("heads", "logits") == {"format": "svg", "filename": "mha-explorer_heads_logits"}


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_of_a_page_saves_an_svg_named_after_the_view(page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["view"] = "logits"
    at.run()
    if page != "heads":
        at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception
    charts = shown_charts.chart_elements(at)
    assert charts, page
    for chart in charts:
        config = json.loads(chart.proto.config) if hasattr(chart.proto, "spec") else shown_charts.settings_of(chart)["config"]
        options = config["toImageButtonOptions"]
        assert options["format"] == "svg"
        # AppTest has no URL, so the page is the default one; the view comes from the link's view=
        assert options["filename"].startswith("mha-explorer_") and options["filename"].endswith("_logits")
