"""The Lessons page in Chinese and Spanish: every string marked in the lessons' files is shown translated, and every
number stays the one the English page shows; lesson 18 still renders when a model file is missing.

The English msgids come from extracting the lessons' files (the README's keywords); a msgid whose translation differs
from it must not be shown as it is. Sentences with placeholders are matched as patterns, so a claim left in English
is found whatever its numbers.
"""

from __future__ import annotations

import html
import re
import string
from pathlib import Path

import pytest
import streamlit as st
from babel.messages.extract import extract_from_file
from stated_numbers import numbers_in
from streamlit.testing.v1 import AppTest

from ui.charts.marks import FAILS, HOLDS
from ui.i18n import _, using_language
from ui.pages.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "app_pages" / "lessons.py", *sorted((ROOT / "ui" / "pages" / "lessons").glob("*.py"))]
LANGS = ("zh-CN", "es")
MARKS = (f"- {HOLDS} ", f"- {FAILS} ")  # a claim's line


def marked() -> list[str]:
    """Every msgid marked in the Lessons page's files."""
    keywords = {"_": None, "N_": None, "ngettext": (1, 2)}
    found = []
    for path in FILES:
        for _line, message, _comments, _context in extract_from_file("python", str(path), keywords=keywords):
            found.extend(message if isinstance(message, tuple) else (message,))
    return found


MSGIDS = marked()


def pattern(msgid: str) -> re.Pattern:
    """``msgid`` as a regular expression matching any text it formats to ({n} -> anything)."""
    parts = [re.escape(literal) + ("(.+?)" if name is not None else "")
             for literal, name, _spec, _conv in string.Formatter().parse(msgid)]
    return re.compile("".join(parts), re.DOTALL)


def literal(msgid: str) -> str:
    """``msgid`` without its placeholders: '{agree} of {rows}' -> ' of '."""
    return "".join(text for text, _name, _spec, _conv in string.Formatter().parse(msgid))


def untranslated(lang: str) -> list[tuple[str, re.Pattern]]:
    """The msgids that read differently in ``lang`` (those equal in both, like 'RoPE', cannot be told apart), and
    words enough to be recognised: '{agree} of {rows}' would match any text with ' of ' in it."""
    with using_language(lang):
        return [(m, pattern(m)) for m in MSGIDS if _(m) != m and len(literal(m).strip()) > 2
                and (literal(m) == m or len(literal(m)) >= 12)]


def page(lang: str, lesson: str | None = None, predict: bool = False) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/lessons.py")
    at.query_params["lang"] = lang
    if lesson is not None:
        at.query_params["lesson"] = lesson
    at.run()
    assert not at.exception, at.exception
    if predict:
        at.toggle(key="w_lesson_predict").set_value(True).run()
    return at


def prose(markdown: str) -> str:
    """A markdown element's words: without its displayed formulas (LaTeX, not words) and with a heading's HTML tag
    taken off (Step by step writes each step as one markdown: ``<h3 data-anchor=...>`` title, words, ``$$`` formula)."""
    return html.unescape(re.sub(r"</?h3[^>]*>", "", re.sub(r"\$\$.*?\$\$", "", markdown, flags=re.DOTALL)))


def shown_texts(at: AppTest) -> list[str]:
    """Every piece of text the page shows: headings, markdown lines, captions, callouts, labels, table headers and
    the words in table cells."""
    texts = [e.value for kind in ("title", "header", "subheader", "caption", "info", "warning") for e in getattr(at, kind)]
    texts += [line.split("] ", 1)[-1].strip("-* ") for m in at.markdown for line in prose(m.value).splitlines()]
    texts += [b.label for b in at.button] + [t.label for t in at.toggle]
    for frame in at.dataframe:
        texts += [str(c) for c in frame.value.columns]
        texts += [str(v) for col in frame.value.columns for v in frame.value[col] if isinstance(v, str)]
    return [t for t in texts if t]


# Words a translated lesson shows as in English, with why: names of methods, models and tokenizer symbols; the field
# keeps softmax and token (README glossary); Spanish writes causal, panel and tokens as English does.
SAME_IN_EVERY_LANGUAGE = {"RoPE", "ALiBi", "GQA", "MQA", "MHA", "MLA", "KV", "softmax", "token", "tokens", "SmolLM2",
                          "MiniLM", "WordPiece", "UNK", "CLS", "SEP", "Xavier", "HBM", "FlashAttention", "elu", "sinks",
                          "MoBA", "DSA"}  # issue 34: the sparse schemes' names (a figure's titles, a table's columns)
SAME_IN_SPANISH = {"causal", "panel"}
# Shown on the Lessons page but written in files other helpers mark (not this page's files): left to them.
OTHER_FILES = {
    "Presentation mode",  # ui/widgets/presentation.py
    "fresh numbers", "reused from cache", "cache bytes", "cache bytes as MHA",  # ui/pipeline/cache_table.py
}


def text_not_cells(at: AppTest) -> list[str]:
    """The page's own words: ``shown_texts`` without the tables' cells (which hold model tokens and sentences)."""
    texts = [e.value for kind in ("title", "header", "subheader", "caption", "info", "warning") for e in getattr(at, kind)]
    texts += [line for m in at.markdown for line in prose(m.value).splitlines()]
    texts += [b.label for b in at.button] + [t.label for t in at.toggle]
    return texts + [str(c) for frame in at.dataframe for c in frame.value.columns]


def english_words(text: str) -> set[str]:
    """Words of three letters or more; a name with an underscore (d_model, d_k, B_r) is a variable, kept as it is."""
    return {w for w in re.findall(r"[A-Za-z][A-Za-z_]{2,}", text) if "_" not in w}


def same_as_english(english: AppTest, shown: AppTest, lang: str) -> list[str]:
    """Texts shown word for word as on the English page with English words in them: text nobody marked."""
    allowed = SAME_IN_EVERY_LANGUAGE | (SAME_IN_SPANISH if lang == "es" else set())
    before = set(text_not_cells(english))
    return [t for t in text_not_cells(shown)
            if t in before and t not in OTHER_FILES and english_words(t) - allowed]


def left_in_english(at: AppTest, lang: str) -> list[str]:
    found = []
    for text in shown_texts(at):
        for msgid, regex in untranslated(lang):
            if regex.fullmatch(text):
                found.append(f"{text!r} is the msgid {msgid!r}")
    return found


def numbers(at: AppTest, lang: str = "en") -> list[float]:
    """Every number in the page's claims, notes and tables' cells, sorted (a translation may order a sentence's
    numbers differently); a count grouped the way ``lang`` groups digits is read as its integer."""
    claims = [line for m in at.markdown for line in m.value.splitlines() if line.startswith(MARKS)]
    values = [n.value for text in claims + [c.value for c in at.caption] for n in numbers_in(text, lang)]
    for frame in at.dataframe:
        values += [float(v) for col in frame.value.columns for v in frame.value[col] if isinstance(v, int | float)]
    return sorted(values)


@pytest.mark.parametrize("lang", LANGS)
def test_the_overview_and_the_presets_are_translated(lang):
    at = page(lang)
    assert not left_in_english(at, lang)
    with using_language(lang):
        assert at.title[0].value == _("Lessons")
        assert [b.label for b in at.button if b.key.startswith("lesson_show_")] == [_("Show this lesson")] * len(LESSONS)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("key", list(LESSONS))
def test_each_lesson_is_translated_with_the_same_numbers(once, key, lang):
    english, shown = once(page, "en", key), page(lang, key)
    assert not left_in_english(shown, lang)
    assert not same_as_english(english, shown, lang)
    lesson = LESSONS[key]
    with using_language(lang):
        assert shown.header[0].value.endswith(_(lesson.title))
        assert _(lesson.explanation) in shown.info[0].value
    number = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")  # the lesson's number in the header
    assert number.findall(shown.header[0].value) == number.findall(english.header[0].value)
    assert numbers(shown, lang) == numbers(english)


@pytest.mark.parametrize("lang", LANGS)
def test_predict_first_and_the_unknown_lesson_warning_are_translated(lang):
    at = page(lang, "causal", predict=True)
    assert not left_in_english(at, lang)
    with using_language(lang):
        assert at.button(key="lesson_reveal_causal").label == _("Reveal the answer")
    at = page(lang, "nosuch")
    assert not left_in_english(at, lang) and "nosuch" in at.warning[0].value


@pytest.fixture
def no_models(monkeypatch):
    """Neither model's file can be found: the tokenizers' loaders raise as the model loaders do."""
    from mha_core._minilm_files import ModelUnavailableError
    from ui.pages.lessons import tokens

    def missing(*_args, **_kwargs):
        raise ModelUnavailableError("The model files were not found.\nHow to get them: ...")

    monkeypatch.setattr(tokens, "find_gguf", missing)
    monkeypatch.setattr(tokens, "find_model_source", missing)
    tokens.smollm2_tokenizer.cache_clear()
    tokens.minilm_tokenizer.cache_clear()
    st.cache_data.clear()  # the page's cached findings were computed with the models
    yield
    tokens.smollm2_tokenizer.cache_clear()
    tokens.minilm_tokenizer.cache_clear()
    st.cache_data.clear()


@pytest.mark.parametrize("lang", ["en", *LANGS])
def test_the_tokens_lesson_says_which_model_is_missing_and_still_renders(no_models, lang):
    at = page(lang, "tokens")
    with using_language(lang):
        warned = at.warning[0].value
        assert _("SmolLM2's model file was not found on this server ({why}): its token counts are left out.").format(
            why="The model files were not found.") in warned
        assert "MiniLM" in warned and "The model files were not found." in warned
        counts = at.dataframe[0].value
        assert list(counts.columns) == [_("language"), _("sentence"), _("characters"), _("UTF-8 bytes")]
    lines = [line for m in at.markdown for line in m.value.splitlines() if line.startswith("- ")]
    assert len(lines) == 1  # only the bytes claim, which needs no model
    assert counts.iloc[1, 2] == 7 and counts.iloc[1, 3] == 21  # 猫坐在垫子上。: 7 characters, 3 bytes each
    assert lang == "en" or not left_in_english(at, lang)
