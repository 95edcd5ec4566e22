"""A new kernel row decodes with no other edit (issue 33): sigmoid attention, registered as one row of
``mha_core.kernels.KERNELS``, goes through the engine's one decoding loop (a KV cache read by the row's own
``attend``) and through the Decoding page, and every number is a direct NumPy computation written here.

Sigmoid attention (Ramapuram et al. 2024): w_ij = σ(q_i·k_j·scale − log T_k), T_k the keys a call is given,
masked weights 0, heads = W V. Its rows do not sum to 1. A decoder's step t is given its cache, t + 1 keys, so
its row takes − log(t + 1) where full causal attention over T tokens takes − log T: the page shows the rows
apart, and its max |Δ| is that gap, computed here.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import mha_core.kernels as kernels
from mha_core.config import MHAConfig, run
from mha_core.decoder import decoder_config
from mha_core.decoder_state import KV_CACHE
from mha_core.decoding import decode_tokens, decoder_layer, decoder_of
from mha_core.steps import apply_mask, attention_scores, weighted_sum
from tests import shown_charts
from tests.app_opener import open_app
from tests.test_stated_numbers_steps import heatmaps

ROOT = Path(__file__).resolve().parents[1]
TOKENS = "the cat sat on the mat"
PARAMS = {"tokens": TOKENS, "d_model": "16", "heads": "4", "kv_heads": "2", "seed": "5", "kernel": "sigmoid"}
EXACT = 1e-12
FIGURE = 1e-6  # figures travel as float32


def sigmoid_kernel(q, k, v, mask, scale, bias=None, null_key=False, params=None) -> kernels.KernelOutput:
    """The row's function, in the kernel contract: σ(q·k·scale − log T_k), masked to 0, @ v."""
    scores = attention_scores(q, k)  # (nh, Tq, Tk)
    logits = apply_mask(scores * scale - math.log(k.shape[1]), mask)  # (nh, Tq, Tk), -inf where masked
    weights = 1.0 / (1.0 + np.exp(-logits))  # (nh, Tq, Tk), exactly 0 at -inf
    heads = weighted_sum(weights, v)  # (nh, Tq, hv)
    return kernels.KernelOutput(scores, logits, weights, heads, heads)


SIGMOID = kernels.Kernel(
    "sigmoid", "sigmoid (σ − log T)", "sigmoid", "Each score goes through a sigmoid, shifted by − log T: weights in "
    "(0, 1) that need not sum to 1.", rows_sum_to_one=False, row_sums="a row's sum is not fixed", signed=False,
    attend=sigmoid_kernel, paper="Ramapuram et al. 2024", formula="A = σ(QKᵀ/√d_k − log T)",
    weights_label="weights σ(q·k/√d − log T)")


@pytest.fixture
def sigmoid_row(monkeypatch):
    monkeypatch.setitem(kernels.KERNELS, "sigmoid", SIGMOID)


def direct_decoding(x, w, nh: int, kv: int):
    """Every step by hand from x (T, C) and the weights: rows (T, nh, t+1), heads (T, nh, hv), outputs (T, C_out),
    and the keys, values per K/V head (kv, T, hs), (kv, T, hv). Nothing from the engine."""
    t_len = x.shape[0]
    q_all, k_all, v_all = x @ w.w_q, x @ w.w_k, x @ w.w_v  # no biases in this layer
    hs, hv = q_all.shape[1] // nh, v_all.shape[1] // kv
    keys = np.stack([k_all[:, g * hs:(g + 1) * hs] for g in range(kv)])  # (kv, T, hs)
    values = np.stack([v_all[:, g * hv:(g + 1) * hv] for g in range(kv)])  # (kv, T, hv)
    rows, heads, outputs = [], [], []
    for t in range(t_len):
        row, head = [], []
        for h in range(nh):
            g = h // (nh // kv)
            q = q_all[t, h * hs:(h + 1) * hs]  # (hs,)
            logit = keys[g, : t + 1] @ q / math.sqrt(hs) - math.log(t + 1)  # (t+1,)
            weight = 1.0 / (1.0 + np.exp(-logit))
            row.append(weight)
            head.append(weight @ values[g, : t + 1])  # (hv,)
        rows.append(np.array(row))
        heads.append(np.array(head))
        outputs.append(np.concatenate(head) @ w.w_o)  # (C_out,)
    return rows, np.array(heads), np.array(outputs), keys, values


def direct_full_causal(x, w, nh: int, kv: int) -> np.ndarray:
    """Full causal sigmoid attention over all T tokens by hand: (nh, T, T), − log T in every row."""
    t_len = x.shape[0]
    q_all, k_all = x @ w.w_q, x @ w.w_k
    hs = q_all.shape[1] // nh
    out = np.zeros((nh, t_len, t_len))
    for h in range(nh):
        g = h // (nh // kv)
        q, k = q_all[:, h * hs:(h + 1) * hs], k_all[:, g * hs:(g + 1) * hs]
        logits = q @ k.T / math.sqrt(hs) - math.log(t_len)  # (T, T)
        out[h] = np.tril(1.0 / (1.0 + np.exp(-logits)))
    return out


def decoder_run():
    config = MHAConfig(tokens=tuple(TOKENS.split()), d_model=16, n_heads=4, kv_heads=2, seed=5, kernel="sigmoid")
    return run(decoder_config(config))


def test_the_engine_loop_decodes_the_new_row_through_a_kv_cache_read_by_its_own_attend(sigmoid_row):
    result = decoder_run()
    nh, kv = result.config.n_heads, result.config.key_value_heads
    rows, heads, outputs, keys, values = direct_decoding(result.x_q, result.weights, nh, kv)
    layer = decoder_layer(result.weights, nh, kernel="sigmoid", kv_heads=kv)
    assert decoder_of(layer) is KV_CACHE  # no decoder hook on the row: the KV cache
    steps = list(decode_tokens(result.x_q, layer))
    assert len(steps) == len(rows)
    for t, step in enumerate(steps):
        np.testing.assert_allclose(step.attended.weights[:, 0], rows[t], rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.attended.heads[:, 0], heads[t], rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.output[0], outputs[t], rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.kept.k, keys[:, : t + 1], rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.kept.v, values[:, : t + 1], rtol=0, atol=EXACT)
    assert any(abs(row.sum() - 1.0) > 1e-3 for row in rows[-1])  # the row's rows do not sum to 1


def test_without_the_row_the_kernel_is_refused_by_name():
    result = run(MHAConfig(tokens=("a", "b")))
    with pytest.raises(ValueError, match="unknown attention kernel 'sigmoid'"):
        decoder_layer(result.weights, 4, kernel="sigmoid")


def panels(at: AppTest, prefix: str) -> list[np.ndarray]:
    """Every heatmap (not its grey cover) of the charts whose key starts with ``prefix``, in key order."""
    charts = shown_charts.charts(at)
    return [heatmap for key in sorted(k for k in charts if k.startswith(prefix)) for heatmap in heatmaps(charts[key])]


def panel(at: AppTest, key: str) -> np.ndarray:
    (z,) = panels(at, key)
    return z


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_the_decoding_page_decodes_the_new_row_with_every_number_from_a_direct_computation(sigmoid_row):
    result = decoder_run()
    config = result.config
    nh, kv, hs, n = config.n_heads, config.key_value_heads, config.head_size, len(config.tokens)
    rows, _, _, keys, values = direct_decoding(result.x_q, result.weights, nh, kv)
    full = direct_full_causal(result.x_q, result.weights, nh, kv)
    at = open_app("app_pages/decoding.py", **PARAMS)
    assert at.session_state["config"].kernel == "sigmoid"  # the link's kernel was kept, not replaced
    intro = " ".join(m.value for m in at.markdown)
    assert SIGMOID.weights_label in intro and "A₁ − λA₂" not in intro
    head = 3
    at.selectbox("w_dec_head").set_value(head).run()
    g = head // (nh // kv)
    decoded = np.full((nh, n, n), np.nan)
    for t in range(n):
        at.slider("w_dec_step").set_value(t).run()
        assert not at.exception, (t, [e.message for e in at.exception])
        decoded[:, t, : t + 1] = rows[t]
        decoded[:, t, t + 1:] = 0.0
        shown = metrics(at)
        assert int(shown["Tokens seen"]) == t + 1
        assert int(shown["Numbers kept (this layer)"].replace(",", "")) == kv * (t + 1) * 2 * hs
        gap = np.max(np.abs(decoded[:, : t + 1] - full[:, : t + 1]))
        assert shown["max |Δ| vs full causal"] == f"{gap:.1e}"
        if t < n - 1:
            assert gap > 1e-3  # − log(t+1) against − log T: the rows are apart, and the page says so
        np.testing.assert_allclose(np.nan_to_num(panel(at, "dec_variant_assembled")[: t + 1]),
                                   decoded[head, : t + 1], rtol=0, atol=FIGURE)
        np.testing.assert_allclose(np.nan_to_num(panel(at, "dec_variant_full")), full[head], rtol=0, atol=FIGURE)
        k_shown, v_shown = panels(at, "dec_variant_held_")
        np.testing.assert_allclose(k_shown, keys[g, : t + 1], rtol=0, atol=FIGURE)
        np.testing.assert_allclose(v_shown, values[g, : t + 1], rtol=0, atol=FIGURE)


def test_the_page_changes_with_the_row(sigmoid_row, monkeypatch):
    """A nudged row function shows up on the page: the page reads the row, not a copy of it."""
    def nudged(q, k, v, mask, scale, bias=None, null_key=False, params=None):
        out = sigmoid_kernel(q, k, v, mask, scale, bias, null_key, params)
        return replace(out, weights=out.weights * 0.5)

    monkeypatch.setitem(kernels.KERNELS, "sigmoid", replace(SIGMOID, attend=nudged))
    result = decoder_run()
    rows, *_ = direct_decoding(result.x_q, result.weights, result.config.n_heads, result.config.key_value_heads)
    at = open_app("app_pages/decoding.py", **PARAMS)
    at.slider("w_dec_step").set_value(0).run()
    shown = panel(at, "dec_variant_assembled")[0, 0]
    assert abs(shown - 0.5 * rows[0][0, 0]) <= FIGURE and abs(shown - rows[0][0, 0]) > 1e-3
