"""The sidebar's page icons are Material Symbols, which Streamlit serves as a font of its own: an emoji is an
empty box on a machine without an emoji font (Debian's Chromium)."""

from __future__ import annotations

import re
from pathlib import Path

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
    links = at.sidebar.get("page_link")
    assert [link.proto.label for link in links] == [info.title for info in PAGES]
    assert [link.proto.icon for link in links] == [info.icon for info in PAGES]
    assert MATERIAL.match(re.search(r'page_icon="([^"]+)"', (ROOT / "app.py").read_text()).group(1))
