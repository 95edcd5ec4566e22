"""The static pack's Step by step pages follow the link's ``nums`` as the app's page does: auto prints each cell's
number for sentences of up to six tokens (and pack.js leaves them out on a phone, as the app does), 1 always,
0 never; the page says which it uses. Each printed number is the engine's array, written with two decimals
(never -0.00, blank for a masked logit), and for every case the pack prints numbers exactly where the app's page,
opened with the same link in AppTest, does."""

from __future__ import annotations

from urllib.parse import parse_qsl

import numpy as np
import pytest

from deploy import static_pack
from mha_core.config import run
from tests.app_opener import open_app
from tests.shown_charts import chart_elements, figure_of
from ui.state.urlstate import config_from_params

FOUR, EIGHT = "a+b+c+d", "the+cat+sat+on+the+mat+and+slept"
CASES = [  # (query, numbers printed, the page's sentence starts)
    (f"tokens={FOUR}&mask=causal", True, "Numbers in the cells: auto, printed for sentences of up to 6 tokens (this "
                                         "one has 4)"),
    (f"tokens={EIGHT}", False, "Numbers in the cells: auto, left out for sentences of more than 6 tokens (this one "
                               "has 8)"),
    (f"tokens={EIGHT}&mask=causal&nums=1", True, "Numbers in the cells: on (nums=1 in the link)"),
    (f"tokens={FOUR}&nums=0", False, "Numbers in the cells: off (nums=0 in the link)"),
]


def written(matrix: np.ndarray) -> list[list[str]]:
    """The engine's numbers as a cell prints them: two decimals, never -0.00, blank where not finite."""
    def text(v: float) -> str:
        if not np.isfinite(v):
            return ""
        out = f"{v:.2f}"
        return "0.00" if out == "-0.00" else out
    return [[text(v) for v in row] for row in np.asarray(matrix, dtype=np.float64)]


def engine_arrays(query: str) -> dict[str, np.ndarray]:
    config, messages = config_from_params(dict(parse_qsl(query)))
    assert not messages
    trace = run(config).trace
    return {"scores": trace.scores[0], "logits": trace.logits[0], "weights": trace.weights[0],
            "head": trace.heads[0]}


@pytest.mark.parametrize(("query", "printed", "said"), CASES, ids=["auto-4", "auto-8", "on-8", "off-4"])
def test_the_packs_cells_follow_nums_with_the_engines_numbers(query, printed, said):
    page = static_pack.link_page(1, f"step_by_step?{query}", "")
    assert said in page.sections[0].text
    found = 0
    for name, array in engine_arrays(query).items():
        panel = next(p for p in page.panels if p.values.shape == array.shape and np.array_equal(
            np.where(np.isfinite(p.values), p.values, 0), np.where(np.isfinite(array), array, 0)))
        trace = panel.figure["data"][0]
        if printed:
            assert trace["text"] == written(array), name
            assert panel.figure.get("phone_numbers", True) is ("nums=" in query)  # auto: none on a phone
            found += 1
        else:
            assert "text" not in trace and "texttemplate" not in trace, name
    assert found == (4 if printed else 0)
    masks = [p for p in page.panels if p.title.startswith("M:")]
    assert all("text" in p.figure["data"][0] for p in masks)  # a mask's ✓/✗ is its key, whatever nums says


@pytest.mark.parametrize(("query", "printed", "said"), CASES, ids=["auto-4", "auto-8", "on-8", "off-4"])
def test_the_pack_prints_numbers_where_the_apps_page_does(query, printed, said):
    at = open_app("app_pages/step_by_step.py", **dict(parse_qsl(query)))
    traces = [trace for element in chart_elements(at) for trace in figure_of(element)["data"]
              if trace.get("type") == "heatmap" and trace.get("colorscale") != "mask"]
    texts = [t for t in traces if "text" in t and not any("✓" in str(c) for c in t["text"][0])]
    assert bool(texts) is printed


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
def test_the_sentence_in_other_languages_with_the_same_numbers(lang):
    from ui.i18n import _ as translate
    from ui.i18n import using_language

    query = CASES[0][0]
    english = static_pack.link_page(1, f"step_by_step?{query}", "")
    with using_language(lang):
        there = static_pack.link_page(1, f"step_by_step?{query}", "")
        said = translate("Numbers in the cells: auto, printed for sentences of up to {n} tokens (this one has {t}); a "
                         "phone leaves them out, as the app does.").format(n=6, t=4)
    assert "Numbers in the cells" not in said and said in there.sections[0].text
    assert [p.figure["data"][0].get("text") for p in there.panels] == \
        [p.figure["data"][0].get("text") for p in english.panels]
