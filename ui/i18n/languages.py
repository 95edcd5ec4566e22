"""The languages the interface speaks: one row each. Adding a language is a row here and its ``.po`` file.

Pure data (no streamlit, no Babel), so the settings table and the URL reader can name the languages.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Language:
    """One language: its code in links (``lang=``), its catalog folder and its name in its own language."""

    code: str  # in the URL and in st.context.locale's spelling (BCP 47), e.g. "zh-CN"
    locale: str  # the catalog folder under ui/i18n/locales/ (gettext's spelling), e.g. "zh_CN"
    label: str  # the language's own name, as the switch shows it
    browser: tuple[str, ...] = ()  # browser locales (lower case, prefixes) that choose it when a link has none
    sentence_gap: str = " "  # between two sentences: Chinese writes none (its full stop "。" carries the space)
    list_gap: str = ", "  # between the phrases of a list in a sentence: Chinese writes the enumeration comma "、"


LANGUAGE_ROWS = (
    Language("en", "en", "English", ("en",)),
    Language("zh-CN", "zh_CN", "简体中文", ("zh-cn", "zh-sg", "zh-hans", "zh"), sentence_gap="",
             list_gap="、"),
    Language("es", "es", "Español", ("es",)),
)
LANGUAGES = MappingProxyType({row.code: row for row in LANGUAGE_ROWS})
DEFAULT_LANGUAGE = "en"
LANGUAGE_LABELS = MappingProxyType({row.code: row.label for row in LANGUAGE_ROWS})


def language_for_locale(locale: str | None) -> str:
    """The language for a browser locale ("es-MX" -> "es", "zh-CN" -> "zh-CN"); English when none fits.

    Traditional Chinese locales (zh-TW, zh-HK) get English rather than Simplified characters.
    """
    tag = (locale or "").strip().lower().replace("_", "-")
    if tag.startswith(("zh-tw", "zh-hk", "zh-mo", "zh-hant")):
        return DEFAULT_LANGUAGE
    for row in LANGUAGE_ROWS:
        if any(tag == prefix or tag.startswith(prefix + "-") for prefix in row.browser):
            return row.code
    return DEFAULT_LANGUAGE
