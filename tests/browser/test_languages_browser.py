"""Every page and every lesson in Debian's chromium, in each language the app offers: no interface string the
catalog translates is left in English on the screen, and no page raises.

What a reader sees is the page's rendered text (``innerText`` of the app: sidebar, main area, tables, captions, the
charts' titles and axes), read once the page shows all it will (every chart drawn by plotly, nothing added for
0.3 s). Each language opens its first page in a new session; the others are opened from there as the sidebar's
page menu opens them (a history entry and a popstate: the same session and tab, no new load of the app, which cost
Chromium ~1.5 s of CPU per page).
The SmolLM2 lessons' numbers (~30 s of CPU, computed once per test run and kept in ``$MHA_LESSON_CACHE``) are
computed here in a thread from the start, while the browser reads the other pages, so the server reads them stored.
A line of it that is exactly an English msgid whose catalog entry differs, or that matches such a msgid with its
placeholders filled, is an untranslated string. Names and symbols the catalogs keep as they are (softmax, Q, K, V,
"RoPE") never count: their translation equals the msgid.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest
from babel.messages.pofile import read_po
from conftest import exceptions_on_page, open_app, open_in_app, screenshot, wait_drawn

from mha_core.kernels import KERNELS
from mha_core.positions import SCHEMES
from ui.i18n.languages import LANGUAGE_ROWS
from ui.pages.lessons import LESSON_MODULES, LESSONS
from ui.pages.lessons.stored import measured_once
from ui.state.page_table import PAGE_INFO

ROOT = Path(__file__).resolve().parents[2]
LOCALES = ROOT / "ui" / "i18n" / "locales"
OTHER_LANGUAGES = [row for row in LANGUAGE_ROWS if row.code != "en"]
LINKS = [name if name != "heads" else "" for name in PAGE_INFO] + [f"lessons?lesson={name}" for name in LESSONS]
# The page's words: formulas (KaTeX: head_i, softmax), code (tokens, the engine's source) and icons (a Material
# Symbol is its name in a ligature font: a claim's mark reads "check_circle" in front of the claim) are symbols.
TEXT_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]').cloneNode(true);
  app.querySelectorAll('.katex, pre, code, [data-testid="stIconMaterial"], span[role="img"][aria-label$=" icon"]')
    .forEach(e => e.remove());
  document.body.appendChild(app);  // innerText needs a rendered element
  const text = app.innerText;
  app.remove();
  return text;
}"""
# The page the run drew, as the page menu marks it: its link's path ("" for Heads, the app's default page).
CURRENT_PAGE_JS = """() => new URL(document.querySelector('[data-testid="mhaPageMenu"] a[aria-current="page"]').href)
  .pathname.replace(/^\\/+|\\/+$/g, '')"""
# Shown as they are, although a catalog translates them where they are words (with the reason):
ALLOWED = {
    "MHA Explorer",  # the app's name
    *KERNELS, *SCHEMES,  # a kernel's and a scheme's link value (kernel=linear, pe=none), shown as the name a link uses
}


@cache
def untranslated_forms(folder: str) -> tuple[frozenset[str], tuple[re.Pattern, ...]]:
    """The English msgids the catalog of ``folder`` translates differently: plain ones, and those with placeholders
    as patterns that match the msgid with any values filled in."""
    with (LOCALES / folder / "LC_MESSAGES" / "messages.po").open("rb") as po:
        catalog = read_po(po)
    plain, patterns = set(), []
    for message in catalog:
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        for msgid in ids:
            if not msgid or msgid in strings or msgid in ALLOWED or not re.search(r"[A-Za-z]{3}", msgid):
                continue
            if "{" in msgid:
                parts = re.split(r"\{[^{}]*\}", msgid)
                if sum(len(p.strip()) for p in parts) >= 12:  # enough words around the values to be a sentence
                    patterns.append(re.compile(".+?".join(map(re.escape, parts))))
            elif "\n" not in msgid:
                plain.add(msgid.strip())
    return frozenset(plain), tuple(patterns)


def english_lines(text: str, folder: str) -> list[str]:
    """The lines of ``text`` that are an English msgid of the catalog of ``folder``."""
    plain, patterns = untranslated_forms(folder)
    lines = {line.strip() for line in text.splitlines() if line.strip()}
    return sorted(line for line in lines if line in plain or any(p.fullmatch(line) for p in patterns))


def test_the_check_finds_english_it_is_shown():
    folder = OTHER_LANGUAGES[0].locale
    plain, _patterns = untranslated_forms(folder)
    assert "Presentation mode" in plain
    assert english_lines("Presentation mode\nsoftmax\n", folder) == ["Presentation mode"]


ONCE = measured_once(lambda: None).__wrapped__.__code__  # the code of every function measured_once made


def stored_lesson_numbers() -> list:
    """Every lesson function whose result ``$MHA_LESSON_CACHE`` keeps (those made by ``measured_once``), page order."""
    modules = [importlib.import_module(f"ui.pages.lessons.{name}") for name in LESSON_MODULES]
    return [value for module in modules for value in vars(module).values()
            if getattr(getattr(value, "__wrapped__", None), "__code__", None) is ONCE]


def compute(functions) -> None:
    for function in functions:
        with contextlib.suppress(RuntimeError):  # the model file is missing: the page says so, the test reads that
            function()


@pytest.fixture(scope="module")
def lessons_stored():
    """The SmolLM2 lessons' numbers computed and stored in a thread beside the test (the server, asking for one that
    is being computed, waits for it under the lock of ``ui/pages/lessons/stored.py`` and reads it)."""
    functions = stored_lesson_numbers()
    assert len(functions) >= 5, functions  # induction, long context, sparse, sinks, QK-norm
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(compute, functions)


@pytest.mark.parametrize("language", OTHER_LANGUAGES, ids=lambda row: row.code)
def test_every_page_and_lesson_speaks_the_language(lessons_stored, app_page, app_url, language):
    page = app_page
    sockets = []
    page.on("websocket", lambda socket: sockets.append(socket))
    found = {}
    for number, link in enumerate(LINKS):
        query = f"{link}{'&' if '?' in link else '?'}lang={language.code}"
        if number == 0:
            open_app(page, app_url, query)  # a new session, in the language of its link
        else:
            open_in_app(page, sockets[-1], query)
        wait_drawn(page)
        assert page.evaluate(CURRENT_PAGE_JS) == link.split("?")[0], query  # the menu marks the page the server ran
        assert exceptions_on_page(page) == [], query
        text = page.evaluate(TEXT_JS)
        assert text.strip(), query
        if english := english_lines(text, language.locale):
            found[query] = english
    screenshot(page, f"languages_last_{language.code}")
    lessons_stored.result()  # the thread's own failure, if any
    assert found == {}, f"English left on the {language.code} pages: {found}"
