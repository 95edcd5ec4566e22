"""The Real model page's [CLS]/[SEP] section against the model's own arrays (loop over heads, here)."""

from __future__ import annotations

import numpy as np

from tests.test_app_real_model import assert_ok, charts, decode, page
from ui.pages.real_model import DEFAULT_SENTENCE


def expected_masses(model, position: int) -> tuple[np.ndarray, np.ndarray]:
    """(L, nh) mean weight on key ``position`` and its share of sum_j weight x ||v_j W_O(h)||, head by head."""
    run = model.forward(DEFAULT_SENTENCE)
    weight, share = [], []
    for layer, weights in zip(run.layers, model.layers, strict=True):
        trace = layer.attention
        hs = trace.v.shape[-1]
        w_row, s_row = [], []
        for h in range(trace.weights.shape[0]):
            a = trace.weights[h].astype(np.float64)  # (T, T)
            f = trace.v[h].astype(np.float64) @ weights.attention.w_o[h * hs : (h + 1) * hs].astype(np.float64)
            carried = a * np.linalg.norm(f, axis=-1)[None, :]  # (T, T)
            w_row.append(a[:, position].mean())
            s_row.append((carried[:, position] / carried.sum(axis=-1)).mean())
        weight.append(w_row)
        share.append(s_row)
    return np.array(weight), np.array(share)


def test_cls_and_sep_maps_are_the_model_weights_and_norm_weighted_shares(model):
    at = page(opened=("w_rm_sink",))
    assert_ok(at)
    figs = charts(at)
    n_tokens = len(model.tokenize(DEFAULT_SENTENCE))
    for n, position in ((0, 0), (2, n_tokens - 1)):
        weight, share = expected_masses(model, position)
        np.testing.assert_allclose(decode(figs[f"rm_sink_{n}"]["data"][0]["z"]), weight, atol=1e-5)
        np.testing.assert_allclose(decode(figs[f"rm_sink_{n + 1}"]["data"][0]["z"]), share, atol=1e-5)
    assert any("Clark et al. 2019" in m.value for m in at.markdown)
