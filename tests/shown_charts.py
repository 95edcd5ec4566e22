"""The plotly figures an AppTest run shows, whichever way they were sent.

A page draws a chart with ``st.plotly_chart`` (a ``plotly_chart`` element: ``proto.spec`` is the figure
JSON) or with ``ui.widgets.live.show_chart`` (a ``bidi_component`` element: ``proto.bytes`` is a line of
settings, a newline, then the figure JSON). Both give the figure dict as the browser gets it, numpy
arrays as plotly's {dtype, bdata (base64), shape}. Keys are the end of the element id (the widget key).
"""

from __future__ import annotations

import base64
import json

import numpy as np

LIVE_COMPONENT = "mha_live_chart"


def chart_elements(at) -> list:
    """Every chart element of the run, in page order: plotly_chart and live-chart components."""
    live = [e for e in at.get("bidi_component") if e.proto.component_name == LIVE_COMPONENT]
    return list(at.get("plotly_chart")) + live


def figure_of(element) -> dict:
    """The figure dict one chart element carries."""
    if hasattr(element.proto, "spec"):
        return json.loads(element.proto.spec)
    head, newline, figure = bytes(element.proto.bytes).partition(b"\n")
    assert newline, "a live chart's payload has a settings line, then the figure"
    return json.loads(figure)


def settings_of(element) -> dict:
    """A live chart's settings line (config, alt, width, digest); {} for a plotly_chart element."""
    if hasattr(element.proto, "spec"):
        return {}
    return json.loads(bytes(element.proto.bytes).partition(b"\n")[0])


def key_of(element) -> str:
    """The chart's widget key: the end of its element id."""
    return element.proto.id.rsplit("-", 1)[-1]


def charts(at) -> dict[str, dict]:
    """Every figure on the page by its widget key."""
    return {key_of(e): figure_of(e) for e in chart_elements(at)}


def chart_bytes(at) -> dict[str, int]:
    """What each chart sends to the browser, in bytes, by key."""
    return {key_of(e): len(e.proto.spec) if hasattr(e.proto, "spec") else len(e.proto.bytes)
            for e in chart_elements(at)}


def decode(z) -> np.ndarray:
    """A plotly typed array back to numpy."""
    shape = tuple(int(n) for n in str(z["shape"]).split(","))
    return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape)
