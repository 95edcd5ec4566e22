"""The Step-by-step page's pure step builders: shapes, steps, panel figures and tables, About helpers."""

import numpy as np
import pytest

import mha_core
from mha_core.config import MHAConfig, run
from ui.pages.about import glossary_rows
from ui.pipeline.panels import cell_text, panel_figure, panel_table
from ui.pipeline.predict import check_prediction, prediction_message
from ui.pipeline.records import Panel, dim_labels, head_block, matmul_shapes, shape_text, step_inputs
from ui.pipeline.steps import build_steps, row_sums_table, scale_latex

EXACT = 1e-12  # float64 sums of a handful of terms, recomputed in another order
SLUGS = ["input", "positional", "qkv", "split", "scores", "scale", "mask", "softmax", "mix", "concat", "output"]


def steps_by_slug(result, head=0, cell=None):
    return {step.slug: step for step in build_steps(step_inputs(result), head, cell)}


def panel(step, title_start):
    matches = [p for p in step.panels if p.title.startswith(title_start)]
    assert len(matches) == 1, [p.title for p in step.panels]
    return matches[0]


# ---- shapes and labels ---------------------------------------------------------------------


def test_shape_text_and_matmul_shapes_name_the_operands_and_the_product():
    a, b = np.zeros((6, 16)), np.zeros((16, 8))
    assert shape_text(a) == "(6, 16)"
    assert matmul_shapes(a, b) == "(6, 16) @ (16, 8) -> (6, 8)"
    assert matmul_shapes(np.zeros((3, 5, 2)), np.zeros((2, 7))) == "(3, 5, 2) @ (2, 7) -> (3, 5, 7)"


def test_head_block_and_dim_labels_number_columns_as_in_the_full_matrix():
    assert head_block(2, 4) == (8, 12)
    assert dim_labels(3, 8) == ["d8", "d9", "d10"]


# ---- the steps -----------------------------------------------------------------------------


def test_steps_come_in_the_order_of_the_maths():
    assert [s.slug for s in build_steps(step_inputs(run(MHAConfig())), 0)] == SLUGS


@pytest.mark.parametrize(
    "config",
    [
        MHAConfig(),
        MHAConfig(kv_tokens=("a", "dog", "ran"), pe="sinusoidal", bias=True),
        MHAConfig(d_model=12, n_heads=3, mask="causal", output_projection=False),
    ],
    ids=["default", "cross+pe+bias", "causal-no-wo"],
)
def test_every_panel_has_one_label_per_row_and_column_and_a_formula(config):
    for step in build_steps(step_inputs(run(config)), head=config.n_heads - 1):
        switched_off = step.slug == "positional" and config.pe != "sinusoidal"
        assert switched_off or (step.formula and step.shapes and step.why)
        for p in step.panels:
            assert p.matrix.shape == (len(p.row_labels), len(p.col_labels)), (step.slug, p.title)


def test_split_panels_are_the_chosen_heads_column_block_of_x_times_w():
    config = MHAConfig(d_model=12, n_heads=3, seed=5)
    result = run(config)
    head, hs = 1, 4
    steps = steps_by_slug(result, head)
    q_full = result.x_q @ result.weights.w_q  # (T, C) computed here, not by the engine
    np.testing.assert_allclose(panel(steps["split"], "Q_1").matrix, q_full[:, hs * head : hs * (head + 1)], atol=EXACT)
    assert "columns 4..7" in steps["split"].shapes
    assert panel(steps["qkv"], "W_Q").block == (4, 8)


def test_cross_attention_labels_queries_and_keys_from_their_own_sentences():
    config = MHAConfig(tokens=("the", "cat", "sat"), kv_tokens=("a", "big", "dog", "ran"))
    result = run(config)
    steps = steps_by_slug(result)
    assert len(steps["input"].panels) == 2
    assert panel(steps["qkv"], "Q").row_labels == ["0:the", "1:cat", "2:sat"]
    assert panel(steps["qkv"], "K").row_labels == ["0:a", "1:big", "2:dog", "3:ran"]
    scores = panel(steps["scores"], "S_0")
    assert (scores.row_labels, scores.col_labels) == (result.query_labels, result.key_labels)
    assert scores.matrix.shape == (3, 4)
    assert matmul_shapes(np.zeros((3, 4)), np.zeros((4, 4))).split(" -> ")[1] in steps["scores"].shapes


def test_positional_step_shows_p_and_x_when_on_and_only_a_line_when_off():
    off = steps_by_slug(run(MHAConfig()))["positional"]
    assert (off.panels, off.formula, off.shapes) == ((), "", "") and "off" in off.note
    result = run(MHAConfig(pe="sinusoidal"))
    on = steps_by_slug(result)["positional"]
    p, x = panel(on, "P"), panel(on, "X")
    np.testing.assert_allclose(x.matrix, result.embeddings + p.matrix, atol=EXACT)


def test_mask_step_blanks_exactly_the_masked_cells():
    assert steps_by_slug(run(MHAConfig()))["mask"].panels == ()
    result = run(MHAConfig(mask="causal"))
    mask_step = steps_by_slug(result)["mask"]
    grid, logits = panel(mask_step, "M"), panel(mask_step, "L_0")
    upper = np.triu(np.ones((6, 6), dtype=bool), k=1)  # causal: key after query
    np.testing.assert_array_equal(grid.matrix == 0, upper)
    assert np.all(np.isneginf(logits.matrix[upper])) and np.all(np.isfinite(logits.matrix[~upper]))
    assert "15 of 36" in mask_step.note  # 6*5/2 masked cells


def test_softmax_panel_is_on_the_fixed_0_to_1_scale_and_row_sums_follow_the_policy():
    result = run(MHAConfig(mask="padding", valid_len=0))  # every key masked
    step = steps_by_slug(result)["softmax"]
    assert step.panels[0].kind == "weights"
    sums = row_sums_table(step_inputs(result), 0)
    assert sums["all masked"].all() and np.all(sums["sum"] == 0)
    sums = row_sums_table(step_inputs(run(MHAConfig(mask="causal"))), 2)
    assert not sums["all masked"].any()
    np.testing.assert_allclose(sums["sum"], 1.0, atol=EXACT)


def test_output_step_is_concat_times_w_o_or_a_line_when_w_o_is_off():
    result = run(MHAConfig())
    step = steps_by_slug(result, head=3)["output"]
    y, w_o = panel(step, "Y"), panel(step, "W_O")
    np.testing.assert_allclose(y.matrix, result.trace.concat @ w_o.matrix, atol=EXACT)
    assert w_o.row_block == (12, 16)
    off = steps_by_slug(run(MHAConfig(output_projection=False)))["output"]
    assert off.panels == () and "W_O is off" in off.note


def test_scale_latex_puts_the_numbers_in():
    assert scale_latex(step_inputs(run(MHAConfig(d_model=16, n_heads=4)))).endswith(r"\frac{1}{\sqrt{4}} = 0.5000")
    assert r"\sqrt{6}" in scale_latex(step_inputs(run(MHAConfig(scale_rule="sqrt_t"))))
    assert scale_latex(step_inputs(run(MHAConfig(scale_rule="temperature", temperature=2.0)))).endswith("= 0.5000")
    assert scale_latex(step_inputs(run(MHAConfig(scale_rule="none")))) == "1"


def test_build_steps_rejects_a_head_that_does_not_exist():
    with pytest.raises(ValueError, match="choose 0 to 3"):
        build_steps(step_inputs(run(MHAConfig())), 4)


# ---- figures and tables of a panel ---------------------------------------------------------


def test_panel_figure_outlines_the_head_block_and_the_chosen_cell():
    matrix = np.arange(24, dtype=float).reshape(3, 8)
    fig = panel_figure(Panel("t", matrix, ["a", "b", "c"], dim_labels(8), block=(4, 8), cell=(1, 2)))
    rects = [(s.x0, s.x1, s.y0, s.y1) for s in fig.layout.shapes]
    assert (3.5, 7.5, -0.5, 2.5) in rects  # columns 4..7, every row
    assert (1.5, 2.5, 0.5, 1.5) in rects  # the cell (row 1, column 2)
    assert fig.data[0].text[2][7] == "23.00"


def test_weights_panels_use_0_to_1_and_large_panels_carry_no_cell_text():
    weights = np.full((3, 3), 1 / 3)
    fig = panel_figure(Panel("A", weights, list("abc"), list("xyz"), kind="weights"))
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, 1.0)
    big = panel_figure(Panel("W", np.ones((32, 32)), dim_labels(32), dim_labels(32)))
    assert big.data[0].text is None


def test_panel_figure_passes_the_font_size_and_the_drawn_width_through():
    small = panel_figure(Panel("S", np.zeros((2, 2)), ["q0", "q1"], ["k0", "k1"]), font_size=18)
    assert small.layout.font.size == 18 and small.layout.title.font.size == 20
    assert small.data[0].textfont.size == 20  # the numbers in the cells grow with the text
    labels = dim_labels(32)
    wide = panel_figure(Panel("W", np.ones((4, 32)), list("abcd"), labels), width_px=700)
    narrow = panel_figure(Panel("W", np.ones((4, 32)), list("abcd"), labels), width_px=100)
    assert list(wide.layout.xaxis.tickvals) == labels  # 32 labels of an 11 px font, 1.5 fonts apart, fit 700 px
    assert list(narrow.layout.xaxis.tickvals) == labels[::6]  # ceil(1.5 * 11 * 32 / 100) = 6
    assert list(narrow.data[0].x) == labels  # every column keeps its cell


def test_prediction_message_keeps_a_label_before_a_colon_out_of_emoji_shortcodes():
    labels = ["0:a", "1:on:"]  # the token "on:" would render as an emoji between colons
    message = prediction_message(check_prediction(np.array([0.1, 0.9]), 1), "0:a", labels)
    assert "`1:on:`" in message and "`0:a`" in message


def test_masked_logits_are_blank_in_the_figure_and_in_the_cell_text():
    logits = np.array([[0.5, -np.inf], [1.0, 2.0]])
    fig = panel_figure(Panel("L", logits, ["q0", "q1"], ["k0", "k1"]))
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.isnan(z[0, 1]) and z[1, 1] == 2.0
    assert cell_text(logits) == [["0.50", ""], ["1.00", "2.00"]]
    assert cell_text(np.array([[1.0, 0.0]]), kind="mask") == [["✓", "✗"]]


def test_panel_table_keeps_labels_and_mask_as_booleans_and_blanks_masked_logits():
    table = panel_table(Panel("M", np.array([[1.0, 0.0]]), ["q0"], ["k0", "k1"], kind="mask"))
    assert table.loc["q0", "k0"] and not table.loc["q0", "k1"]
    logits = panel_table(Panel("L", np.array([[0.5, -np.inf]]), ["q0"], ["k0", "k1"]))
    assert logits.loc["q0", "k0"] == 0.5 and np.isnan(logits.loc["q0", "k1"])


def test_attention_shaped_panels_name_their_axes():
    mask_step = steps_by_slug(run(MHAConfig(mask="causal")))["mask"]
    fig = panel_figure(panel(mask_step, "L_0"))
    assert (fig.layout.yaxis.title.text, fig.layout.xaxis.title.text) == ("query i", "key j")


# ---- the About page ------------------------------------------------------------------------


def test_glossary_rows_read_the_engines_docstring():
    symbols = dict(glossary_rows(mha_core.__doc__))
    assert {"T", "C", "nh", "hs"} <= set(symbols)
    assert "heads" in symbols["nh"]


def test_glossary_rows_stop_at_the_end_of_the_block():
    doc = "Title\n\nGlossary:\n\n    T    tokens\n    C    width\n\nConventions:   rows  are  tokens\n"
    assert glossary_rows(doc) == [("T", "tokens"), ("C", "width")]


def test_weights_too_large_to_draw_are_shown_as_the_heads_slice():
    result = run(MHAConfig(d_model=256, n_heads=8))  # 256 x 256 weights, head size 32
    steps = steps_by_slug(result, head=3)
    w_q = panel(steps["qkv"], "W_Q")
    np.testing.assert_array_equal(w_q.matrix, result.weights.w_q[:, 96:128])
    assert w_q.col_labels[0] == "d96" and len(w_q.row_labels) == 256
    assert "256×256" in steps["qkv"].note
    w_o = panel(steps["output"], "W_O")
    np.testing.assert_array_equal(w_o.matrix, result.weights.w_o[96:128])
    small = panel(steps_by_slug(run(MHAConfig()), head=1)["qkv"], "W_Q")
    assert small.matrix.shape == (16, 16) and small.block == (4, 8)
