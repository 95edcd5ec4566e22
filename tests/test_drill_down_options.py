"""The drill-down agrees with the engine for every option that changes a logit or a weight.

Every (head, i, j) of a small case, over positional scheme x K/V sharing x null key x mask: the
drill-down's logit, row logits, row weights, weight and null-key share are compared with the engine's
``trace.logits`` and ``trace.weights`` (never with the drill-down itself), and the numbers written in
its LaTeX with the engine's values formatted by ``ui.pipeline.records.latex_number``.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from ui.pipeline.drill_down import (
    BIAS_ROW,
    NULL_KEY_LABEL,
    drill_down,
    logit_latex,
    null_key_latex,
    score_table,
    softmax_latex,
    softmax_row_table,
)
from ui.pipeline.records import latex_number, step_inputs

EXACT = 1e-12  # float64: a handful of terms summed in another order than the engine's matmul

BASE = MHAConfig(seed=5, d_model=8, n_heads=2)  # 6 tokens, 2 heads of size 4 (even: RoPE turns pairs)
PES = ("none", "sinusoidal", "rope", "alibi")
KV_HEADS = (BASE.n_heads, 1)
NULL_KEYS = (False, True)
MASKS = {  # name -> the config fields that make it
    "none": {"mask": "none"},
    "causal": {"mask": "causal"},
    "padding": {"mask": "padding", "valid_len": 3},
    "window": {"mask": "window", "window": 1},
    "all masked": {"mask": "padding", "valid_len": 0},  # every row fully masked
}
MATRIX = [
    replace(BASE, pe=pe, kv_heads=kv, null_key=null, **MASKS[mask])
    for pe, kv, null, mask in itertools.product(PES, KV_HEADS, NULL_KEYS, MASKS)
]
EXTRA = [  # other scales, and cross-attention (keys from another sentence; ALiBi does not apply there)
    replace(BASE, scale_rule="temperature", temperature=0.3, pe="alibi", null_key=True, mask="causal"),
    replace(BASE, d_model=16, n_heads=4, scale_rule="none", pe="rope", kv_heads=2, null_key=True),  # GQA
    replace(BASE, kv_tokens=("a", "big", "dog", "ran"), pe="rope", kv_heads=1, null_key=True, mask="padding",
            valid_len=2),
]


def case_id(config: MHAConfig) -> str:
    mask = config.mask if config.mask != "padding" else f"padding{config.valid_len}"
    cross = "-cross" if config.is_cross else ""
    return f"{config.pe}-kv{config.key_value_heads}-null{int(config.null_key)}-{mask}-{config.scale_rule}{cross}"


def reference_softmax_parts(logits_row: np.ndarray, null_key: bool) -> tuple[float, np.ndarray, float]:
    """From the engine's logits of one row: the max m (0 included with the null key), each key's
    exp(L − m) and the null key's exp(0 − m) (0 without it), written out here without the drill-down."""
    finite = logits_row[np.isfinite(logits_row)]
    candidates = list(finite) + ([0.0] if null_key else [])
    m = max(candidates) if candidates else 0.0
    return m, np.exp(logits_row - m), (float(np.exp(-m)) if null_key else 0.0)


@pytest.mark.parametrize("config", MATRIX + EXTRA, ids=case_id)
def test_every_cell_of_the_drill_down_is_the_engines(config):
    result = run(config)
    trace = result.trace
    inputs = step_inputs(result)
    nh, tq, tk = trace.weights.shape
    for head, i in itertools.product(range(nh), range(tq)):
        engine_logits, engine_weights = trace.logits[head, i], trace.weights[head, i]  # (Tk,) each
        null_share = 1.0 - engine_weights.sum()
        m, exps, null_exp = reference_softmax_parts(engine_logits, trace.null_key)
        denominator = null_exp + exps.sum()
        # The reference above is the engine's: its weights times the denominator are the exps.
        np.testing.assert_allclose(engine_weights * denominator, exps, atol=EXACT)
        for j in range(tk):
            drill = drill_down(inputs, head, i, j)
            where = f"head {head}, cell ({i}, {j}) of {case_id(config)}"
            np.testing.assert_allclose(drill.row_logits, engine_logits, atol=EXACT, err_msg=where)
            np.testing.assert_allclose(drill.row_weights, engine_weights, atol=EXACT, err_msg=where)
            np.testing.assert_allclose(drill.logit, trace.logits[head, i, j], atol=EXACT, err_msg=where)
            assert abs(drill.weight - trace.weights[head, i, j]) <= EXACT, where
            assert abs(drill.row_max - m) <= EXACT, where

            table = softmax_row_table(drill)
            np.testing.assert_allclose(table["weight"].iloc[:tk], engine_weights, atol=EXACT, err_msg=where)
            np.testing.assert_allclose(table["logit"].iloc[:tk], engine_logits, atol=EXACT, err_msg=where)
            scores = score_table(drill)["value"]
            np.testing.assert_allclose(scores["logit after the mask"], trace.logits[head, i, j], atol=EXACT)
            if trace.bias is not None:
                assert abs(scores[BIAS_ROW] - trace.bias[head, i, j]) <= EXACT, where
            else:
                assert BIAS_ROW not in scores.index, where
            if trace.null_key:
                assert abs(drill.null_weight - null_share) <= EXACT, where
                assert table.index[-1] == NULL_KEY_LABEL and len(table) == tk + 1, where
                assert abs(table.loc[NULL_KEY_LABEL, "weight"] - null_share) <= EXACT, where
                assert table.loc[NULL_KEY_LABEL, "logit"] == 0.0, where
                assert abs(table.loc[NULL_KEY_LABEL, "exp(logit − max)"] - null_exp) <= EXACT, where
            else:
                assert drill.null_weight == 0.0 and NULL_KEY_LABEL not in table.index, where

            check_latex_numbers(drill, trace, head, exps, null_exp, null_share, m, where)


def check_latex_numbers(drill, trace, head, exps, null_exp, null_share, m, where) -> None:
    """The numbers in the drill-down's formulas are the engine's, formatted as the page formats them."""
    i, j = drill.i, drill.j
    logit_text, softmax_text, null_text = logit_latex(drill), softmax_latex(drill), null_key_latex(drill)
    assert latex_number(float(trace.scores[head, i, j])) in logit_text, where
    if trace.bias is not None:
        assert rf"+ b_{{{i},{j}}}" in logit_text, where
        assert latex_number(float(trace.bias[head, i, j])) in logit_text, where
    else:
        assert "b_" not in logit_text, where
    if np.isfinite(trace.logits[head, i, j]):
        assert rf"= {latex_number(float(trace.logits[head, i, j]))} \quad" in logit_text, where
    else:
        unmasked = trace.scores[head, i, j] * trace.scale + (0.0 if trace.bias is None else trace.bias[head, i, j])
        assert r"-\infty" in logit_text and logit_text.endswith(f"{latex_number(float(unmasked))})"), where

    denominator = null_exp + exps.sum()
    if trace.fully_masked[head, i]:
        assert softmax_text.startswith(rf"A_{{{i},{j}}} = 0 \quad"), where
        assert ("null key" in softmax_text) == trace.null_key, where
    elif np.isfinite(trace.logits[head, i, j]):
        assert softmax_text.endswith(f"= {latex_number(float(trace.weights[head, i, j]))}"), where
        assert rf"\frac{{{latex_number(float(exps[j]))}}}{{{latex_number(denominator)}}}" in softmax_text, where
    else:
        assert softmax_text.endswith("= 0"), where
    if trace.null_key and not trace.fully_masked[head, i]:
        assert rf"{{{latex_number(null_exp)} + {latex_number(float(exps.sum()))}}}" in softmax_text, where
        assert r"e^{0 - m" in softmax_text, where
    else:
        assert r"e^{0 - m" not in softmax_text, where
    if trace.null_key:
        assert null_text.endswith(f"= {latex_number(m)}"), where
        assert f"= {latex_number(null_share)}," in null_text, where
    else:
        assert null_text == "", where


@pytest.mark.parametrize("field,off,on", [
    ("pe", "none", "rope"), ("pe", "none", "alibi"), ("pe", "none", "sinusoidal"),
    ("kv_heads", None, 1), ("null_key", False, True), ("mask", "none", "causal"),
])
def test_each_option_of_the_matrix_changes_the_engines_weights(field, off, on):
    """The matrix above tests something: each option moves the weights the drill-down must follow."""
    before = run(replace(BASE, **{field: off})).trace.weights
    after = run(replace(BASE, **{field: on})).trace.weights
    assert np.abs(after - before).max() > 1e-3


def test_the_issue_cell_shows_the_null_key_in_its_denominator():
    """step_by_step?null=1&qi=2&kj=1: the numbers of issue 20, now the engine's."""
    result = run(MHAConfig(null_key=True))
    weights = result.trace.weights[0, 2]  # (Tk,)
    drill = drill_down(step_inputs(result), 0, 2, 1)
    assert latex_number(weights[1]) == "0.0157" and latex_number(weights[5]) == "0.4521"  # the engine's, as reported
    assert softmax_latex(drill).endswith("= 0.0157") and "0.0192" not in softmax_latex(drill)
    assert softmax_row_table(drill).loc["5:mat", "weight"] == pytest.approx(weights[5], abs=EXACT)
    assert f"= {latex_number(1 - weights.sum())}," in null_key_latex(drill)
