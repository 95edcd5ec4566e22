"""The sidebar's settings survive a page without the sidebar, and a Seed + does not send them back to the browser.

The settings are session-state values shown by one element (``ui/widgets/controls.py``), which nothing drops.
``keep_widget_state`` (app.py, every run) re-assigns the values of the page widgets Streamlit would drop on a page
that does not draw them; those drawn with ``persist_state`` are left to Streamlit (``kept_by_streamlit``): a value
assigned in a run goes back to the browser with its widget (``set_value``), which then sets the control again.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.address_bar import address
from tests.sidebar_controls import control, drawn, set_control
from ui.widgets.state import kept_by_streamlit

ROOT = Path(__file__).resolve().parents[1]
NO_SIDEBAR = "app_pages/seeds.py"  # a page that draws none of the sidebar's controls


def start(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


def sent_back(at: AppTest) -> tuple[list[str], int]:
    """The keys of the widgets whose value the last run sent to the browser (``set_value``), and how many widgets."""
    widgets = [el.proto for area in (at.sidebar, at.main) for el in area
               if hasattr(el, "proto") and hasattr(el.proto, "set_value")]
    return [proto.id.rsplit("-", 1)[-1] for proto in widgets if proto.set_value], len(widgets)


@pytest.mark.parametrize("page", ["app_pages/heads.py", "app_pages/step_by_step.py"])
def test_a_seed_plus_sends_no_value_back(page):
    at = start({"seed": "3"})
    at.switch_page(page).run()
    for seed in ("4", "5"):
        control(at, "w_seed").increment().run()
        assert address(at)["seed"] == seed and not at.exception
        keys, widgets = sent_back(at)
        assert keys == [] and widgets >= 1  # the language at least: the settings (and Step by step's row) are elements


def _calls_with_a_kept_key(path: Path):
    """(line, key, whether it passes persist_state) of every call in ``path`` with a literal key kept by Streamlit."""
    kept = kept_by_streamlit()
    for node in ast.walk(ast.parse(path.read_text())):
        drawer = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "draw"
        if isinstance(node, ast.Call) and not drawer:  # place.draw.toggle(...): the settings' element, no widget
            words = {word.arg: word.value for word in node.keywords}
            key = words.get("key")
            if isinstance(key, ast.Constant) and key.value in kept:
                yield node.lineno, key.value, "persist_state" in words


def test_every_widget_left_to_streamlit_is_drawn_with_persist_state():
    # keep_widget_state leaves these keys to Streamlit; a widget drawn without persist_state would lose its value
    # on a page that does not draw it
    found = [(str(path.relative_to(ROOT)), *call) for folder in ("app_pages", "ui") for path in (ROOT / folder).rglob("*.py")
             for call in _calls_with_a_kept_key(path)]
    assert len(found) >= 8, found
    assert [call for call in found if not call[-1]] == []


@pytest.mark.parametrize("key, value, param, shown", [
    ("w_heads", 8, "heads", "8"),
    ("w_mask", "causal", "mask", "causal"),
    ("w_tokens", "a b c", "tokens", "a b c"),
    ("w_bias", True, "bias", "1"),
])
def test_a_setting_changed_in_the_sidebar_survives_a_page_without_it(key, value, param, shown):
    assert key not in kept_by_streamlit()  # a setting is a session-state value that the one element shows
    # a link without settings: AppTest sends the link's query again on every page switch, where a browser sends the
    # address bar's, and a link's settings are news on an arrival (``startup``)
    at = start({})
    set_control(at, key, value)
    assert address(at)[param] == shown
    at.switch_page(NO_SIDEBAR).run()
    assert not at.exception and not drawn(at, key)
    at.switch_page("app_pages/heads.py").run()
    assert not at.exception
    assert control(at, key).value == value
    assert address(at)[param] == shown


def test_settings_chosen_in_the_sidebar_follow_every_page_switch():
    # a widget's id carries its page: a page switch draws new widgets, which take their values from the keys
    at = start({})
    set_control(at, "w_heads", 8)
    set_control(at, "w_mask", "causal")
    control(at, "w_seed").increment().run()  # a rerun of the same page leaves the values to Streamlit
    seed = control(at, "w_seed").value
    for page in ("app_pages/step_by_step.py", NO_SIDEBAR, "app_pages/heads.py", "app_pages/step_by_step.py"):
        at.switch_page(page).run()
        assert not at.exception, page
        if page != NO_SIDEBAR:
            assert (control(at, "w_heads").value, control(at, "w_mask").value) == (8, "causal"), page
            assert control(at, "w_seed").value == seed, page
            control(at, "w_seed").increment().run()
            seed += 1
            assert address(at)["seed"] == str(seed) and address(at)["heads"] == "8", page
