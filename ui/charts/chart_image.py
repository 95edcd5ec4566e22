"""The camera button of every chart saves an SVG (plotly's client-side ``toImageButtonOptions``), named
after the page and the view, e.g. ``mha-explorer_step_by_step_weights.svg``. Pure: no streamlit."""

from __future__ import annotations

import re

FILE_PREFIX = "mha-explorer"


def file_stem(*parts: str) -> str:
    """'mha-explorer_heads_weights': the parts joined by '_', each cut to letters, digits, '-' and '_'."""
    clean = [re.sub(r"[^A-Za-z0-9_-]+", "-", part).strip("-") for part in (FILE_PREFIX, *parts) if part]
    return "_".join(part for part in clean if part)


def svg_button_options(page: str, view: str) -> dict:
    """plotly.js ``toImageButtonOptions``: an SVG of the chart at its size on screen, in a named file."""
    return {"format": "svg", "filename": file_stem(page, view)}


# plotly.js 4 puts a "Share chart..." button in every mode bar (``sendChartToCloud``, on by ``showSendToCloud``):
# it uploads the chart to Plotly Cloud, which a classroom does not want and an offline machine cannot reach.
# Every chart goes without it, live or through st.plotly_chart; the camera saves an SVG.
NO_UPLOAD = {"showSendToCloud": False, "showEditInChartStudio": False, "displaylogo": False}
UPLOAD_BUTTONS = ("sendChartToCloud", "sendDataToCloud")
SVG_CAMERA = {"format": "svg", "filename": "mha-explorer-chart"}


def chart_settings(config: dict | None) -> dict:
    """The plotly.js config a chart is drawn with: ``config``, the camera saving an SVG unless it says otherwise,
    and never a button that uploads the chart (``NO_UPLOAD``, ``UPLOAD_BUTTONS`` removed)."""
    settings = {"toImageButtonOptions": SVG_CAMERA, **(config or {}), **NO_UPLOAD}
    removed = [name for name in settings.get("modeBarButtonsToRemove", []) if name not in UPLOAD_BUTTONS]
    settings["modeBarButtonsToRemove"] = [*removed, *UPLOAD_BUTTONS]
    return settings
