"""Sparse selection's pages in Chinese and Spanish: the titles, words and lesson come from the catalogs (no English
msgid of ours left on the page), and every matrix shown is the same as in English."""

from __future__ import annotations

import numpy as np
import pytest
import shown_charts

from tests.app_opener import open_app
from tests.test_app_step_by_step import z_of
from ui.i18n import _, using_language

LINK = {"tokens": "the cat sat on a mat and slept", "mask": "causal", "topk": "2", "block": "2", "seed": "3"}
TITLES = ("A_{head}: kept keys only", "dense A_{head}: every allowed key")
STEP_TITLES = {"moba": ("mean key of each block (head {head})", "gate s = q_i · mean(K_b) (head {head})",
                        "blocks kept (1) by query i (head {head})"),
               "dsa": ("index I (every head shares it)", "keys kept (1): the top-k of each row")}


def texts(at) -> str:
    kinds = ("title", "header", "subheader", "caption", "markdown", "info", "warning")
    return "\n".join(e.value for kind in kinds for e in getattr(at, kind))


def figures(at) -> list[dict]:
    return [shown_charts.figure_of(chart) for chart in shown_charts.chart_elements(at)]


def titles_of(at) -> str:
    return " | ".join(str(f["layout"].get("title", {}).get("text", "")) + " " +
                      " ".join(a.get("text", "") for a in f["layout"].get("annotations", [])) for f in figures(at))


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
@pytest.mark.parametrize("kernel", ["moba", "dsa"])
def test_step_by_step_is_translated_and_shows_the_same_numbers(once, lang, kernel):
    english = once(open_app, "app_pages/step_by_step.py", **LINK, kernel=kernel)  # one English run per kernel
    there = open_app("app_pages/step_by_step.py", **LINK, kernel=kernel, lang=lang)
    shown = titles_of(there)
    with using_language(lang):
        for title in TITLES + STEP_TITLES[kernel]:
            assert _(title).format(head=0) in shown, (lang, title)
            assert title.format(head=0) not in shown
        step = _("Softmax over the kept keys, beside the dense row (sparse)")
    assert step in texts(there)
    ours = [z_of(f) for f in figures(english)]
    theirs = [z_of(f) for f in figures(there)]
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
def test_heads_section_and_lesson_are_translated(lang):
    at = open_app(None, **LINK, kernel="dsa", lang=lang)
    with using_language(lang):
        heading = _("Which keys each query keeps, beside the dense row")
        lesson_title = _("Sparse selection: MoBA's blocks and DeepSeek's indexer keep k, the softmax runs over those")
        question = _("Before you look: with k = 2, which keys does the last token read under MoBA (blocks of 2) and "
                     "under DeepSeek Sparse Attention? Does its row still sum to 1? And with k = T?")
    assert heading in texts(at)
    assert "Which keys each query keeps" not in texts(at)
    lesson = open_app("app_pages/lessons.py", lesson="sparse", lang=lang)
    shown = texts(lesson)
    assert lesson_title in shown and question in shown
    assert "Before you look: with k = 2" not in shown
