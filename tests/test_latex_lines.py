"""Formulas on a phone (ui/pipeline/latex_lines.py): parts one under another, long chains broken, and
nothing but spacing and line breaks changed; the drill-down's narrow forms carry the engine's numbers."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from mha_core.config import MHAConfig, run
from ui.pipeline.drill_down import dot_product_latex, drill_down, logit_latex, softmax_latex
from ui.pipeline.latex_lines import chain, parts, phone_lines
from ui.pipeline.records import latex_number, step_inputs
from ui.pipeline.steps import build_steps

SOFTMAX = r"A_{ij} = \frac{e^{L_{ij} - m_i}}{\sum_{k} e^{L_{ik} - m_i}},\qquad m_i = \max_k L_{ik},\qquad \sum_j A_{ij} = 1"
LAYOUT = re.compile(r"\\(begin|end)\{(gathered|aligned)\}|\\q?quad(?![A-Za-z])|\\\\|&|\s")


def symbols(latex: str) -> str:
    """The formula without its layout (line breaks, alignment, \\quad gaps, spaces): what is written."""
    return LAYOUT.sub("", latex)


def test_the_softmax_steps_three_parts_stand_one_under_another():
    assert parts(SOFTMAX) == [r"A_{ij} = \frac{e^{L_{ij} - m_i}}{\sum_{k} e^{L_{ik} - m_i}},", r"m_i = \max_k L_{ik},",
                              r"\sum_j A_{ij} = 1"]
    lines = phone_lines(SOFTMAX)
    assert lines.startswith(r"\begin{gathered}") and lines.count(r"\\") == 2


def test_a_chain_is_aligned_on_its_equals_signs_and_a_list_or_a_single_equation_is_left_alone():
    assert chain("a = b = c") == r"\begin{aligned} a &= b \\ &= c \end{aligned}"
    assert chain("a = b") == "a = b"
    assert chain(r"[Q_1; Q_2] = Q_h,\ [K_1; K_2] = K_h,") == r"[Q_1; Q_2] = Q_h,\ [K_1; K_2] = K_h,"  # a list, no chain
    assert chain(r"x = \frac{a = b}{c}") == r"x = \frac{a = b}{c}"  # the "=" in braces is not the part's


def test_gaps_inside_a_group_or_an_environment_and_longer_commands_do_not_split():
    assert parts(r"\text{a \quad b} \quadruple") == [r"\text{a \quad b} \quadruple"]
    cases = r"f = \begin{cases} 1 & x \quad y \\ 0 \end{cases}"
    assert parts(cases) == [cases]
    assert phone_lines(r"E \in \mathbb{R}^{T \times C}") == r"E \in \mathbb{R}^{T \times C}"


CONFIGS = [MHAConfig(), MHAConfig(mask="causal", null_key=True), MHAConfig(pe="alibi", mask="causal"),
           MHAConfig(pe="rope", n_heads=4, kv_heads=2), MHAConfig(kernel="differential"),
           MHAConfig(kernel="linear"), MHAConfig(d_model=32, n_heads=2, pe="rope", mla_rank=4, mla_rope=4)]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.pe}-{c.mask}-{c.kernel}-{c.mla_rank}")
def test_every_step_formula_keeps_every_symbol_on_a_phone(config):
    inputs = step_inputs_of(config)
    for step in build_steps(inputs, 0, (1, 0)):
        if step.formula:
            assert symbols(phone_lines(step.formula)) == symbols(step.formula), step.slug


def step_inputs_of(config):
    return step_inputs(run(config))


@pytest.mark.parametrize("fields", [{}, {"mask": "causal"}, {"pe": "alibi", "mask": "causal"}, {"null_key": True}])
def test_the_drill_downs_narrow_forms_carry_the_engines_numbers(fields):
    """Every cell of head 0: the phone's forms hold the engine's score, scale, logit and weight, as the desktop's."""
    config = replace(MHAConfig(), **fields)
    result = run(config)
    trace, inputs = result.trace, step_inputs(result)
    n_q, n_k = trace.weights.shape[1:]
    for i in range(n_q):
        for j in range(n_k):
            drill = drill_down(inputs, 0, i, j)
            wide, narrow = logit_latex(drill), logit_latex(drill, narrow=True)
            score = float(trace.scores[0, i, j])
            bias = 0.0 if trace.bias is None else float(trace.bias[0, i, j])  # ALiBi's
            scale = config.head_size ** -0.5  # 1/√d_k, the default rule
            for number in (score, scale, score * scale + bias):
                assert latex_number(number) in narrow, (i, j)
            if trace.weights[0, i, j] > 0:
                assert latex_number(float(trace.logits[0, i, j])) in narrow, (i, j)
            assert sorted(re.findall(r"-?\d+\.\d+", narrow)) == sorted(re.findall(r"-?\d+\.\d+", wide)), (i, j)
            assert symbols(dot_product_latex(drill, per_line=1)) == symbols(dot_product_latex(drill))
            assert symbols(phone_lines(softmax_latex(drill))) == symbols(softmax_latex(drill))
