"""What Heads and Step by step send on every run, counted in AppTest (issue 38: fewer Streamlit elements).

Every element and layout block is one websocket message the browser takes in on every rerun (~1 ms each on a
Seed +, bench/bench_livechart.py's ``messages``). A column left empty, or a row that holds one element, is such
a message for nothing: none may come back. The counts themselves are the bench's, not asserted here."""

from __future__ import annotations

import pytest
from app_opener import open_app


def layout_blocks(node, found: list) -> list:
    """Every layout block (columns, containers, expanders) under ``node``, depth first."""
    for child in getattr(node, "children", {}).values():
        if hasattr(child, "children"):
            found.append(child)
            layout_blocks(child, found)
    return found


@pytest.mark.parametrize("page", ["heads", "step_by_step"])
def test_no_empty_column_and_no_row_of_one_element(page):
    at = open_app(None if page == "heads" else f"app_pages/{page}.py", seed=3)
    blocks = layout_blocks(at.main, [])
    empty = [block for block in blocks if type(block).__name__ == "Column" and not block.children]
    assert not empty, f"{len(empty)} empty column(s) on {page}"
    rows = [block for block in blocks if type(block).__name__ == "Block"
            and block.proto.flex_container.direction == 2 and len(block.children) == 1]  # horizontal, one child
    assert not rows, [type(next(iter(row.children.values()))).__name__ for row in rows]
