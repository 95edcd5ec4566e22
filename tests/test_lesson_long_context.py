"""The lesson "Longer than trained" (ui/pages/lessons/long_context.py): every number its claims, table, heatmap and
note state is recounted here from runs of the engine (mha_core.smollm2_long.long_forward) made in this test on the
same tokens, never read back from the lesson's own cache."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import smollm2_long as lg
from tests.stated_numbers import assert_states
from ui.i18n import using_language
from ui.pages.lessons import LESSONS
from ui.pages.lessons import long_context as lesson


@pytest.fixture(scope="module")
def runs(smollm2):
    ids, period = lg.long_token_ids(smollm2, lg.LONG_TEXT, lesson.N_TOKENS)
    return {method: lg.long_forward(smollm2, ids, period, lg.LongSetting(method, lesson.FACTOR, 0.5, lesson.N_TOKENS))
            for method in lg.METHODS}


@pytest.fixture(scope="module")
def shown(runs):
    with using_language("en"):
        return LESSONS["long_context"].findings(LESSONS["long_context"].panels)


def losses(runs) -> dict[str, float]:
    return {method: float(run.losses[run.period:].mean()) for method, run in runs.items()}  # predictions after copy one


def test_the_table_is_each_runs_loss_and_first_token_weight(runs, shown):
    (_caption, table), = shown.tables
    assert list(table.iloc[:, 0]) == [lg.METHODS[m] for m in runs]
    np.testing.assert_allclose(table.iloc[:, 1], list(losses(runs).values()), rtol=0, atol=1e-9)
    np.testing.assert_allclose(table.iloc[:, 2], [run.first.mean() for run in runs.values()], rtol=0, atol=1e-12)


def test_the_heatmap_is_each_layers_first_token_weight_per_method(runs, shown):
    (figure,) = shown.figures
    expected = np.array([[run.first[layer].mean() for layer in range(len(run.first))] for run in runs.values()])
    np.testing.assert_allclose(figure.matrix, expected, rtol=0, atol=1e-12)  # (methods, L)
    assert figure.row_labels == [lesson.HEATMAP_ROWS[m] for m in runs]
    assert figure.col_labels == [str(n) for n in range(expected.shape[1])]


def test_the_claims_state_the_runs_losses_and_hold(runs, shown):
    loss = losses(runs)
    best = min(lesson.SCALINGS, key=loss.get)
    inside, scaling, none_back = (claim.text for claim in shown.claims)
    assert_states(inside, [round(loss["inside"], 2), lesson.FACTOR, round(loss["trained"], 2)])
    assert lg.METHODS[best] in scaling
    assert_states(scaling, [round(loss[best], 2), round(loss["linear"], 2)])
    assert_states(none_back, [round(loss["inside"], 2)])
    assert [claim.holds for claim in shown.claims] == [
        loss["trained"] > loss["inside"] + 2, loss[best] < loss["linear"],
        all(loss[m] > loss["inside"] + 0.3 for m in lesson.SCALINGS)]
    assert all(claim.holds for claim in shown.claims)


def test_the_note_states_the_last_position(runs, shown):
    last = int(runs["trained"].positions[-1])
    assert last == int(lesson.FACTOR * 8192) - 1
    assert f"{last:,}" in shown.note  # English groups with a comma (count) and f"T = {lesson.N_TOKENS}" in shown.note
