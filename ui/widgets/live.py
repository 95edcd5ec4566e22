"""Charts that update in place: one plotly graph per key, redrawn with ``Plotly.react`` on new data.

``st.plotly_chart`` derives its element id from the figure's JSON even when a key is given, so every
change of data unmounts the chart and mounts a new one that draws from scratch (issue 22). Here a
Streamlit custom component (components v2: its JavaScript runs in the page, no iframe) keeps one
plotly graph div per key and hands each new figure to ``Plotly.react``, which redraws what changed.

Pages call one function, :func:`show_chart`, where they called ``st.plotly_chart``::

    show_chart(fig, key="heads_grid", config=chart_config(), alt="Attention weights of 4 heads")

What reaches the browser is one bytes payload (``payload``): a JSON line of settings (config, alt,
width, a digest of the figure, the plotly.js file), a newline, then the figure's JSON exactly as ``Figure.to_dict`` gives
it (numpy arrays as plotly's typed-array spec {dtype, bdata, shape}, which plotly.js reads natively).
The figure's JSON and digest are made once per figure object and kept on it: the cached figures
(``ui/run/cached_figures.py``) cost a byte copy to send again, and the browser skips a figure
whose digest (and theme) it has already drawn. AppTest sees a ``bidi_component`` element whose
``proto.bytes`` is that payload; ``figure_from_payload`` reads the figure back.

A figure whose traces are all heatmaps is on screen before plotly has drawn it (issue 38): the component draws
its cells on a canvas first (``static/mha/live_canvas.js``: before plotly.js has loaded, laid out from the figure's layout;
on a redraw, over plotly's own plot areas, plotly redrawing once the run is over), and the canvas is hidden when
plotly has drawn (kept for the chart's next figure). ``MHA_CANVAS_FIRST=0`` leaves every chart to plotly alone.

plotly.js is plotly's cartesian bundle (heatmaps, bars, scatter, subplots; 1.5 MB, 0.5 MB gzipped,
MIT licence beside it), served by Streamlit's static file serving from ``static/`` and loaded once
per page by a plain ``<script>``; no npm step at install or run time.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st
from _plotly_utils.utils import PlotlyJSONEncoder
from streamlit.runtime.state.session_state_proxy import get_session_state

from ui.charts.chart_image import chart_settings
from ui.charts.sent import SentFigure, template
from ui.i18n import _
from ui.widgets.served import loader

# plotly.js in static/, served at <base>/app/static/<file>; MHA_PLOTLY_FILE names another file there
# (bench/bench_livechart.py times plotly's full bundle with it).
PLOTLY_FILE = os.environ.get("MHA_PLOTLY_FILE", "plotly-cartesian-4.1.1.min.js")
STATIC_DIR = Path(__file__).resolve().parents[2] / "static"
COMPONENT_NAME = "mha_live_chart"
# MHA_LIVE_CHARTS=0 draws with st.plotly_chart instead (the same figure, key, config and width): a way back,
# and the "before" of bench/bench_livechart.py in the same run.
LIVE = os.environ.get("MHA_LIVE_CHARTS", "1") != "0"
# MHA_CANVAS_FIRST=0 leaves every chart to plotly alone: no canvas of the cells first (live_canvas.js), the "before"
# of bench/bench_livechart.py in the same run.
CANVAS_FIRST = os.environ.get("MHA_CANVAS_FIRST", "1") != "0"

_HTML = '<div class="mha-live" data-testid="stPlotlyChart"><p class="mha-live-alt"></p><div class="mha-live-plot"></div></div>'
_CSS = """
.mha-live { width: 100%; position: relative; }
.mha-live-canvas { position: absolute; left: 0; pointer-events: none; }
.mha-live-canvas[hidden] { display: none; }
.mha-live-alt { position: absolute; width: 1px; height: 1px; margin: -1px; padding: 0; overflow: hidden;
                clip: rect(0 0 0 0); white-space: nowrap; border: 0; }
"""
# The module (static/mha/live.js, which imports the canvas' functions from live_canvas.js beside it) is served once
# per page; each element carries only the loader's few lines (ui/widgets/served.py).
_JS = loader("live.js", "live_canvas.js")

_component = st.components.v2.component(COMPONENT_NAME, html=_HTML, css=_CSS, js=_JS, isolate_styles=False)

_PLOTLY_ENCODER = PlotlyJSONEncoder()

Width = Literal["stretch", "content"] | int

def _encoded(spec: dict) -> str:
    """One pass of the standard encoder (numpy scalars and the like through plotly's encoder); ValueError on a NaN
    or an infinity outside the typed arrays (which hold NaN in their bytes)."""
    return json.dumps(spec, separators=(",", ":"), allow_nan=False, default=_PLOTLY_ENCODER.default)


# Every figure's layout holds plotly's default template, the very same dictionary (``ui.charts.sent.template``):
# 3.4 KB of JSON that took ~0.2 ms to encode again for each new figure, three per Heads run (issue 38). It is
# encoded once per template and put into each figure's text where the encoder wrote this mark.
_TEMPLATE_MARK = "\x00mha-live-template\x00"
_TEMPLATE_MARK_JSON = json.dumps(_TEMPLATE_MARK)


@functools.cache
def _template_json(name: str) -> str:
    return _encoded(template(name))


def _json_text(spec: dict) -> str:
    """The figure dict as JSON text: ``_encoded``, the default template's text made once. plotly's own ``to_json``
    encodes, decodes and encodes again to turn NaN into null; a figure with NaN outside its typed arrays still goes
    that way."""
    layout = spec.get("layout") if isinstance(spec, dict) else None
    name = pio.templates.default
    try:
        if name and isinstance(layout, dict) and layout.get("template") is template(name):
            marked = {**spec, "layout": {**layout, "template": _TEMPLATE_MARK}}
            return _encoded(marked).replace(_TEMPLATE_MARK_JSON, _template_json(name), 1)
        return _encoded(spec)
    except ValueError:  # a NaN or an infinity in a plain list: plotly's encoder writes them as null
        return pio.json.to_json_plotly(spec)


def figure_json(fig: go.Figure) -> tuple[bytes, str]:
    """The figure's JSON (as ``to_dict`` gives it, typed arrays kept) and its digest, made once per figure object.

    Figures are read-only by contract once built (``ui/run/cached_figures.py``), so the text is kept on
    the object: a cached figure is encoded once, not once per rerun. The dictionary it is made from is not
    kept beside it (``SentFigure.sendable``): a cached figure holds its arrays and this text, not a third copy."""
    # Read from the instance's own dict: any other attribute read of a SentFigure (ui/charts/sent.py) builds
    # plotly's object tree, the very work SentFigure saves.
    kept = vars(fig).get("_mha_live_json") if isinstance(fig, go.Figure) else None
    if kept is None:
        spec = fig.sendable() if isinstance(fig, SentFigure) else fig.to_dict() if isinstance(fig, go.Figure) else fig
        text = _json_text(spec).encode()
        kept = (text, hashlib.md5(text, usedforsecurity=False).hexdigest())
        if isinstance(fig, go.Figure):
            object.__setattr__(fig, "_mha_live_json", kept)
    return kept


def payload(fig: go.Figure | dict, *, config: dict | None = None, width: Width = "stretch",
            alt: str | None = None) -> bytes:
    """What the component receives: a JSON line of settings, a newline, the figure's JSON."""
    text, digest = figure_json(fig)
    head = {"sig": digest, "config": chart_settings(config), "alt": alt or "", "width": width, "plotly": PLOTLY_FILE,
            "canvas": CANVAS_FIRST, "failed": _("Chart not drawn: {reason}")}  # in the chart's place if plotly fails
    return json.dumps(head, separators=(",", ":")).encode() + b"\n" + text


def figure_from_payload(data: bytes) -> tuple[dict, dict]:
    """The settings line and the figure of a payload (the inverse of ``payload``), for tests and tools."""
    head, _, figure = bytes(data).partition(b"\n")
    return json.loads(head), json.loads(figure)


def show_chart(fig: go.Figure | dict, *, key: str, where: Any = None, config: dict | None = None,
               width: Width = "stretch", alt: str | None = None) -> None:
    """Draw a plotly figure that later reruns update in place (the page's one way to show a chart).

    Parameters
    ----------
    fig : plotly Figure (or its dict)
        Drawn as built; not changed afterwards (its JSON is kept on it).
    key : str
        The chart's identity across reruns: the same key on the next run redraws the same graph in place.
        Also the element's CSS class ``st-key-<key>`` and the end of its element id.
    where : a Streamlit container (``st.columns(...)[i]``, ``st.container()``, ``st.sidebar``) or None
        Where to draw it; None for the main flow, as ``st.plotly_chart`` would.
    config : dict or None
        plotly.js settings (``ui.state.device.chart_config()``: the mode bar on hover, none on a phone).
        The camera button saves an SVG unless ``toImageButtonOptions`` says otherwise; no button uploads the
        chart (``chart_settings``), whichever way it is drawn.
    width : "stretch", "content" or pixels
        "stretch" fills the container (the figure's own width is ignored), "content" keeps the figure's width.
    alt : str or None
        Text for screen readers: the chart's aria-label and a visually hidden paragraph before it.
    """
    if not LIVE:
        (st if where is None else where).plotly_chart(fig, key=key, config=chart_settings(config), width=width)
        return
    data = payload(fig, config=config, width=width, alt=alt)
    if where is None or where is st:
        _component(key=key, data=data, width=width)
    else:
        with where:
            _component(key=key, data=data, width=width)
    drop_state_presenter(key)


def drop_state_presenter(key: str) -> None:
    """Take the session-state presenter of the components-v2 element ``key`` away: a chart (and the page menu,
    ``ui/widgets/page_menu.py``) has no state to present.

    Streamlit registers every components-v2 element as a widget whose ``st.session_state`` value goes
    through a presenter, and every selectbox, text input and number input builds ``filtered_state``,
    which presents every such widget (a new class per call: ``make_bidi_component_presenter``). With
    11 charts that was ~5 ms of Step by step's ~53 ms rerun (py-spy); the page menu's, drawn before every page's
    sidebar, cost Heads ~0.5 ms a run (py-spy, issue 38). Without the presenter,
    ``st.session_state[key]`` is the component's plain (empty) state. Private Streamlit state: any
    change there leaves the presenter in place (tests/test_live_chart.py notices).
    """
    try:
        state = get_session_state()._state
        widget_id = state._key_id_mapper.get_id_from_key(key)
        metadata = state._new_widget_state.widget_metadata.get(widget_id)
        if metadata is not None and metadata.presenter is not None:
            state._new_widget_state.widget_metadata[widget_id] = dataclasses.replace(metadata, presenter=None)
    except (AttributeError, KeyError, TypeError):
        return


def static_plotly_path() -> Path:
    """The plotly.js file the component loads (static/ in the repository; a test checks it is there)."""
    return STATIC_DIR / PLOTLY_FILE
