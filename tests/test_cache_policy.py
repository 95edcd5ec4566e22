"""Cache policies (mha_core/cache_policy.py): which positions are held, checked against a rule written here;
each step's row against the engine's full attention under a mask built here; the null key's spare mass;
and a planted bug (a sink evicted) that the checks catch."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mha_core import cache_policy
from mha_core.attention import multi_head_attention
from mha_core.cache_policy import POLICIES, CachePolicy, decode_with_policy
from mha_core.config import MHAConfig, attention_scheme, run

EXACT = 1e-12
SENTENCE = tuple(f"w{i}" for i in range(9))


def kept_by_hand(policy: str, t: int, window: int, sinks: int) -> list[int]:
    """The positions a cache should hold after token t, from the definitions."""
    if policy == "full":
        return list(range(t + 1))
    recent = [j for j in range(t + 1) if t - j < window]
    return sorted(set(recent) | ({j for j in range(min(sinks, t + 1))} if policy == "sinks" else set()))


def policy_mask(policy: str, t_len: int, window: int, sinks: int) -> np.ndarray:
    """(T, T) True where query t may see key j: causal, and j held by the cache at step t (loops, not the module)."""
    mask = np.zeros((t_len, t_len), dtype=bool)
    for t in range(t_len):
        for j in range(t + 1):
            mask[t, j] = policy == "full" or t - j < window or (policy == "sinks" and j < sinks)
    return mask


def decoded(config: MHAConfig, **options):
    result = run(replace(config, mask="causal"))
    return result, decode_with_policy(result.x_q, result.weights, config.n_heads, kv_heads=config.key_value_heads,
                                      pe=attention_scheme(config), rope_base=config.rope_base,
                                      scale=result.trace.scale, null_key=config.null_key, **options)


def test_what_the_cache_holds_worked_on_paper():
    # T = 9, W = 3, S = 2. After token 5: full holds 0..5; window holds 3, 4, 5; sinks hold 0, 1 and 3, 4, 5.
    # At step 5 the window evicts 2 (it held 2, 3, 4 and 5 came in); the sink policy evicts 2 as well.
    _, full = decoded(MHAConfig(tokens=SENTENCE), policy="full")
    _, window = decoded(MHAConfig(tokens=SENTENCE), policy="window", window=3)
    _, sinks = decoded(MHAConfig(tokens=SENTENCE), policy="sinks", window=3, sinks=2)
    assert full[5].held.tolist() == [0, 1, 2, 3, 4, 5] and full[5].evicted.tolist() == []
    assert window[5].held.tolist() == [3, 4, 5] and window[5].evicted.tolist() == [2]
    assert sinks[5].held.tolist() == [0, 1, 3, 4, 5] and sinks[5].evicted.tolist() == [2]
    assert sinks[2].held.tolist() == [0, 1, 2]  # nothing to evict yet
    assert [s.cache_size for s in sinks] == [1, 2, 3, 4, 5, 5, 5, 5, 5]  # bounded by W + S


def check_held(policy: str, window: int, sinks: int) -> None:
    _, steps = decoded(MHAConfig(tokens=SENTENCE), policy=policy, window=window, sinks=sinks)
    for step in steps:
        assert step.held.tolist() == kept_by_hand(policy, step.position, window, sinks), (policy, step.position)


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize(("window", "sinks"), [(1, 0), (1, 1), (3, 2), (4, 1), (9, 3), (2, 9)])
def test_the_held_positions_follow_the_definitions(policy, window, sinks):
    check_held(policy, window, sinks)


CONFIGS = [
    MHAConfig(tokens=SENTENCE),
    MHAConfig(tokens=SENTENCE, pe="rope", kv_heads=2),
    MHAConfig(tokens=SENTENCE, pe="alibi", null_key=True),
    MHAConfig(tokens=SENTENCE, pe="sinusoidal", kv_heads=1, scale_rule="temperature", temperature=0.5),
    MHAConfig(tokens=SENTENCE, null_key=True, bias=True),
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(("policy", "window", "sinks"), [("full", 4, 0), ("window", 3, 0), ("sinks", 3, 2),
                                                          ("sinks", 1, 1)])
def test_with_original_positions_each_row_is_full_attention_under_the_policys_mask(config, policy, window, sinks):
    result, steps = decoded(config, policy=policy, window=window, sinks=sinks, positioning="original")
    mask = policy_mask(policy, len(SENTENCE), window, sinks)  # (T, T)
    engine = multi_head_attention(result.x_q, result.weights, config.n_heads, mask=mask, scale=result.trace.scale,
                                  kv_heads=config.key_value_heads, pe=attention_scheme(config),
                                  rope_base=config.rope_base, null_key=config.null_key)
    for step in steps:
        kept = np.flatnonzero(mask[step.position])  # (n,)
        np.testing.assert_allclose(step.weights[:, 0], engine.weights[:, step.position, kept], rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.heads[:, 0], engine.heads[:, step.position], rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.output[0], engine.output[step.position], rtol=0, atol=EXACT)
        assert np.all(engine.weights[:, step.position, ~mask[step.position]] == 0)


@pytest.mark.parametrize("pe", ["rope", "alibi", "none"])
def test_re_indexed_by_slot_each_row_is_attention_over_the_held_tokens_at_positions_0_to_n_minus_1(pe):
    config = MHAConfig(tokens=SENTENCE, pe=pe)
    result, steps = decoded(config, policy="sinks", window=3, sinks=1, positioning="cache")
    _, original = decoded(config, policy="sinks", window=3, sinks=1, positioning="original")
    for step, same in zip(steps, original, strict=True):
        n = step.cache_size
        assert step.key_positions.tolist() == list(range(n)) and step.query_position == n - 1
        engine = multi_head_attention(result.x_q[[step.position]], result.weights, config.n_heads,
                                      x_k=result.x_q[step.held], scale=result.trace.scale, pe=pe,
                                      q_positions=np.array([n - 1]), k_positions=np.arange(n))
        np.testing.assert_allclose(step.weights[:, 0], engine.weights[:, 0], rtol=0, atol=EXACT)
        gap = np.max(np.abs(step.weights - same.weights))
        if pe == "none" or step.position < 4:  # nothing evicted yet: slots and positions agree
            assert gap <= EXACT
        else:
            assert gap > 1e-6, (pe, step.position)  # the choice changes the rows once positions and slots part


def test_without_the_null_key_the_evicted_keys_mass_is_shared_out_over_the_kept_keys():
    config = MHAConfig(tokens=SENTENCE, seed=2)
    full = run(replace(config, mask="causal")).trace.weights  # (nh, T, T)
    _, steps = decoded(config, policy="sinks", window=2, sinks=1)
    for step in steps:
        row = full[:, step.position, step.held]  # (nh, n) full attention's weights on the kept keys
        np.testing.assert_allclose(step.weights[:, 0], row / row.sum(axis=-1, keepdims=True), rtol=0, atol=EXACT)
        assert np.all(step.null_weight == 0)


def test_with_the_null_key_the_evicted_mass_is_shared_by_the_kept_keys_and_the_null_key():
    config = MHAConfig(tokens=SENTENCE, seed=2, null_key=True)
    result, full = decoded(config, policy="full")
    _, window = decoded(config, policy="window", window=2)
    logits = result.trace.logits  # (nh, T, T) causal, -inf above the diagonal
    for step, whole in zip(window, full, strict=True):
        kept = logits[:, step.position, step.held]  # (nh, n)
        np.testing.assert_allclose(step.null_weight, 1 / (1 + np.exp(kept).sum(axis=-1)), rtol=0, atol=EXACT)
        np.testing.assert_allclose(step.weights[:, 0].sum(-1) + step.null_weight, 1, rtol=0, atol=EXACT)
        if step.evicted.size or step.position >= 2:
            assert np.all(step.null_weight > whole.null_weight)  # the evicted keys' share partly went to the null key
        # the evicted keys' mass is shared over the kept keys and the null key in proportion to e^logit (null: e^0)
        shares = np.exp(kept) / (1 + np.exp(kept).sum(axis=-1, keepdims=True))  # (nh, n)
        np.testing.assert_allclose(step.weights[:, 0], shares, rtol=0, atol=EXACT)


@pytest.mark.parametrize(("args", "message"), [
    (dict(policy="lru"), "unknown cache policy 'lru'"),
    (dict(window=0), "window W must be a whole number of at least 1, got 0"),
    (dict(sinks=-1), "sinks S must be a whole number of at least 0, got -1"),
    (dict(positioning="slot"), "unknown cache positioning 'slot'"),
])
def test_bad_settings_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        decoded(MHAConfig(), **args)


def test_planted_bug_a_sink_evicted_is_caught(monkeypatch):
    check_held("sinks", 3, 2)  # passes as written

    def evicts_the_last_sink(self, positions, newest, window, sinks):
        recent = positions > newest - window
        return recent | (positions < sinks - 1) if self.sinks else recent

    monkeypatch.setattr(CachePolicy, "keeps", evicts_the_last_sink)
    with pytest.raises(AssertionError):
        check_held("sinks", 3, 2)
    assert cache_policy.POLICIES["window"].slides  # the table itself is untouched


def test_the_window_policy_cites_the_window_baseline_it_is_not_longformer():
    # Issue 32: Longformer's window is a training-time attention pattern; a decoder's cache that evicts all but
    # the last W tokens is StreamingLLM's window-attention baseline.
    assert POLICIES["window"].paper == "Xiao et al. 2023 (StreamingLLM), its window-attention baseline"
    assert all("Longformer" not in policy.paper for policy in POLICIES.values())
