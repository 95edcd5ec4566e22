"""The settings' controls as one element (``ui/widgets/controls.py``): what it draws is the configuration the engine
computes, a change goes in only as a control can take it, and the sidebar sends one element for all of them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st_

from mha_core.config import valid_head_counts
from tests.address_bar import address
from tests.app_opener import open_app
from tests.sidebar_controls import change, control, element, headings, items, notes, set_control
from ui.i18n import _, using_language
from ui.state.settings import model_settings, values_of
from ui.widgets.controls import accepted

NUMBER = {"kind": "number", "key": "w_seed", "min": 0, "max": 10, "step": 1, "integer": True, "disabled": False}
FLOAT = {**NUMBER, "key": "w_temperature", "min": 0.1, "max": 5.0, "step": 0.1, "integer": False}
SELECT = {"kind": "select", "key": "w_heads", "options": [[1, "1"], [2, "2"], [4, "4"]], "disabled": False}


def test_a_change_is_taken_only_as_the_control_could_give_it():
    assert accepted(NUMBER, 7) == 7 and accepted(NUMBER, "7") == 7 and accepted(NUMBER, 6.6) == 7
    assert accepted(NUMBER, 99) == 10 and accepted(NUMBER, -3) == 0  # inside its bounds
    for bad in ("", "abc", None, True, [], {"x": 1}, math.nan, math.inf):
        assert accepted(NUMBER, bad) is None, bad
    assert accepted(FLOAT, 0.25) == 0.25 and isinstance(accepted(FLOAT, 1), float)
    assert accepted(SELECT, 2) == 2 and accepted(SELECT, 3) is None
    assert accepted(SELECT, "2") is None and accepted(SELECT, True) is None  # the option itself, not its spelling
    assert accepted({"kind": "toggle", "disabled": False}, True) is True
    assert accepted({"kind": "toggle", "disabled": False}, 1) is None
    assert accepted({"kind": "text", "disabled": False}, "a b") == "a b"
    assert len(accepted({"kind": "text", "disabled": False}, "a " * 5000)) == 2000
    assert accepted({**NUMBER, "disabled": True}, 3) is None


@given(st_.one_of(st_.integers(), st_.floats(allow_nan=True), st_.text(max_size=8), st_.booleans(), st_.none()))
def test_a_number_control_takes_nothing_outside_its_bounds(value):
    taken = accepted(NUMBER, value)
    assert taken is None or (isinstance(taken, int) and 0 <= taken <= 10)


def _shown(item: dict):
    """A control's value as the element shows it, in the settings' terms (a sentence as its tokens)."""
    return tuple(item["value"].split()) if item["kind"] == "text" else item["value"]


@pytest.mark.parametrize("params", [
    {"seed": "3"},
    {"tokens": "a b a c", "d_model": "12", "heads": "3", "kv_heads": "1", "mask": "window", "window": "1"},
    {"kv_tokens": "x y", "mask": "causal", "pe": "rope", "kernel": "moba", "lang": "zh-CN"},
])
def test_every_control_shows_the_configuration_the_engine_is_given(params):
    at = open_app(**params)
    config = at.session_state["config"]
    values = {**values_of(config), "kv_heads": config.key_value_heads}  # None in the config: as many as heads
    drawn = {item["key"]: item for item in items(at) if "value" in item}
    shown_rows = [row for row in model_settings() if row.key in drawn]
    assert {row.name for row in shown_rows} >= {"tokens", "d_model", "heads", "seed", "mask"}
    for row in shown_rows:
        assert _shown(drawn[row.key]) == values[row.name], row.name
    heads = drawn["w_heads"]
    assert [value for value, _label in heads["options"]] == valid_head_counts(config.d_model)
    assert f"d_k = {config.d_model // config.n_heads}" in notes(at)[0]  # the caption under heads, from the config
    assert drawn["w_cross"]["value"] == (config.kv_tokens is not None)


def test_the_labels_and_headings_follow_the_language():
    english, chinese = open_app(), open_app(lang="zh-CN")
    assert headings(english)[:3] == ["Model", "Inputs", "Scores"]
    with using_language("zh-CN"):
        assert headings(chinese)[:3] == [_(text) for text in ("Model", "Inputs", "Scores")] != headings(english)[:3]
    assert control(chinese, "w_seed").label == "随机种子" and control(english, "w_seed").label == "Seed"


def test_a_seed_plus_in_the_element_computes_the_next_seed_and_the_link_follows():
    at = open_app(seed=3)
    at = control(at, "w_seed").increment().run()
    assert at.session_state["config"].seed == 4 and address(at)["seed"] == "4"
    assert control(at, "w_seed").value == 4 and not at.exception


def test_a_change_the_control_could_not_give_changes_nothing():
    at = open_app(d_model=16, heads=4, seed=5)
    for key, value in (("w_heads", 3), ("w_seed", "five"), ("w_d_model", None), ("w_window", 2), ("w_nothing", 1)):
        at = change(at, key, value)  # w_window: not drawn while the mask is not a window
        config = at.session_state["config"]
        assert (config.n_heads, config.seed, config.d_model, config.mask) == (4, 5, 16, "none"), key
        assert not at.exception


def test_heads_follow_d_model_and_the_caption_says_the_new_head_size():
    at = set_control(open_app(d_model=16, heads=16), "w_d_model", 6)
    assert at.session_state["config"].n_heads in valid_head_counts(6)
    assert control(at, "w_heads").options == [str(n) for n in valid_head_counts(6)]
    assert f"d_k = {6 // at.session_state['config'].n_heads}" in notes(at)[0]


def test_the_sidebar_sends_one_element_for_the_settings():
    at = open_app()
    kinds = [type(node).__name__ for node in at.sidebar]
    widgets = [kind for kind in kinds if kind not in ("UnknownElement", "SpecialBlock")]
    assert widgets == ["Selectbox"]  # the language: every page draws it, also those without the settings
    assert element(at) is not None and len(items(at)) >= 20


def test_presentation_mode_puts_the_element_in_the_popover():
    at = open_app(present=1)
    assert element(at) in list(at.main) and element(at) not in list(at.sidebar)
    assert "w_present" not in {item.get("key") for item in items(at)}  # the top bar's own toggle
    at = control(at, "w_seed").increment().run()
    assert at.session_state["config"].seed == 1 and not at.exception
