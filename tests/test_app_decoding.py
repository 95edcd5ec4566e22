"""AppTest of the Decoding page and of issue 12's settings: the decoded rows are full causal attention's,
every new setting goes sidebar -> config -> URL and back, and bad combinations fall back with a message."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import mha_core.decoder
from mha_core.attention import multi_head_attention
from mha_core.config import MHAConfig, run, scale_factor
from mha_core.decoder import assembled_weights, decode_run, decoder_config
from mha_core.kv_cache import decode
from tests import shown_charts
from tests.address_bar import address
from tests.shown_steps import step_titles
from tests.sidebar_controls import set_control
from tests.test_app_step_by_step import charts, z_of
from ui.state.urlstate import config_from_params, params_from_config

ROOT = Path(__file__).resolve().parents[1]
PAGE = "app_pages/decoding.py"
EXACT = 1e-12
FIGURE = 1e-6  # the figures travel as float32 (ui/charts/figures.py); the exact check is the live max |Δ| metric


def open_page(page: str = PAGE, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = str(value)
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def causal_weights(config: MHAConfig) -> np.ndarray:
    """Full causal self-attention over the sentence, from the engine directly (not from the page's builders)."""
    causal = run(replace(config, kv_tokens=None, mask="causal"))
    return causal.trace.weights  # (nh, T, T)


def engine_decoded_rows(config: MHAConfig) -> np.ndarray:
    """(nh, T, T) the rows the engine's KV-cache decoder gives, each step's row put in place (future: 0).

    Built here from ``mha_core`` with the layer's options written out (not through ``mha_core.decoder``): the
    scale is full attention's one number, 1/sqrt(T) of the whole sentence under ``sqrt_t``.
    """
    causal = run(replace(config, kv_tokens=None, mask="causal"))
    inside = config.pe if config.pe in ("rope", "alibi") else "none"  # sinusoidal is in x_q already
    steps = decode(causal.x_q, causal.weights, config.n_heads, kv_heads=config.key_value_heads, pe=inside,
                   rope_base=config.rope_base, scale=scale_factor(causal.config), null_key=config.null_key)
    t = len(steps)
    rows = np.zeros((config.n_heads, t, t))  # (nh, T, T)
    for i, step in enumerate(steps):
        rows[:, i, : i + 1] = step.weights[:, 0]  # (nh, i+1)
    return rows


def shown_delta(rows: np.ndarray, config: MHAConfig, t: int) -> str:
    """The metric "max |Δ| vs full causal" as the page should write it: rows 0..t of ``rows`` against the engine's."""
    delta = np.max(np.abs(rows[:, : t + 1] - causal_weights(config)[:, : t + 1]))
    return f"{delta:.1e}"


def delta_metric(at: AppTest) -> str:
    return next(m.value for m in at.metric if m.label == "max |Δ| vs full causal")


def assert_drawn(figure: dict, expected: np.ndarray, allowed: np.ndarray) -> None:
    """The panel shows ``expected`` where ``allowed``; a masked cell is blank (no colour, no "0.00") under one grey
    layer with a × exactly on the masked cells, as every attention figure draws it."""
    panel, *layers = figure["data"]
    z, masked = z_of(figure), ~allowed
    assert np.isnan(z[masked]).all(), "a masked cell is drawn with a colour"
    assert all(text == "" for text, hidden in zip(np.ravel(panel.get("text", [])), masked.ravel(), strict=False)
               if hidden)
    np.testing.assert_allclose(z[allowed & ~np.isnan(expected)], expected[allowed & ~np.isnan(expected)], rtol=0,
                               atol=FIGURE)
    (grey,) = layers
    assert grey["showscale"] is False and np.array_equal(np.array(grey["text"]) == "×", masked)
    assert np.array_equal(~np.isnan(shown_charts.decode(grey["z"])), masked)


def panel_figure(at: AppTest, prefix: str) -> dict:
    """The one panel whose title starts with ``prefix``."""
    found = [f for title, f in charts(at).items() if title.startswith(prefix)]
    assert len(found) == 1, (prefix, list(charts(at)))
    return found[0]


def panel(at: AppTest, prefix: str) -> np.ndarray:
    """The z data of the one panel whose title starts with ``prefix``."""
    return z_of(panel_figure(at, prefix))


@pytest.mark.parametrize("params", [
    {},
    {"pe": "rope", "heads": "4", "kv_heads": "2", "rope_base": "100"},
    {"pe": "alibi", "kv_heads": "1", "mask": "window"},
    {"pe": "1", "kv_tokens": "a dog ran"},
])
def test_the_assembled_rows_are_full_causal_attention(params):
    at = open_page(**params)
    config = at.session_state["config"]
    expected = causal_weights(config)
    figures = charts(at)
    steps = len(config.tokens)
    for t in (0, steps - 1):
        at.slider(key="w_dec_step").set_value(t).run()
        figures = charts(at)
        causal = np.tri(steps, dtype=bool)  # (T, T) the decoder's mask
        drawn = next(f for title, f in figures.items() if title.startswith(f"Decoded rows 0..{t}"))
        assert_drawn(drawn, np.where(np.arange(steps)[:, None] <= t, expected[0], np.nan), causal)
        assert np.isnan(z_of(drawn)[t + 1 :]).all()  # not decoded yet
        full = next(f for title, f in figures.items() if title.startswith("Full causal attention"))
        assert_drawn(full, expected[0], causal)
        assert float(delta_metric(at)) <= EXACT  # the live max |Δ| ...
        assert delta_metric(at) == shown_delta(engine_decoded_rows(config), config, t)  # ... of these rows


def test_the_step_buttons_move_and_the_cache_grows_by_kv_heads_rows():
    at = open_page(kv_heads=2)
    config = at.session_state["config"]
    hs = config.head_size
    at.button(key="dec_next").click().run()
    at.button(key="dec_next").click().run()
    assert at.slider(key="w_dec_step").value == 2
    assert at.metric[0].value == "3"
    assert at.metric[1].value == f"{2 * 3 * (hs + hs):,}"  # kv * t * (hs + hv)
    assert at.metric[2].value == f"{2 * 3 * (hs + hs) * 8:,}"
    cache = z_of(next(f for title, f in charts(at).items() if title.startswith("K cache (K/V head 0)")))
    engine = multi_head_attention(run(decoder_config(config)).x_q[:3], run(decoder_config(config)).weights, 4,
                                  kv_heads=2, mask=np.tri(3, dtype=bool))
    np.testing.assert_allclose(cache, engine.k[0], rtol=0, atol=FIGURE)


def test_the_shown_max_difference_is_the_decoded_rows_against_full_causal_and_sees_a_nudge(monkeypatch):
    # Compared with itself (decoded rows against decoded rows) the metric would read 0.0e+00 whatever was decoded:
    # the shown value must be the test's own difference, and a weight nudged inside the decoder must show up.
    nudge, nudged_step, nudged_at = 1e-3, 2, (1, 0, 1)  # step 2, head 1, key 1

    def nudged_decode(*args, **kwargs):
        steps = decode(*args, **kwargs)
        weights = steps[nudged_step].weights.copy()  # (nh, 1, 3)
        weights[nudged_at] += nudge
        return [*steps[:nudged_step], replace(steps[nudged_step], weights=weights), *steps[nudged_step + 1 :]]

    at = open_page()
    config = at.session_state["config"]
    rows = engine_decoded_rows(config)
    for t in range(len(config.tokens)):
        at.slider(key="w_dec_step").set_value(t).run()
        assert delta_metric(at) == shown_delta(rows, config, t)
    monkeypatch.setattr(mha_core.decoder, "decode", nudged_decode)  # the engine's decode, as decode_run calls it
    at = open_page()
    rows[1, nudged_step, 1] += nudge
    for t in range(len(config.tokens)):
        at.slider(key="w_dec_step").set_value(t).run()
        assert delta_metric(at) == shown_delta(rows, config, t)
        if t >= nudged_step:
            assert delta_metric(at) == f"{nudge:.1e}"  # 1.0e-03: the nudge, not 0.0e+00


@pytest.mark.parametrize("params", [
    {"scale": "sqrt_dk"},  # 1/2 (hs = 4)
    {"scale": "sqrt_t"},  # 1/sqrt(6): the whole sentence's T at every step, as full attention
    {"scale": "none"},  # 1
    {"scale": "temperature", "temperature": "3"},  # 1/3
])
def test_the_decoder_uses_the_layers_scale_rule(params):
    at = open_page(**params)
    config = at.session_state["config"]
    assert config.scale_rule == params["scale"]
    expected = causal_weights(config)  # (nh, T, T) full causal attention under this scale
    last = len(config.tokens) - 1
    at.slider(key="w_dec_step").set_value(last).run()
    for head in range(config.n_heads):
        at.selectbox(key="w_dec_head").set_value(head).run()
        assert_drawn(panel_figure(at, f"Decoded rows 0..{last} (head {head})"), expected[head],
                     np.tri(last + 1, dtype=bool))
    assert delta_metric(at) == shown_delta(engine_decoded_rows(config), config, last)
    assert float(delta_metric(at)) <= EXACT


def test_the_cache_panels_of_a_query_head_show_its_key_value_head():
    # heads=4, kv_heads=2: query heads 0, 1 read K/V head 0 and 2, 3 read K/V head 1 (h // 2). Heads 1 and 2
    # tell h // 2 from h % 2 (head 0 and head 3 give the same K/V head either way).
    at = open_page(heads=4, kv_heads=2)
    config = at.session_state["config"]
    trace = run(replace(config, kv_tokens=None, mask="causal")).trace  # k, v: (2, T, hs)
    for t in (2, len(config.tokens) - 1):
        at.slider(key="w_dec_step").set_value(t).run()
        for head in range(4):
            at.selectbox(key="w_dec_head").set_value(head).run()
            np.testing.assert_allclose(panel(at, "K cache"), trace.k[head // 2, : t + 1], rtol=0, atol=FIGURE)
            np.testing.assert_allclose(panel(at, "V cache"), trace.v[head // 2, : t + 1], rtol=0, atol=FIGURE)


def test_the_cache_table_counts_worked_on_paper():
    # nh = 4 query heads, kv = 2 key/value heads, hs = hv = 16/4 = 4, T = 3 tokens, float64 (8 bytes).
    # fresh      = q of nh heads + k, v of kv heads = 4*4 + 2*(4+4) = 16 + 16 = 32 at every step
    # reused     = the t earlier tokens' cached k, v = 2*t*(4+4) = 16t:  0, 16, 32 (the new token is fresh)
    # cache      = after the step, t+1 tokens = 2*(t+1)*(4+4) = 16(t+1): 16, 32, 48 numbers
    # bytes      = 8 per number: 128, 256, 384
    # as MHA     = one K/V head per query head, nh/kv = 2 times more: 256, 512, 768
    expected = pd.DataFrame(
        {"token": ["0:the", "1:cat", "2:sat"], "fresh numbers": [32, 32, 32], "reused from cache": [0, 16, 32],
         "cache numbers": [16, 32, 48], "cache bytes": [128, 256, 384], "cache bytes as MHA": [256, 512, 768]},
        index=pd.Index([0, 1, 2], name="step t"))
    at = open_page(tokens="the cat sat", d_model=16, heads=4, kv_heads=2)
    at.slider(key="w_dec_step").set_value(2).run()
    shown = next(f.value for f in at.dataframe if "cache bytes as MHA" in f.value.columns)
    pd.testing.assert_frame_equal(shown, expected, check_dtype=False, check_index_type=False)


def test_with_the_null_key_the_decoded_rows_are_full_causal_attention_at_every_step():
    at = open_page(null=1)
    config = at.session_state["config"]
    assert config.null_key
    expected, rows = causal_weights(config), engine_decoded_rows(config)
    assert np.all(expected.sum(axis=-1) < 1 - 1e-3)  # the null key takes weight: these are softmax_1's rows
    for t in range(len(config.tokens)):
        at.slider(key="w_dec_step").set_value(t).run()
        assert float(delta_metric(at)) <= EXACT
        assert delta_metric(at) == shown_delta(rows, config, t)
        decoded = np.where(np.arange(len(config.tokens))[:, None] <= t, expected[0], np.nan)  # rows to come: blank
        assert_drawn(panel_figure(at, f"Decoded rows 0..{t}"), decoded, np.tri(len(config.tokens), dtype=bool))


def test_decoded_rows_match_for_every_scheme_and_kv_heads():
    for pe in ("none", "sinusoidal", "rope", "alibi"):
        for kv in (1, 2, 4):
            config = MHAConfig(pe=pe, kv_heads=kv, seed=3)
            result = run(decoder_config(config))
            steps = decode_run(result)
            np.testing.assert_allclose(assembled_weights(steps, len(steps) - 1), causal_weights(config), rtol=0, atol=EXACT)


def test_the_position_comparison_shows_each_schemes_engine_weights_masked_cells_grey():
    at = open_page(heads=2)
    figures = charts(at)
    for pe, title in (("none", "none"), ("sinusoidal", "sinusoidal"), ("rope", "RoPE"), ("alibi", "ALiBi")):
        engine = run(MHAConfig(n_heads=2, pe=pe, mask="causal"))
        assert_drawn(next(f for t, f in figures.items() if t.startswith(title)), engine.trace.weights[0], engine.mask)


def test_a_linear_layer_with_shared_kv_heads_is_compared_with_the_cache_of_as_many_kv_heads():
    at = open_page(kernel="linear", kv_heads=2, heads=4, mask="causal")
    config = at.session_state["config"]
    nh, kv, hs, t = config.n_heads, config.key_value_heads, config.head_size, 3
    assert (nh, kv) == (4, 2)
    at.slider(key="w_dec_step").set_value(t).run()
    metrics = {m.label: m.value for m in at.metric}
    kept = run(decoder_config(config)).trace.k.shape[0] * hs * (hs + 1)  # S and z of the engine's K/V heads
    assert int(metrics["Numbers kept (this layer)"].replace(",", "")) == kept == kv * hs * (hs + 1)
    cache = {label: value for label, value in metrics.items() if "KV cache" in label}
    assert cache == {f"GQA KV cache ({kv} K/V heads)": f"{2 * kv * hs * (t + 1):,}"}
    text = " ".join(m.value for m in at.markdown)
    assert (f"same {kv} K/V heads (GQA) would have cached **{2 * kv * hs * (t + 1):,}**" in text
            and f"(MHA, {nh}), **{2 * nh * hs * (t + 1):,}**" in text)


# ---- the settings ---------------------------------------------------------------------------


@pytest.mark.parametrize("config", [
    MHAConfig(pe="rope", rope_base=500.0),
    MHAConfig(pe="alibi", kv_heads=2, mask="causal"),
    MHAConfig(kv_heads=1, d_model=24, n_heads=6),
    MHAConfig(pe="sinusoidal"),
    MHAConfig(pe="none", kv_heads=2),
])
def test_a_new_setting_goes_to_the_url_and_back(config):
    params = params_from_config(config)
    assert config_from_params(params) == (config, [])
    assert params["pe"] == {"none": "0", "sinusoidal": "1"}.get(config.pe, config.pe)  # old apps read 0 and 1


@pytest.mark.parametrize(("params", "expected", "message"), [
    ({"heads": "4", "kv_heads": "3"}, {"kv_heads": 2}, "does not divide 4 heads"),
    ({"heads": "4", "kv_heads": "9"}, {"kv_heads": None}, "outside 1..4"),
    ({"d_model": "12", "heads": "4", "pe": "rope"}, {"pe": "none"}, "head size must be even"),
    ({"kv_tokens": "a b", "pe": "alibi"}, {"pe": "none"}, "cross-attention"),
    ({"init": "previous", "pe": "rope"}, {"pe": "none"}, "hand-built heads"),
    ({"pe": "rope", "rope_base": "0.5"}, {"pe": "rope", "rope_base": 10000.0}, "rope_base=0.5"),
    ({"pe": "spiral"}, {"pe": "none"}, "pe=spiral"),
])
def test_a_bad_combination_gets_a_message_and_a_valid_fallback(params, expected, message):
    config, messages = config_from_params(params)
    config.validate()
    assert {name: getattr(config, name) for name in expected} == expected
    assert any(message in m for m in messages), messages


def test_the_sidebar_sets_pe_rope_base_and_kv_heads_and_the_url_follows():
    at = open_page("app_pages/step_by_step.py")
    set_control(at, "w_pe", "rope")
    set_control(at, "w_rope_base", 250.0)
    set_control(at, "w_kv_heads", 2)
    assert not at.exception
    assert at.session_state["config"] == MHAConfig(pe="rope", rope_base=250.0, kv_heads=2)
    assert address(at)["pe"] in ("rope", ["rope"]) and address(at)["kv_heads"] in ("2", ["2"])
    titles = step_titles(at)
    assert any("RoPE" in t for t in titles) and any("Share keys and values" in t for t in titles)
    set_control(at, "w_heads", 1)  # kv_heads 2 no longer divides: the widget offers only 1
    assert at.session_state["config"].key_value_heads == 1 and not at.exception
