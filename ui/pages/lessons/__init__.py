"""The Lessons page's content as data: one lesson per known learner confusion, plus the presets.

One module per lesson (``wo.py``, ``causal.py``, ...) defines ``LESSONS = (Lesson(...),)`` with the
function that computes its findings; ``registry.py`` lists those modules in page order and builds
``LESSONS`` (key -> lesson). Adding a lesson is one module plus one line in ``registry.LESSON_MODULES``.
``records.py`` holds what a lesson is made of and the numbers lessons share, ``stored.py`` the SmolLM2 lessons'
numbers kept once per process (and per test run), ``links.py`` the links
the page hands out, ``presets.py`` the hand-built heads. ``app_pages/lessons.py`` renders a lesson
without knowing which one it is; ``tests/test_lessons.py`` checks every claim against its own
computation. No streamlit in here.
"""

from ui.pages.lessons.links import (
    app_root,
    explorer_params,
    explorer_query,
    lesson_params,
    lesson_query,
    short_params,
)
from ui.pages.lessons.presets import PRESET_CONFIGS, preset_grid
from ui.pages.lessons.records import (
    BASE,
    SENTENCE,
    Claim,
    Findings,
    Grid,
    Heatmap,
    Lesson,
    LessonPanel,
    contributions_of,
)
from ui.pages.lessons.registry import LESSON_MODULES, LESSONS, lesson_label

__all__ = [
    "BASE",
    "LESSONS",
    "LESSON_MODULES",
    "PRESET_CONFIGS",
    "SENTENCE",
    "Claim",
    "Findings",
    "Grid",
    "Heatmap",
    "Lesson",
    "LessonPanel",
    "app_root",
    "contributions_of",
    "explorer_params",
    "explorer_query",
    "lesson_label",
    "lesson_params",
    "lesson_query",
    "preset_grid",
    "short_params",
]
