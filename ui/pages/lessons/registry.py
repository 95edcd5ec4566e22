"""The lessons, in the order the page shows them: one module per lesson, one line per module here.

To add a lesson: write ``ui/pages/lessons/<name>.py`` defining ``LESSONS = (Lesson(...), ...)``
(its findings function beside it, its shared pieces from ``records.py``), then add ``"<name>"`` to
``LESSON_MODULES`` below where it should appear. The page, its links, the tests and the bench all
read ``LESSONS``; ``tests/test_lessons.py`` checks that every module in this folder is listed.
"""

from __future__ import annotations

import importlib

from ui.i18n import _
from ui.pages.lessons.records import Lesson

LESSON_MODULES = (
    "wo",  # 1. W_O after the concatenation
    "causal",  # 2. causal mask: rows renormalise, outputs 'shift'
    "colours",  # 3. colour is a weight, not importance
    "average",  # 4. averaging heads
    "saturation",  # 5. unscaled random weights saturate the softmax
    "sqrt_dk",  # 6. why divide the scores by sqrt(d_k)
    "rope",  # 7. RoPE
    "alibi",  # 8. ALiBi
    "gqa",  # 9. GQA and MQA
    "kv_cache",  # 10. the KV cache
    "kernels",  # 11-13. differential attention, MLA's latent cache, linear attention's constant state
    "flash",  # 14-17. FlashAttention's online softmax, weights never stored, skipped tiles, attention sinks
    "tokens",  # 18. the same sentence in English, Chinese and Spanish: SmolLM2 tokens and MiniLM word pieces
    "sparse",  # sparse selection: MoBA and DeepSeek Sparse Attention keep k (issue 34)
    "gate_sinks",  # gated attention's output gate and gpt-oss's learned sinks (issue 34)
    "qknorm",  # issue 34: QK-norm, longer queries and keys cannot saturate the softmax
    "deltanet",  # Gated DeltaNet: the delta rule overwrites, its implied matrix M, the 3:1 stack (issue 34)
    "whatifs",  # (issue 36) SmolLM2 changed after training: sparse selection, sinks without the sink token, QK-norm
    "long_context",  # (issue 36) SmolLM2 past its trained length: which RoPE scaling keeps the loss lowest
    "induction",  # (issue 35) turn off SmolLM2's induction heads and watch the repeat fail
)


def load_lessons(modules: tuple[str, ...]) -> dict[str, Lesson]:
    """Key -> lesson, in module order, from each module's ``LESSONS``; a key used twice is an error."""
    lessons: dict[str, Lesson] = {}
    for name in modules:
        for lesson in importlib.import_module(f"{__package__}.{name}").LESSONS:
            if lesson.key in lessons:
                raise ValueError(f"lesson key {lesson.key!r} of module {name!r} is already taken: keys name the "
                                 f"?lesson= link, so each must be new")
            lessons[lesson.key] = lesson
    return lessons


LESSONS: dict[str, Lesson] = load_lessons(LESSON_MODULES)


def lesson_label(key: str) -> str:
    """Short label for the lesson picker: its number and a few words."""
    return f"{list(LESSONS).index(key) + 1}. {_(LESSONS[key].short_title)}"
