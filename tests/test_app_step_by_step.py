
"""AppTest of the Step-by-step page: it renders, follows the settings, and its numbers are the engine's."""

import base64
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shown_charts
from shown_steps import FORMULA, step_anchors, step_formulas, step_texts, step_titles
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from tests.address_bar import address
from tests.sidebar_controls import control
from ui.pipeline.drill_down import NULL_KEY_LABEL, SUM_ROW
from ui.pipeline.records import latex_number
from ui.pipeline.steps import NULL_SHARE_COLUMN

ROOT = Path(__file__).resolve().parents[1]
PAGE = "app_pages/step_by_step.py"
EXACT = 1e-12
N_STEPS = 11


def open_page(**params) -> AppTest:
    """The app opened on the Step-by-step page, with ``params`` as the link's query parameters."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    for name, value in params.items():
        at.query_params[name] = str(value)
    at.switch_page(PAGE).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def open_drill_down(at: AppTest) -> AppTest:
    """Open the drill-down section (drawn only while open), as a click on its header does."""
    at.session_state["sbs_drill_open"] = True
    return at.run()


def test_the_drill_down_is_drawn_only_once_opened_or_named_by_the_link():
    closed = open_page()
    assert "w_kj" not in [s.key for s in closed.selectbox]  # closed: its cell picker was never sent
    assert not any(SUM_ROW in f.value.index for f in closed.dataframe)
    named = open_page(qi=2, kj=1)  # a link to a cell opens the section on that cell
    assert table_with_index(named, SUM_ROW) is not None
    assert (named.selectbox(key="w_qi").value, named.selectbox(key="w_kj").value) == (2, 1)
    opened = open_drill_down(open_page())
    assert table_with_index(opened, SUM_ROW) is not None


def test_a_link_to_a_cell_that_arrives_later_in_the_session_opens_the_drill_down():
    at = open_page()  # closed: no cell named
    assert "w_kj" not in [s.key for s in at.selectbox]
    at.switch_page("app_pages/heads.py").run()
    at.query_params.update(address(at))  # a lesson's link carries the settings (explorer_params) ...
    at.query_params["qi"], at.query_params["kj"] = "2", "1"  # ... and a cell, in the same session
    at.switch_page(PAGE).run()
    assert not at.exception
    assert table_with_index(at, SUM_ROW) is not None
    assert (at.selectbox(key="w_qi").value, at.selectbox(key="w_kj").value) == (2, 1)


def charts(at: AppTest) -> dict[str, dict]:
    """Every matrix on the page as a figure of its own, by its title (a row of panels drawn as one chart is split)."""
    views = {}
    for chart in shown_charts.chart_elements(at):
        views.update(panel_views(shown_charts.figure_of(chart)))
    return views


def panel_views(figure: dict) -> dict[str, dict]:
    """One figure per panel: a single heatmap as it is; a row of panels (``ui.pipeline.panels.panels_figure``) split
    into each trace with its own axes, outlines and the title written over its axes."""
    layout = figure["layout"]
    if "title" in layout:
        return {layout["title"]["text"]: figure}
    views = {}
    for index, title in enumerate(layout["annotations"]):  # a run of steps numbers its panels: keyed without it
        suffix = "" if index == 0 else str(index + 1)
        xaxis, yaxis = layout[f"xaxis{suffix}"], layout[f"yaxis{suffix}"]
        traces = [trace for trace in figure["data"] if trace["xaxis"] == f"x{suffix}"]  # the panel, then its grey layer
        assert traces and all(trace["yaxis"] == f"y{suffix}" for trace in traces)
        assert xaxis["domain"][0] < title["x"] < xaxis["domain"][1]  # the title stands over this panel
        shapes = [shape for shape in layout.get("shapes", []) if shape["xref"] == f"x{suffix}"]
        assert all(shape["yref"] == f"y{suffix}" for shape in shapes)
        name = re.sub(r"^\d+\. ", "", title["text"])  # "6. S_0 × scale" (test_app_step_by_step_run_titles)
        views[name] = {"data": traces, "layout": {**layout, "xaxis": xaxis, "yaxis": yaxis,
                                                  "shapes": shapes, "title": {"text": name}}}
    return views


def z_of(figure: dict) -> np.ndarray:
    z = figure["data"][0]["z"]
    if isinstance(z, dict):  # plotly 7 sends numpy arrays as base64
        shape = tuple(int(n) for n in str(z["shape"]).split(","))  # "6, 6"
        return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape).astype(float)
    return np.array(z, dtype=float)


def table_with_index(at: AppTest, label: str, column: str | None = None):
    """The first dataframe on the page whose index contains ``label`` (and that has ``column``)."""
    for frame in at.dataframe:
        if label in frame.value.index and (column is None or column in frame.value.columns):
            return frame.value
    raise AssertionError(f"no table with a row {label!r} and a column {column!r}")


def row_sums_shown(at: AppTest) -> pd.DataFrame:
    """The row sums beside the weights as the page writes them (one markdown: its heading, then a table): the query
    labels as the index, each number as printed, "yes" / "no" as booleans."""
    text = next(m.value for m in at.markdown if m.value.startswith("**Row sums**"))
    lines = [line for line in text.splitlines() if line.startswith("|")]
    cells = [[cell.strip().strip("`") for cell in line.strip("|").split(" | ")] for line in lines]
    header, rows = cells[0], cells[2:]
    assert set(lines[1].strip("|").split("|")) == {"---"}, lines[1]  # a table's rule: the rows below it are cells
    frame = pd.DataFrame([row[1:] for row in rows], index=pd.Index([row[0] for row in rows], name=header[0]),
                         columns=header[1:])
    return frame.apply(lambda column: column.map({"yes": True, "no": False}) if column.isin(["yes", "no"]).all()
                       else column.astype(float))


def markdown_text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_default_settings_render_every_step_with_its_formula_shapes_and_matrix():
    at = open_page()
    config = MHAConfig()
    titles = step_titles(at)
    assert len(titles) == N_STEPS and titles[0].startswith("1.") and titles[-1].startswith(f"{N_STEPS}.")
    assert len(step_formulas(at)) >= N_STEPS - 1  # every step but the switched-off positional encoding
    t, c = len(config.tokens), config.d_model
    assert f"Q: ({t}, {c}) @ ({c}, {c}) -> ({t}, {c})" in markdown_text(at)
    figures = charts(at)
    assert {"W_Q", "W_K", "W_V", "W_O", "Q (queries)", "Y: output"} <= set(figures)
    assert "Positional encoding is off" in markdown_text(at)


def test_the_weights_heatmap_is_the_engines_for_the_chosen_head():
    at = open_page()
    control(at, "w_head").set_value(2).run()
    figures = charts(at)
    weights = z_of(figures["A_2 = softmax(L_2) (attention weights)"])
    np.testing.assert_allclose(weights, run(MHAConfig()).trace.weights[2], atol=1e-6)  # sent as float32
    assert "head 2 takes columns 8..11" in markdown_text(at)


def test_positional_encoding_on_shows_p_and_x():
    figures = charts(open_page(pe=1))
    assert {"P: positional encoding", "X = E + P"} <= set(figures)


def test_cross_attention_labels_rows_by_queries_and_columns_by_keys():
    at = open_page(tokens="the cat sat", kv_tokens="a big dog ran")
    figures = charts(at)
    scores = figures["S_0 = Q_0 K_0ᵀ (raw scores)"]
    assert list(scores["data"][0]["y"]) == ["0:the", "1:cat", "2:sat"]
    assert list(scores["data"][0]["x"]) == ["0:a", "1:big", "2:dog", "3:ran"]
    assert list(figures["K (keys)"]["data"][0]["y"]) == ["0:a", "1:big", "2:dog", "3:ran"]
    assert {"E_q: query sentence", "E_kv: key/value sentence"} <= set(figures)


def test_causal_mask_blanks_the_logits_and_the_drill_down_on_a_masked_cell_says_so():
    at = open_page(mask="causal", qi=1, kj=3)
    logits = z_of(charts(at)["L_0: logits, masked cells blank"])
    upper = np.triu(np.ones_like(logits, dtype=bool), k=1)
    assert np.all(np.isnan(logits[upper])) and not np.any(np.isnan(logits[~upper]))
    assert "Mask: **masked**" in markdown_text(at)
    softmax_row = table_with_index(at, "3:on", "weight")
    assert softmax_row.loc["3:on", "weight"] == 0.0
    assert np.isneginf(table_with_index(at, SUM_ROW).loc["logit after the mask", "value"])


def test_without_w_o_the_output_step_says_so_and_draws_no_w_o():
    at = open_page(wo=0)
    assert "W_O is off" in markdown_text(at)
    assert "W_O" not in charts(at)


@pytest.mark.parametrize("head,i,j", [(2, 4, 1), (3, 0, 5)])
def test_drill_down_sum_equals_the_engines_score(head, i, j):
    at = open_drill_down(open_page(seed=3))
    control(at, "w_head").set_value(head).run()
    at.selectbox(key="w_qi").select(i).run()
    at.selectbox(key="w_kj").select(j).run()
    shown = table_with_index(at, SUM_ROW).loc[SUM_ROW, "value"]
    expected = run(MHAConfig(seed=3)).trace.scores[head, i, j]
    assert abs(shown - expected) <= EXACT
    assert any(f"S_{{{i},{j}}}" in latex.value for latex in at.latex)


def test_numbers_instead_of_heatmaps_shows_tables_with_the_engines_values():
    at = open_page()
    control(at, "w_sbs_table").set_value(True).run()
    assert not at.exception
    assert len(shown_charts.chart_elements(at)) == 0
    scores = run(MHAConfig()).trace.scores[0]
    shown = [f.value for f in at.dataframe if f.value.shape == scores.shape]
    assert any(np.allclose(frame.to_numpy(dtype=float), scores, atol=EXACT) for frame in shown)


def test_predict_then_reveal_hides_the_weights_until_revealed_and_judges_the_guess():
    at = open_page(mask="causal")
    weights = run(MHAConfig(mask="causal")).trace.weights[0]
    title = "A_0 = softmax(L_0) (attention weights)"
    control(at, "w_sbs_predict").set_value(True).run()
    assert title not in charts(at)
    assert any("are hidden until you press" in i.value for i in at.info)

    row = 4
    best = int(np.argmax(weights[row]))
    wrong = (best + 1) % weights.shape[1]
    at.selectbox(key="w_guess_q").select(row).run()
    at.selectbox(key="w_guess_k").select(best).run()
    at.button(key="sbs_reveal").click().run()
    assert title in charts(at)
    assert at.success and at.success[0].value.startswith("**Right!**")

    at.selectbox(key="w_guess_k").select(wrong).run()  # a new guess hides the answer again
    assert title not in charts(at)
    at.button(key="sbs_reveal").click().run()
    message = at.warning[0].value
    labels = MHAConfig().tokens
    assert message.startswith("**Not this time.**") and f"`{best}:{labels[best]}`" in message


def test_a_fully_masked_row_is_flagged_with_the_policy():
    at = open_page(mask="padding", valid_len=0)
    assert any("all masked" in w.value or "every key masked" in w.value for w in at.warning)
    sums = row_sums_shown(at)
    assert list(sums.index) == [f"{i}:{t}" for i, t in enumerate(MHAConfig().tokens)]
    assert sums["all masked"].all() and (sums["sum"] == 0).all()


def test_presentation_mode_enlarges_the_text_of_every_figure():
    normal, presenting = charts(open_page()), charts(open_page(present=1))
    assert set(presenting) == set(normal)
    for title, figure in presenting.items():
        layout, before = figure["layout"], normal[title]["layout"]
        assert layout["font"]["size"] > before["font"]["size"], title
        assert layout["xaxis"]["tickfont"]["size"] > before["xaxis"]["tickfont"]["size"], title


def test_matrices_three_across_print_only_the_column_labels_that_fit_their_column():
    figures = charts(open_page(d_model=32))
    half = figures["Y: output"]  # two panels in the output step: half the width each
    third = figures["W_Q"]  # three panels in the projection step: a third each
    labels = [f"d{k}" for k in range(32)]
    for figure in (half, third):
        assert list(figure["data"][0]["x"]) == labels  # every column keeps its cell
        assert figure["layout"]["xaxis"]["tickvals"][0] == "d0"
    assert len(third["layout"]["xaxis"]["tickvals"]) < len(half["layout"]["xaxis"]["tickvals"]) < 32


def test_the_null_key_link_shows_the_engines_weights_and_the_null_keys_share_in_the_drill_down():
    """step_by_step?null=1&qi=2&kj=1 (issue 20): the drill-down's numbers are softmax₁'s, the engine's."""
    at = open_page(null=1, qi=2, kj=1)
    weights = run(MHAConfig(null_key=True)).trace.weights  # (nh, Tq, Tk)
    row, null_share = weights[0, 2], 1 - weights[0, 2].sum()  # head 0 (the default), query 2
    assert null_share > 0.1  # the null key takes a visible share: forgetting it shows
    softmax_row = table_with_index(at, NULL_KEY_LABEL, "weight")
    np.testing.assert_allclose(softmax_row["weight"].iloc[:-1], row, atol=EXACT)
    assert abs(softmax_row.loc[NULL_KEY_LABEL, "weight"] - null_share) <= EXACT
    assert softmax_row.loc[NULL_KEY_LABEL, "logit"] == 0.0
    formulas = [latex.value for latex in at.latex]
    cell = next(f for f in formulas if r"A_{2,1} = \frac" in f)
    assert cell.rstrip("$\n ").endswith(f"= {latex_number(row[1])}")  # 0.0157, not the old 0.0192
    assert r"e^{0 - m_{2}} + \sum_k" in cell
    assert any(f"= {latex_number(null_share)}," in f for f in formulas if r"A_{2,\varnothing}" in f)
    assert f"1 − Σ = {null_share:.4f}" in markdown_text(at)
    sums = row_sums_shown(at)  # printed with six decimals: the engine's sums, rounded
    assert not sums["all masked"].any() and "2:sat" in sums.index
    np.testing.assert_allclose(sums[NULL_SHARE_COLUMN], 1 - weights[0].sum(axis=-1), atol=5e-7)
    np.testing.assert_allclose(sums["sum"], weights[0].sum(axis=-1), atol=5e-7)


def softmax_step_text(at: AppTest) -> tuple[str, str]:
    """The softmax step's "why" (the markdown after its heading) and its formula (the first A_ij formula)."""
    titles = step_titles(at)
    assert any("Softmax" in t for t in titles)
    text = step_texts(at)[step_anchors(at).index("softmax")]
    why = text.split("\n\n")[1]
    assert why.startswith("Each row is turned into weights")
    formula = next(f for f in FORMULA.findall(text) if r"A_{ij} = \frac" in f)
    return why, formula.strip()


@pytest.mark.parametrize("null", [0, 1])
def test_the_softmax_step_says_rows_sum_to_1_only_without_the_null_key(null):
    at = open_page(null=null)
    why, formula = softmax_step_text(at)
    sums = run(MHAConfig(null_key=bool(null))).trace.weights[0].sum(axis=-1)  # (Tq,)
    if null:
        assert np.all(sums < 1 - 1e-3)  # the engine's rows do not sum to 1 ...
        assert "sum to 1**" not in why and "less than 1" in why  # ... and the page does not say they do
        assert not formula.endswith(r"\sum_j A_{ij} = 1") and formula.endswith("< 1")
        assert "e^{0 - m_i}" in formula
        assert "null key takes the rest" in markdown_text(at)
    else:
        np.testing.assert_allclose(sums, 1.0, atol=EXACT)
        assert "**sum to 1**" in why and formula.endswith(r"\sum_j A_{ij} = 1")
        assert "null key" not in markdown_text(at)


def test_four_panels_stand_two_by_two_never_one_alone():
    # A differential head's step 5 has four maps (L₁, L₂, A₁, A₂): three in a row and the fourth alone drew the
    # fourth squeezed into a third of the width. Two rows of two keep every panel's cells the same size.
    # Issue 38: the step is one chart, its two rows of two one under the other.
    at = open_page(kernel="differential")
    layout = shown_charts.charts(at)["sbs_diff_maps_rows"]["layout"]
    axes = [("", "2"), ("3", "4")]  # panel i on axes x{i+1}: the rows' panels
    assert sorted(name for name in layout if name.startswith("xaxis")) == ["xaxis", "xaxis2", "xaxis3", "xaxis4"]
    for row in axes:
        assert [layout[f"yaxis{s}"]["domain"] for s in row] == [layout[f"yaxis{row[0]}"]["domain"]] * 2  # side by side
        widths = [layout[f"xaxis{s}"]["domain"][1] - layout[f"xaxis{s}"]["domain"][0] for s in row]
        assert abs(widths[0] - widths[1]) < 1e-9 and widths[0] > 0.4  # each half the width, never a third
    assert layout["yaxis3"]["domain"][1] < layout["yaxis"]["domain"][0]  # the second row under the first
    titles = [a["text"] for a in layout["annotations"]]
    assert [t.split(" = ")[0] for t in titles] == ["L₁", "L₂", "A₁", "A₂"], titles
