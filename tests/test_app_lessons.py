"""AppTest for the Lessons page: every lesson opens by URL, shows its figures and claims, and opens in the explorer."""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from page_links import follow
from sidebar_controls import control, set_control
from streamlit.testing.v1 import AppTest

from mha_core.config import run
from tests.address_bar import address
from ui.charts.figures import MASKED_HOVER
from ui.charts.marks import FAILS, HOLDS
from ui.pages.lessons import LESSONS, explorer_query

ROOT = Path(__file__).resolve().parents[1]
FIGURE_TOL = 1e-6  # figures carry float32


def lessons_page(lesson: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)  # lesson 19 loads SmolLM2 and runs it 4 times on its first open
    at.switch_page("app_pages/lessons.py")
    if lesson is not None:
        at.query_params["lesson"] = lesson
    return at.run()


def chart(at: AppTest, key: str) -> dict:
    """The figure JSON of the chart drawn with ``key``."""
    shown = shown_charts.charts(at)
    assert key in shown, f"no chart with key {key}"
    return shown[key]


def panels(figure: dict) -> list[np.ndarray]:
    """Every panel's z as a float array (plotly 7 sends numpy arrays as base64); grey masked layers left out."""
    out = []
    for trace in figure["data"]:
        if MASKED_HOVER in trace.get("hovertemplate", ""):  # the layer that draws masked cells grey
            continue
        z = trace["z"]
        shape = tuple(int(n) for n in str(z["shape"]).split(","))  # plotly writes e.g. "6, 6"
        out.append(np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape).astype(np.float64))
    return out


def param(at: AppTest, name: str) -> str | None:
    """A query parameter's value as one string (AppTest may hold it as a one-element list)."""
    value = address(at).get(name)
    return value[0] if isinstance(value, list) else value


def claim_lines(at: AppTest) -> list[str]:
    return [
        line for m in at.markdown for line in m.value.splitlines() if line.startswith((f"- {HOLDS}", f"- {FAILS}"))
    ]


@pytest.mark.parametrize("key", list(LESSONS))
def test_each_lesson_opens_from_its_url_with_every_claim_marked_true(key):
    at = lessons_page(key)
    assert not at.exception
    assert not at.warning
    assert at.header[0].value.endswith(LESSONS[key].title)
    lines = claim_lines(at)
    assert len(lines) == len(LESSONS[key].findings(LESSONS[key].panels).claims)
    assert all(line.startswith(f"- {HOLDS}") for line in lines), lines
    assert param(at, "lesson") == key
    codes = [c.value for c in at.code]
    assert codes[-1].endswith(f"?lesson={key}")
    for panel in LESSONS[key].panels:
        assert any(c.endswith(explorer_query(panel.config, panel.view)) for c in codes)
    assert len(at.info) >= 1 and LESSONS[key].explanation in at.info[0].value


def test_causal_lesson_figure_has_a_zero_upper_triangle_and_rows_summing_to_one():
    at = lessons_page("causal")
    figure = chart(at, "lesson_causal_grid_0")
    free, causal = panels(figure)
    t = causal.shape[0]
    assert np.all(np.isnan(causal[np.triu_indices(t, k=1)]))  # masked: drawn by the grey layer, weight 0
    assert sum(MASKED_HOVER in trace["hovertemplate"] for trace in figure["data"]) == 1  # the causal panel's
    np.testing.assert_allclose(np.nansum(causal, axis=1), 1.0, atol=FIGURE_TOL)
    assert np.all(free[np.triu_indices(t, k=1)] > 0), "without the mask every key gets some weight"


def test_saturation_lesson_figure_uniform_heads_are_sharper_than_xavier_heads():
    at = lessons_page("saturation")
    matrices = panels(chart(at, "lesson_saturation_grid_0"))
    n_heads = LESSONS["saturation"].panels[0].config.n_heads
    xavier, uniform = matrices[:n_heads], matrices[n_heads:]
    row_max = {name: np.mean([m.max(axis=1).mean() for m in group]) for name, group in (("x", xavier), ("u", uniform))}
    assert row_max["u"] > row_max["x"]
    table = at.dataframe[0].value
    assert (table["row max · uniform"] > table["row max · Xavier"]).all()


def test_average_lesson_last_panel_is_the_mean_of_the_heads_on_the_same_scale():
    at = lessons_page("average")
    figure = chart(at, "lesson_average_grid_0")
    *heads, average = panels(figure)
    np.testing.assert_allclose(average, np.mean(heads, axis=0), atol=FIGURE_TOL)
    assert {t["coloraxis"] for t in figure["data"]} == {"coloraxis"}
    assert (figure["layout"]["coloraxis"]["cmin"], figure["layout"]["coloraxis"]["cmax"]) == (0, 1)


def test_wo_lesson_shares_are_one_hot_without_w_o_and_mixed_with_it():
    at = lessons_page("wo")
    (without,) = panels(chart(at, "lesson_wo_heatmap_0"))
    (with_wo,) = panels(chart(at, "lesson_wo_heatmap_1"))
    assert np.all((without == 0) | (without == 1)) and np.all(without.sum(axis=0) == 1)
    assert np.all(with_wo > 0.01)


def test_sqrt_dk_lesson_scaled_panel_is_flatter():
    at = lessons_page("sqrt_dk")
    raw, scaled = panels(chart(at, "lesson_sqrt_dk_grid_0"))
    assert raw.max(axis=1).mean() > scaled.max(axis=1).mean()


def test_overview_lists_every_lesson_link_and_the_presets():
    at = lessons_page()
    assert not at.exception and not at.warning
    codes = [c.value for c in at.code]
    for key in LESSONS:
        assert any(c.endswith(f"lessons?lesson={key}") for c in codes)
    assert len(panels(chart(at, "preset_grid"))) == 5


def test_unknown_lesson_warns_and_falls_back_to_the_list():
    at = lessons_page("attention-is-magic")
    assert not at.exception
    assert "attention-is-magic" in at.warning[0].value
    assert any(c.value.endswith("lessons?lesson=causal") for c in at.code)
    assert "lesson" not in address(at)


def test_show_button_and_next_and_previous_links_move_between_lessons_and_the_url_follows():
    at = lessons_page()
    at.button(key="lesson_show_causal").click().run()
    assert param(at, "lesson") == "causal"
    follow(at, "next lesson →")
    assert param(at, "lesson") == "colours" and at.header[0].value.endswith(LESSONS["colours"].title)
    follow(at, "← previous lesson")
    follow(at, "← previous lesson")
    assert param(at, "lesson") == "wo" and at.header[0].value.endswith(LESSONS["wo"].title)
    assert not at.exception


@pytest.mark.parametrize("key", list(LESSONS))
def test_open_in_the_explorer_loads_the_lessons_configuration_into_the_sidebar(key):
    panel = LESSONS[key].panels[-1]
    at = lessons_page(key)
    follow(at, panel.caption)
    assert not at.exception
    assert at.session_state["config"] == panel.config
    for name, value in panel.view.items():
        assert at.session_state[f"w_{name}"] == value
    assert param(at, "d_model") == str(panel.config.d_model)
    # the explorer computes the same weights the lesson showed
    shown = run(panel.config).trace.weights
    np.testing.assert_array_equal(run(at.session_state["config"]).trace.weights, shown)


def test_present_1_on_the_lessons_page_turns_presentation_mode_on_and_stays_in_the_link():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/lessons.py")
    at.query_params["present"] = "1"
    at.query_params["lesson"] = "wo"
    at.run()
    assert not at.exception
    assert control(at, "w_present").value is True
    assert not any(t.key == "w_present" for t in at.sidebar.toggle)  # the toggle sits on the page: no sidebar
    assert any("stSidebar" in h.proto.body for h in at.get("html"))  # the CSS that hides the sidebar
    sizes = {figure["layout"]["font"]["size"] for figure in shown_charts.charts(at).values()}
    assert sizes == {18}
    set_control(at, "w_present", False)
    assert "present" not in address(at) and any(t.key == "w_present" for t in at.sidebar.toggle)


def test_a_lesson_added_to_the_registry_reaches_the_picker_the_overview_and_its_link(monkeypatch):
    """One more record in ``LESSONS`` (what one module and one registry line give) is on the page, everywhere."""
    extra = replace(LESSONS["rope"], key="extra", title="An extra lesson", short_title="Extra")
    monkeypatch.setitem(LESSONS, "extra", extra)
    at = lessons_page()
    assert not at.exception and not at.warning
    assert any(c.value.endswith("lessons?lesson=extra") for c in at.code)
    assert at.button(key="lesson_show_extra").label == "Show this lesson"
    picker = next(e for e in at.get("button_group") if e.proto.id.endswith("-lesson_pick"))
    assert [o.content for o in picker.proto.options][-1] == f"{len(LESSONS)}. Extra"
    at = lessons_page("extra")
    assert not at.exception and not at.warning
    assert at.header[0].value == f"{len(LESSONS)}. An extra lesson"
    assert claim_lines(at) and all(line.startswith(f"- {HOLDS}") for line in claim_lines(at))
    assert [c.value for c in at.code][-1].endswith("?lesson=extra")


def test_a_presenting_teacher_stays_presenting_through_the_lessons_links_and_into_the_explorer():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/lessons.py")
    at.query_params["present"] = "1"
    at.query_params["lesson"] = "causal"
    at.run()
    assert not at.exception
    links = [c.value for c in at.code]
    assert any("lesson=causal" in link and "present=1" in link for link in links), links  # the slide's link
    assert all("present=1" in link for link in links if "mask=causal" in link), links  # the explorer links
    follow(at, LESSONS["causal"].panels[1].caption)
    assert not at.exception and at.session_state["w_present"] is True
    assert param(at, "present") == "1"


def test_without_presentation_the_lessons_links_do_not_turn_it_on():
    at = lessons_page("causal")
    assert not any("present=1" in c.value for c in at.code)


def test_predict_first_hides_the_answer_until_revealed_for_each_lesson():
    at = lessons_page("differential")
    at.toggle(key="w_lesson_predict").set_value(True).run()
    assert not at.exception
    lesson = LESSONS["differential"]
    text = " ".join(m.value for m in at.markdown)
    assert lesson.question in text and HOLDS not in text  # the question, not its answer
    assert not at.get("plotly_chart") and not shown_charts.chart_elements(at)
    at.button(key="lesson_reveal_differential").click().run()
    text = " ".join(m.value for m in at.markdown)
    assert HOLDS in text and shown_charts.chart_elements(at)
    follow(at, "next lesson →")  # the next lesson is hidden again until its own reveal
    assert HOLDS not in " ".join(m.value for m in at.markdown)


def test_each_lesson_chart_says_in_words_the_engine_numbers_it_draws():
    """The charts' alt text: the causal panel's masked cells and strongest weight, from the engine's own run."""
    at = lessons_page("causal")
    (element,) = shown_charts.chart_elements(at)
    alt = shown_charts.settings_of(element)["alt"]
    weights = run(LESSONS["causal"].panels[1].config).trace.weights[0]  # (T, T) the causal head the lesson shows
    t = weights.shape[0]
    below = np.tril(weights)  # what the mask lets through
    i, j = np.unravel_index(below.argmax(), below.shape)
    labels = [f"{n}:{token}" for n, token in enumerate(LESSONS["causal"].panels[1].config.tokens)]
    assert f"{t * (t - 1) // 2} of {t * t} cells masked" in alt
    assert f"strongest {below.max():.2f} from “{labels[i]}” to “{labels[j]}”" in alt
    at = lessons_page("wo")
    alts = [shown_charts.settings_of(e)["alt"] for e in shown_charts.chart_elements(at)]
    shares = [panels(chart(at, f"lesson_wo_heatmap_{n}"))[0] for n in range(2)]
    assert len(alts) == 2 and all(f"largest {share.max():.2f}" in alt for alt, share in zip(alts, shares, strict=True))
