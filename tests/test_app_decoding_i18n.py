"""The Decoding page in Simplified Chinese and Spanish (issue 37): every mode of the page (the KV-cache stepper and
its cache policies, the variants' stepper for the differential, linear and MLA layers, the positions and RoPE
sections) shows the catalogs' words, and every number it shows is the same as in English.

The words checked are the msgids marked in the files this page draws from (``DECODING_FILES``), read by Babel's
extractor from the code, not from the catalogs: a string marked there and shown in English in another language
fails here. A msgid with placeholders is matched as a pattern (its ``{fields}`` stand for anything).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from babel.messages.extract import extract_from_file
from streamlit.testing.v1 import AppTest

from tests.shown_charts import chart_elements, decode, figure_of
from ui.i18n import translations, using_language

ROOT = Path(__file__).resolve().parents[1]
PAGE = "app_pages/decoding.py"
DECODING_FILES = ("app_pages/decoding.py", "ui/pages/decoding/__init__.py", "ui/pages/decoding/cache_policy.py",
                  "ui/pages/decoding/cache_policy_section.py", "ui/pages/decoding/variant_stepper.py",
                  "ui/pages/decoding/variants.py", "mha_core/decoder_state.py", "mha_core/linear_state.py",
                  "mha_core/cache_policy.py")
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}
LANGUAGES = ("zh-CN", "es")
BASE = {"tokens": "the cat sat on a mat", "d_model": "16", "heads": "4", "kv_heads": "2", "seed": "5"}
MODES = {  # every mode of the page, and the conditions under which its other sentences appear
    "kv cache, sinks, rope, sqrt_t, mask none, cross": dict(pe="rope", scale="sqrt_t", mask="none", cache="sinks",
                                                            cache_window="2", sinks="1", kv_tokens="x y z"),
    "kv cache, window, alibi, null key, re-indexed, cross": dict(pe="alibi", null="1", cache="window",
                                                                 cache_window="3", cache_rope="cache",
                                                                 kv_tokens="x y z"),
    "kv cache, no positions, odd head size": dict(d_model="6", heads="2", kv_heads="2", pe="none"),
    "differential": dict(kernel="differential", pe="rope", d_model="32"),
    "linear": dict(kernel="linear"),
    "mla": dict(mla_rank="4", mla_rope="2", pe="rope", kv_heads="4"),
}
STEP = 2  # a step with a past: the "reused" sentence, evicted keys under a window of 2
FIRST_STEP_MODES = ("kv cache, no positions, odd head size",)  # opened at step 0: "nothing yet" is reused

# Words of these files that every language writes alike, each with its reason.
SAME_IN_EVERY_LANGUAGE = {
    "token": "the glossary keeps 'token' in English in every language",
    "; ": "a separator; Spanish keeps it",
    "**{name}**: {summary}": "only placeholders and punctuation (es)",
}
NUMBER = re.compile(r"[-+−]?\d+(?:[.,]\d+)*(?:e[-+]\d+)?")


def marked_msgids() -> list[str]:
    """The msgids (singular) marked in the Decoding page's files, as Babel extracts them from the code."""
    ids = []
    for name in DECODING_FILES:
        for _line, message, _comments, _context in extract_from_file("python", str(ROOT / name), keywords=KEYWORDS):
            ids.extend(message if isinstance(message, tuple) else (message,))
    return sorted(set(ids))


def pattern(msgid: str) -> re.Pattern:
    """The English text a msgid shows once its placeholders are filled in: ``{field}`` stands for anything."""
    parts = re.split(r"\{\w*(?:[:!][^}]*)?\}", msgid)
    return re.compile("(?s)" + ".+?".join(re.escape(part) for part in parts))


def strings_in(value) -> list[str]:
    """Every string a figure carries in its layout and traces (titles, axis titles, hover templates, texts),
    without the arrays."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        if "bdata" in value:
            return []
        return [s for key, item in value.items() if key not in ("x", "y", "z", "customdata") for s in strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


def open_page(lang: str, params: dict[str, str], step: int) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    for name, value in {**BASE, **params, "lang": lang}.items():
        at.query_params[name] = value
    at.switch_page(PAGE).run()
    assert not at.exception, [e.message for e in at.exception]
    with using_language(lang):  # AppTest formats the options of the page's selectboxes again, in this thread
        at.slider(key="w_dec_step").set_value(step).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def shown(at: AppTest) -> dict[str, list]:
    """What the main area shows: ``texts`` (every string a reader reads, in page order), ``frames`` (the tables'
    values) and ``arrays`` (the charts' matrices)."""
    main = at.main
    texts = [e.value for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning")
             for e in main.get(kind)]
    for metric in main.get("metric"):
        texts += [metric.label, metric.value, metric.proto.help]
    for kind in ("slider", "selectbox", "radio", "number_input"):
        for widget in main.get(kind):
            texts += [widget.label, widget.help or ""]
            texts += list(getattr(widget, "options", []))
    texts += [b.proto.help for b in main.get("button")] + [e.label for e in main.get("expander")]
    frames = [frame.value for frame in main.get("dataframe")]
    for frame in frames:
        texts += [str(c) for c in frame.columns] + [str(frame.index.name or "")]
    arrays = []
    for element in chart_elements(at):
        figure = figure_of(element)
        texts += strings_in(figure)
        arrays += [decode(trace["z"]) for trace in figure["data"] if isinstance(trace.get("z"), dict)]
    return {"texts": [t for t in texts if t], "frames": frames, "arrays": arrays}


def english_left(texts: list[str], msgids: list[str]) -> set[str]:
    """The msgids whose English text is among ``texts``: a whole text (a label, a column, a title), or, for a
    sentence (20 characters or more besides its placeholders), part of a longer text."""
    left = set()
    for msgid in msgids:
        found = pattern(msgid)
        literal = len(re.sub(r"\{[^}]*\}", "", msgid))
        if any(found.fullmatch(text) or (literal >= 20 and found.search(text)) for text in texts):
            left.add(msgid)
    return left


def numbers(texts: list[str]) -> list[str]:
    """Every number written in the texts, sorted (a translation may put them in another order)."""
    return sorted(n for text in texts for n in NUMBER.findall(text.replace("−", "-")))


@pytest.fixture(scope="module")
def pages() -> dict[tuple[str, str], dict[str, list]]:
    return {(mode, lang): shown(open_page(lang, params, 0 if mode in FIRST_STEP_MODES else STEP))
            for mode, params in MODES.items()
            for lang in ("en", *LANGUAGES)}


MSGIDS = marked_msgids()


def test_english_shows_most_of_the_marked_words(pages):
    """The check below is only as good as what English shows: almost every msgid of the page is on it."""
    seen = set().union(*(english_left(pages[mode, "en"]["texts"], MSGIDS) for mode in MODES))
    never = set(MSGIDS) - seen
    assert len(seen) >= 100, len(seen)
    # The kept arrays' names are shown inside longer titles ("K cache (K/V head 0)"); "; " joins two notes.
    gated_deltanet = {"S (head {head}), after token {t}", "key feature"}  # its state, shown with kernel=deltanet
    assert never <= {"K cache", "V cache", "state S", "state sum z", "; "} | gated_deltanet, never


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("mode", MODES)
def test_no_word_of_the_page_is_left_in_english(pages, mode, lang):
    left = english_left(pages[mode, lang]["texts"], MSGIDS) - set(SAME_IN_EVERY_LANGUAGE)
    assert not left, left


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_page_shows_the_catalogs_translations(pages, lang):
    """The translated page holds the catalog's text of words it shows whole (labels, titles, columns)."""
    catalog = translations(lang)
    texts = {t for mode in MODES for t in pages[mode, lang]["texts"]}
    for msgid in ("Decoding with a KV cache", "Tokens in the cache", "Cache policy", "Tokens seen",
                  "Compare positions on the same sentence", "position in the text", "kept (this layer)"):
        assert catalog.gettext(msgid) != msgid and catalog.gettext(msgid) in texts, msgid


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("mode", MODES)
def test_every_number_is_the_same_in_every_language(pages, mode, lang):
    english, other = pages[mode, "en"], pages[mode, lang]
    assert numbers(other["texts"]) == numbers(english["texts"])
    assert len(other["frames"]) == len(english["frames"]) and len(other["arrays"]) == len(english["arrays"])
    for theirs, ours in zip(other["frames"], english["frames"], strict=True):
        if "model" in ours.columns:  # the lineage tables: their words are translated, their numbers must not change
            numeric = [ours.columns.get_loc(c) for c in ours.select_dtypes("number").columns]
            pd.testing.assert_frame_equal(theirs.iloc[:, numeric].set_axis(ours.columns[numeric], axis=1),
                                          ours.iloc[:, numeric])
            continue
        pd.testing.assert_frame_equal(theirs.set_axis(ours.columns, axis=1).rename_axis(ours.index.name), ours)
    for theirs, ours in zip(other["arrays"], english["arrays"], strict=True):
        np.testing.assert_array_equal(theirs, ours)
