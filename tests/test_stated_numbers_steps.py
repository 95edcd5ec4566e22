"""Running numbers at every step of a slider, not only the last (issue 32, item 8).

The Decoding page (KV-cache stepper, the variants' stepper, the cache policy's step) and the FlashAttention page
(one tile per step) show metrics, sentences, tables and charts that change with the slider. Here the slider is
walked through every value, and at each one every shown number is compared with a number this file computes
from the engine's run (``run(config).trace``): the logits, K, V, the weights, the mask. Never with the page's own
builders. The grid of configurations holds grouped K/V heads (1 < kv_heads < heads) under every kernel, with the
head chosen on the page in the second K/V group, so a wrong head → K/V head mapping shows.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import shown_charts
from stated_numbers import TINY, assert_states, rope_turned, softmax_row
from streamlit.testing.v1 import AppTest
from test_stated_numbers_downloads import open_page

from mha_core.config import run
from mha_core.decoder import decoder_config
from tests.sidebar_controls import control
from ui.state.urlstate import config_from_params

CHART_TOL = 1e-5  # charts carry float32
TOKENS = "the cat sat on a mat"


def engine_run(params: dict[str, str], decoder: bool = False):
    config, messages = config_from_params({k: v for k, v in params.items() if not k.startswith(("cache", "sinks",
                                                                                                 "br", "bc"))})
    assert not messages, messages
    return run(decoder_config(config) if decoder else config)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def as_int(text: str) -> int:
    return int(text.replace(",", ""))


def assert_tiny(text: str) -> None:
    assert float(text) <= 1e-9, text


def is_cover(trace: dict) -> bool:
    """The grey layer over cells a row cannot see (masked, or evicted from a cache): one colour, no scale."""
    scale = trace.get("colorscale")
    return trace.get("showscale") is False and isinstance(scale, list) and len({c for _, c in scale}) == 1


def heatmaps(figure: dict) -> list[np.ndarray]:
    """Every heatmap panel's z of one figure, as float64 (NaN = a blank cell); the grey covers are checked here:
    each covers exactly the blank cells of the panel before it (in a row not computed yet, all blank, only cells
    of that row)."""
    panels = []
    for d in figure["data"]:
        if d.get("type") != "heatmap" or not isinstance(d.get("z"), dict):
            continue
        z = shown_charts.decode(d["z"]).astype(np.float64)
        if is_cover(d):
            blank = np.isnan(panels[-1])
            to_come = blank.all(axis=-1, keepdims=True) & np.ones_like(blank)  # rows not decoded yet
            covered = ~np.isnan(z)
            assert panels and np.array_equal(covered & ~to_come, blank & ~to_come), "a grey cover off the blank cells"
            assert not np.any(covered & ~blank), "a grey cover over a drawn cell"
            continue
        panels.append(z)
    return panels


def one_panel(at: AppTest, key: str) -> tuple[np.ndarray, dict]:
    figure = shown_charts.charts(at)[key]
    (z,) = [z for z in heatmaps(figure)]
    return z, figure["data"][0]


def close(shown: np.ndarray, expected: np.ndarray) -> None:
    """The shown panel is the expected array; a blank cell (drawn grey, as the row cannot see it) has weight 0."""
    assert shown.shape == expected.shape, (shown.shape, expected.shape)
    blank = np.isnan(shown) & ~np.isnan(expected)
    assert np.all(expected[blank] == 0), "a cell with weight is drawn blank"
    np.testing.assert_allclose(np.where(blank, 0.0, shown), expected, rtol=CHART_TOL, atol=CHART_TOL)


# ---- Decoding: the KV-cache stepper ----------------------------------------------------------------------------

# heads 4 over kv_heads 2 (and 1 < 2 < 4 is the grouping the parametrisations elsewhere skip for some decoders)
DECODING_GRID = [dict(zip(("pe", "scale", "null"), combo, strict=True))
                 for combo in itertools.product(("none", "rope", "alibi"), ("sqrt_dk", "sqrt_t"), ("0", "1"))]


def decoding_params(extra: dict[str, str]) -> dict[str, str]:
    return {"tokens": TOKENS, "d_model": "16", "heads": "4", "kv_heads": "2", "seed": "5", **extra}


DECODED_HEAD = 3  # with 4 heads over 2 K/V heads: the second head of K/V group 1


def open_decoder(params: dict[str, str]):
    """The decoder's engine run for ``params`` and the Decoding page opened on it with ``DECODED_HEAD`` chosen."""
    result = engine_run(params, decoder=True)
    at = open_page("decoding", params)
    at.selectbox("w_dec_head").set_value(DECODED_HEAD).run()
    return result, at


@pytest.mark.parametrize("extra", DECODING_GRID, ids=lambda e: "-".join(e.values()))
def test_kv_cache_stepper_numbers_at_every_step(extra):
    params = decoding_params(extra)
    result, at = open_decoder(params)
    trace, config = result.trace, result.config
    nh, kv, hs, n = config.n_heads, config.key_value_heads, config.head_size, len(config.tokens)
    head = DECODED_HEAD
    g = head // (nh // kv)
    for t in range(n):
        at.slider("w_dec_step").set_value(t).run()
        assert not at.exception, at.exception
        shown = metrics(at)
        cache = 2 * kv * (t + 1) * hs
        assert as_int(shown["Tokens in the cache"]) == t + 1
        assert as_int(shown["Cache size (numbers)"]) == cache
        assert as_int(shown["Cache size (bytes, float64)"]) == 8 * cache
        assert_tiny(shown["max |Δ| vs full causal"])
        (sentence,) = [m.value for m in at.markdown if m.value.startswith(f"Step {t} generates")]
        assert_states(sentence, [t, nh, kv, nh * hs + 2 * kv * hs, 2 * kv * t * hs])
        assembled, _ = one_panel(at, "dec_assembled")
        close(assembled[: t + 1], trace.weights[head, : t + 1])
        assert np.isnan(assembled[t + 1 :]).all()
        close(one_panel(at, "dec_full")[0], trace.weights[head])
        cache_panels = [z for key in sorted(k for k in shown_charts.charts(at) if k.startswith("dec_cache_"))
                        for z in heatmaps(shown_charts.charts(at)[key])]
        q, k, v = cache_panels
        close(q, trace.q[head, t : t + 1])
        close(k, trace.k[g, : t + 1])
        close(v, trace.v[g, : t + 1])
        table = next(d.value for d in at.dataframe if "reused from cache" in d.value.columns)
        assert list(table["cache numbers"]) == [2 * kv * (s + 1) * hs for s in range(t + 1)]
        assert list(table["reused from cache"]) == [2 * kv * s * hs for s in range(t + 1)]
        assert list(table["cache bytes as MHA"]) == [8 * 2 * nh * (s + 1) * hs for s in range(t + 1)]


# ---- Decoding: the variants' stepper ---------------------------------------------------------------------------

VARIANTS = {
    "differential, GQA": {"kernel": "differential", "kv_heads": "2"},
    "differential, GQA, rope": {"kernel": "differential", "kv_heads": "2", "pe": "rope", "d_model": "32"},
    "linear, GQA": {"kernel": "linear", "kv_heads": "2"},
    "linear, GQA, rope": {"kernel": "linear", "kv_heads": "2", "pe": "rope"},
    "MLA": {"mla_rank": "4", "mla_rope": "2", "pe": "rope", "kv_heads": "4"},
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_stepper_numbers_at_every_step(name):
    params = decoding_params(VARIANTS[name])
    result, at = open_decoder(params)
    trace, config = result.trace, result.config
    nh, kv, hs, n = config.n_heads, config.key_value_heads, config.head_size, len(config.tokens)
    head = DECODED_HEAD
    g = head // (nh // kv)
    for t in range(n):
        at.slider("w_dec_step").set_value(t).run()
        assert not at.exception, (t, at.exception)
        shown = metrics(at)
        assert as_int(shown["Tokens seen"]) == t + 1
        same = "MHA's KV cache would hold" if kv == nh else f"{'MQA' if kv == 1 else 'GQA'} KV cache ({kv} K/V heads)"
        assert as_int(shown[same]) == 2 * kv * hs * (t + 1)  # like with like: the layer's own K/V heads
        assert_tiny(shown["max |Δ| vs full causal"])
        charts = shown_charts.charts(at)
        held = [z for key in sorted(k for k in charts if k.startswith("dec_variant_held_")) for z in heatmaps(charts[key])]
        if config.mla_rank:
            kept = (config.mla_rank + config.mla_rope) * (t + 1)
            latent, rope_keys = held
            close(latent, trace.mla.latent[: t + 1])
            close(rope_keys, trace.mla.k_rope[0, : t + 1])
        elif config.kernel == "linear":
            kept = kv * (hs * hs + hs)  # S (hs × hv) and z (hs) per K/V head, whatever t
            phi_k = trace.kernel_parts.phi_k[g, : t + 1]  # (t+1, hs)
            state, state_sum = held
            close(state, phi_k.T @ trace.v[g, : t + 1])
            close(state_sum, phi_k.sum(axis=0)[None])
        else:
            kept = kv * (t + 1) * (trace.k.shape[-1] + trace.v.shape[-1])
            k, v = held
            close(k, trace.k[g, : t + 1])
            close(v, trace.v[g, : t + 1])
        assert as_int(shown["Numbers kept (this layer)"]) == kept
        assembled, _ = one_panel(at, "dec_variant_assembled")
        close(assembled[: t + 1], trace.weights[head, : t + 1])
        assert np.isnan(assembled[t + 1 :]).all()
        titles = " ".join(m.value for m in at.markdown)
        if not config.mla_rank:  # every panel of a K/V head names the one query head 3 reads
            assert f"K/V head {g}" in json_titles(charts), json_titles(charts)
        assert f"Step {t} generates" in titles
        table = next(d.value for d in at.dataframe if "kept (this layer)" in d.value.columns)
        assert list(table["kept (this layer)"])[-1] == kept
        assert list(table["MHA KV cache"]) == [2 * nh * hs * (s + 1) for s in range(t + 1)]


def json_titles(charts: dict) -> str:
    """Every subplot and axis title the page's charts carry, as one string."""
    texts = []
    for figure in charts.values():
        texts += [a.get("text", "") for a in figure.get("layout", {}).get("annotations", [])]
        title = figure.get("layout", {}).get("title")
        texts.append(title.get("text", "") if isinstance(title, dict) else str(title or ""))
    return " | ".join(texts)


# ---- Decoding: the cache policy's step ----------------------------------------------------------------------------

POLICY_GRID = [{"cache": policy, "cache_window": str(window), "sinks": str(sinks), **extra}
               for (policy, window, sinks), extra in itertools.product(
                   (("window", 2, 0), ("sinks", 2, 1), ("sinks", 3, 2)),
                   ({"pe": "none"}, {"pe": "alibi", "null": "1"}))]


def held_keys(policy: str, window: int, sinks: int, t: int) -> list[int]:
    recent = set(range(max(0, t - window + 1), t + 1))
    return sorted(recent | (set(range(min(sinks, t + 1))) if policy == "sinks" else set()))


@pytest.mark.parametrize("extra", POLICY_GRID, ids=lambda e: "-".join(e.values()))
def test_cache_policy_numbers_at_every_step(extra):
    params = decoding_params(extra)
    result = engine_run(params, decoder=True)
    trace, config = result.trace, result.config
    n, head = len(config.tokens), 3
    policy, window, sinks = extra["cache"], int(extra["cache_window"]), int(extra["sinks"])
    null = config.null_key
    # Original positions: step t's logits over its kept keys are full causal attention's (ALiBi's distance included).
    policy_rows = np.zeros((n, n))
    for t in range(n):
        kept = held_keys(policy, window, sinks, t)
        logits = trace.logits[head, t, kept]
        row = softmax_row(np.append(logits, 0.0))[:-1] if null else softmax_row(logits)
        policy_rows[t, kept] = row
    at = open_page("decoding", params)
    at.selectbox("w_cache_head").set_value(head).run()
    assert not at.exception
    shown = metrics(at)
    assert as_int(shown["Largest cache (tokens)"]) == max(len(held_keys(policy, window, sinks, t)) for t in range(n))
    assert as_int(shown["Tokens evicted"]) == n - len(held_keys(policy, window, sinks, n - 1))
    assert_tiny(shown["max |Δ| vs attention over the kept keys"])
    close(one_panel(at, "cache_policy_weights")[0], policy_rows)
    close(one_panel(at, "cache_full_weights")[0], trace.weights[head])
    for t in range(n):
        at.slider("w_cache_step").set_value(t).run()
        assert not at.exception
        kept = held_keys(policy, window, sinks, t)
        gone = [j for j in range(t + 1) if j not in kept]
        (sentence,) = [m.value for m in at.markdown if m.value.endswith(f"(head {head}, step {t})")]
        if gone:
            full_row = trace.weights[head, t]
            gain = policy_rows[t].sum() - full_row[kept].sum()
            expected = [full_row[gone].sum(), gain]
            if null:
                expected += [1 - full_row.sum(), 1 - policy_rows[t].sum()]
            assert_states(sentence, expected)
        else:
            assert "**" not in sentence.split("(head")[0], sentence  # no number: nothing evicted
        table = next(d.value for d in at.dataframe if "position in the text" in d.value.columns)
        assert list(table["position in the text"]) == kept
        assert list(table["token"]) == [result.query_labels[j] for j in kept]
        assert list(table["position used"]) == kept  # original positions: where the token stood
        assert list(table["distance to the query"]) == [t - j for j in kept]


# ---- FlashAttention: one tile per step -------------------------------------------------------------------------

FLASH_GRID = [{"mask": mask, "br": br, "bc": bc, **extra}
              for (mask, extra), (br, bc) in itertools.product(
                  (("causal", {}), ("window", {"window": "1", "kv_heads": "2"}),
                   ("padding", {"valid_len": "4", "kv_heads": "2", "pe": "alibi"}),
                   ("causal", {"kv_tokens": "x y z w v", "kv_heads": "2", "mask": "none"})),
                  (("2", "2"), ("3", "2"), ("1", "4")))]


def tile_order(tq: int, tk: int, br: int, bc: int) -> list[tuple[int, int, int, int]]:
    """(row start, row stop, col start, col stop) of every tile, query blocks one after another."""
    return [(r, min(r + br, tq), c, min(c + bc, tk)) for r in range(0, tq, br) for c in range(0, tk, bc)]


def running_state(logits: np.ndarray, v: np.ndarray, rows: slice, upto: int):
    """m, ℓ and O~/ℓ of the rows ``rows`` over keys 0..upto-1, from the engine's logits (−∞ masked)."""
    seen = logits[rows, :upto]  # (r, c)
    m = seen.max(axis=1) if upto else np.full(seen.shape[0], -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.where(np.isneginf(seen), 0.0, np.exp(seen - np.where(np.isneginf(m), 0.0, m)[:, None]))
    ell = e.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (e @ v[:upto]) / ell[:, None]
    return m, ell, out


@pytest.mark.parametrize("extra", FLASH_GRID, ids=lambda e: "-".join(e.values()).replace(" ", "_"))
def test_flash_numbers_at_every_tile(extra):
    params = {"tokens": TOKENS, "d_model": "16", "heads": "4", "seed": "2", **extra}
    result = engine_run(params)
    trace = result.trace
    head = 3
    logits, v = trace.logits[head], trace.v[trace.kv_head_of(head)]
    assert trace.kv_head_of(head) == head // (trace.n_heads // trace.kv_heads)
    tq, tk = logits.shape
    br, bc = int(params["br"]), int(params["bc"])
    tiles = tile_order(tq, tk, br, bc)
    skipped = [np.isneginf(logits[r0:r1, c0:c1]).all() for r0, r1, c0, c1 in tiles]
    at = open_page("flash", params)
    control(at, "w_head").set_value(head).run()
    for index, (r0, r1, c0, c1) in enumerate(tiles):
        if len(tiles) > 1:
            at.select_slider("w_tile").set_value(index).run()
            step = at.select_slider("w_tile")
            assert_states(step.format_func(step.value), [index + 1, len(tiles)])  # "5 of 9": one base on the screen
        assert not at.exception, at.exception
        shown = metrics(at)
        if sum(skipped):
            assert_states(shown["Tiles skipped"], [sum(skipped[: index + 1]), sum(skipped)])
        else:
            assert shown["Tiles skipped"] == "none"
        finished = [r for r in range(tq) if tiles.index(max(t for t in tiles if t[0] <= r < t[1])) <= index]
        if finished:
            assert_tiny(shown["max |Δ| O vs engine"])
        else:
            assert shown["max |Δ| O vs engine"] == "—"
        m_old, ell_old, _ = running_state(logits, v, slice(r0, r1), c0)
        m_new, ell_new, partial = running_state(logits, v, slice(r0, r1), c1)
        state = next(d.value for d in at.dataframe if "m_new" in d.value.columns)
        assert list(state.index) == result.query_labels[r0:r1]
        np.testing.assert_allclose(state["m_old"].to_numpy(dtype=float), m_old, atol=1e-12)
        np.testing.assert_allclose(state["m_new"].to_numpy(dtype=float), m_new, atol=1e-12)
        np.testing.assert_allclose(state["ℓ_old"].to_numpy(dtype=float), ell_old, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(state["ℓ_new"].to_numpy(dtype=float), ell_new, rtol=1e-12, atol=1e-12)
        # O after this step: finished rows are the engine's head output, this tile's rows the partial, later blank.
        o_shown, _ = one_panel(at, "flash_partial")
        close(o_shown[:r0], trace.heads[head, :r0])
        started = ~np.isneginf(m_new)
        close(o_shown[r0:r1][started], partial[started])
        assert np.isnan(o_shown[r1:]).all()
        sentence = next(m.value for m in at.markdown if m.value.startswith("Tile ("))
        assert_states(sentence, [r0 // br, c0 // bc])
        first = re.search(r"Rows? ((?:\*\*\d+:[^*]+\*\*(?:, | and )?)+) sees? (?:its|their) first key here: "
                          r"m starts at (.*?) \(the", sentence)
        if first:  # each row named: its first key, m starts at its logit
            rows = [int(n) - r0 for n in re.findall(r"\*\*(\d+):", first.group(1))]
            assert all(np.isneginf(m_old[r]) for r in rows), (rows, m_old)
            assert_states(first.group(2), [m_new[r] for r in rows])
        grew = re.search(r"In row \*\*(\d+):", sentence)
        if grew:
            r = int(grew.group(1)) - r0
            old, new = m_old[r], m_new[r]
            assert_states(sentence.split("grew from")[1], [old, new, old, new, np.exp(old - new)])
        done = re.search(r"last tile of rows? ((?:\*\*\d+:[^*]+\*\*(?:, | and )?)+):", sentence)
        before = [r for r in range(tq) if tiles.index(max(t for t in tiles if t[0] <= r < t[1])) < index]
        assert ([] if done is None else [int(n) for n in re.findall(r"\*\*(\d+):", done.group(1))]) == \
            [r for r in finished if r not in before]
        tile_map = next(d.value for d in at.dataframe if d.value.index.name and "query block" in d.value.index.name)
        marks = tile_map.to_numpy()
        for other, (s0, _, t0, _) in enumerate(tiles):
            mark = marks[s0 // br, t0 // bc]
            if other == index:
                assert mark.startswith("▶"), mark
            assert ("skip" in mark) == skipped[other], (other, mark)
    sentence = next(m.value for m in at.markdown if m.value.startswith("The kernel wrote"))
    assert_states(sentence, [tq * (v.shape[1] + 1), head, tq * tk])
    rebuilt = next(m.value for m in at.markdown if "log-sum-exp" in m.value and "max |Δ|" in m.value)
    assert_states(rebuilt.split("max |Δ|")[-1], [TINY])


# ---- Decoding: RoPE's score by offset, a table beside its chart -----------------------------------------------------

@pytest.mark.parametrize("head", [0, 3])
def test_rope_offset_chart_rows_are_query_positions_and_its_table_the_offsets(head):
    params = decoding_params({"pe": "rope", "rope_base": "100"})
    result = engine_run(params, decoder=True)
    trace = result.trace
    q, k = trace.q_unrotated[head, 0], trace.k_unrotated[trace.kv_head_of(head), 1]
    n = len(result.query_labels)
    scores = np.array([[rope_turned(q, p, 100.0) @ rope_turned(k, r, 100.0) for r in range(n)] for p in range(n)])
    at = open_page("decoding", params)
    at.selectbox("w_dec_head").set_value(head).run()
    assert not at.exception
    chart, data = one_panel(at, "dec_rope_offsets")
    close(chart, scores)  # rows: the query's position p, columns: the key's p′
    assert [str(y) for y in data["y"]][:2] == ["p=0", "p=1"]
    table = next(d.value for d in at.dataframe if "offset p − p′" in d.value.columns)
    for offset, score in zip(table["offset p − p′"], table["score"], strict=True):
        p = max(offset, 0)
        np.testing.assert_allclose(score, scores[p, p - offset], atol=1e-12)
    (sentence,) = [m.value for m in at.markdown if "largest spread along a diagonal" in m.value]
    assert_states(sentence, [head, 0, 1, 0, n - 1, TINY])
