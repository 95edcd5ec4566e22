"""AppTest for the hand-built head presets: reachable by URL and by button, each with its promised pattern.

Patterns are checked twice: on the weights the Heads page sends to the browser (float32) and on
the engine's float64 weights for the configuration the sidebar ended up with.
"""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from page_links import follow, links
from sidebar_controls import control, notes
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from mha_core.presets import PRESET_INITS, PRESETS
from tests.address_bar import address
from ui.pages.lessons import PRESET_CONFIGS

ROOT = Path(__file__).resolve().parents[1]
SHARP = 0.99  # weight a hand-built head puts where it promises to, at least
FIGURE_TOL = 1e-6  # the figure carries float32
REPEATS = ("the", "cat", "saw", "the", "dog", "and", "the", "bird")  # "the" three times


def panels(figure: dict) -> list[np.ndarray]:
    out = []
    for trace in figure["data"]:
        z = trace["z"]
        shape = tuple(int(n) for n in str(z["shape"]).split(","))
        out.append(np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape).astype(np.float64))
    return out


def weights_figure(at: AppTest, n_heads: int) -> dict:
    """The Heads page's all-heads weights figure: one heatmap per head on a fixed 0..1 colour axis."""
    for element in shown_charts.chart_elements(at):
        figure = shown_charts.figure_of(element)
        axis = figure["layout"].get("coloraxis", {})
        if len(figure["data"]) == n_heads and (axis.get("cmin"), axis.get("cmax")) == (0, 1):
            return figure
    raise AssertionError("the Heads page shows no weights figure with one panel per head")


def check_pattern(init: str, tokens: tuple[str, ...], weights: np.ndarray, tol: float) -> None:
    """Assert that one head's (T, T) weights follow the preset ``init``."""
    t = len(tokens)
    if init == "identity":
        np.testing.assert_allclose(weights, np.eye(t), atol=tol)
    elif init == "previous":
        assert weights[0, 0] >= SHARP
        assert all(weights[i, i - 1] >= SHARP for i in range(1, t))
    elif init == "first":
        assert np.all(weights[:, 0] >= SHARP)
    elif init == "same":
        for i in range(t):
            copies = [j for j in range(t) if tokens[j] == tokens[i]]
            assert weights[i, copies].sum() >= SHARP
            np.testing.assert_allclose(weights[i, copies], 1 / len(copies), atol=0.01)
            for j in copies:
                np.testing.assert_allclose(weights[i], weights[j], atol=tol)  # a word's copies share one row
    elif init == "uniform_head":
        np.testing.assert_allclose(weights, 1 / t, atol=tol)
    else:
        raise AssertionError(f"no pattern known for {init}")


def heads_page(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


@pytest.mark.parametrize("init", PRESET_INITS)
def test_preset_link_opens_the_heads_page_with_the_promised_pattern(init):
    at = heads_page({"init": init})
    assert not at.exception
    config = at.session_state["config"]
    assert config == PRESET_CONFIGS[init]
    figure = weights_figure(at, config.n_heads)
    for head in panels(figure):
        check_pattern(init, config.tokens, head, FIGURE_TOL)
    for head in run(config).trace.weights:  # float64: uniform to 1e-12, identity to 1e-6
        check_pattern(init, config.tokens, head, 1e-12 if init == "uniform_head" else 1e-6)


@pytest.mark.parametrize("init", ["same", "previous", "first"])
def test_presets_keep_their_pattern_on_a_longer_sentence_with_a_word_three_times(init):
    at = heads_page({"init": init, "tokens": " ".join(REPEATS), "d_model": "8", "heads": "2"})
    assert not at.exception
    config = at.session_state["config"]
    assert config == MHAConfig(tokens=REPEATS, d_model=8, n_heads=2, init=init)
    for head in run(config).trace.weights:
        check_pattern(init, REPEATS, head, 1e-6)


def test_lessons_page_preset_grid_shows_each_presets_pattern():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.switch_page("app_pages/lessons.py")
    at.run()
    assert not at.exception
    figure = shown_charts.charts(at)["preset_grid"]
    shown = panels(figure)
    assert len(shown) == len(PRESET_INITS)
    for init, weights in zip(PRESET_INITS, shown, strict=True):
        check_pattern(init, PRESET_CONFIGS[init].tokens, weights, FIGURE_TOL)
    descriptions = " ".join(m.value for m in at.markdown)
    assert all(f"init={init}" in " ".join(c.value for c in at.code) for init in PRESET_INITS)
    assert "Identity head" in descriptions and "Uniform head" in descriptions
    # each panel is titled with the preset row's short name, and its text names it and says what it does
    titles = [a["text"] for a in figure["layout"]["annotations"]]
    assert titles == ["identity", "previous token", "first token (sink)", "same token", "uniform"]
    for preset in PRESETS.values():
        assert f"**{preset.name}** — {preset.description}" in descriptions
        assert len(links(at, f"Open the {preset.name} head")) == 1


def test_the_weights_menu_offers_every_preset_by_its_label_and_the_sidebar_describes_it():
    at = heads_page({"init": "previous"})
    assert not at.exception
    options = control(at, "w_init").options
    assert "hand-built: previous-token head" in options and "hand-built: uniform head" in options
    assert [o for o in options if o.startswith("hand-built")] == [p.label for p in PRESETS.values()]
    assert any(PRESETS["previous"].description in note for note in notes(at))


@pytest.mark.parametrize("init", PRESET_INITS)
def test_preset_button_loads_the_preset_into_the_sidebar(init):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.switch_page("app_pages/lessons.py")
    at.run()
    follow(at, f"Open the {PRESETS[init].name} head")
    assert not at.exception
    assert at.session_state["config"] == PRESET_CONFIGS[init]
    assert at.session_state["w_init"] == init
    value = address(at).get("init")
    assert (value[0] if isinstance(value, list) else value) == init
