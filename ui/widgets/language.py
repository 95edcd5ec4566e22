"""The language switch, on every page: the link's ``lang``, else the session's choice, else the browser's language.

``app.py`` calls ``choose_language`` at the top of each run, before the page, so every ``_()`` of the run reads
the language chosen, and ``language_switch`` under the page menu; ``language_params`` is what the address bar carries
for it (the sidebar and app.py write it).
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui.i18n import LANGUAGES, _, current_language, language_for_locale, language_source, set_language
from ui.state.address import address
from ui.state.settings import LANGUAGE
from ui.state.urlstate import read_settings, write_settings
from ui.widgets.state import KEEP

MESSAGES = "lang_messages"  # session state: what the link's `lang` said that could not be used
WRITTEN = "lang_written"  # session state: the `lang` the app last put in the address bar (None: none)


def _session_language() -> str | None:
    """The session's language, inside a Streamlit run (a fragment's rerun, which app.py does not start)."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return None
    return st.session_state.get(LANGUAGE.key)


language_source(_session_language)


def _from_link(raw: str) -> str:
    """The language a link's ``lang`` names; an unknown one leaves a message and gives English."""
    messages: list[str] = []
    code = read_settings({LANGUAGE.param: raw}, (LANGUAGE,), {}, messages)[LANGUAGE.name]
    st.session_state[MESSAGES] = messages
    return code


def _switched() -> None:
    st.session_state.pop(MESSAGES, None)  # the reader chose a language: the link's complaint is answered


def choose_language() -> str:
    """Set this run's language (before anything is translated); returns the code. ``language_switch`` draws it.

    A link's ``lang`` wins when it is not the one the app last wrote (a link, Back/Forward, the first run); a link
    without one keeps the session's choice, and a session's first run without one takes the browser's language.
    """
    ss = st.session_state
    raw = address().get(LANGUAGE.param)
    if raw is not None and (LANGUAGE.key not in ss or raw != ss.get(WRITTEN)):
        ss[LANGUAGE.key] = _from_link(raw)
    elif LANGUAGE.key not in ss:
        ss[LANGUAGE.key] = language_for_locale(st.context.locale)
    set_language(ss[LANGUAGE.key])
    return ss[LANGUAGE.key]


def language_switch() -> None:
    """The language's select box in the sidebar, and what the link's ``lang`` said that could not be used."""
    ss = st.session_state
    st.sidebar.selectbox(f":material/translate: {_(LANGUAGE.label)}", list(LANGUAGES), key=LANGUAGE.key,
                         format_func=LANGUAGE.choices.get, on_change=_switched, persist_state=KEEP)
    for message in ss.get(MESSAGES, []):
        st.warning(_("Link: {message}").format(message=message), icon=":material/translate:")


def language_params() -> dict[str, str]:
    """The address bar's parameter for the current language (none for English)."""
    return write_settings((LANGUAGE,), {LANGUAGE.name: current_language()})


def keep_language_in_link() -> None:
    """Put the language back in the address bar when the page's own writing left it out (or it changed)."""
    params = language_params()
    st.session_state[WRITTEN] = params.get(LANGUAGE.param)
    if address().get(LANGUAGE.param) != params.get(LANGUAGE.param):
        if params:
            address().update(params)
        else:
            del address()[LANGUAGE.param]
