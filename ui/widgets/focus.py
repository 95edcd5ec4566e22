"""A visible ring on whatever has the keyboard's focus (issue 23, item 13), on every page.

Streamlit marks a focused button or expander with a ring, but a focused link, text field, number field,
select box or switch only changes a border colour or draws Chromium's ring around a 1-pixel hidden input.
These rules draw one ring, the primary colour outside a white edge (seen on light and dark backgrounds),
around the visible part of the control: the link itself, the field's box, the switch with its label.
"""

from __future__ import annotations

import streamlit as st

RING = "outline: 2px solid #1d4ed8 !important; outline-offset: 2px; box-shadow: 0 0 0 2px #ffffff;"

FOCUS_CSS = f"""
<style>
a:focus-visible {{ {RING} border-radius: 4px; }}
[data-testid="stTextInputRootElement"]:has(input:focus-visible),
[data-testid="stNumberInputContainer"]:has(input:focus-visible),
[data-testid="stTextAreaRootElement"]:has(textarea:focus-visible),
[role="group"]:has(> input[role="combobox"]:focus-visible) {{ {RING} }}
label:has(input[type="checkbox"]:focus-visible) {{ {RING} border-radius: 4px; }}
</style>
"""


def focus_ring() -> None:
    """Inject the focus ring's CSS (app.py, once per run, before the page)."""
    st.html(FOCUS_CSS)
