"""The lessons' data: every claim holds, and each one is re-derived here by a separate computation."""

from __future__ import annotations

import importlib
import sys
import types
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

import ui.pages.lessons
from mha_core.config import MHAConfig, run
from mha_core.contributions import head_output_shares
from mha_core.diagnostics import renormalised_rows
from mha_core.presets import PRESET_INITS
from ui.pages.lessons import (
    LESSON_MODULES,
    LESSONS,
    PRESET_CONFIGS,
    SENTENCE,
    Grid,
    Lesson,
    app_root,
    contributions_of,
    explorer_query,
    lesson_label,
    lesson_query,
    short_params,
)
from ui.pages.lessons.registry import load_lessons
from ui.pages.lessons.saturation import saturation_stats
from ui.state.urlstate import VIEW_DEFAULTS, config_from_params, view_from_params

ROW_SUM_TOL = 1e-12  # float64 rows of a softmax sum to 1 within this


def query_dict(query: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(query).query, keep_blank_values=True))


@pytest.fixture(scope="module")
def findings():
    """Each lesson's findings, computed once for the module."""
    return {key: lesson.findings(lesson.panels) for key, lesson in LESSONS.items()}


def test_the_six_confusions_of_issue_6_each_have_a_lesson():
    assert list(LESSONS)[:6] == ["wo", "causal", "colours", "average", "saturation", "sqrt_dk"]
    assert list(LESSONS)[6:10] == ["rope", "alibi", "gqa", "kv_cache"]  # issue 12
    assert list(LESSONS)[10:13] == ["differential", "mla_cache", "linear_state"]  # issue 26
    assert list(LESSONS)[13:17] == ["online_softmax", "never_stored", "causal_skip", "sinks"]  # issue 25
    assert list(LESSONS)[17] == "tokens"  # issue 37; issue 34's lessons follow
    assert {"sparse", "gated_attention", "learned_sinks", "qknorm", "deltanet"} <= set(list(LESSONS)[18:])  # issue 34
    assert list(LESSONS)[-1] == "induction_ablation"  # issue 35
    for lesson in LESSONS.values():
        assert lesson.title and lesson.question and lesson.source
        sentences = [s for s in lesson.explanation.replace("..", "").split(". ") if s.strip()]
        assert 2 <= len(sentences) <= 5, f"{lesson.key}: explanation should be a few sentences, got {len(sentences)}"
        assert 1 <= len(lesson.panels) <= 2


@pytest.mark.parametrize("key", list(LESSONS))
def test_every_claim_of_every_lesson_holds(findings, key):
    claims = findings[key].claims
    assert claims, f"{key} states no claim"
    failing = [c.text for c in claims if not c.holds]
    assert not failing, failing


@pytest.mark.parametrize("key", list(LESSONS))
def test_every_figure_holds_weights_or_shares_between_0_and_1(findings, key):
    for figure in findings[key].figures:
        data = figure.matrices if isinstance(figure, Grid) else figure.matrix
        if getattr(figure, "kind", "weights") == "signed_weights":  # differential attention: A₁ − λA₂ may be < 0
            assert np.all(np.abs(data) <= 1 + 1e-12) and data.min() < 0
        else:
            assert np.all((data >= 0) & (data <= 1 + 1e-12))
        if isinstance(figure, Grid):
            assert len(figure.titles) == data.shape[0]
            assert data.shape[1:] == (len(figure.row_labels), len(figure.col_labels))


@pytest.mark.parametrize("key", list(LESSONS))
def test_each_panel_link_restores_exactly_its_configuration_and_view(key):
    for panel in LESSONS[key].panels:
        params = query_dict(explorer_query(panel.config, panel.view))
        config, messages = config_from_params(params)
        assert messages == []
        assert config == panel.config
        view, view_messages = view_from_params(params, config)
        assert view_messages == []
        assert view == {**VIEW_DEFAULTS, **panel.view}


def test_every_lesson_module_in_the_folder_is_in_the_registry_once():
    folder = Path(ui.pages.lessons.__file__).parent
    not_lessons = {"__init__", "records", "links", "presets", "registry", "stored"}
    on_disk = {p.stem for p in folder.glob("*.py")} - not_lessons
    assert set(LESSON_MODULES) == on_disk, "a lesson module is missing from registry.LESSON_MODULES (or listed twice)"
    assert len(LESSON_MODULES) == len(set(LESSON_MODULES))
    keys = [lesson.key for name in LESSON_MODULES for lesson in importlib.import_module(f"ui.pages.lessons.{name}").LESSONS]
    assert keys == list(LESSONS)


def test_the_picker_labels_number_the_lessons_and_use_their_short_titles():
    assert lesson_label("wo") == "1. W_O"
    assert lesson_label("causal") == "2. Causal mask"
    assert lesson_label("kv_cache") == "10. KV cache"
    assert lesson_label("sinks") == "17. Attention sinks"
    assert lesson_label("tokens") == "18. Tokens across scripts"
    assert lesson_label("learned_sinks") == f"{list(LESSONS).index('learned_sinks') + 1}. Learned sinks"
    assert lesson_label("induction_ablation") == f"{len(LESSONS)}. Induction heads off"
    short = [lesson.short_title for lesson in LESSONS.values()]
    assert all(short) and len(set(short)) == len(short)


def _module_with(*lessons: Lesson) -> types.ModuleType:
    module = types.ModuleType("ui.pages.lessons.extra_lesson")
    module.LESSONS = lessons
    return module


def test_a_new_lesson_is_one_module_and_one_line(monkeypatch):
    extra = replace(LESSONS["wo"], key="extra", title="An extra lesson", short_title="Extra")
    monkeypatch.setitem(sys.modules, "ui.pages.lessons.extra_lesson", _module_with(extra))
    lessons = load_lessons((*LESSON_MODULES, "extra_lesson"))
    assert list(lessons) == [*LESSONS, "extra"]
    assert lessons["extra"] is extra


def test_a_lesson_key_used_twice_is_refused(monkeypatch):
    twin = replace(LESSONS["causal"], title="Another causal lesson")
    monkeypatch.setitem(sys.modules, "ui.pages.lessons.extra_lesson", _module_with(twin))
    with pytest.raises(ValueError, match="'causal'"):
        load_lessons((*LESSON_MODULES, "extra_lesson"))


def test_short_links_leave_out_defaults_but_keep_every_change():
    assert short_params(MHAConfig()) == {}
    assert short_params(MHAConfig(init="identity")) == {"init": "identity"}
    assert short_params(MHAConfig(output_projection=False), {"avg": True}) == {"wo": "0", "avg": "1"}
    assert lesson_query("causal") == "?lesson=causal"


def test_app_root_strips_this_pages_path_only():
    assert app_root("http://127.0.0.1:8612/lessons", "lessons") == "http://127.0.0.1:8612"
    assert app_root("https://x.streamlit.app/sub/lessons/", "lessons") == "https://x.streamlit.app/sub"
    assert app_root("http://127.0.0.1:8612/", "lessons") == "http://127.0.0.1:8612"
    assert app_root(None, "lessons") == ""


# --- Lesson 1: W_O -------------------------------------------------------------------------


def _output_with_head_removed(config: MHAConfig, head: int) -> tuple[np.ndarray, np.ndarray]:
    """(output, output with head ``head``'s block of the concatenation zeroed), rebuilt by hand."""
    result = run(config)
    concat = np.array(result.trace.concat)  # (T, nh*hv)
    hv = concat.shape[1] // config.n_heads
    removed = concat.copy()
    removed[:, head * hv : (head + 1) * hv] = 0
    w_o = result.weights.w_o
    if w_o is None:
        return concat, removed
    return concat @ w_o, removed @ w_o


def test_wo_lesson_without_w_o_removing_a_head_changes_only_its_own_columns():
    without, with_wo = (p.config for p in LESSONS["wo"].panels)
    assert not without.output_projection and with_wo.output_projection
    hv = without.d_model // without.n_heads
    for head in range(without.n_heads):
        full, removed = _output_with_head_removed(without, head)
        changed = np.flatnonzero(np.any(full != removed, axis=0))
        assert set(changed) <= set(range(head * hv, (head + 1) * hv))
        full, removed = _output_with_head_removed(with_wo, head)
        assert np.all(np.any(np.abs(full - removed) > 1e-9, axis=0)), "with W_O a head reaches every column"


@pytest.mark.parametrize("output_projection", [True, False])
def test_head_contributions_add_up_to_the_layers_output(output_projection):
    config = replace(LESSONS["wo"].panels[1].config, output_projection=output_projection)
    contributions = contributions_of(config)
    assert contributions.shape == (config.n_heads, len(config.tokens), config.d_model)
    np.testing.assert_allclose(contributions.sum(axis=0), run(config).trace.output, atol=1e-12)


def test_wo_lesson_share_tables_agree_with_the_columns_a_head_reaches():
    without, with_wo = (p.config for p in LESSONS["wo"].panels)
    shares = head_output_shares(contributions_of(without))
    hv = without.d_model // without.n_heads
    expected = np.kron(np.eye(without.n_heads), np.ones((1, hv)))  # (nh, C): block h owns columns h*hv..
    np.testing.assert_array_equal(shares, expected)
    np.testing.assert_allclose(head_output_shares(contributions_of(with_wo)).sum(axis=0), 1.0, atol=1e-12)


# --- Lesson 2: causal --------------------------------------------------------------------------


def test_causal_lesson_upper_triangle_is_zero_and_rows_sum_to_one():
    free, causal = (p.config for p in LESSONS["causal"].panels)
    assert free.mask == "none" and causal.mask == "causal"
    weights = run(causal).trace.weights[0]
    t = len(causal.tokens)
    assert np.all(weights[np.triu_indices(t, k=1)] == 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=ROW_SUM_TOL)


def test_causal_rows_are_the_unmasked_rows_renormalised_over_keys_0_to_i():
    free, causal = (p.config for p in LESSONS["causal"].panels)
    w_free, w_causal = run(free).trace.weights[0], run(causal).trace.weights[0]
    for i in range(len(free.tokens)):
        kept = w_free[i, : i + 1]
        np.testing.assert_allclose(w_causal[i, : i + 1], kept / kept.sum(), atol=1e-14)
    tri = np.tril(np.ones_like(w_free, dtype=bool))
    np.testing.assert_allclose(renormalised_rows(w_free, tri), w_causal, atol=1e-14)


# --- Lesson 3: colours ---------------------------------------------------------------------------


def test_colours_lesson_brightest_head_is_not_the_one_that_moves_the_output_most():
    config = LESSONS["colours"].panels[0].config
    result = run(config)
    weights = result.trace.weights
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=ROW_SUM_TOL)
    brightest = int(np.argmax(weights.max(axis=-1).mean(axis=-1)))
    sizes = []
    for head in range(config.n_heads):
        full, removed = _output_with_head_removed(config, head)
        sizes.append(np.linalg.norm(full - removed))  # size of that head's contribution to the output
    assert brightest != int(np.argmax(sizes))


# --- Lesson 4: average --------------------------------------------------------------------------


def test_average_lesson_average_is_flatter_than_every_head():
    panel = LESSONS["average"].panels[0]
    assert panel.view.get("avg") is True
    weights = run(panel.config).trace.weights
    average = weights.mean(axis=0)
    np.testing.assert_allclose(average.sum(axis=-1), 1.0, atol=ROW_SUM_TOL)
    assert average.max(axis=-1).mean() < min(weights[h].max(axis=-1).mean() for h in range(panel.config.n_heads))


# --- Lesson 5: saturation -------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [16, 64, 128])
def test_uniform_init_rows_are_sharper_than_xavier_at_each_width(d_model):
    seeds = range(5)
    row_max = {}
    for init in ("xavier", "uniform"):
        weights = [
            run(MHAConfig(tokens=SENTENCE, d_model=d_model, n_heads=4, seed=s, init=init)).trace.weights for s in seeds
        ]
        row_max[init] = float(np.mean([w.max(axis=-1).mean() for w in weights]))
    assert row_max["uniform"] > row_max["xavier"] + 0.2
    assert row_max["xavier"] < 0.6, "Xavier rows should stay far from one-hot"
    measured, _ = saturation_stats("uniform", d_model, 4, seeds=seeds)
    assert measured == pytest.approx(row_max["uniform"], abs=1e-12)


def test_saturation_lesson_panels_differ_only_in_the_init():
    xavier, uniform = (p.config for p in LESSONS["saturation"].panels)
    assert (xavier.init, uniform.init) == ("xavier", "uniform")
    assert replace(uniform, init="xavier") == xavier
    assert len(set(xavier.tokens)) == len(xavier.tokens), "repeated words would split the weight and blur the numbers"


# --- Lesson 6: sqrt(d_k) --------------------------------------------------------------------------


def test_raw_score_spread_grows_with_d_k_and_the_scaled_spread_does_not():
    spread_raw, spread_scaled = [], []
    for d_k in (4, 64):
        trace = run(MHAConfig(tokens=SENTENCE, d_model=d_k, n_heads=1, seed=3)).trace
        raw = trace.q[0] @ trace.k[0].T  # (T, T), rebuilt from q and k
        spread_raw.append(raw.std())
        spread_scaled.append((raw / np.sqrt(d_k)).std())
    assert spread_raw[1] / spread_raw[0] > 2.5  # sqrt(64 / 4) = 4 expected, with sampling noise
    assert 0.5 < spread_scaled[1] / spread_scaled[0] < 2


def test_sqrt_dk_lesson_panels_differ_only_in_the_scale():
    raw, scaled = (p.config for p in LESSONS["sqrt_dk"].panels)
    assert (raw.scale_rule, scaled.scale_rule) == ("none", "sqrt_dk")
    assert replace(raw, scale_rule="sqrt_dk") == scaled


# --- Presets -------------------------------------------------------------------------------------


def test_every_preset_has_a_configuration_and_a_short_link():
    assert list(PRESET_CONFIGS) == list(PRESET_INITS)
    for init, config in PRESET_CONFIGS.items():
        assert explorer_query(config) == f"?init={init}"
        assert config_from_params({"init": init}) == (config, [])


# ---- issue 12's lessons, re-derived by separate computations ---------------------------------


def test_rope_lesson_scores_by_offset_are_a_loop_of_2d_rotations():
    """Each pair (f, f + hs/2) turned by p * 10000^(-2f/hs), written as a loop of 2x2 rotations."""
    config = LESSONS["rope"].panels[0].config
    trace = run(config).trace
    q, k = trace.q_unrotated[0, 0], trace.k_unrotated[0, 1]
    half = q.size // 2

    def turned(x, p):
        out = x.copy()
        for f in range(half):
            a = p * config.rope_base ** (-2 * f / q.size)
            out[f], out[f + half] = np.cos(a) * x[f] - np.sin(a) * x[f + half], np.sin(a) * x[f] + np.cos(a) * x[f + half]
        return out

    assert turned(q, 4) @ turned(k, 1) == pytest.approx(turned(q, 3) @ turned(k, 0), abs=1e-12)
    assert turned(q, 0) @ turned(k, 0) == pytest.approx(q @ k, abs=1e-12)
    np.testing.assert_allclose(trace.q[0, 2], turned(trace.q_unrotated[0, 2], 2), atol=1e-12)


def test_alibi_lesson_far_keys_lose_weight_in_every_head():
    config = LESSONS["alibi"].panels[0].config
    with_bias, without = run(config).trace.weights, run(replace(config, pe="none")).trace.weights
    t = len(config.tokens)
    far = np.abs(np.subtract.outer(np.arange(t), np.arange(t))) >= 3
    assert np.all((with_bias * far).sum(axis=(1, 2)) < (without * far).sum(axis=(1, 2)))


def test_gqa_lesson_cache_sizes_are_kv_times_tokens_times_head_sizes():
    grouped, single = (p.config for p in LESSONS["gqa"].panels)
    t, hs = len(grouped.tokens), grouped.head_size
    for config, kv in ((grouped, 2), (single, 1)):
        trace = run(config).trace
        assert trace.k.size + trace.v.size == kv * t * 2 * hs
        np.testing.assert_allclose(trace.k[0], run(config).x_kv @ run(config).weights.w_k[:, :hs], rtol=0, atol=1e-12)


def test_kv_cache_lesson_rows_equal_an_unmasked_softmax_over_the_prefix():
    """Row t of decoding = softmax over keys 0..t of the plain scores, computed here without a mask."""
    config = LESSONS["kv_cache"].panels[0].config
    free = run(replace(config, mask="none")).trace
    causal = run(config).trace
    for t in range(len(config.tokens)):
        logits = free.logits[:, t, : t + 1]
        expected = np.exp(logits - logits.max(-1, keepdims=True))
        expected /= expected.sum(-1, keepdims=True)
        np.testing.assert_allclose(causal.weights[:, t, : t + 1], expected, rtol=0, atol=1e-12)
