"""The settings' controls as ONE element (issue 38): what the sidebar (and presentation mode's popover) draws.

A Streamlit widget change reruns the page, and the page sends every widget again: ~20 controls, three headings and
their captions were ~25 messages of every Seed +, and the browser set every control again (a Seed + on Heads took
2.2× a one-chart page; the same controls as one element 0.97×, ``bench/``). Here the sidebar's widget functions
(``ui/widgets/sidebar.py`` WIDGETS) draw into a ``Controls`` collector instead of ``st``: the collector has the
same methods (``number_input``, ``selectbox``, ``caption`` …), returns each control's value from session state
(the ``w_`` keys stay the app's record of the settings) and describes the control. At the end of the sidebar
``draw`` sends every description to one components-v2 element (``static/mha/controls.js``: real HTML controls, labelled,
with their help and the lines under them; the keyboard reaches each of them), so a run sends one element.

A change in the browser is one trigger, ``{key, value}``; ``_changed`` (the element's callback, before the run)
checks it against what the last run drew (a choice it offered, a number inside its bounds, a control that was not
disabled) and puts it in session state, where the run reads it. Compare's configuration B still draws Streamlit
widgets (``Place.ui`` is ``st`` there).
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import streamlit as st

from ui.widgets.page_menu import compact
from ui.widgets.served import loader

KEY = "controls"  # the settings' element's key (its container: .st-key-controls)
STEP_KEY = "sbs_controls"  # Step by step's own controls (the head, the numbers, tables, predict), in a row
KEYS = (KEY, STEP_KEY)  # every element of controls a page may draw
TEXT_LIMIT = 2000  # characters a text box takes (the sentence is cut to 64 tokens anyway)
_HERE = Path(__file__).parent
_component = st.components.v2.component(
    "mha_controls", html='<div class="mha-ctl" data-testid="mhaControls"></div>',
    css=compact((_HERE / "controls.css").read_text()), js=loader("controls.js"),
    isolate_styles=False)


def _plain(value):
    """A value as JSON carries it (numpy's integers and floats as Python's)."""
    return value.item() if hasattr(value, "item") else value


class Controls:
    """Collects the controls a run draws (the methods of ``st`` the widget table uses) and draws them as one."""

    def __init__(self, key: str = KEY, row: bool = False):
        self.key, self.row = key, row  # the element's key; its controls side by side (wrapping), not one per line
        self.items: list[dict] = []
        self.kept: dict[str, dict] = {}  # by key: what a change to the control is checked against
        self.done = False

    def _value(self, key: str, default):
        ss = st.session_state
        if key not in ss:
            ss[key] = default
        return ss[key]

    def _add(self, kind: str, label: str, key: str, help: str | None, value, disabled: bool = False, **shape) -> None:
        item = {"kind": kind, "key": key, "label": label, "help": help or "", "value": _plain(value),
                "disabled": bool(disabled), "notes": [], **shape}
        self.items.append(item)
        self.kept[key] = item

    def number_input(self, label, min_value, max_value, step, key, help=None, disabled=False, **_options):
        value = self._value(key, min_value)
        value = min(max(value, min_value), max_value)
        st.session_state[key] = value
        self._add("number", label, key, help, value, disabled, min=_plain(min_value), max=_plain(max_value),
                  step=_plain(step), integer=isinstance(step, int))
        return value

    def slider(self, label, min_value, max_value, key, help=None, disabled=False, **_options):
        value = int(min(max(self._value(key, min_value), min_value), max_value))
        st.session_state[key] = value
        self._add("slider", label, key, help, value, disabled, min=int(min_value), max=int(max_value), step=1,
                  integer=True)
        return value

    def _choice(self, kind, label, options, key, help, format_func, disabled):
        options = list(options)
        value = self._value(key, options[0])
        if value not in options:
            value = st.session_state[key] = options[0]
        shown = format_func or str
        self._add(kind, label, key, help, value, disabled,
                  options=[[_plain(option), str(shown(option))] for option in options])
        return value

    def selectbox(self, label, options, key, help=None, format_func=None, disabled=False, **_options):
        return self._choice("select", label, options, key, help, format_func, disabled)

    def segmented_control(self, label, options, key, help=None, format_func=None, disabled=False, **_options):
        return self._choice("segmented", label, options, key, help, format_func, disabled)

    def toggle(self, label, key, help=None, disabled=False, **_options):
        value = bool(self._value(key, False))
        self._add("toggle", label, key, help, value, disabled)
        return value

    def text_input(self, label, key, help=None, disabled=False, **_options):
        value = str(self._value(key, ""))
        self._add("text", label, key, help, value, disabled)
        return value

    def header(self, text: str) -> None:
        self.items.append({"kind": "heading", "key": f"heading-{len(self.items)}", "label": text})

    def _note(self, kind: str, text: str) -> None:
        if self.items and self.items[-1]["kind"] != "heading":
            self.items[-1]["notes"].append([kind, str(text)])
        else:
            self.items.append({"kind": "note", "key": f"note-{len(self.items)}", "notes": [[kind, str(text)]]})

    def caption(self, text: str) -> None:
        self._note("caption", text)

    def info(self, text: str) -> None:
        self._note("info", text)

    def warning(self, text: str) -> None:
        self._note("warning", text)

    def error(self, text: str) -> None:
        self._note("error", text)

    def draw(self) -> None:
        """Send every control collected so far as one element (once a run; later calls draw nothing)."""
        if self.done:
            return
        self.done = True
        st.session_state[drawn_key(self.key)] = self.kept
        _component(key=self.key, data={"items": self.items, "row": self.row},
                   on_change_change=partial(_changed, self.key))


def accepted(item: dict, value):
    """The value a change asks for, as the control's setting holds it; None when the control cannot take it."""
    if item.get("disabled"):
        return None
    kind = item["kind"]
    if kind in ("select", "segmented"):
        return next((option for option, _label in item["options"] if option == value and type(option) is type(value)),
                    None)
    if kind == "toggle":
        return value if isinstance(value, bool) else None
    if kind == "text":
        return value[:TEXT_LIMIT] if isinstance(value, str) else None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    value = min(max(value, item["min"]), item["max"])
    return int(round(value)) if item["integer"] else float(value)


def drawn_key(element: str) -> str:
    """Session state: what the element's last run drew, by control key (what a change is checked against)."""
    return f"{element}_drawn"


def _changed(element: str) -> None:
    """The element's change, ``{key, value}``, into session state (before the run), when the control takes it."""
    ss = st.session_state
    change = (ss.get(element) or {}).get("change")
    if not isinstance(change, dict) or not isinstance(change.get("key"), str):
        return
    item = ss.get(drawn_key(element), {}).get(change["key"])
    if item is None:
        return
    value = accepted(item, change.get("value"))
    if value is not None:
        ss[item["key"]] = value
