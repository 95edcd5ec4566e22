"""The tiled kernel (mha_core/flash.py) against a hand-worked example, a slow softmax loop written here, the
engine's own head outputs, and independent rules for the tiles a causal mask lets it skip.

The planted-bug tests run the same checks on a kernel with one deliberate mistake and require them to fail.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_core import flash
from mha_core.config import MHAConfig, run
from mha_core.flash import (
    KERNEL_RULES,
    KernelRule,
    flash_attention_head,
    flash_of_run,
    kernel_problem,
    weights_from_lse,
)

EXACT = 1e-12  # float64 output and log-sum-exp against the engine and the slow loop


def slow_attention(q, k, v, scale, mask=None, bias=None, null_key=False):
    """softmax(q k^T scale + bias) v with plain Python loops over rows, and each row's log-sum-exp."""
    tq, tk = q.shape[0], k.shape[0]
    out, lse = np.zeros((tq, v.shape[1])), np.zeros(tq)
    for i in range(tq):
        logits = [float(q[i] @ k[j]) * scale + (0.0 if bias is None else bias[i, j])
                  for j in range(tk) if mask is None or mask[i, j]]
        values = [v[j] for j in range(tk) if mask is None or mask[i, j]]
        if null_key:
            logits.append(0.0)
            values.append(np.zeros(v.shape[1]))
        if not logits:
            out[i], lse[i] = 0.0, -np.inf
            continue
        peak = max(logits)
        exps = [math.exp(x - peak) for x in logits]
        total = sum(exps)
        out[i] = sum(e * val for e, val in zip(exps, values, strict=True)) / total
        lse[i] = peak + math.log(total)
    return out, lse


def causal_skippable(rows, cols) -> bool:
    """A tile may be skipped under a causal mask only when its first key comes after its last query."""
    return cols[0] > rows[1] - 1


# ---- a hand-worked example -------------------------------------------------------------------


def test_two_keys_in_two_tiles_worked_on_paper():
    # One query, keys with logits 1 then 3 (scale 1), values 1 then 0; B_c = 1, so one key per tile.
    # Tile 0: m = 1, l = e^0 = 1, O~ = 1 * 1 = 1.
    # Tile 1: m_new = 3, rescale = e^(1-3) = e^-2; l = e^-2 * 1 + e^0 = 1 + e^-2; O~ = e^-2 * 1 + 1 * 0 = e^-2.
    # O = e^-2 / (1 + e^-2) = softmax([1, 3]) . [1, 0]; lse = 3 + log(1 + e^-2) = log(e^1 + e^3).
    q, k, v = np.array([[1.0]]), np.array([[1.0], [3.0]]), np.array([[1.0], [0.0]])
    run_ = flash_attention_head(q, k, v, block_rows=1, block_cols=1, scale=1.0)
    first, second = run_.steps
    assert (first.m_new[0], first.l_new[0], first.o_acc[0, 0]) == (1.0, 1.0, 1.0)
    assert first.rescale[0] == 0.0  # e^(-inf - 1): nothing summed before the first tile
    assert second.m_old[0] == 1.0 and second.m_new[0] == 3.0
    assert second.rescale[0] == pytest.approx(math.exp(-2), abs=1e-15)
    assert second.l_new[0] == pytest.approx(1 + math.exp(-2), abs=1e-15)
    assert second.o_acc[0, 0] == pytest.approx(math.exp(-2), abs=1e-15)
    assert run_.output[0, 0] == pytest.approx(math.exp(-2) / (1 + math.exp(-2)), abs=1e-15)
    assert run_.lse[0] == pytest.approx(math.log(math.e + math.e**3), abs=1e-14)


def test_with_the_null_key_the_state_starts_at_m_0_and_l_1():
    # softmax_1 of the single logit 2 with value 5: weight e^2 / (1 + e^2), lse = log(1 + e^2).
    run_ = flash_attention_head(np.array([[2.0]]), np.array([[1.0]]), np.array([[5.0]]), block_rows=1,
                                block_cols=1, scale=1.0, null_key=True)
    step = run_.steps[0]
    assert (step.m_old[0], step.l_old[0]) == (0.0, 1.0)
    assert step.rescale[0] == pytest.approx(math.exp(-2), abs=1e-15)
    assert run_.output[0, 0] == pytest.approx(5 * math.exp(2) / (1 + math.exp(2)), abs=1e-13)
    assert run_.lse[0] == pytest.approx(math.log(1 + math.exp(2)), abs=1e-14)


# ---- properties ------------------------------------------------------------------------------


@st.composite
def tiled_problems(draw):
    """Random q, k, v, a mask kind, block sizes and options, drawn as shapes; values from a seed."""
    tq, tk = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    hs, hv = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["none", "causal", "random"]))
    mask = {"none": None, "causal": np.tri(tq, tk, dtype=bool), "random": rng.random((tq, tk)) < 0.5}[kind]
    return dict(q=rng.normal(size=(tq, hs)) * 3, k=rng.normal(size=(tk, hs)), v=rng.normal(size=(tk, hv)),
                mask=mask, scale=draw(st.sampled_from([1.0, 0.5, 2.0])), null_key=draw(st.booleans()),
                block_rows=draw(st.integers(1, tq)), block_cols=draw(st.integers(1, tk)))


@settings(max_examples=150, deadline=None)
@given(tiled_problems())
def test_the_last_step_is_softmax_times_v_and_m_plus_log_l_the_log_sum_exp(problem):
    kernel = flash_attention_head(**problem)
    out, lse = slow_attention(problem["q"], problem["k"], problem["v"], problem["scale"], problem["mask"],
                              null_key=problem["null_key"])
    np.testing.assert_allclose(kernel.output, out, rtol=0, atol=EXACT)
    np.testing.assert_array_equal(np.isneginf(kernel.lse), np.isneginf(lse))
    finite = np.isfinite(lse)
    np.testing.assert_allclose(kernel.lse[finite], lse[finite], rtol=0, atol=EXACT)


@settings(max_examples=100, deadline=None)
@given(tiled_problems())
def test_the_running_max_never_falls_the_rescale_is_at_most_1_and_every_tile_is_visited_once(problem):
    kernel = flash_attention_head(**problem)
    tq, tk = problem["q"].shape[0], problem["k"].shape[0]
    seen = np.zeros((tq, tk), dtype=int)  # (Tq, Tk) how often each pair is covered
    for step in kernel.steps:
        seen[step.rows[0] : step.rows[1], step.cols[0] : step.cols[1]] += 1
        assert np.all(step.m_new >= step.m_old)
        assert np.all((step.rescale > 0 - 1e-300) & (step.rescale <= 1))
        if not step.skipped:
            assert np.all(step.exponentials <= 1)
    assert np.all(seen == 1)
    assert len(kernel.steps) == math.ceil(tq / problem["block_rows"]) * math.ceil(tk / problem["block_cols"])


@settings(max_examples=100, deadline=None)
@given(tiled_problems())
def test_a_tile_is_skipped_exactly_when_its_mask_block_is_empty(problem):
    kernel = flash_attention_head(**problem)
    mask = problem["mask"]
    for step in kernel.steps:
        block = None if mask is None else mask[step.rows[0] : step.rows[1], step.cols[0] : step.cols[1]]
        assert step.skipped == (block is not None and not block.any())


def test_the_kernel_order_is_query_blocks_outside_key_blocks_inside():
    kernel = flash_attention_head(np.ones((5, 2)), np.ones((4, 2)), np.ones((4, 2)), block_rows=2, block_cols=3,
                                  scale=1.0)
    assert [(s.row_block, s.col_block) for s in kernel.steps] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert [s.rows for s in kernel.steps[::2]] == [(0, 2), (2, 4), (4, 5)]  # the last block is shorter
    assert [s.cols for s in kernel.steps[:2]] == [(0, 3), (3, 4)]


# ---- the engine ------------------------------------------------------------------------------

CONFIGS = [
    MHAConfig(),
    MHAConfig(mask="causal"),
    MHAConfig(mask="causal", pe="rope", kv_heads=2),
    MHAConfig(mask="causal", pe="alibi", null_key=True),
    MHAConfig(mask="window", window=1, pe="alibi", kv_heads=1),
    MHAConfig(mask="padding", valid_len=4, scale_rule="temperature", temperature=0.3, pe="sinusoidal"),
    MHAConfig(kv_tokens=("a", "dog", "ran", "far"), mask="window", window=1, pe="rope"),  # rows 5: every key masked
    MHAConfig(mask="custom", custom_mask=tuple(tuple(bool((i + j) % 3) for j in range(6)) for i in range(6))),
    MHAConfig(init="previous", mask="causal", null_key=True),
    MHAConfig(scale_rule="sqrt_t", d_model=8, n_heads=2, bias=True, init="uniform"),
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(("block_rows", "block_cols"), [(1, 1), (2, 3), (4, 4), (6, 6)])
def test_every_head_equals_the_engines_output_and_log_sum_exp(config, block_rows, block_cols):
    result = run(config)
    trace = result.trace
    block_cols = min(block_cols, len(config.key_tokens))
    logits = np.array(trace.logits)  # (nh, Tq, Tk) the engine's masked logits
    if config.null_key:
        logits = np.concatenate([logits, np.zeros(logits.shape[:2] + (1,))], axis=-1)  # (nh, Tq, Tk+1)
    peak = np.max(logits, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        lse = (peak + np.log(np.sum(np.exp(logits - peak), axis=-1, keepdims=True)))[..., 0]  # (nh, Tq)
    for head in range(config.n_heads):
        kernel = flash_of_run(result, head, block_rows, block_cols)
        np.testing.assert_allclose(kernel.output, trace.heads[head], rtol=0, atol=EXACT)
        masked = trace.fully_masked[head] & (not config.null_key)
        assert np.all(np.isneginf(kernel.lse[masked]))
        np.testing.assert_allclose(kernel.lse[~masked], lse[head][~masked], rtol=0, atol=EXACT)


def gate_by_hand(result) -> np.ndarray:
    """σ(X W_θ) per head (nh, Tq, hv), from the run's query input and its learned W_θ."""
    g = 1.0 / (1.0 + np.exp(-(result.x_q @ result.kernel_params.w_gate)))  # (Tq, nh*hv)
    return g.reshape(g.shape[0], result.config.n_heads, -1).transpose(1, 0, 2)  # (nh, Tq, hv)


@pytest.mark.parametrize("config", [replace(c, kernel="gated") for c in CONFIGS])
@pytest.mark.parametrize(("block_rows", "block_cols"), [(1, 1), (2, 3), (6, 6)])
def test_a_gated_head_is_the_softmax_tiles_then_its_gate_as_the_engine_concatenates_it(config, block_rows, block_cols):
    """Gated attention's rows are softmax rows: tiled as such, O = softmax(S)·V, then the gate on O after the kernel;
    against the slow loop times σ(X W_θ) computed here, and against the head's columns of the engine's concat."""
    assert kernel_problem(config) is None
    result = run(config)
    trace = result.trace
    gate = gate_by_hand(result)  # (nh, Tq, hv)
    hv = gate.shape[-1]
    block_cols = min(block_cols, len(config.key_tokens))
    for head in range(config.n_heads):
        kernel = flash_of_run(result, head, block_rows, block_cols)
        g = trace.kv_head_of(head)
        out, _ = slow_attention(trace.q[head], trace.k[g], trace.v[g], trace.scale, result.mask,
                                None if trace.bias is None else trace.bias[head], config.null_key)
        np.testing.assert_allclose(kernel.output, out, rtol=0, atol=EXACT)
        np.testing.assert_allclose(kernel.handed_on, out * gate[head], rtol=0, atol=EXACT)
        np.testing.assert_allclose(kernel.handed_on, trace.concat[:, head * hv : (head + 1) * hv], rtol=0, atol=EXACT)
        last = len(kernel.steps) - 1
        np.testing.assert_array_equal(kernel.handed_on_after(last), kernel.handed_on)


def test_a_row_whose_keys_are_all_masked_gives_output_0_and_no_nan():
    result = run(CONFIGS[6])
    assert result.trace.fully_masked[0, 5]
    kernel = flash_of_run(result, 0, 2, 2)
    assert np.all(kernel.output[5] == 0) and not np.isnan(kernel.output).any()


def test_the_weights_are_recomputable_from_the_saved_log_sum_exp():
    result = run(MHAConfig(mask="causal", pe="alibi"))
    trace = result.trace
    for head in range(trace.n_heads):
        kernel = flash_of_run(result, head, 2, 4)
        weights = weights_from_lse(trace.q[head], trace.k[head], trace.scale, kernel.lse, trace.bias[head], result.mask)
        np.testing.assert_allclose(weights, trace.weights[head], rtol=0, atol=EXACT)


# ---- causal skipping and the traffic counts ---------------------------------------------------


@pytest.mark.parametrize(("t", "block_rows", "block_cols"), [(6, 2, 2), (7, 3, 2), (8, 1, 3), (5, 5, 1)])
def test_under_a_causal_mask_exactly_the_tiles_above_the_diagonal_are_skipped(t, block_rows, block_cols):
    result = run(MHAConfig(tokens=tuple(f"w{i}" for i in range(t)), mask="causal"))
    kernel = flash_of_run(result, 0, block_rows, block_cols)
    expected = [(i, j) for i in range(math.ceil(t / block_rows)) for j in range(math.ceil(t / block_cols))
                if causal_skippable((i * block_rows, min((i + 1) * block_rows, t)), (j * block_cols, 0))]
    assert kernel.skipped == expected


def test_the_traffic_counts_worked_on_paper():
    # T = 6 tokens, hs = hv = 4 (d_model 16 / 4 heads), B_r = B_c = 2: 3 x 3 = 9 tiles.
    # Standard: reads Q 24 + K 24 + S 36 + P 36 + V 24 = 144; writes S 36 + P 36 + O 24 = 96.
    # Tiled, no mask: reads Q 24 + 3 query blocks x (K 24 + V 24) = 168; writes O 24 + lse 6 = 30.
    # Causal: tiles (0,1), (0,2), (1,2) skipped, each saves K_j + V_j = 2*4 + 2*4 = 16: 168 - 48 = 120.
    # SRAM per tile: Q_i 8 + K_j 8 + V_j 8 + S_ij 4 + O_i 8 + m, l 4 = 40.
    free = flash_of_run(run(MHAConfig()), 0, 2, 2).traffic
    causal = flash_of_run(run(MHAConfig(mask="causal")), 0, 2, 2).traffic
    assert (free.standard_reads, free.standard_writes) == (144, 96)
    assert (free.flash_reads, free.flash_writes, free.flash_reads_without_skipping) == (168, 30, 168)
    assert (causal.flash_reads, causal.flash_writes, causal.tiles_skipped) == (120, 30, 3)
    assert free.sram_numbers == 40 and free.weights_numbers == 36


def test_at_64_tokens_the_tiled_kernel_moves_far_fewer_numbers():
    result = run(MHAConfig(tokens=tuple(f"w{i}" for i in range(64)), mask="causal", d_model=64, n_heads=4))
    traffic = flash_of_run(result, 0, 16, 16).traffic
    # hs = 16: standard reads 3*64*16 + 2*64*64 = 11264; tiled 64*16 + (4 query blocks) 64*32 - skipped 6*16*32.
    assert traffic.standard_reads == 11264
    assert traffic.flash_reads == 64 * 16 + 4 * 64 * 32 - 6 * 16 * 32
    assert traffic.flash_reads + traffic.flash_writes == 6144 + 64 * 17  # 7232 numbers against 20480: 2.8x fewer
    assert traffic.standard_reads + traffic.standard_writes == 20480


# ---- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(("block_rows", "block_cols", "message"), [
    (0, 2, "B_r (query rows per tile) must be a whole number from 1 to 6, got 0"),
    (2, 7, "B_c (keys per tile) must be a whole number from 1 to 6, got 7"),
    (2.5, 2, "got 2.5"),
])
def test_bad_block_sizes_are_refused_with_the_valid_range(block_rows, block_cols, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        flash_of_run(run(MHAConfig()), 0, block_rows, block_cols)


def test_every_configuration_above_is_accepted_and_a_refusing_rule_refuses(monkeypatch):
    assert all(kernel_problem(c) is None for c in CONFIGS)
    refusing = KernelRule("test rule", lambda c: c.null_key, "", lambda c: "a test refuses the null key")
    monkeypatch.setattr(flash, "KERNEL_RULES", (*KERNEL_RULES, refusing))
    assert kernel_problem(MHAConfig()) is None
    with pytest.raises(ValueError, match="a test refuses the null key"):
        flash_of_run(run(MHAConfig(null_key=True)), 0, 2, 2)


# ---- planted bugs: the checks above must fail on a kernel with one mistake ------------------


def check_against_slow_loop(config: MHAConfig, block_rows: int, block_cols: int) -> None:
    result = run(config)
    trace = result.trace
    for head in range(config.n_heads):
        kernel = flash_of_run(result, head, block_rows, block_cols)
        out, _ = slow_attention(trace.q[head], trace.k[trace.kv_head_of(head)], trace.v[trace.kv_head_of(head)],
                                trace.scale, result.mask, None if trace.bias is None else trace.bias[head],
                                config.null_key)
        np.testing.assert_allclose(kernel.output, out, rtol=0, atol=EXACT)


def check_causal_skips(config: MHAConfig, block_rows: int, block_cols: int) -> None:
    kernel = flash_of_run(run(config), 0, block_rows, block_cols)
    for step in kernel.steps:
        assert step.skipped == causal_skippable(step.rows, step.cols), (step.row_block, step.col_block)


def test_planted_bug_rescale_with_the_wrong_sign_is_caught(monkeypatch):
    check_against_slow_loop(MHAConfig(mask="causal"), 2, 2)  # passes as written
    monkeypatch.setattr(flash, "rescale_factor",
                        lambda m_old, m_new: np.where(np.isneginf(m_old), 0.0, np.exp(m_new - m_old)))
    with pytest.raises(AssertionError):
        check_against_slow_loop(MHAConfig(mask="causal"), 2, 2)


def test_planted_bug_a_tile_skipped_that_the_causal_mask_needs_is_caught(monkeypatch):
    check_causal_skips(MHAConfig(mask="causal"), 2, 2)
    # The bug looks at the tile's first query row only: tile (1, 1) holds key 3 for query 3 but not for query 2.
    monkeypatch.setattr(flash, "tile_is_skipped", lambda allowed: allowed is not None and not allowed[0].any())
    with pytest.raises(AssertionError):
        check_causal_skips(MHAConfig(mask="causal"), 3, 2)
    with pytest.raises(AssertionError):
        check_against_slow_loop(MHAConfig(mask="causal"), 3, 2)


def test_the_null_key_and_no_mask_give_the_same_output_through_engine_and_kernel():
    config = replace(CONFIGS[3], mask="none")
    check_against_slow_loop(config, 4, 1)
