"""ui/widgets/live.py without a browser: what a live chart sends is the figure plotly would send, numbers intact;
AppTest sees it where the page put it, with its alt text; the plotly.js file it loads is in static/."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import plotly.io as pio
import shown_charts
from streamlit.testing.v1 import AppTest

from ui.charts.sent import figure
from ui.widgets import live

ROOT = Path(__file__).resolve().parents[1]


def test_the_payload_carries_the_figures_numbers_as_typed_arrays():
    z = np.random.default_rng(0).random((5, 7)).astype(np.float32)  # (T, T)
    z[1, 2] = np.nan  # a masked cell: NaN inside the typed array's bytes
    fig = figure([dict(type="heatmap", z=z, coloraxis="coloraxis")], dict(width=300))
    head, sent = live.figure_from_payload(live.payload(fig, config={"displayModeBar": False}, alt="five by seven"))
    assert head["config"] == live.chart_settings({"displayModeBar": False}) and head["alt"] == "five by seven"
    assert head["config"]["displayModeBar"] is False and head["config"]["showSendToCloud"] is False
    np.testing.assert_array_equal(shown_charts.decode(sent["data"][0]["z"]), z)  # NaN where it was, bit for bit
    assert sent["layout"]["width"] == 300


def test_a_nan_in_a_plain_list_is_sent_as_null_as_plotly_sends_it():
    fig = figure([dict(type="bar", x=["a", "b"], y=[float("nan"), 2.0])], {})  # a list, not an array
    _, sent = live.figure_from_payload(live.payload(fig))
    assert sent["data"][0]["y"] == [None, 2.0]
    assert sent == json.loads(pio.to_json(fig, validate=False))  # plotly's own JSON of the same figure


def test_a_figure_is_encoded_once_and_new_data_gets_a_new_digest():
    a = figure([dict(type="heatmap", z=np.eye(3))], {})
    b = figure([dict(type="heatmap", z=np.eye(3)[::-1].copy())], {})
    assert live.figure_json(a) is live.figure_json(a)  # kept on the figure object
    assert live.figure_json(a)[1] != live.figure_json(b)[1]
    assert not a._built  # reading the kept JSON did not build plotly's object tree


def test_apptest_sees_a_live_chart_in_its_column_with_its_key_and_alt(tmp_path):
    script = tmp_path / "page.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import numpy as np\nimport streamlit as st\nfrom ui.widgets.live import show_chart\nfrom ui.charts.sent import figure\n"
        "left, right = st.columns(2)\n"
        "show_chart(figure([dict(type='heatmap', z=np.arange(6.0).reshape(2, 3))], {}), key='demo', where=right,\n"
        "           alt='two rows')\n"
    )
    at = AppTest.from_file(str(script), default_timeout=30).run()
    assert not at.exception
    (element,) = shown_charts.chart_elements(at)
    assert shown_charts.key_of(element) == "demo"
    assert shown_charts.settings_of(element)["alt"] == "two rows"
    np.testing.assert_array_equal(shown_charts.decode(shown_charts.figure_of(element)["data"][0]["z"]),
                                  np.arange(6.0).reshape(2, 3))
    assert len(at.columns[1].get("bidi_component")) == 1 and not at.columns[0].get("bidi_component")


def test_the_plotly_js_file_and_its_licence_are_in_static_and_served():
    path = live.static_plotly_path()
    assert path.stat().st_size > 1_000_000
    assert (path.parent / path.name.replace(".min.js", ".LICENSE.txt")).read_text().startswith("MIT License")
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    assert "enableStaticServing = true" in config


def test_a_live_chart_leaves_no_presenter_in_session_state_and_its_state_still_reads(tmp_path):
    """ui.widgets.live drops the chart's session-state presenter (every selectbox presented every chart); a
    Streamlit upgrade that moves that private state would put the presenter back: this test notices."""
    script = tmp_path / "page.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import numpy as np\nimport streamlit as st\nfrom ui.widgets.live import show_chart\nfrom ui.charts.sent import figure\n"
        "show_chart(figure([dict(type='heatmap', z=np.eye(2))], {}), key='demo')\n"
        "st.selectbox('pick', [1, 2], key='pick')\n"
        "from streamlit.runtime.state.session_state_proxy import get_session_state\n"
        "state = get_session_state()._state\n"
        "widget_id = state._key_id_mapper.get_id_from_key('demo')\n"
        "st.text(f'presenter gone: {state._new_widget_state.widget_metadata[widget_id].presenter is None}')\n"
        "st.text(f'state: {dict(st.session_state.demo)}')\n"
    )
    at = AppTest.from_file(str(script), default_timeout=30).run()
    assert not at.exception
    assert [t.value for t in at.text] == ["presenter gone: True", "state: {}"]


def test_typed_arrays_are_plotlys_own_for_every_dtype_and_shape():
    from _plotly_utils.utils import to_typed_array_spec

    from ui.charts.sent import typed_array

    rng = np.random.default_rng(1)
    arrays = [rng.random((3, 4)).astype(np.float32), rng.random(5), rng.random((2, 3, 2)), rng.random((4, 3)).T,
              np.array([[np.nan, 1.0]], dtype=np.float32), np.arange(6).reshape(2, 3), np.array(["a", "b"]),
              np.zeros((0, 3)), rng.random((3, 3)).astype(">f8"), np.arange(-3, 3, dtype=np.int64) * 1000]
    for array in arrays:
        ours, plotlys = typed_array(array), to_typed_array_spec(array)
        if isinstance(plotlys, np.ndarray):
            np.testing.assert_array_equal(ours, plotlys)
        else:
            assert ours == plotlys, array
