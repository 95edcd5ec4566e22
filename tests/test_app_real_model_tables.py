"""No table of the Real model page prints "None" or "nan": a cell without a value (the role table's "no clear role"
row, MiniLM's 'on its word' on a sentence with no split word) shows "—", and the page says why. Every section that
draws a table is opened (the links of the roles, flow, heads-off and token-set sections, the step-by-step toggle),
on both models, and each table's cells are read as the browser gets them (the values and the table's placeholder)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.app_opener import open_app
from tests.test_minilm_roles import definitions
from ui.charts.numbers import EMPTY_CELL

PAGE = "app_pages/real_model.py"
UNSPLIT = "Fish swim in rivers."  # no word cut into pieces: 'on its word' has nothing to measure
SECTIONS = dict(rm_roles="previous", rm_flow="rollout", rm_flow_token="2", rm_off="1.2", rm_sq="1", rm_sk="0,1")
SHOWN_AS_NOTHING = {"None", "none", "nan", "NaN", "NaT", "<NA>"}  # a blank marker cell ("") is meant


def shown_cells(element) -> list[str]:
    """What each cell of a table reads: a missing value reads the table's placeholder, or "None" without one (what
    Streamlit prints then); any other value as text."""
    frame: pd.DataFrame = element.value
    empty = element.proto.placeholder if element.proto.HasField("placeholder") else "None"
    return [empty if pd.isna(value) else str(value) for column in frame.columns for value in frame[column]]


def unreadable(at) -> dict[str, list[str]]:
    """Per table (its columns), the cells that read as nothing."""
    found = {}
    for element in at.dataframe:
        bad = [cell for cell in shown_cells(element) if cell.strip() in SHOWN_AS_NOTHING]
        if bad:
            found[", ".join(map(str, element.value.columns))] = bad
    return found


def with_steps_on(at):
    at.toggle(key="w_rm_steps").set_value(True).run()
    assert not at.exception
    return at


@pytest.mark.parametrize("text", [UNSPLIT, "The snowboarder was unbelievably fast."])
def test_no_minilm_table_reads_none(text, model):
    at = with_steps_on(open_app(PAGE, timeout=240, rm_text=text, **SECTIONS))
    assert len(at.dataframe) >= 7  # head diagnostics, heads off, roles, flow, token sets, the drill-down's three
    assert unreadable(at) == {}


def test_the_roles_tables_last_row_has_no_example_and_says_so(model):
    from mha_core import minilm_roles as mr

    at = open_app(PAGE, timeout=240, rm_text=UNSPLIT, rm_roles="previous")
    element = next(d for d in at.dataframe if "example" in d.value.columns)
    frame = element.value
    probe = mr.run_probe(model, 24, seed=0)
    expected = definitions(probe.attentions.astype(np.float64), probe.half)
    assert frame["heads"].sum() == probe.attentions.shape[0] * probe.attentions.shape[1]
    for key, row in zip(expected, frame.itertuples(index=False), strict=False):  # a role with its example head
        layer, head = np.unravel_index(int(np.argmax(expected[key])), expected[key].shape)
        assert row.example == f"{layer}.{head}"
    assert shown_cells(element)[len(frame) * 3 - 1] == EMPTY_CELL  # the example column's last cell (3rd column)
    assert list(frame.iloc[-1].isna()) == [False, False, True, True, True]  # no clear role: no example, no score
    assert any("no example head and no score" in c.value and EMPTY_CELL in c.value for c in at.caption)


def test_on_its_word_without_a_split_word_reads_a_dash_and_says_why(model):
    at = open_app(PAGE, timeout=240, rm_text=UNSPLIT)
    element = next(d for d in at.dataframe if "on its word" in d.value.columns)
    assert element.value["on its word"].isna().all()  # the engine has nothing to measure here...
    assert element.proto.placeholder == EMPTY_CELL  # ... and the table prints the dash for it
    assert any("under 'on its word': no word of this sentence is split" in c.value for c in at.caption)
    split = open_app(PAGE, timeout=240, rm_text="The snowboarder was unbelievably fast.")
    assert not any("no word of this sentence is split" in c.value for c in split.caption)


def test_no_smollm2_table_reads_none(smollm2):
    at = open_app(PAGE, timeout=600, model="smollm2", rm_roles="induction", rm_flow="rollout", rm_flow_token="2")
    assert any("example" in d.value.columns for d in at.dataframe)
    assert unreadable(at) == {}


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
def test_the_diagnostics_rows_are_named_in_the_language_after_an_english_visit(lang, model, smollm2):
    """The tables are cached per sentence and layer: the language is part of the key (an English visit first)."""
    from ui.i18n import _ as translate
    from ui.i18n import using_language

    with using_language(lang):
        heads = [translate("head {h}").format(h=h) for h in range(12)]
    assert heads[0] != "head 0"
    for link, n_heads in (({"rm_text": UNSPLIT}, 12), ({"model": "smollm2"}, 9)):
        for language in ("en", lang):
            at = open_app(PAGE, timeout=600, **link, **({} if language == "en" else {"lang": language}))
        (frame,) = [d.value for d in at.dataframe if len(d.value) == n_heads and len(d.value.columns) >= 5]
        assert list(frame.index) == heads[:n_heads], link


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
def test_the_dashes_notes_in_other_languages(lang, model):
    from ui.i18n import _ as translate
    from ui.i18n import using_language

    at = open_app(PAGE, timeout=240, rm_text=UNSPLIT, rm_roles="previous", lang=lang)
    with using_language(lang):
        roles = translate("{empty}: the heads with no clear role have no example head and no score of their own.")
        word = translate("{empty} under '{column}': no word of this sentence is split into pieces, so there is "
                         "nothing to measure.").format(empty=EMPTY_CELL, column=translate("on its word"))
    assert "{empty}" in roles and "no example head" not in roles  # the catalog's translation
    captions = " ".join(c.value for c in at.caption)
    assert roles.format(empty=EMPTY_CELL) in captions and word in captions
    assert unreadable(at) == {}
