"""Open the app in AppTest the way a link does: its query parameters, then (optionally) a page, then one run that
must raise nothing. One helper for the tests that only need a page opened with a link's parameters."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


def open_app(page: str | None = None, timeout: float = 60, **params) -> AppTest:
    """``page``: its file, e.g. "app_pages/flash.py" (None: the default page, Heads); ``params``: the link's."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    for name, value in params.items():
        at.query_params[name] = str(value)
    if page is not None:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at
