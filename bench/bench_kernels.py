"""Section "kernels": the measurements behind the engine's performance choices, each against the obvious alternative."""

from __future__ import annotations

import math

import numpy as np

from bench.timing import Candidate, median_ms, time_interleaved
from mha_core.attention import scaled_dot_product_attention, softmax, sum_along

SIZES = ((128, 256, 8), (512, 512, 8))  # (T, d_model, heads), float32
QUICK_SIZES = ((16, 32, 4),)


def heads_of(t: int, d_model: int, n_heads: int, seed: int) -> np.ndarray:
    """Random (nh, T, hs) float32 heads laid out as the engine gets them: a view of a (T, C) projection."""
    x = np.random.default_rng(seed).standard_normal((t, d_model)).astype(np.float32)  # (T, C)
    return x.reshape(t, n_heads, d_model // n_heads).transpose(1, 0, 2)  # (nh, T, hs)


def three_arrays_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple:
    """The same maths as the engine's, with scores, logits and weights as three separate new arrays."""
    scale = np.float32(1 / math.sqrt(q.shape[-1]))
    scores = q @ np.ascontiguousarray(k.transpose(0, 2, 1))  # (nh, Tq, Tk)
    logits = scores * scale  # (nh, Tq, Tk)
    weights = softmax(logits)  # (nh, Tq, Tk)
    return scores, logits, weights, weights @ v  # ..., (nh, Tq, hv)


def comparisons(t: int, d_model: int, n_heads: int) -> list[tuple[str, str, object, str, object]]:
    """(what, the engine's way, its call, the alternative, its call) at one size."""
    q, k, v = (heads_of(t, d_model, n_heads, seed) for seed in range(3))  # (nh, T, hs) each
    k_t = np.ascontiguousarray(k.transpose(0, 2, 1))  # (nh, hs, T)
    scores = q @ k_t  # (nh, T, T)
    return [
        ("scores q @ k^T", "k^T contiguous (copied)", lambda: q @ np.ascontiguousarray(k.transpose(0, 2, 1)),
         "k^T as a transposed view", lambda: q @ k.transpose(0, 2, 1)),
        ("row sums of (nh, T, T)", "matmul with ones", lambda: sum_along(scores, -1),
         "np.sum(axis=-1)", lambda: scores.sum(axis=-1, keepdims=True)),
        ("attention maps", "one (3, nh, T, T) block", lambda: scaled_dot_product_attention(q, k, v),
         "three new arrays", lambda: three_arrays_attention(q, k, v)),
    ]


def run(quick: bool = False) -> list[dict]:
    """The engine's performance choices, each timed against the obvious alternative, float32,
    calls interleaved (ours, alternative, ours, ...), medians in ms; ``ours_vs_alternative``
    below 1 means the engine's choice is faster. Rows: the keys' transpose made contiguous
    before the score matmul (OpenBLAS is slower and badly threaded with a transposed operand at
    these shapes); row sums as a matmul with a column of ones (BLAS beats ``np.sum`` on short
    rows); scores, logits and weights in one allocation (glibc then reuses the memory between
    calls instead of returning it to the system and page-faulting it in again; the row times
    the whole of ``scaled_dot_product_attention``).
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
