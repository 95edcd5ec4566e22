"""ui.step_catalog: the About page's steps are every step ``build_steps`` can make, in order, with lines true for any run."""

from __future__ import annotations

import itertools

import pytest

from mha_core.config import POSITIONS, MHAConfig, run
from ui import step_catalog
from ui.steps import build_steps, step_inputs


def option_grid() -> list[MHAConfig]:
    """Every combination of the options that add, remove or change a step (the engine's own list of schemes)."""
    configs = []
    for pe, kv_heads, null_key, mask, w_o, cross in itertools.product(
            POSITIONS, (None, 2, 1), (False, True), ("none", "causal"), (True, False), (False, True)):
        config = MHAConfig(tokens=("a", "b", "c"), kv_tokens=("x", "y") if cross else None, d_model=8, n_heads=4,
                           kv_heads=kv_heads, pe=pe, null_key=null_key, mask=mask, output_projection=w_o)
        try:
            config.validate()
        except ValueError:  # ALiBi in cross-attention
            continue
        configs.append(config)
    return configs


def producible_steps() -> list[list[str]]:
    """The slugs ``build_steps`` returns, one list per configuration of the grid, in its order."""
    return [[step.slug for step in build_steps(step_inputs(run(config)), 0)] for config in option_grid()]


def test_the_catalog_holds_every_step_build_steps_can_make_in_pipeline_order():
    listed = [entry.slug for entry in step_catalog.catalog()]
    assert len(listed) == len(set(listed))
    for slugs in producible_steps():
        assert set(slugs) <= set(listed), f"{set(slugs) - set(listed)} missing from the About table"
        assert [s for s in listed if s in slugs] == slugs  # same order as the page builds them


def test_the_optional_steps_are_listed_with_their_builders_titles():
    titles = {entry.slug: entry.title for entry in step_catalog.catalog()}
    assert "RoPE" in titles["rope"] and "ALiBi" in titles["alibi"] and "Share keys and values" in titles["kv_share"]


def test_no_line_carries_a_size_of_the_runs_it_was_read_from():
    for entry in step_catalog.catalog():
        assert entry.why and "**" not in entry.why and "\n" not in entry.why, entry.slug
        for config in step_catalog.CATALOG:  # no sizes of a catalog run leak in (e.g. "The 4 head outputs")
            assert f"The {config.n_heads} head" not in entry.why and f"hs = {config.head_size}" not in entry.why


def test_the_lines_do_not_change_with_the_runs_they_were_read_from():
    other = tuple(MHAConfig(**{**c.__dict__, "tokens": ("one", "two", "three", "four", "five"), "seed": 7,
                               "d_model": c.d_model * 2}) for c in step_catalog.CATALOG)
    assert step_catalog.catalog(other) == step_catalog.catalog()


def test_lines_that_claim_what_the_null_key_changes_say_so():
    lines = {entry.slug: entry.why for entry in step_catalog.catalog()}
    assert "sum to 1" in lines["softmax"] and "null key" in lines["softmax"] and "at most 1" in lines["softmax"]
    assert "average" not in lines["mix"] or "null key" in lines["mix"]


@pytest.mark.parametrize("slug", list(step_catalog.GENERAL_LINES))
def test_every_hand_written_line_is_still_needed(slug, monkeypatch):
    monkeypatch.setattr(step_catalog, "GENERAL_LINES", {})
    with pytest.raises(ValueError, match=slug):
        step_catalog.catalog()


def test_merge_in_order_puts_an_optional_item_before_what_follows_it():
    assert step_catalog.merge_in_order([["a", "b", "d"], ["a", "c", "d"]]) == ["a", "b", "c", "d"]
    assert step_catalog.merge_in_order([["a", "b", "e"], ["a", "b", "c", "e"], ["a", "d"]]) == ["a", "b", "c", "e", "d"]
    assert step_catalog.merge_in_order([["a", "b", "x", "e"], ["a", "b", "c", "e"]]) == ["a", "b", "x", "c", "e"]


def test_sentences_split_at_full_stops_and_drop_bold():
    assert step_catalog.sentences("One **bold** claim. Two, e.g. i − j. Three") == [
        "One bold claim.", "Two, e.g. i − j.", "Three"]
    assert step_catalog.sentences("") == []
