"""The tests' one way to read and change the settings' controls (the sidebar's, and the same controls in
presentation mode's popover), whatever draws them.

Every test that reads or sets a setting's control goes through ``control(at, key)``, so a test says what a reader
does ("the seed one up", "4 heads") and not how Streamlit draws it. ``key`` is the control's session-state key
(``w_seed``, ``w_heads``, ``w_cross``, ``w_present``). Controls drawn by a page itself (``w_head``, ``w_view``,
``w_dec_step`` …) stay Streamlit widgets and are reached with AppTest's own accessors.

``control(at, key)`` offers the part of AppTest's widget interface the tests use: ``value``, ``options`` (the
labels shown), ``label``, ``help``, ``min``, ``max``, ``disabled``, ``set_value``, ``increment``, ``decrement``
and ``run``. ``notes(at)`` are the lines shown under the controls, ``headings(at)`` the section headings.
"""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

WIDGET_TYPES = ("number_input", "selectbox", "toggle", "text_input", "slider", "button_group", "checkbox")


def _widget(at: AppTest, key: str):
    for kind in WIDGET_TYPES:
        try:
            return getattr(at, kind)(key=key)
        except KeyError:
            continue
    raise KeyError(f"no control with key {key!r} is drawn")


class Control:
    """One setting's control as the reader sees it: its value, its choices, its label; and a change to it."""

    def __init__(self, at: AppTest, key: str):
        self.at, self.key = at, key
        self._node = _widget(at, key)

    @property
    def value(self):
        return self._node.value

    @property
    def options(self) -> list[str]:
        return list(self._node.options)

    @property
    def label(self) -> str:
        return self._node.label

    @property
    def help(self) -> str:
        return self._node.help or ""

    @property
    def min(self):
        return self._node.min

    @property
    def max(self):
        return self._node.max

    @property
    def disabled(self) -> bool:
        return bool(self._node.disabled)

    def set_value(self, value) -> Control:
        self._node.set_value(value)
        return self

    def increment(self) -> Control:
        return self.set_value(self.value + self._node.step)

    def decrement(self) -> Control:
        return self.set_value(self.value - self._node.step)

    def run(self) -> AppTest:
        return self.at.run()


def control(at: AppTest, key: str) -> Control:
    """The control of session-state key ``key`` (KeyError when it is not drawn in this run)."""
    return Control(at, key)


def drawn(at: AppTest, key: str) -> bool:
    """True when the control of ``key`` is drawn in this run."""
    try:
        _widget(at, key)
    except KeyError:
        return False
    return True


def set_control(at: AppTest, key: str, value) -> AppTest:
    """Change one control as a reader does, and run the app."""
    return control(at, key).set_value(value).run()


def notes(at: AppTest) -> list[str]:
    """The lines shown under the sidebar's controls (a caption or an info box each), in order."""
    return [node.value for node in at.sidebar if type(node).__name__ in ("Caption", "Info")]


def headings(at: AppTest) -> list[str]:
    """The sidebar's section headings, in order."""
    return [node.value for node in at.sidebar.header]
