
"""AppTest: in cross-attention the Step-by-step drill-down offers every key and shows the engine's number.

With more keys than queries (and with fewer), a key or query index bounded by the other sentence's
length would be reset, or cut, and the drill-down would explain another cell than the one chosen.
"""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from mha_core.inputs import token_labels, tokenize
from tests.sidebar_controls import control
from ui.pipeline.drill_down import SUM_ROW

ROOT = Path(__file__).resolve().parents[1]
EXACT = 1e-12


@pytest.mark.parametrize(
    ("tokens", "kv_tokens"),
    [("the cat sat", "a big dog ran far away"), ("the cat sat on the mat", "a dog")],
    ids=["more keys than queries", "fewer keys than queries"],
)
def test_the_drill_down_follows_any_chosen_query_and_key(tokens, kv_tokens):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params.update(tokens=tokens, kv_tokens=kv_tokens, seed="5")
    at.switch_page("app_pages/step_by_step.py").run()
    at.session_state["sbs_drill_open"] = True  # the drill-down is drawn only while open, as a click opens it
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    config = MHAConfig(tokens=tokenize(tokens), kv_tokens=tokenize(kv_tokens), seed=5)
    scores = run(config).trace.scores  # (nh, Tq, Tk)
    tq, tk = len(config.tokens), len(config.key_tokens)
    assert at.selectbox(key="w_kj").options == token_labels(config.key_tokens)
    assert at.selectbox(key="w_qi").options == token_labels(config.tokens)
    head = 1
    control(at, "w_head").set_value(head).run()
    for i, j in [(tq - 1, tk - 1), (0, tk - 1), (tq - 1, 0)]:
        at.selectbox(key="w_qi").select(i).run()
        at.selectbox(key="w_kj").select(j).run()
        assert (at.selectbox(key="w_qi").value, at.selectbox(key="w_kj").value) == (i, j)
        shown = next(f.value for f in at.dataframe if SUM_ROW in f.value.index).loc[SUM_ROW, "value"]
        assert abs(shown - scores[head, i, j]) <= EXACT, (i, j)
        assert any(f"S_{{{i},{j}}}" in latex.value for latex in at.latex)
