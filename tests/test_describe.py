"""ui.charts.describe: every number in a chart's sentence is checked against the arrays the chart draws.

The expectations are computed here with plain loops over the engine's arrays (argmax, counts, the null
key's share), never with the module's own helpers.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from ui.charts import describe

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
QUOTED = re.compile(r"“[^”]*”")


def numbers_in(sentence: str) -> list[float]:
    """The numbers of a sentence after its title ("head 2: ...") and its quoted labels are taken out."""
    body = sentence.split(": ", 1)[1] if ": " in sentence else sentence
    return [float(x) for x in NUMBER.findall(QUOTED.sub("", body))]


def labels_in(sentence: str) -> list[str]:
    return [q[1:-1] for q in QUOTED.findall(sentence)]


def strongest_cell(matrix, allowed):
    """(value, i, j) of the largest allowed finite cell, the first in reading order: a loop."""
    best = None
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            if allowed[i, j] and np.isfinite(matrix[i, j]) and (best is None or matrix[i, j] > best[0]):
                best = (matrix[i, j], i, j)
    return best


def weakest_cell(matrix, allowed):
    best = None
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            if allowed[i, j] and np.isfinite(matrix[i, j]) and (best is None or matrix[i, j] < best[0]):
                best = (matrix[i, j], i, j)
    return best


def row_argmax(row, allowed_row):
    """The strongest allowed key of one row (first on ties), or None."""
    best = None
    for j, value in enumerate(row):
        if allowed_row[j] and (best is None or value > row[best]):
            best = j
    return best


def rows_following(matrix, allowed, key_of):
    """(rows whose strongest key is key_of(i), rows where key_of(i) exists and is allowed)."""
    matching = rows = 0
    for i in range(matrix.shape[0]):
        j = key_of(i)
        best = row_argmax(matrix[i], allowed[i])
        if best is None or not 0 <= j < matrix.shape[1] or not allowed[i, j]:
            continue
        rows += 1
        matching += best == j
    return matching, rows


def close(shown: float, value: float) -> bool:
    return abs(shown - value) <= 0.005 + 1e-12


@pytest.fixture(scope="module")
def previous_causal():
    return run(MHAConfig(tokens=("the", "cat", "sat", "on", "the", "mat"), init="previous", d_model=8, n_heads=2,
                         mask="causal"))


def test_previous_token_head_is_named_with_its_row_count_and_strongest_cell(previous_causal):
    result = previous_causal
    weights, allowed = result.trace.weights, result.mask
    lines = describe.grid_lines(weights, result.query_labels, result.key_labels, kind="weights", mask=result.mask)
    assert len(lines) == 1 + result.trace.n_heads
    assert "2 panels of 6 queries (rows) by 6 keys" in lines[0]
    for h in range(result.trace.n_heads):
        sentence = lines[1 + h]
        assert sentence.startswith(f"head {h}: each query attends mostly to the previous token")
        matching, rows = rows_following(weights[h], allowed, lambda i: i - 1)
        value, i, j = strongest_cell(weights[h], allowed)
        masked = int((~allowed).sum())
        assert numbers_in(sentence)[:2] == [matching, rows]
        assert matching == rows == 5  # every row but the first, which sees only itself
        assert close(numbers_in(sentence)[2], value)
        assert labels_in(sentence)[:2] == [result.query_labels[i], result.key_labels[j]]
        assert numbers_in(sentence)[3:] == [masked, allowed.size] == [15, 36]


def test_first_token_head_and_random_heads_compare_with_loops():
    for init in ("first", "xavier"):
        result = run(MHAConfig(tokens=("a", "b", "c", "d", "e"), init=init, d_model=8, n_heads=2, seed=3))
        weights = result.trace.weights
        allowed = np.ones(weights.shape[1:], dtype=bool)
        for h, sentence in enumerate(describe.grid_lines(weights, result.query_labels, result.key_labels)[1:]):
            shown = numbers_in(sentence)
            value, i, j = strongest_cell(weights[h], allowed)
            assert close(shown[-1], value), sentence
            assert labels_in(sentence)[-2:] == [result.query_labels[i], result.key_labels[j]]
            if init == "first":
                assert "attends mostly to the first token" in sentence
                assert shown[:2] == list(rows_following(weights[h], allowed, lambda i: 0)) == [5, 5]
            elif "each query" in sentence:  # a random head that happens to follow a pattern: its counts
                name = sentence.split("attends mostly to ")[1].split(" (")[0]
                key_of = {"the previous token": lambda i: i - 1, "itself": lambda i: i,
                          "the next token": lambda i: i + 1, "the first token": lambda i: 0}[name]
                matching, rows = rows_following(weights[h], allowed, key_of)
                assert shown[:2] == [matching, rows] and matching >= rows / 2


def test_one_key_most_rows_look_at_is_named_with_its_count():
    weights = np.array([[[0.1, 0.2, 0.7], [0.2, 0.1, 0.7], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]])  # (1, 4, 3)
    sentence = describe.grid_lines(weights, ["0:a", "1:b", "2:c", "3:d"], ["0:x", "1:y", "2:z"])[1]
    assert "most queries attend mostly to “2:z” (3 of 4 rows)" in sentence
    assert numbers_in(sentence) == [3, 4, 0.8]


def test_null_key_share_is_one_minus_the_row_sum(previous_causal):
    result = run(MHAConfig(tokens=("a", "b", "c", "d"), d_model=8, n_heads=2, null_key=True, mask="causal", seed=1))
    weights, allowed = result.trace.weights, result.mask
    for h, sentence in enumerate(describe.grid_lines(weights, result.query_labels, result.key_labels,
                                                     mask=result.mask, null_key=True)[1:]):
        shares = [1.0 - sum(weights[h, i, j] for j in range(4) if allowed[i, j]) for i in range(4)]
        shown = numbers_in(sentence.split("the null key takes ")[1])
        assert close(shown[0], np.mean(shares)) and close(shown[1], min(shares)) and close(shown[2], max(shares))
        assert min(shares) > 0.0  # softmax_1 always leaves something to the null key


def test_fully_masked_rows_are_named():
    result = run(MHAConfig(tokens=("a", "b", "c"), d_model=8, n_heads=2, mask="custom",
                           custom_mask=((False, False, False), (True, True, False), (True, True, True))))
    sentence = describe.grid_lines(result.trace.weights, result.query_labels, result.key_labels,
                                   mask=result.mask)[1]
    assert f"no key to attend to for “{result.query_labels[0]}”" in sentence
    assert "4 of 9 cells masked" in sentence


def test_signed_view_gives_the_largest_positive_and_most_negative_with_their_cells(previous_causal):
    result = run(MHAConfig(tokens=("the", "cat", "sat", "on"), d_model=8, n_heads=2, mask="causal", seed=5))
    logits, allowed = result.trace.logits, np.isfinite(result.trace.logits)
    lines = describe.grid_lines(logits, result.query_labels, result.key_labels, kind="logits", mask=result.mask)
    assert "red above 0, blue below 0" in lines[0]
    for h, sentence in enumerate(lines[1:]):
        high, low = strongest_cell(logits[h], allowed[h]), weakest_cell(logits[h], allowed[h])
        assert high[0] > 0 > low[0], "the seed is chosen so that each head has both signs"
        shown, labels = numbers_in(sentence), labels_in(sentence)
        assert close(shown[0], high[0]) and close(shown[1], low[0])
        assert labels[:4] == [result.query_labels[high[1]], result.key_labels[high[2]],
                              result.query_labels[low[1]], result.key_labels[low[2]]]
        assert shown[2:] == [6, 16]  # the causal mask's upper triangle


def test_no_negative_zero_and_two_decimals():
    matrix = np.array([[[-0.001, -2.0], [0.5, 1e-4]]])  # (1, 2, 2)
    sentence = describe.grid_lines(matrix, ["0:a", "1:b"], ["0:a", "1:b"], kind="difference")[1]
    assert "largest positive 0.50" in sentence and "most negative -2.00" in sentence and "-0.00" not in sentence


def test_describe_matrix_and_mask_compare_with_argmax():
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(3, 5))
    rows, cols = ["0:a", "1:b", "2:c"], [str(c) for c in range(5)]
    sentence = describe.describe_matrix(matrix, rows, cols, title="output", value_name="output",
                                        row_name="query", col_name="feature")
    i, j = np.unravel_index(matrix.argmax(), matrix.shape)
    k, m = np.unravel_index(matrix.argmin(), matrix.shape)
    assert numbers_in(sentence) == [3, 5, round(matrix[i, j], 2), round(matrix[k, m], 2)]
    assert labels_in(sentence) == [rows[i], cols[j], rows[k], cols[m]]
    causal = np.tril(np.ones((4, 4), dtype=bool))
    text = describe.describe_mask(causal, ["0:a", "1:b", "2:c", "3:d"], ["0:a", "1:b", "2:c", "3:d"])
    assert numbers_in(text) == [10, 16, 6] and "causal" in text
    assert "causal" not in describe.describe_mask(causal.T, ["a"] * 4, ["a"] * 4)


def test_scores_extremes_leave_out_the_masked_cells_the_figure_greys():
    # raw scores exist under the mask (the figure greys them): the sentence speaks of the cells shown in colour
    result = run(MHAConfig(tokens=("the", "cat", "sat", "on", "a", "mat"), d_model=8, n_heads=2, mask="causal",
                           seed=0))
    scores, allowed = result.trace.scores, result.mask
    for h, sentence in enumerate(describe.grid_lines(scores, result.query_labels, result.key_labels, kind="scores",
                                                     mask=result.mask)[1:]):
        high, low = strongest_cell(scores[h], allowed), weakest_cell(scores[h], allowed)
        everywhere = strongest_cell(scores[h], np.ones_like(allowed)), weakest_cell(scores[h], np.ones_like(allowed))
        shown = numbers_in(sentence)
        assert close(shown[0], high[0]) and close(shown[1], low[0]), sentence
        assert shown[2:] == [15, 36]
        if h == 0:
            assert everywhere != (high, low), "the seed is chosen so that a masked cell holds an extreme"


def test_markdown_sentences_show_labels_as_code_spans():
    weights = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    line = describe.grid_lines(weights, ["0:on", "1:*b*"], ["0:on", "1:*b*"], markdown=True)[1]
    assert "from `0:on` to `0:on`" in line
    plain = describe.grid_lines(weights, ["0:on", "1:*b*"], ["0:on", "1:*b*"])[1]
    assert "`" not in plain and "“0:on”" in plain


def test_every_step_panel_is_described_with_its_own_extremes():
    from ui.pipeline.records import step_inputs
    from ui.pipeline.steps import build_steps

    result = run(MHAConfig(tokens=("the", "cat", "sat", "on"), d_model=8, n_heads=2, mask="causal", seed=1))
    panels = [p for step in build_steps(step_inputs(result), 1) for p in step.panels]
    assert {p.kind for p in panels} == {"signed", "weights", "mask"}
    for p in panels:
        text = describe.describe_panel(p.matrix, p.row_labels, p.col_labels, kind=p.kind, title=p.title,
                                       value_name=p.value_name)
        assert text.startswith(p.title)
        body = numbers_in(text[len(p.title):])
        if p.kind == "mask":
            allowed = np.asarray(p.matrix).astype(bool)
            assert body[:3] == [allowed.sum(), allowed.size, (~allowed).sum()]
        elif p.kind == "weights":
            value, i, j = strongest_cell(p.matrix, np.isfinite(p.matrix))
            assert close(numbers_in(text.split("strongest ")[1])[0], value)
        else:
            finite = np.isfinite(p.matrix)
            high, low = strongest_cell(p.matrix, finite), weakest_cell(p.matrix, finite)
            assert body[:2] == list(p.matrix.shape)
            assert close(body[2], high[0]) and close(body[3], low[0]), text
            assert labels_in(text) == [p.row_labels[high[1]], p.col_labels[high[2]],
                                       p.row_labels[low[1]], p.col_labels[low[2]]]


def test_similarity_names_the_most_and_least_alike_pair_of_two_different_heads():
    weights = run(MHAConfig(n_heads=4, seed=5)).trace.weights.reshape(4, -1)  # (nh, T*T)
    similarity = np.array([[a @ b / np.sqrt((a @ a) * (b @ b)) for b in weights] for a in weights])  # (nh, nh)
    pairs = [(similarity[i, j], i, j) for i in range(4) for j in range(i + 1, 4)]  # the diagonal left out
    most, least = max(pairs), min(pairs)
    sentence = describe.describe_similarity(similarity, title="Layer 2")
    assert sentence.startswith("Layer 2: cosine similarity of every pair of the 4 heads' weight matrices")
    assert f"most alike: head {most[1]} and head {most[2]} ({most[0]:.2f})" in sentence
    assert f"least alike: head {least[1]} and head {least[2]} ({least[0]:.2f})" in sentence
    assert "alike" not in describe.describe_similarity(np.ones((1, 1)))  # one head: no pair to name


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_a_head_that_averages_is_said_to_spread_evenly_not_to_attend_to_the_first_token(mask):
    # Every row of the hand-built averaging head is flat: argmax would pick key 0 and call it "the first token".
    result = run(MHAConfig(tokens=("a", "b", "c", "d", "e"), init="uniform_head", d_model=8, n_heads=2, mask=mask))
    weights = result.trace.weights
    allowed = np.ones(weights.shape[1:], dtype=bool) if result.mask is None else result.mask
    for h, sentence in enumerate(describe.grid_lines(weights, result.query_labels, result.key_labels,
                                                     mask=result.mask)[1:]):
        rows = [weights[h][i][allowed[i]] for i in range(weights.shape[1])]
        assert all(np.ptp(row) < 1e-12 for row in rows)  # the engine's rows are flat indeed
        assert "spreads its weight evenly" in sentence and "first token" not in sentence, sentence
        values = sorted({round(float(row[0]), 2) for row in rows})
        assert numbers_in(sentence)[:len(values[:1] + values[-1:])] == (
            [values[0]] if len(values) == 1 else [values[0], values[-1]])
