"""Section "kernels": the measurements behind the engine's performance choices, each against the obvious alternative."""

from __future__ import annotations

import numpy as np

import mha_core.attention as engine
from bench.bench_engine import random_layer
from bench.timing import Candidate, median_ms, time_interleaved
from mha_core.attention import AttentionWeights, multi_head_attention, sum_along

SIZES = ((128, 256, 8), (512, 512, 8))  # (T, d_model, heads), float32
QUICK_SIZES = ((16, 32, 4),)


def heads_of(t: int, d_model: int, n_heads: int, seed: int) -> np.ndarray:
    """Random (nh, T, hs) float32 heads laid out as the engine gets them: a view of a (T, C) projection."""
    x = np.random.default_rng(seed).standard_normal((t, d_model)).astype(np.float32)  # (T, C)
    return x.reshape(t, n_heads, d_model // n_heads).transpose(1, 0, 2)  # (nh, T, hs)


def three_new_arrays(n_heads: int, tq: int, tk: int, dtype) -> list[np.ndarray]:
    """The alternative to ``attention_maps``: scores, logits and weights as three separate allocations."""
    return [np.empty((n_heads, tq, tk), dtype=dtype) for _ in range(3)]  # (nh, Tq, Tk) each


def with_three_arrays(call):
    """``call`` run with the engine's ``attention_maps`` swapped for ``three_new_arrays``, then restored."""
    one_block = engine.attention_maps

    def patched():
        engine.attention_maps = three_new_arrays
        try:
            return call()
        finally:
            engine.attention_maps = one_block

    return patched


def comparisons(t: int, d_model: int, n_heads: int) -> list[tuple[str, str, object, str, object]]:
    """(what, the engine's way, its call, the alternative, its call) at one size."""
    q, k = (heads_of(t, d_model, n_heads, seed) for seed in range(2))  # (nh, T, hs) each
    scores = q @ np.ascontiguousarray(k.transpose(0, 2, 1))  # (nh, T, T)
    x, params = random_layer(t, d_model, "float32")
    weights = AttentionWeights(**params)

    def attention():
        return multi_head_attention(x, weights, n_heads)
    return [
        ("scores q @ k^T", "k^T contiguous (copied)", lambda: q @ np.ascontiguousarray(k.transpose(0, 2, 1)),
         "k^T as a transposed view", lambda: q @ k.transpose(0, 2, 1)),
        ("row sums of (nh, T, T)", "matmul with ones", lambda: sum_along(scores, -1),
         "np.sum(axis=-1)", lambda: scores.sum(axis=-1, keepdims=True)),
        ("multi_head_attention", "maps in one (3, nh, T, T) block", attention,
         "maps as three new arrays", with_three_arrays(attention)),
    ]


def run(quick: bool = False) -> list[dict]:
    """The engine's performance choices, each timed against the obvious alternative, float32,
    calls interleaved (ours, alternative, ours, ...), medians in ms; ``ours_vs_alternative``
    below 1 means the engine's choice is faster. Rows: the keys' transpose made contiguous
    before the score matmul (OpenBLAS is slower and badly threaded with a transposed operand at
    these shapes); row sums as a matmul with a column of ones (BLAS beats ``np.sum`` on short
    rows); scores, logits and weights in one allocation (glibc then reuses the memory between
    calls instead of returning it to the system and page-faulting it in again; the row times
    whole ``multi_head_attention`` calls, the alternative with ``attention_maps`` swapped for
    three separate ``np.empty``).
    """
    rows = []
    timing = {"rounds": 1, "block_seconds": 0.0} if quick else {"rounds": 7}
    for t, d_model, n_heads in QUICK_SIZES if quick else SIZES:
        for what, ours_name, ours, other_name, other in comparisons(t, d_model, n_heads):
            times = time_interleaved([Candidate("ours", ours, "numpy"), Candidate("other", other, "numpy")], **timing)
            ours_ms, other_ms = median_ms(times["ours"]), median_ms(times["other"])
            rows.append({"what": what, "T": t, "d_model": d_model, "heads": n_heads, "engine": ours_name,
                         "engine_ms": ours_ms, "alternative": other_name, "alternative_ms": other_ms,
                         "ours_vs_alternative": ours_ms / other_ms, "calls": len(times["ours"])})
    return rows
