"""The "server" benchmark section's rows: the issue's three pages at the defaults and the caps, with their goals."""

from bench import bench_server
from bench.registry import select


def test_rows_cover_the_three_pages_with_goals_at_defaults_and_caps():
    rows = bench_server.rows()
    with_goals = {(row.page, row.settings): row.goal_ms for row in rows if row.goal_ms}
    assert with_goals == {
        ("heads", "defaults"): 15.0, ("step_by_step", "defaults"): 30.0, ("real_model", "defaults"): 40.0,
        ("heads", "caps"): 100.0, ("step_by_step", "caps"): 100.0, ("real_model", "caps"): 100.0,
    }


def test_every_change_is_to_a_value_not_used_before():
    for row in bench_server.rows():
        values = [row.value(i) for i in range(-2, 60)]
        assert len(set(values)) == len(values), row


def test_the_section_is_registered_after_the_app_section():
    names = [section.name for section in select(None)]
    assert names.index("server") == names.index("app") + 1


def test_a_missed_goal_says_by_how_many_milliseconds():
    assert bench_server.missed_note(102.4, 100.0) == "missed by 2 ms (1.02x the goal)"
    assert bench_server.missed_note(99.0, 100.0) == bench_server.missed_note(120.0, None) == ""
