"""The SmolLM2 view's "QK-norm after the fact" in AppTest: the link opens it (bad values: a message and the default),
the shown losses, logit ranges and gains are the engine's (mha_core.smollm2_qknorm) for the same settings, and the
other languages translate the words and keep the numbers."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from mha_core import smollm2_qknorm as qn
from tests.address_bar import address
from tests.app_opener import open_app
from tests.shown_charts import chart_elements, decode, figure_of
from ui.pages.real_model.smollm2 import DEFAULT_PROMPT

PAGE = "app_pages/real_model.py"
LAYERS = (6, 17)
LINK = {"model": "smollm2", "rm_qknorm": "17,6", "rm_qknorm_gain": "matched"}


@pytest.fixture(scope="module")
def linked(smollm2) -> AppTest:
    return open_app(PAGE, timeout=600, **LINK)


@pytest.fixture(scope="module")
def engine(smollm2):
    run = smollm2.forward(DEFAULT_PROMPT)
    return {gain: qn.qk_norm_run(smollm2, run, LAYERS, gain) for gain in qn.GAINS}


def frame(at: AppTest, column: str):
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def range_chart(at: AppTest) -> dict:
    found = [figure_of(e) for e in chart_elements(at) if "Logits' range" in str(figure_of(e)["layout"].get("title"))]
    assert len(found) == 1
    return found[0]


def values(trace_y) -> np.ndarray:
    return decode(trace_y) if isinstance(trace_y, dict) else np.asarray(trace_y, dtype=float)


def test_the_link_fills_the_widgets_and_is_written_back(linked):
    assert linked.toggle(key="w_sm_qknorm_on").value
    assert linked.multiselect(key="w_sm_qknorm_layers").value == list(LAYERS)
    assert linked.segmented_control(key="w_sm_qknorm_gain").value == "matched"
    assert address(linked)["rm_qknorm"] == "6,17" and address(linked)["rm_qknorm_gain"] == "matched"


def test_shown_losses_are_the_engines(linked, engine):
    shown = frame(linked, "label")
    assert shown["gain"].tolist() == ["trained", "one", "matched"]
    dense = engine["one"].dense
    assert shown["loss"].tolist() == pytest.approx([dense, engine["one"].loss, engine["matched"].loss], abs=1e-9)
    assert shown["change"].iloc[2] == pytest.approx(engine["matched"].loss - dense, abs=1e-9)


def test_shown_ranges_and_gains_are_the_engines(linked, engine):
    matched = engine["matched"]
    rows = frame(linked, "after_max")
    np.testing.assert_allclose(rows[["before_min", "before_max"]].to_numpy(), matched.before, atol=1e-9)
    np.testing.assert_allclose(rows[["after_min", "after_max"]].to_numpy(), matched.after, atol=1e-9)
    np.testing.assert_allclose(rows["gain"].to_numpy()[list(LAYERS)], matched.gains[list(LAYERS)], rtol=1e-12)
    assert rows["gain"].isna().sum() == 28
    data = range_chart(linked)["data"]
    np.testing.assert_allclose(values(data[2]["y"]), matched.after[:, 1], atol=1e-9)  # with QK-norm, max
    np.testing.assert_allclose(values(data[1]["y"]), matched.before[:, 0], atol=1e-9)  # trained, min
    assert len(data) == 4  # no ±bound line for the matched gain


def test_the_plain_gain_shows_the_bound(smollm2, engine):
    at = open_app(PAGE, timeout=600, model="smollm2", rm_qknorm="6,17")
    data = range_chart(at)["data"]
    assert values(data[4]["y"]).tolist() == [8.0, 8.0] and values(data[5]["y"]).tolist() == [-8.0, -8.0]
    np.testing.assert_allclose(values(data[2]["y"]), engine["one"].after[:, 1], atol=1e-9)
    assert "rm_qknorm_gain" not in address(at)


def test_bad_link_values_get_a_message_and_the_default(smollm2):
    at = open_app(PAGE, timeout=600, model="smollm2", rm_qknorm="x,3", rm_qknorm_gain="learned")
    warnings = " ".join(w.value for w in at.warning)
    assert "rm_qknorm=x,3" in warnings and "rm_qknorm_gain=learned" in warnings
    assert at.multiselect(key="w_sm_qknorm_layers").value == [3]
    assert at.segmented_control(key="w_sm_qknorm_gain").value == "one"


def test_off_writes_nothing_and_the_text_stays_with_qk_norm_alone(smollm2):
    from ui.pages.real_model import qknorm as qv
    from ui.pages.real_model import whatif as wv

    assert qv.link_params(qv.QKNormLink()) == {}
    assert qv.link_params(qv.QKNormLink((), "one")) == {"rm_qknorm": "all"}
    assert wv.link_params(wv.WhatIfLink(text="calibration", more=True)) == {"rm_whatif_text": "calibration"}
    assert wv.link_params(wv.WhatIfLink(text="calibration")) == {}


def shown_text(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "subheader", "warning", "info") for e in getattr(at, kind)]
    parts += [at.toggle(key="w_sm_qknorm_on").label, at.multiselect(key="w_sm_qknorm_layers").label]
    return "\n".join(parts)


@pytest.mark.parametrize("lang", ["es", "zh-CN"])
def test_other_languages_translate_the_words_and_keep_the_numbers(smollm2, linked, lang):
    from ui.i18n import _ as translate
    from ui.i18n import using_language

    at = open_app(PAGE, timeout=600, lang=lang, **LINK)
    text = shown_text(at)
    mine = ("QK-norm after the fact", "QK-norm layers (none chosen: all 30)")
    with using_language(lang):
        for msgid in mine:
            assert msgid not in text and translate(msgid) in text, msgid
    assert "Why the gains must be learned" not in text
    np.testing.assert_array_equal(frame(at, "label")["loss"].to_numpy(), frame(linked, "label")["loss"].to_numpy())
    np.testing.assert_array_equal(frame(at, "after_max")["after_max"].to_numpy(),
                                  frame(linked, "after_max")["after_max"].to_numpy())
    assert all(msgid in shown_text(linked) for msgid in mine)  # the English page shows them
