"""ui.charts.figures: pure builders. Every figure must pass plotly's full validation, carry float32
data, keep repeated tokens apart, and put all heads on one colour axis."""

from __future__ import annotations

import base64
import json
import pickle

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from mha_core.config import MHAConfig, run
from ui.charts import figure_rows, figures
from ui.charts.views import MATRIX_VIEWS

LABELS = ["0:the", "1:cat", "2:sat", "3:on", "4:the", "5:mat"]


def spec(fig: go.Figure) -> dict:
    """The figure JSON exactly as Streamlit sends it."""
    return json.loads(pio.to_json(fig, validate=False))


def decode(z) -> np.ndarray:
    """A plotly typed array ({dtype, bdata, shape}) back to numpy."""
    shape = tuple(int(n) for n in str(z["shape"]).split(","))
    return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape)


def validated(fig: go.Figure) -> go.Figure:
    """Rebuild with plotly's full property validation: raises on any invalid key or value."""
    return go.Figure(fig.to_dict())


@pytest.fixture(scope="module")
def causal_run():
    return run(MHAConfig(n_heads=4, mask="causal"))


def test_for_plotly_is_float32_and_blanks_infinities():
    out = figures.for_plotly(np.array([[1.0, -np.inf], [np.inf, 2.5]]))
    assert out.dtype == np.float32
    assert np.isnan(out[0, 1]) and np.isnan(out[1, 0]) and out[1, 1] == 2.5


def test_signed_range_covers_the_largest_finite_magnitude():
    assert figures.signed_range(np.array([-3.0, 2.0, -np.inf])) == 3.0
    assert figures.signed_range(np.array([-np.inf])) == 1.0
    assert figures.signed_range(np.zeros(3)) == pytest.approx(1e-9)


@pytest.mark.parametrize("n_heads", [1, 2, 3, 4, 5, 8, 16])
def test_one_heatmap_per_head_each_on_its_own_axes(n_heads):
    mats = np.random.default_rng(n_heads).random((n_heads, 6, 6))
    data = spec(figures.attention_grid(mats, LABELS, LABELS))["data"]
    assert len(data) == n_heads
    assert all(t["type"] == "heatmap" and t["coloraxis"] == "coloraxis" for t in data)
    assert len({(t["xaxis"], t["yaxis"]) for t in data}) == n_heads


def test_weights_use_a_fixed_0_to_1_colour_scale_and_float32_data(causal_run):
    s = spec(figures.attention_grid(causal_run.trace.weights, causal_run.query_labels, causal_run.key_labels))
    axis = s["layout"]["coloraxis"]
    assert (axis["cmin"], axis["cmax"]) == (0.0, 1.0)
    assert axis["colorscale"][0][1] == "#440154" and axis["colorscale"][-1][1] == "#fde725"  # viridis ends
    for h, trace in enumerate(s["data"]):
        z = decode(trace["z"])
        assert z.dtype == np.float32
        np.testing.assert_allclose(z, causal_run.trace.weights[h], atol=1e-7)
        assert np.all(z[np.triu_indices(6, k=1)] == 0.0)  # causal: nothing above the diagonal


def test_masked_logits_are_blank_and_the_scale_is_diverging_around_zero(causal_run):
    logits = causal_run.trace.logits
    s = spec(figures.attention_grid(logits, LABELS, LABELS, kind="logits"))
    axis = s["layout"]["coloraxis"]
    assert axis["cmid"] == 0.0 and axis["cmin"] == -axis["cmax"]
    assert axis["cmax"] == pytest.approx(np.abs(logits[np.isfinite(logits)]).max(), rel=1e-6)
    assert axis["colorscale"][len(axis["colorscale"]) // 2][1] == "rgb(247,247,247)"  # RdBu's white middle
    z = decode(s["data"][0]["z"])
    assert np.all(np.isnan(z[np.triu_indices(6, k=1)]))
    assert not np.any(np.isnan(z[np.tril_indices(6)]))
    assert s["layout"]["plot_bgcolor"] == figures.MASKED_COLOUR  # what a blank cell shows


def test_repeated_tokens_keep_their_own_rows_and_columns():
    s = spec(figures.attention_grid(np.eye(6)[None], LABELS, LABELS))
    trace = s["data"][0]
    assert trace["x"] == LABELS and trace["y"] == LABELS
    assert len(set(trace["x"])) == 6  # '0:the' and '4:the' stay apart
    assert s["layout"]["xaxis"]["type"] == "category"


def test_hover_names_the_query_the_key_and_the_number():
    template = spec(figures.attention_grid(np.eye(6)[None], LABELS, LABELS))["data"][0]["hovertemplate"]
    assert "query %{y}" in template and "key %{x}" in template and "%{z:.4f}" in template


def test_query_rows_run_top_down():
    layout = spec(figures.attention_grid(np.eye(6)[None], LABELS, LABELS))["layout"]
    low, high = layout["yaxis"]["range"]
    assert low > high  # reversed: query 0 at the top


def test_long_sentences_print_every_kth_label_but_keep_every_cell():
    labels = [f"{i}:w{i}" for i in range(64)]
    s = spec(figures.attention_grid(np.zeros((2, 64, 64)), labels, labels, panel_px=200))
    xaxis = s["layout"]["xaxis"]
    assert 4 <= len(xaxis["tickvals"]) < 64
    assert xaxis["tickvals"][0] == "0:w0"
    assert s["data"][0]["x"] == labels


def test_a_heatmap_labels_every_kth_column_to_fit_the_width_it_is_drawn_at():
    labels = [f"d{k}" for k in range(100)]
    fig = figures.matrix_heatmap(np.zeros((2, 100)), ["a", "b"], labels, width_px=150)  # tick font 12 - 1 = 11
    assert list(fig.layout.xaxis.tickvals) == labels[::11]  # ceil(1.5 * 11 * 100 / 150) = 11
    assert list(fig.data[0].x) == labels  # every column keeps its cell


def test_the_average_panel_is_the_mean_of_the_heads_on_the_same_axis():
    mats = np.random.default_rng(1).random((3, 4, 4))
    stacked, titles = figures.with_average(mats)
    assert stacked.shape == (4, 4, 4) and titles[-1] == "average of heads"
    np.testing.assert_allclose(stacked[-1], (mats[0] + mats[1] + mats[2]) / 3, atol=1e-15)
    data = spec(figures.attention_grid(stacked, LABELS[:4], LABELS[:4], titles=titles))["data"]
    assert len(data) == 4 and {t["coloraxis"] for t in data} == {"coloraxis"}


def test_the_average_of_masked_logits_stays_masked(causal_run):
    average = figures.head_average(causal_run.trace.logits)
    assert np.all(np.isneginf(average[np.triu_indices(6, k=1)]))


def test_subplot_titles_name_each_panel():
    layout = spec(figures.attention_grid(np.zeros((3, 2, 2)), ["0:a", "1:b"], ["0:a", "1:b"]))["layout"]
    assert [a["text"] for a in layout["annotations"]] == ["head 0", "head 1", "head 2"]


def test_square_panels_anchor_y_to_x_and_declare_a_width():
    layout = spec(figures.attention_grid(np.zeros((2, 6, 6)), LABELS, LABELS, square=True, panel_px=400))["layout"]
    assert layout["yaxis"]["scaleanchor"] == "x" and layout["yaxis2"]["scaleanchor"] == "x2"
    assert 800 <= layout["width"] <= 1280


def test_font_size_reaches_titles_and_ticks():
    layout = spec(figures.attention_grid(np.zeros((1, 6, 6)), LABELS, LABELS, font_size=20))["layout"]
    assert layout["font"]["size"] == 20
    assert layout["annotations"][0]["font"]["size"] == 22
    assert layout["xaxis"]["tickfont"]["size"] == 19


def test_concat_marks_every_head_boundary():
    concat = np.arange(6 * 8, dtype=float).reshape(6, 8)
    s = spec(figures.concat_heatmap(concat, LABELS, n_heads=4))
    lines = [shape["x0"] for shape in s["layout"]["shapes"]]
    assert lines == [1.5, 3.5, 5.5]  # between columns 1|2, 3|4, 5|6
    assert [a["text"] for a in s["layout"]["annotations"]] == ["head 0", "head 1", "head 2", "head 3"]
    assert s["data"][0]["x"][2] == "h1·0"
    np.testing.assert_array_equal(decode(s["data"][0]["z"]), concat.astype(np.float32))


def test_concat_and_output_is_one_figure_of_two_panels_on_one_colour_bar():
    concat = np.arange(6 * 8, dtype=float).reshape(6, 8) - 20.0  # -20 .. 27
    output = np.linspace(-3.0, 30.0, 6 * 8).reshape(6, 8)  # the larger bound: 30
    words = dict(title="out", value_name="output", row_name="query", col_name="feature")
    s = spec(figure_rows.concat_and_output(concat, LABELS, 4, output, output_words=words))
    first, second = s["data"]
    np.testing.assert_array_equal(decode(first["z"]), concat.astype(np.float32))
    np.testing.assert_array_equal(decode(second["z"]), output.astype(np.float32))
    assert (first["xaxis"], first["yaxis"], second["xaxis"], second["yaxis"]) == ("x", "y", "x2", "y2")
    assert "output %{z:.4f}" in second["hovertemplate"] and "value %{z:.4f}" in first["hovertemplate"]
    axis = s["layout"]["coloraxis"]
    assert (axis["cmin"], axis["cmax"], axis["cmid"]) == (-30.0, 30.0, 0.0)  # both ranges, centred on 0
    assert not any("colorbar" in trace or "zmin" in trace for trace in s["data"])  # one colour bar, the axis's
    assert {(shape["xref"], shape["yref"]) for shape in s["layout"]["shapes"]} == {("x", "y domain")}
    titles = [a for a in s["layout"]["annotations"] if a["text"] in ("Concatenated head outputs", "out")]
    assert len(titles) == 2 and titles[0]["yshift"] == titles[1]["yshift"]  # in line above their panels
    assert s["data"][1]["x"] == [str(c) for c in range(8)]


def test_similarity_heatmap_is_fixed_to_0_1():
    trace = spec(figures.similarity_heatmap(np.eye(3)))["data"][0]
    assert (trace["zmin"], trace["zmax"]) == (0.0, 1.0)
    assert trace["y"] == ["head 0", "head 1", "head 2"]


def test_matrix_heatmap_centres_signed_values_on_zero():
    trace = spec(figures.matrix_heatmap(np.array([[-2.0, 1.0]]), ["0:a"], ["x", "y"]))["data"][0]
    assert (trace["zmin"], trace["zmax"]) == (-2.0, 2.0)


def every_builder(causal_run) -> list[go.Figure]:
    """One figure from each builder in this module, masked logits included."""
    t = causal_run.trace
    with_average, titles = figures.with_average(t.scores)
    return [
        figures.attention_grid(t.weights, LABELS, LABELS),
        figures.attention_grid(t.logits, LABELS, LABELS, kind="logits", square=True, font_size=18),
        figures.attention_grid(with_average, LABELS, LABELS, kind="scores", titles=titles, max_cols=2),
        figures.matrix_heatmap(t.output, LABELS, [str(c) for c in range(16)], title="out"),
        figures.matrix_heatmap(t.weights[0], LABELS, LABELS, signed=False, zmin=0, zmax=1),
        figures.concat_heatmap(t.concat, LABELS, 4),
        figure_rows.concat_and_output(t.concat, LABELS, 4, t.output),
        figure_rows.concat_and_output(t.concat, LABELS, 4, t.output, max_cols=1, width_px=350),
        figure_rows.concat_and_output(t.concat, LABELS, 4),
        figures.similarity_heatmap(np.eye(4)),
        figures.attention_grid(t.logits, LABELS, LABELS, kind="logits", mask=causal_run.mask, colour_range="head"),
    ]


def test_every_builder_passes_full_plotly_validation(causal_run):
    for fig in every_builder(causal_run):
        validated(fig)  # raises ValueError on anything plotly does not know


def test_a_figure_sends_exactly_what_plotly_itself_would_send(causal_run):
    # SentFigure hands Streamlit its dictionaries without building plotly's object tree; reading the
    # figure as a Figure (here: .layout) builds that tree, after which to_dict is plotly's own route.
    for fig in every_builder(causal_run):
        sent = spec(fig)
        assert not fig._built
        assert fig.layout.template is not None  # builds the ordinary Figure
        assert fig._built
        assert sent == spec(fig)


def test_a_figure_is_made_sendable_once_and_survives_pickling(causal_run):
    fig = figures.attention_grid(causal_run.trace.weights, LABELS, LABELS, mask=causal_run.mask)
    assert fig.to_dict() is fig.to_dict()  # a cached figure costs nothing to send again
    again = pickle.loads(pickle.dumps(fig))
    assert spec(again) == spec(fig)
    assert np.array_equal(again.data[0].z, fig.data[0].z, equal_nan=True)


def test_the_heads_figure_at_the_caps_is_well_under_2_mb():
    labels = [f"{i}:w{i % 20}" for i in range(64)]
    mats = np.random.default_rng(0).random((17, 64, 64))  # 16 heads + the average panel
    size = len(pio.to_json(figures.attention_grid(mats, labels, labels), validate=False))
    assert size < 600_000  # float32: 17 * 64 * 64 * 4 bytes = 279 kB before base64


def test_tick_labels_are_at_least_11_px_outside_presentation_mode():
    layout = spec(figures.attention_grid(np.zeros((2, 6, 6)), LABELS, LABELS))["layout"]
    assert layout["xaxis"]["tickfont"]["size"] >= 11 and layout["yaxis"]["tickfont"]["size"] >= 11


def test_the_grid_names_its_axes_queries_down_keys_across():
    layout = spec(figures.attention_grid(np.zeros((6, 3, 3)), LABELS[:3], LABELS[:3], max_cols=4))["layout"]
    # 6 panels in rows of 4: panels 2..5 are the lowest of their columns, panels 0 and 4 start a row
    named_keys = sorted(k for k, v in layout.items() if k.startswith("xaxis") and "title" in v)
    assert named_keys == ["xaxis3", "xaxis4", "xaxis5", "xaxis6"]
    assert layout["xaxis3"]["title"]["text"].startswith("key")
    assert layout["yaxis"]["title"]["text"].startswith("query") and layout["yaxis5"]["title"]["text"].startswith("query")
    assert "title" not in layout["yaxis2"]


@pytest.mark.parametrize("kind", ["weights", "logits", "scores"])
def test_masked_cells_are_a_grey_layer_of_their_own_that_says_masked_on_hover(causal_run, kind):
    matrices = getattr(causal_run.trace, kind)
    s = spec(figures.attention_grid(matrices, LABELS, LABELS, kind=kind, mask=causal_run.mask))
    heads, layers = s["data"][:4], s["data"][4:]
    assert len(layers) == 4  # one masked layer per head
    above = np.triu_indices(6, k=1)  # the causal mask's masked cells
    for h, (head, layer) in enumerate(zip(heads, layers, strict=True)):
        base, over = decode(head["z"]), decode(layer["z"])
        assert np.all(np.isnan(base[above])) and not np.any(np.isnan(base[np.tril_indices(6)]))
        assert not np.any(np.isnan(over[above])) and np.all(np.isnan(over[np.tril_indices(6)]))
        np.testing.assert_allclose(base[np.tril_indices(6)], matrices[h][np.tril_indices(6)], rtol=1e-6)
        assert figures.MASKED_HOVER in layer["hovertemplate"] and figures.MASKED_HOVER not in head["hovertemplate"]
        assert layer["colorscale"][0][1] == layer["colorscale"][-1][1] == figures.MASKED_SOLID
        assert layer["xaxis"] == head["xaxis"] and layer["yaxis"] == head["yaxis"]
        crosses = np.array(layer["text"]) == "×"  # 6 tokens: large enough cells for a cross, on masked cells only
        np.testing.assert_array_equal(crosses, ~np.isnan(over))
    if kind == "scores":  # the raw score still exists before masking: the hover gives it
        np.testing.assert_allclose(decode(layers[0]["z"])[above], matrices[0][above], rtol=1e-6)
        assert MATRIX_VIEWS["scores"].value_name + " %{z" in layers[0]["hovertemplate"]


def test_masked_logits_are_found_without_a_mask(causal_run):
    s = spec(figures.attention_grid(causal_run.trace.logits, LABELS, LABELS, kind="logits"))
    assert len(s["data"]) == 8  # 4 heads + 4 masked layers


def test_no_mask_adds_no_layer(causal_run):
    s = spec(figures.attention_grid(causal_run.trace.weights, LABELS, LABELS, mask=np.ones((6, 6), bool)))
    assert len(s["data"]) == 4


def test_the_adaptive_colour_range_reaches_the_largest_weight_and_says_so():
    mats = np.full((2, 4, 4), 0.25)
    mats[1, 0, 0] = 0.4
    fixed = spec(figures.attention_grid(mats, LABELS[:4], LABELS[:4]))["layout"]["coloraxis"]
    assert (fixed["cmin"], fixed["cmax"]) == (0.0, 1.0) and "0..1" in fixed["colorbar"]["title"]["text"]
    top = spec(figures.attention_grid(mats, LABELS[:4], LABELS[:4], colour_range="max"))["layout"]["coloraxis"]
    assert top["cmax"] == pytest.approx(0.4) and "0..0.4" in top["colorbar"]["title"]["text"]


def test_per_head_colour_range_gives_each_panel_its_own_axis():
    mats = np.full((3, 4, 4), 0.25)
    mats[1, 0, 0], mats[2, 1, 1] = 0.4, 0.7
    s = spec(figures.attention_grid(mats, LABELS[:4], LABELS[:4], colour_range="head"))
    assert [t["coloraxis"] for t in s["data"]] == ["coloraxis", "coloraxis2", "coloraxis3"]
    tops = [s["layout"][name]["cmax"] for name in ("coloraxis", "coloraxis2", "coloraxis3")]
    assert tops == pytest.approx([0.25, 0.4, 0.7])
    bar = s["layout"]["coloraxis"]["colorbar"]
    assert "each head's max" in bar["title"]["text"] and bar["ticktext"] == ["0", "its max"]
    assert [a["text"] for a in s["layout"]["annotations"]] == ["head 0 · max 0.25", "head 1 · max 0.4", "head 2 · max 0.7"]
    assert s["layout"]["coloraxis2"]["showscale"] is False
    validated(figures.attention_grid(mats, LABELS[:4], LABELS[:4], colour_range="head"))


def test_token_text_is_shown_literally_not_as_markup():
    labels = ["0:<b>x</b>", "1:<br>", "2:a&amp;b"]
    s = spec(figures.attention_grid(np.zeros((1, 3, 3)), labels, labels))
    trace, axis = s["data"][0], s["layout"]["xaxis"]
    assert trace["x"] == ["0:&lt;b&gt;x&lt;/b&gt;", "1:&lt;br&gt;", "2:a&amp;amp;b"]
    assert axis["ticktext"] == trace["x"] and trace["y"] == trace["x"]
    heat = spec(figures.matrix_heatmap(np.zeros((3, 3)), labels, labels))["data"][0]
    assert "<" not in "".join(heat["x"] + heat["y"])
