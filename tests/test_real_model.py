"""ui/pages/real_model.py: the Real model page's pure builders, on hand-made arrays and on the real model.

Expected values are worked out by hand in the test or by plain loops; tests that need the model
files skip, saying how to get them, when none is installed.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from ui.charts.figures import MAX_DRAWN_CELLS
from ui.i18n import using_language
from ui.pages import real_model as rm
from ui.pages.real_model import layer_steps as rm_steps
from ui.pages.real_model import overview as rm_overview
from ui.pipeline import panels
from ui.pipeline.records import Panel, Step

TWO_MB = 2 * 1024 * 1024

# ---- the link ------------------------------------------------------------------------------


def test_a_view_survives_the_round_trip_through_query_parameters():
    view = rm.RealView(text="Don't panic & carry on?", layer=5, head=11)
    again, messages = rm.view_from_params(rm.params_from_view(view), n_layers=6, n_heads=12)
    assert again == view
    assert messages == []


def test_no_parameters_give_the_default_view_without_messages():
    assert rm.view_from_params({}, 6, 12) == (rm.RealView(), [])


@pytest.mark.parametrize(
    ("params", "fragment", "layer", "head"),
    [  # the reader of every setting: outside the range -> the nearest end; not a whole number -> the default
        ({"rm_layer": "6"}, "`rm_layer=6` is outside 0..5: using 5", 5, 0),
        ({"rm_layer": "two"}, "`rm_layer=two` is not a whole number: using 0", 0, 0),
        ({"rm_head": "-3"}, "`rm_head=-3` is outside 0..11: using 0", 0, 0),
        ({"rm_head": "1.5"}, "`rm_head=1.5` is not a whole number", 0, 0),
        ({"rm_text": ""}, "`rm_text` is empty", 0, 0),
    ],
)
def test_an_unusable_value_falls_back_with_a_message(params, fragment, layer, head):
    view, messages = rm.view_from_params(params, 6, 12)
    assert (view.layer, view.head, view.text) == (layer, head, rm.DEFAULT_SENTENCE)
    assert len(messages) == 1 and fragment in messages[0]


def test_an_overlong_link_text_is_cut_with_a_message():
    view, messages = rm.view_from_params({"rm_text": "a" * (rm.MAX_TEXT_CHARS + 5)}, 6, 12)
    assert len(view.text) == rm.MAX_TEXT_CHARS
    assert "keeping the first" in messages[0]


# ---- word pieces ---------------------------------------------------------------------------


def test_chips_show_every_piece_with_its_position_and_escape_html():
    tokens = ["[CLS]", "<b>", "un", "##bel", "[SEP]"]
    chips = rm.piece_chips_html(tokens)
    assert "<b>" not in chips  # the token is text, not markup
    assert "&lt;b&gt;" in chips
    for position in range(len(tokens)):
        assert f">{position}</span>" in chips
    assert [rm.piece_kind(t) for t in tokens] == ["special", "start", "start", "piece", "special"]


def test_split_words_groups_the_pieces_of_each_word():
    tokens = ["[CLS]", "snow", "##board", "##er", "was", "un", "##real", "[SEP]"]
    word_ids = [None, 0, 0, 0, 1, 2, 2, None]
    assert rm.split_words(tokens, word_ids) == ["snow ##board ##er", "un ##real"]
    assert rm.split_words(["[CLS]", "a", "[SEP]"], [None, 0, None]) == []
    twice = ["[CLS]", "un", "##real", "and", "un", "##real", "[SEP]"]
    assert rm.split_words(twice, [None, 0, 0, 1, 2, 2, None]) == ["un ##real"]


# ---- pattern measures ----------------------------------------------------------------------


def test_findings_name_the_largest_head_and_count_the_strong_ones():
    measures = {slug: np.zeros((2, 3)) for slug in rm.PATTERN_BY_SLUG}
    measures["previous"] = np.array([[0.1, 0.6, 0.2], [0.9, 0.55, 0.0]])
    measures["word"] = np.full((2, 3), np.nan)
    by_slug = {f.pattern.slug: f for f in rm.findings(measures)}
    previous = by_slug["previous"]
    assert (previous.layer, previous.head, previous.value, previous.n_strong) == (1, 0, 0.9, 3)
    assert (
        previous.sentence() == "Layer 1 head 0 puts 0.90 of its weight on the previous token (3 of 6 heads reach 0.5)."
    )
    assert by_slug["word"].layer is None and "split" in by_slug["word"].sentence()
    assert "no head reaches" in by_slug["cls"].sentence()


# ---- the overview --------------------------------------------------------------------------


def test_max_pool_keeps_each_blocks_largest_weight():
    a = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5) / 25  # (1, 1, 5, 5)
    pooled, block = rm_overview.max_pool(a, max_cells=2)
    assert block == 3
    # blocks: rows 0-2 / 3-4, columns 0-2 / 3-4; the largest entry is the bottom-right one of each
    expected = np.array([[a[0, 0, 2, 2], a[0, 0, 2, 4]], [a[0, 0, 4, 2], a[0, 0, 4, 4]]])
    np.testing.assert_array_equal(pooled[0, 0], expected)


def test_max_pool_leaves_short_sentences_untouched():
    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 7, 7)).astype(np.float32)  # (L, nh, T, T)
    pooled, block = rm_overview.max_pool(a, max_cells=32)
    assert block == 1
    np.testing.assert_array_equal(pooled, a)


def test_block_labels_name_the_positions_and_pieces_of_each_block():
    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert rm_overview.block_labels(tokens, 2) == ["0-1:[CLS] the", "2-3:cat sat", "4:[SEP]"]
    assert rm_overview.block_labels(tokens, 1) == ["0:[CLS]", "1:the", "2:cat", "3:sat", "4:[SEP]"]


def test_the_grid_is_exact_up_to_its_cap_and_block_maxima_beyond():
    rng = np.random.default_rng(2)
    tokens = [f"w{i}" for i in range(7)]
    weights = rng.random((3, 7, 7))  # (nh, T, T)
    exact, labels, block = rm_overview.grid_matrices(weights, tokens, max_cells=7)
    assert block == 1 and labels == [f"{i}:w{i}" for i in range(7)]
    np.testing.assert_array_equal(exact, weights)
    pooled, labels, block = rm_overview.grid_matrices(weights, tokens, max_cells=4)
    assert block == 2 and pooled.shape == (3, 4, 4)
    assert labels == ["0-1:w0 w1", "2-3:w2 w3", "4-5:w4 w5", "6:w6"]
    for h in range(3):  # a plain loop over the blocks, the last one cut short
        for r in range(4):
            for c in range(4):
                want = weights[h, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2].max()
                assert pooled[h, r, c] == pytest.approx(want, abs=1e-7)


def test_the_overview_has_one_panel_per_head_on_a_fixed_scale_and_a_small_payload():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(6, 12, 128, 128))  # (L, nh, T, T)
    attentions = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    fig = rm_overview.overview_figure(attentions.astype(np.float32))
    go.Figure(fig.to_dict())  # validates every property
    assert len(fig.data) == 72
    assert fig.data[13].hovertemplate.startswith("layer 1, head 1")
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)
    assert np.asarray(fig.data[0].z).shape == (32, 32)
    assert len(fig.to_json()) < 700_000  # 72 x 32 x 32 float32 in base64, plus the layout
    assert list(fig.layout.yaxis.ticktext) == [f"layer {n}" for n in range(6)]


# ---- slimming the step-by-step -------------------------------------------------------------


def test_slim_panel_cuts_a_large_matrix_to_the_outlined_block():
    matrix = np.arange(384 * 384, dtype=np.float32).reshape(384, 384)
    labels = [f"d{k}" for k in range(384)]
    panel = Panel("W_Q", matrix, labels, labels, "weight", block=(64, 96))
    slim = panels.slim_panel(panel)
    np.testing.assert_array_equal(slim.matrix, matrix[:, 64:96])
    assert slim.col_labels == labels[64:96] and slim.block is None
    rows = panels.slim_panel(Panel("W_O", matrix, labels, labels, "weight", row_block=(32, 64)))
    np.testing.assert_array_equal(rows.matrix, matrix[32:64])
    small = Panel("S", np.zeros((4, 4)), labels[:4], labels[:4])
    assert panels.slim_panel(small) is small


def test_slim_step_leaves_out_what_is_still_too_large_and_says_so():
    big = Panel("X", np.zeros((128, 384)), [str(i) for i in range(128)], [f"d{k}" for k in range(384)])
    small = Panel("S", np.zeros((4, 4)), list("abcd"), list("abcd"))
    step = panels.slim_step(Step("x", "X", "why", "X", "(128, 384)", (big, small)))
    assert step.panels == (small,)
    assert "X (128, 384)" in step.note


# ---- the real model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(model):
    return model.forward(rm.DEFAULT_SENTENCE)


def test_model_measures_agree_with_loops_over_the_real_weights(run):
    measures = rm.model_measures(run)
    attentions = run.attentions  # (L, nh, T, T)
    n_layers, n_heads, t, _ = attentions.shape
    assert all(m.shape == (n_layers, n_heads) for m in measures.values())
    words = run.word_ids
    for layer, head in [(0, 2), (3, 11), (5, 0)]:
        a = attentions[layer, head].astype(np.float64)
        assert measures["previous"][layer, head] == pytest.approx(np.mean([a[i, i - 1] for i in range(1, t)]), abs=1e-6)
        assert measures["next"][layer, head] == pytest.approx(np.mean([a[i, i + 1] for i in range(t - 1)]), abs=1e-6)
        assert measures["cls"][layer, head] == pytest.approx(a[:, 0].mean(), abs=1e-6)
        assert measures["sep"][layer, head] == pytest.approx(a[:, -1].mean(), abs=1e-6)
        siblings = [
            sum(a[i, j] for j in range(t) if j != i and words[j] == words[i])
            for i in range(t)
            if words[i] is not None and sum(w == words[i] for w in words) > 1
        ]
        assert measures["word"][layer, head] == pytest.approx(np.mean(siblings), abs=1e-6)
        entropy = np.mean([-(row * np.log(row)).sum() / math.log(t) for row in a])
        assert measures["broad"][layer, head] == pytest.approx(entropy, abs=1e-5)


def test_a_real_layer_goes_through_the_step_builders(model, run):
    layer, head = 1, 4
    inputs = rm_steps.layer_inputs(run, layer, model.layers[layer].attention)
    steps = rm_steps.real_steps(run, inputs, layer, head, cell=(2, 3))
    slugs = [s.slug for s in steps]
    assert slugs[0] == "input" and slugs[-1] == "add_norm"
    assert "positional" not in slugs and {"qkv", "scores", "softmax", "output"} <= set(slugs)
    softmax = next(s for s in steps if s.slug == "softmax").panels[0]
    np.testing.assert_array_equal(softmax.matrix, run.layers[layer].attention.weights[head])
    assert softmax.cell == (2, 3)
    scale = next(s for s in steps if s.slug == "scale")
    assert "0.1768" in scale.formula  # 1 / sqrt(32)
    assert next(s for s in steps if s.slug == "mask").note == rm_steps.ONE_SENTENCE_MASK
    assert all(p.matrix.size <= MAX_DRAWN_CELLS for s in steps for p in s.panels)


def test_layer_inputs_refuse_a_layer_that_does_not_exist(model, run):
    with pytest.raises(ValueError, match="choose 0 to 5"):
        rm_steps.layer_inputs(run, 6, model.layers[0].attention)


def test_the_real_head_table_adds_sep_word_and_next_columns(run):
    trace = run.layers[0].attention
    frame = rm.real_head_frame(trace, run.word_ids)
    assert {"on [SEP]", "on its word", "on next"} <= set(frame.columns)
    np.testing.assert_allclose(frame["on [SEP]"], trace.weights[:, :, -1].mean(axis=1), atol=1e-7)


def test_the_overview_in_words_counts_the_heads_by_the_pattern_their_rows_follow():
    """Heads built to look at the previous token, at themselves, at the first token, or nowhere in particular: the
    sentence's counts are the heads built here of each kind."""
    t = 10
    previous = np.eye(t, k=-1)
    previous[0, 0] = 1.0  # query 0 has no previous token: itself
    heads = {"previous": previous, "itself": np.eye(t), "first": np.tile(np.eye(t)[0], (t, 1)),
             "scattered": np.eye(t)[(np.arange(t) + 3) % t]}  # row i looks at key i+3 (mod T): no pattern
    attentions = np.stack([[heads["previous"], heads["previous"], heads["itself"]],
                           [heads["first"], heads["scattered"], heads["previous"]]]).astype(np.float32)  # (2, 3, T, T)
    sentence = rm_overview.overview_sentence(attentions)
    assert sentence.startswith("Every head of 2 layers by 3 heads as a small heatmap of 10 by 10 cells (a cell = a piece)")
    assert sentence.endswith("the previous token 3, itself 1, the first token 1, no single place 1.")
    pooled = rm_overview.overview_sentence(np.tile(attentions, (1, 1, 4, 4)), max_cells=20)  # 40 pieces, 2x2 blocks
    assert "20 by 20 cells (a cell = the largest weight of 2×2 pieces)" in pooled


@pytest.mark.parametrize(("lang", "counts"), [("zh-CN", "前一个 token 3、自身 1、第一个 token 1、没有固定位置 1。"),
                                              ("es", "el token anterior 3, sí mismo 1, el primer token 1, "
                                                     "ningún lugar concreto 1.")])
def test_the_overview_in_words_names_the_heads_places_in_the_readers_language(lang, counts):
    """The counts' labels are the catalog's, joined as the language lists phrases; no English place is left."""
    t = 6
    previous = np.eye(t, k=-1)
    previous[0, 0] = 1.0
    heads = [previous, previous, np.eye(t), np.tile(np.eye(t)[0], (t, 1)), previous, np.eye(t)[(np.arange(t) + 3) % t]]
    attentions = np.stack(heads).reshape(2, 3, t, t).astype(np.float32)
    with using_language(lang):
        sentence = rm_overview.overview_sentence(attentions)
    assert sentence.endswith(counts)
    assert not any(word in sentence for word in ("previous", "itself", "first token"))

