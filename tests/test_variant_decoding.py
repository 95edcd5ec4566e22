"""Decoding the variants one token at a time: every step's row, heads and output are those of full causal
attention (the engine's ``run`` with a causal mask), and what each keeps grows as its formula says:
differential kv (hs + hv) per token, MLA r + d_rope per token, linear kv hs (hv + 1) whatever the length."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, attention_scheme, run
from mha_core.variant_decoding import decode_variant

TOL = 1e-12
CONFIGS = {
    "differential": MHAConfig(kernel="differential", mask="causal"),
    "differential, rope, GQA": MHAConfig(kernel="differential", mask="causal", pe="rope", kv_heads=2),
    "linear": MHAConfig(kernel="linear", mask="causal"),
    "linear, rope, MQA": MHAConfig(kernel="linear", mask="causal", pe="rope", kv_heads=1),
    "MLA, rope": MHAConfig(mla_rank=4, mla_rope=2, pe="rope", mask="causal"),
    "MLA, alibi, null key": MHAConfig(mla_rank=5, pe="alibi", null_key=True, mask="causal"),
    "MLA, sinusoidal": MHAConfig(mla_rank=3, pe="sinusoidal", mask="causal", d_model=12, n_heads=3),
}


def decoded(result):
    config = result.config
    return decode_variant(result.x_q, result.weights, config.n_heads, kernel=config.kernel,
                          kernel_params=result.kernel_params, mla=result.mla_weights, kv_heads=config.key_value_heads,
                          pe=attention_scheme(config), rope_base=config.rope_base, scale=result.trace.scale,
                          null_key=config.null_key)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_decoded_row_is_full_causal_attentions(name):
    result = run(CONFIGS[name])
    trace = result.trace
    steps = decoded(result)
    for t, step in enumerate(steps):
        assert np.max(np.abs(step.weights - trace.weights[:, t, : t + 1])) <= TOL
        assert np.max(np.abs(step.output - trace.output[t])) <= TOL
    c = result.config
    hs = c.head_size
    sizes = [step.numbers for step in steps]
    if c.mla_rank:
        assert sizes == [(t + 1) * (c.mla_rank + c.mla_rope) for t in range(len(steps))]
    elif c.kernel == "linear":
        assert sizes == [c.key_value_heads * hs * (hs + 1)] * len(steps)  # constant
    else:
        assert sizes == [(t + 1) * c.key_value_heads * 2 * hs for t in range(len(steps))]


def test_a_linear_state_whose_sum_miscounts_the_token_breaks_the_rows(monkeypatch):
    from mha_core import linear_state

    def counts_twice(state, state_sum, phi_k_t, v_t):  # planted: z gets phi(k_t) twice, S once
        return state + phi_k_t[:, :, None] * v_t[:, None, :], state_sum + 2 * phi_k_t

    monkeypatch.setattr(linear_state, "add_to_state", counts_twice)  # the linear decoder's keep step (issue 33)
    result = run(CONFIGS["linear"])
    steps = decoded(result)
    assert max(np.max(np.abs(s.output - result.trace.output[s.position])) for s in steps) > 1e-3


@pytest.mark.parametrize("name", ["linear", "MLA, rope", "differential"])
def test_only_the_last_step_holds_its_arrays_and_they_are_what_it_counts(name):
    steps = decoded(run(CONFIGS[name]))
    assert all(step.held == () for step in steps[:-1])
    assert steps[-1].numbers == sum(array.size for _, array in steps[-1].held) > 0
