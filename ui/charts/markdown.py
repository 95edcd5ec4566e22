"""Text that must reach Streamlit's Markdown exactly as typed. No streamlit in here.

Streamlit's Markdown has extensions that plain text can trip over: ``:on:`` is an emoji shortcode,
so the token label ``3:on`` followed by a colon renders as "3🔛"; ``$...$`` is LaTeX; ``*`` and
``_`` format. A code span is shown verbatim, so every token label (and word piece) that goes into
``st.markdown``, a caption, a header or an alert goes through ``literal``.
"""

from __future__ import annotations

import re


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
