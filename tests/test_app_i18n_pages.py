"""Heads, Compare A/B, FlashAttention, Seed notebooks and About in zh-CN and es (issue 37).

Each page is opened with ``?lang=zh-CN`` and ``?lang=es`` and its main area read as the browser gets it (every
element's text, widget labels and help, tables, chart titles and hover words). No text marked in these pages' files
(``PAGE_FILES``, extracted as ``pybabel extract`` does) may be left in English there: a marked string whose English
differs from its translation must not show up, whole (a label) or as a phrase of a longer text. The page's numbers
(decimals in the text, table cells, heatmap values, metrics) must be the same in the three languages.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from babel.messages.extract import extract_from_file
from google.protobuf.json_format import MessageToDict
from streamlit.testing.v1 import AppTest

from tests.app_opener import open_app
from tests.shown_charts import charts, decode
from ui.i18n import translations

ROOT = Path(__file__).resolve().parents[1]
PAGE_FILES = (
    "app_pages/heads.py", "ui/pages/heads/apart.py", "ui/pages/heads/apart_section.py", "ui/pages/heads/quiz.py",
    "ui/pages/heads/downloads.py",
    "app_pages/compare.py", "ui/pages/compare.py", "app_pages/flash.py", "ui/pages/flash.py",
    "app_pages/seeds.py", "ui/pages/seeds.py", "content/seeds.py", "app_pages/about.py", "ui/pages/about.py",
)
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}
LANGS = ("zh-CN", "es")
# Each page with a link that draws its sections (Heads: the take-apart section open, knock=1).
PAGES = {
    "heads": ("app_pages/heads.py", {"tokens": "the cat sat on the mat", "heads": "2", "mask": "causal", "knock": "1"}),
    "heads_present": ("app_pages/heads.py", {"tokens": "the cat sat", "heads": "2", "present": "1", "avg": "1"}),
    "compare": ("app_pages/compare.py", {"tokens": "the cat sat on the mat", "b_scale": "none"}),
    "flash": ("app_pages/flash.py", {"tokens": "the cat sat on the mat", "mask": "causal", "tile": "3"}),
    "seeds": ("app_pages/seeds.py", {}),
    "about": ("app_pages/about.py", {}),
}
# Text a page shows from elsewhere (not marked in PAGE_FILES) that equals a word or phrase marked here, and why.
SHOWN_FROM_ELSEWHERE = {
    "heads_present": {"none": "an option value of the presentation bar's Positions/Mask controls (ui/state/settings.py)",
                      "valid length": "the option 'padding (valid length)' of the bar's Mask control (settings.py)",
                      "weights": "the view switch's value, a link key (w_view=weights; its label is ui/charts/views.py's)"},
    "compare": {"none": "an option value of B's scale/positions controls (ui/state/settings.py, the sidebar's)",
                "valid length": "the option 'padding (valid length)' of B's mask control (ui/state/settings.py)"},
    "flash": {"mask": "a rule name of mha_core/flash.py (the engine's records are marked by another helper)",
              "scale": "a rule name of mha_core/flash.py (as above)"},
    "about": {"none": "the link value pe=none, a key of the positional schemes' table (never translated)",
              "what it does": "a column of the kernels' table (ui/charts/kernels.py KERNEL_COLUMNS)",
              "from": "a column of the kernels' table (ui/charts/kernels.py KERNEL_COLUMNS)",
              "Each head's output": "a step's summary (ui/pipeline/step_kinds.py)",
              "number of heads": "the glossary of shapes, read live from mha_core's docstring",
              "output projection": "a step's summary (ui/pipeline/step_kinds.py)"},
}
PHRASE_CHARS = 12  # a literal part of a msgid this long (and of two words or more) is looked for inside longer text


@cache
def marked() -> tuple[tuple[str, ...], ...]:
    """Every msgid (singular, and plural where there is one) marked in ``PAGE_FILES``."""
    found = []
    for name in PAGE_FILES:
        for _line, message, _comments, _context in extract_from_file("python", str(ROOT / name), keywords=KEYWORDS):
            found.append(message if isinstance(message, tuple) else (message,))
    return tuple(found)


def literal_parts(text: str) -> list[str]:
    """The parts of a msgid between its {placeholders}."""
    return [part for part, _name, _spec, _conv in string.Formatter().parse(text)]


@cache
def english_left(lang: str) -> tuple[set[str], set[str]]:
    """(whole labels, phrases) that are English only: each marked text whose translation differs, and each long
    literal part of one that the translation does not contain (formulas and names kept as they are drop out)."""
    catalog = translations(lang)
    whole, phrases = set(), set()
    for key in marked():
        forms = [catalog.gettext(key[0])] if len(key) == 1 else [catalog.ngettext(key[0], key[1], n) for n in (1, 2)]
        for english in key:
            if english in forms:
                continue
            if "{" not in english:
                whole.add(english.strip())
            for part in literal_parts(english):
                part = part.strip(" .,:;()—-")
                if len(part) >= PHRASE_CHARS and " " in part and not any(part in form for form in forms):
                    phrases.add(part)
    return whole, phrases


LAZY = {"heads": ("heads_downloads", "quiz_open", "diagnostics_open")}  # sections drawn only while open: opened, as a click leaves them


def open_page(page: str, lang: str | None) -> AppTest:
    path, params = PAGES[page]
    if page not in LAZY:
        return open_app(path, 90, **params, **({"lang": lang} if lang else {}))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    for name, value in {**params, **({"lang": lang} if lang else {})}.items():
        at.query_params[name] = value
    at.switch_page(path)
    for key in LAZY[page]:
        at.session_state[key] = True
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def strings_of(value) -> list[str]:
    """Every string inside a nested dict/list (an element's proto as a dict)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_of(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_of(v)]
    return []


FIGURE_WORDS = ("text", "hovertemplate", "name")  # keys of a figure whose strings a reader sees


def figure_texts(figure) -> list[str]:
    """Titles, axis titles, annotations and hover templates of a figure (not its numbers or tick labels)."""
    found = []
    if isinstance(figure, dict):
        for key, value in figure.items():
            if key in FIGURE_WORDS and isinstance(value, str):
                found.append(value)
            elif key not in ("x", "y", "z", "customdata", "ticktext", "tickvals"):
                found += figure_texts(value)
    elif isinstance(figure, list):
        for value in figure:
            found += figure_texts(value)
    return found


def frames(at: AppTest) -> list[pd.DataFrame]:
    return [e.value for e in at.main.dataframe] + [e.value for e in at.main.table]


def frame_texts(frame: pd.DataFrame) -> list[str]:
    cells = [str(v) for v in frame.to_numpy().ravel() if isinstance(v, str)]
    return [str(c) for c in frame.columns] + [str(i) for i in frame.index] + [str(frame.index.name)] + cells


def page_texts(at: AppTest) -> list[str]:
    """What the main area shows in words: each element's strings, its tables' headers and cells, its figures'."""
    texts = []
    for node in at.main:
        proto = getattr(node, "proto", None)
        if proto is not None and node.type not in ("bidi_component", "plotly_chart", "arrow_data_frame", "code"):
            texts += strings_of(MessageToDict(proto))
    for frame in frames(at):
        texts += frame_texts(frame)
    for figure in charts(at).values():
        texts += figure_texts(figure)
    return texts


def untranslated(at: AppTest, lang: str, page: str) -> list[str]:
    """The marked English left on ``page`` in ``lang`` (less what the page shows from elsewhere)."""
    whole, phrases = english_left(lang)
    texts = page_texts(at)
    left = {t.strip() for t in texts if t.strip() in whole} | {p for p in phrases if p in "\n".join(texts)}
    return sorted(left - set(SHOWN_FROM_ELSEWHERE.get(page, {})))


DIGITS = re.compile(r"\d+(?:\.\d+)?(?:e[−+-]?\d+)?")  # every number in a short text ('2 of 3' -> 2, 3)
NUMBER = re.compile(r"[−-]?\d+\.\d+(?:e[−+-]?\d+)?|[−-]?\d+e[−+-]\d+")


def numbers_of(at: AppTest) -> dict[str, object]:
    """The page's numbers: decimals written in its text (as a multiset), table cells, heatmap values, metrics."""
    words = [t for node in at.main if getattr(node, "proto", None) is not None
             and node.type not in ("bidi_component", "plotly_chart", "arrow_data_frame", "code")
             for t in strings_of(MessageToDict(node.proto))]
    cells = [frame.select_dtypes("number").to_numpy(dtype=float) for frame in frames(at)]
    heatmaps = [decode(trace["z"]) for figure in charts(at).values() for trace in figure["data"]
                if isinstance(trace.get("z"), dict) and "bdata" in trace["z"]]
    return {"text": Counter(n for t in words for n in NUMBER.findall(t)), "cells": cells, "heatmaps": heatmaps,
            "metrics": [DIGITS.findall(m.value) for m in at.main.metric]}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("page", list(PAGES))
def test_a_page_in_a_language_leaves_none_of_its_text_in_english(once, page, lang):
    at = once(open_page, page, lang)
    left = untranslated(at, lang, page)
    assert not left, f"{page} ?lang={lang} shows English: {left}"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("page", list(PAGES))
def test_a_page_shows_the_same_numbers_in_every_language(once, page, lang):
    before, after = numbers_of(once(open_page, page, None)), numbers_of(once(open_page, page, lang))
    assert after["text"] == before["text"] and before["text"] or page == "about"
    assert after["metrics"] == before["metrics"]
    for name in ("cells", "heatmaps"):
        assert len(after[name]) == len(before[name])
        assert all(a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
                   for a, b in zip(after[name], before[name], strict=True)), name


@pytest.mark.parametrize("page, lang, shown", [
    ("heads", "zh-CN", "每个头在做什么"), ("heads", "es", "Qué hace cada cabeza"),
    ("compare", "zh-CN", "对比 A 与 B"), ("compare", "es", "Comparar A y B"),
    ("flash", "zh-CN", "内存流量"), ("flash", "es", "Tráfico de memoria"),
    ("seeds", "zh-CN", "种子笔记"), ("seeds", "es", "Cuadernos semilla"),
    ("about", "zh-CN", "关于 MHA Explorer"), ("about", "es", "Acerca de MHA Explorer"),
])
def test_a_page_shows_the_catalogs_words(once, page, lang, shown):
    assert any(shown in text for text in page_texts(once(open_page, page, lang)))


def test_the_english_page_is_what_the_check_looks_for(once):
    """The check is not vacuous: the English Heads page shows phrases the Chinese one must not."""
    whole, phrases = english_left("zh-CN")
    texts = page_texts(once(open_page, "heads", None))
    joined = "\n".join(texts)
    assert "What each head does" in whole and any(p in joined for p in phrases)
    assert {t.strip() for t in texts} & whole


def test_a_check_with_numbers_in_its_words_is_translated_with_the_same_numbers():
    from ui.i18n import using_language
    from ui.pages.seeds import check_text

    shape, spread = "weights has shape (2, 5, 4, 6)", "mean of output[0, 0] lies within the seed's printed range 12..3456"
    assert check_text(shape) == shape and check_text(spread) == spread  # English: the check's own key
    with using_language("es"):
        assert check_text(shape) == "weights tiene forma (2, 5, 4, 6)"
        assert check_text(spread).endswith("12..3456") and "semilla" in check_text(spread)
    with using_language("zh-CN"):
        assert check_text(shape) == "weights 的形状是 (2, 5, 4, 6)"
