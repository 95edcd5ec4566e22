"""The address the app keeps (ui/state/address.py) and the element that puts it in the address bar
(ui/widgets/address.py), in AppTest: AppTest sends a run the query it was opened with, as the browser sends the query
of the last navigation once the app no longer writes ``st.query_params`` (stale after a widget's rerun)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from shown_charts import charts, decode
from sidebar_controls import control
from streamlit.testing.v1 import AppTest

from tests.address_bar import address

ROOT = Path(__file__).resolve().parents[1]
LINK = {"seed": "3", "heads": "2", "tokens": "the cat sat on the mat"}


def app(params: dict[str, str], page: str | None = None) -> AppTest:
    """The app opened by a link with ``params`` (on ``page``, a file under app_pages/; else Heads), run once."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    if page is not None:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def heads_matrices(at: AppTest) -> list[np.ndarray]:
    """The numbers the heads figure shows, one matrix per panel."""
    return [decode(trace["z"]) for trace in charts(at)["heads_grid"]["data"] if "coloraxis" in trace]


CHANGES = {  # a change a reader makes on Heads, and what the control then says (kind None: a setting's control)
    "seed +": (lambda at: control(at, "w_seed").increment(), ("w_seed", None, 4)),
    "heads": (lambda at: control(at, "w_heads").set_value(4), ("w_heads", None, 4)),
    "mask": (lambda at: control(at, "w_mask").set_value("causal"), ("w_mask", None, "causal")),
    "language": (lambda at: at.selectbox(key="w_lang").set_value("es"), ("w_lang", "selectbox", "es")),
    "view": (lambda at: at.button_group(key="w_view").set_value("logits"), ("w_view", "button_group", "logits")),
}


def value_shown(at: AppTest, key: str, kind: str | None):
    """The value a control shows: a setting's control through the tests' driver, a page's widget by its kind."""
    return control(at, key).value if kind is None else getattr(at, kind)(key=key).value


@pytest.mark.parametrize("change", list(CHANGES))
def test_after_a_change_the_address_element_carries_the_link_to_what_the_page_shows(change):
    act, (key, kind, value) = CHANGES[change]
    at = app(LINK)
    act(at).run()
    assert not at.exception and value_shown(at, key, kind) == value
    link = address(at)
    again = app(link)  # the address bar's link, opened in a new session
    for other_key, other_kind, _value in (spec for _act, spec in CHANGES.values()):
        assert value_shown(again, other_key, other_kind) == value_shown(at, other_key, other_kind)
    assert again.session_state["config"] == at.session_state["config"]  # the engine's configuration
    shown, reopened = heads_matrices(at), heads_matrices(again)
    assert len(shown) == len(reopened) == at.session_state["config"].n_heads
    for a, b in zip(shown, reopened, strict=True):
        np.testing.assert_array_equal(a, b)
    assert link["seed"] == str(at.session_state["config"].seed) and link["tokens"] == LINK["tokens"]


def test_seed_plus_twice_leaves_the_address_at_the_seed_the_engine_ran_with():
    at = app(LINK)
    for _i in range(2):
        control(at, "w_seed").increment().run()
    assert at.query_params["seed"] == "3"  # what the next run is sent: the link's, stale
    assert at.session_state["config"].seed == 5 and address(at)["seed"] == "5"


def test_a_rerun_with_the_same_incoming_query_keeps_the_sessions_address():
    at = app({"lesson": "wo"}, page="app_pages/lessons.py")
    picker = next(e for e in at.get("button_group") if e.proto.id.endswith("-lesson_pick"))
    picker.set_value("causal").run()
    at.run()  # another rerun: the incoming query still says lesson=wo (the link's)
    picker = next(e for e in at.get("button_group") if e.proto.id.endswith("-lesson_pick"))
    assert picker.value == "causal" and address(at)["lesson"] == "causal"


def test_a_link_on_the_same_page_is_followed():
    at = app({"lesson": "wo"}, page="app_pages/lessons.py")
    at.query_params["lesson"] = "causal"  # a link to another lesson, on the Lessons page
    at.run()
    picker = next(e for e in at.get("button_group") if e.proto.id.endswith("-lesson_pick"))
    assert picker.value == "causal" and address(at)["lesson"] == "causal"
    at.query_params["lesson"] = "wo"  # and back: the link is news again
    at.run()
    picker = next(e for e in at.get("button_group") if e.proto.id.endswith("-lesson_pick"))
    assert picker.value == "wo" and address(at)["lesson"] == "wo"
