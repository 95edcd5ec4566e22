"""The language through the app: ``lang=`` in a link, the switch, the browser's language, an unknown code.

Switching the language keeps every other setting (the link's parameters and the configuration) and every
number (the heatmaps' values), and only the words change.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.runtime.context import ContextProxy
from streamlit.testing.v1 import AppTest

from tests.address_bar import address
from tests.app_opener import open_app
from tests.shown_charts import charts, decode
from tests.sidebar_controls import control, headings

ROOT = Path(__file__).resolve().parents[1]
LINK = {"tokens": "a b a c", "d_model": "8", "heads": "2", "seed": "3", "mask": "causal"}
SWITCH = "w_lang"


def others(at: AppTest) -> dict:
    """The link's parameters other than the language."""
    return {name: value for name, value in address(at).items() if name != "lang"}


def heatmap_values(at: AppTest) -> list[np.ndarray]:
    """Every heatmap's numbers as the browser gets them, chart by chart."""
    return [decode(trace["z"]) for figure in charts(at).values() for trace in figure["data"]
            if isinstance(trace.get("z"), dict) and "bdata" in trace["z"]]


@pytest.mark.parametrize("lang, model_header, label, heads", [
    ("es", "Modelo", "Idioma", "Cabezas (solo las que dividen d_model)"),
    ("zh-CN", "模型", "语言", "头数（只能取 d_model 的因数）"),
])
def test_a_link_in_a_language_shows_it_and_keeps_it(lang, model_header, label, heads):
    at = open_app(**LINK, lang=lang)
    assert at.selectbox(key=SWITCH).value == lang and label in at.selectbox(key=SWITCH).label
    assert model_header in headings(at) and control(at, "w_heads").label == heads
    assert not at.warning
    assert address(at)["lang"] == [lang] or address(at)["lang"] == lang
    assert {k: v if isinstance(v, str) else v[0] for k, v in others(at).items()}.items() >= LINK.items()


def test_an_unknown_language_says_so_and_shows_english_with_the_links_settings():
    at = open_app(**LINK, lang="xx")
    assert at.selectbox(key=SWITCH).value == "en" and "Model" in headings(at)
    messages = [w.value for w in at.warning]
    assert any("`lang=xx`" in m and "zh-CN" in m and "es" in m for m in messages), messages
    assert "lang" not in address(at)  # English: the link carries no lang
    assert at.session_state.config.d_model == 8 and at.session_state.config.tokens == ("a", "b", "a", "c")


def test_switching_keeps_every_other_setting_and_every_number():
    at = open_app(**LINK)
    before_params, before_config, before_numbers = others(at), at.session_state.config, heatmap_values(at)
    assert before_numbers and "Model" in headings(at)
    for lang, model_header in (("zh-CN", "模型"), ("es", "Modelo"), ("en", "Model")):
        at.selectbox(key=SWITCH).set_value(lang).run()
        assert not at.exception
        assert model_header in headings(at)
        assert others(at) == before_params and at.session_state.config == before_config
        numbers = heatmap_values(at)
        assert len(numbers) == len(before_numbers)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(numbers, before_numbers, strict=True))
        assert ("lang" in address(at)) == (lang != "en")


def test_the_switch_clears_the_links_complaint():
    at = open_app(lang="xx")
    assert any("`lang=xx`" in w.value for w in at.warning)
    at.selectbox(key=SWITCH).set_value("es").run()
    assert not any("`lang=xx`" in w.value for w in at.warning) and "Modelo" in headings(at)


def test_the_browsers_language_is_the_default_when_the_link_has_none(monkeypatch):
    monkeypatch.setattr(ContextProxy, "locale", property(lambda self: "es-ES"))
    at = open_app(**LINK)
    assert at.selectbox(key=SWITCH).value == "es" and "Modelo" in headings(at)
    at = open_app(**LINK, lang="zh-CN")  # the link wins over the browser
    assert at.selectbox(key=SWITCH).value == "zh-CN"


def test_an_old_link_without_lang_opens_in_english_and_writes_no_lang():
    at = open_app(**LINK)
    assert at.selectbox(key=SWITCH).value == "en" and "lang" not in address(at)


def test_a_links_bad_value_is_told_in_the_links_language():
    at = open_app(lang="es", d_model="abc")
    messages = [w.value for w in at.sidebar.warning]
    assert "Enlace: `d_model=abc` no es un número entero: se usa 16." in messages, messages
    assert at.session_state.config.d_model == 16
