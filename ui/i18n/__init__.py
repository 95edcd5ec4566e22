"""The interface's language: gettext catalogs (managed with Babel) and the run's current language.

Use everywhere a person reads text::

    from ui.i18n import N_, _, ngettext
    _("Heads")                                   # the current language's text, else the English msgid
    _("{n} heads").format(n=nh)                  # placeholders are str.format named fields, never an f-string
    ngettext("{n} head", "{n} heads", nh).format(n=nh)
    sentences(_("Each row sums to 1."), note)    # two sentences as the language writes them ("。" takes no space)
    LABEL = N_("Sentence")                       # a module-level constant: marked here, translated where shown
    _(LABEL)

The current language lives in a context variable: ``app.py`` sets it at the top of each run
(``set_language``). A fragment's rerun runs in a new thread without app.py, so where no run set it ``_`` asks
the session (``ui/widgets/language.py`` registers that with ``language_source``). Outside Streamlit (tests, the
static pack, the notebook) it is English unless a ``using_language("es")`` block says otherwise. Catalogs are the ``.po`` files in ``locales/``, compiled in
memory the first time a language is used and kept for the life of the process.
"""

from __future__ import annotations

import contextlib
import functools
import gettext
import io
import unicodedata
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from mha_core.marks import N_, Message
from ui.i18n.languages import DEFAULT_LANGUAGE, LANGUAGES, language_for_locale

__all__ = ["N_", "_", "ngettext", "sentences", "listing", "current_language", "set_language", "using_language",
           "translations", "language_source", "LANGUAGES", "DEFAULT_LANGUAGE", "language_for_locale", "LOCALES_DIR"]

LOCALES_DIR = Path(__file__).parent / "locales"
DOMAIN = "messages"

_LANGUAGE: ContextVar[str | None] = ContextVar("mha_language", default=None)  # None: no run or block set one


def _no_session() -> str | None:
    return None


_session_language: Callable[[], str | None] = _no_session  # the language of the session running, if any


def catalog_path(code: str) -> Path:
    """The ``.po`` file of a language (by its URL code, e.g. "zh-CN")."""
    return LOCALES_DIR / LANGUAGES[code].locale / "LC_MESSAGES" / f"{DOMAIN}.po"


@functools.cache
def translations(code: str) -> gettext.NullTranslations:
    """The compiled catalog of a language, built once per process from its ``.po`` (fuzzy entries left out).

    Compiled in memory rather than shipped as ``.mo``: the ``.po`` a teacher edits is the only copy, so no
    compiled file can go stale, and nothing is written beside the installed app (a read-only container).
    """
    if code == DEFAULT_LANGUAGE:
        return gettext.NullTranslations()  # English is the msgids themselves
    with catalog_path(code).open("rb") as po:
        catalog = read_po(po, locale=LANGUAGES[code].locale)
    compiled = io.BytesIO()
    write_mo(compiled, catalog, use_fuzzy=False)
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def language_source(source: Callable[[], str | None]) -> None:
    """Where the language comes from when no run or block set one: the Streamlit session (a fragment's rerun)."""
    global _session_language
    _session_language = source


def current_language() -> str:
    """The language code this run shows ("en", "zh-CN", "es")."""
    code = _LANGUAGE.get()
    if code is None:
        code = _session_language()
    return code if code in LANGUAGES else DEFAULT_LANGUAGE


def set_language(code: str) -> None:
    """Make ``code`` the language of the current run (app.py, once at the top of each run)."""
    _LANGUAGE.set(code if code in LANGUAGES else DEFAULT_LANGUAGE)


@contextlib.contextmanager
def using_language(code: str) -> Iterator[None]:
    """Translate into ``code`` inside the block (the static pack, the notebook export, tests)."""
    token = _LANGUAGE.set(code if code in LANGUAGES else DEFAULT_LANGUAGE)
    try:
        yield
    finally:
        _LANGUAGE.reset(token)


def _(message: str) -> str:
    """``message`` in the current language; the English ``message`` itself where the catalog lacks it.

    An engine ``Message`` (a template and its values, ``mha_core.marks``) is translated, then formatted."""
    if isinstance(message, Message):
        return message.translate(translations(current_language()).gettext)
    return translations(current_language()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for ``n`` in the current language (then ``.format(n=n)``)."""
    return translations(current_language()).ngettext(singular, plural, n)


def sentences(*parts: str) -> str:
    """Whole sentences as one text, the way the current language writes them: a space between two sentences in
    English and Spanish, none in Chinese (``Language.sentence_gap``; "。" carries its own room). Empty parts are
    left out, so a sentence that does not apply is ``""``.

    Words inside one sentence are not joined here: a translator places them with the sentence's placeholders.
    With no gap, a sentence ending in bold closes its ``**`` before the full stop ("**随机性**。"): Markdown ends
    ``**`` after punctuation only where a space or punctuation follows, and would show the stars.
    """
    shown = [part for part in parts if part]
    gap = LANGUAGES[current_language()].sentence_gap
    if gap:
        return gap.join(shown)
    return "".join([*map(_bold_before_stop, shown[:-1]), *shown[-1:]])


def listing(parts) -> str:
    """The phrases of a list inside one sentence, the way the current language separates them: ", " in English and
    Spanish, "、" in Chinese (``Language.list_gap``). For phrases a reader reads ("4 heads, no biases"); lists of
    numbers or link values keep ", " in every language."""
    return LANGUAGES[current_language()].list_gap.join(part for part in parts if part)


def _bold_before_stop(text: str) -> str:
    """'**随机性。**' -> '**随机性**。': a trailing emphasis closer moved before the punctuation it follows."""
    body = text.rstrip("*")
    marks = text[len(body):]
    if not marks or not body or not unicodedata.category(body[-1]).startswith("P"):
        return text
    return body[:-1] + marks + body[-1]
