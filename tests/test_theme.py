"""The theme in .streamlit/config.toml: Streamlit knows every key, and text and the primary colour reach
WCAG AA contrast (4.5:1, for normal text) on both backgrounds, in the light and the dark theme."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

CONFIG = Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml"
AA = 4.5


def luminance(hex_colour: str) -> float:
    """Relative luminance of an sRGB colour '#rrggbb' (WCAG 2.1)."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_formula_on_known_pairs():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # the classic just-fails grey


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_text_and_primary_colour_pass_wcag_aa_on_both_backgrounds(mode):
    theme = tomllib.loads(CONFIG.read_text())["theme"][mode]
    for background in ("backgroundColor", "secondaryBackgroundColor"):
        for foreground in ("textColor", "primaryColor"):
            ratio = contrast(theme[foreground], theme[background])
            assert ratio >= AA, f"{mode}: {foreground} on {background} is {ratio:.2f}:1"


def test_streamlit_knows_every_key_of_the_config():
    from streamlit import config

    known = set(config._config_options_template)
    settings = tomllib.loads(CONFIG.read_text())

    def keys(table, prefix=""):
        for name, value in table.items():
            yield from keys(value, f"{prefix}{name}.") if isinstance(value, dict) else [f"{prefix}{name}"]

    unknown = [key for key in keys(settings) if key not in known]
    assert not unknown, unknown
