"""QK-norm's step, the lineage section and the QK-norm lesson in Chinese and Spanish: no msgid of this work's files is
shown as it is, and every number is the one the English page shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_file

from mha_core.config import run
from tests.app_opener import open_app
from tests.test_app_lessons_i18n import literal, pattern, same_as_english, shown_texts
from ui.i18n import _, using_language
from ui.state.urlstate import config_from_params

ROOT = Path(__file__).resolve().parents[1]
FILES = ["mha_core/qk_norm.py", "mha_core/lineage.py", "ui/pipeline/kernel_steps_qknorm.py",
         "ui/pages/decoding/lineage.py", "ui/pages/lessons/qknorm.py"]
LINK = {"kernel": "qknorm", "pe": "rope", "mask": "causal", "kv_heads": "2", "seed": "3"}
PAGES = [("app_pages/decoding.py", LINK), ("app_pages/step_by_step.py", LINK), ("app_pages/lessons.py",
                                                                                 {"lesson": "qknorm"})]


def marked() -> list[str]:
    keywords = {"_": None, "N_": None, "ngettext": (1, 2)}
    return [m for path in FILES for _line, m, _c, _x in extract_from_file("python", str(ROOT / path), keywords=keywords)]


def left_in_english(texts: list[str], lang: str) -> list[str]:
    with using_language(lang):
        candidates = [(m, pattern(m)) for m in marked() if _(m) != m and len(literal(m).strip()) > 2]
    return [f"{t!r} is {m!r}" for t in texts for m, regex in candidates if regex.fullmatch(t)]


def lineage_cells(at) -> list[str]:
    """The cells of the lineage tables that are sizes ('2.0 GiB') or counts, in page order."""
    return [str(v) for frame in at.dataframe for col in frame.value.columns for v in frame.value[col]
            if isinstance(v, int) or (isinstance(v, str) and v.endswith(("B", "KiB", "MiB", "GiB", "TiB")))]


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
@pytest.mark.parametrize("page, params", PAGES)
def test_nothing_of_this_work_is_left_in_english_and_the_numbers_are_the_same(once, page, params, lang):
    english = once(open_app, page, **params)  # one English run per page, read by both languages
    shown = open_app(page, **params, lang=lang)
    assert not left_in_english(shown_texts(shown), lang)
    # token labels kept, alone or starting a table's row (the row sums: a label, numbers, "no" in Spanish too)
    assert [t for t in same_as_english(english, shown, lang) if not re.match(r"(\| `)?\d+:", t)] == []
    assert lineage_cells(shown) == lineage_cells(english)
    assert [m.value for m in shown.metric] == [m.value for m in english.metric]
    if page.endswith("step_by_step.py"):  # the bound and the head's largest logit, as the engine gives them
        trace = run(config_from_params(params)[0]).trace
        text = " ".join(m.value for m in shown.markdown)
        assert f"{trace.kernel_parts.bound:.4f}" in text
        assert f"{abs(trace.scores[0] * trace.scale).max():.4f}" in text


def test_a_planted_untranslated_string_is_caught():
    assert left_in_english(["The lineage: what real decoders keep per token"], "es")
