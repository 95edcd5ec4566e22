"""The sidebar's page icons are Material Symbols, which Streamlit serves as a font of its own: an emoji is an
empty box on a machine without an emoji font (Debian's Chromium)."""

from __future__ import annotations

import re
from pathlib import Path

from page_links import menu
from streamlit.testing.v1 import AppTest

from ui.state.navigation import PAGES

ROOT = Path(__file__).resolve().parents[1]
MATERIAL = re.compile(r"^:material/[a-z0-9_]+:$")


def test_every_page_has_a_material_icon_of_its_own():
    icons = [info.icon for info in PAGES]
    assert all(MATERIAL.match(icon) for icon in icons), icons
    assert len(set(icons)) == len(icons)


def test_the_sidebar_links_and_the_tab_show_material_icons():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    links = menu(at)["pages"]  # the menu draws each as a Material Symbol by name (static/mha/page_menu.js)
    assert [link["title"] for link in links] == [info.title for info in PAGES]
    assert [f":material/{link['icon']}:" for link in links] == [info.icon for info in PAGES]
    assert MATERIAL.match(re.search(r'page_icon="([^"]+)"', (ROOT / "app.py").read_text()).group(1))


def callout_icons(at: AppTest) -> list[str]:
    """The icon of every info, success and warning box the page drew."""
    return [box.proto.icon for kind in ("info", "success", "warning") for box in at.get(kind)]


def test_the_lesson_and_seed_callouts_show_material_icons_not_emoji():
    # 💡, 🤔, 🎯 and 🎲 were empty boxes on Debian's Chromium, beside every lesson's explanation.
    lesson = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    lesson.query_params["lesson"] = "causal"
    lesson.switch_page("app_pages/lessons.py").run()
    lesson.toggle(key="w_lesson_predict").set_value(True).run()  # the box that asks for a guess first
    hidden = callout_icons(lesson)
    lesson.button(key="lesson_reveal_causal").click().run()
    shown = callout_icons(lesson)
    seeds = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    seeds.switch_page("app_pages/seeds.py").run()
    icons = hidden + shown + callout_icons(seeds)
    given = [icon for icon in icons if icon]  # a box drawn without an icon has none to get wrong
    assert hidden and shown and len(given) >= 2 + 5, icons  # the two lesson boxes; one box per seed, in its tab
    assert all(MATERIAL.match(icon) for icon in given), icons
