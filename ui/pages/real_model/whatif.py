"""Pure builders for the SmolLM2 view's what-ifs (issue 36): the link's settings, the loss-against-k chart, the
sink table. No streamlit; the numbers are ``mha_core.smollm2_whatif``'s.

Link: ``rm_sparse`` the layers made sparse (``all`` or layer numbers joined by ``,``; absent = the sweep is off),
``rm_sparse_k`` the k whose kept keys are shown (one of ``SWEEP_K``), ``rm_sparse_at`` the layer.head shown,
``rm_sinks=1`` the sink comparison on, ``rm_whatif_text`` which text both run on (``prompt`` or ``calibration``).
A bad value gets a message and the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_core.smollm2_whatif import SINK_VARIANTS, SWEEP_K, SparseSweep
from ui.i18n import N_, _

SPARSE_PARAM, K_PARAM, AT_PARAM, SINKS_PARAM, TEXT_PARAM = (
    "rm_sparse", "rm_sparse_k", "rm_sparse_at", "rm_sinks", "rm_whatif_text")
PARAMS = (SPARSE_PARAM, K_PARAM, AT_PARAM, SINKS_PARAM, TEXT_PARAM)
TEXTS = {"prompt": N_("the prompt"), "calibration": N_("the calibration text")}
DEFAULT_K = 4
NEEDED_SINK = 0.3  # a head "needed a sink" when at least this share of its attention went to the first token
VARIANT_LABELS = {
    "with": N_("with the first token (the trained model)"),
    "without": N_("without it (rows renormalised)"),
    "fitted": N_("without it + fitted sinks s_h"),
    "null": N_("without it + the null key (s_h = 0)"),
}


@dataclass(frozen=True)
class WhatIfLink:
    """What a link asks for: ``layers`` sparse (None = sweep off, () = all), k, the (layer, head) shown (written only
    when not ``default_at``), sinks on, the text."""

    layers: tuple[int, ...] | None = None
    k: int = DEFAULT_K
    at: tuple[int, int] | None = None
    sinks: bool = False
    text: str = "prompt"
    more: bool = False  # another experiment of the section runs on the text (QK-norm): the text is written too


def _int_or_none(piece: str) -> int | None:
    return int(piece) if piece.strip().isdigit() else None


def read_layers(params: Mapping[str, str], param: str, n_layers: int, messages: list[str]) -> tuple[int, ...] | None:
    """The layers a link names in ``param``: None when absent, () for ``all``; bad pieces reported and left out."""
    raw = params.get(param)
    if raw is None or raw.strip() in ("", "all"):
        return None if raw is None else ()
    numbers = [_int_or_none(piece) for piece in raw.split(",")]
    good = sorted({n for n in numbers if n is not None and 0 <= n < n_layers})
    if len(good) != len(numbers):
        messages.append(_("`{param}={value}`: layers are numbers 0..{last} joined by commas, or 'all'; "
                          "using {used}.").format(param=param, value=raw, last=n_layers - 1,
                                                  used=",".join(map(str, good)) or "all"))
    return tuple(good)


def read_link(params: Mapping[str, str], n_layers: int, n_heads: int, messages: list[str]) -> WhatIfLink:
    """The what-if settings of a link; each bad value is reported in ``messages`` and replaced by its default."""
    layers = read_layers(params, SPARSE_PARAM, n_layers, messages)
    k = _int_or_none(params.get(K_PARAM, str(DEFAULT_K)))
    if k not in SWEEP_K:
        messages.append(_("`{param}={value}`: k is one of {choices}; using {default}.").format(
            param=K_PARAM, value=params.get(K_PARAM), choices=", ".join(map(str, SWEEP_K)), default=DEFAULT_K))
        k = DEFAULT_K
    at = None
    if AT_PARAM in params:
        pieces = params[AT_PARAM].split(".")
        numbers = [_int_or_none(piece) for piece in pieces]
        if len(numbers) == 2 and None not in numbers and numbers[0] < n_layers and numbers[1] < n_heads:
            at = (numbers[0], numbers[1])
        else:
            messages.append(_("`{param}={value}`: not layer.head of an existing head (e.g. 5.4); using the first "
                              "sparse layer's head 0.").format(param=AT_PARAM, value=params[AT_PARAM]))
    if at is not None and layers and at[0] not in layers:
        messages.append(_("`{param}={value}`: layer {layer} is not one of the sparse layers; using the first sparse "
                          "layer's head 0.").format(param=AT_PARAM, value=params[AT_PARAM], layer=at[0]))
        at = None
    text = params.get(TEXT_PARAM, "prompt")
    if text not in TEXTS:
        messages.append(_("`{param}={value}` is not one of {choices}; using {default}.").format(
            param=TEXT_PARAM, value=text, choices=", ".join(TEXTS), default="prompt"))
        text = "prompt"
    sinks = params.get(SINKS_PARAM, "0")
    if sinks not in ("0", "1"):
        messages.append(_("`{param}={value}` is not 0 or 1; using 0.").format(param=SINKS_PARAM, value=sinks))
    return WhatIfLink(layers, k, at, sinks == "1", text)


def default_at(layers: tuple[int, ...]) -> tuple[int, int]:
    """The head shown when a link names none: the first sparse layer's (layer 0 when all are), head 0."""
    return (layers[0] if layers else 0), 0


def link_params(link: WhatIfLink) -> dict[str, str]:
    """The query parameters that reopen these what-ifs (defaults left out)."""
    params = {}
    if link.layers is not None:
        params[SPARSE_PARAM] = ",".join(map(str, link.layers)) or "all"
        if link.k != DEFAULT_K:
            params[K_PARAM] = str(link.k)
        if link.at is not None and link.at != default_at(link.layers):
            params[AT_PARAM] = f"{link.at[0]}.{link.at[1]}"
    if link.sinks:
        params[SINKS_PARAM] = "1"
    if link.text != "prompt" and (link.layers is not None or link.sinks or link.more):
        params[TEXT_PARAM] = link.text
    return params


def sweep_figure(sweep: SparseSweep, *, title: str, x_title: str, y_title: str, sparse_name: str,
                 dense_name: str, moba: SparseSweep | None = None, moba_name: str = "") -> go.Figure:
    """Mean loss against k (log scale) with the dense loss as a line: the sweep's numbers as they are; ``moba``'s
    ks are the keys its blocks hold at most (blocks x B)."""
    fig = go.Figure()
    fig.add_scatter(x=list(sweep.ks), y=sweep.losses.tolist(), mode="lines+markers", name=sparse_name,
                    hovertemplate="k = %{x}<br>%{y:.4f}<extra></extra>")
    if moba is not None:
        fig.add_scatter(x=list(moba.ks), y=moba.losses.tolist(), mode="lines+markers", name=moba_name,
                        hovertemplate="≤ %{x}<br>%{y:.4f}<extra></extra>")
    fig.add_scatter(x=[sweep.ks[0], sweep.ks[-1]], y=[sweep.dense, sweep.dense], mode="lines", name=dense_name,
                    line={"dash": "dash"}, hovertemplate="%{y:.4f}<extra></extra>")
    fig.update_layout(title=title, height=360, margin={"l": 50, "r": 10, "t": 50, "b": 40},
                      legend={"orientation": "h", "y": -0.25},
                      xaxis={"title": x_title, "type": "log",
                             "tickvals": sorted({*sweep.ks, *(moba.ks if moba is not None else ())})},
                      yaxis={"title": y_title})
    return fig


def sweep_frame(sweep: SparseSweep) -> pd.DataFrame:
    """One row per k: the mean loss and its rise over the dense model's."""
    return pd.DataFrame({"k": list(sweep.ks), "loss": sweep.losses, "rise": sweep.losses - sweep.dense})


def moba_frame(moba: SparseSweep, block: int) -> pd.DataFrame:
    """One row per number of blocks kept: the keys they hold at most, the mean loss and its rise over dense."""
    return pd.DataFrame({"blocks": [k // block for k in moba.ks], "keys": list(moba.ks), "loss": moba.losses,
                         "rise": moba.losses - moba.dense})


def sink_frame(losses: Mapping[str, float]) -> pd.DataFrame:
    """One row per variant of ``SINK_VARIANTS`` (its key kept in ``variant``): the label, the loss and its change."""
    return pd.DataFrame({"variant": list(SINK_VARIANTS),
                         "label": [_(VARIANT_LABELS[name]) for name in SINK_VARIANTS],
                         "loss": [losses[name] for name in SINK_VARIANTS],
                         "change": [losses[name] - losses["with"] for name in SINK_VARIANTS]})


def needy_heads(mass: np.ndarray, sinks: np.ndarray) -> pd.DataFrame:
    """The heads with a first-token mass m_h ≥ ``NEEDED_SINK``, the largest first: layer, head, m_h, s_h."""
    layers, heads = np.nonzero(mass >= NEEDED_SINK)
    order = np.argsort(-mass[layers, heads], kind="stable")
    return pd.DataFrame({"layer": layers[order], "head": heads[order], "mass": mass[layers, heads][order],
                         "sink": sinks[layers, heads][order]})
