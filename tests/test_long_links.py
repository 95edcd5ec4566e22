"""A long link that the web server accepts reaches the app, which says what it cut (issue 15).

The server's own refusal of longer links (HTTP 400 past 16 KiB of request head) is tested
against a real server in tests/browser/test_long_links_browser.py; the README's "Limits" says
links up to 8,000 characters are supported.
"""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED_LINK_CHARS = 8_000  # the README's supported link length


def test_a_link_at_the_supported_length_opens_with_the_apps_message():
    tokens = " ".join(["a"] * 3_990)  # 7,979 characters: "?tokens=a+a+..." is just under 8,000
    assert len("/?tokens=" + tokens) <= SUPPORTED_LINK_CHARS
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["tokens"] = tokens
    at.run()
    assert not at.exception
    warnings = " ".join(warning.value for warning in at.warning)
    assert "`tokens` has 3990 tokens; the limit is 64: keeping the first 64." in warnings
    assert at.session_state["config"].tokens == ("a",) * 64
