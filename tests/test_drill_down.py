"""The drill-down: one cell recomputed by hand agrees with the engine; its tables and LaTeX carry the numbers."""

import re

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from ui.pipeline.drill_down import (
    MAX_LATEX_TERMS,
    SUM_ROW,
    dot_product_latex,
    drill_down,
    highlight_key,
    logit_latex,
    products_table,
    score_table,
    softmax_latex,
    softmax_row_table,
)
from ui.pipeline.records import step_inputs

EXACT = 1e-12  # float64 sums of a handful of terms, recomputed in another order


@pytest.mark.parametrize("head,i,j", [(0, 0, 0), (2, 4, 1), (3, 5, 5)])
def test_drill_down_sum_equals_the_engines_score_and_its_row_equals_the_engines_weights(head, i, j):
    result = run(MHAConfig(seed=11))
    drill = drill_down(step_inputs(result), head, i, j)
    assert abs(drill.score - result.trace.scores[head, i, j]) <= EXACT
    assert abs(drill.score - float(np.dot(result.trace.q[head, i], result.trace.k[head, j]))) <= EXACT
    np.testing.assert_allclose(drill.row_weights, result.trace.weights[head, i], atol=EXACT)
    assert abs(products_table(drill)["q_i × k_j"].sum() - score_table(drill).loc[SUM_ROW, "value"]) <= EXACT


def test_drill_down_on_a_masked_cell_says_masked_and_weighs_zero():
    result = run(MHAConfig(mask="causal"))
    drill = drill_down(step_inputs(result), 1, 1, 3)
    assert not drill.allowed and drill.weight == 0.0 and np.isneginf(drill.logit)
    assert "masked" in logit_latex(drill) and r"-\infty" in logit_latex(drill)
    np.testing.assert_allclose(softmax_row_table(drill)["weight"].sum(), 1.0, atol=EXACT)


def test_drill_down_on_a_fully_masked_row_gives_zeros_by_policy():
    result = run(MHAConfig(mask="padding", valid_len=0))
    drill = drill_down(step_inputs(result), 0, 2, 1)
    assert drill.fully_masked and np.all(drill.row_weights == 0)
    assert "policy" in softmax_latex(drill)


def test_drill_down_softmax_does_not_overflow_on_huge_logits():
    config = MHAConfig(init="uniform", scale_rule="temperature", temperature=0.01, d_model=64, n_heads=2)
    result = run(config)
    assert np.abs(result.trace.logits).max() > 700  # exp would overflow without the max subtracted
    with np.errstate(over="raise", invalid="raise"):  # underflow to 0 is the right answer
        drill = drill_down(step_inputs(result), 1, 3, 0)
    np.testing.assert_allclose(drill.row_weights, result.trace.weights[1, 3], atol=EXACT)


def test_drill_down_rejects_indices_outside_the_matrices():
    with pytest.raises(ValueError, match="key 9 does not exist"):
        drill_down(step_inputs(run(MHAConfig())), 0, 0, 9)


def test_softmax_row_table_marks_the_chosen_key_and_the_styler_shades_it():
    drill = drill_down(step_inputs(run(MHAConfig())), 0, 2, 4)
    table = softmax_row_table(drill)
    assert table["chosen"].tolist().index("◀ key j") == 4
    css = highlight_key(table, drill.key_label).to_html().split("</style>")[0]
    assert "background-color" in css
    assert set(re.findall(r"row(\d+)_col(\d+)", css)) == {("4", str(c)) for c in range(table.shape[1])}


def test_dot_product_latex_shows_every_term_for_small_heads_and_abbreviates_wide_ones():
    drill = drill_down(step_inputs(run(MHAConfig())), 0, 1, 2)  # hs = 4
    text = dot_product_latex(drill)
    assert text.count(r"\times") == 4 and f"{drill.score:.4f}" in text
    wide = drill_down(step_inputs(run(MHAConfig(d_model=64, n_heads=2))), 0, 1, 2)  # hs = 32
    text = dot_product_latex(wide)
    assert text.count(r"\times") == MAX_LATEX_TERMS and f"{32 - MAX_LATEX_TERMS}" in text


def test_softmax_latex_puts_the_cells_numbers_in():
    drill = drill_down(step_inputs(run(MHAConfig())), 1, 3, 2)
    text = softmax_latex(drill)
    assert f"{drill.row_exp.sum():.4f}" in text and text.endswith(f"{drill.weight:.4f}")
