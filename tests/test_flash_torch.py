"""The tiled kernel against PyTorch's CPU flash kernel (optional: needs torch==2.13.0).

``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p=0.0,
is_causal=False, *, attn_mask=None, scale=None) -> (output, logsumexp)`` in torch 2.13.0 (its schema is
checked below): q, k, v of shape (batch, heads, T, hs), output (batch, heads, T, hv), logsumexp
(batch, heads, T). Ours must equal both in float64 to 1e-10 for several block sizes, causal or not.
"""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from mha_core.flash import flash_attention_head, flash_of_run

torch = pytest.importorskip("torch")

TOL = 1e-10
OP = "_scaled_dot_product_flash_attention_for_cpu"


def torch_flash(q, k, v, causal: bool, scale: float):
    """(output (nh, T, hv), lse (nh, T)) from torch's CPU flash kernel, float64; q, k, v (nh, T, hs)."""
    as_torch = [torch.from_numpy(np.ascontiguousarray(a))[None] for a in (q, k, v)]  # (1, nh, T, d)
    out, lse = getattr(torch.ops.aten, OP)(*as_torch, 0.0, causal, scale=scale)
    return out[0].numpy(), lse[0].numpy()


def test_the_ops_signature_is_the_one_this_file_relies_on():
    schema = str(getattr(torch.ops.aten, OP).default._schema)
    assert "Tensor query, Tensor key, Tensor value, float dropout_p=0., bool is_causal=False" in schema
    assert "float? scale=None" in schema and "(Tensor output, Tensor logsumexp)" in schema


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("t", "block_rows", "block_cols"), [(6, 1, 1), (6, 2, 3), (9, 4, 2), (16, 16, 16), (13, 5, 7)])
def test_output_and_log_sum_exp_equal_torchs_flash_kernel(causal, t, block_rows, block_cols):
    rng = np.random.default_rng(t * 100 + block_rows * 10 + block_cols)
    nh, hs, scale = 3, 8, 0.37
    q, k, v = (rng.normal(size=(nh, t, hs)) * 2 for _ in range(3))  # (nh, T, hs)
    expected_out, expected_lse = torch_flash(q, k, v, causal, scale)
    mask = np.tri(t, dtype=bool) if causal else None
    for head in range(nh):
        kernel = flash_attention_head(q[head], k[head], v[head], block_rows=block_rows, block_cols=block_cols,
                                      scale=scale, mask=mask)
        np.testing.assert_allclose(kernel.output, expected_out[head], rtol=0, atol=TOL)
        np.testing.assert_allclose(kernel.lse, expected_lse[head], rtol=0, atol=TOL)


@pytest.mark.parametrize("config", [MHAConfig(mask="causal", pe="rope"), MHAConfig(d_model=24, n_heads=3)])
@pytest.mark.parametrize(("block_rows", "block_cols"), [(1, 2), (3, 3), (6, 4)])
def test_an_engine_configuration_tiled_equals_torchs_flash_kernel(config, block_rows, block_cols):
    result = run(config)
    trace = result.trace
    expected_out, expected_lse = torch_flash(trace.q, trace.k, trace.v, config.mask == "causal", trace.scale)
    for head in range(config.n_heads):
        kernel = flash_of_run(result, head, block_rows, block_cols)
        np.testing.assert_allclose(kernel.output, expected_out[head], rtol=0, atol=TOL)
        np.testing.assert_allclose(kernel.lse, expected_lse[head], rtol=0, atol=TOL)
