"""Text that must reach Streamlit's Markdown exactly as typed. No streamlit in here.

Streamlit's Markdown has extensions that plain text can trip over: ``:on:`` is an emoji shortcode,
so the token label ``3:on`` followed by a colon renders as "3🔛"; ``$...$`` is LaTeX; ``*`` and
``_`` format. A code span is shown verbatim, so every token label (and word piece) that goes into
``st.markdown``, a caption, a header or an alert goes through ``literal``.
"""

from __future__ import annotations

import re

import numpy as np


def literal(text: str) -> str:
    """``text`` as a Markdown code span: '3:on' -> '`3:on`'.

    The fence is one backtick longer than the longest run of backticks inside, and a space pads a
    text that starts or ends with a backtick (CommonMark strips one such space on each side), so a
    token may contain backticks too.
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def literals(texts, separator: str = ", ") -> str:
    """Several texts as code spans joined by ``separator``: ['0:the', '3:on'] -> '`0:the`, `3:on`'."""
    return separator.join(literal(t) for t in texts)


def table_cell(text: str) -> str:
    """A label as a Markdown table's cell: a code span (``literal``), its pipes escaped, which a table would split."""
    return literal(str(text)).replace("|", "\\|")


def markdown_table(frame, number_format: str, yes: str, no: str) -> str:
    """A DataFrame as a Markdown table: a header of the index's name and the columns (the app's words, as they are),
    then one line per row: its label as a ``table_cell`` (a token, typed by the reader), floats with ``number_format``
    ("%.6f"), booleans as ``yes`` / ``no``."""
    def cell(value) -> str:
        if isinstance(value, bool | np.bool_):
            return yes if value else no
        if isinstance(value, float | np.floating):
            return number_format % value
        return table_cell(value)

    names = [frame.index.name or "", *frame.columns]  # the app's own words: plain text
    lines = ["| " + " | ".join(str(name).replace("|", "\\|") or " " for name in names) + " |",
             "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(cell(v) for v in (label, *row)) + " |"
              for label, row in zip(frame.index, frame.itertuples(index=False, name=None), strict=True)]
    return "\n".join(lines)
