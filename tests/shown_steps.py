"""Step by step's steps as an AppTest run shows them: each step's heading, words and formula are ONE markdown element
(``ui.widgets.step_views.step_markdown``): an h3 with the step's anchor, then its paragraphs and its ``$$`` formula;
the steps of a run whose panels share one chart are one element.
Its downloads are drawn only while their expander is open (``open_downloads``)."""

from __future__ import annotations

import html
import re

HEADING = re.compile(r'^<h3 data-anchor="([\w-]+)">(.*?)</h3>', re.DOTALL)
STEP_START = re.compile(r"\n\n(?=<h3 data-anchor=)")
FORMULA = re.compile(r"\$\$\n(.*?)\n\$\$", re.DOTALL)
DOWNLOADS = "sbs_downloads"  # the downloads expander's key


def step_texts(at) -> list[str]:
    """The markdown of every step, in page order: the steps of a run (``ui.pipeline.panel_rows.step_runs``) share one
    element, each from its heading to the next."""
    return [text for m in at.main.markdown if HEADING.match(m.value) for text in STEP_START.split(m.value)]


def step_anchors(at) -> list[str]:
    """Every step heading's anchor (``#softmax``), in page order."""
    return [HEADING.match(text).group(1) for text in step_texts(at)]


def step_titles(at) -> list[str]:
    """Every step heading's text ("8. Softmax"), as the reader sees it."""
    return [html.unescape(HEADING.match(text).group(2)) for text in step_texts(at)]


def step_formulas(at) -> list[str]:
    """The LaTeX of every step's formula, in page order."""
    return [formula for text in step_texts(at) for formula in FORMULA.findall(text)]


def step_words(at) -> str:
    """Every step's words in one text (headings unescaped, formulas kept)."""
    return "\n".join(html.unescape(text) for text in step_texts(at))


def open_downloads(at):
    """Open the downloads section (drawn only while open), as a click on its header does, and run."""
    at.session_state[DOWNLOADS] = True
    return at.run()
