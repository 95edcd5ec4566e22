"""Every page of the app runs without an exception, with the default settings and after a page switch."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

import pytest
import shown_charts
from page_links import links, menu
from sidebar_controls import set_control
from streamlit.testing.v1 import AppTest

from tests.address_bar import address
from ui.i18n import translations
from ui.pages.lessons import LESSONS
from ui.state import navigation

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "app_pages").glob("*.py"))


def start(params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    return at.run()


def exceptions(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.exception]


def test_every_page_file_is_routed():
    assert "app_pages/heads.py" in PAGES and len(PAGES) >= 6
    assert sorted(info.path for info in navigation.PAGES) == PAGES, "a page file is missing from ui/state/navigation.py"
    at = start()
    shown = menu(at)  # the menu: every page, the one shown marked, in one element and no page_link
    assert [page["title"] for page in shown["pages"]] == [info.title for info in navigation.PAGES]
    assert [page["path"] for page in shown["pages"]] == ["", *(info.name for info in navigation.PAGES[1:])]
    assert shown["current"] == "" and not at.sidebar.get("page_link")
    at.switch_page("app_pages/about.py").run()
    assert menu(at)["current"] == "about"



def test_the_menu_is_the_same_after_a_change_of_the_settings():
    # the links read the address bar in the browser (static/mha/page_menu.js): the element carries no parameter, so
    # a Seed + sends it unchanged, where nine st.page_links each changed with the address
    at = start({"seed": "3"})
    before = menu(at)
    set_control(at, "w_seed", 9)
    assert address(at)["seed"] == "9" and menu(at) == before
    assert set(before) == {"pages", "current", "label"} and not any("?" in page["path"] for page in before["pages"])

def test_the_menu_titles_are_in_the_readers_language():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["lang"] = "es"
    at.run()
    shown = menu(at)
    spanish = translations("es").gettext
    assert [page["title"] for page in shown["pages"]] == [spanish(info.title) for info in navigation.PAGES]
    assert shown["label"] == spanish("Pages") != "Pages"
    assert shown["pages"][1]["title"] != "Step by step"


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_without_an_exception(page):
    at = start()
    at.switch_page(page).run()
    assert not exceptions(at), exceptions(at)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_in_presentation_mode(page):
    at = start({"present": "1", "mask": "causal"})
    at.switch_page(page).run()
    assert not exceptions(at), exceptions(at)


def test_a_tour_of_every_page_and_back_raises_nothing():
    """(That the settings survive the tour is checked in a real browser: AppTest resends stale
    values for untouched number inputs after ``switch_page``, which a browser never does.)"""
    at = start({"heads": "2", "mask": "causal", "view": "logits"})
    for page in [*PAGES, "app_pages/heads.py"]:
        at.switch_page(page).run()
        assert not exceptions(at), (page, exceptions(at))
    assert shown_charts.chart_elements(at), "the Heads page lost its figure"


def titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


@pytest.mark.parametrize(
    "page, params, button",
    [("app_pages/seeds.py", {}, "Load these settings into the explorer"), ("app_pages/lessons.py", {"lesson": "wo"}, None)],
    ids=["seed notebooks", "lessons"],
)
def test_the_explorer_links_open_the_heads_page(page, params, button):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(page)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert "Heads" not in titles(at)
    label = LESSONS["wo"].panels[0].caption if button is None else button
    proto = links(at, label)[0].proto  # explorer links are links: followed as the browser follows them
    assert (proto.page or navigation.DEFAULT_PAGE) == "heads"  # the default page's URL path is empty
    at.query_params.clear()
    at.query_params.update(dict(parse_qsl(proto.query_string)))
    at.switch_page("app_pages/heads.py").run()
    assert not exceptions(at), exceptions(at)
    assert "Heads" in titles(at), titles(at)


def test_about_links_each_other_page_under_its_own_title():
    at = start()
    at.switch_page("app_pages/about.py").run()
    links = [(link.proto.page, link.proto.label) for link in at.main.get("page_link")]  # not the sidebar's menu
    others = [info for info in navigation.PAGES if info.name != "about"]
    # the default page's URL path is empty: "/" opens it
    assert [page for page, _ in links] == ["" if info.name == navigation.DEFAULT_PAGE else info.name for info in others]
    assert [label.split(":")[0] for _, label in links] == [info.title for info in others]
