"""The weights' colour range on the Heads page (issue 23, item 8): with ``colours=head`` every panel says its own
maximum, read against the engine's ``trace.weights``; the colour bar and the caption say what a colour means;
presentation mode has the same switch, and it changes the figure's colour scaling."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from tests.address_bar import address

ROOT = Path(__file__).resolve().parents[1]
TITLE = re.compile(r"^head (\d+)(?: of \d+)? · max ([0-9.e-]+)$")
SIG3 = 5e-3  # a title prints 3 significant digits: at most half a unit of the third off, relatively
LONG = " ".join(f"w{i}" for i in range(64))

# Several configurations, masks among them; each is given as a link and built again here for the engine.
CASES = [
    ({"heads": "4"}, MHAConfig(n_heads=4)),
    ({"heads": "4", "mask": "causal", "seed": "3"}, MHAConfig(n_heads=4, mask="causal", seed=3)),
    ({"heads": "2", "mask": "padding", "valid_len": "4"}, MHAConfig(n_heads=2, mask="padding", valid_len=4)),
    ({"heads": "8", "d_model": "32", "mask": "window", "window": "1"},
     MHAConfig(n_heads=8, d_model=32, mask="window", window=1)),
    ({"heads": "4", "null": "1"}, MHAConfig(n_heads=4, null_key=True)),
    ({"tokens": LONG, "heads": "16", "d_model": "64"}, MHAConfig(tokens=tuple(LONG.split()), n_heads=16, d_model=64)),
]


def app(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


def heads_figure(at: AppTest) -> dict:
    assert not at.exception, [e.value for e in at.exception]
    return shown_charts.charts(at)["heads_grid"]


def titled_maxima(figure: dict) -> dict[int, float]:
    """Head -> the maximum its panel's title states."""
    found = {}
    for annotation in figure["layout"]["annotations"]:
        match = TITLE.match(annotation["text"])
        assert match, annotation["text"]
        found[int(match[1])] = float(match[2])
    return found


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


@pytest.mark.parametrize(("params", "config"), CASES, ids=[" ".join(p) for p, _ in CASES])
def test_each_panel_states_its_heads_largest_weight_from_the_engine(params, config):
    at = app({**params, "colours": "head"})
    figure = heads_figure(at)
    assert at.session_state["config"] == config  # the link is the configuration built here
    weights = run(config).trace.weights  # (nh, Tq, Tk), from the engine
    stated = titled_maxima(figure)
    assert sorted(stated) == list(range(config.n_heads))
    for head, value in stated.items():
        assert value == pytest.approx(weights[head].max(), rel=SIG3), head
    bar = figure["layout"]["coloraxis"]["colorbar"]
    assert "each head's max" in bar["title"]["text"] and bar["ticktext"] == ["0", "its max"]
    assert "a large weight for its head" in captions(at)
    assert "A bright cell is a large weight, not" not in captions(at)


def test_panels_state_no_maximum_on_the_fixed_range_and_say_when_it_is_dark():
    at = app({"tokens": LONG, "heads": "16", "d_model": "64"})
    figure = heads_figure(at)
    assert [a["text"] for a in figure["layout"]["annotations"]] == [f"head {h}" for h in range(16)]
    assert figure["layout"]["coloraxis"]["cmax"] == 1.0
    weights = run(at.session_state["config"]).trace.weights
    typical = float(np.median(weights.max(axis=-1)))  # 64 tokens: a typical row's largest weight is small
    assert typical < 0.15 and f"largest weight is {typical:.2f}" in captions(at)
    assert "largest weight is" not in captions(app({}))  # the default sentence: no hint


def presentation_colours(at: AppTest):
    return next(w for w in at.get("button_group") if w.proto.id.endswith("-w_colours"))


def test_presentation_mode_has_the_colour_range_switch_and_it_rescales_the_figure():
    config = MHAConfig(tokens=tuple(LONG.split()[:32]), n_heads=4, d_model=32)  # no mask: no row of one key
    at = app({"tokens": " ".join(config.tokens), "heads": "4", "d_model": "32", "present": "1", "head": "2"})
    assert at.session_state["config"] == config
    weights = run(config).trace.weights[2]  # the head on screen, from the engine
    figure = heads_figure(at)
    assert figure["layout"]["coloraxis"]["cmax"] == 1.0  # fixed 0..1 first
    switch = presentation_colours(at)
    assert switch.value == "fixed"
    switch.set_value("max").run()
    figure = heads_figure(at)
    assert weights.max() < 1.0
    assert figure["layout"]["coloraxis"]["cmax"] == pytest.approx(weights.max(), rel=1e-6)
    assert address(at)["colours"] in ("max", ["max"])  # the link follows, as on the normal page
    presentation_colours(at).set_value("head").run()
    figure = heads_figure(at)
    assert titled_maxima(figure) == {2: pytest.approx(weights.max(), rel=SIG3)}
    assert "for its head" in " ".join(m.value for m in at.markdown)
