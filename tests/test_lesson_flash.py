"""The lessons of ui/pages/lessons/flash.py: every claim holds, and its numbers are derived again here from the engine
by other means (a softmax over the first keys, tiles counted by loops, masks built by loops)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
from scipy.special import softmax

from mha_core.attention import multi_head_attention
from mha_core.config import attention_scheme, run
from mha_core.decoder import decoder_config
from mha_core.flash import flash_of_run
from tests.test_cache_policy import policy_mask
from ui.charts.marks import FAILS, HOLDS
from ui.pages.flash import FLASH_SETTINGS
from ui.pages.lessons import explorer_query
from ui.pages.lessons.flash import (
    LESSONS,
    SINK_WINDOW,
    SKIP_BLOCKS,
    TRAFFIC_LENGTHS,
    busiest_row,
    traffic_rows,
    weights_so_far,
)
from ui.state.settings import values_of
from ui.state.urlstate import VIEW_DEFAULTS, config_from_params, read_settings, view_from_params

BY_KEY = {lesson.key: lesson for lesson in LESSONS}


@pytest.fixture(scope="module")
def findings():
    return {lesson.key: lesson.findings(lesson.panels) for lesson in LESSONS}


def test_each_lesson_asks_for_a_prediction_first_and_is_short():
    assert [lesson.key for lesson in LESSONS] == ["online_softmax", "never_stored", "causal_skip", "sinks"]
    for lesson in LESSONS:
        assert lesson.question.startswith("Predict first:")
        assert lesson.title and lesson.source and lesson.source_url.startswith("https://")
        sentences = [s for s in lesson.explanation.split(". ") if s.strip()]
        assert 2 <= len(sentences) <= 5, lesson.key
        assert 1 <= len(lesson.panels) <= 2


@pytest.mark.parametrize("key", list(BY_KEY))
def test_every_claim_holds_and_every_figure_is_between_0_and_1(findings, key):
    assert findings[key].claims
    assert [c.text for c in findings[key].claims if not c.holds] == []
    for figure in findings[key].figures:
        assert np.all((figure.matrix >= 0) & (figure.matrix <= 1 + 1e-12))


@pytest.mark.parametrize("key", list(BY_KEY))
def test_each_panel_link_restores_its_configuration_and_the_flash_link_is_valid(findings, key):
    for panel in BY_KEY[key].panels:
        params = dict(parse_qsl(urlsplit(explorer_query(panel.config, panel.view)).query))
        config, messages = config_from_params(params)
        assert (config, messages) == (panel.config, [])
        assert view_from_params(params, config) == ({**VIEW_DEFAULTS, **panel.view}, [])
    note = findings[key].note
    if "flash?" in note:
        params = dict(parse_qsl(urlsplit(note.split()[-1]).query))
        config, messages = config_from_params(params)
        assert messages == [] and config == BY_KEY[key].panels[0].config
        page_messages: list[str] = []
        read_settings(params, FLASH_SETTINGS, values_of(config), page_messages)
        assert page_messages == []


def test_the_running_weights_are_the_softmax_over_the_keys_seen_so_far():
    config = BY_KEY["online_softmax"].panels[0].config
    result = run(config)
    kernel = flash_of_run(result, 0, 1, 1)
    row = busiest_row(kernel)
    logits = np.asarray(result.trace.logits[0, row])  # (Tk,)
    seen = weights_so_far(kernel, row)
    for j in range(len(logits)):
        np.testing.assert_allclose(seen[j, : j + 1], softmax(logits[: j + 1]), rtol=0, atol=1e-12)
        assert np.all(seen[j, j + 1 :] == 0)
    np.testing.assert_allclose(seen[-1], result.trace.weights[0, row], rtol=0, atol=1e-12)
    # the maximum grows at least once after the first key in that row (the lesson's premise)
    assert any(logits[j] > logits[:j].max() for j in range(1, len(logits)))


def test_the_traffic_table_counted_tile_by_tile_here():
    config = BY_KEY["never_stored"].panels[0].config
    table = traffic_rows(config, 8)
    hs = hv = config.head_size
    for t, (_, row) in zip(TRAFFIC_LENGTHS, table.iterrows(), strict=True):
        block = min(8, t)
        n = -(-t // block)
        standard = 2 * t * hs + t * hv + 4 * t * t + t * hv  # Q, K, V in; S, P out and back; O out
        reads = t * hs + sum(block * (hs + hv) for i in range(n) for j in range(n) if j <= i)
        assert row["standard: HBM numbers"] == standard
        assert row["tiled: HBM numbers"] == reads + t * (hv + 1)
        assert row["weights to return (T²)"] == t * t


def test_the_skipped_tile_counts_are_the_tiles_above_the_diagonal(findings):
    table = findings["causal_skip"].tables[0][1]
    for block, (_, row) in zip(SKIP_BLOCKS, table.iterrows(), strict=True):
        n = 64 // block
        assert (row["tiles"], row["skipped"]) == (n * n, n * (n - 1) // 2)


def test_the_sink_lesson_deviations_from_masks_built_here(findings):
    sink_head, random_head = (p.config for p in BY_KEY["sinks"].panels)
    for config, collapses in ((sink_head, True), (random_head, False)):
        result = run(decoder_config(config))
        t = len(config.tokens)
        options = dict(scale=result.trace.scale, pe=attention_scheme(result.config))

        def outputs(mask, result=result, n_heads=config.n_heads, options=options):
            return multi_head_attention(result.x_q, result.weights, n_heads, mask=mask, **options).output

        full = outputs(np.tri(t, dtype=bool))
        window = outputs(policy_mask("window", t, SINK_WINDOW, 0))
        sink = outputs(policy_mask("sinks", t, SINK_WINDOW, 1))
        change_window = np.linalg.norm(window - full) / np.linalg.norm(full)
        change_sink = np.linalg.norm(sink - full) / np.linalg.norm(full)
        texts = "\n".join(c.text for c in findings["sinks"].claims)
        assert f"{change_window:.0%}" in texts
        if collapses:
            assert change_window > 0.5 and change_sink < 1e-6
        else:
            assert f"{change_sink:.0%}" in texts and change_sink < change_window


def test_a_planted_bug_in_the_rescale_makes_a_claim_fail(monkeypatch):
    from mha_core import flash

    monkeypatch.setattr(flash, "rescale_factor",
                        lambda m_old, m_new: np.where(np.isneginf(m_old), 0.0, np.exp(m_new - m_old)))
    lesson = BY_KEY["online_softmax"]
    claims = lesson.findings(lesson.panels).claims
    assert [c.holds for c in claims] == [False, True, False]  # the factor exceeds 1; the output is wrong



@pytest.mark.parametrize("key", list(BY_KEY))
def test_the_lessons_page_renders_each_lesson(key):
    from streamlit.testing.v1 import AppTest

    from ui.pages.lessons import LESSONS as REGISTERED

    assert REGISTERED[key] is BY_KEY[key]  # registered in ui/pages/lessons/registry.py
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=60)
    at.query_params["lesson"] = key
    at.switch_page("app_pages/lessons.py").run()
    assert not at.exception, [e.message for e in at.exception]
    text = "\n".join(m.value for m in at.markdown)
    assert BY_KEY[key].question in text and HOLDS in text and FAILS not in text
