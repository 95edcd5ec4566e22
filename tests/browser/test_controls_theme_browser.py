"""The settings element (ui/widgets/controls.py, .js, .css) in Streamlit's light and dark themes (.streamlit/config.toml),
chosen as a reader's system chooses it (``prefers-color-scheme``): every text the element shows (headings, labels,
the values in its boxes, the segments, the lines under a control) reaches 4.5:1 against what is behind it.

The element draws its own HTML, so Streamlit's theme reaches it only through the CSS variables Streamlit sets on
the page (``--st-text-color`` ...): a fixed dark-on-light grey read well in the light theme and was all but
invisible in the dark one (the captions at 1.3:1). Screenshots: test-artifacts/controls_<theme>.png.
"""

from __future__ import annotations

import pytest
from conftest import CONTROLS, exceptions_on_page, open_app, screenshot, wait_drawn

# Each visible text of the element: the element that draws it, its text, its colour and the colour behind it (the
# backgrounds of it and its ancestors laid over each other down to the first opaque one), and their contrast
# (WCAG 2: relative luminance). Colours come as rgb()/rgba() or, from color-mix(), as color(srgb r g b / a); a
# text's own alpha is laid over the background before the ratio is taken. A help's hidden tooltip is left out.
CONTRASTS_JS = """root => {
  const parse = c => {
    let m = c.match(/^rgba?\\(([^)]+)\\)/);
    if (m) { const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p[3] ?? 1]; }
    m = c.match(/^color\\(srgb ([^)]+)\\)/);
    if (m) { const p = m[1].split(/[\\s\\/]+/).filter(Boolean).map(Number);
             return [p[0] * 255, p[1] * 255, p[2] * 255, p[3] ?? 1]; }
    throw new Error('a colour this test cannot read: ' + c);
  };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
  const behind = el => {
    const layers = [];
    for (let n = el; n; n = n.parentElement) {
      const c = parse(getComputedStyle(n).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    return layers.reverse().reduce((under, top) => over(top, under), [255, 255, 255, 1]);
  };
  const lum = c => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const texts = [...root.querySelectorAll('*')].filter(e => e.getClientRects().length > 0 && !e.closest('.mha-ctl-tip')
      && !e.disabled && (['INPUT', 'SELECT'].includes(e.tagName) && !['checkbox', 'radio', 'range'].includes(e.type)
      || [...e.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim())));
  return texts.map(e => {
    const bg = behind(e), fg = over(parse(getComputedStyle(e).color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    return {tag: e.tagName, cls: e.className, text: (e.value ?? e.textContent).trim().slice(0, 40),
            color: getComputedStyle(e).color, ratio: Math.round((hi + 0.05) / (lo + 0.05) * 100) / 100};
  });
}"""

SIDEBAR_BACKGROUND_JS = """() => getComputedStyle(document.querySelector('[data-testid="stSidebar"]')).backgroundColor"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_text_of_the_settings_element_reads_at_4_5_to_1_in_both_themes(app_page, app_url, theme):
    app_page.emulate_media(color_scheme=theme)
    try:
        open_app(app_page, app_url, "?mask=causal&kv_heads=2")  # captions under Heads and Key/value heads
        wait_drawn(app_page)
        sidebar = app_page.evaluate(SIDEBAR_BACKGROUND_JS)
        channels = [float(c) for c in sidebar.split("(")[1].split(")")[0].split(",")[:3]]
        assert (sum(channels) / 3 < 80) == (theme == "dark"), f"the {theme} theme was not chosen: sidebar {sidebar}"
        texts = app_page.locator(CONTROLS).evaluate(CONTRASTS_JS)
        kinds = {t["cls"] for t in texts}
        # what is checked is there: headings, labels' words, the boxes' values, segments, a caption
        assert {"mha-ctl-heading", "mha-ctl-input", "mha-ctl-note mha-ctl-note-caption"} <= kinds, kinds
        assert len(texts) >= 30, texts
        low = [t for t in texts if t["ratio"] < 4.5]
        assert not low, f"{theme}: text under 4.5:1 in the settings element: {low}"
        screenshot(app_page, f"controls_{theme}")
        assert not exceptions_on_page(app_page)
    finally:
        app_page.emulate_media(color_scheme="light")
