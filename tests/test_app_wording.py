"""Wording a careful student trips on (issue 23, item 9), each line checked on the page it is shown on.

Each test fails on the old text: "Six short lessons" (and a number written into the README), "1 query head(s)
per K/V head", the norm-weighted colour bar titled "weight", Compare's colour bar reading "1n … −1n" when B = A,
the long label "Heads (only those dividing d_model)" in Compare's sentence, the custom-mask link message about
"24 rows of 24 digits" nobody gave, and a causal mask in cross-attention accepted without a word.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, build_mask
from tests.sidebar_controls import notes
from tests.test_app_compare import compare_page
from tests.test_app_heads import app, charts, decode, messages, open_take_apart
from ui.pages.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[1]
NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty")


def lessons_overview() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/lessons.py")
    return at.run()


def page_text(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.markdown, *at.caption, *at.warning, *at.info, *at.error])


def test_lessons_page_counts_its_lessons_from_the_registry():
    at = lessons_overview()
    assert not at.exception
    text = page_text(at)
    said = re.findall(r"(\w+) short lessons", text, flags=re.IGNORECASE)
    assert said == [str(len(LESSONS))], said  # "Six short lessons" when there were more failed here


def test_readme_lessons_row_names_every_lesson_without_a_number_to_forget():
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| **Lessons** |"))
    before = row.lower().split("short lessons", 1)[0]
    assert not any(re.search(rf"\b{word}\b", before) for word in NUMBER_WORDS) and not re.search(r"\d", before), row
    confusions = row.split("(", 1)[1].split(")", 1)[0].split(",")
    assert len(confusions) == len(LESSONS), (len(confusions), len(LESSONS))  # one named per lesson of the registry


def test_kv_heads_caption_counts_query_heads_in_words():
    for link, said in (({"heads": "4"}, "1 query head per K/V head"),
                       ({"heads": "4", "kv_heads": "2"}, "2 query heads per K/V head")):
        at = app(link)
        shown = "\n".join(notes(at))
        assert said in shown and "head(s)" not in shown and "head(s)" not in page_text(at)


def test_norm_weighted_colour_bar_names_what_it_shows():
    at = open_take_apart(app({"knock": "0"}))
    title = charts(at)["apart_carried"]["layout"]["coloraxis"]["colorbar"]["title"]["text"]
    assert title.startswith("weight × ‖v W_O‖"), title  # titled plain "weight" before


def test_compare_b_equal_to_a_reads_zero_not_nano():
    at = compare_page({})
    assert not at.exception
    axis = charts(at)["cmp_delta"]["layout"]["coloraxis"]
    deltas = [decode(t["z"]) for t in charts(at)["cmp_delta"]["data"] if "coloraxis" in t]
    assert all(np.all(d[np.isfinite(d)] == 0) for d in deltas)  # B = A: every difference is 0
    assert axis["colorbar"]["ticktext"] == ["0"] and axis["colorbar"]["tickvals"] == [0.0]  # not "1n … −1n"
    assert "0 everywhere" in axis["colorbar"]["title"]["text"]
    assert "B is the same as A" in messages(at) and "B − A is 0 in every cell" not in messages(at)  # said once
    at = compare_page({"b_wo": "0"})  # W_O comes after the weights: B differs, its weights do not
    assert "B's change leaves every head's weights as they were" in messages(at)
    assert charts(at)["cmp_delta"]["layout"]["coloraxis"]["colorbar"]["ticktext"] == ["0"]


def test_compare_with_a_difference_keeps_its_numbered_colour_bar():
    at = compare_page({"b_scale": "none"})
    axis = charts(at)["cmp_delta"]["layout"]["coloraxis"]
    deltas = np.stack([decode(t["z"]) for t in charts(at)["cmp_delta"]["data"] if "coloraxis" in t])
    assert axis["cmax"] == np.float32(np.nanmax(np.abs(deltas))) or np.isclose(axis["cmax"], np.nanmax(np.abs(deltas)))
    assert "ticktext" not in axis["colorbar"] and "B − A is 0 in every cell" not in messages(at)


def test_compare_sentence_uses_the_short_label():
    at = compare_page({"b_heads": "2"})
    sentence = next(m.value for m in at.markdown if m.value.startswith("B differs from A in:"))
    assert "**Heads** 4 → 2" in sentence and "dividing" not in sentence, sentence


def test_custom_mask_link_without_grid_says_what_was_missing():
    warned = messages(app({"mask": "custom"}))
    assert "`mask=custom` without `cmask`" in warned
    assert "rows of" not in warned  # the old message asked for "24 rows of 24 digits" the user never gave


def cross_config(queries: str, keys: str) -> MHAConfig:
    return MHAConfig(tokens=tuple(queries.split()), kv_tokens=tuple(keys.split()), mask="causal")


def test_causal_mask_in_cross_attention_says_what_it_means():
    queries, keys = "the cat sat", "a dog ran far away"
    at = app({"tokens": queries, "kv_tokens": keys, "mask": "causal"})
    note = next((line for line in notes(at) if "Cross-attention with a causal mask" in line), None)
    assert note is not None, "no word on what causal means in cross-attention"
    mask = build_mask(cross_config(queries, keys))  # what the engine applies
    for i in range(mask.shape[0]):  # the note's rule, query i sees keys 0..i, against the engine's mask
        assert [j for j in range(mask.shape[1]) if mask[i, j]] == list(range(i + 1))
    assert "query i may attend to keys 0..i" in note
    unseen = [j for j in range(mask.shape[1]) if not mask[:, j].any()]
    assert unseen == [3, 4] and "Keys 3..4 come after the last query: no query sees them" in note


def test_causal_mask_note_counts_the_queries_that_see_every_key():
    queries, keys = "the cat sat on", "a dog"
    note = next(line for line in notes(app({"tokens": queries, "kv_tokens": keys, "mask": "causal"}))
                if "Cross-attention" in line)
    mask = build_mask(cross_config(queries, keys))
    assert [i for i in range(4) if mask[i].all()] == [1, 2, 3] and "Queries 1..3 see all 2 keys" in note


def test_self_attention_causal_mask_has_no_cross_attention_note():
    at = app({"mask": "causal"})
    assert not any("Cross-attention with a causal mask" in line for line in notes(at))
