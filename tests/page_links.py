"""Following an ``st.page_link`` in an AppTest run, as a browser follows the link.

AppTest cannot click a link: ``follow`` reads the link's page and query string from its element and opens that
page with exactly those query parameters (what the browser sends when the link is clicked inside the app).
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from ui.state import navigation


def links(at, label: str | None = None) -> list:
    """The page links drawn in the main area (not the sidebar's menu), those with ``label`` when given."""
    return [link for link in at.main.get("page_link") if label is None or link.proto.label == label]


def follow(at, label: str):
    """Open the page the main-area link labelled ``label`` points to, with its parameters, and run."""
    found = links(at, label)
    assert len(found) == 1, (label, [link.proto.label for link in links(at)])
    proto = found[0].proto
    name = proto.page or navigation.DEFAULT_PAGE  # the default page's URL path is empty
    at.query_params.clear()
    at.query_params.update(dict(parse_qsl(proto.query_string)))
    return at.switch_page(navigation.PAGE_INFO[name].path).run()


def menu(at) -> dict:
    """The sidebar's page menu (``ui/widgets/page_menu.py``: one element) as its data: pages, current page, label."""
    found = [el for el in at.sidebar.get("bidi_component") if el.proto.component_name.endswith("mha_page_menu")]
    assert len(found) == 1, [el.proto.component_name for el in at.sidebar.get("bidi_component")]
    return json.loads(found[0].proto.json)
