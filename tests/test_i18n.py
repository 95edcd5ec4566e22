"""The catalogs: every string marked in the code now is translated in every language, with the same placeholders.

The msgids come from extracting the code as it is (``babel.cfg``, the keywords of the README's
``pybabel extract``), not from ``messages.pot``: a string marked today and not yet translated fails here, so new
text is born translated. A fuzzy entry (``pybabel update``'s guess) counts as missing.
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

import ui.i18n as i18n
from ui.i18n import N_, _, catalog_path, current_language, ngettext, set_language, using_language
from ui.i18n.languages import DEFAULT_LANGUAGE, LANGUAGES, language_for_locale

ROOT = Path(__file__).resolve().parents[1]
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}  # as in the README's pybabel extract -k ...
TRANSLATED = [code for code in LANGUAGES if code != DEFAULT_LANGUAGE]


def marked_in_code() -> dict[tuple[str, ...], list[str]]:
    """Every msgid (a 1-tuple, or singular and plural) marked in the code now -> where it is marked."""
    with (ROOT / "babel.cfg").open() as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found: dict[tuple[str, ...], list[str]] = {}
    for filename, lineno, message, _comments, _context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS):
        key = message if isinstance(message, tuple) else (message,)
        found.setdefault(key, []).append(f"{filename}:{lineno}")
    return found


MARKED = marked_in_code()


def catalog(code: str):
    with catalog_path(code).open("rb") as po:
        return read_po(po, locale=LANGUAGES[code].locale)


def fields(text: str) -> set[str]:
    """The str.format field names of ``text`` ({n}, {low:g} -> n, low)."""
    return {name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None}


def test_the_code_marks_strings():
    assert ("Presentation mode",) in MARKED and ("Heads",) in MARKED  # the extraction sees ui/ and its N_ marks
    assert len(MARKED) > 50


@pytest.mark.parametrize("code", TRANSLATED)
def test_every_marked_string_is_translated_with_the_same_placeholders(code):
    entries = {(m.id if isinstance(m.id, tuple) else (m.id,)): m for m in catalog(code) if m.id}
    problems = []
    for key, where in MARKED.items():
        entry = entries.get(key)
        forms = () if entry is None else (entry.string if isinstance(entry.string, tuple) else (entry.string,))
        if entry is None or entry.fuzzy or not forms or not all(forms):
            problems.append(f"{where[0]}: {key[0]!r} has no translation")
            continue
        wanted = set().union(*map(fields, key))
        for form in forms:
            if fields(form) != wanted:
                problems.append(f"{where[0]}: {key[0]!r} -> {form!r}: placeholders {sorted(fields(form))} "
                                f"!= {sorted(wanted)}")
    assert not problems, f"{code}: update and translate the catalog (README, Languages):\n" + "\n".join(problems)


def test_the_template_is_the_code_extracted():
    """``messages.pot`` (what a translator starts from) holds exactly the msgids marked in the code now."""
    with (ROOT / "ui" / "i18n" / "messages.pot").open("rb") as pot:
        template = {(m.id if isinstance(m.id, tuple) else (m.id,)) for m in read_po(pot) if m.id}
    assert template == set(MARKED), "run the README's pybabel extract"


def test_a_translation_is_read_in_its_language_and_english_is_the_msgid():
    assert _("Presentation mode") == "Presentation mode"  # outside Streamlit: English
    with using_language("es"):
        assert _("Presentation mode") == "Modo presentación"
        assert _("not a marked string") == "not a marked string"  # falls back to the msgid
        with using_language("zh-CN"):
            assert _("Presentation mode") == "演示模式"
        assert current_language() == "es"
    assert current_language() == DEFAULT_LANGUAGE


def test_plurals_follow_each_language():
    singular, plural = "{n} query head per K/V head: {kind}", "{n} query heads per K/V head: {kind}"
    assert ngettext(singular, plural, 1).format(n=1, kind="") == "1 query head per K/V head: "
    with using_language("es"):
        assert ngettext(singular, plural, 1).startswith("{n} cabeza de")
        assert ngettext(singular, plural, 3).startswith("{n} cabezas de")
    with using_language("zh-CN"):  # one form in Chinese
        assert ngettext(singular, plural, 1) == ngettext(singular, plural, 3) == "每个 K/V 头对应 {n} 个查询头：{kind}"


def test_n_marks_without_translating():
    with using_language("es"):
        assert N_("Heads") == "Heads" and _(N_("Heads")) == "Cabezas"


def test_an_unknown_language_is_english():
    with using_language("xx"):
        assert current_language() == DEFAULT_LANGUAGE and _("Presentation mode") == "Presentation mode"


def test_set_language_is_the_runs_language(monkeypatch):
    import contextvars

    def run():
        set_language("zh-CN")
        return _("Seed")

    assert contextvars.copy_context().run(run) == "随机种子"
    assert _("Seed") == "Seed"  # a run's choice stays in its own context


def test_catalogs_are_read_once_per_process(monkeypatch):
    reads = []
    real = i18n.read_po
    monkeypatch.setattr(i18n, "read_po", lambda *a, **k: reads.append(1) or real(*a, **k))
    i18n.translations.cache_clear()
    for _round in range(3):
        for code in LANGUAGES:
            with using_language(code):
                _("Heads")
    assert len(reads) == len(TRANSLATED)


@pytest.mark.parametrize("locale, code", [
    ("es-MX", "es"), ("es", "es"), ("zh-CN", "zh-CN"), ("zh", "zh-CN"), ("zh-Hans-CN", "zh-CN"), ("zh-TW", "en"),
    ("en-US", "en"), ("fr-FR", "en"), (None, "en"), ("", "en"), ("esperanto", "en"),
])
def test_the_browsers_locale_chooses_a_language(locale, code):
    assert language_for_locale(locale) == code


def test_a_run_that_set_no_language_reads_the_session(monkeypatch):
    """A fragment's rerun runs in a fresh thread (a fresh context) without app.py: ``_`` asks the session."""
    import contextvars

    monkeypatch.setattr(i18n, "_session_language", lambda: "es")
    assert contextvars.Context().run(_, "Seed") == "Semilla"
    with using_language("zh-CN"):  # an explicit block still wins
        assert _("Seed") == "随机种子"


def test_the_abouts_glossary_is_marked_as_the_engine_writes_it():
    """The About page's glossary comes from mha_core's docstring, which gettext does not read: its meanings are
    marked in ``ui.pages.about.GLOSSARY_WORDS`` and must stay the docstring's, or the page would show English."""
    import mha_core
    from ui.pages.about import GLOSSARY_WORDS, glossary_rows

    assert [meaning for _symbol, meaning in glossary_rows(mha_core.__doc__)] == list(GLOSSARY_WORDS)
    with using_language("zh-CN"):
        assert all(_(meaning) != meaning for meaning in GLOSSARY_WORDS)


def po_entries(text: str) -> list[list[tuple[str, str]]]:
    """A .po file's entries read strictly (Babel's reader forgives what a union merge leaves): split at blank lines,
    each a list of (keyword, its whole string with continuations joined); comments left out."""
    entries = []
    for block in text.strip().split("\n\n"):
        fields: list[tuple[str, str]] = []
        for line in block.splitlines():
            if line.startswith(("msgctxt", "msgid", "msgstr")):
                keyword, _space, rest = line.partition(" ")
                fields.append((keyword, rest.strip()[1:-1]))
            elif line.startswith('"') and fields:
                fields[-1] = (fields[-1][0], fields[-1][1] + line.strip()[1:-1])
        entries.append(fields)
    return entries


@pytest.mark.parametrize("code", TRANSLATED)
def test_each_catalog_entry_is_whole_and_defined_once(code):
    problems, seen = [], set()
    for fields in po_entries(catalog_path(code).read_text(encoding="utf-8")):
        keywords = [keyword for keyword, _text in fields]
        if keywords.count("msgid") > 1 or keywords.count("msgstr") > 1:
            problems.append(f"two entries in one (a blank line missing, or a second msgstr): {fields[:2]}")
        key = tuple(text for keyword, text in fields if keyword in ("msgctxt", "msgid"))
        if key and key in seen:  # a block of comments only has no key
            problems.append(f"defined twice: {key}")
        seen.add(key)
    assert not problems, "\n".join(problems)
