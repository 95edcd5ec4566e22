"""mha_core.decoder: a layer decoded token by token, against full causal attention and counts worked on paper."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from mha_core.decoder import assembled_weights, decode_run, decoder_config, max_difference, step_cost

EXACT = 1e-12


def test_decoder_config_is_causal_self_attention_over_the_queries():
    cross = MHAConfig(tokens=("the", "cat", "sat"), kv_tokens=("a", "dog"), mask="none", n_heads=2)
    decoder = decoder_config(cross)
    assert decoder.kv_tokens is None and decoder.mask == "causal"
    assert replace(decoder, kv_tokens=cross.kv_tokens, mask="none") == cross  # nothing else changed


def test_decoded_rows_are_full_causal_attentions_rows_and_the_future_is_zero():
    config = MHAConfig(tokens=("the", "cat", "sat", "on", "a"), n_heads=4, kv_heads=2, pe="rope")
    result = run(decoder_config(config))
    steps = decode_run(result)
    rows = assembled_weights(steps, 2)  # (nh, T, T): rows 0..2 decoded
    np.testing.assert_allclose(rows[:, :3], result.trace.weights[:, :3], rtol=0, atol=EXACT)
    assert np.isnan(rows[:, 3:]).all()  # not decoded yet
    assert np.all(rows[:, 1, 2:] == 0)  # row 1 may not see keys 2.. (weight exactly 0)
    assert max_difference(steps, len(steps) - 1, result.trace.weights) <= EXACT
    nudged = np.array(result.trace.weights)
    nudged[1, 3, 0] += 1e-3
    assert max_difference(steps, 3, nudged) == pytest.approx(1e-3, abs=1e-15)  # the nudge shows
    assert max_difference(steps, 2, nudged) <= EXACT  # row 3 is not compared before step 3


def test_step_costs_worked_on_paper():
    # nh = 4, kv = 2, hs = hv = 16/4 = 4, float64 (8 bytes). fresh = nh*hs + kv*(hs+hv) = 16 + 16 = 32;
    # reused at step t = kv*t*(hs+hv) = 16t; cache after step t = 16(t+1) numbers, 128(t+1) bytes.
    config = MHAConfig(tokens=("the", "cat", "sat"), d_model=16, n_heads=4, kv_heads=2)
    costs = [step_cost(s) for s in decode_run(run(decoder_config(config)))]
    assert [c.fresh for c in costs] == [32, 32, 32]
    assert [c.reused for c in costs] == [0, 16, 32]
    assert [c.cache_numbers for c in costs] == [16, 32, 48]
    assert [c.cache_bytes for c in costs] == [128, 256, 384]
