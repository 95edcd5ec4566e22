"""The what-if lessons (ui/pages/lessons/whatifs.py): every number a claim or table states is recounted here from the
engine (mha_core.smollm2_whatif, mha_core.smollm2_qknorm) on the same tokens, with the kept keys counted from the
engine's top-k mask and the first-token mass read from the run's weights; each note links to its experiment."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mha_core import smollm2_qknorm as qn
from mha_core import smollm2_whatif as wi
from tests.stated_numbers import assert_states
from ui.i18n import using_language
from ui.pages.lessons import LESSONS
from ui.pages.real_model import qknorm as qv
from ui.pages.real_model import whatif as wv


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.forward(smollm2.encode(wi.CALIBRATION_TEXT)[:40], traces=())


def findings(key: str):
    with using_language("en"):
        return LESSONS[key].findings(LESSONS[key].panels)


def test_the_lessons_stand_before_induction_and_hold():
    keys = list(LESSONS)
    mine = [key for key in keys if key in ("sparse_real", "sinks_real", "qknorm_real")]
    assert mine == ["sparse_real", "sinks_real", "qknorm_real"] and keys[-1] == "induction_ablation"
    assert keys.index("qknorm_real") - keys.index("sparse_real") == 2  # one after the other


def test_sparse_lesson_numbers_are_the_engines(smollm2, run):
    shown = findings("sparse_real")
    assert all(claim.holds for claim in shown.claims), [c.text for c in shown.claims if not c.holds]
    _normed, trace, _w = smollm2.layer_trace(run, 0)
    kept = wi.sparse_weights(trace.logits, 2)[1][0]  # (T, T): head 0's kept keys
    pairs = int(np.tri(run.n_tokens, dtype=bool).sum())
    assert_states(shown.claims[0].text, [40, 2, int(kept.sum()), pairs, 100 * (1 - kept.sum() / pairs)])
    dense = float(smollm2.prompt_losses(run).mean())
    table = shown.tables[0][1]
    for layer in (0, 22):
        loss = float(wi.sparse_losses(smollm2, run, [layer], 2).mean())
        assert table.iloc[layer, 1] == pytest.approx(loss, abs=1e-9)
        assert table.iloc[layer, 2] == pytest.approx(loss - dense, abs=1e-9)
    rise = table.iloc[:, 2].to_numpy()
    worst = int(rise.argmax())
    assert_states(shown.claims[1].text, [int((rise < 0.05).sum()), 30, 0.05, dense, worst, rise[worst]])
    together = float(wi.sparse_losses(smollm2, run, range(30), 2).mean())
    assert_states(shown.claims[2].text, [30, together, together - dense])
    assert "real_model?model=smollm2&rm_sparse=all&rm_whatif_text=calibration" in shown.note


def test_sink_lesson_numbers_are_the_engines(smollm2, run):
    shown = findings("sinks_real")
    assert all(claim.holds for claim in shown.claims), [c.text for c in shown.claims if not c.holds]
    weights = np.stack([layer.weights for layer in run.layers])  # (L, nh, T, T)
    mass = weights[:, :, 1:, 0].mean(axis=-1)  # (L, nh): queries 1..T-1
    assert_states(shown.claims[0].text, [mass.mean(), int((mass >= 0.3).sum()), 270, 0.3])
    sinks = wi.fit_sinks(smollm2, run)
    dense = float(smollm2.prompt_losses(run).mean())
    without, fitted = wi.sink_loss(smollm2, run, "without"), wi.sink_loss(smollm2, run, "fitted", sinks)
    assert_states(shown.claims[1].text, [dense, without])
    assert_states(shown.claims[2].text, [fitted, 0, wi.sink_loss(smollm2, run, "null"), dense])
    assert "rm_sinks=1" in shown.note


def test_qknorm_lesson_numbers_are_the_engines(smollm2, run):
    shown = findings("qknorm_real")
    assert all(claim.holds for claim in shown.claims), [c.text for c in shown.claims if not c.holds]
    tri = np.tri(run.n_tokens, dtype=bool)
    tops = [float(smollm2.layer_trace(run, layer)[1].logits[:, tri].max()) for layer in range(30)]
    layer = int(np.argmax(tops))
    one = qn.qk_norm_run(smollm2, run, range(30), "one")
    assert_states(shown.claims[0].text, [layer, tops[layer], 8, np.abs(one.after).max()])
    assert_states(shown.claims[1].text, [1, 30, one.loss, float(smollm2.prompt_losses(run).mean())])
    matched = qn.qk_norm_run(smollm2, run, range(30), "matched")
    assert_states(shown.claims[2].text, [matched.loss])
    assert "rm_qknorm=all" in shown.note


@pytest.mark.parametrize(("key", "expected"), [("sparse_real", ((), False, None)), ("sinks_real", (None, True, None)),
                                               ("qknorm_real", (None, False, ()))])
def test_each_lesson_links_to_its_experiment_on_the_calibration_text(smollm2, key, expected):
    from urllib.parse import parse_qsl

    query = re.search(r"\]\(real_model\?([^)]*)\)", findings(key).note).group(1)
    params = dict(parse_qsl(query))
    messages = []
    what, qk = wv.read_link(params, 30, 9, messages), qv.read_link(params, 30, messages)
    assert messages == [] and params["model"] == "smollm2" and what.text == "calibration"
    assert (what.layers, what.sinks, qk.layers) == expected
