"""Section "kernels": the measurements behind the engine's performance choices, each against the obvious alternative."""

from __future__ import annotations

import numpy as np

from bench.timing import Candidate, median_ms, time_interleaved
from mha_core.attention import attention_scores, group_heads

# (T, d_model, heads), float32: the app's default and its cap (64 tokens), and the real model
# (MiniLM: 384 wide, 12 heads) at 64 and 128 word pieces. The engine's choices must pay here.
SIZES = ((16, 64, 4), (64, 64, 4), (64, 384, 12), (128, 384, 12))
QUICK_SIZES = ((16, 32, 4),)


def heads_of(t: int, d_model: int, n_heads: int, seed: int) -> np.ndarray:
    """Random (nh, T, hs) float32 heads laid out as the engine gets them: a view of a (T, C) projection."""
    x = np.random.default_rng(seed).standard_normal((t, d_model)).astype(np.float32)  # (T, C)
    return x.reshape(t, n_heads, d_model // n_heads).transpose(1, 0, 2)  # (nh, T, hs)


def scores_with_a_transposed_view(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The alternative to ``attention_scores``: k^T handed to matmul as a transposed view."""
    scores = group_heads(q, k.shape[0]) @ k.transpose(0, 2, 1)[:, None]  # (kv, nh/kv, Tq, Tk)
    return scores.reshape(q.shape[0], q.shape[1], k.shape[1])  # (nh, Tq, Tk)


def in_process_comparisons(t: int, d_model: int, n_heads: int) -> list[tuple[str, str, object, str, object]]:
    """(what, the engine's way, its call, the alternative, its call) at one size."""
    q, k = (heads_of(t, d_model, n_heads, seed) for seed in range(2))  # (nh, T, hs) each
    return [
        ("scores q @ k^T", "k^T copied contiguous (attention_scores)", lambda: attention_scores(q, k),
         "k^T as a transposed view", lambda: scores_with_a_transposed_view(q, k)),
    ]


def row(what: str, size: tuple, engine_way: str, ours: list[float], alternative: str, other: list[float]) -> dict:
    """One table row from the seconds of the engine's way and of the alternative."""
    t, d_model, n_heads = size
    ours_ms, other_ms = median_ms(ours), median_ms(other)
    return {"what": what, "T": t, "d_model": d_model, "heads": n_heads, "engine": engine_way, "engine_ms": ours_ms,
            "alternative": alternative, "alternative_ms": other_ms, "ours_vs_alternative": ours_ms / other_ms,
            "calls": len(ours)}


def run(quick: bool = False) -> list[dict]:
    """The engine's performance choices, each timed against the obvious alternative, float32,
    medians in ms; ``ours_vs_alternative`` below 1 means the engine's choice is faster.

    Sizes are those the app and the real model run (at most 64 tokens, 128 word pieces); an
    optimisation stays in the engine only while its rows show it paying there. Earlier engines
    also summed rows by a matmul with ones and kept scores, logits and weights in one
    allocation; those paid only from T = 128 up and are gone. The one kept: the score product
    gets k^T copied to a contiguous array, because OpenBLAS multiplies a transposed operand on
    a slower path (about 25% slower at the real model's 12 heads of 32). The two
    variants run in separate blocks with a pause between them, never call by call, because
    OpenBLAS's spinning worker threads change the speed of whatever runs next (bench/timing.py).
    """
    timing = {"rounds": 1, "block_seconds": 0.0, "settle": 0.0} if quick else {"rounds": 7}
    sizes = QUICK_SIZES if quick else SIZES
    rows = []
    for size in sizes:
        for what, ours_name, ours, other_name, other in in_process_comparisons(*size):
            times = time_interleaved([Candidate("ours", ours, "engine"), Candidate("other", other, "alternative")],
                                     **timing)
            rows.append(row(what, size, ours_name, times["ours"], other_name, times["other"]))
    return rows
