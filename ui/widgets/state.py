"""Widget state: the sidebar's values live in ``st.session_state`` under ``w_`` keys.

On a session's first run the link's query parameters fill the widgets (``startup``); after that
the widgets are the truth and the link follows them. ``keep_widget_state`` (called by app.py on
every run) stops Streamlit from dropping a value when a page does not draw its widget.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import streamlit as st

from mha_core.config import MHAConfig
from mha_core.inputs import tokenize
from ui.i18n import _
from ui.state import navigation
from ui.state.address import address
from ui.state.settings import LANGUAGE, VIEW_SETTINGS, Setting, model_settings, values_of
from ui.state.urlstate import config_from_params, view_from_params

KV_HEADS_OF = "kv_heads_of"  # session state: the head count the key/value heads widget's value was chosen for
# A widget drawn with persist_state keeps its value while its page does not draw it (Streamlit >= 1.5x); its id
# carries the page, so across a page switch keep_widget_state carries the values (by key).
KEEP = "session"
PAGE_DRAWN = "kept_page"  # session state: the page keep_widget_state was last called for
STEP_BY_STEP_KEPT = frozenset({"w_sbs_table", "w_sbs_predict", "w_guess_q", "w_guess_k"})  # its own, all KEEP


@dataclass(frozen=True)
class Place:
    """Where a setting's widget lives: its keys, its label and the options every widget there gets.

    The sidebar is one place (``w_`` keys, kept across pages); Compare's configuration B is another
    (``cmp_`` keys, "B: " labels, a change callback). Both draw with the same widget table
    (``ui/widgets/sidebar.py`` WIDGETS), so B offers what A offers.
    """

    prefix: str = "w_"  # widget keys: prefix + setting name ("w_heads"), also of a widget's helpers ("w_cross")
    note_prefix: str = ""  # other session state a widget keeps (KV_HEADS_OF): note_prefix + its name
    label_prefix: str = ""
    options: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    link_only: bool = False  # offer only the choices a link can carry (no uploaded embedding)
    ui: object = None  # what draws the widgets: ``st`` (None), or the sidebar's one element (``widgets.controls``)

    @property
    def draw(self):
        """``st``, or an object with the methods of ``st`` the widget table uses (``Controls``)."""
        return st if self.ui is None else self.ui

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def note(self, name: str) -> str:
        return f"{self.note_prefix}{name}"

    def label(self, row: Setting) -> str:
        return f"{self.label_prefix}{_(row.label) if row.label else row.name}"  # labels are marked N_ in the table


SIDEBAR = Place()


def kept_by_streamlit() -> frozenset[str]:
    """The keys of the widgets drawn with ``persist_state`` wherever they are drawn: the views' (Heads, Step by step),
    Step by step's switches and guess, the mask editor's start and the language's. Streamlit keeps their values
    itself. (The sidebar's settings are no widgets: one element draws them, ``ui/widgets/controls.py``.)"""
    return frozenset({row.key for row in VIEW_SETTINGS} | STEP_BY_STEP_KEPT | {"w_grid_start", LANGUAGE.key})


def keep_widget_state(page: str = "") -> None:
    """Re-assign the widget values that Streamlit would drop (app.py, every run, once the ``page`` drawn is known).

    Streamlit's widget ids carry the page: on a run that draws another page than the last run did (a page link, a
    session's first run) its widgets are new ones, which take their values from their keys, so every value is
    re-assigned. On a rerun of the same page (a Seed +) those ``kept_by_streamlit`` are left to Streamlit: a value
    assigned in a run goes back to the browser with its widget (``set_value``), and the browser sets that control
    again. (The settings are no widgets: ``ui/widgets/controls.py`` draws them, and nothing drops their keys.)
    """
    ss = st.session_state
    kept = kept_by_streamlit() if ss.get(PAGE_DRAWN) == page else frozenset()
    ss[PAGE_DRAWN] = page
    for key in list(ss.keys()):
        if isinstance(key, str) and key.startswith("w_") and key not in kept:
            ss[key] = ss[key]


SECOND_SENTENCE = ("a", "dog", "ran")  # offered when cross-attention is switched on


def seed_widgets(config: MHAConfig, view: dict | None = None) -> None:
    """Put ``config`` into the widgets' session state (only before they are drawn in a run)."""
    ss = st.session_state
    values = values_of(config)
    for row in model_settings():
        seed_widget(row, values, SIDEBAR)
    for row in VIEW_SETTINGS:
        ss[row.key] = (view or {}).get(row.name, row.default)


def seed_widget(row: Setting, values, place: Place) -> None:
    """Put the setting's value (from ``values``, a configuration's ``values_of``) into its widget at ``place``."""
    value = values[row.name]
    SEEDS.get(row.widget, _seed_value)(row, row.default_for(values) if value is None else value, place)
    if row.widget == "kv_heads":
        st.session_state[place.note(KV_HEADS_OF)] = values["heads"]


def widget_value(row: Setting, place: Place):
    """The setting's value as its widget at ``place`` holds it now (the inverse of ``seed_widget``)."""
    return READS.get(row.widget, _read_value)(row, place)


def _seed_value(row: Setting, value, place: Place) -> None:
    st.session_state[place.key(row.name)] = value


def _seed_sentence(row: Setting, value, place: Place) -> None:
    st.session_state[place.key(row.name)] = " ".join(value)


def _seed_second_sentence(row: Setting, value, place: Place) -> None:
    st.session_state[place.key("cross")] = value is not None
    st.session_state[place.key(row.name)] = " ".join(value or SECOND_SENTENCE)


def _seed_select(row: Setting, value, place: Place) -> None:
    """A choice a link cannot carry (an uploaded embedding) starts from the default."""
    st.session_state[place.key(row.name)] = value if value in row.link_choices() else row.default_for({})


def _seed_grid(row: Setting, value, place: Place) -> None:
    set_grid(value)


def _read_value(row: Setting, place: Place):
    return st.session_state[place.key(row.name)]


def _read_sentence(row: Setting, place: Place) -> tuple[str, ...]:
    return tokenize(st.session_state[place.key(row.name)])


def _read_second_sentence(row: Setting, place: Place) -> tuple[str, ...] | None:
    return _read_sentence(row, place) if st.session_state.get(place.key("cross")) else None


SEEDS = {  # Setting.widget -> how a value goes into its widget, where not as it is
    "sentence": _seed_sentence,
    "second_sentence": _seed_second_sentence,
    "select": _seed_select,
    "grid": _seed_grid,
}
READS = {  # Setting.widget -> how its value is read back from its widget, where not as it is
    "sentence": _read_sentence,
    "second_sentence": _read_second_sentence,
}


WRITTEN = "url_written"  # session state: the settings the sidebar last wrote to the address bar


def note_written(params: Mapping[str, str]) -> None:
    """Remember the settings the sidebar has just put in the address bar (``startup`` compares a link with them)."""
    st.session_state[WRITTEN] = dict(params)


def _link_settings(params: Mapping[str, str]) -> dict[str, str]:
    names = {row.param for row in (*model_settings(), *VIEW_SETTINGS)}
    return {name: value for name, value in params.items() if name in names}


def followed_link(params: Mapping[str, str]) -> bool:
    """True when a link or Back/Forward brought model settings other than those the sidebar last wrote.

    Only on an arrival (``navigation.arrived``): in a widget's rerun the widgets are the truth, even if the
    address bar has not caught up yet. A link without model settings (the Lessons page's menu) changes nothing.
    """
    if not navigation.arrived() or not any(row.param in params for row in model_settings()):
        return False
    return _link_settings(params) != _link_settings(st.session_state.get(WRITTEN, {}))


def startup() -> None:
    """First run of a session, or a link followed (a page link, Back/Forward): read the URL; otherwise the widgets
    hold the settings. Pages hand a configuration to the explorer as a link (``urlstate.explorer_params``)."""
    ss = st.session_state
    if "config_loaded" not in ss or followed_link(address().to_dict()):
        params = address().to_dict()
        config, messages = config_from_params(params)
        view, view_messages = view_from_params(params, config)
        seed_widgets(config, view)
        ss.url_messages = messages + view_messages
        ss.config_loaded = True


def clamp_choice(key: str, size: int) -> None:
    """Reset the selector ``key`` to 0 when its stored choice no longer exists (a shorter sentence, fewer heads)."""
    if not 0 <= int(st.session_state.get(key, 0)) < size:
        st.session_state[key] = 0


def set_grid(grid) -> None:
    """Make ``grid`` the custom mask and the editor's new starting point (a new editor: old edits go)."""
    ss = st.session_state
    ss.custom_grid = ss.grid_base = grid
    ss.grid_version = ss.get("grid_version", 0) + 1
