"""The figure caches stay bounded in bytes when many sessions open the heaviest pages at the caps (issue 38).

48 Step by step pages at the caps, each a new session, grew a server to 576 MB, 4.3 MB per page until
page ~35: the figure caches (ui/run/cached_figures.py) kept 256 panels and 85 rows of panels, and
every cached figure held three copies of its arrays (float32, the base64 dictionary and the JSON).
Here fresh AppTest sessions open Heads, then Step by step, at the caps with a new seed each; every figure a
cache hands out is watched by a weak reference, so what stays alive after the sessions is what some
cache (or anything else) keeps. Its bytes are counted, not timed.
"""

from __future__ import annotations

import gc
import urllib.parse
import weakref
from pathlib import Path

import numpy as np
import pytest
import shown_charts
import streamlit as st
from streamlit.testing.v1 import AppTest

from bench.bench_memory import caps_query
from mha_core.config import run
from tests.sidebar_controls import control
from ui.run import cached_figures

ROOT = Path(__file__).resolve().parents[1]
MB = 2**20
# What the seven figure caches may hold together at the caps, worst case (every entry as large as the largest
# seen): issue 38's caches could reach ~350 MB on a 690 MB host that also holds the real models.
FIGURE_BUDGET_MB = 100
# The seven caches, with their bounds (the number of entries each keeps).
CACHES = {
    "_panel_figure": cached_figures.MAX_PANELS,
    "_panels_figure": cached_figures.MAX_PANEL_ROWS,
    "_panel_rows_figure": cached_figures.MAX_STEP_ROWS,  # Step by step's steps as rows of panels (issue 38)
    "_attention_grid": cached_figures.MAX_FIGURES,
    "_matrix_heatmap": cached_figures.MAX_FIGURES,
    "_concat_and_output": cached_figures.MAX_FIGURES,
    "_similarity_heatmap": cached_figures.MAX_FIGURES,
}


def held_bytes(value, seen: set[int]) -> int:
    """Bytes of the arrays, strings and bytes ``value`` keeps (dicts, lists and instance attributes walked);
    what ``seen`` holds is not counted again (the default template every figure shares, an array's base)."""
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        base = value if value.base is None else value.base
        if base is not value and id(base) in seen:
            return 0
        seen.add(id(base))
        return base.nbytes if isinstance(base, np.ndarray) else value.nbytes
    if isinstance(value, bytes | str):
        return len(value)
    if isinstance(value, dict):
        return sum(held_bytes(key, seen) + held_bytes(item, seen) for key, item in value.items())
    if isinstance(value, list | tuple):
        return sum(held_bytes(item, seen) for item in value)
    attributes = getattr(value, "__dict__", None)
    return held_bytes(attributes, seen) if isinstance(attributes, dict) else 0


@pytest.fixture
def made(monkeypatch):
    """Every figure a figure cache hands out, by cache, as weak references (so only what keeps them alive counts)."""
    made: dict[str, dict[int, weakref.ref]] = {name: {} for name in CACHES}

    def watched(name, cache):
        def handing_out(*args, **kwargs):
            fig = cache(*args, **kwargs)
            made[name][id(fig)] = weakref.ref(fig)
            return fig
        return handing_out

    for name in CACHES:
        cache = getattr(cached_figures, name)
        cache.clear()  # cold: figures made before the watch are not counted
        monkeypatch.setattr(cached_figures, name, watched(name, cache))
    yield made
    st.cache_resource.clear()  # leave no watched figures behind for other tests


def alive(made) -> dict[str, list]:
    """The watched figures still alive, by cache."""
    gc.collect()
    return {name: [fig for fig in (ref() for ref in refs.values()) if fig is not None] for name, refs in made.items()}


def alive_bytes(made, leave_out: frozenset[str] = frozenset()) -> int:
    seen: set[int] = set()
    return sum(held_bytes(fig, seen) for name, figs in alive(made).items() if name not in leave_out for fig in figs)


# Since issue 38 Step by step draws one single panel per configuration at the caps (the weights; its embeddings are
# too large to draw there): the single panels' cache, sized for Decoding's nine a configuration, fills only after
# MAX_PANELS configurations. Its count is bounded below, its bytes by the worst-case test.
FILLS_LATER = frozenset({"_panel_figure"})


def open_at_caps(seed: int, page: str = "app_pages/step_by_step.py") -> AppTest:
    """A fresh session: the shared link at the caps opens Heads, What each head does open (its similarity map is a
    cached figure too), then the session switches to ``page``."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for name, value in urllib.parse.parse_qsl(caps_query(seed)[1:]):
        at.query_params[name] = value
    at.session_state["diagnostics_open"] = True  # as a click on its header leaves it
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_figures_kept_stop_growing_once_the_caches_are_full(made):
    kept = cached_figures.CONFIGURATIONS_KEPT
    held = {}
    for seed in range(1, kept + 3):
        open_at_caps(seed)
        held[seed] = alive_bytes(made, FILLS_LATER)
    assert held[kept] > 10 * MB  # the sessions did fill the caches with figures at the caps
    # Two more configurations evict two; the same shapes, so the same bytes (the seeds change a few digits).
    assert held[kept + 2] <= held[kept] * 1.01, f"{held[kept] / MB:.1f} MB after {kept} sessions, " \
        f"{held[kept + 2] / MB:.1f} MB after {kept + 2}"
    counts = {name: len(figs) for name, figs in alive(made).items()}
    assert all(counts[name] <= bound for name, bound in CACHES.items()), counts
    assert counts["_attention_grid"] == kept  # one grid per configuration: the oldest two are gone
    # The first configuration, evicted, is built again from the engine, not shown from a stale entry.
    at = open_at_caps(1)
    config, head = at.session_state["config"], control(at, "w_head").value
    assert (config.seed, len(config.tokens), config.d_model, config.n_heads) == (1, 64, 512, 16)
    shown = shown_charts.decode(shown_charts.charts(at)["sbs_softmax_0"]["data"][0]["z"])
    np.testing.assert_allclose(shown, run(config).trace.weights[head], atol=1e-6)  # float32 on the wire

def test_the_figure_caches_worst_case_at_the_caps_fits_the_budget(made):
    for seed, page in ((1, "app_pages/step_by_step.py"), (2, "app_pages/decoding.py")):
        at = open_at_caps(seed, page)
    # Heads draws its output after W_O inside the concatenation's figure now (_concat_and_output); the single
    # heatmaps' cache is the Real model page's, which needs a model: fill it with the output at the caps, 64 x 512,
    # the largest matrix Heads drew through it before.
    output = run(at.session_state["config"]).trace.output  # (64, 512)
    cached_figures.matrix_heatmap(output, [f"{i}:t" for i in range(output.shape[0])],
                                  [str(c) for c in range(output.shape[1])], title="output")
    largest = {}
    for name, figs in alive(made).items():
        assert figs, f"no page at the caps made a {name} figure"
        largest[name] = max(held_bytes(fig, set()) for fig in figs)
        assert all(vars(fig).get("_sent") is None for fig in figs), \
            f"{name} keeps its plotly dictionary beside its arrays and JSON: a third copy (SentFigure.sendable)"
    worst = sum(bound * largest[name] for name, bound in CACHES.items())
    detail = ", ".join(f"{name} {bound} x {largest[name] / MB:.2f} MB" for name, bound in CACHES.items())
    assert worst <= FIGURE_BUDGET_MB * MB, f"worst case {worst / MB:.0f} MB: {detail}"
