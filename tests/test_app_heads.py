"""The Heads page in AppTest: figures follow the controls, the URL round-trips, bad input gives a message.

A plotly chart has no typed accessor: ``proto.spec`` is the figure JSON as the browser gets it,
numpy arrays encoded as {dtype, bdata (base64), shape} (plotly 7).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core.config import LIMITS, MHAConfig, run
from tests.address_bar import address
from tests.sidebar_controls import control, element, set_control, warnings
from ui.state.urlstate import encode_mask, params_from_config

ROOT = Path(__file__).resolve().parents[1]
TWO_MB = 2 * 1024 * 1024
APART_CHARTS = {"apart_contribution", "apart_change", "apart_carried"}  # Take it apart
DOWNLOADS, QUIZ = "heads_downloads", "quiz_open"  # the sections drawn only while open (their expanders' keys)
DIAGNOSTICS = "diagnostics_open"  # What each head does: the per-head table and the head similarity


def app(params: dict[str, str] | None = None, opened: tuple[str, ...] = ()) -> AppTest:
    """The app on its default page (Heads), opened with ``params`` as the link's query parameters, run once; the
    lazy sections ``opened`` (their keys) open, as a click on their headers leaves them."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    for key in opened:
        at.session_state[key] = True
    return at.run()


def paragraphs(at: AppTest) -> list[str]:
    """Every caption, and every paragraph of every markdown (a heading and its words are one element), in order of
    kind."""
    return [c.value for c in at.caption] + [part for m in at.markdown for part in m.value.split("\n\n")]


def open_take_apart(at: AppTest) -> AppTest:
    """Open the take-apart section (drawn only while open), as a click on its header does, and rerun."""
    at.session_state["apart_open"] = True
    return at.run()


def charts(at: AppTest) -> dict[str, dict]:
    """Every plotly figure on the page by its widget key (the end of the element id), live charts included."""
    return shown_charts.charts(at)


def decode(z) -> np.ndarray:
    """A plotly typed array back to numpy."""
    shape = tuple(int(n) for n in str(z["shape"]).split(","))
    return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape)


def grid_matrices(at: AppTest) -> list[np.ndarray]:
    """The matrices of the heads figure, one per panel (the masked cells' grey layers left out)."""
    return [decode(trace["z"]) for trace in charts(at)["heads_grid"]["data"] if "coloraxis" in trace]


def masked_layers(at: AppTest) -> list[np.ndarray]:
    """The grey layers over the masked cells of the heads figure, one per panel that has any."""
    return [decode(trace["z"]) for trace in charts(at)["heads_grid"]["data"] if "coloraxis" not in trace]


def messages(at: AppTest) -> str:
    """All error, warning and info texts on the page, sidebar included."""
    return "\n".join(str(m.value) for m in [*at.error, *at.warning, *at.info])


def assert_page_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert "heads_grid" in charts(at), "the heads figure is missing"


@pytest.fixture(scope="module")
def default_app() -> AppTest:
    return app()


# ---- the figure -----------------------------------------------------------------------------


def test_the_default_page_renders_every_section(default_app):
    assert_page_ok(default_app)
    assert set(charts(default_app)) == {"heads_grid", "concat"}  # concat: and the output
    assert default_app.title[0].value == "Heads"
    assert [e.label for e in default_app.expander] == ["Describe this chart",
                                                      "**What each head does**: entropy, focus and which heads look alike",
                                                      "**Take it apart: each head's contribution, and knocking heads out**",
                                                      "**Quick check**", "**Download everything**"]
    assert not default_app.dataframe  # closed sections draw nothing: no head diagnostics,
    assert not default_app.get("download_button") and not default_app.radio  # no downloads, no quick check
    opened = open_take_apart(app(opened=(DIAGNOSTICS,)))
    assert_page_ok(opened)
    assert set(charts(opened)) == {"heads_grid", "similarity", "concat"} | APART_CHARTS
    assert len(opened.dataframe) == 2  # the head diagnostics and the knock-out change per token
    table = opened.dataframe[0].value
    assert list(table.index) == ["head 0", "head 1", "head 2", "head 3"]
    assert "entropy" in table.columns


def test_the_heads_figure_holds_the_engines_weights(default_app):
    expected = run(MHAConfig()).trace.weights
    got = grid_matrices(default_app)
    assert len(got) == 4
    for h, z in enumerate(got):
        np.testing.assert_allclose(z, expected[h], atol=1e-7)  # float32 of the float64 weights


@pytest.mark.parametrize("heads", [1, 2, 8, 16])
def test_changing_heads_changes_the_number_of_heatmaps(heads):
    at = app()
    set_control(at, "w_heads", heads)
    assert_page_ok(at)
    assert len(charts(at)["heads_grid"]["data"]) == heads
    assert len(charts(at)["concat"]["layout"]["shapes"]) == heads - 1  # head boundaries


@pytest.mark.parametrize("params", [{"seed": "5"}, {"seed": "5", "wo": "0", "mask": "causal", "heads": "2"}])
def test_the_after_the_heads_figure_holds_the_engines_concatenation_and_output(params):
    # One chart (issue 38: fewer charts), its panels on one colour axis: the concatenation, and beside it the
    # output after W_O; with W_O off (out_proj=0) the concatenation alone.
    at = app(params)
    assert_page_ok(at)
    result = run(MHAConfig(seed=5, **({"output_projection": False, "mask": "causal", "n_heads": 2}
                                     if "wo" in params else {})))
    figure = charts(at)["concat"]
    shown = [decode(trace["z"]) for trace in figure["data"]]
    wanted = [result.trace.concat] + ([result.trace.output] if result.config.output_projection else [])
    assert len(shown) == len(wanted)
    for z, want in zip(shown, wanted, strict=True):
        np.testing.assert_allclose(z, want, rtol=0, atol=1e-6)  # float32 of the engine's float64
    bound = max(np.abs(want).max() for want in wanted)
    axis = figure["layout"]["coloraxis"]
    assert all(trace["coloraxis"] == "coloraxis" for trace in figure["data"])  # one colour bar for both
    assert axis["cmin"] == pytest.approx(-bound) and axis["cmax"] == pytest.approx(bound) and axis["cmid"] == 0.0
    assert len(figure["layout"]["shapes"]) == result.config.n_heads - 1  # head boundaries, on the concatenation


@pytest.mark.parametrize("phone", [False, True])
def test_the_after_the_heads_figure_stands_one_panel_under_the_other_on_a_phone(monkeypatch, phone):
    monkeypatch.setattr("ui.state.device.on_phone", lambda: phone)  # the page reads it on every run
    layout = charts(app({"seed": "5"}))["concat"]["layout"]
    concat, output = (layout["xaxis"]["domain"], layout["yaxis"]["domain"]), (layout["xaxis2"]["domain"],
                                                                             layout["yaxis2"]["domain"])
    if phone:  # one column: the same width, the output under the concatenation
        assert concat[0] == output[0] and output[1][1] < concat[1][0]
        assert layout["yaxis2"].get("showticklabels", True)  # each panel names its rows
    else:  # side by side on the same rows, which the concatenation names for both
        assert concat[1] == output[1] and concat[0][1] < output[0][0]
        assert layout["yaxis2"]["showticklabels"] is False and layout["yaxis2"]["matches"] == "y"


def test_a_causal_mask_gives_a_grey_upper_triangle_and_rows_that_sum_to_1():
    at = app()
    set_control(at, "w_mask", "causal")
    assert_page_ok(at)
    panels, layers = grid_matrices(at), masked_layers(at)
    assert len(panels) == len(layers) == 4
    above, below = np.triu_indices(6, k=1), np.tril_indices(6)
    for z, grey in zip(panels, layers, strict=True):
        assert np.all(np.isnan(z[above])) and not np.any(np.isnan(grey[above]))  # masked: drawn grey, not as 0
        assert np.all(z[below] > 0.0) and np.all(np.isnan(grey[below]))
        np.testing.assert_allclose(np.nansum(z, axis=1), 1.0, atol=1e-6)


def test_the_view_switch_shows_logits_with_masked_cells_blank():
    at = app({"mask": "causal"})
    at.button_group(key="w_view").set_value("logits").run()
    assert_page_ok(at)
    figure = charts(at)["heads_grid"]
    assert figure["layout"]["coloraxis"]["cmid"] == 0.0
    for z in grid_matrices(at):
        assert np.all(np.isnan(z[np.triu_indices(6, k=1)]))
    assert "Grey cells are masked" in " ".join(c.value for c in at.caption)


def test_the_average_adds_one_panel_on_the_same_colour_axis():
    at = app({"heads": "2"})
    at.toggle(key="w_avg").set_value(True).run()
    figure = charts(at)["heads_grid"]
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["head 0", "head 1", "average of heads"]
    assert {t["coloraxis"] for t in figure["data"]} == {"coloraxis"}
    z = grid_matrices(at)
    np.testing.assert_allclose(z[2], (z[0].astype(np.float64) + z[1]) / 2, atol=1e-6)


def test_without_w_o_the_output_is_replaced_by_a_note():
    at = app({"wo": "0"})
    assert_page_ok(at)
    assert "output" not in charts(at)
    assert "W_O is off" in messages(at)


def test_fully_masked_rows_are_named_and_their_policy_stated():
    at = app({"tokens": "the cat sat", "mask": "custom", "cmask": "000.100.110"})
    assert_page_ok(at)
    text = messages(at)
    assert "Fully masked rows: `0:the`." in text and "by our policy their weights and outputs are 0" in text
    assert np.all(np.isnan(grid_matrices(at)[0][0]))  # row 0: every key masked, drawn grey
    assert not np.any(np.isnan(masked_layers(at)[0][0]))


def test_each_matrix_shown_has_a_download_button():
    labels = [b.proto.label for b in app(opened=(DOWNLOADS,)).get("download_button")]
    assert labels[0].startswith("weights")
    for expected in (
        "Head diagnostics (CSV)",
        "Head similarity (CSV)",
        "Concatenation (CSV)",
        "Output after W_O (CSV)",
        "All intermediates (.npz)",
        "All intermediates (.json)",
    ):
        assert expected in labels


# ---- the URL --------------------------------------------------------------------------------

DEEP_LINK = MHAConfig(
    tokens=("the", "dog", "saw", "the", "cat"),
    kv_tokens=("a", "cat", "ran"),
    d_model=24,
    n_heads=3,
    seed=42,
    init="he",
    bias=True,
    pe="sinusoidal",
    scale_rule="temperature",
    temperature=2.5,
    mask="window",
    window=1,
    output_projection=False,
)


def test_a_deep_link_restores_widgets_and_config():
    params = {**params_from_config(DEEP_LINK), "view": "scores", "avg": "1"}
    at = app(params)
    assert_page_ok(at)
    assert at.session_state["config"] == DEEP_LINK
    assert control(at, "w_tokens").value == "the dog saw the cat"
    assert control(at, "w_kv_tokens").value == "a cat ran"
    assert control(at, "w_d_model").value == 24
    assert control(at, "w_heads").value == 3
    assert control(at, "w_init").value == "he"
    assert control(at, "w_window").value == 1
    assert at.button_group(key="w_view").value == "scores"
    assert at.toggle(key="w_avg").value is True
    assert _query(at) == params  # the app wrote back exactly what it was opened with


def _query(at: AppTest) -> dict[str, str]:
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in dict(address(at)).items()}


def test_changing_widgets_updates_the_url():
    at = app()
    set_control(at, "w_tokens", "a b c d")
    set_control(at, "w_mask", "padding")
    set_control(at, "w_valid_len", 2)
    at.button_group(key="w_view").set_value("logits").run()
    query = _query(at)
    assert query["tokens"] == "a b c d" and query["mask"] == "padding" and query["valid_len"] == "2"
    assert query["view"] == "logits"
    assert "avg" not in query  # defaults stay out of the link
    # and the link opens the same page again
    again = app(query)
    assert again.session_state["config"] == at.session_state["config"]
    assert again.button_group(key="w_view").value == "logits"


def test_a_custom_mask_travels_in_the_url():
    grid = ((True, False, False), (True, True, False), (False, True, True))
    at = app({"tokens": "x y z", "mask": "custom", "cmask": encode_mask(grid)})
    assert_page_ok(at)
    assert at.session_state["config"].custom_mask == grid
    assert _query(at)["cmask"] == "100.110.011"
    z = grid_matrices(at)[0]
    np.testing.assert_array_equal(np.isnan(z), ~np.array(grid))  # masked cells: the grey layer, not 0


def test_presentation_mode_travels_in_the_url():
    at = app({"present": "1", "head": "2"})
    assert control(at, "w_present").value is True
    assert _query(at)["present"] == "1" and _query(at)["head"] == "2"
    set_control(at, "w_present", False)
    assert "present" not in _query(at)


# ---- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"d_model": "12", "heads": "5"}, "does not divide"),
        ({"seed": "banana"}, "not a whole number"),
        ({"d_model": "-8"}, "outside"),
        ({"init": "zeros"}, "not one of"),
        ({"mask": "diagonal"}, "not one of"),
        ({"mask": "custom", "cmask": "1x1"}, "cmask"),
        ({"tokens": " ".join(["w"] * 100)}, "limit"),
        ({"tokens": ""}, "empty"),
        ({"temperature": "-1", "scale": "temperature"}, "above 0"),
        ({"head": "99"}, "outside"),
    ],
)
def test_a_bad_link_gives_a_message_and_still_a_figure(params, expected):
    at = app(params)
    assert_page_ok(at)
    assert expected in messages(at)


def test_an_empty_sentence_gives_an_error_and_the_example_sentence():
    at = app()
    set_control(at, "w_tokens", "   ")
    assert_page_ok(at)
    assert "empty" in " ".join(warnings(at))  # an error under the sentence's box
    assert len(grid_matrices(at)[0]) == 6


def test_too_many_tokens_typed_are_cut_at_the_limit():
    at = app()
    set_control(at, "w_tokens", " ".join(f"w{i}" for i in range(80)))
    assert_page_ok(at)
    assert "limit is 64" in " ".join(warnings(at))
    assert grid_matrices(at)[0].shape == (LIMITS["max_tokens"], LIMITS["max_tokens"])


def test_d_model_without_the_chosen_head_count_offers_a_valid_one():
    at = app({"heads": "4"})
    set_control(at, "w_d_model", 9)
    assert_page_ok(at)
    assert control(at, "w_heads").value in (1, 3, 9)
    assert control(at, "w_heads").options == ["1", "3", "9"]


def _upload(at: AppTest, name: str, data: bytes) -> AppTest:
    set_control(at, "w_embedding", "custom")
    at.get("file_uploader")[0].set_value((name, data, "application/octet-stream"))
    return at.run()


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("words.csv", b"the,cat\nsat,on\n", "not a CSV of numbers"),
        ("nan.csv", b"1,nan\n", "NaN"),
        ("cube.npy", _npy(np.zeros((2, 2, 2))), "2-D"),
        ("objects.npy", _npy(np.array([{"a": 1}], dtype=object)), "not a valid .npy"),
        ("shape.csv", b"1,2,3\n4,5,6\n", "has shape (2, 3)"),
    ],
)
def test_a_malformed_upload_gives_an_error_and_random_embeddings(name, data, expected):
    at = _upload(app(), name, data)
    assert_page_ok(at)
    assert expected in " ".join(e.value for e in at.error)
    assert at.session_state["config"].embedding == "random"


def test_a_good_upload_is_used():
    table = np.random.default_rng(3).standard_normal((6, 16))
    at = _upload(app(), "emb.npy", _npy(table))
    assert_page_ok(at)
    config = at.session_state["config"]
    assert config.embedding == "custom"
    np.testing.assert_array_equal(np.array(config.custom_embedding), table)


# ---- presentation mode and size -------------------------------------------------------------


def test_presentation_mode_shows_one_head_and_steps_through_them():
    at = app({"present": "1", "heads": "4", "mask": "causal"})
    assert_page_ok(at)
    assert set(charts(at)) == {"heads_grid"}  # one large figure, nothing else
    figure = charts(at)["heads_grid"]
    assert len(grid_matrices(at)) == 1 and figure["layout"]["font"]["size"] >= 18
    assert figure["layout"]["annotations"][0]["text"] == "head 0 of 4"
    at.button(key="head_next").click().run()
    assert charts(at)["heads_grid"]["layout"]["annotations"][0]["text"] == "head 1 of 4"
    expected = run(MHAConfig(n_heads=4, mask="causal")).trace.weights[1]
    shown = grid_matrices(at)[0]
    np.testing.assert_allclose(shown[~np.isnan(shown)], expected[np.tril_indices(6)], atol=1e-7)
    assert np.all(expected[np.isnan(shown)] == 0.0)  # the grey cells are the masked ones
    at.button(key="head_prev").click().run()
    at.button(key="head_prev").click().run()
    assert at.session_state["w_head"] == 3  # wraps around
    at.toggle(key="w_avg").set_value(True).run()
    assert len(grid_matrices(at)) == 2


def test_presentation_mode_moves_the_controls_out_of_the_sidebar():
    at = app({"present": "1"})
    assert element(at) not in list(at.sidebar) and element(at) in list(at.main)
    assert control(at, "w_tokens").value == "the cat sat on the mat"  # in the 'Show controls' popover
    assert "mask: none" in " ".join(m.value for m in at.markdown)
    normal = app()
    assert element(normal) in list(normal.sidebar) and control(normal, "w_tokens").value == "the cat sat on the mat"


def test_in_presentation_mode_a_bad_link_is_reported_once():
    at = app({"present": "1", "seed": "banana"})
    assert_page_ok(at)
    assert "not a whole number" in messages(at)
    at.button(key="head_next").click().run()
    assert "not a whole number" not in messages(at)  # not on every rerun in front of the class


def test_the_figures_at_the_caps_stay_under_2_mb_per_rerun():
    tokens = " ".join(f"w{i % 20}" for i in range(LIMITS["max_tokens"]))
    sizes = {}
    for view in ("weights", "logits", "scores"):
        at = app(
            {
                "tokens": tokens,
                "d_model": str(LIMITS["max_d_model"]),
                "heads": str(LIMITS["max_heads"]),
                "mask": "causal",
                "avg": "1",
                "view": view,
            }
        )
        assert_page_ok(at)
        sizes[view] = sum(shown_charts.chart_bytes(at).values())
    print(f"figure JSON per rerun at the caps: {sizes}")
    assert max(sizes.values()) <= TWO_MB


def test_a_long_sentence_can_stretch_the_colours_to_its_largest_weight_and_the_link_keeps_it():
    words = " ".join(f"w{i}" for i in range(64))
    at = app({"tokens": words, "d_model": "32", "heads": "4"})
    assert charts(at)["heads_grid"]["layout"]["coloraxis"]["cmax"] == 1.0  # the default compares heads on 0..1
    at.button_group(key="w_colours").set_value("max").run()
    assert_page_ok(at)
    axis = charts(at)["heads_grid"]["layout"]["coloraxis"]
    weights = run(at.session_state["config"]).trace.weights
    assert axis["cmax"] == pytest.approx(weights.max(), rel=1e-6) and axis["cmax"] < 1.0
    assert "largest shown" in axis["colorbar"]["title"]["text"]
    assert _query(at)["colours"] == "max"
    at.button_group(key="w_colours").set_value("head").run()
    layout = charts(at)["heads_grid"]["layout"]
    tops = [layout["coloraxis" if h == 0 else f"coloraxis{h + 1}"]["cmax"] for h in range(4)]
    np.testing.assert_allclose(tops, weights.max(axis=(1, 2)), rtol=1e-6)


def test_the_colour_range_comes_from_the_link_and_only_with_weights():
    at = app({"colours": "head", "heads": "2"})
    assert at.button_group(key="w_colours").value == "head"
    assert "coloraxis2" in charts(at)["heads_grid"]["layout"]
    at.button_group(key="w_view").set_value("logits").run()
    assert not any(w.key == "w_colours" for w in at.get("button_group"))
    bad = app({"colours": "rainbow"})
    assert "colours=rainbow" in messages(bad) and bad.button_group(key="w_colours").value == "fixed"


def test_a_custom_mask_is_edited_in_the_main_area_not_the_sidebar():
    at = app({"tokens": "x y z", "mask": "custom", "cmask": "100.110.111"})
    assert_page_ok(at)
    assert not at.sidebar.dataframe  # the sidebar keeps only where the grid starts from
    editor = at.main.dataframe[0]  # above the heads (the diagnostics table is drawn only while open)
    assert list(editor.value.columns) == ["0:x", "1:y", "2:z"] and list(editor.value.index) == ["0:x", "1:y", "2:z"]
    np.testing.assert_array_equal(editor.value.to_numpy(), run(at.session_state["config"]).mask)


def test_the_mask_editor_applies_its_edits_to_the_grid_it_started_from():
    import streamlit as st

    from ui.widgets.mask_editor import _apply_grid_edits

    st.session_state["grid_base"] = ((True, False, False), (True, True, False))
    st.session_state["grid_7"] = {"edited_rows": {0: {"2:c": True}, "1": {"0:a": False}}}
    _apply_grid_edits("grid_7", ["0:a", "1:b", "2:c"])
    assert st.session_state["custom_grid"] == ((True, False, True), (False, True, False))


def test_cross_attention_diagnostics_leave_out_self_and_previous():
    at = app({"kv_tokens": "a dog ran"}, opened=(DIAGNOSTICS,))
    assert_page_ok(at)
    table = next(d for d in at.main.dataframe if "entropy" in d.value.columns)
    assert "on itself" not in table.value.columns and "on previous" not in table.value.columns


def test_one_head_is_one_square_panel_and_the_caption_says_1_head():
    at = app({"heads": "1"})
    assert_page_ok(at)
    layout = charts(at)["heads_grid"]["layout"]
    assert layout["yaxis"]["scaleanchor"] == "x" and "width" in layout  # square cells, not stretched
    assert "1 head of size" in " ".join(c.value for c in at.caption)


def test_the_weights_caption_gives_the_null_keys_share_from_the_engine_and_says_sum_to_1_only_without_it():
    at = app({"null": "1"})
    captions = " ".join(c.value for c in at.caption)
    shares = 1 - run(MHAConfig(null_key=True)).trace.weights.sum(axis=-1)  # (nh, Tq)
    assert shares.min() > 0.01  # a share a reader can see: the caption below is not about zeros
    assert "Each row sums to 1" not in captions
    assert f"1 − Σ = {shares.min():.3f} to {shares.max():.3f} of a row" in captions
    plain = " ".join(c.value for c in app().caption)
    assert "Each row sums to 1." in plain and "null key" not in plain


@pytest.mark.parametrize("view", ["weights", "logits", "scores"])
def test_each_view_draws_the_engines_own_array_for_it(view):
    config = MHAConfig(mask="causal", seed=5)
    trace = run(config).trace
    expected = {"weights": trace.weights, "logits": trace.logits, "scores": trace.scores}[view]  # named here
    at = app({**params_from_config(config), "view": view})
    assert not at.exception
    shown = grid_matrices(at)
    assert len(shown) == expected.shape[0]
    for z, e in zip(shown, expected, strict=True):
        drawn = np.isfinite(z)  # masked cells are the grey layer's: the causal mask's upper triangle
        np.testing.assert_array_equal(drawn, np.tri(*z.shape, dtype=bool))
        np.testing.assert_allclose(z[drawn], e[drawn], rtol=1e-6, atol=1e-6)
