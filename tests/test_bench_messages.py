"""bench/messages.py: each ForwardMsg is named by where it goes and what it is, and the counts add up; its protocol
client (bench/st_client.py) changes the app's seed through the settings' one element."""

from __future__ import annotations

import collections
import json

import pytest
from streamlit.components.v2.bidi_component.main import _make_trigger_id
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from bench.messages import counts, kind_of, one_seed_run
from bench.st_client import SEED_KEY, StreamlitClient
from tools.launch import run_coroutine, streamlit_server
from ui.widgets.controls import KEY as CONTROLS


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


def controls_element(value: int) -> ForwardMsg:
    """A run's settings element (ui/widgets/controls.py) as the server sends it: its id, and its data with a heading
    and the seed's control showing ``value``."""
    message = ForwardMsg()
    element = message.delta.new_element.bidi_component
    element.id, element.component_name = f"$$ID-0123abcd-{CONTROLS}", "mha_controls"
    element.json = json.dumps({"items": [{"kind": "heading", "key": "heading-0", "label": "Model"},
                                         {"kind": "number", "key": SEED_KEY, "label": "Seed", "value": value}]})
    return message


class Server:
    """A websocket that answers every BackMsg with one run: the settings element drawn with the seed the server's
    check (ui/widgets/controls.py ``accepted``) would take from the change trigger it got, then script_finished."""

    def __init__(self, seed: int, ignoring: bool = False):
        self.seed, self.ignoring, self.sent, self.replies = seed, ignoring, [], []

    async def send(self, raw: bytes) -> None:
        message = BackMsg()
        message.ParseFromString(raw)
        self.sent.append(message)
        for state in message.rerun_script.widget_states.widgets:
            (change,) = json.loads(state.json_trigger_value)
            if change["event"] == "change" and change["value"]["key"] == SEED_KEY and not self.ignoring:
                self.seed = change["value"]["value"]
        finished = ForwardMsg()
        finished.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
        self.replies = [controls_element(self.seed).SerializeToString(), finished.SerializeToString()]

    async def recv(self) -> bytes:
        return self.replies.pop(0)


def test_the_client_changes_a_setting_by_the_settings_elements_change_trigger():
    """The seed is no widget: the client finds it in the settings element's data and changes it as the element's
    JavaScript does, one ``change`` trigger ``{key, value}`` under the element's trigger id (what the "server",
    "capacity" and "messages" benches send for Seed +)."""
    client = StreamlitClient("http://127.0.0.1:1")
    client.websocket = server = Server(seed=3)
    run_coroutine(client.rerun({}))
    assert client.controls == {SEED_KEY: 3} and client.has_control(SEED_KEY) and SEED_KEY not in client.widget_ids
    run = run_coroutine(client.set_widget(SEED_KEY, 4_321))
    (state,) = server.sent[-1].rerun_script.widget_states.widgets
    assert state.id == _make_trigger_id(f"$$ID-0123abcd-{CONTROLS}", "events")
    assert json.loads(state.json_trigger_value) == [{"event": "change", "value": {"key": SEED_KEY, "value": 4_321}}]
    assert client.controls[SEED_KEY] == 4_321 and run.messages == 2


def test_a_change_the_settings_element_does_not_show_is_an_error():
    """A change the server ignored (a key it does not know, a value it does not take) times a plain rerun: the
    client says so instead."""
    client = StreamlitClient("http://127.0.0.1:1")
    client.websocket = Server(seed=3, ignoring=True)
    run_coroutine(client.rerun({}))
    with pytest.raises(RuntimeError, match="did not take w_seed=5"):
        run_coroutine(client.set_widget(SEED_KEY, 5))
    with pytest.raises(KeyError):
        run_coroutine(client.set_widget("w_no_such_control", 1))


def test_one_seed_press_on_heads_reaches_the_apps_seed_through_the_settings_element(tmp_path):
    """``python -m bench.messages heads`` on the app: its Seed + is the settings element's trigger, the server takes
    it (the client checks the element then shows the new seed), and the run's sidebar is the language's selectbox and
    Streamlit components only (the settings' one element among them), no number input."""
    with streamlit_server(tmp_path) as server:
        seen = run_coroutine(one_seed_run(server.url, "", "seed=3"))
    sidebar = collections.Counter(kind for area, kind, _size in seen if area == "sidebar")
    assert sidebar["bidi_component"] >= 2 and set(sidebar) == {"bidi_component", "selectbox"}, sidebar
    assert ("-", "script_finished") in {(area, kind) for area, kind, _size in seen}
