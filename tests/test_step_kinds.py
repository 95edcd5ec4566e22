"""ui.pipeline.step_kinds.STEP_KINDS: one record per step, holding every step ``build_steps`` can make, in its order."""

from __future__ import annotations

import itertools

import pytest

from mha_core.config import MHAConfig, run
from mha_core.kernels import KERNELS
from mha_core.positions import SCHEMES
from ui.pipeline.records import Step, step_inputs
from ui.pipeline.step_kinds import STEP_KINDS
from ui.pipeline.steps import build_steps


def option_grid() -> list[MHAConfig]:
    """Every combination of the options that add, remove or change a step (the engine's own list of schemes)."""
    configs = []
    for pe, kv_heads, null_key, mask, w_o, cross in itertools.product(
            SCHEMES, (None, 2, 1), (False, True), ("none", "causal"), (True, False), (False, True)):
        config = MHAConfig(tokens=("a", "b", "c"), kv_tokens=("x", "y") if cross else None, d_model=8, n_heads=4,
                           kv_heads=kv_heads, pe=pe, null_key=null_key, mask=mask, output_projection=w_o)
        if config.problem() is None:  # not ALiBi in cross-attention
            configs.append(config)
    for kernel, pe, kv_heads, mla_rank in itertools.product(KERNELS, ("none", "rope", "alibi"), (None, 2), (0, 4)):
        config = MHAConfig(tokens=("a", "b", "c"), d_model=16, n_heads=2, kernel=kernel, pe=pe, kv_heads=kv_heads,
                           mla_rank=mla_rank, mla_rope=2 if mla_rank and pe == "rope" else 0, mask="causal")
        if config.problem() is None:  # the kernels' and MLA's steps (issue 26), where they combine
            configs.append(config)
    return configs


def producible_steps() -> list[list[str]]:
    """The slugs ``build_steps`` returns, one list per configuration of the grid, in its order."""
    return [[step.slug for step in build_steps(step_inputs(run(config)), 0)] for config in option_grid()]


def test_every_step_build_steps_can_make_has_a_record_in_pipeline_order():
    listed = list(STEP_KINDS)
    made = producible_steps()
    for slugs in made:
        assert [s for s in listed if s in slugs] == slugs  # same order as the page builds them
    assert set(listed) == {slug for slugs in made for slug in slugs}  # and no record that no run makes


def test_a_step_without_a_record_says_where_to_add_it():
    assert Step("softmax", "Softmax", "", "", "").kind is STEP_KINDS["softmax"]
    with pytest.raises(ValueError, match="no record in STEP_KINDS"):
        Step("flash", "Tiles", "", "", "").kind  # noqa: B018


def test_the_summaries_are_one_plain_line_and_say_what_the_null_key_changes():
    for kind in STEP_KINDS.values():
        assert kind.summary and kind.short_name and "**" not in kind.summary and "\n" not in kind.summary
    assert "sum to 1" in STEP_KINDS["softmax"].summary and "null key" in STEP_KINDS["softmax"].summary
