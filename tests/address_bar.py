"""The address bar as the app leaves it after an AppTest run.

AppTest cannot see the browser's address: the app keeps the address itself and one element, drawn at the end of
every run (``ui/widgets/address.py``), carries its query string to the browser, whose JavaScript puts it in the
address bar. ``address`` reads that element's data, as ``page_links.menu`` reads the page menu.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl


def address_query(at) -> str:
    """The query string (no ``?``) the address element of the last run carries."""
    found = [el for el in at.sidebar.get("bidi_component") if el.proto.component_name.endswith("mha_address")]
    assert len(found) == 1, [el.proto.component_name for el in at.sidebar.get("bidi_component")]
    return json.loads(found[0].proto.json)["query"]


def address(at) -> dict[str, str]:
    """The address bar's parameters after the last run (a repeated name: its last value, as ``st.query_params``)."""
    return dict(parse_qsl(address_query(at), keep_blank_values=True))
