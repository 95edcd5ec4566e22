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

import json

from streamlit.components.v2.bidi_component.main import _make_trigger_id
from streamlit.testing.v1 import AppTest

from ui.widgets.controls import KEY, KEYS

WIDGET_TYPES = ("number_input", "selectbox", "toggle", "text_input", "slider", "button_group", "checkbox")


def _widget(at: AppTest, key: str):
    for kind in WIDGET_TYPES:
        try:
            return getattr(at, kind)(key=key)
        except KeyError:
            continue
    raise KeyError(f"no control with key {key!r} is drawn")


def elements(at: AppTest) -> list:
    """Every element of controls drawn in this run (the settings', in the sidebar or in presentation mode's popover;
    a page's own, such as Step by step's row)."""
    return [node for node in (*at.sidebar, *at.main) if type(node).__name__ == "UnknownElement" and node.key in KEYS]


def element(at: AppTest, key: str = KEY):
    """The element of controls ``key`` (the settings' by default) drawn in this run, or None."""
    return next((node for node in elements(at) if node.key == key), None)


def _items_of(node) -> list[dict]:
    return json.loads(node.proto.json)["items"]


def items(at: AppTest, key: str = KEY) -> list[dict]:
    """What the element ``key`` draws, in order: each control, heading and line as its data carries it."""
    node = element(at, key)
    return [] if node is None else _items_of(node)


def _owner(at: AppTest, key: str):
    """The element of controls holding the control ``key``, and its item (None, None: no element holds it)."""
    for node in elements(at):
        for item in _items_of(node):
            if item.get("key") == key and "value" in item:
                return node, item
    return None, None


def change(at: AppTest, key: str, value) -> AppTest:
    """Run the app as the element's JavaScript does after a change: its ``change`` trigger, ``{key, value}``.

    AppTest (Streamlit 1.67) shows a components-v2 element as an UnknownElement with no ``set_value``: the trigger
    goes in as the browser sends it, through AppTest's private ``_run`` with the tree's widget states plus one
    ``json_trigger_value`` under Streamlit's private trigger id (the one place the tests use that private API)."""
    states = at._tree.get_widget_states()
    state = states.widgets.add()
    node, _item = _owner(at, key)
    state.id = _make_trigger_id((node or element(at)).proto.id, "events")  # an unknown key: to the settings
    state.json_trigger_value = json.dumps([{"event": "change", "value": {"key": key, "value": value}}])
    return at._run(states)


def item_texts(item: dict) -> list[str]:
    """Every text one of the element's items shows: its label, its help, its options' labels, its lines."""
    texts = [item.get("label", ""), item.get("help", "")]
    texts += [label for _value, label in item.get("options", [])] + [text for _kind, text in item.get("notes", [])]
    return [text for text in texts if text]


class _Drawn:
    """A control inside the element, with the interface of AppTest's widgets that ``Control`` uses."""

    def __init__(self, at: AppTest, item: dict):
        self.at, self.item = at, item
        self.value = item["value"]
        self.options = [label for _value, label in item.get("options", [])]
        self.label, self.help, self.disabled = item["label"], item["help"], item["disabled"]
        self.min, self.max, self.step = item.get("min"), item.get("max"), item.get("step", 1)

    def set_value(self, value):
        change(self.at, self.item["key"], value)


class Control:
    """One setting's control as the reader sees it: its value, its choices, its label; and a change to it.

    A change to a control in the element runs the app at once (each change is a run in the browser too);
    ``run()`` then runs nothing more."""

    def __init__(self, at: AppTest, key: str):
        self.at, self.key = at, key
        _node, item = _owner(at, key)
        self._node = _widget(at, key) if item is None else _Drawn(at, item)
        self._ran = False

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
        self._ran = isinstance(self._node, _Drawn)
        return self

    def increment(self) -> Control:
        return self.set_value(self.value + self._node.step)

    def decrement(self) -> Control:
        return self.set_value(self.value - self._node.step)

    def run(self) -> AppTest:
        return self.at if self._ran else self.at.run()


def control(at: AppTest, key: str) -> Control:
    """The control of session-state key ``key`` (KeyError when it is not drawn in this run)."""
    return Control(at, key)


def drawn(at: AppTest, key: str) -> bool:
    """True when the control of ``key`` is drawn in this run."""
    if _owner(at, key)[1] is not None:
        return True
    try:
        _widget(at, key)
    except KeyError:
        return False
    return True


def set_control(at: AppTest, key: str, value) -> AppTest:
    """Change one control as a reader does, and run the app."""
    return control(at, key).set_value(value).run()


def _lines(at: AppTest, kinds: tuple[str, ...]) -> list[str]:
    inside = [text for item in items(at) for kind, text in item.get("notes", []) if kind in kinds]
    names = {kind.capitalize() for kind in kinds}
    return inside + [node.value for node in at.sidebar if type(node).__name__ in names]


def notes(at: AppTest) -> list[str]:
    """The lines shown under the settings' controls (a caption or an info box each), in order; then the sidebar's
    other captions and info boxes."""
    return _lines(at, ("caption", "info"))


def warnings(at: AppTest) -> list[str]:
    """The warnings and errors shown under the settings' controls; then the sidebar's other warnings and errors."""
    return _lines(at, ("warning", "error"))


def headings(at: AppTest) -> list[str]:
    """The settings' section headings, in order (then the sidebar's other headers)."""
    inside = [item["label"] for item in items(at) if item["kind"] == "heading"]
    return inside + [node.value for node in at.sidebar.header]
