"""The protocol load generator's pieces that need no server: URLs, widget ids, messages, the summary."""

from __future__ import annotations

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element

from bench.bench_capacity import capacity_row, held
from bench.st_client import StreamlitClient, StudentResult, set_widget_value, stream_url, summary


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://127.0.0.1:8501", "ws://127.0.0.1:8501/_stcore/stream"),
        ("http://127.0.0.1:8080/mha/", "ws://127.0.0.1:8080/mha/_stcore/stream"),
        ("https://example.org", "wss://example.org/_stcore/stream"),
    ],
)
def test_stream_url_is_the_websocket_beside_the_page(base, expected):
    assert stream_url(base) == expected


def test_widget_ids_are_recorded_under_their_user_key_and_exceptions_collected():
    client = StreamlitClient("http://127.0.0.1:1")
    seed, chart, error = Element(), Element(), Element()
    seed.number_input.id = "$$ID-0123abcd-w_seed"
    chart.plotly_chart.id = "$$ID-99ff-heads-grid-x"  # a key with dashes keeps them
    error.exception.type, error.exception.message = "ValueError", "bad"
    exceptions: list[str] = []
    for element in (seed, chart, error):
        client.note_element(element, exceptions)
    assert client.widget_ids == {"w_seed": "$$ID-0123abcd-w_seed", "heads-grid-x": "$$ID-99ff-heads-grid-x"}
    assert exceptions == ["ValueError: bad"]


def test_a_widget_value_goes_in_the_field_of_its_type():
    message = BackMsg()
    widgets = message.rerun_script.widget_states.widgets
    for value in (True, 7, 0.5, "causal"):
        set_widget_value(widgets.add(), "id", value)
    assert [w.WhichOneof("value") for w in widgets] == ["bool_value", "int_value", "double_value", "string_value"]
    assert widgets[1].int_value == 7


def test_summary_counts_every_kind_of_error_and_a_rung_with_one_does_not_hold():
    clean = StudentResult(open_ms=50.0, latencies=[100.0, 200.0, 300.0])
    timed_out = StudentResult(open_ms=60.0, latencies=[150.0], timeouts=1)
    dropped = StudentResult(failure="ConnectionClosedError: 1006")
    shown = StudentResult(open_ms=70.0, latencies=[120.0], exceptions=["KeyError: 'x'"])
    row = summary([clean, timed_out, dropped, shown], wall_s=10.0)
    assert (row["changes"], row["errors"], row["timeouts"], row["disconnects"], row["exceptions"]) == (5, 3, 1, 1, 1)
    assert row["rate_per_s"] == pytest.approx(0.5)
    assert row["max_ms"] == 300.0
    assert not held({"errors": 3, "p95_ms": 100.0})
    assert not held({"errors": 0, "p95_ms": 1000.1})
    assert held({"errors": 0, "p95_ms": 999.0})


def test_capacity_is_the_highest_offered_rate_that_held():
    rows = [{"offered_per_s": 2.0, "held": True}, {"offered_per_s": 5.0, "held": True},
            {"offered_per_s": 10.0, "held": False}]
    row = capacity_row(rows, goal_rate=30.0)
    assert (row["offered_per_s"], row["students_at_5s"], row["met"]) == (5.0, 25.0, False)
