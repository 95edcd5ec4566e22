"""The Heads page's 'Take it apart' section and quick check in AppTest: each panel against the engine.

Expected values are computed here from the engine's trace (zeroing W_O rows, norms of v W_O), not
with ui/pages/heads/apart.py or mha_core/contributions.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from tests.address_bar import address
from tests.test_app_heads import QUIZ, app, assert_page_ok, charts, decode, messages, open_take_apart
from ui.pages.heads import quiz


def decode_1d(z) -> np.ndarray:
    """A one-dimensional plotly typed array (no shape field) back to numpy."""
    return decode({**z, "shape": "-1"}) if isinstance(z, dict) else np.asarray(z)


def rows_of(w_o: np.ndarray, head: int, hv: int) -> np.ndarray:
    return w_o[head * hv : (head + 1) * hv]


def test_contribution_panel_is_head_times_its_rows_of_w_o():
    at = open_take_apart(app())
    assert_page_ok(at)
    trace, w = run(MHAConfig()).trace, run(MHAConfig()).weights
    hv = trace.heads.shape[-1]
    at.selectbox(key="apart_head").set_value(2).run()
    z = decode(charts(at)["apart_contribution"]["data"][0]["z"])
    np.testing.assert_allclose(z, trace.heads[2] @ rows_of(w.w_o, 2, hv), atol=1e-6)
    gap_line = next(m.value for m in at.markdown if "checked now" in m.value)
    assert float(gap_line.rsplit("**", 2)[-2]) < 1e-12


@pytest.mark.parametrize("config", [MHAConfig(), MHAConfig(bias=True, n_heads=8), MHAConfig(output_projection=False)])
def test_knock_out_from_the_link_changes_the_output_as_zeroed_rows_do(config):
    from ui.state.urlstate import params_from_config

    at = app({**params_from_config(config), "knock": "0,1"})
    assert_page_ok(at)
    result = run(config)
    trace, w = result.trace, result.weights
    hv = trace.heads.shape[-1]
    concat = trace.concat.copy()
    concat[:, : 2 * hv] = 0.0  # heads 0 and 1 off
    if config.output_projection:
        knocked = concat @ w.w_o + (0.0 if w.b_o is None else w.b_o)
    else:
        knocked = concat
    expected = np.linalg.norm(knocked - trace.output, axis=-1)  # (Tq,)
    bars = charts(at)["apart_change"]["data"][0]
    np.testing.assert_allclose(decode_1d(bars["y"]), expected, atol=1e-9)
    table = next(d.value for d in at.dataframe if "‖change‖" in d.value.columns)
    np.testing.assert_allclose(table["‖change‖"].to_numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(table["‖output after knock-out‖"], np.linalg.norm(knocked, axis=-1), atol=1e-12)
    assert address(at)["knock"] == "0,1"


def test_norm_weighted_panels_are_weight_times_norm_of_v_w_o():
    at = open_take_apart(app())
    trace, w = run(MHAConfig()).trace, run(MHAConfig()).weights
    hv = trace.heads.shape[-1]
    panels = [decode(t["z"]) for t in charts(at)["apart_carried"]["data"] if "coloraxis" in t]
    assert len(panels) == trace.n_heads
    for h, z in enumerate(panels):
        norms = np.linalg.norm(trace.v[h] @ rows_of(w.w_o, h, hv), axis=-1)  # (Tk,)
        np.testing.assert_allclose(z, trace.weights[h] * norms[None, :], atol=1e-6)


def test_choosing_heads_writes_the_link_and_a_bad_link_falls_back():
    at = open_take_apart(app())
    at.pills(key="w_knock").set_value([3, 1]).run()
    assert_page_ok(at)
    assert address(at)["knock"] == "1,3"
    at = app({"knock": "2,x,9"})
    assert_page_ok(at)
    assert "not a head" in messages(at)
    assert at.session_state["w_knock"] == [2]


def test_null_key_link_gives_rows_below_one():
    at = app({"null": "1"})
    assert_page_ok(at)
    grid = [decode(t["z"]) for t in charts(at)["heads_grid"]["data"] if "coloraxis" in t]
    sums = np.array([g.sum(axis=-1) for g in grid])
    expected = run(MHAConfig(null_key=True)).trace.weights.sum(axis=-1)
    np.testing.assert_allclose(sums, expected, atol=1e-6)
    assert (expected < 1 - 1e-6).any()
    assert address(at)["null"] == "1"


def test_quiz_marks_the_engine_answer_right_and_counts():
    assert not app().radio  # the quick check is drawn only while its section is open
    at = app(opened=(QUIZ,))
    result = run(MHAConfig())
    q = quiz.question(result, 0)  # the first question is a 'largest weight' one
    assert q.kind == "largest"
    expected = result.key_labels[int(np.argmax(result.trace.weights[q.head, q.query]))]
    at.radio(key="quiz_answer_0").set_value(expected).run()
    at.button(key="quiz_check").click().run()
    assert_page_ok(at)
    assert any("**Right**" in m.value for m in at.markdown)
    assert at.session_state["quiz_score"] == [1, 1]
    at.button(key="quiz_next").click().run()
    assert at.session_state["quiz_number"] == 1


def test_an_answer_picked_but_not_checked_is_still_there_when_the_quick_check_opens_again():
    at = app(opened=(QUIZ,))
    options = at.radio(key="quiz_answer_0").options
    at.radio(key="quiz_answer_0").set_value(options[2]).run()
    at.session_state[QUIZ] = False  # the section closed, as a click on its header leaves it: the radio is not drawn
    at.run()
    assert not at.radio
    at.session_state[QUIZ] = True
    at.run()
    assert at.radio(key="quiz_answer_0").value == options[2]
