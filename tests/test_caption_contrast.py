"""Captions reach WCAG AA too (issue 23, item 14): Streamlit draws a caption in the theme's text colour at 60%
over the background, and a code span in a caption (every token label) in the code colour at 60% over the code
background (#fbfbfd measured in the browser). axe-core found #76797f on white, 4.36:1, with the old text colour.
"""

from __future__ import annotations

import tomllib

import pytest

from tests.test_theme import AA, CONFIG, contrast

CAPTION_OPACITY = 0.6  # what Streamlit 1.67 gives a caption (measured: #1b1f2a became #76797f on white)
CODE_BACKGROUND = "#fbfbfd"


def blend(colour: str, background: str, opacity: float) -> str:
    """``colour`` drawn at ``opacity`` over ``background``, as '#rrggbb'."""
    mixed = [round(opacity * int(colour[i : i + 2], 16) + (1 - opacity) * int(background[i : i + 2], 16))
             for i in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in mixed)


def test_blend_reproduces_the_caption_colour_axe_measured():
    assert blend("#1b1f2a", "#ffffff", CAPTION_OPACITY) == "#76797f"


@pytest.mark.parametrize("background", ["backgroundColor", "secondaryBackgroundColor"])
def test_light_theme_captions_pass_aa(background):
    theme = tomllib.loads(CONFIG.read_text())["theme"]["light"]
    caption = blend(theme["textColor"], theme[background], CAPTION_OPACITY)
    assert contrast(caption, theme[background]) >= AA


def test_light_theme_code_in_captions_passes_aa():
    theme = tomllib.loads(CONFIG.read_text())["theme"]["light"]
    code = blend(theme["codeTextColor"], CODE_BACKGROUND, CAPTION_OPACITY)
    assert contrast(code, CODE_BACKGROUND) >= AA
