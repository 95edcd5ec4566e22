"""Heads and K/V heads in the sidebar: changing the head count never switches grouped-query attention on.

Multi-head stays multi-head (K/V heads follow the heads while they were equal); a chosen grouping keeps
its group size where the new count allows it, else the nearest valid grouping, with a message. Before
this, ``/?heads=2`` then Heads = 4 gave ``kv_heads=2`` (GQA) without asking.
"""

from __future__ import annotations

import pytest

from tests.address_bar import address
from tests.sidebar_controls import control, notes, set_control
from tests.test_app_decoding import open_page
from ui.state.settings import kv_heads_after


def query(at, name: str):
    value = address(at).get(name)
    return value[0] if isinstance(value, list) else value


@pytest.mark.parametrize(("link", "new_heads", "kv_after"), [
    ({"heads": "2"}, 4, 4),  # the case: MHA stays MHA
    ({}, 8, 8),  # the default 4 heads -> 8
    ({"heads": "8"}, 2, 2),
    ({"heads": "4", "kv_heads": "2"}, 8, 4),  # groups of 2 kept
    ({"heads": "8", "kv_heads": "2"}, 2, 1),  # groups of 4 cannot be kept with 2 heads: the nearest, groups of 2
    ({"heads": "4", "kv_heads": "1"}, 8, 2),  # MQA with 4 heads is groups of 4: kept
])
def test_changing_the_head_count_keeps_what_the_heads_meant(link, new_heads, kv_after):
    at = open_page("app_pages/heads.py", **link)
    set_control(at, "w_heads", new_heads)
    assert not at.exception
    config = at.session_state["config"]
    assert (config.n_heads, config.key_value_heads) == (new_heads, kv_after)
    assert query(at, "heads") == str(new_heads)
    assert query(at, "kv_heads") == (None if kv_after == new_heads else str(kv_after))
    assert control(at, "w_kv_heads").value == kv_after


def test_a_grouping_that_cannot_be_kept_says_so():
    at = open_page("app_pages/heads.py", d_model="24", heads="8", kv_heads="2")  # groups of 4
    set_control(at, "w_heads", 6)  # 6 heads: groups of 4 impossible; nearest: groups of 3 (kv 2)
    assert not at.exception
    assert at.session_state["config"].key_value_heads == 2
    shown = notes(at)
    assert any("cannot keep groups of 4 query heads per K/V head with 6 heads" in note for note in shown), shown


def test_a_second_change_starts_from_the_first():
    at = open_page("app_pages/heads.py", heads="4", kv_heads="2")
    set_control(at, "w_heads", 8)
    set_control(at, "w_heads", 16)
    assert at.session_state["config"].key_value_heads == 8  # groups of 2 all along
    set_control(at, "w_kv_heads", 16)  # back to MHA by hand
    set_control(at, "w_heads", 2)
    assert at.session_state["config"].key_value_heads == 2


@pytest.mark.parametrize(("heads", "before_heads", "before_kv", "expected"), [
    (8, 4, 4, (8, None)),
    (8, 4, 2, (4, None)),
    (6, 8, 2, (2, "cannot keep groups of 4 query heads per K/V head with 6 heads; the nearest is groups of 3")),
    (5, 8, 2, (1, "cannot keep groups of 4 query heads per K/V head with 5 heads; the nearest is groups of 5")),
    (16, 4, 1, (4, None)),
    (4, 4, 3, (2, None)),  # a count that never divided: the largest that divides below it
])
def test_kv_heads_after_worked_by_hand(heads, before_heads, before_kv, expected):
    assert kv_heads_after(heads, before_heads, before_kv) == expected
