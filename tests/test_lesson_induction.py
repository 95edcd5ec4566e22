"""Lesson 19 (ui/pages/lessons/induction.py): its table's losses are the ablated model's, recomputed here from the
engine's runs with the induction heads chosen by this test's own loop over the probe's attentions."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.smollm2_ablation import ablate
from ui.i18n import using_language
from ui.pages.lessons import LESSONS


@pytest.fixture(scope="module")
def findings(smollm2):
    with using_language("en"):
        return LESSONS["induction_ablation"].findings(LESSONS["induction_ablation"].panels)


def test_table_is_the_ablated_models_losses(smollm2, findings):
    rng = np.random.default_rng(0)
    first = rng.choice(np.arange(1000, 20000), size=24, replace=False)
    ids = np.concatenate([first, first])
    run = smollm2.forward(ids, traces=())
    attentions = run.attentions
    score = np.array([[np.mean([attentions[n, h, i, i - 23] for i in range(24, 48)]) for h in range(9)]
                      for n in range(30)])
    heads = [divmod(int(i), 9) for i in np.argsort(-score, axis=None, kind="stable") if score.flat[i] >= 0.4]

    def halves(losses):
        return losses[:23].mean(), losses[24:].mean()

    table = findings.tables[0][1]
    expected = [halves(smollm2.prompt_losses(run)), halves(ablate(smollm2, run, heads[:1]).losses),
                halves(ablate(smollm2, run, heads).losses)]
    np.testing.assert_allclose(table.iloc[:3, 1:].to_numpy(dtype=float), np.array(expected), atol=1e-6)
    assert f"all {len(heads)} induction heads off" == table.iloc[2, 0]
    assert all(claim.holds for claim in findings.claims), [c.text for c in findings.claims if not c.holds]
    np.testing.assert_allclose(findings.figures[0].matrix, attentions[heads[0]], atol=0)
