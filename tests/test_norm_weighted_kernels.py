"""Heads' norm-weighted map (Take it apart) under every kernel: each cell is the size of key j's exact share of row i
of head h's contribution, as the concatenation holds that row.

A kernel may do something to a head's A·V before the concatenation (a differential head's RMSNorm and its gain
1 - lambda_init); the map must follow. Everything expected here is computed from the engine's arrays: the weights,
the values, the concatenation and W_O. Row i's factor c_i is read off the concatenation itself (its block of head h,
row i, is c_i times row i of weights @ v, which is checked), and for differential also from the paper's rule.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from ui.state.urlstate import params_from_config

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ("softmax", "differential", "linear")
MASKS = ("none", "causal")
SHOWN_RTOL = 1e-6  # the figure carries float32
ENGINE_ATOL = 1e-12


def config_for(kernel: str, mask: str) -> MHAConfig:
    return MHAConfig(seed=3, kernel=kernel, mask=mask, n_heads=4, kv_heads=2)


def shown(kernel: str, mask: str) -> tuple[list[np.ndarray], dict, str, str]:
    """The norm-weighted panels as the browser gets them, the figure, its alt text and the page's text."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params_from_config(config_for(kernel, mask)).items():
        at.query_params[name] = value
    at.run()
    at.session_state["apart_open"] = True  # the take-apart section is drawn only while open
    at.run()
    assert not at.exception, at.exception
    elements = {shown_charts.key_of(e): e for e in shown_charts.chart_elements(at)}
    figure = shown_charts.figure_of(elements["apart_carried"])
    panels = [shown_charts.decode(t["z"]).astype(np.float64) for t in figure["data"] if "coloraxis" in t]
    alt = shown_charts.settings_of(elements["apart_carried"])["alt"]
    text = "\n".join(m.value for m in list(at.markdown) + list(at.caption))
    return panels, figure, alt, text


def row_factors(result) -> np.ndarray:
    """c (nh, Tq): the concatenation's block of head h, row i, divided by row i of weights @ v (checked to be a
    multiple of it)."""
    trace = result.trace
    nh, hv = trace.n_heads, trace.v.shape[-1]
    group = nh // trace.v.shape[0]
    c = np.empty(trace.weights.shape[:2])  # (nh, Tq)
    for h in range(nh):
        av = trace.weights[h] @ trace.v[h // group]  # (Tq, hv): A·V of head h, from its K/V head
        block = trace.concat[:, h * hv:(h + 1) * hv]  # (Tq, hv)
        c[h] = np.einsum("id,id->i", block, av) / np.einsum("id,id->i", av, av)  # (Tq,)
        np.testing.assert_allclose(block, c[h][:, None] * av, rtol=0, atol=ENGINE_ATOL)  # one number per row
    return c


def shares(result, c: np.ndarray) -> np.ndarray:
    """(nh, Tq, Tk, C_out): key j's share of row i of head h's contribution, c_i w_ij v_j W_O(h)."""
    trace, w_o = result.trace, result.weights.w_o
    nh, hv = trace.n_heads, trace.v.shape[-1]
    group = nh // trace.v.shape[0]
    out = []
    for h in range(nh):
        value_out = trace.v[h // group] @ w_o[h * hv:(h + 1) * hv]  # (Tk, C_out): v_j W_O(h)
        out.append(c[h][:, None, None] * trace.weights[h][:, :, None] * value_out[None, :, :])  # (Tq, Tk, C_out)
    return np.stack(out)


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("kernel", KERNELS)
def test_norm_weighted_map_is_the_size_of_each_keys_exact_share(kernel, mask):
    result = run(config_for(kernel, mask))
    trace, w_o = result.trace, result.weights.w_o
    hv = trace.v.shape[-1]
    c = row_factors(result)
    if kernel == "differential":  # the paper's rule: RMSNorm of each row of A·V, times 1 - lambda_init
        params = result.kernel_params
        av = trace.heads  # (nh, Tq, hv), checked above to be weights @ v up to c
        rule = (1 - params.lambda_init) / np.sqrt(np.mean(av * av, axis=-1) + params.norm_eps)  # (nh, Tq)
        np.testing.assert_allclose(c, rule, rtol=1e-12)
        assert np.abs(c - 1).max() > 0.1  # the old formula (c = 1) is far from it here
    else:
        np.testing.assert_allclose(c, 1.0, rtol=0, atol=1e-12)
    parts = shares(result, c)  # (nh, Tq, Tk, C_out)
    for h in range(trace.n_heads):  # the shares add up to the head's contribution, as the output reads it
        contribution = trace.concat[:, h * hv:(h + 1) * hv] @ w_o[h * hv:(h + 1) * hv]  # (Tq, C_out)
        np.testing.assert_allclose(parts[h].sum(axis=1), contribution, rtol=0, atol=ENGINE_ATOL)
    expected = np.linalg.norm(parts, axis=-1)  # (nh, Tq, Tk)

    panels, figure, alt, text = shown(kernel, mask)
    assert len(panels) == trace.n_heads
    allowed = np.ones(expected.shape[1:], dtype=bool) if result.mask is None else result.mask  # (Tq, Tk)
    for h, panel in enumerate(panels):
        assert np.array_equal(np.isfinite(panel), allowed), h  # masked cells are the grey layer's, not the map's
        np.testing.assert_allclose(panel[allowed], expected[h][allowed], rtol=SHOWN_RTOL, atol=1e-9)

    # The colour bar's top, the alt's strongest cell per head, and the words name what the cells are.
    top = figure["layout"]["coloraxis"]["colorbar"]["title"]["text"]
    assert f"0..{expected[:, allowed].max():.3g} (largest shown)" in top, top
    labels = result.query_labels
    sentences = alt.split(" head ")[1:]
    assert len(sentences) == trace.n_heads
    for h, sentence in enumerate(sentences):
        cells = np.where(allowed, expected[h], -np.inf)
        i, j = np.unravel_index(cells.argmax(), cells.shape)
        assert f"strongest {cells[i, j]:.2f} from “{labels[i]}” to “{labels[j]}”" in sentence, sentence
    scaled = not np.allclose(c, 1.0, rtol=0, atol=1e-12)
    assert ("c_i" in top) == scaled and ("c_i" in sentences[0].split(":")[1]) == scaled, (top, sentences[0])
    assert ("c_i = (1 − λ_init) / rms" in text) == scaled, text
    if not scaled:
        assert sentences[0].startswith("0: weight × ‖v W_O‖: "), sentences[0]

