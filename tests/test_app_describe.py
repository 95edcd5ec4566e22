"""The Heads page's "Describe this chart": its sentences give the numbers of the figure drawn above them.

The figure's matrices are read from the chart the browser gets (``proto.spec``); the strongest cell of each
panel is found here with argmax over them and compared with the number in the sentence.
"""

from __future__ import annotations

import re

import numpy as np
from streamlit.testing.v1 import AppTest

from tests.test_app_heads import ROOT, charts, decode

NUMBER = re.compile(r"-?\d+\.\d+")


def heads_page(params: dict[str, str]) -> AppTest:
    """The Heads page of ``params``, with "Describe this chart" opened (it is written only while open)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    at.session_state["heads_describe"] = True
    return at.run()


def described(at: AppTest) -> list[str]:
    """The bullet lines of the "Describe this chart" expander."""
    box = next(e for e in at.expander if e.label == "Describe this chart")
    return [line[2:] for line in box.markdown[0].value.splitlines()]


def test_each_head_sentence_gives_the_strongest_weight_the_figure_draws():
    at = heads_page({"mask": "causal", "heads": "4"})
    assert not at.exception
    panels = [(decode(t["z"]), t["hovertemplate"]) for t in charts(at)["heads_grid"]["data"] if "coloraxis" in t]
    lines = described(at)
    assert lines[0].startswith("Heatmap of the weight, 4 panels")
    assert len(lines) == 1 + len(panels) == 5
    for h, (z, _) in enumerate(panels):
        i, j = np.unravel_index(np.nanargmax(z), z.shape)  # masked cells are blank (NaN) in the figure
        strongest = float(NUMBER.findall(lines[1 + h].split("strongest ")[1])[0])
        assert abs(strongest - z[i, j]) <= 0.005, lines[1 + h]
        assert lines[1 + h].startswith(f"head {h}:")
        assert "15 of 36 cells masked" in lines[1 + h]  # the causal mask on the default six tokens


def test_signed_view_is_described_with_both_extremes():
    at = heads_page({"view": "logits"})
    assert not at.exception
    z = [decode(t["z"]) for t in charts(at)["heads_grid"]["data"] if "coloraxis" in t][0]
    line = described(at)[1]
    high = float(NUMBER.findall(line.split("largest positive ")[1])[0])
    low = float(NUMBER.findall(line.split("most negative ")[1])[0])
    assert abs(high - np.nanmax(z)) <= 0.005 and abs(low - np.nanmin(z)) <= 0.005
