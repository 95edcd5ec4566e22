"""Issue 26's settings (``kernel``, ``mla_rank``, ``mla_rope``) from a link to the pages, and back.

Links read and write each setting, bad values and impossible combinations fall back with a message; the
pages show the engine's arrays of each variant: Heads draws differential weights on a diverging scale and
says what a row sums to, Step by step shows the variant's own steps, Decoding shows what its decoder keeps.
"""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from mha_core.kernels import KERNELS
from tests.address_bar import address
from tests.sidebar_controls import control
from tests.test_app_decoding import open_page
from tests.test_app_heads import app, charts, grid_matrices
from tests.test_app_step_by_step import charts as step_charts
from tests.test_app_step_by_step import z_of
from ui.state.urlstate import config_from_params, params_from_config

FIGURE = 1e-6  # figures travel as float32


@pytest.mark.parametrize("params, fields", [
    ({"kernel": "differential"}, {"kernel": "differential"}),
    ({"kernel": "linear", "mask": "causal"}, {"kernel": "linear"}),
    ({"mla_rank": "4"}, {"mla_rank": 4, "mla_rope": 0}),
    ({"mla_rank": "4", "pe": "rope"}, {"mla_rank": 4, "mla_rope": 2}),  # the default RoPE part with RoPE on
    ({"mla_rank": "6", "mla_rope": "2", "pe": "rope", "d_model": "32", "heads": "2"}, {"mla_rank": 6, "mla_rope": 2}),
])
def test_a_link_reads_and_writes_each_setting(params, fields):
    config, messages = config_from_params(params)
    assert messages == []
    assert {name: getattr(config, name) for name in fields} == fields
    again, _ = config_from_params(params_from_config(config))
    assert again == config


def test_the_defaults_are_not_written():
    written = params_from_config(MHAConfig())
    assert not {"kernel", "mla_rank", "mla_rope"} & set(written)


@pytest.mark.parametrize("params, field, fallback, words", [
    ({"kernel": "quadratic"}, "kernel", "softmax", "kernel=quadratic"),
    ({"kernel": "differential", "null": "1"}, "null_key", False, "null key"),
    ({"kernel": "linear", "scale": "none"}, "scale_rule", "sqrt_dk", "no scale"),
    ({"kernel": "differential", "pe": "alibi"}, "pe", "none", "ALiBi"),
    ({"kernel": "differential", "d_model": "12", "heads": "4"}, "kernel", "softmax", "head size must be even"),
    ({"kernel": "linear", "mla_rank": "4"}, "mla_rank", 0, "latent"),
    ({"mla_rank": "99"}, "mla_rank", 16, "mla_rank=99"),
    ({"mla_rank": "two"}, "mla_rank", 0, "mla_rank=two"),
    ({"mla_rank": "4", "mla_rope": "3", "pe": "rope"}, "mla_rope", 2, "odd"),
    ({"mla_rank": "4", "mla_rope": "2"}, "mla_rope", 0, "RoPE"),
    ({"mla_rank": "4", "kv_heads": "2"}, "kv_heads", None, "key/value heads"),
    ({"mla_rank": "4", "bias": "1"}, "bias", False, "biases"),
])
def test_a_bad_value_falls_back_with_a_message(params, field, fallback, words):
    config, messages = config_from_params(params)
    assert getattr(config, field) == fallback
    assert config.problem() is None
    assert any(words in m for m in messages), messages


# ---- the pages ---------------------------------------------------------------------------------


def test_heads_draws_differential_weights_signed_and_says_what_rows_sum_to():
    at = app({"kernel": "differential", "seed": "4"})
    assert not at.exception
    engine = run(MHAConfig(kernel="differential", seed=4)).trace
    shown = np.stack(grid_matrices(at))
    np.testing.assert_allclose(shown, engine.weights, rtol=0, atol=FIGURE)
    axis = charts(at)["heads_grid"]["layout"]["coloraxis"]
    assert axis["cmin"] < 0 < axis["cmax"] and axis.get("cmid") == 0.0  # diverging, centred on 0
    assert engine.weights.min() < 0
    captions = " ".join(c.value for c in at.caption)
    assert f"1 − λ = {1 - engine.kernel_parts.lam:.3f}" in captions
    assert "Each row sums to 1." not in captions


def test_heads_keeps_the_fixed_scale_for_linear_and_says_rows_sum_to_1():
    at = app({"kernel": "linear", "mask": "causal"})
    assert not at.exception
    axis = charts(at)["heads_grid"]["layout"]["coloraxis"]
    assert (axis["cmin"], axis["cmax"]) == (0.0, 1.0)
    engine = run(MHAConfig(kernel="linear", mask="causal"))
    expected = np.where(engine.mask, engine.trace.weights, np.nan)  # masked cells are drawn by a grey layer
    np.testing.assert_allclose(np.stack(grid_matrices(at)), expected, rtol=0, atol=FIGURE)
    assert any("Linear attention: each row sums to 1" in c.value for c in at.caption)


def test_the_sidebar_offers_every_kernel_and_writes_the_link():
    at = app()
    box = control(at, "w_kernel")
    assert len(box.options) == len(KERNELS)  # one option per row of the table
    box.set_value("linear").run()
    assert not at.exception
    assert at.session_state["config"].kernel == "linear"
    assert address(at)["kernel"] in ("linear", ["linear"])


@pytest.mark.parametrize("params, title, engine_array", [
    ({"kernel": "differential"}, "A_0 = A₁ − λA₂ (signed weights)", lambda t: t.weights[0]),
    ({"kernel": "differential"}, "A₂ = softmax(L₂)", lambda t: t.kernel_parts.map2[0]),
    ({"kernel": "linear", "mask": "causal"}, "head_0 from the state, token by token",
     lambda t: t.kernel_parts.recurrent_heads[0]),
    ({"mla_rank": "4", "pe": "rope", "mask": "causal"}, "S̃_0 = q̃·c + q_R·k_R", lambda t: t.mla.absorbed_scores[0]),
])
def test_step_by_step_shows_the_variants_own_steps_with_the_engines_arrays(params, title, engine_array):
    at = open_page("app_pages/step_by_step.py", **params)
    config, _ = config_from_params(params)
    views = step_charts(at)
    assert title in views, sorted(views)
    np.testing.assert_allclose(z_of(views[title]), engine_array(run(config).trace), rtol=0, atol=FIGURE)


@pytest.mark.parametrize("params, kept", [
    ({"kernel": "linear"}, lambda c, t: c.key_value_heads * c.head_size * (c.head_size + 1)),  # constant
    ({"mla_rank": "4", "pe": "rope"}, lambda c, t: (t + 1) * (c.mla_rank + c.mla_rope)),
    ({"kernel": "differential", "kv_heads": "2"}, lambda c, t: (t + 1) * 2 * c.key_value_heads * c.head_size),
])
def test_decoding_shows_what_the_variant_keeps_and_that_its_rows_are_full_attentions(params, kept):
    at = open_page("app_pages/decoding.py", **params)
    config = at.session_state["config"]
    last = len(config.tokens) - 1
    at.slider(key="w_dec_step").set_value(last).run()
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Numbers kept (this layer)"].replace(",", "")) == kept(config, last)
    kv = config.key_value_heads
    same = "MHA's KV cache would hold" if kv == config.n_heads else f"GQA KV cache ({kv} K/V heads)"
    assert int(metrics[same].replace(",", "")) == (last + 1) * 2 * kv * config.head_size
    assert float(metrics["max |Δ| vs full causal"]) <= 1e-12


def test_about_lists_the_variants_steps_and_the_kernels_of_the_engines_table():
    from mha_core.kernels import KERNELS

    at = open_page("app_pages/about.py")
    tables = [t.value for t in at.table]
    steps = next(t for t in tables if t.index.name == "step")
    assert "Subtract: A₁ − λA₂ (differential)" in steps.index
    kernels = next(t for t in tables if t.index.name == "kernel")
    for name, kernel in KERNELS.items():
        assert kernels.loc[name, "name"] == kernel.label and kernels.loc[name, "rows sum to"] == kernel.row_sums
        assert kernels.loc[name, "negative weights"] == ("yes" if kernel.signed else "no")


def test_the_drill_down_re_derives_mlas_rows_from_its_materialised_keys():
    from ui.pipeline.drill_down import drill_down
    from ui.pipeline.records import step_inputs

    result = run(MHAConfig(mla_rank=4, mla_rope=2, pe="rope", mask="causal", seed=2))
    for head in range(result.config.n_heads):
        for i in range(len(result.config.tokens)):
            cell = drill_down(step_inputs(result), head, i, 0)
            q_k = float(result.trace.q[head, i, :-2] @ result.trace.mla.k_content[head, 0]) + float(
                result.trace.q[head, i, -2:] @ result.trace.mla.k_rope[0, 0])  # content part + decoupled RoPE part
            assert abs(cell.score - q_k) <= 1e-12
            np.testing.assert_allclose(cell.row_weights, result.trace.weights[head, i], rtol=0, atol=1e-12)


def test_compare_draws_a_differential_b_on_a_diverging_scale():
    at = open_page("app_pages/compare.py", b_kernel="differential")
    figure = charts(at)["cmp_pair"]
    axis = figure["layout"]["coloraxis"]
    assert axis["cmin"] < 0 < axis["cmax"]
    assert any("differential" in str(m.value) for m in at.markdown)


def undocumented_kernels(readme: str) -> set[str]:
    """Kernels of the engine's table that the README's ``kernel`` row does not name."""
    import re

    from mha_core.kernels import KERNELS

    row = re.search(r"^\| `kernel` \|(.*)$", readme, flags=re.M).group(1)
    return {name for name in KERNELS if f"`{name}`" not in row}


def test_a_fourth_kernel_is_one_row_of_the_table(monkeypatch):
    from dataclasses import replace
    from pathlib import Path

    from mha_core import kernels

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert undocumented_kernels(readme) == set()
    copy = replace(kernels.KERNELS["softmax"], name="softmax_copy", label="softmax, a test's copy")
    monkeypatch.setitem(kernels.KERNELS, copy.name, copy)
    assert undocumented_kernels(readme) == {"softmax_copy"}
    config, messages = config_from_params({"kernel": "softmax_copy", "mask": "causal"})
    assert config.kernel == "softmax_copy" and messages == []
    assert params_from_config(config)["kernel"] == "softmax_copy"
    np.testing.assert_array_equal(run(config).trace.weights, run(MHAConfig(mask="causal")).trace.weights)
    at = app({"kernel": "softmax_copy"})
    assert not at.exception and "softmax, a test's copy" in control(at, "w_kernel").options
