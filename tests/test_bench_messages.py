"""bench/messages.py: each ForwardMsg is named by where it goes and what it is, and the counts add up."""

from __future__ import annotations

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from bench.messages import counts, kind_of


def delta(path: list[int], element: str | None = None, block: str | None = None) -> ForwardMsg:
    message = ForwardMsg()
    message.metadata.delta_path.extend(path)
    if element == "markdown":
        message.delta.new_element.markdown.body = "words"
    elif element == "selectbox":
        message.delta.new_element.selectbox.label = "a control"
    elif block == "expandable":
        message.delta.add_block.expandable.label = "a section"
    return message


def test_area_and_kind_of_each_message():
    finished = ForwardMsg()
    finished.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
    assert kind_of(delta([0, 3], element="markdown")) == ("main", "markdown")
    assert kind_of(delta([1, 0], element="selectbox")) == ("sidebar", "selectbox")
    assert kind_of(delta([0, 5], block="expandable")) == ("main", "block:expandable")
    assert kind_of(finished) == ("-", "script_finished")


def test_counts_add_up_by_area_and_kind():
    seen = [("main", "markdown", 100), ("sidebar", "selectbox", 50), ("main", "markdown", 300), ("-", "delta", 1)]
    table = counts(seen)
    assert table[0] == ("main", "markdown", 2, 400)  # most messages first, bytes summed
    assert sorted(table[1:]) == [("-", "delta", 1, 1), ("sidebar", "selectbox", 1, 50)]
    assert sum(row[2] for row in table) == len(seen)
