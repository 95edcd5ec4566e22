"""On a Seed + the toy pages are drawn before the sidebar's controls (``ui.widgets.sidebar.page_with_controls``):
the configuration is the last run's with the new seed, and the controls must give exactly that. A run that drew the
page first and found the controls disagreeing starts again the usual way, so a wrong guess would still end right:
these tests check that the guess is taken where it should be and is never wrong (``page_drawn_first`` stays True only
when the controls agreed), and that what the page then shows is the engine's result for the new seed."""

from __future__ import annotations

import numpy as np
import pytest
import shown_charts

from mha_core.config import MHAConfig, run
from tests.app_opener import open_app
from ui.widgets.sidebar import DISAGREED, DRAWN_FIRST

PAGES = {"heads": None, "step_by_step": "app_pages/step_by_step.py"}


def grid_matrices(at) -> list[np.ndarray]:
    """The heads figure's panels (the masked cells' grey layers left out), as the live chart sends them."""
    return [shown_charts.decode(trace["z"]) for trace in shown_charts.charts(at)["heads_grid"]["data"]
            if "coloraxis" in trace]


@pytest.mark.parametrize("page", PAGES)
def test_a_seed_plus_draws_the_page_first_and_the_controls_agree(page):
    at = open_app(PAGES[page], seed=3)
    assert at.session_state[DRAWN_FIRST] is False  # a link's first run: the controls come first
    at.number_input(key="w_seed").increment().run()
    assert not at.exception
    assert at.session_state[DRAWN_FIRST] is True
    assert at.session_state["config"].seed == 4
    at.number_input(key="w_seed").set_value(11).run()
    assert at.session_state[DRAWN_FIRST] is True
    assert at.session_state["config"] == MHAConfig(seed=11)
    assert DISAGREED not in at.session_state


def test_the_heads_grid_after_a_seed_plus_is_the_engines():
    at = open_app(seed=3)
    at.number_input(key="w_seed").increment().run()
    assert at.session_state[DRAWN_FIRST] is True
    weights = run(MHAConfig(seed=4)).trace.weights  # (nh, T, T)
    shown = grid_matrices(at)
    assert len(shown) == weights.shape[0]
    for head in range(weights.shape[0]):
        np.testing.assert_allclose(shown[head], weights[head], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("change", [("w_d_model", 32), ("w_tokens", "a dog ran")])
def test_other_controls_are_drawn_first(change):
    key, value = change
    at = open_app()
    at.number_input(key="w_seed").increment().run()
    widget = at.number_input(key=key) if key == "w_d_model" else at.text_input(key=key)
    widget.set_value(value).run()
    assert not at.exception
    assert at.session_state[DRAWN_FIRST] is False
    assert DISAGREED not in at.session_state  # the page was not drawn for a guess the controls then refused


def test_a_seed_and_another_control_together_draw_the_controls_first():
    at = open_app()
    at.number_input(key="w_seed").set_value(8)
    at.number_input(key="w_d_model").set_value(32)
    at.run()
    assert not at.exception
    assert at.session_state[DRAWN_FIRST] is False
    assert at.session_state["config"].seed == 8 and at.session_state["config"].d_model == 32
    assert DISAGREED not in at.session_state


def test_presentation_mode_draws_the_controls_first():
    at = open_app(present=1)
    at.number_input(key="w_seed").increment().run()
    assert not at.exception
    assert at.session_state[DRAWN_FIRST] is False
    assert at.session_state["config"].seed == 1
