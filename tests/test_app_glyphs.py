"""Every character the Lessons, Seed notebooks and Heads pages send is one that Debian's fonts draw.

Debian's chromium has no colour-emoji font: an emoji (✅ ❌ 🔶) is an empty box there. This test walks every
element the page sends (markdown, captions, info boxes, expander and tab labels, links, and every cell and
column name of its tables) and refuses a code point in the emoji blocks. ✓ (U+2713) and ✗ (U+2717) lie in the
dingbats block but DejaVu Sans has them, so they are allowed.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from google.protobuf.message import Message
from streamlit.testing.v1 import AppTest

from content.seeds import SEED_EXAMPLES
from ui.pages.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[1]
DRAWN_BY_DEJAVU = {"\u2713", "\u2717"}  # ✓ ✗


def needs_emoji_font(ch: str) -> bool:
    """True for a character only a colour-emoji font draws (the emoji blocks, dingbats, the emoji selector)."""
    code = ord(ch)
    if ch in DRAWN_BY_DEJAVU:
        return False
    return 0x1F000 <= code <= 0x1FAFF or 0x2600 <= code <= 0x27BF or code == 0xFE0F


def strings_of(message: Message):
    """Every string field of a protobuf message, nested messages and repeated fields included."""
    for _, value in message.ListFields():
        single = isinstance(value, (str, bytes, Message)) or not hasattr(value, "__iter__")
        for item in [value] if single else value:
            if isinstance(item, str):
                yield item
            elif isinstance(item, Message):
                yield from strings_of(item)


def texts(node):
    """Every text an element tree sends: proto strings, and a table's cells and column names."""
    proto = getattr(node, "proto", None)
    if isinstance(proto, Message):
        yield from strings_of(proto)
    if type(node).__name__ in ("Dataframe", "Table"):
        frame = node.value
        assert isinstance(frame, pd.DataFrame)
        yield from (str(c) for c in frame.columns)
        yield from (str(v) for v in frame.to_numpy().ravel())
    for child in getattr(node, "children", {}).values():
        yield from texts(child)


def unsafe(at: AppTest) -> dict[str, str]:
    """Character -> the first text it was found in, for every character the page sends that needs an emoji font."""
    found = {}
    for text in texts(at._tree):
        for ch in text:
            if needs_emoji_font(ch) and ch not in found:
                found[ch] = text[:120]
    return found


def opened(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(page)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_scan_sees_an_emoji_in_a_table_cell_and_in_markdown():
    """The scanner itself: it finds an emoji where the pages put theirs, and lets ✓ / ✗ through."""
    assert needs_emoji_font("✅") and needs_emoji_font("❌") and needs_emoji_font("🔶") and needs_emoji_font("⚠")
    assert not needs_emoji_font("✓") and not needs_emoji_font("✗") and not needs_emoji_font("→")
    at = AppTest.from_string(
        "import pandas as pd, streamlit as st\n"
        "st.markdown('plain')\n"
        "with st.expander('fine'):\n"
        "    st.table(pd.DataFrame({'a': ['✓ ok', '🔶 unseeded']}))\n"
    ).run()
    assert set(unsafe(at)) == {"🔶"}


@pytest.mark.parametrize("key", list(LESSONS))
def test_each_lesson_sends_no_emoji(key):
    at = opened("app_pages/lessons.py", lesson=key)
    assert at.header, "the lesson did not render"
    assert unsafe(at) == {}


def test_the_lessons_index_sends_no_emoji():
    assert unsafe(opened("app_pages/lessons.py")) == {}


def test_the_seed_notebooks_send_no_emoji_for_any_seed():
    at = opened("app_pages/seeds.py")
    assert len(at.tabs) == len(SEED_EXAMPLES) and len(at.table) == 1 + len(SEED_EXAMPLES)  # every seed rendered
    assert unsafe(at) == {}


def test_the_heads_page_sends_no_emoji():
    at = opened("app_pages/heads.py")
    assert at.get("plotly_chart") or at.get("custom_component") or at.markdown
    assert unsafe(at) == {}
