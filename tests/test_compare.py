"""A/B compare links: B's settings as b_ parameters, read and written from the settings table."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from ui.pages import compare
from ui.state.settings import model_settings
from ui.state.urlstate import params_from_config

A = MHAConfig()
B_CASES = [
    replace(A, scale_rule="none"),
    replace(A, mask="causal"),
    replace(A, n_heads=8, seed=3),
    replace(A, mask="window", window=2, null_key=True),
    replace(A, output_projection=False, bias=True),
    replace(A, scale_rule="temperature", temperature=0.25),
    replace(A, kv_tokens=("a", "dog", "ran")),
]


@pytest.mark.parametrize("b", B_CASES)
def test_b_round_trips_through_its_b_parameters(b):
    link = compare.b_params(A, b)
    assert all(k.startswith("b_") for k in link)
    back, messages = compare.config_b(A, compare.b_overrides({**params_from_config(A), **link}))
    assert messages == []
    assert back == b


def test_b_parameters_carry_only_what_differs_and_unset_returns_to_the_default():
    a = replace(A, mask="causal", kv_tokens=("x", "y"))
    b = replace(A, scale_rule="none")
    link = compare.b_params(a, b)
    assert link["b_scale"] == "none"
    assert link["b_mask"] == "none"
    assert link["b_kv_tokens"] == ""  # A cross-attends, B does not: empty = the default (none)
    assert compare.config_b(a, compare.b_overrides(link))[0] == b
    assert compare.b_params(A, A) == {}


def test_every_model_setting_can_differ_in_b():
    # each row's own parameter name, prefixed: no hand-written list
    names = {row.param for row in model_settings()}
    b = replace(A, scale_rule="none", mask="causal", seed=5)
    assert {k[2:] for k in compare.b_params(A, b)} <= names


def test_bad_b_values_give_messages_and_fall_back():
    b, messages = compare.config_b(A, {"scale": "cubic", "heads": "5"})
    assert b.scale_rule == A.scale_rule and b.n_heads == 4
    assert any("cubic" in m for m in messages) and all(m.startswith("B: ") for m in messages)


def test_comparison_is_b_minus_a_and_the_summary_finds_the_largest_change():
    ra, rb = run(A), run(replace(A, scale_rule="none"))
    c = compare.compare(ra, rb)
    np.testing.assert_array_equal(c.delta, rb.trace.weights - ra.trace.weights)
    changes = compare.head_changes(c, ra.query_labels, ra.key_labels)
    for h in range(4):
        d = np.abs(rb.trace.weights[h] - ra.trace.weights[h])
        i, j = np.unravel_index(np.argmax(d), d.shape)
        row = changes.iloc[h]
        assert row["largest |B − A|"] == pytest.approx(d.max())
        assert (row["query"], row["key"]) == (ra.query_labels[i], ra.key_labels[j])
        assert row["A"] == ra.trace.weights[h, i, j] and row["B"] == rb.trace.weights[h, i, j]


def test_other_tokens_are_refused_and_other_head_counts_compare_up_to_the_smaller():
    ra = run(A)
    assert isinstance(compare.compare(ra, run(replace(A, tokens=("a", "b")))), str)
    assert isinstance(compare.compare(ra, run(replace(A, kv_tokens=("a", "b")))), str)
    c = compare.compare(ra, run(replace(A, n_heads=2)))
    assert c.n_heads == 2 and "heads 0..1" in c.note


def test_take_apart_reads_each_query_heads_shared_value_head():
    import numpy as np

    from mha_core.config import MHAConfig, run
    from ui.pages.heads.apart import take_apart

    result = run(MHAConfig(n_heads=4, kv_heads=2))
    parts = take_apart(result, [])
    t, w_o = result.trace, result.weights.w_o
    for h in range(4):
        v = t.v[h // 2] @ w_o[h * 4 : (h + 1) * 4]  # (Tk, C_out): query heads 0,1 read K/V head 0; 2,3 read 1
        np.testing.assert_allclose(parts.carried[h], t.weights[h] * np.linalg.norm(v, axis=1)[None, :], atol=1e-12)


def test_differences_name_a_setting_by_its_short_label():
    changed = compare.differences(A, replace(A, n_heads=2, kv_heads=1, d_model=12, null_key=True))
    assert [label for label, _, _ in changed] == ["d_model", "Heads", "K/V heads", "Null key"]
    assert changed[1][1:] == (4, 2)
