"""AppTest of the Decoding page's cache policy section: what the cache holds follows the definitions written in
tests/test_cache_policy.py, the rows shown are the engine's attention under a mask (or positions) built here,
the null key's share is the engine's, and bad link values fall back with a message."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core.attention import multi_head_attention
from mha_core.config import MHAConfig, attention_scheme, run
from tests.address_bar import address
from tests.test_app_step_by_step import charts, z_of
from tests.test_cache_policy import kept_by_hand, policy_mask

ROOT = Path(__file__).resolve().parents[1]
FIGURE = 1e-6
T = 6


def open_page(**params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = str(value)
    at.switch_page("app_pages/decoding.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def held_frame(at: AppTest):
    return next(f.value for f in at.dataframe if "cache size n" in f.value.columns)


def policy_figure(at: AppTest, head: int = 0) -> dict:
    return next(f for t, f in charts(at).items() if t.startswith(f"Under the policy (head {head})"))


def policy_panel(at: AppTest, head: int = 0) -> np.ndarray:
    """The policy's weights as drawn: a cell the cache does not hold is blank (grey, a weight of 0)."""
    return np.nan_to_num(z_of(policy_figure(at, head)), nan=0.0)


def decoder(config: MHAConfig):
    return run(replace(config, kv_tokens=None, mask="causal"))


@pytest.mark.parametrize(("policy", "window", "sinks"), [("full", 3, 1), ("window", 2, 0), ("sinks", 2, 1),
                                                          ("sinks", 1, 3)])
def test_the_held_grid_follows_the_definitions(policy, window, sinks):
    at = open_page(cache=policy, cache_window=window, sinks=sinks)
    grid = held_frame(at)
    for t in range(T):
        expected = kept_by_hand(policy, t, window, sinks)
        held = [j for j in range(T) if grid.iat[t, j] in ("■", "S")]
        assert held == expected, (t, held, expected)
        assert all(grid.iat[t, j] == "S" for j in expected if policy == "sinks" and j < sinks)
        assert grid.loc[t, "cache size n"] == len(expected)


@pytest.mark.parametrize("params", [
    {"cache": "sinks", "cache_window": 2, "sinks": 1},
    {"cache": "window", "cache_window": 3, "pe": "alibi", "null": 1},
    {"cache": "sinks", "cache_window": 1, "sinks": 2, "pe": "rope", "kv_heads": 2},
])
def test_with_original_positions_the_rows_are_the_engines_under_a_mask_built_here(params):
    at = open_page(**params)
    config = at.session_state["config"]
    result = decoder(config)
    mask = policy_mask(params["cache"], T, params["cache_window"], params.get("sinks", 0))
    engine = multi_head_attention(result.x_q, result.weights, config.n_heads, mask=mask, scale=result.trace.scale,
                                  kv_heads=config.key_value_heads, pe=attention_scheme(config),
                                  null_key=config.null_key)
    for head in (0, config.n_heads - 1):
        at.selectbox(key="w_cache_head").set_value(head).run()
        np.testing.assert_allclose(policy_panel(at, head), engine.weights[head], rtol=0, atol=FIGURE)
    assert float(next(m.value for m in at.metric if m.label.startswith("max |Δ| vs attention over"))) <= 1e-12


@pytest.mark.parametrize(("policy", "window", "sinks"), [("window", 2, 0), ("sinks", 2, 1), ("full", 3, 0)])
def test_keys_not_in_the_cache_are_grey_with_a_cross_not_a_dark_zero(policy, window, sinks):
    """Evicted keys (and later tokens) have weight 0 because the row cannot see them: drawn as masked cells are
    everywhere (blank in the weights, a grey layer with a × over them), never a dark "0.00"."""
    at = open_page(cache=policy, cache_window=window, sinks=sinks)
    not_held = ~policy_mask(policy, T, window, sinks)  # (T, T) evicted or not yet generated, from the definitions
    assert not_held[np.tril_indices(T)].any() == (policy != "full")  # the policies do evict something here
    for title in ("Under the policy (head 0)", "Full cache (head 0)"):
        figure = next(f for t, f in charts(at).items() if t.startswith(title))
        hidden = not_held if title.startswith("Under") else ~np.tri(T, dtype=bool)
        weights = z_of(figure)
        np.testing.assert_array_equal(np.isnan(weights), hidden)
        assert [text for row, hide in zip(figure["data"][0]["text"], hidden, strict=True)
                for text, h in zip(row, hide, strict=True) if h] == [""] * int(hidden.sum())  # no "0.00" there
        grey = next(t for t in at_traces(at, title) if t.get("showscale") is False and "×" in str(t.get("text")))
        assert (np.array(grey["text"]) == "×").tolist() == hidden.tolist()
        assert "not in the cache" in grey["hovertemplate"]


def at_traces(at: AppTest, title: str) -> list[dict]:
    """Every trace of the chart whose panel has ``title``."""
    for chart in shown_charts.chart_elements(at):
        figure = shown_charts.figure_of(chart)
        if figure["layout"].get("title", {}).get("text", "").startswith(title):
            return figure["data"]
    raise AssertionError(f"no chart titled {title}")


def test_re_indexed_by_slot_the_rows_are_the_engines_with_keys_at_0_to_n_minus_1():
    at = open_page(pe="rope", cache="sinks", cache_window=2, sinks=1, cache_rope="cache")
    config = at.session_state["config"]
    result = decoder(config)
    shown = policy_panel(at)
    original = open_page(pe="rope", cache="sinks", cache_window=2, sinks=1, cache_rope="original")
    for t in range(T):
        kept = kept_by_hand("sinks", t, 2, 1)
        n = len(kept)
        engine = multi_head_attention(result.x_q[[t]], result.weights, config.n_heads, x_k=result.x_q[kept],
                                      scale=result.trace.scale, pe="rope", q_positions=np.array([n - 1]),
                                      k_positions=np.arange(n))
        np.testing.assert_allclose(shown[t, kept], engine.weights[0, 0], rtol=0, atol=FIGURE)
    assert np.max(np.abs(shown - policy_panel(original))) > 1e-3  # the choice shows once positions and slots part
    engine = multi_head_attention(result.x_q, result.weights, config.n_heads, mask=policy_mask("sinks", T, 2, 1),
                                  scale=result.trace.scale, pe="rope")
    here = np.zeros((config.n_heads, T, T))  # (nh, T, T) re-indexed rows, placed at the original positions
    for t in range(T):
        kept = kept_by_hand("sinks", t, 2, 1)
        n = len(kept)
        here[:, t, kept] = multi_head_attention(result.x_q[[t]], result.weights, config.n_heads, x_k=result.x_q[kept],
                                                scale=result.trace.scale, pe="rope", q_positions=np.array([n - 1]),
                                                k_positions=np.arange(n)).weights[:, 0]
    effect = f"max |Δ| = {np.max(np.abs(here - engine.weights)):.1e}"
    assert any(effect in c.value for c in at.caption), [c.value for c in at.caption]
    at.slider(key="w_cache_step").set_value(5).run()
    table = next(f.value for f in at.dataframe if "position used" in f.value.columns)
    assert table["position in the text"].tolist() == [0, 4, 5] and table["position used"].tolist() == [0, 1, 2]


def test_with_the_null_key_the_sentence_gives_the_engines_shares():
    at = open_page(null=1, cache="window", cache_window=2)
    at.slider(key="w_cache_step").set_value(4).run()
    config = at.session_state["config"]
    logits = decoder(config).trace.logits[0, 4]  # (T,) causal row 4 of head 0
    full_null = 1 / (1 + np.exp(logits[:5]).sum())
    kept_null = 1 / (1 + np.exp(logits[3:5]).sum())
    full_weights = np.exp(logits[:5]) * full_null
    text = next(m.value for m in at.markdown if "evicted keys" in m.value)
    assert f"**{full_weights[:3].sum():.4f}**" in text  # what full attention gave keys 0, 1, 2
    assert f"from {full_null:.4f} to **{kept_null:.4f}**" in text


@pytest.mark.parametrize(("params", "expected", "message"), [
    ({"cache": "lru"}, {"w_cache": "full"}, "`cache=lru` is not one of full, window, sinks: using full."),
    ({"cache": "window", "cache_window": "0"}, {"w_cache_window": 1}, "`cache_window=0` is outside 1..6: using 1."),
    ({"cache": "sinks", "sinks": "x"}, {"w_sinks": 1}, "`sinks=x` is not a whole number: using 1."),
    ({"cache": "sinks", "sinks": "9"}, {"w_sinks": 6}, "`sinks=9` is outside 0..6: using 6."),
    ({"cache_rope": "slot"}, {"w_cache_rope": "original"}, "`cache_rope=slot` is not one of original, cache"),
])
def test_bad_cache_links_get_a_message_and_a_valid_fallback(params, expected, message):
    at = open_page(**params)
    assert {key: at.session_state[key] for key in expected} == expected
    assert any(message in w.value for w in at.warning), [w.value for w in at.warning]


def test_the_link_follows_the_cache_widgets():
    at = open_page()
    at.selectbox(key="w_cache").set_value("sinks").run()
    at.number_input(key="w_cache_window").set_value(2).run()
    at.radio(key="w_cache_rope").set_value("cache").run()
    got = {k: address(at)[k] for k in ("cache", "cache_window", "sinks", "cache_rope")}
    assert {k: v if isinstance(v, str) else v[0] for k, v in got.items()} == \
        {"cache": "sinks", "cache_window": "2", "sinks": "1", "cache_rope": "cache"}
    at.selectbox(key="w_cache").set_value("full").run()
    assert "cache_window" not in address(at) and "sinks" not in address(at)


@pytest.mark.parametrize(("pe", "scheme"), [("0", "none"), ("rope", "RoPE")])
def test_the_positions_tables_heading_reads_for_every_scheme(pe, scheme):
    # It read "the positions none gives them" without positions: the scheme's name stands apart now.
    at = open_page(cache="window", pe=pe)
    heading = next(m.value for m in at.markdown if m.value.startswith("**Keys in the cache at step"))
    assert heading == f"**Keys in the cache at step 5 and their positions** (positions: {scheme})", heading
