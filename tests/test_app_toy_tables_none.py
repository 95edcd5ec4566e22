"""No table of the toy pages prints "None" or "nan" either: Step by step's "Numbers instead of heatmaps" shows a
masked cell (logit −∞, weight not defined) as "—" and its caption names that mark, in every language; Heads and the
other toy pages draw their tables with a causal mask and a padding mask too. Cells are read as the browser gets them
(the values and the table's placeholder: ``tests/test_app_real_model_tables.shown_cells``)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.app_opener import ROOT, open_app
from tests.sidebar_controls import control
from tests.test_app_real_model_tables import unreadable
from ui.charts.numbers import EMPTY_CELL
from ui.i18n import translations

MASKED = {"mask": "causal"}


def step_tables(lang: str = "en"):
    """Step by step with a causal mask, its tables on from the first run (AppTest formats a selectbox's value in
    English after a run in another language and cannot find it among the translated options: no second run)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in {"lang": lang, **MASKED}.items():
        at.query_params[name] = value
    at.session_state["w_sbs_table"] = True
    at.switch_page("app_pages/step_by_step.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert control(at, "w_sbs_table").value
    return at


def test_step_by_steps_tables_show_masked_cells_as_a_dash():
    at = step_tables()
    masked = [element for element in at.dataframe if element.value.isna().to_numpy().any()]
    assert masked, "a causal mask leaves cells with no value in the scores' tables"
    assert all(element.proto.placeholder == EMPTY_CELL for element in masked)
    assert unreadable(at) == {}
    captions = [caption.value for caption in at.caption]
    assert f"Cells that read {EMPTY_CELL} are masked: their logit is −∞." in captions


@pytest.mark.parametrize("lang", ["es", "zh-CN"])
def test_the_masked_cells_caption_in_other_languages(lang):
    at = step_tables(lang)
    said = translations(lang).gettext("Cells that read {empty} are masked: their logit is −∞.").format(empty=EMPTY_CELL)
    assert said != f"Cells that read {EMPTY_CELL} are masked: their logit is −∞."
    assert said in [caption.value for caption in at.caption]
    assert unreadable(at) == {}


@pytest.mark.parametrize("page", [None, "app_pages/compare.py", "app_pages/decoding.py"])
@pytest.mark.parametrize("mask", ["causal", "padding"])
def test_no_toy_table_reads_none(page, mask):
    at = open_app(page, mask=mask)
    assert unreadable(at) == {}
