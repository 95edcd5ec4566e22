"""A formula for a narrow screen: the same LaTeX, its parts one under another.

The step formulas are written for a wide screen: parts side by side, separated by a ``\\quad`` or a
``\\qquad`` (``A = …,\\qquad m_i = …,\\qquad \\sum_j A_{ij} = 1``), and the drill-down's chains
``A = \\frac{…}{…} = \\frac{…}{…} = 0.23``. On a phone (390 px) such a line is wider than the screen.
:func:`phone_lines` puts each part on a line of its own and each link of a long chain under the one
before, aligned on its equals sign. Only spacing and line breaks change: every symbol and number stays.
"""

from __future__ import annotations

import re

# Spacing between side-by-side parts: a new line on a phone (not \quad inside a word such as \quadruple).
_GAP = re.compile(r"\\q?quad(?![A-Za-z])")
_ENV = re.compile(r"\\(begin|end)\{[^}]*\}")
CHAIN_LINKS = 3  # a part with this many "=" sides or more (a = b = c) is broken into a chain


def _top_level(latex: str) -> list[bool]:
    """For each character: True where it stands outside every {group} and \\begin…\\end environment."""
    outside, depth, k = [], 0, 0
    while k < len(latex):
        env = _ENV.match(latex, k)
        if env:  # \begin{name} and \end{name} themselves count as inside: nothing splits there
            outside += [False] * len(env.group(0))
            depth += 1 if env.group(1) == "begin" else -1
            k = env.end()
            continue
        char = latex[k]
        if latex.startswith("\\{", k) or latex.startswith("\\}", k):  # an escaped brace is a symbol
            outside += [depth == 0] * 2
            k += 2
            continue
        depth += char == "{"
        outside.append(depth == 0 and char not in "{}")
        depth -= char == "}"
        k += 1
    return outside


def _split_at(latex: str, places: list[tuple[int, int]]) -> list[str]:
    """``latex`` cut at the spans ``places`` (the spans dropped), each piece stripped."""
    pieces, start = [], 0
    for begin, end in places:
        pieces.append(latex[start:begin].strip())
        start = end
    pieces.append(latex[start:].strip())
    return [piece for piece in pieces if piece]


def parts(latex: str) -> list[str]:
    """The parts of a formula that stand side by side, separated by \\quad or \\qquad outside any group."""
    outside = _top_level(latex)
    gaps = [(m.start(), m.end()) for m in _GAP.finditer(latex) if outside[m.start()]]
    return _split_at(latex, gaps)


def chain(part: str) -> str:
    """``a = b = c`` as an aligned chain, one "= …" a line; anything else comes back as it was: fewer sides,
    an empty side, or a list (``a = b,\\ c = d``: a comma before the last side), which is no chain."""
    outside = _top_level(part)
    equals = [(k, k + 1) for k, char in enumerate(part) if char == "=" and outside[k]]
    sides = _split_at(part, equals)
    if len(equals) + 1 < CHAIN_LINKS or len(sides) != len(equals) + 1:
        return part
    if any("," in "".join(c for c, out in zip(side, _top_level(side), strict=True) if out) for side in sides[:-1]):
        return part
    first, rest = sides[0], sides[1:]
    return r"\begin{aligned} " + first + " &= " + r" \\ &= ".join(rest) + r" \end{aligned}"


def phone_lines(latex: str) -> str:
    """The formula with its side-by-side parts one under another (centred) and long chains broken."""
    lines = [chain(part) for part in parts(latex)]
    if len(lines) == 1:
        return lines[0]
    return r"\begin{gathered} " + r" \\ ".join(lines) + r" \end{gathered}"
