"""Longer than trained on the Real model page (SmolLM2's what-ifs) in AppTest: the link opens it (bad values: a
message and the default), and the shown numbers are the engine's (mha_core.smollm2_long) for the same settings."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from mha_core import smollm2_long as lg
from tests.address_bar import address
from tests.app_opener import open_app
from tests.shown_charts import chart_elements, decode, figure_of

PAGE = "app_pages/real_model.py"
LINK = {"model": "smollm2", "rm_long": "1", "rm_long_method": "ntk", "rm_long_factor": "1.5",
        "rm_long_tokens": "256"}


@pytest.fixture(scope="module")
def linked(smollm2) -> AppTest:
    return open_app(PAGE, timeout=1200, **LINK)


@pytest.fixture(scope="module")
def ntk_run(smollm2) -> lg.LongRun:
    ids, period = lg.long_token_ids(smollm2, lg.LONG_TEXT, 256)
    return lg.long_forward(smollm2, ids, period, lg.LongSetting("ntk", 1.5, 0.5, 256))


def rows(at: AppTest):
    found = [d.value for d in at.dataframe if "loss_after" in d.value.columns]
    assert len(found) == 1
    return found[0]


def values(trace: dict) -> np.ndarray:
    y = trace["y"]
    return decode(y) if isinstance(y, dict) else np.asarray(y, dtype=float)


def test_the_link_fills_the_widgets_and_is_written_back(linked):
    assert linked.toggle(key="w_sm_long_on").value
    assert linked.selectbox(key="w_sm_long_method").value == "ntk"
    assert linked.select_slider(key="w_sm_long_factor").value == 1.5
    assert linked.select_slider(key="w_sm_long_tokens").value == 256
    assert address(linked)["rm_long"] == "1" and address(linked)["rm_long_method"] == "ntk"
    assert address(linked)["rm_long_factor"] == "1.5"


def test_shown_numbers_are_the_engines(linked, ntk_run):
    shown = rows(linked)
    assert shown["method"].tolist() == ["inside", "trained", "ntk"]
    row = shown[shown["method"] == "ntk"].iloc[0]
    assert row["loss_after"] == pytest.approx(ntk_run.mean_loss(ntk_run.period), abs=1e-9)
    assert row["loss"] == pytest.approx(float(ntk_run.losses.mean()), abs=1e-9)
    assert row["entropy"] == pytest.approx(float(ntk_run.entropy.mean()), abs=1e-9)
    assert row["first"] == pytest.approx(float(ntk_run.first.mean()), abs=1e-9)
    assert row["induction"] == pytest.approx(float(ntk_run.induction.max()), abs=1e-9)
    specs = [figure_of(element) for element in chart_elements(linked)]
    loss = next(spec for spec in specs if "Loss on each next token" in str(spec["layout"].get("title", "")))
    np.testing.assert_allclose(values(loss["data"][2]), ntk_run.losses, atol=1e-12)
    layers = next(spec for spec in specs if "induction score" in str(spec["layout"].get("annotations", "")))
    ntk_traces = [trace for trace in layers["data"] if trace["name"] == lg.METHODS["ntk"]]
    np.testing.assert_allclose(values(ntk_traces[0]), ntk_run.entropy.mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(values(ntk_traces[1]), ntk_run.first.mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(values(ntk_traces[2]), ntk_run.induction.max(axis=1), atol=1e-12)
    captions = " ".join(c.value for c in linked.caption)
    assert f"G = {1.5 * 8192 - 256:,.0f}" in captions and f"last position {int(1.5 * 8192) - 1:,}" in captions


def test_bad_link_values_get_a_message_and_the_default(smollm2):
    at = open_app(PAGE, timeout=600, model="smollm2", rm_long="yes", rm_long_method="rope9", rm_long_factor="3",
                  rm_long_tokens="99999", rm_long_text="novel")
    warnings = " ".join(w.value for w in at.warning)
    for param in ("rm_long=yes", "rm_long_method=rope9", "rm_long_factor=3", "rm_long_tokens=99999",
                  "rm_long_text=novel"):
        assert param in warnings
    assert not at.toggle(key="w_sm_long_on").value
    assert "rm_long" not in address(at)


@pytest.mark.parametrize("lang", ["es", "zh-CN"])
def test_other_languages_translate_the_words_and_keep_the_numbers(linked, lang):
    from ui.i18n import _ as translate
    from ui.i18n import using_language

    at = open_app(PAGE, timeout=1200, lang=lang, **LINK)
    text = "\n".join([e.value for kind in ("markdown", "caption") for e in getattr(at, kind)]
                     + [at.toggle(key="w_sm_long_on").label, at.selectbox(key="w_sm_long_method").label])
    mine = ("Longer than trained: RoPE past the trained length", "RoPE past the trained length")
    with using_language(lang):
        for msgid in mine:
            assert translate(msgid) != msgid and translate(msgid) in text, msgid
    np.testing.assert_array_equal(rows(at)["loss"].to_numpy(), rows(linked)["loss"].to_numpy())
