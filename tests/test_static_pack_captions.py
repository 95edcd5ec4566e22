"""A static pack page's caption names no switch the page lacks: on a long sentence the Heads caption says the 0..1
colours leave nearly every cell dark, and the app adds "Colour range 'each head 0..its largest' shows each head's
pattern", a switch the pack does not have. The pack says the fact (its number from the engine) without the switch."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

from deploy import static_pack
from mha_core.config import MHAConfig, run
from ui.charts import head_panels
from ui.state.settings import COLOUR_RANGE_LABELS

LONG = tuple(f"w{i}" for i in range(64))  # 64 tokens, 16 heads: a typical row's largest weight is ~0.09
LINK = f"?tokens={'+'.join(LONG)}&heads=16&d_model=64"


def page_text(path) -> str:
    """A page's words as a reader sees them (scripts and tags left out)."""
    text = re.sub(r"<script.*?</script>", " ", path.read_text(encoding="utf-8"), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("packs") / "pack"
    static_pack.build_pack(out, [LINK], "https://mha.example.org")
    return out


def test_a_long_sentences_caption_says_it_is_dark_without_naming_a_switch(pack_dir):
    text = page_text(pack_dir / "link-1.html")
    weights = run(MHAConfig(tokens=LONG, n_heads=16, d_model=64)).trace.weights  # (nh, T, T), the engine's
    typical = float(np.median(weights.max(axis=-1)))
    assert typical < 0.15
    assert f"A typical row's largest weight is {typical:.2f}, so on 0..1 nearly every cell is dark." in text
    assert "Colour range" not in text
    assert [label for label in COLOUR_RANGE_LABELS.values() if label in text] == []


def test_every_pack_page_names_no_colour_range_switch(pack_dir):
    pages = sorted(pack_dir.glob("*.html"))
    assert len(pages) > 10  # lessons, presets, the link, the index
    named = {page.name: label for page in pages for label in COLOUR_RANGE_LABELS.values() if label in page_text(page)}
    assert named == {}


def test_the_app_still_names_its_switch():
    trace = run(MHAConfig(tokens=LONG, n_heads=16, d_model=64)).trace
    label = COLOUR_RANGE_LABELS["head"]
    assert f"Colour range '{label}' shows each head's pattern." in head_panels.view_caption(trace, "weights", "fixed",
                                                                                           label)
    assert "Colour range" not in head_panels.view_caption(trace, "weights", "fixed", None)
