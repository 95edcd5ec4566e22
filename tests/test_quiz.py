"""Quick checks: every answer is what the engine computes, found here independently of ui/pages/heads/quiz.py."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from ui.pages.heads import quiz

CONFIGS = {
    "default": MHAConfig(),
    "causal": MHAConfig(mask="causal", n_heads=2),
    "padding": MHAConfig(mask="padding", valid_len=3, tokens=("a", "b", "c", "d", "e")),
    "window": MHAConfig(mask="window", window=1, n_heads=8),
    "null key": MHAConfig(null_key=True, mask="causal"),
    "sink head": MHAConfig(init="first", bias=False),
    "no W_O": MHAConfig(output_projection=False, bias=True),
    "cross": MHAConfig(kv_tokens=("a", "dog", "ran"), mask="padding", valid_len=0),
}


def knocked_output_by_zeroed_rows(result, head: int) -> np.ndarray:
    """The output with head ``head``'s rows of W_O set to zero (no call into mha_core.contributions)."""
    trace, w = result.trace, result.weights
    hv = trace.heads.shape[-1]
    if not result.config.output_projection:
        concat = trace.concat.copy()
        concat[:, head * hv : (head + 1) * hv] = 0.0
        return concat
    w_o = w.w_o.copy()
    w_o[head * hv : (head + 1) * hv] = 0.0
    out = trace.concat @ w_o
    return out if w.b_o is None else out + w.b_o


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_answer_is_what_the_engine_computes(name):
    result = run(CONFIGS[name])
    trace = result.trace
    kinds = set()
    for number in range(16):
        q = quiz.question(result, number)
        kinds.add(q.kind)
        assert q.query in range(len(result.query_labels))
        if q.kind == "largest":
            assert q.answer == result.key_labels[np.argmax(trace.weights[q.head, q.query])]
            assert q.answer in q.options
        elif q.kind == "row_sum":
            expected = float(np.sum(trace.weights[q.head, q.query]))
            assert q.answer == pytest.approx(expected, abs=1e-12)
            if not result.config.null_key:
                assert q.answer == pytest.approx(0.0 if trace.fully_masked[q.head, q.query] else 1.0, abs=1e-12)
        elif q.kind == "visible":
            # keys whose logit is finite are the ones the mask lets through
            assert int(q.answer) == int(np.isfinite(trace.logits[0, q.query]).sum())
            assert q.answer in q.options
        else:
            moved = [
                np.linalg.norm(trace.output[q.query] - knocked_output_by_zeroed_rows(result, h)[q.query])
                for h in range(trace.n_heads)
            ]
            assert q.answer == f"head {int(np.argmax(moved))}"
    assert kinds == set(quiz.KINDS)


def test_questions_are_repeatable_and_vary():
    result = run(MHAConfig())
    assert quiz.question(result, 5) == quiz.question(result, 5)
    assert len({quiz.question(result, n).text for n in range(12)}) > 4


def test_marking():
    result = run(MHAConfig())
    choice = quiz.largest_weight_question(result, 1, 3)
    assert quiz.is_right(choice, choice.answer)
    assert not quiz.is_right(choice, next(o for o in choice.options if o != choice.answer))
    number = quiz.row_sum_question(result, 0, 0)
    assert quiz.is_right(number, 1.0)
    assert quiz.is_right(number, 1.004)
    assert not quiz.is_right(number, 0.9)
    assert not quiz.is_right(number, None)
