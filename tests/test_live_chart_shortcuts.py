"""Two shortcuts of issue 38's server CPU per run: the default template's JSON made once (ui/widgets/live.py), and the
page menu's session-state presenter taken away (ui/widgets/page_menu.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from ui.charts import figure_rows, figures
from ui.widgets import live

ROOT = Path(__file__).resolve().parents[1]


def plain_json(spec: dict) -> str:
    """The figure's JSON from one pass of the standard encoder over all of it, the template included."""
    return json.dumps(spec, separators=(",", ":"), allow_nan=False, default=live._PLOTLY_ENCODER.default)


def heads_figures() -> list:
    result = run(MHAConfig(seed=11))
    trace = result.trace
    return [figures.attention_grid(trace.weights, result.query_labels, result.key_labels, kind="weights"),
            figures.similarity_heatmap(np.corrcoef(trace.weights.reshape(trace.n_heads, -1))),
            figure_rows.concat_and_output(trace.concat, result.query_labels, trace.n_heads, trace.output)]


@pytest.mark.parametrize("template", ["plotly", "plotly_dark", "plotly", "simple_white"])
def test_a_figures_json_with_the_kept_template_text_is_the_whole_figure_encoded(template, monkeypatch):
    """Each template in turn, the first one again after others (planted: the kept text made once for whichever
    template came first answered for the others, and a figure in "plotly_dark" was sent with "plotly"'s)."""
    monkeypatch.setattr(pio.templates, "default", template)
    for fig in heads_figures():
        spec = fig.sendable()
        assert spec["layout"]["template"] == pio.templates[template].to_plotly_json()
        text = live._json_text(spec)
        assert text == plain_json(spec)
        assert json.loads(text)["layout"]["template"] == spec["layout"]["template"]


def test_a_figure_with_a_nan_outside_its_arrays_still_goes_plotlys_way():
    spec = figures.similarity_heatmap(np.eye(2)).sendable()
    spec = {**spec, "layout": {**spec["layout"], "meta": [float("nan")]}}
    assert json.loads(live._json_text(spec))["layout"]["meta"] == [None]


def test_the_page_menu_has_no_session_state_presenter_after_a_run():
    """Every selectbox, number input and text input of a run presents each components-v2 element's state; the page
    menu's presenter (never read) is dropped like the charts' (planted: without the drop it is still there)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    state = at.session_state._state._state  # Streamlit's SessionState behind AppTest's proxy
    widget_id = state._key_id_mapper.get_id_from_key("page_menu")
    assert widget_id in state._new_widget_state.widget_metadata  # the menu was drawn this run
    assert state._new_widget_state.widget_metadata[widget_id].presenter is None
