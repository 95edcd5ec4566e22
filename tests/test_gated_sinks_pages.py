"""Gated attention and learned sinks on every page (issue 34): each opened from a link, and every number a page
shows compared with what this file computes in NumPy from the run's input, its weights and the learned
parameters (σ(X W_θ) for the gate; the gpt-oss concatenate-softmax-drop for the sinks), never with the kernel's
own function. Decoding is the engine's decoding loop against full causal attention; the notebook is executed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from mha_core.decoding import decode_tokens, decoder_layer
from tests.app_opener import open_app
from tests.test_app_heads import app, decode, grid_matrices
from tests.test_app_heads import charts as heads_charts
from tests.test_app_step_by_step import charts as step_charts
from tests.test_app_step_by_step import open_page, z_of
from ui.state.urlstate import config_from_params

FIGURE = 1e-6  # figures travel as float32
GATED = {"tokens": "the cat sat on a mat", "d_model": "16", "heads": "4", "seed": "3", "mask": "causal",
         "kernel": "gated", "pe": "rope"}
SINK = {**GATED, "kernel": "sink", "pe": "alibi", "kv_heads": "2"}


def result_of(params: dict[str, str]):
    config, messages = config_from_params(params)
    assert messages == []
    return run(config)


def gate_by_hand(result) -> np.ndarray:
    """σ(X W_θ) per head (nh, T, hv), from the run's input and its learned W_θ."""
    nh = result.config.n_heads
    g = 1.0 / (1.0 + np.exp(-(result.x_q @ result.kernel_params.w_gate)))  # (T, nh*hv)
    return g.reshape(g.shape[0], nh, -1).transpose(1, 0, 2)  # (nh, T, hv)


def sink_weights_by_hand(result) -> np.ndarray:
    """gpt-oss's eager attention on the run's logits: append s_h, softmax, drop the column. (nh, T, T)."""
    logits, s = result.trace.logits, result.kernel_params.logits
    combined = np.concatenate([logits, np.broadcast_to(s[:, None, None], logits.shape[:2] + (1,))], axis=-1)
    e = np.exp(combined - combined.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True))[..., :-1]


# ---- Heads ---------------------------------------------------------------------------------------


def test_heads_shows_how_far_each_gate_opens_and_the_first_tokens_share():
    result = result_of(GATED)
    at = app(GATED)
    assert not at.exception
    shown = decode(heads_charts(at)["gate_opening"]["data"][0]["z"])
    np.testing.assert_allclose(shown, gate_by_hand(result).mean(axis=-1), rtol=0, atol=FIGURE)
    table = next(d.value for d in at.dataframe if "weight on first token" in d.value.columns)
    weights = result.trace.weights
    np.testing.assert_allclose(table["weight on first token"].to_numpy(), weights[..., 0].mean(axis=-1), atol=1e-12)
    v0 = result.trace.values_per_query_head()[:, 0]  # (nh, hv)
    off = np.linalg.norm(weights[..., 0, None] * v0[:, None], axis=-1).mean(axis=-1)  # (nh,)
    on = np.linalg.norm(weights[..., 0, None] * v0[:, None] * gate_by_hand(result), axis=-1).mean(axis=-1)
    np.testing.assert_allclose(table["first token hands on, gate off"].to_numpy(), off, atol=1e-12)
    np.testing.assert_allclose(table["first token hands on, gate on"].to_numpy(), on, atol=1e-12)
    assert np.all(on < off)  # σ < 1: the gate only ever closes
    for panel, want in zip(grid_matrices(at), weights, strict=True):  # the weights are the softmax head's
        np.testing.assert_allclose(np.nan_to_num(panel), np.where(result.mask, want, 0.0), atol=FIGURE)


def test_heads_shows_each_heads_sink_share_and_says_what_rows_sum_to():
    result = result_of(SINK)
    at = app(SINK)
    assert not at.exception
    want = sink_weights_by_hand(result)
    share = 1.0 - want.sum(axis=-1)  # (nh, T)
    np.testing.assert_allclose(decode(heads_charts(at)["sink_share"]["data"][0]["z"]), share, rtol=0, atol=FIGURE)
    table = next(d.value for d in at.dataframe if "mean sink share" in d.value.columns)
    np.testing.assert_allclose(table["s_h"].to_numpy(), result.kernel_params.logits, atol=0)
    np.testing.assert_allclose(table["mean sink share"].to_numpy(), share.mean(axis=-1), atol=1e-12)
    for panel, w in zip(grid_matrices(at), want, strict=True):
        np.testing.assert_allclose(np.nan_to_num(panel), np.where(result.mask, w, 0.0), atol=FIGURE)
    words = f"1 − Σ = {share.min():.3f} to {share.max():.3f} of a row here"
    assert any("Learned sinks (gpt-oss): each row sums to less than 1" in c.value and words in c.value
               for c in at.caption)


def test_the_take_apart_map_of_a_gated_head_carries_the_gate():
    result = result_of(GATED)
    at = app(GATED)
    at.session_state["apart_open"] = True
    at.run()
    assert not at.exception
    shown = decode(heads_charts(at)["apart_carried"]["data"][0]["z"])  # head 0's panel
    t, w_o = result.trace, result.weights.w_o
    v, g = t.values_per_query_head(), gate_by_hand(result)
    hv = v.shape[-1]
    rows = w_o[:hv]  # head 0's rows of W_O
    want = np.array([[np.linalg.norm(t.weights[0, i, j] * (g[0, i] * v[0, j]) @ rows) for j in range(v.shape[1])]
                     for i in range(t.weights.shape[1])])
    np.testing.assert_allclose(np.nan_to_num(shown), np.where(result.mask, want, 0.0), rtol=0, atol=FIGURE)


# ---- Step by step --------------------------------------------------------------------------------


def test_step_by_step_has_a_gate_step_with_the_engines_gate_and_gated_output():
    result = result_of(GATED)
    shown = step_charts(open_page(**GATED))
    gate = gate_by_hand(result)
    np.testing.assert_allclose(z_of(shown["G_0 = σ(X W_θ,0): the gate, per token and feature"]), gate[0], atol=FIGURE)
    np.testing.assert_allclose(z_of(shown["Y′_0 = Y_0 ⊙ G_0 (what the heads concatenate)"]),
                               result.trace.heads[0] * gate[0], atol=FIGURE)
    opening = shown["How far each head's gate opens: the mean of its 4 gates, per token"]
    np.testing.assert_allclose(z_of(opening), gate.mean(axis=-1), atol=FIGURE)


def test_step_by_step_appends_the_sink_column_and_drops_it():
    result = result_of(SINK)
    shown = step_charts(open_page(**SINK))
    with_sink = z_of(shown["[L_0 | s_0]: the logits with the sink's column"])
    assert with_sink.shape == (6, 7)
    np.testing.assert_allclose(with_sink[:, -1], result.kernel_params.logits[0], atol=FIGURE)
    want = sink_weights_by_hand(result)
    full = z_of(shown["softmax over the row with the sink (sums to 1)"])
    np.testing.assert_allclose(np.nansum(full, axis=-1), 1.0, atol=1e-5)  # masked cells are drawn grey (NaN)
    assert np.isnan(full[0, 1]) and np.isfinite(full[:, -1]).all()  # the sink is never masked
    np.testing.assert_allclose(np.nan_to_num(z_of(shown["A_0: the sink's column dropped"])), want[0], atol=FIGURE)
    np.testing.assert_allclose(z_of(shown["The sink's share of each row, 1 − Σ_j A_ij"]), 1 - want.sum(-1),
                               atol=FIGURE)


# ---- Decoding, Compare, the lessons, the refusals -----------------------------------------------------


@pytest.mark.parametrize("params", [GATED, SINK])
def test_decoding_token_by_token_gives_the_full_layers_rows_and_output(params):
    result = result_of(params)
    c = result.config
    layer = decoder_layer(result.weights, c.n_heads, kernel=c.kernel, kernel_params=result.kernel_params,
                          kv_heads=c.key_value_heads, pe=c.pe, rope_base=c.rope_base)
    for step in decode_tokens(result.x_q, layer):
        t = step.position
        np.testing.assert_allclose(step.attended.weights[:, 0], result.trace.weights[:, t, : t + 1], atol=1e-12)
        np.testing.assert_allclose(step.output[0], result.trace.output[t], atol=1e-12)


@pytest.mark.parametrize("page", ["app_pages/decoding.py", "app_pages/compare.py", "app_pages/about.py",
                                  "app_pages/flash.py"])
@pytest.mark.parametrize("params", [GATED, SINK])
def test_every_page_opens_with_the_kernel(page, params):
    at = open_app(page, **params)
    if page.endswith("flash.py") and params is SINK:  # FlashAttention tiles only a row marked ``tiled``: the fix
        assert [e.value for e in at.error] == ["The tiled kernel cannot run these settings: the sink kernel's weights "
                                               "are not the softmax of the logits that this tile loop computes; choose "
                                               "Attention kernel: softmax."]
    else:
        assert not at.error, [e.value for e in at.error]


def test_flash_tiles_a_gated_head_as_softmax_rows_then_gates_its_output():
    """The tiles are the softmax head's (the engine's logits); what the head hands on after the kernel is
    (A·V) ⊙ σ(X W_θ) computed here, on the finished rows, and the live gap says so."""
    from tests.test_app_flash import metric
    from tests.test_app_step_by_step import charts as all_charts

    at = open_app("app_pages/flash.py", **GATED, head="2", br="2", bc="3", tile="3")
    assert not at.error, [e.value for e in at.error]
    result = result_of(GATED)
    trace = result.trace
    by_hand = np.einsum("hqk,hkv->hqv", trace.weights, trace.v[[trace.kv_head_of(h) for h in range(4)]])
    handed = by_hand * gate_by_hand(result)  # (nh, Tq, hv)
    figures = all_charts(at)
    so_far = z_of(figures["O after step 4, after the kernel (head 2)"])  # rows 0..3 finished (blocks of 2, keys 0..5)
    assert np.isnan(so_far[4:]).all()
    np.testing.assert_allclose(so_far[:4], handed[2, :4], rtol=0, atol=FIGURE)
    np.testing.assert_allclose(z_of(figures["Head 2's columns of the engine's concatenation"]), handed[2], rtol=0,
                               atol=FIGURE)
    np.testing.assert_allclose(z_of(figures["softmax(S) V from the engine (head 2)"]), by_hand[2], rtol=0, atol=FIGURE)
    assert float(metric(at, "max |Δ| handed on vs engine")) <= 1e-12
    rules = next(f.value for f in at.dataframe if "setting" in f.value.columns)
    assert "gated: after the kernel" in list(rules["setting"])


@pytest.mark.parametrize("lesson", ["gated_attention", "learned_sinks"])
def test_the_lessons_open_and_every_claim_holds(lesson):
    from ui.pages.lessons.registry import LESSONS

    found = LESSONS[lesson].findings(LESSONS[lesson].panels)
    assert all(claim.holds for claim in found.claims), [c.text for c in found.claims if not c.holds]
    at = open_app("app_pages/lessons.py", lesson=lesson)
    assert not at.error


def test_the_null_key_with_sinks_and_mla_with_either_are_refused_with_a_fix():
    config, messages = config_from_params({**SINK, "null": "1"})
    assert not config.null_key and any("learned sinks generalise the null key" in m for m in messages)
    config, messages = config_from_params({**GATED, "pe": "none", "mla_rank": "4"})
    assert config.mla_rank == 0 and any("gated attention" in m for m in messages)
    at = app({**SINK, "null": "1"})
    assert not at.exception and any("null key" in w.value for w in at.warning)


def test_the_gate_reads_each_decoded_tokens_own_input():
    """A token's gate comes from its own x: decoding with another token's input would change the output."""
    result = result_of(GATED)
    c = result.config
    layer = decoder_layer(result.weights, c.n_heads, kernel="gated", kernel_params=result.kernel_params, pe="rope")
    steps = list(decode_tokens(result.x_q, layer))
    moved = replace(result.kernel_params, w_gate=np.roll(result.kernel_params.w_gate, 1, axis=0))
    other = list(decode_tokens(result.x_q, replace(layer, kernel_params=moved)))
    assert all(np.array_equal(a.attended.weights, b.attended.weights) for a, b in zip(steps, other, strict=True))
    assert max(np.abs(a.output - b.output).max() for a, b in zip(steps, other, strict=True)) > 1e-3
    assert MHAConfig(kernel="gated").attention_kernel.reads_input


# ---- in the other languages ------------------------------------------------------------------------


@pytest.mark.parametrize(("lang", "gate_title", "sink_title"), [
    ("zh-CN", "每个头的门控开得多大", "每个头的汇聚点拿走多少"),
    ("es", "Cuánto se abre la compuerta de cada cabeza", "Lo que se lleva el sumidero de cada cabeza"),
])
def test_the_views_speak_the_language_and_show_the_same_numbers(once, lang, gate_title, sink_title):
    for params, title, key in ((GATED, gate_title, "gate_opening"), (SINK, sink_title, "sink_share")):
        english, other = once(app, params), app({**params, "lang": lang})  # one English run per kernel
        assert not other.exception
        assert title in [h.value for h in other.subheader]
        assert not any(h.value in ("How far each head's gate opens", "What each head's sink takes")
                       for h in other.subheader)  # no msgid of these views left in English
        same = [decode(heads_charts(at)[key]["data"][0]["z"]) for at in (english, other)]
        assert np.array_equal(*same)


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
def test_the_steps_and_lessons_are_translated(lang):
    from ui.i18n import _, using_language

    at = open_page(**{**SINK, "lang": lang})
    with using_language(lang):
        title = _("Softmax with a learned sink, its column dropped (sinks)")
        lesson = _("Gated attention: a gate after A·V, and why the first token no longer has to take the weight")
    assert title != "Softmax with a learned sink, its column dropped (sinks)"
    assert any(title in h.value for h in at.subheader) or any(title in m.value for m in at.markdown)
    shown = open_app("app_pages/lessons.py", lesson="gated_attention", lang=lang)
    assert any(lesson in t.value for t in [*shown.title, *shown.header, *shown.subheader, *shown.markdown])


# ---- the static pack ---------------------------------------------------------------------------------


def test_the_static_pack_draws_both_kernels_weights_as_the_engine_makes_them(tmp_path):
    from deploy import static_pack
    from tests.test_static_pack import decode, page_data
    from tests.test_static_pack_kernels import assert_shows, page_text

    lines = ["?kernel=gated&mask=causal&tokens=the+cat+sat+on+a+mat",
             "?kernel=sink&mask=causal&tokens=the+cat+sat+on+a+mat"]
    static_pack.build_pack(tmp_path, lines, lessons=())  # the links' pages only
    for number, params in ((1, {"kernel": "gated"}), (2, {"kernel": "sink"})):
        result = result_of({"tokens": "the cat sat on a mat", "mask": "causal", **params})
        weights = result.trace.weights
        if params["kernel"] == "sink":  # the weights by hand: gpt-oss's concatenate, softmax, drop
            weights = sink_weights_by_hand(result)
        shown = page_data(tmp_path / f"link-{number}.html")["figures"]
        assert len(shown) == result.trace.n_heads + 1  # the heads, then the kernel's own section (tested below)
        for figure, want in zip(shown, weights, strict=False):
            assert_shows(decode(figure["data"][0]["z"]).astype(np.float64), want, result.mask)
    assert "each row sums to less than 1" in page_text(tmp_path, 2)


def test_the_static_packs_flash_page_gates_the_tiled_output_as_computed_here():
    """A FlashAttention link with the gated kernel: the O ⊙ gate panel so far and the engine's concatenation panel
    are (A·V) ⊙ σ(X W_θ) computed here, on the finished rows."""
    from deploy import static_pack
    from tests.test_static_pack import decode

    page = static_pack.link_page(1, "flash?tokens=the+cat+sat+on+a+mat&d_model=16&heads=4&seed=3&mask=causal"
                                    "&kernel=gated&pe=rope&head=2&br=2&bc=3&tile=3", "")
    panels = {p.title: decode(p.figure["data"][0]["z"]).astype(np.float64) for s in page.sections for p in s.panels}
    result = result_of(GATED)
    trace = result.trace
    handed = (trace.weights[2] @ trace.v[trace.kv_head_of(2)]) * gate_by_hand(result)[2]  # (Tq, hv)
    so_far = panels["O after step 4, after the kernel (head 2)"]
    assert np.isnan(so_far[4:]).all()
    np.testing.assert_allclose(so_far[:4], handed[:4], rtol=0, atol=FIGURE)
    np.testing.assert_allclose(panels["Head 2's columns of the engine's concatenation"], handed, rtol=0, atol=FIGURE)


@pytest.mark.parametrize("params", [GATED, SINK])
def test_the_static_packs_heads_page_carries_the_kernels_own_section_with_the_numbers_computed_here(params):
    """The Heads sections the kernel's record names (gate opening, sink share) are in the pack's Heads page: the
    heads × queries heatmap and its table, against the gate and the rows' sums computed here."""
    import re

    from deploy import static_pack
    from tests.test_static_pack import decode

    query = "&".join(f"{name}={value.replace(' ', '+')}" for name, value in params.items())
    page = static_pack.link_page(1, f"?{query}", "")
    panels = {p.title: decode(p.figure["data"][0]["z"]).astype(np.float64) for s in page.sections for p in s.panels}
    result = result_of(params)
    if params is GATED:
        expected = gate_by_hand(result).mean(axis=-1)  # (nh, Tq)
        shown = panels["Mean gate σ(X W_θ) per head and token"]
        column, per_head = "mean gate", expected.mean(axis=-1)
    else:
        expected = 1.0 - result.trace.weights.sum(axis=-1)  # (nh, Tq): what the row's keys do not get
        shown = panels["Sink share 1 − Σ_j A_ij per head and token"]
        column, per_head = "mean sink share", expected.mean(axis=-1)
    np.testing.assert_allclose(shown, expected, rtol=0, atol=FIGURE)
    table_html = next(s.text for s in page.sections if column in s.text and "<table" in s.text)
    rows = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S) for row in re.findall(r"<tr[^>]*>(.*?)</tr>",
                                                                                      table_html, re.S)]
    at = next(row for row in rows if column in row).index(column)  # the header row (the index's cell first)
    printed = [float(row[at]) for row in rows if row and row[0].startswith("head ")]
    np.testing.assert_allclose(printed, per_head, rtol=1e-3)  # printed to 4 significant digits
