"""Step by step with fewer graphs (issue 38): steps whose charts follow one another are ONE figure of rows of panels,
each panel still the engine's array on its own axes under its own title; and the numbers in the cells (``nums``)
printed only when the reader asks, or by default for sentences of up to six tokens."""

from __future__ import annotations

import numpy as np
import pytest
import shown_charts
from app_opener import open_app
from test_app_step_by_step import panel_views

from mha_core.attention import merge_heads
from mha_core.config import MHAConfig, run
from tests.sidebar_controls import control
from ui.state.settings import NUMBERS_LABELS, NUMBERS_MAX_TOKENS, numbers_shown

PAGE = "app_pages/step_by_step.py"
EIGHT = "the cat sat on the mat and slept"  # more than NUMBERS_MAX_TOKENS: auto prints no numbers


def engine_arrays(config: MHAConfig, head: int) -> dict[str, np.ndarray]:
    """What each panel title claims to show, straight from the engine's run (never from a step builder)."""
    result = run(config)
    trace, w = result.trace, result.weights
    h = head
    arrays = {
        "E: token embeddings": result.embeddings,
        "W_Q": w.w_q, "W_K": w.w_k, "W_V": w.w_v, "W_O": w.w_o,
        "Q (queries)": merge_heads(trace.projected_q), "K (keys)": merge_heads(trace.projected_k),
        "V (values)": merge_heads(trace.v),
        f"Q_{h}": trace.projected_q[h], f"K_{h}": trace.projected_k[h], f"V_{h}": trace.v[h],
        f"S_{h} = Q_{h} K_{h}ᵀ (raw scores)": trace.scores[h],
        f"S_{h} × scale": trace.scores[h] * trace.scale,
        f"L_{h}: logits, masked cells blank": trace.logits[h],
        f"A_{h} = softmax(L_{h}) (attention weights)": trace.weights[h],
        f"head_{h} = A_{h} V_{h}": trace.heads[h],
        "concat of all heads": trace.concat,
        "Y: output": trace.output,
    }
    if result.mask is not None:
        arrays["M: mask (1 = may attend)"] = result.mask.astype(float)
    return arrays


def combined(at) -> dict[str, dict]:
    """The page's charts that hold more than one panel, by key."""
    return {key: figure for key, figure in shown_charts.charts(at).items()
            if len(figure["layout"].get("annotations", ())) > 1}


def cell_texts(matrix: np.ndarray) -> list[list[str]]:
    """The engine's numbers as a cell prints them: two decimals, never -0.00, blank where not finite."""
    def text(v: float) -> str:
        if not np.isfinite(v):
            return ""
        written = f"{v:.2f}"
        return written[1:] if written == "-0.00" else written
    return [[text(v) for v in row] for row in matrix]


@pytest.mark.parametrize("params, head", [({}, 0), ({"mask": "causal", "w_head": 2}, 2)])
def test_every_panel_of_every_combined_chart_is_the_engines_array(params, head):
    link = {k: v for k, v in params.items() if k != "w_head"}
    at = open_app(PAGE, **link, seed=3)
    if head:
        control(at, "w_head").set_value(head).run()
    config = MHAConfig(seed=3, mask=link.get("mask", "none"))
    expected = engine_arrays(config, head)
    figures = combined(at)
    assert len(shown_charts.chart_elements(at)) <= 7  # 11 charts before issue 38
    assert {"sbs_qkv_rows", "sbs_split_rows", "sbs_mix_concat_rows", "sbs_output_rows"} <= set(figures)
    assert any(key.startswith("sbs_scores_scale") for key in figures)
    seen = set()
    for key, figure in figures.items():
        for title, view in panel_views(figure).items():
            assert title in expected, f"{key}: a panel {title!r} with no engine array named in this test"
            shown = shown_charts.decode(view["data"][0]["z"]).astype(float)
            want = expected[title]
            assert shown.shape == want.shape, title
            finite = np.isfinite(want)
            np.testing.assert_allclose(shown[finite], want[finite], atol=1e-5, err_msg=title)  # float32 on the wire
            assert np.isnan(shown[~finite]).all(), title  # a masked logit is blank, not a number
            seen.add(title)
        rows_share_a_colour_bar(figure)
    for element in shown_charts.chart_elements(at):  # each combined chart: every panel named in its alt, an SVG camera
        key, settings = shown_charts.key_of(element), shown_charts.settings_of(element)
        if key in figures:
            titles = [note["text"] for note in figures[key]["layout"]["annotations"]]
            assert all(title in settings["alt"] for title in titles), (key, settings["alt"])
            assert settings["config"]["toImageButtonOptions"]["format"] == "svg", key
    wanted = {"W_Q", "W_K", "W_V", "Q (queries)", f"Q_{head}", f"S_{head} × scale", "concat of all heads", "W_O",
              "Y: output"}
    if link.get("mask"):
        wanted |= {"M: mask (1 = may attend)", f"L_{head}: logits, masked cells blank"}
    assert wanted <= seen, wanted - seen


def rows_share_a_colour_bar(figure: dict) -> None:
    """Every panel on a shared colour axis lies inside its range (no cell clipped to the end of the bar), and a
    signed axis is centred on 0."""
    layout = figure["layout"]
    for trace in figure["data"]:
        if trace.get("type") != "heatmap" or "coloraxis" not in trace:
            continue
        axis = layout[trace["coloraxis"]]
        z = shown_charts.decode(trace["z"]).astype(float)
        z = z[np.isfinite(z)]
        assert axis["cmin"] <= z.min() + 1e-6 and z.max() - 1e-6 <= axis["cmax"], (trace["coloraxis"], axis)
        if "cmid" in axis:
            assert axis["cmid"] == 0.0 and abs(axis["cmin"] + axis["cmax"]) < 1e-9


def texts(at) -> dict[str, list]:
    """Each panel's printed cell text by title (None: the panel prints no numbers)."""
    found = {}
    for figure in shown_charts.charts(at).values():
        for title, view in panel_views(figure).items():
            found[title] = view["data"][0].get("text")
    return found


@pytest.mark.parametrize("tokens, nums, shown", [
    (None, None, True),  # the default sentence has 6 tokens: auto prints them
    (EIGHT, None, False),  # an old link without nums, 8 tokens: auto prints none
    (EIGHT, "1", True),
    (None, "0", False),
])
def test_cell_numbers_are_the_engines_when_on_and_absent_when_off(tokens, nums, shown):
    params = {"d_model": 8, "heads": 2, "seed": 3, **({"tokens": tokens} if tokens else {}),
              **({"nums": nums} if nums else {})}
    at = open_app(PAGE, **params)
    config = MHAConfig(d_model=8, n_heads=2, seed=3, **({"tokens": tuple(tokens.split())} if tokens else {}))
    expected = engine_arrays(config, 0)
    printed = texts(at)
    assert set(printed) <= set(expected)
    if not shown:
        assert all(text is None for text in printed.values()), [t for t, text in printed.items() if text]
        return
    assert len([t for t, text in printed.items() if text]) >= 12  # every matrix of 8 columns or fewer
    for title, text in printed.items():
        if text is not None:
            assert text == cell_texts(expected[title]), title


def test_a_bad_nums_value_says_so_and_falls_back_to_auto():
    at = open_app(PAGE, nums="7", seed=3)
    assert any("`nums=7`" in w.value for w in at.warning), [w.value for w in at.warning]
    assert control(at, "w_nums").value == "auto"


def test_auto_means_up_to_six_tokens_and_never_on_a_phone():
    assert str(NUMBERS_MAX_TOKENS) in NUMBERS_LABELS["auto"]  # the label says the rule
    assert numbers_shown("auto", NUMBERS_MAX_TOKENS, phone=False)
    assert not numbers_shown("auto", NUMBERS_MAX_TOKENS + 1, phone=False)
    assert not numbers_shown("auto", 3, phone=True)
    assert numbers_shown("1", 64, phone=True) and not numbers_shown("0", 3, phone=False)
