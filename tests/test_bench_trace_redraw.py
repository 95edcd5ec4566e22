"""bench/trace_redraw.py's table from made-up presses: the parts are the gaps between the marks, in order, and
add up to the whole; a missing mark is NaN, not a wrong number."""

from __future__ import annotations

import math

from bench.trace_redraw import PARTS, chart_rows, table


def press(first, last, react, done, screen, **extra) -> dict:
    return {"first_message": first, "last_message": last, "first_react": react, "last_react_done": done,
            "on_screen": screen, "react_sync": 50.0, "long_tasks": 0.0, "server_cpu": 40.0, "reacts": 4,
            "reruns": 1, "backmsgs": 1, "messages": 86, "kb": 71.0, "per_chart": {"heads_grid": 30.0}} | extra


def test_parts_are_the_gaps_between_marks_and_add_up_to_the_whole():
    measured = {"Heads": [press(10, 110, 130, 330, 340), press(20, 120, 150, 350, 360), press(30, 130, 140, 340, 345)]}
    rows = {row["part"]: row["Heads"] for row in table(measured)}
    gaps = [rows[label] for label, _, _ in PARTS]
    assert gaps == [20, 100, 20, 200, 10]  # per part, the median of its three gaps
    whole = rows["input -> every heatmap redrawn (the bench's Seed + measurement)"]
    assert whole == 345 and sum(gaps) == 350  # medians of parts need not add up exactly; here they nearly do


def test_a_press_without_a_react_gives_nan_parts_and_charts_by_key():
    measured = {"Step by step": [press(10, 100, None, None, 120, per_chart={})] * 2}
    rows = {row["part"]: row["Step by step"] for row in table(measured)}
    assert math.isnan(rows[PARTS[2][0]]) and rows[PARTS[0][0]] == 10
    assert chart_rows({"Heads": [press(1, 2, 3, 4, 5)] * 3}) == [{"page": "Heads", "chart": "heads_grid",
                                                                  "react_sync_ms": 30.0}]
