"""ui.state.settings: one table drives the sidebar, the link and the configuration.

The central test adds a setting (one row, and a config class with the field the engine would read)
and finds it in all three places without touching any other code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.state.settings as table
from mha_core.config import EMBEDDINGS, INITS, LIMITS, MASKS, SCALE_RULES, MHAConfig
from tests.address_bar import address
from tests.sidebar_controls import control
from ui.state.settings import VIEW_SETTINGS, Setting, config_of, fit_sentence, model_settings, values_of
from ui.state.urlstate import config_from_params, params_from_config, read_settings, write_settings

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ConfigWithKnob(MHAConfig):
    """What MHAConfig would look like with one more field for the engine to read."""

    knob: int = 3


KNOB = Setting("knob", "int", "knob", label="Knob (a test's new setting)", section="Scores", widget="number",
               limits=(0, 9), written="changed")


@pytest.fixture
def with_knob(monkeypatch):
    monkeypatch.setattr(table, "CONFIG_CLASS", ConfigWithKnob)
    monkeypatch.setattr(table, "SETTINGS", table.SETTINGS + (KNOB,))


def test_a_new_row_is_read_from_a_link_and_written_back(with_knob):
    config, messages = config_from_params({"knob": "7", "heads": "2"})
    assert messages == [] and config.knob == 7 and config.n_heads == 2
    assert params_from_config(config)["knob"] == "7"
    default, _ = config_from_params({})
    assert default.knob == 3 and "knob" not in params_from_config(default)  # written only when changed
    clipped, messages = config_from_params({"knob": "12"})
    assert clipped.knob == 9 and messages == ["`knob=12` is outside 0..9: using 9."]


def test_a_new_row_has_its_widget_in_the_sidebar_and_reaches_the_config(with_knob):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["knob"] = "5"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    knob = control(at, "w_knob")
    assert knob.label == KNOB.label and knob.value == 5 and (knob.min, knob.max) == (0, 9)
    assert at.session_state["config"].knob == 5
    knob.set_value(8).run()
    assert at.session_state["config"].knob == 8 and address(at)["knob"] == "8"


def test_a_new_row_has_its_widget_in_compares_b_too(with_knob):
    """B's controls are the sidebar's widget table at another place: a new row is there with its limits."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["b_knob"] = "4"
    at.switch_page("app_pages/compare.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    knob = at.number_input(key="cmp_knob")
    assert knob.label == f"B: {KNOB.label}" and knob.value == 4 and (knob.min, knob.max) == (0, 9)
    knob.set_value(6).run()
    assert address(at)["b_knob"] == "6" and "knob" not in address(at)  # A keeps its default


def test_a_choice_can_still_read_the_values_old_links_carried():
    row = Setting("pe_kind", "choice", None, choices={"none": "none", "sinusoidal": "sinusoidal"},
                  default="none", legacy={"0": "none", "1": "sinusoidal"})
    messages: list[str] = []
    assert read_settings({"pe_kind": "1"}, (row,), {}, messages) == {"pe_kind": "sinusoidal"}
    assert read_settings({"pe_kind": "0"}, (row,), {}, messages) == {"pe_kind": "none"}
    assert messages == []
    assert write_settings((row,), {"pe_kind": "sinusoidal"}) == {"pe_kind": "sinusoidal"}
    assert read_settings({"pe_kind": "2"}, (row,), {}, messages) == {"pe_kind": "none"}
    assert messages == ["`pe_kind=2` is not one of none, sinusoidal: using none."]


def test_every_config_field_a_user_sets_has_one_row():
    fields = [row.field for row in model_settings()]
    assert len(fields) == len(set(fields))
    # custom_embedding: an upload, never in a link
    user_set = set(MHAConfig.__dataclass_fields__) - {"custom_embedding"}
    assert set(fields) == user_set
    assert len({row.param for row in model_settings() + VIEW_SETTINGS}) == len(model_settings() + VIEW_SETTINGS)


def test_the_defaults_are_the_configs():
    values = values_of(MHAConfig())
    for row in model_settings():
        if row.field == "kv_heads":  # None in the config: as many as the heads
            assert row.default_for(values) == MHAConfig().key_value_heads == MHAConfig().n_heads
        elif row.field not in ("valid_len", "custom_mask"):  # these two default to "all keys"
            assert row.default_for(values) == getattr(MHAConfig(), row.field), row.name
    assert config_of(values) == MHAConfig()


@pytest.mark.parametrize(
    ("name", "engine"), [("init", INITS), ("scale", SCALE_RULES), ("mask", MASKS), ("embedding", EMBEDDINGS)]
)
def test_every_choice_the_engine_knows_has_a_label(name, engine):
    row = next(r for r in model_settings() if r.name == name)
    assert tuple(row.choices) == tuple(engine) and all(row.choices.values())


def test_a_row_that_does_not_apply_keeps_the_configs_default():
    values = values_of(MHAConfig(mask="padding", valid_len=2))
    assert config_of(values).valid_len == 2
    assert config_of({**values, "mask": "causal"}).valid_len is None


def test_a_link_whose_window_is_wider_than_the_sentence_opens_with_the_slider_at_its_end():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update(mask="window", window="10")  # 6 tokens: the slider ends at 5 (it used to raise)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert control(at, "w_window").value == 5
    assert at.session_state["config"].window == 5 and address(at)["window"] == "5"


def test_a_sentence_is_fitted_to_the_limits_with_the_reason():
    example = ("the", "cat")
    assert fit_sentence(("a", "b"), example) == (("a", "b"), None)
    assert fit_sentence((), example) == (example, "is empty: using 'the cat'")
    assert fit_sentence((), None) == (None, None)  # an optional sentence left empty is simply absent
    long = tuple(f"w{i}" for i in range(LIMITS["max_tokens"] + 3))
    tokens, reason = fit_sentence(long, example)
    assert tokens == long[: LIMITS["max_tokens"]] and reason == "has 67 tokens; the limit is 64: keeping the first 64"
