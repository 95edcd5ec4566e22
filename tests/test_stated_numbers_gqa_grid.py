"""Grouped K/V heads (1 < kv_heads < heads) under every kernel and in every decoder, over a generated grid
(issue 32, item 8).

The parametrisations elsewhere pick a few (heads, kv_heads) pairs per decoder; here an explicit product of head
layouts, kernels, positional schemes and the null key is walked, each configuration the engine accepts run once,
and every decoder's rows compared with numbers this file computes: full attention's own weights, and for the
softmax kernel a loop over query heads that reads K/V head h // (heads / kv_heads) written out here.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from stated_numbers import softmax_row

from mha_core.cache_policy import policy_run
from mha_core.config import MHAConfig, run
from mha_core.decoder import decode_run, decoder_config
from mha_core.flash import flash_of_run, kernel_problem
from mha_core.variant_decoding import decode_variant_run

TOKENS = ("the", "cat", "sat", "on", "a", "mat", "and", "ran")
LAYOUTS = ((4, 2), (6, 2), (6, 3), (8, 2), (8, 4))  # (heads, kv_heads) with 1 < kv_heads < heads
KERNELS = ("softmax", "differential", "linear")
SCHEMES = ("none", "sinusoidal", "rope", "alibi")


def grid() -> list[MHAConfig]:
    configs = []
    for (heads, kv), kernel, pe, null in itertools.product(LAYOUTS, KERNELS, SCHEMES, (False, True)):
        config = MHAConfig(tokens=TOKENS, d_model=8 * heads, n_heads=heads, kv_heads=kv, kernel=kernel, pe=pe,
                           null_key=null, mask="causal", seed=heads * 10 + kv)
        try:
            config.validate()
        except ValueError:
            continue  # a combination the engine refuses (null key or ALiBi with a variant kernel)
        configs.append(config)
    return configs


GRID = grid()


def test_the_grid_holds_every_kernel_and_layout():
    assert {(c.n_heads, c.kv_heads) for c in GRID} == set(LAYOUTS)
    assert {c.kernel for c in GRID} == set(KERNELS)
    assert len(GRID) >= 60


def name(config: MHAConfig) -> str:
    return f"{config.n_heads}over{config.kv_heads}-{config.kernel}-{config.pe}-{'null' if config.null_key else 'plain'}"


def grouped_reference(result) -> np.ndarray:
    """(nh, T, T) softmax weights from a loop over query heads, head h reading K/V head h // (nh / kv)."""
    trace = result.trace
    nh, kv = result.config.n_heads, result.config.key_value_heads
    t = len(result.query_labels)
    weights = np.zeros((nh, t, t))
    for h in range(nh):
        g = h // (nh // kv)
        logits = trace.q[h] @ trace.k[g].T * trace.scale + (0.0 if trace.bias is None else trace.bias[h])
        for i in range(t):
            row = np.append(logits[i, : i + 1], 0.0) if result.config.null_key else logits[i, : i + 1]
            weights[h, i, : i + 1] = softmax_row(row)[: i + 1]
    return weights


@pytest.mark.parametrize("config", GRID, ids=name)
def test_every_decoder_gives_full_attentions_rows_with_grouped_heads(config):
    result = run(decoder_config(config))
    trace = result.trace
    nh, kv, t = config.n_heads, config.key_value_heads, len(TOKENS)
    assert trace.k.shape[0] == kv
    assert [trace.kv_head_of(h) for h in range(nh)] == [h // (nh // kv) for h in range(nh)]
    if config.kernel == "softmax":
        np.testing.assert_allclose(trace.weights, grouped_reference(result), atol=1e-12)
        steps = decode_run(result)
        for step in steps:
            p = step.position
            np.testing.assert_allclose(step.weights[:, 0], trace.weights[:, p, : p + 1], atol=1e-12)
            np.testing.assert_allclose(step.output[0], trace.output[p], atol=1e-12)
            assert step.cache.k.shape == (kv, p + 1, config.head_size)
            np.testing.assert_allclose(step.cache.k, trace.k[:, : p + 1], atol=1e-12)
        for policy, window, sinks in (("window", 3, 0), ("sinks", 2, 1), ("sinks", 3, 2)):
            for step in policy_run(result, policy, window, sinks, "original"):
                p = step.position
                kept = sorted(set(range(max(0, p - window + 1), p + 1)) | set(range(min(sinks, p + 1))))
                assert list(step.held) == kept
                for h in range(nh):
                    logits = trace.logits[h, p, kept]
                    row = softmax_row(np.append(logits, 0.0))[:-1] if config.null_key else softmax_row(logits)
                    np.testing.assert_allclose(step.weights[h, 0], row, atol=1e-12)
        if kernel_problem(config) is None:
            for h in range(nh):
                np.testing.assert_allclose(flash_of_run(result, h, 3, 2).output, trace.heads[h], atol=1e-12)
    else:
        steps = decode_variant_run(result)
        assert len(steps) == t
        for step in steps:
            p = step.position
            np.testing.assert_allclose(step.weights, trace.weights[:, p, : p + 1], atol=1e-12)
            np.testing.assert_allclose(step.output, trace.output[p], atol=1e-12)
        held = dict(steps[-1].held)
        for array in held.values():
            assert array.shape[0] == kv, {k: a.shape for k, a in held.items()}  # one per K/V head, not per query head
