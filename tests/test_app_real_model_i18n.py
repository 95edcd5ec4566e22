"""The Real model page in Chinese and Spanish (issue 37): MiniLM's and SmolLM2's views with ``?lang=zh-CN`` and
``?lang=es`` show the catalog's words, no English msgid of this page is left on screen, and every number (the
heatmaps' values, the tables' cells, the counts in the text) is the same as in English.

Skips with a reason where a model's files are not installed, as the page's other tests do.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from babel.messages.pofile import read_po
from streamlit.testing.v1 import AppTest

from tests.shown_charts import charts, decode
from ui.i18n import _ as translate
from ui.i18n import catalog_path, using_language

ROOT = Path(__file__).resolve().parents[1]
PAGE = "app_pages/real_model.py"
PAGE_FILES = ("app_pages/real_model.py", "ui/pages/real_model/")
LANGUAGES = ("zh-CN", "es")
CJK_PROMPT = "注意力是什么？🙂"


def page_msgids(code: str) -> dict[str, str]:
    """This page's msgids -> their translation in ``code`` (entries marked in its files), words only."""
    with catalog_path(code).open("rb") as po:
        entries = read_po(po)
    return {m.id: m.string for m in entries if m.id and isinstance(m.id, str) and m.string != m.id
            and any(where.startswith(PAGE_FILES) for where, _line in m.locations) and re.search("[a-z]{3}", m.id)}


def open_page(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown_texts(at: AppTest) -> list[str]:
    """Every piece of text the run shows in its main area: prose, titles, messages and widget labels."""
    texts = [str(e.value) for kind in ("title", "subheader", "markdown", "caption", "info", "warning", "error")
             for e in getattr(at.main, kind)]
    for kind in ("button", "toggle", "selectbox", "text_input", "slider", "radio"):
        for widget in at.get(kind):
            texts.append(widget.label)
            texts.append(getattr(widget, "help", None) or "")
    texts += [e.label for e in at.get("expander")]
    return texts


def numbers(at: AppTest) -> dict:
    """The page's numbers: each heatmap's values and each table's cells (by its key), as the browser gets them."""
    heatmaps = [decode(trace["z"]) for figure in charts(at).values() for trace in figure["data"]
                if isinstance(trace.get("z"), dict) and "bdata" in trace["z"]]
    tables = [frame.value.to_numpy(dtype=float, na_value=np.nan) for frame in at.dataframe
              if frame.value.select_dtypes("number").shape[1] == frame.value.shape[1]]
    numeric = [frame.value.select_dtypes("number").to_numpy(dtype=float) for frame in at.dataframe]
    return {"heatmaps": heatmaps, "tables": tables, "numeric columns": numeric}


def digits_in(texts: list[str]) -> list[str]:
    """The ASCII numbers in the text, in order of appearance per text (counts, layers, sizes), sorted as a bag."""
    return sorted(n for text in texts for n in re.findall(r"\d+(?:\.\d+)?", text))


def assert_same_numbers(english: AppTest, other: AppTest) -> None:
    a, b = numbers(english), numbers(other)
    assert len(a["heatmaps"]) == len(b["heatmaps"]) > 0
    for x, y in zip(a["heatmaps"], b["heatmaps"], strict=True):
        np.testing.assert_array_equal(x, y)
    assert len(a["numeric columns"]) == len(b["numeric columns"]) > 0
    for x, y in zip(a["numeric columns"], b["numeric columns"], strict=True):
        np.testing.assert_array_equal(x, y)


def untranslated(at: AppTest, code: str) -> list[str]:
    """This page's English msgids still on screen: a short one as a whole text, a sentence anywhere in a text."""
    texts = shown_texts(at)
    joined = "\n".join(texts)
    left = []
    for msgid in page_msgids(code):
        if "{" in msgid:
            sentence = max(re.split(r"\{[^}]*\}", msgid), key=len)  # the longest literal run of a template
            if len(sentence) > 25 and sentence in joined:
                left.append(msgid)
        elif msgid in texts or (len(msgid) > 25 and msgid in joined):
            left.append(msgid)
    return left


@pytest.fixture(scope="module")
def minilm_pages():
    from mha_core import pretrained

    try:
        pretrained.load_minilm(allow_download=False)
    except RuntimeError as error:  # ModelUnavailableError: the files are not on this machine
        pytest.skip(f"the MiniLM files are not installed: {error}")
    return {lang: open_page({"lang": lang} if lang != "en" else {}) for lang in ("en", *LANGUAGES)}


@pytest.fixture(scope="module")
def smollm2_pages():
    from mha_core import smollm2 as smol

    try:
        smol.load_smollm2(allow_download=False)
    except smol.ModelUnavailableError as error:
        pytest.skip(f"the SmolLM2 file is not installed: {error}")
    pages = {}
    for lang in ("en", *LANGUAGES):
        params = {"model": "smollm2", "rm_text": CJK_PROMPT, **({"lang": lang} if lang != "en" else {})}
        pages[lang] = open_page(params)
    return pages


@pytest.mark.parametrize("lang", LANGUAGES)
def test_minilm_view_speaks_the_language(minilm_pages, lang):
    at = minilm_pages[lang]
    with using_language(lang):
        title = translate("Real model: all-MiniLM-L6-v2")
        patterns = translate("Patterns worth looking for")
    assert at.title[0].value == title != "Real model: all-MiniLM-L6-v2"
    assert patterns in [s.value for s in at.subheader]
    assert untranslated(at, lang) == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_minilm_numbers_equal_across_languages(minilm_pages, lang):
    assert_same_numbers(minilm_pages["en"], minilm_pages[lang])
    # the counts the prose states (pieces, layers, heads, sizes) are the same numbers in every language
    english = [c.value for c in minilm_pages["en"].caption][:1]
    other = [c.value for c in minilm_pages[lang].caption][:1]
    assert digits_in(english) == digits_in(other)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_smollm2_view_speaks_the_language(smollm2_pages, lang):
    at = smollm2_pages[lang]
    with using_language(lang):
        title = translate("Real model: SmolLM2-135M-Instruct")
        legend = translate("A token can hold part of a character: byte-level BPE cuts the UTF-8 bytes of a Chinese "
                           "character (3 bytes) or an emoji (4) where its merges say. Such a token shows the whole "
                           "character with a piece mark: 中¹⁄₂ is the first of the 2 tokens that share 中, 中²⁄₂ "
                           "the second. Hover a token for its bytes; joined in order, the tokens' bytes are the "
                           "prompt exactly.")
        hover = translate("bytes {hex}").format(hex="e6 b3")
    assert at.title[0].value == title
    assert legend in [c.value for c in at.caption]
    chips = next(h.proto.body for h in at.get("html") if "flex-wrap: wrap" in h.proto.body)  # the token chips
    assert "注¹⁄₂" in chips and "�" not in chips and f'title="{hover}' in chips
    assert untranslated(at, lang) == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_smollm2_numbers_equal_across_languages(smollm2_pages, lang):
    assert_same_numbers(smollm2_pages["en"], smollm2_pages[lang])
    english, other = smollm2_pages["en"], smollm2_pages[lang]
    assert [b.proto.body for b in english.get("html")] != [] and len(english.get("html")) == len(other.get("html"))
    token_count = [c.value for c in english.caption if "tokens of at most" in c.value][0]
    assert re.findall(r"\d+", token_count)[:2] == re.findall(r"\d+", [c.value for c in other.caption][0])[:2]


def test_smollm2_heatmap_labels_are_the_tokens_marked_and_unique(smollm2_pages):
    """The heatmap's axes carry each token's label with its position: unique, partial characters marked."""
    from mha_core import smollm2 as smol

    model = smol.load_smollm2(allow_download=False)
    ids = model.encode(CJK_PROMPT)
    expected = [f"{i}:{label.text}" for i, label in enumerate(model.token_labels(ids))]
    grid = charts(smollm2_pages["zh-CN"])["sm_grid"]
    ticks = [list(trace["y"]) for trace in grid["data"] if trace.get("type") == "heatmap" and "y" in trace][0]
    assert ticks == expected and len(set(ticks)) == len(ticks)
    assert any("¹⁄₂" in t for t in ticks) and not any("�" in t for t in ticks)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_check_sees_english_on_the_english_page(minilm_pages, smollm2_pages, lang):
    """The untranslated-text check is not blind: on the English pages it finds this page's msgids."""
    assert len(untranslated(minilm_pages["en"], lang)) > 10
    assert len(untranslated(smollm2_pages["en"], lang)) > 10


def test_smollm2_names_the_characters_it_cannot_spell_in_the_language(smollm2_pages):
    """A character with a byte the vocabulary lacks (U+40000: lead byte f1) is named, not silently dropped."""
    at = open_page({"model": "smollm2", "rm_text": "a\U00040000b 注", "lang": "es"})
    with using_language("es"):
        expected = translate("The tokenizer cannot write {chars}: a byte of each has no token in SmolLM2's "
                             "vocabulary, so these characters are left out of the tokens.").format(chars="U+40000")
    assert expected in [w.value for w in at.warning]
    assert not open_page({"model": "smollm2", "rm_text": "a b 注", "lang": "es"}).warning
