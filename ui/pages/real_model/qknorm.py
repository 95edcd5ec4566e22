"""Pure builders for the SmolLM2 view's "QK-norm after the fact" (issue 36): the link's settings, the logits' range
per layer, the loss table. No streamlit; the numbers are ``mha_core.smollm2_qknorm``'s.

Link: ``rm_qknorm`` the layers given QK-norm (``all`` or layer numbers joined by ``,``; absent = off),
``rm_qknorm_gain`` the gain whose run the chart shows (``one`` or ``matched``, default ``one``). The text is the
what-ifs' (``rm_whatif_text``). A bad value gets a message and the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_core.smollm2_qknorm import GAINS, QKNormRun
from ui.i18n import N_, _
from ui.pages.real_model.whatif import read_layers

LAYERS_PARAM, GAIN_PARAM = "rm_qknorm", "rm_qknorm_gain"
PARAMS = (LAYERS_PARAM, GAIN_PARAM)
GAIN_SYMBOLS = {"one": "g = 1", "matched": "g = g_l"}  # the chart title's short names (formulas: kept)
GAIN_LABELS = {"one": N_("gains 1"), "matched": N_("matched gains")}


@dataclass(frozen=True)
class QKNormLink:
    """What a link asks for: ``layers`` with QK-norm (None = off, () = all) and the gain charted."""

    layers: tuple[int, ...] | None = None
    gain: str = "one"


def read_link(params: Mapping[str, str], n_layers: int, messages: list[str]) -> QKNormLink:
    """The QK-norm settings of a link; each bad value is reported in ``messages`` and replaced by its default."""
    layers = read_layers(params, LAYERS_PARAM, n_layers, messages)
    gain = params.get(GAIN_PARAM, "one")
    if gain not in GAINS:
        messages.append(_("`{param}={value}` is not one of {choices}; using {default}.").format(
            param=GAIN_PARAM, value=gain, choices=", ".join(GAINS), default="one"))
        gain = "one"
    return QKNormLink(layers, gain)


def link_params(link: QKNormLink) -> dict[str, str]:
    """The query parameters that reopen this experiment (defaults left out; nothing when it is off)."""
    if link.layers is None:
        return {}
    params = {LAYERS_PARAM: ",".join(map(str, link.layers)) or "all"}
    if link.gain != "one":
        params[GAIN_PARAM] = link.gain
    return params


def range_figure(run: QKNormRun, *, title: str, x_title: str, y_title: str, names: tuple[str, str],
                 bound: float | None, bound_name: str) -> go.Figure:
    """Each layer's smallest and largest visible logit, trained (``run.before``) and with QK-norm (``run.after``), as
    two bands; ``bound`` (gains 1: scale · hs) as dotted lines at ±bound."""
    fig, layers = go.Figure(), list(range(run.before.shape[0]))
    for span, name, colour in ((run.before, names[0], "#1f77b4"), (run.after, names[1], "#d62728")):
        fig.add_scatter(x=layers, y=span[:, 1].tolist(), mode="lines+markers", name=name, legendgroup=name,
                        line={"color": colour}, hovertemplate="%{x}: max %{y:.3f}<extra></extra>")
        fig.add_scatter(x=layers, y=span[:, 0].tolist(), mode="lines+markers", name=name, legendgroup=name,
                        showlegend=False, line={"color": colour}, fill="tonexty",
                        hovertemplate="%{x}: min %{y:.3f}<extra></extra>")
    if bound is not None:
        for sign in (1, -1):
            fig.add_scatter(x=[layers[0], layers[-1]], y=[sign * bound] * 2, mode="lines", name=bound_name,
                            legendgroup="bound", showlegend=sign == 1, line={"dash": "dot", "color": "#555"},
                            hovertemplate="%{y:.3f}<extra></extra>")
    fig.update_layout(title=title, height=380, margin={"l": 50, "r": 10, "t": 50, "b": 40},
                      legend={"orientation": "h", "y": -0.25}, xaxis={"title": x_title, "dtick": 5},
                      yaxis={"title": y_title})
    return fig


def range_frame(run: QKNormRun) -> pd.DataFrame:
    """One row per layer: its visible logits' min and max, trained and with QK-norm, and the gain used (NaN: none)."""
    return pd.DataFrame({"layer": np.arange(run.before.shape[0]), "before_min": run.before[:, 0],
                         "before_max": run.before[:, 1], "after_min": run.after[:, 0], "after_max": run.after[:, 1],
                         "gain": run.gains})


def loss_frame(runs: Mapping[str, QKNormRun]) -> pd.DataFrame:
    """The trained model's loss, then one row per gain of ``GAINS`` (its key in ``gain``): label, loss, change."""
    dense = next(iter(runs.values())).dense
    return pd.DataFrame({"gain": ["trained", *GAINS],
                         "label": [_("as trained (no QK-norm)"), *(_(GAIN_LABELS[name]) for name in GAINS)],
                         "loss": [dense, *(runs[name].loss for name in GAINS)],
                         "change": [0.0, *(runs[name].loss - dense for name in GAINS)]})
