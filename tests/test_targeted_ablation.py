"""Targeted ablation (mha_core.targeted_ablation) and its section of the Real model page's SmolLM2 view.

The engine's batched re-runs against one ablated run per head set (mha_core.smollm2_ablation.ablate's full next
logits); the page's tables against those ablated logits, recomputed here; the link restores the view; bad input
gets a message and the runner-up token. transformers' own forward is in tests/test_ablation_transformers.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mha_core import smollm2_ablation as ab
from mha_core import targeted_ablation as ta
from tests.address_bar import address
from tests.app_opener import open_app
from ui.i18n import _ as translate
from ui.i18n import using_language
from ui.pages.real_model.smollm2 import DEFAULT_PROMPT

PAGE = "app_pages/real_model.py"
SAMPLE = (((5, 4),), ((3, 2), (3, 7), (11, 4)), ((29, 8),), ((0, 0), (0, 8)), ())


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with threadpool_limits(limits=1, user_api="blas"):  # as the server runs (ui/run/server.py); faster when busy
        yield


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.forward(DEFAULT_PROMPT, traces=())


@pytest.fixture(scope="module")
def tokens(run):
    order = np.argsort(-run.next_logits, kind="stable")
    return int(order[0]), int(order[3])  # the top token and the fourth most likely


def d_of(ablation: ab.Ablation, top: int, alternative: int) -> float:
    return float(ablation.next_logits[top]) - float(ablation.next_logits[alternative])


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_batched_reruns_equal_one_ablated_run_per_set(smollm2, run, tokens, mode):
    top, alternative = tokens
    means = ab.head_means(smollm2) if mode == "mean" else None
    ours = ta.logit_differences(smollm2, run, SAMPLE, top, alternative, mode, means)
    expected = [d_of(ab.ablate(smollm2, run, heads, mode, means=means), top, alternative) for heads in SAMPLE]
    np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=0)
    assert np.ptp(expected) > 0.05  # the sets move d differently: a mixed-up stream would show


@pytest.fixture(scope="module")
def ranking(smollm2, run, tokens):
    shares = []
    result = ta.rank_heads(smollm2, run, *tokens, progress=shares.append)
    return result, shares


def test_ranking_is_by_move_and_the_greedy_sets_are_exact(smollm2, run, tokens, ranking):
    result, shares = ranking
    top, alternative = tokens
    assert shares == sorted(shares) and shares[-1] == pytest.approx(1.0)
    assert result.clean == pytest.approx(float(run.next_logits[top] - run.next_logits[alternative]), abs=1e-4)
    moves = [result.clean - result.differences[result.heads.index(head)] for head in result.ranking]
    assert moves == sorted(moves, reverse=True)
    for k in (0, len(result.greedy) - 1):  # the first and the last set of the search, from ablate's logits
        heads = result.ranking[:k + 1]
        assert result.greedy_differences[k] == pytest.approx(
            d_of(ab.ablate(smollm2, run, heads), top, alternative), abs=1e-4)
    assert all(d >= 0 for d in result.greedy_differences[:-1])
    assert result.wins == (result.greedy_differences[-1] < 0)


def tables(at):
    frames = [d.value for d in at.dataframe]
    ranked = next(f for f in frames if "move" in f.columns)
    greedy = next(f for f in frames if "d" in f.columns and "move" not in f.columns)
    return ranked, greedy


@pytest.fixture(scope="module")
def linked(smollm2, tokens):
    alternative = smollm2.token_text(tokens[1])
    return open_app(PAGE, timeout=300, model="smollm2", rm_alt=alternative, rm_rank="1"), alternative


def test_link_restores_the_ranking_and_the_tables_are_the_ablated_runs(smollm2, run, tokens, linked):
    at, alternative = linked
    top, alt = tokens
    assert at.selectbox(key="w_sm_alt").value == alt
    assert at.toggle(key="w_sm_target_rank").value is True
    assert address(at)["rm_alt"] == alternative and address(at)["rm_rank"] == "1"
    ranked, greedy = tables(at)
    clean = float(run.next_logits[top] - run.next_logits[alt])
    for row in ranked.head(3).itertuples():  # the shown d of a head = our own ablated run of that head alone
        layer, head = map(int, re.findall(r"\d+", row.head))
        expected = d_of(ab.ablate(smollm2, run, [(layer, head)]), top, alt)
        assert row.d == pytest.approx(expected, abs=1e-4)
        assert row.move == pytest.approx(clean - expected, abs=1e-4)
    heads = [tuple(map(int, re.findall(r"\d+", h))) for h in greedy["head"]]
    assert greedy["d"].iloc[-1] == pytest.approx(d_of(ab.ablate(smollm2, run, heads), top, alt), abs=1e-4)
    text = next(m.value for m in at.markdown if "With every head" in m.value)
    assert f"= {clean:.3f}." in text


def test_bad_alternative_gets_a_message_and_the_runner_up(smollm2, run):
    runner_up = int(np.argsort(-run.next_logits, kind="stable")[1])
    at = open_app(PAGE, timeout=300, model="smollm2", rm_alt=" Paris is nice")
    assert any("not one" in w.value for w in at.warning)
    assert at.selectbox(key="w_sm_alt").value == runner_up
    assert at.toggle(key="w_sm_target_rank").value is False
    assert "rm_rank" not in address(at)


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
def test_in_other_languages_words_change_and_numbers_do_not(linked, lang):
    at, alternative = linked
    other = open_app(PAGE, timeout=300, model="smollm2", rm_alt=alternative, rm_rank="1", lang=lang)
    with using_language(lang):
        title = translate("Which heads make it say this?")
    assert title != "Which heads make it say this?" and title in [s.value for s in other.subheader]
    for english, translated in zip(tables(at), tables(other), strict=True):
        np.testing.assert_array_equal(english.select_dtypes("number").to_numpy(),
                                      translated.select_dtypes("number").to_numpy())
