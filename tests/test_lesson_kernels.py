"""ui.pages.lessons.kernels: issue 26's lessons hold their claims, ask before they show, and render on the Lessons page."""

from __future__ import annotations

import pytest
from shown_charts import chart_elements

from tests.test_app_decoding import open_page
from ui.charts.marks import FAILS, HOLDS
from ui.pages import lessons
from ui.pages.lessons.kernels import LESSONS


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.key for lesson in LESSONS])
def test_every_claim_holds_and_every_panel_is_a_valid_configuration(lesson):
    findings = lesson.findings(lesson.panels)
    assert findings.claims and all(claim.holds for claim in findings.claims), [c.text for c in findings.claims]
    assert all(panel.config.problem() is None for panel in lesson.panels)
    assert lesson.question.startswith("Before you look") and lesson.question.endswith("?")
    for grid in findings.figures:
        assert grid.matrices.shape[1:] == (len(grid.row_labels), len(grid.col_labels))
        assert grid.kind == "signed_weights" or (grid.matrices.min() >= 0 and grid.matrices.max() <= 1)


def test_the_lessons_are_registered_under_their_own_keys():
    keys = [lesson.key for lesson in LESSONS]
    assert len(set(keys)) == len(keys)
    assert all(lessons.LESSONS[key] is lesson for key, lesson in zip(keys, LESSONS, strict=True))
    assert all(lesson.short_title for lesson in LESSONS)


def test_a_planted_lambda_on_the_wrong_map_breaks_the_differential_lessons_claim(monkeypatch):
    from mha_core import kernels

    original = kernels.differential_kernel

    def wrong(q, k, v, mask, scale, bias=None, null_key=False, params=None):
        out = original(q, k, v, mask, scale, bias, null_key, params)
        return kernels.KernelOutput(out.scores, out.logits, out.parts.lam * out.parts.map1 - out.parts.map2,
                                    out.heads, out.mixed, out.parts)

    planted = {**kernels.KERNELS, "differential": kernels.Kernel(**{**kernels.KERNELS["differential"].__dict__,
                                                                     "attend": wrong})}
    monkeypatch.setattr(kernels, "KERNELS", planted)
    lesson = LESSONS[0]
    claims = lesson.findings(lesson.panels).claims
    assert not claims[0].holds


@pytest.mark.parametrize("key", [lesson.key for lesson in LESSONS])
def test_each_lesson_renders(key):
    at = open_page("app_pages/lessons.py", lesson=key)
    text = " ".join(str(m.value) for m in at.markdown)
    lesson = next(lesson for lesson in LESSONS if lesson.key == key)
    assert lesson.question in text
    assert FAILS not in text and HOLDS in text
    assert chart_elements(at), "the lesson's figures are missing"


def test_the_differential_lesson_gives_the_papers_reason_for_normalising_each_head():
    # Issue 32: the per-head norm is not there because rows sum to 1 − λ; Ye et al. 2024 (Section 2.1) normalise
    # each head because differential heads are sparser and their statistics differ between heads.
    text = next(lesson for lesson in LESSONS if lesson.key == "differential").explanation
    assert "which is why each head's output is RMS-normalised" not in text
    assert "statistics differ more from head to head" in text and "training stable" in text
