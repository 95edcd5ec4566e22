"""Issue 32, item 4: the Heads page names every matrix by what the kernel makes it (from the kernel's record), and
shows the engine's arrays it names: the weights, the maps the weights are made from, the raw scores.

Each label, caption and CSV name read on the page is compared with the kernel record's field, and each matrix shown
with the engine array it names (never with the page's own function). A differential head's "logits" view shows the
two half-head maps L₁, L₂ that its two softmaxes take (softmax of each gives the engine's A₁, A₂), not the whole
head's q·k; a kernel registered without such maps is not offered the view.
"""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import streamlit as st

from mha_core import kernels
from mha_core.attention import softmax
from mha_core.config import MHAConfig, run
from mha_core.kernels import KERNELS, kernel_refusal
from tests.test_app_heads import DOWNLOADS, app, charts, grid_matrices, paragraphs
from tests.test_app_heads import decode as decode_z

FIGURE = 1e-5  # figures travel as float32
CSV = 1e-8  # the CSV writes 8 decimals

# What each kernel's record must say its views are, and the engine arrays they must show, per head.
ENGINE_MAPS = {
    "softmax": lambda trace: [[trace.logits[h]] for h in range(trace.n_heads)],
    "differential": lambda trace: [[trace.kernel_parts.logits1[h], trace.kernel_parts.logits2[h]]
                                   for h in range(trace.n_heads)],
    "linear": lambda trace: [[trace.kernel_parts.similarity[h]] for h in range(trace.n_heads)],
    # issue 34's sparse selection: the logits of the keys each head kept (-inf at every other key)
    "moba": lambda trace: [[np.where(trace.kernel_parts.kept[h], trace.logits[h], -np.inf)] for h in range(trace.n_heads)],
    "dsa": lambda trace: [[np.where(trace.kernel_parts.kept[h], trace.logits[h], -np.inf)] for h in range(trace.n_heads)],
    "gated": lambda trace: [[trace.logits[h]] for h in range(trace.n_heads)],  # a softmax head's, gated after A·V
    "sink": lambda trace: [[trace.logits[h]] for h in range(trace.n_heads)],  # the logits the sink joins
    "qknorm": lambda trace: [[trace.logits[h]] for h in range(trace.n_heads)],  # softmax's logits, of q̂ and k̂
    "deltanet": lambda trace: [[trace.kernel_parts.similarity[h]] for h in range(trace.n_heads)],
}


@pytest.fixture
def downloads(monkeypatch):
    """Every download button drawn: its label -> (file name, the callable that builds its bytes)."""
    seen: dict[str, tuple[str, object]] = {}
    original = st.download_button

    def recording(label, data=None, file_name=None, *args, **kwargs):
        seen[label] = (file_name, data)
        return original(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    return seen


def switch_labels(at) -> list[str]:
    return [o.content for o in at.get("button_group")[0].proto.options]


def figure_titles(at) -> list[str]:
    return [a["text"] for a in charts(at)["heads_grid"]["layout"]["annotations"]]


def csv_frame(downloads, label: str) -> tuple[str, pd.DataFrame]:
    name, data = downloads[label]
    return name, pd.read_csv(io.BytesIO(data()), index_col=[0, 1])


def assert_shown(at, downloads, label: str, expected: list[np.ndarray], titles: list[str]) -> None:
    """The figure's panels and the CSV hold ``expected`` (masked cells: grey in the figure, -inf/0 in the CSV)."""
    assert figure_titles(at) == titles
    shown = grid_matrices(at)
    assert len(shown) == len(expected)
    for z, want in zip(shown, expected, strict=True):
        drawn = np.isfinite(z)
        assert drawn.any()
        np.testing.assert_allclose(z[drawn], np.asarray(want)[drawn], rtol=0, atol=FIGURE)
    _, frame = csv_frame(downloads, f"{label} (CSV)")
    assert list(dict.fromkeys(frame.index.get_level_values(0))) == titles
    for title, want in zip(titles, expected, strict=True):
        np.testing.assert_allclose(frame.loc[title].to_numpy(dtype=float), want, rtol=0, atol=CSV)


@pytest.mark.parametrize("name", list(KERNELS))
def test_the_weights_are_named_by_the_kernels_record_and_are_the_engines(name, downloads):
    at = app({"kernel": name, "mask": "causal"}, opened=(DOWNLOADS,))
    assert not at.exception
    kernel = KERNELS[name]
    trace = run(MHAConfig(kernel=name, mask="causal")).trace
    assert switch_labels(at)[0] == kernel.weights_label
    assert f"{kernel.weights_label} (CSV)" in downloads and downloads[f"{kernel.weights_label} (CSV)"][0] == "weights.csv"
    expected = [trace.weights[h] for h in range(trace.n_heads)]
    assert_shown(at, downloads, kernel.weights_label, expected, [f"head {h}" for h in range(trace.n_heads)])
    if name != "softmax":
        assert not any("softmax" in label for label in [*switch_labels(at), *downloads])


@pytest.mark.parametrize("name", list(KERNELS))
def test_the_maps_before_the_weights_are_the_kernels_own(name, downloads):
    at = app({"kernel": name, "mask": "causal", "view": "logits"}, opened=(DOWNLOADS,))
    assert not at.exception
    inputs = KERNELS[name].inputs
    trace = run(MHAConfig(kernel=name, mask="causal")).trace
    assert switch_labels(at)[1] == inputs.label
    assert any(c.value.startswith(inputs.caption + " Rows = queries") for c in at.caption)
    assert downloads[f"{inputs.label} (CSV)"][0] == f"{inputs.file_stem}.csv"
    per_head = ENGINE_MAPS[name](trace)
    titles = [f"head {h}" + (f" · {n}" if n else "") for h in range(trace.n_heads) for n in inputs.names]
    assert_shown(at, downloads, inputs.label, [m for maps in per_head for m in maps], titles)
    figure = charts(at)["heads_grid"]
    assert f"{inputs.value_name} %{{z" in figure["data"][0]["hovertemplate"]


def test_a_differential_heads_logits_view_shows_what_its_two_softmaxes_take(downloads):
    at = app({"kernel": "differential", "view": "logits", "mask": "causal"})
    parts = run(MHAConfig(kernel="differential", mask="causal")).trace.kernel_parts
    shown = grid_matrices(at)
    for h in range(parts.map1.shape[0]):
        for z, engine_map in ((shown[2 * h], parts.map1[h]), (shown[2 * h + 1], parts.map2[h])):
            logits = np.where(np.isfinite(z), z, -np.inf).astype(np.float64)  # the grey cells are masked (-inf)
            np.testing.assert_allclose(softmax(logits, axis=-1), engine_map, rtol=0, atol=1e-5)
    whole = run(MHAConfig(kernel="differential", mask="causal")).trace.logits[0]  # the old view's matrix
    assert not np.allclose(np.nan_to_num(shown[0], nan=0.0), np.where(np.isfinite(whole), whole, 0.0), atol=1e-3)


@pytest.mark.parametrize("name", ["differential", "linear"])
def test_the_raw_scores_caption_says_what_q_k_is_to_the_kernel(name):
    at = app({"kernel": name, "view": "scores"})
    assert any(c.value.startswith(KERNELS[name].scores_caption + " Rows = queries") for c in at.caption)
    np.testing.assert_allclose(grid_matrices(at)[1], run(MHAConfig(kernel=name)).trace.scores[1], rtol=0, atol=FIGURE)


def test_the_average_of_a_differential_heads_maps_is_taken_per_map():
    at = app({"kernel": "differential", "view": "logits", "w_avg": "1"})
    at.session_state["w_avg"] = True
    at.run()
    parts = run(MHAConfig(kernel="differential")).trace.kernel_parts
    titles = figure_titles(at)
    assert titles[-2:] == ["average of heads · L₁", "average of heads · L₂"]
    shown = grid_matrices(at)
    np.testing.assert_allclose(shown[-2], parts.logits1.mean(axis=0), rtol=0, atol=FIGURE)
    np.testing.assert_allclose(shown[-1], parts.logits2.mean(axis=0), rtol=0, atol=FIGURE)


def test_presentation_shows_one_differential_heads_two_maps():
    at = app({"kernel": "differential", "view": "logits", "present": "1", "head": "2"})
    assert not at.exception
    parts = run(MHAConfig(kernel="differential")).trace.kernel_parts
    assert figure_titles(at) == ["head 2 of 4 · L₁", "head 2 of 4 · L₂"]
    shown = grid_matrices(at)
    np.testing.assert_allclose(shown[0], parts.logits1[2], rtol=0, atol=FIGURE)
    np.testing.assert_allclose(shown[1], parts.logits2[2], rtol=0, atol=FIGURE)


def test_a_kernel_whose_record_names_no_maps_is_not_offered_the_view(monkeypatch):
    # A kernel of a different kind: softmax's function, but its record says it makes its weights from no map.
    plain = replace(KERNELS["softmax"], name="plain", label="plain (test)", weights_label="weights (plain)",
                    inputs=None)
    monkeypatch.setitem(kernels.KERNELS, "plain", plain)
    at = app({"kernel": "plain", "view": "logits"})
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["config"].kernel == "plain"
    assert switch_labels(at) == ["weights (plain)", "raw scores q·k"]
    assert at.session_state["w_view"] == "weights"
    assert any("has no scaled + masked logits" in i.value for i in at.info)


def test_presentation_with_the_average_adds_the_mean_of_each_map():
    at = app({"kernel": "differential", "view": "logits", "present": "1", "head": "1", "avg": "1"})
    parts = run(MHAConfig(kernel="differential")).trace.kernel_parts
    assert figure_titles(at) == ["head 1 of 4 · L₁", "head 1 of 4 · L₂", "average · L₁", "average · L₂"]
    shown = grid_matrices(at)
    for z, want in zip(shown, [parts.logits1[1], parts.logits2[1], parts.logits1.mean(0), parts.logits2.mean(0)],
                       strict=True):
        np.testing.assert_allclose(z, want, rtol=0, atol=FIGURE)


@pytest.mark.parametrize("name", list(KERNELS))
def test_the_concatenation_caption_says_what_each_head_puts_in(name):
    # The figure holds the engine's concat; each head's block is weights × V, or a differential head's
    # RMSNorm(weights × V) × (1 − λ_init): the caption must name the step that made the numbers shown.
    causal = {"mask": "causal"} if kernel_refusal(name, MHAConfig(kernel=name)) else {}  # a causal-only kernel
    at = app({"kernel": name, **causal})
    trace = run(MHAConfig(kernel=name, **causal)).trace
    shown = decode_z(charts(at)["concat"]["data"][0]["z"])
    np.testing.assert_allclose(shown, trace.concat, rtol=0, atol=FIGURE)
    blocks = np.split(trace.concat, trace.n_heads, axis=1)
    caption = next(p for p in paragraphs(at) if p.startswith("Each head's output"))
    parts = trace.kernel_parts
    if name == "differential":
        for h, block in enumerate(blocks):
            np.testing.assert_allclose(block, parts.normed_heads[h], rtol=0, atol=1e-12)
            assert not np.allclose(block, trace.heads[h], atol=1e-3)
        assert "RMSNorm" in caption and f"(1 − λ_init) = {parts.output_gain:.4f}" in caption, caption
    elif name == "gated":  # A·V ⊙ σ(X W_θ), feature by feature
        for h, block in enumerate(blocks):
            np.testing.assert_allclose(block, trace.heads[h] * parts.gate[h], rtol=0, atol=1e-12)
        assert caption.startswith("Each head's output (weights × V, then ⊙ its gate σ(X W_θ)) is"), caption
    else:
        for h, block in enumerate(blocks):
            np.testing.assert_allclose(block, trace.heads[h], rtol=0, atol=1e-12)
        assert caption.startswith("Each head's output (weights × V) is"), caption


def test_the_row_sums_caption_keeps_the_kernels_own_letters():
    # str.capitalize() turned the label 'differential (A₁ − λA₂)' into 'Differential (a₁ − λa₂)' under the heads.
    at = app({"kernel": "differential"})
    parts = run(MHAConfig(kernel="differential")).trace.kernel_parts
    caption = next(c.value for c in at.caption if "each row sums to" in c.value)
    label = KERNELS["differential"].label
    assert f"{label[0].upper()}{label[1:]}: each row sums to 1 − λ = {1.0 - parts.lam:.3f}, not 1" in caption, caption
    assert "a₁" not in caption and "A₁ − λA₂" in caption, caption
