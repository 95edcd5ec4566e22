"""Section "i18n": what the interface's language costs a run (issue 37: switching < 2 ms per rerun).

Three rows kinds, all in this process:

- ``load``: reading and compiling one language's ``.po`` (once per process: ``ui.i18n.translations`` is cached).
- ``lookup``: one ``_()`` call, and a run that translates every msgid of the catalog once after a switch
  (``set_language`` then every string), with the catalogs already loaded. The page strings only grow, so the
  row ``x 2000`` scales the per-string cost to 2000 strings (the whole app translated, a generous guess).
- ``rerun``: the Heads page in AppTest, a rerun that switches the language against a rerun that changes nothing
  (medians); the difference is what a switch adds to a server's run (noisy: a rerun takes ~100 ms).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

from ui import i18n
from ui.i18n import LANGUAGES, set_language, using_language

ROOT = Path(__file__).resolve().parents[1]
GOAL_SWITCH_MS = 2.0
SWITCH = "w_lang"


def _ms(call, repetitions: int) -> float:
    """Median milliseconds of ``call`` over ``repetitions``."""
    times = []
    for _round in range(repetitions):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _msgids(code: str) -> list[str]:
    return [m for m in i18n.translations(code)._catalog if isinstance(m, str) and m]  # noqa: SLF001


def _load_rows(repetitions: int) -> list[dict]:
    rows = []
    for code in LANGUAGES:
        def load(code=code):
            i18n.translations.cache_clear()
            i18n.translations(code)
        rows.append({"kind": "load", "language": code, "strings": len(_msgids(code)) if code != "en" else 0,
                     "ms": _ms(load, repetitions), "note": "once per process"})
    for code in LANGUAGES:  # the rows below measure a warm process, as a server is after its first runs
        i18n.translations(code)
    return rows


def _lookup_rows(repetitions: int) -> list[dict]:
    rows = []
    for code in LANGUAGES:
        if code == "en":
            continue
        ids = _msgids(code)

        def switch_and_translate(code=code, ids=ids):
            set_language(code)
            for text in ids:
                i18n._(text)

        with using_language(code):
            switch_and_translate()  # warm
            whole = _ms(switch_and_translate, repetitions)
        per_call = whole / max(len(ids), 1)
        rows.append({"kind": "lookup", "language": code, "strings": len(ids), "ms": whole,
                     "note": f"x 2000 strings: {per_call * 2000:.3f} ms (goal < {GOAL_SWITCH_MS} ms)"})
    return rows


class _Timed:
    """Wraps functions so that the time spent inside them adds up (the run's thread calls them)."""

    def __init__(self):
        self.seconds = 0.0
        self.depth = 0

    def wrap(self, function):
        def timed(*args, **kwargs):
            self.depth += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:  # a translated label inside choose_language counts once
                    self.seconds += time.perf_counter() - start
        return timed


def _rerun_rows(repetitions: int) -> list[dict]:
    """The Heads page in AppTest: a rerun after a switch against a plain rerun; and the time spent in the
    language's own code during the switching reruns (the switch, the link, every _() and ngettext call)."""
    from unittest import mock

    from streamlit.testing.v1 import AppTest

    import ui.widgets.language as language

    timer = _Timed()
    real = i18n.translations

    def timed_translations(code):  # every _() and ngettext of the run, lookup and translation, timed
        catalog = real(code)
        return SimpleNamespace(gettext=timer.wrap(catalog.gettext), ngettext=timer.wrap(catalog.ngettext))

    patches = [mock.patch.object(i18n, "translations", timer.wrap(timed_translations))]
    patches += [mock.patch.object(language, name, timer.wrap(getattr(language, name)))
                for name in ("choose_language", "language_params", "keep_language_in_link")]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    languages = ["zh-CN", "es", "en"]
    switched, same, inside = [], [], []
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        for index in range(repetitions * len(languages)):
            start = time.perf_counter()
            at.run()  # nothing changed
            same.append((time.perf_counter() - start) * 1000)
            at.selectbox(key=SWITCH).set_value(languages[index % len(languages)])
            timer.seconds, start = 0.0, time.perf_counter()
            at.run()
            switched.append((time.perf_counter() - start) * 1000)
            inside.append(timer.seconds * 1000)
    switch_ms, same_ms = statistics.median(switched), statistics.median(same)
    return [
        {"kind": "rerun", "language": "in i18n code", "strings": "", "ms": statistics.median(inside),
         "note": f"a switching rerun's time in the language's code (goal < {GOAL_SWITCH_MS} ms)"},
        {"kind": "rerun", "language": "whole rerun", "strings": "", "ms": switch_ms - same_ms,
         "note": f"switch {switch_ms:.1f} ms vs plain rerun {same_ms:.1f} ms (medians of {len(switched)}; "
                 "includes Streamlit re-sending the relabelled widgets)"},
    ]


def run(quick: bool) -> list[dict]:
    """kind: load (compile one catalog, once per process), lookup (a switch that translates every msgid once),
    rerun (Heads in AppTest: median rerun after a switch minus a plain rerun). ms: median milliseconds."""
    repetitions = 1 if quick else 21
    rows = _load_rows(repetitions) + _lookup_rows(repetitions)
    return rows + _rerun_rows(1 if quick else 5)
