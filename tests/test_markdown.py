"""ui/charts/markdown.py: token labels reach Streamlit's Markdown as code spans, shown exactly as typed."""

from __future__ import annotations

import re

import pytest

from ui.charts.markdown import literal, literals


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("3:on", "`3:on`"),
        ("4:*not*", "`4:*not*`"),  # no italics
        ("5:$x$", "`5:$x$`"),  # no LaTeX
        ("6:a`b", "``6:a`b``"),  # a backtick inside: a longer fence
        ("7:``", "``` 7:`` ```"),  # ends with backticks: a longer fence and a space each side
        ("`x", "`` `x ``"),
    ],
)
def test_literal_makes_a_code_span_that_holds_any_text(text, span):
    assert literal(text) == span


def test_literal_fence_is_longer_than_every_run_of_backticks_inside():
    for text in ["a", "a`", "a``b`", "```"]:
        span = literal(text)
        fence = re.match(r"`+", span).group()
        assert span.endswith(fence)
        assert all(len(run) < len(fence) for run in re.findall(r"`+", text))
        assert span[len(fence) : -len(fence)].strip(" ") == text.strip(" ")


def test_literals_join_the_spans():
    assert literals(["0:the", "3:on"]) == "`0:the`, `3:on`"
    assert literals(["un ##bel", "snow ##board"], "; ") == "`un ##bel`; `snow ##board`"
    assert literals([]) == ""


def test_a_table_prints_its_numbers_and_flags_and_keeps_a_label_with_a_pipe_in_its_cell():
    import pandas as pd

    from ui.charts.markdown import markdown_table

    frame = pd.DataFrame({"sum": [1.0, 0.25], "all masked": [False, True]},
                         index=pd.Index(["0:a|b", "1:$x$"], name="query"))
    lines = markdown_table(frame, "%.6f", yes="yes", no="no").splitlines()
    assert lines[0] == "| query | sum | all masked |" and lines[1] == "|---|---|---|"
    assert lines[2] == r"| `0:a\|b` | 1.000000 | no |"  # the pipe escaped: one cell, not two
    assert lines[3] == "| `1:$x$` | 0.250000 | yes |"  # a code span: no formula, no emphasis
    assert all(line.count(" | ") == 2 for line in lines[2:])
