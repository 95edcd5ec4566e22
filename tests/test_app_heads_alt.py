"""Heads' charts in words: the similarity map, the concatenation, the output and the norm-weighted weights each say,
with numbers, what a reader who cannot see them would take away. Every number here is computed from the engine's
arrays (the run's weights, values, concatenation, output and W_O), not with the sentence builders."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from mha_core.inputs import token_labels

ROOT = Path(__file__).resolve().parents[1]
CONFIG = MHAConfig(seed=3, mask="causal")


def q(label: str) -> str:
    return f"“{label}”"


@pytest.fixture(scope="module")
def alts() -> dict[str, str]:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["seed"], at.query_params["mask"] = "3", "causal"
    at.run()
    at.session_state["apart_open"] = True  # the take-apart section, drawn only while open
    at.session_state["diagnostics_open"] = True  # and What each head does (the similarity map)
    at.run()
    assert not at.exception
    return {shown_charts.key_of(e): shown_charts.settings_of(e)["alt"] for e in shown_charts.chart_elements(at)}


@pytest.fixture(scope="module")
def engine():
    result = run(CONFIG)
    return result, token_labels(CONFIG.tokens)


def test_the_similarity_map_names_the_most_and_least_alike_heads(alts, engine):
    result, _ = engine
    flat = result.trace.weights.reshape(result.trace.n_heads, -1)  # (nh, T*T)
    cos = {(a, b): flat[a] @ flat[b] / np.linalg.norm(flat[a]) / np.linalg.norm(flat[b])
           for a, b in combinations(range(result.trace.n_heads), 2)}
    most, least = max(cos, key=cos.get), min(cos, key=cos.get)
    text = alts["similarity"]
    assert text.startswith("Head similarity: cosine similarity of every pair of the 4 heads")
    assert f"most alike: head {most[0]} and head {most[1]} ({cos[most]:.2f})" in text, text
    assert f"least alike: head {least[0]} and head {least[1]} ({cos[least]:.2f})" in text, text


def extremes(matrix: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]]:
    big = np.unravel_index(matrix.argmax(), matrix.shape)
    small = np.unravel_index(matrix.argmin(), matrix.shape)
    return (int(big[0]), int(big[1])), (int(small[0]), int(small[1]))


def test_the_concatenation_gives_its_extremes_and_the_heads_sizes(alts, engine):
    result, labels = engine
    concat = result.trace.concat  # (T, nh*hv)
    nh = result.trace.n_heads
    hv = concat.shape[1] // nh
    (bi, bj), (si, sj) = extremes(concat)
    text = alts["concat"]
    assert f"{concat.shape[0]} tokens by {concat.shape[1]} columns" in text, text
    assert f"largest {concat[bi, bj]:.2f} at token {q(labels[bi])}, column {q(f'h{bj // hv}·{bj % hv}')}" in text
    assert f"smallest {concat[si, sj]:.2f} at token {q(labels[si])}, column {q(f'h{sj // hv}·{sj % hv}')}" in text
    size = np.array([np.abs(concat[:, h * hv:(h + 1) * hv]).mean() for h in range(nh)])  # (nh,)
    assert (f"mean |value| per head {size.min():.2f} (head {size.argmin()}) to {size.max():.2f} "
            f"(head {size.argmax()})") in text, text


def test_the_output_gives_its_extremes(alts, engine):
    result, labels = engine
    output = result.trace.concat @ result.weights.w_o + (0 if result.weights.b_o is None else result.weights.b_o)
    np.testing.assert_allclose(output, result.trace.output, atol=1e-12)
    (bi, bj), (si, sj) = extremes(output)
    text = alts["concat"]  # one chart: the concatenation and, beside it, the output
    assert f"{output.shape[0]} queries by {output.shape[1]} features" in text, text
    assert f"largest {output[bi, bj]:.2f} at query {q(labels[bi])}, feature {q(str(bj))}" in text, text
    assert f"smallest {output[si, sj]:.2f} at query {q(labels[si])}, feature {q(str(sj))}" in text, text


def test_the_norm_weighted_weights_give_each_heads_strongest_cell(alts, engine):
    result, labels = engine
    trace, w = result.trace, result.weights
    hv = trace.heads.shape[-1]
    sentences = alts["apart_carried"].split(" head ")[1:]  # one per panel, in panel order
    assert len(sentences) == trace.n_heads
    allowed = np.tri(len(labels), dtype=bool)  # causal
    for h in range(trace.n_heads):
        norms = np.linalg.norm(trace.v[h] @ w.w_o[h * hv:(h + 1) * hv], axis=-1)  # (Tk,) ‖v_j W_O(h)‖
        carried = np.where(allowed, trace.weights[h] * norms[None, :], -np.inf)  # (Tq, Tk)
        i, j = np.unravel_index(carried.argmax(), carried.shape)
        sentence = sentences[h]
        assert sentence.startswith(f"{h}: weight × ‖v W_O‖: "), sentence
        assert f"strongest {carried[i, j]:.2f} from {q(labels[i])} to {q(labels[j])}" in sentence, sentence
        assert sentence.endswith("15 of 36 cells masked (grey).")
