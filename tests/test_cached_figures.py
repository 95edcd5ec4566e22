"""The figure cache: a changed configuration never shows a stale figure, an unchanged one is byte-identical.

Byte-identical matters: Streamlit hashes every element message and sends only the hash of one the
browser already holds (``streamlit/runtime/forward_msg_cache.py``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import shown_charts
from sidebar_controls import control, set_control
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run

ROOT = Path(__file__).resolve().parents[1]


def specs(at: AppTest) -> dict[str, str]:
    """Every plotly figure's JSON as sent, by its widget key (a live chart's: its payload's figure part)."""
    return {shown_charts.key_of(c): c.proto.spec if hasattr(c.proto, "spec") else bytes(c.proto.bytes).partition(b"\n")[2]
            for c in shown_charts.chart_elements(at)}


def decode(z: dict) -> np.ndarray:
    shape = tuple(int(n) for n in str(z["shape"]).split(","))
    return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape).astype(float)


def heads_panels(spec: str) -> list[np.ndarray]:
    """The heads figure's panels (its masked cells' grey layers, which have no coloraxis, left out)."""
    return [decode(t["z"]) for t in json.loads(spec)["data"] if "coloraxis" in t]


def test_heads_follow_the_seed_and_come_back_byte_identical():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    first = specs(at)
    set_control(at, "w_seed", 7)
    assert not at.exception
    changed = specs(at)
    for shown, expected in zip(heads_panels(changed["heads_grid"]), run(MHAConfig(seed=7)).trace.weights, strict=True):
        np.testing.assert_allclose(shown, expected, atol=1e-6)  # float32 on the wire
    assert changed["heads_grid"] != first["heads_grid"]
    set_control(at, "w_seed", MHAConfig().seed)
    assert specs(at) == first  # every figure, byte for byte


def test_step_panels_follow_the_head_after_a_round_trip():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/step_by_step.py").run()
    weights = run(MHAConfig()).trace.weights
    for head in (1, 0, 1):  # the second visit of head 1 is answered by the cache
        control(at, "w_head").set_value(head).run()
        assert not at.exception
        shown = json.loads(specs(at)["sbs_softmax_0"])
        np.testing.assert_allclose(decode(shown["data"][0]["z"]), weights[head], atol=1e-6)
