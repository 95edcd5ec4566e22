"""Counts in words follow the reader's digit grouping (issue 37): ``count`` writes an integer as Babel's CLDR data
groups it where the locale's decimal mark is the point (English, Chinese), and with the SI's narrow space where it
is not (Spanish: a point there would read as the decimals this app writes with a point); a page's count reads
back as the engine's integer, English is unchanged, and decimals keep the point in every language.

Expectations come from Babel itself (``format_decimal`` / ``parse_decimal`` with the locale named here by hand),
from the Spanish rule written out by hand, and from the engine's arrays (``run``, ``decode_run``), never from
``count``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.numbers import format_decimal, parse_decimal
from streamlit.testing.v1 import AppTest

from mha_core.config import run
from mha_core.decoder import decode_run, decoder_config
from tests.app_opener import open_app
from ui.charts.numbers import count, fixed
from ui.i18n import using_language

ROOT = Path(__file__).resolve().parents[1]
BABEL_LOCALES = {"en": "en", "zh-CN": "zh_Hans_CN", "es": "es"}  # the brief's locales, typed by hand
VALUES = (0, 7, 999, 1000, 4096, 9999, 49_152, 1_000_000, 1_234_567, 4_294_967_295)
NARROW = "\u202f"  # the SI's group mark (a narrow no-break space)
LONG_SENTENCE = " ".join(f"w{i}" for i in range(40))  # 40 tokens: 1,600 weights per head, past four digits


@pytest.mark.parametrize("lang", BABEL_LOCALES)
@pytest.mark.parametrize("n", VALUES)
def test_count_is_the_languages_grouping_and_reads_back_as_the_integer(lang, n):
    with using_language(lang):
        text = count(n)
    assert read_count(text, lang) == n
    if lang == "es":
        assert text == (str(n) if n < 10_000 else f"{n:,}".replace(",", NARROW))
    else:
        assert text == format_decimal(n, locale=BABEL_LOCALES[lang])


def read_count(text: str, lang: str) -> int:
    """A count as the page writes it, read back: Babel's parser for a locale whose grouping is kept, the narrow
    spaces dropped for Spanish."""
    if lang == "es":
        assert re.fullmatch(r"\d{1,3}(?:\u202f\d{3})*|\d{4}", text), text
        return int(text.replace(NARROW, ""))
    return int(parse_decimal(text, locale=BABEL_LOCALES[lang], strict=True))


def test_spanish_groups_with_a_narrow_space_english_and_chinese_with_a_comma_and_decimals_keep_the_point():
    shown = {}
    for lang in BABEL_LOCALES:
        with using_language(lang):
            shown[lang] = (count(49_152), count(1_234_567), fixed(0.5), f"{2.2e-16:.1e}")
    assert shown["en"] == shown["zh-CN"] == ("49,152", "1,234,567", "0.5000", "2.2e-16")
    assert shown["es"] == ("49\u202f152", "1\u202f234\u202f567", "0.5000", "2.2e-16")
    assert count(49_152) == "49,152"  # outside any block: English


def bold_numbers(at: AppTest, words: str) -> list[str]:
    """The **bold** numbers of the markdown that holds ``words``."""
    text = next(m.value for m in at.markdown if words in m.value)
    return re.findall(r"\*\*(\d[\d.,\u202f]*)\*\*", text)


@pytest.mark.parametrize(("lang", "words"), [("es", "números para la cabeza"), ("en", "numbers for head"),
                                             ("zh-CN", "核一共写出了")])
def test_flash_never_stored_counts_are_the_engines_in_the_languages_grouping(lang, words):
    at = open_app("app_pages/flash.py", 90, lang=lang, tokens=LONG_SENTENCE, br=8, bc=8)
    trace = run(at.session_state["config"]).trace
    head = 0
    weights = trace.weights[head].size  # Tq x Tk: what returning the weights would write
    written = trace.weights.shape[1] * (trace.v.shape[-1] + 1)  # O (Tq x hv) and one log-sum-exp per row
    assert weights >= 1000 and written >= 100
    written_text, weights_text = bold_numbers(at, words)[:2]
    locale = BABEL_LOCALES[lang]
    assert read_count(weights_text, lang) == weights
    assert read_count(written_text, lang) == written
    if lang == "es":
        assert weights_text == str(weights)  # 1600: four digits stay whole, and never "1.600"
    else:
        assert weights_text == format_decimal(weights, locale=locale)
        assert weights_text == f"{weights:,}"  # English (and Chinese) as before


@pytest.mark.parametrize("lang", BABEL_LOCALES)
def test_decoding_cache_bytes_are_the_engines_in_the_languages_grouping(lang):
    at = open_app("app_pages/decoding.py", 90, lang=lang, d_model=32, heads=4)
    config = at.session_state["config"]
    with using_language(lang):  # AppTest formats the page's selectbox options again, in this thread
        last = int(at.slider(key="w_dec_step").max)
        at.slider(key="w_dec_step").set_value(last).run()
    assert not at.exception, [e.message for e in at.exception]
    cache = decode_run(run(decoder_config(config)))[last].cache
    cache_bytes = cache.k.nbytes + cache.v.nbytes  # the engine's arrays, float64
    assert cache_bytes >= 1000
    shown = at.metric[2].value  # "Cache size (bytes, float64)" in the page's language
    assert read_count(shown, lang) == cache_bytes
    if lang != "es":
        assert shown == f"{cache_bytes:,}"
    else:
        assert "." not in shown and "," not in shown
