"""Section "app": server-side time of a rerun after a control change, per page, and the figure bytes it sends.

Each row is one fresh session in ``streamlit.testing.v1.AppTest``, which runs the script in this
process as a server would, minus the websocket and the post-run garbage collection (timed apart
as ``gc_ms``): switch to the page, set a control to a value never computed before, time ``run()``.
The columns are explained in ``run``'s docstring, which ``python -m bench`` prints under the table.

Controls: the seed (a control of the sidebar's one settings element, changed by the element's trigger) on
Heads, Step by step and About; the lesson picker on Lessons (the
page has no cache, every visit computes); a plain rerun on Seed notebooks (it has no control
that changes what it computes: any click reruns it as it is); the sentence on Real model (one
word moved, so the forward pass runs again). "caps" is 64 tokens, d_model 512, 16 heads, causal
mask (Real model: a sentence of 128 word pieces); "caps+" adds the page's heaviest view (Heads:
logits and the average panel; Real model: the step-by-step matrices switched on and the sections
that draw nothing while closed opened).

AppTest always reruns the whole script: a change inside an ``st.fragment`` (the Real model page's
layer and head) reruns only that fragment on a server, so rows here never measure that. The
sentence is outside the page's fragment: its rows are full reruns on a server too.
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import pickle
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mha_core.config import LIMITS

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
TIMEOUT_S = 120  # AppTest's per-run timeout: a cold first run at the caps takes a few seconds
GOAL_DEFAULT_MS = 100.0
GOAL_CAPS_MS = 1000.0
GOAL_CAPS_FIGURE_BYTES = 2_000_000
# Issue 11: CPU time of one rerun after a control change, per page at the defaults, and at the caps.
GOAL_CPU_MS = {"heads": 15.0, "step_by_step": 30.0, "real_model": 40.0}
GOAL_CAPS_CPU_MS = 100.0
FULL_REPETITIONS = (7, 5)  # (missing reruns, hitting reruns) per row
QUICK_REPETITIONS = (1, 1)

CAPS = {
    "tokens": " ".join(f"t{i}" for i in range(LIMITS["max_tokens"])),
    "d_model": str(LIMITS["max_d_model"]),
    "heads": str(LIMITS["max_heads"]),
    "mask": "causal",
}
# One-piece words for the real model's sentences: moving one of them along a filler of "word"s
# gives many different sentences of exactly the same length in word pieces.
MARKER_WORDS = ("cat", "dog", "sun", "tree", "book", "river", "house", "bird")
REAL_MODEL_PIECES = 128  # the cap of the Real model page, [CLS] and [SEP] included
REAL_MODEL_LAZY_SECTIONS = ("w_rm_overview", "w_rm_sink")  # its expanders that compute nothing while closed

# Values never used before in this process: every row starts its values further along, so the
# shared st.cache_data of one process (AppTest keeps it across sessions) never answers a "miss".
_fresh_starts = itertools.count(1_000_000, 1000)


SETTINGS = "settings"  # Control.kind of a control inside an element of controls (the settings', a page's row)


def settings_elements(at) -> list:
    """The components-v2 elements of controls this run drew (ui/widgets/controls.py: the settings', a page's own row;
    AppTest shows each as an UnknownElement)."""
    from ui.widgets.controls import KEYS

    return [node for node in (*at.sidebar, *at.main) if type(node).__name__ == "UnknownElement" and node.key in KEYS]


def _controls_of(element) -> set[str]:
    return {item["key"] for item in json.loads(element.proto.json)["items"] if "value" in item}


def settings_keys(at) -> set[str]:
    """The keys of the controls inside those elements (not their headings and lines)."""
    return {key for element in settings_elements(at) for key in _controls_of(element)}


def settings_change(at, key: str, value) -> Callable[[], object]:
    """The run the element's JavaScript asks for after a change of control ``key``: its ``change`` trigger,
    ``{key, value}``, in the tree's widget states under Streamlit's trigger id for the element holding ``key`` (what
    the browser sends; bench/st_client.py encodes it). AppTest (Streamlit 1.67) has no ``set_value`` for a
    components-v2 element, so the run goes through its private ``_run``, as tests/sidebar_controls.py ``change``
    does."""
    from streamlit.components.v2.bidi_component.main import _make_trigger_id

    from bench.st_client import Trigger, set_widget_value

    element = next(element for element in settings_elements(at) if key in _controls_of(element))
    states = at._tree.get_widget_states()
    trigger = Trigger("change", {"key": key, "value": value})
    set_widget_value(states.widgets.add(), _make_trigger_id(element.proto.id, "events"), trigger)
    return lambda: at._run(states)


@dataclass(frozen=True)
class Control:
    """The control whose change triggers the timed rerun, and the i-th value it is set to."""

    name: str  # shown in the table
    kind: str  # an AppTest accessor ("pills", "text_input" ...), SETTINGS (the settings' element), "" (a plain rerun)
    key: str
    value: Callable[[int], object] = field(default=lambda i: i)

    def change(self, at, i: int) -> Callable[[], object]:
        """Set the control to its i-th value (or nothing, for a plain rerun); the run to time, which the caller
        makes. A setting's change is the element's trigger, sent with that run."""
        if self.kind == SETTINGS:
            return settings_change(at, self.key, self.value(i))
        if self.kind:
            getattr(at, self.kind)(key=self.key).set_value(self.value(i))
        return at.run

    def drawn(self, at) -> bool:
        """Whether this run drew the control (a plain rerun needs none)."""
        if self.kind == SETTINGS:
            return self.key in settings_keys(at)
        if not self.kind:
            return True
        try:
            at.get_by_key(self.key)
        except KeyError:
            return False
        return True


@dataclass(frozen=True)
class Case:
    """One table row: a page, its settings (URL query parameters) and the control that is changed."""

    page: str  # a page's name in ui.state.navigation.PAGES (its file name, without .py)
    settings: str  # "defaults", "caps" or "caps+"
    params: dict
    control: Control
    size: str  # what the settings mean in tokens

    @property
    def at_caps(self) -> bool:
        return self.settings.startswith("caps")


def real_model_sentence(i: int, pieces: int) -> str:
    """The i-th sentence of ``pieces`` word pieces: one marker word moved along a filler of "word"s."""
    slots = pieces - 2  # minus [CLS] and [SEP]
    words = ["word"] * (slots - 1)
    words.insert(i % slots, MARKER_WORDS[(i // slots) % len(MARKER_WORDS)])
    return " ".join(words)


def default_sentence_variant(i: int) -> str:
    """The Real model page's example sentence with a marker word inserted: different text, the same size."""
    from ui.pages.real_model import DEFAULT_SENTENCE

    words = DEFAULT_SENTENCE.split()
    words.insert(1 + i % (len(words) - 1), MARKER_WORDS[(i // (len(words) - 1)) % len(MARKER_WORDS)])
    return " ".join(words)


def lesson_keys() -> list[str]:
    """The lesson picker's values: every lesson, then the overview."""
    from ui.pages.lessons import LESSONS

    return [*LESSONS, "overview"]


SEED = Control("seed", SETTINGS, "w_seed")
PLAIN = Control("none (plain rerun)", "", "")
# Controls that change what is shown but not what is computed: the figures that stay the same come
# from the figure cache (ui/run/cached_figures.py). Their values cycle, so after one round every rerun
# shows figures built before.
VIEW = Control("view (weights/logits/scores)", "segmented_control", "w_view",
               lambda i: ("weights", "logits", "scores")[i % 3])
HEAD = Control("head to follow (0-3)", SETTINGS, "w_head", lambda i: i % 4)  # Step by step's row


def cases() -> list[Case]:
    """Every page at its default settings, then the pages that read the settings at the caps."""
    lessons = lesson_keys()
    lesson = Control("lesson", "pills", "lesson_pick", lambda i: lessons[i % len(lessons)])
    sentence = Control("sentence", "text_input", "w_rm_text", default_sentence_variant)
    long_sentence = Control(
        "sentence", "text_input", "w_rm_text", lambda i: real_model_sentence(i, REAL_MODEL_PIECES)
    )
    defaults = "6 tokens, d 16, 4 heads"
    caps = f"{LIMITS['max_tokens']} tokens, d {LIMITS['max_d_model']}, {LIMITS['max_heads']} heads, causal"
    return [
        Case("heads", "defaults", {}, SEED, defaults),
        Case("heads", "defaults", {}, VIEW, defaults),
        Case("step_by_step", "defaults", {}, SEED, defaults),
        Case("step_by_step", "defaults", {}, HEAD, defaults),
        Case("lessons", "defaults", {}, lesson, "the lessons' own sizes"),
        Case("seeds", "defaults", {}, PLAIN, "the seeds' own sizes"),
        Case("real_model", "defaults", {}, sentence, "~20 word pieces"),
        Case("compare", "defaults", {"b_scale": "none"}, SEED, defaults + ", B: scale none"),
        Case("about", "defaults", {}, SEED, defaults),
        Case("decoding", "defaults", {}, SEED, defaults),
        Case("flash", "defaults", {}, SEED, defaults + ", 2×2 tiles"),
        Case("heads", "caps", CAPS, SEED, caps),
        Case("heads", "caps+", CAPS | {"view": "logits", "avg": "1"}, SEED, caps + ", logits + average"),
        Case("step_by_step", "caps", CAPS, SEED, caps),
        Case("about", "caps", CAPS, SEED, caps),
        Case("real_model", "caps", {}, long_sentence, f"{REAL_MODEL_PIECES} word pieces"),
        Case("real_model", "caps+", {}, long_sentence, f"{REAL_MODEL_PIECES} word pieces, step by step on"),
    ]


def figure_sizes(at) -> list[int]:
    """Bytes of every plotly figure of the last run, as sent to the browser: a plotly_chart's JSON spec, a live
    chart's payload (ui/widgets/live.py: a settings line and the figure's JSON)."""
    live = [len(e.proto.bytes) for e in at.get("bidi_component") if e.proto.component_name == "mha_live_chart"]
    return [len(chart.proto.spec.encode()) for chart in at.get("plotly_chart")] + live


def check_page(at, case: Case) -> None:
    """Stop the row when the page raised or showed an error: its timing would not be the page's."""
    problems = [str(e.value) for e in at.exception] + [str(e.value) for e in at.error]
    if problems:
        raise RuntimeError(f"{case.page} ({case.settings}) shows: {problems[0][:300]}")


def open_session(case: Case):
    """A fresh AppTest session on the case's page and settings; (AppTest, seconds of the page switch)."""
    from streamlit.testing.v1 import AppTest

    from ui.state.navigation import PAGE_INFO

    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    for name, value in case.params.items():
        at.query_params[name] = value
    at.run()  # the session's first run: the default page (Heads), the URL read into the widgets
    start = time.perf_counter()
    at.switch_page(PAGE_INFO[case.page].path).run()  # AppTest switches by file path
    switch = time.perf_counter() - start
    if case.settings == "caps+" and case.page == "real_model" and skip_reason(case, at) is None:
        for section in REAL_MODEL_LAZY_SECTIONS:
            at.session_state[section] = True  # what a click on the closed expander does
        at.toggle(key="w_rm_steps").set_value(True).run()
    return at, switch


def timed_rerun(at, case: Case, i: int) -> tuple[float, float, list[int]]:
    """Set the control to its i-th value and rerun: (wall seconds, CPU seconds, figure sizes)."""
    rerun = case.control.change(at, i)
    wall, cpu = time.perf_counter(), time.process_time()
    rerun()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    check_page(at, case)
    if case.control.kind == SETTINGS and at.session_state[case.control.key] != case.control.value(i):
        raise RuntimeError(f"the settings element did not take {case.control.key}={case.control.value(i)!r}")
    return wall, cpu, figure_sizes(at)


def full_collection_seconds() -> float:
    """Seconds of one ``gc.collect(2)``: what a server adds after every run and AppTest leaves out.

    Streamlit's ``runner.postScriptGC`` (on by default) collects after telling the browser the run
    is over, holding the GIL: it delays the next run of every session rather than this one.
    """
    start = time.perf_counter()
    gc.collect(2)
    return time.perf_counter() - start


@functools.cache
def minilm():
    """The real model, loaded once per process (only to size the Real model page's cache entries)."""
    from mha_core.pretrained import load_minilm

    return load_minilm(allow_download=False)


def cache_entry_bytes(at, case: Case) -> int | None:
    """Bytes of the page's cached result for the last run, pickled as ``st.cache_data`` keeps it (None: no cache).

    The Real model page keeps its forward pass in ``st.cache_resource`` (one shared object, its arrays about
    as large as this pickle).
    """
    if case.page in ("heads", "step_by_step"):
        from mha_core.config import run

        return len(pickle.dumps(run(at.session_state["config"])))
    if case.page == "real_model":
        return len(pickle.dumps(minilm().forward(at.text_input(key="w_rm_text").value)))
    return None


def toy_cache_entries() -> int | None:
    """``max_entries`` of the toy pages' engine cache (ui/run/compute.py), read from Streamlit's wrapper."""
    from ui.run.compute import cached_run

    return getattr(getattr(cached_run, "_info", None), "max_entries", None)


def goal_of(case: Case) -> str:
    """The goal the row is judged by, as the table shows it."""
    if case.at_caps:
        return f"<= {GOAL_CAPS_MS:.0f} ms, <= {GOAL_CAPS_FIGURE_BYTES / 1e6:.0f} MB"
    return f"<= {GOAL_DEFAULT_MS:.0f} ms"


def cpu_goal_ms(case: Case) -> float | None:
    """Issue 11's CPU goal for one rerun of the case's page (None where it sets none)."""
    if case.at_caps:
        return GOAL_CAPS_CPU_MS
    return GOAL_CPU_MS.get(case.page)


def goal_met(case: Case, miss_ms: float, figure_bytes: int) -> bool:
    """Whether a missing rerun (and, at the caps, its figures) stays within the goal."""
    if case.at_caps:
        return miss_ms <= GOAL_CAPS_MS and figure_bytes <= GOAL_CAPS_FIGURE_BYTES
    return miss_ms <= GOAL_DEFAULT_MS


def skip_reason(case: Case, at) -> str | None:
    """Why the row cannot be measured here (the real model's files are missing), or None."""
    if case.control.drawn(at):
        return None
    return f"skipped: the page has no widget {case.control.key} (the model files are missing?)"


def measure(case: Case, repetitions: tuple[int, int]) -> dict:
    """One row: ``misses`` reruns with new values, then ``hits`` reruns setting back the value before."""
    misses, hits = repetitions
    row = {"page": case.page, "settings": case.settings, "size": case.size, "control": case.control.name}
    at, switch = open_session(case)
    reason = skip_reason(case, at)
    if reason:
        return row | {"goal": goal_of(case), "met": None, "note": reason}
    check_page(at, case)
    start = next(_fresh_starts)
    timed_rerun(at, case, start)  # untimed: the first change of a session also builds its widgets' state
    walls, cpus, collections, sizes = [], [], [], []
    for i in range(start + 1, start + 1 + misses):
        wall, cpu, figures = timed_rerun(at, case, i)
        walls.append(wall)
        cpus.append(cpu)
        sizes.append(figures)
        collections.append(full_collection_seconds())
    hit_walls = []
    for repetition in range(hits):
        i = start + misses - 1 + (repetition % 2)  # the value before the last, the last, ...: each a change, cached
        hit_walls.append(timed_rerun(at, case, i)[0])
        sizes.append(figure_sizes(at))
    miss_ms = statistics.median(walls) * 1e3
    cpu_ms = statistics.median(cpus) * 1e3
    cpu_goal = cpu_goal_ms(case)
    figure_bytes = max(sum(figures) for figures in sizes)
    entry = cache_entry_bytes(at, case)
    entries = toy_cache_entries() if case.page in ("heads", "step_by_step") else None
    return row | {
        "reruns": misses,
        "miss_ms": miss_ms,
        "cpu_ms": cpu_ms,
        "hit_ms": statistics.median(hit_walls) * 1e3 if hit_walls else None,
        "gc_ms": statistics.median(collections) * 1e3,
        "switch_ms": switch * 1e3,
        "figures": max(len(figures) for figures in sizes),
        "figures_kb": figure_bytes / 1e3,
        "largest_kb": max((max(figures, default=0) for figures in sizes), default=0) / 1e3,
        "cache_entry_mb": entry / 1e6 if entry is not None else None,
        "cache_full_mb": entry * entries / 1e6 if entry is not None and entries else None,
        "goal": goal_of(case),
        "met": goal_met(case, miss_ms, figure_bytes),
        "cpu_goal_ms": cpu_goal,
        "cpu_x_goal": cpu_ms / cpu_goal if cpu_goal else None,
        "cpu_met": cpu_ms <= cpu_goal if cpu_goal else None,
    }


def run(quick: bool) -> list[dict]:
    """Rerun time after a control change per page, with the bytes of the figures it sends.

    ``miss_ms``: median wall-clock time of reruns after a control change that the cache has not
    seen (seed, lesson or sentence changed), measured in ``streamlit.testing.v1.AppTest`` (server
    side only: no websocket, no browser drawing). ``cpu_ms``: their CPU time. ``hit_ms``: the control
    set back to a value computed before. ``gc_ms``: the full garbage collection a server adds after
    each run (``runner.postScriptGC``; not in miss_ms). ``figures_kb``: the JSON of all plotly
    figures of the heaviest rerun (1 KB = 1000 bytes), ``largest_kb`` the largest one. ``cache_entry_mb``: the
    page's cached result at these settings, pickled as ``st.cache_data`` keeps it in memory;
    ``cache_full_mb``: that times the cache's ``max_entries`` (toy pages, ui/run/compute.py), the memory
    a server holds once that many such configurations have been asked for. Goals: <= 100 ms at the
    defaults; <= 1 s and <= 2 MB of figures at the caps (64 tokens, d_model 512, 16 heads, causal;
    the real model at 128 word pieces); "caps+" adds the heaviest view of the page. ``cpu_goal_ms``:
    issue 11's goal for cpu_ms (Heads 15, Step by step 30, Real model 40 ms at the defaults, 100 ms
    at the caps); ``cpu_x_goal`` = cpu_ms / cpu_goal_ms (<= 1 meets it). The "view" and "head" rows
    change what is shown, not what is computed: their figures come from the figure cache. AppTest
    compiles the page script again on every run (a server keeps its bytecode), so cpu_ms here is an
    upper bound of a server's. Quick mode: the
    defaults only, one rerun of each kind.
    """
    repetitions = QUICK_REPETITIONS if quick else FULL_REPETITIONS
    chosen = [case for case in cases() if not (quick and case.at_caps)]
    return [measure(case, repetitions) for case in chosen]


if __name__ == "__main__":
    from bench.report import text_table

    print(text_table(run(quick=False)))
