"""Section "kernels": the measurements behind the engine's performance choices, each against the obvious alternative."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.timing import Candidate, median_ms, time_interleaved
from mha_core.attention import sum_along

ROOT = Path(__file__).resolve().parents[1]
SIZES = ((128, 256, 8), (512, 512, 8))  # (T, d_model, heads), float32
QUICK_SIZES = ((16, 32, 4),)

# Runs in a fresh interpreter: times multi_head_attention with the maps as one block or as
# three arrays, and prints the seconds of every call as JSON. argv: variant T d_model heads calls.
FRESH_PROCESS = r"""
import json, sys, time
import mha_core.attention as engine
from bench.bench_engine import random_layer
from bench.bench_kernels import three_new_arrays
variant, t, d_model, n_heads, calls = sys.argv[1], *map(int, sys.argv[2:])
if variant == "three":
    engine.attention_maps = three_new_arrays
x, params = random_layer(t, d_model, "float32")
weights = engine.AttentionWeights(**params)
times = []
for _ in range(calls):
    start = time.perf_counter()
    engine.multi_head_attention(x, weights, n_heads)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def heads_of(t: int, d_model: int, n_heads: int, seed: int) -> np.ndarray:
    """Random (nh, T, hs) float32 heads laid out as the engine gets them: a view of a (T, C) projection."""
    x = np.random.default_rng(seed).standard_normal((t, d_model)).astype(np.float32)  # (T, C)
    return x.reshape(t, n_heads, d_model // n_heads).transpose(1, 0, 2)  # (nh, T, hs)


def three_new_arrays(n_heads: int, tq: int, tk: int, dtype) -> list[np.ndarray]:
    """The alternative to ``attention_maps``: scores, logits and weights as three separate allocations."""
    return [np.empty((n_heads, tq, tk), dtype=dtype) for _ in range(3)]  # (nh, Tq, Tk) each


def in_process_comparisons(t: int, d_model: int, n_heads: int) -> list[tuple[str, str, object, str, object]]:
    """(what, the engine's way, its call, the alternative, its call) at one size, for choices timed in-process."""
    q, k = (heads_of(t, d_model, n_heads, seed) for seed in range(2))  # (nh, T, hs) each
    k_t = np.ascontiguousarray(k.transpose(0, 2, 1))  # (nh, hs, T), as project_keys lays the keys out
    scores = q @ k_t  # (nh, T, T)
    return [
        ("scores q @ k^T", "k^T contiguous (project_keys)", lambda: q @ k_t,
         "k^T as a transposed view", lambda: q @ k.transpose(0, 2, 1)),
        ("row sums of (nh, T, T)", "matmul with ones", lambda: sum_along(scores, -1),
         "np.sum(axis=-1)", lambda: scores.sum(axis=-1, keepdims=True)),
    ]


def fresh_process_times(variant: str, t: int, d_model: int, n_heads: int, calls: int) -> list[float]:
    """Seconds of ``calls`` multi_head_attention calls in a new interpreter, maps as "one" block or "three" arrays."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, variant, str(t), str(d_model), str(n_heads), str(calls)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
    )
    return json.loads(done.stdout)[1:]  # the first call pays for the imports' first touches


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

    Rows: the keys projected straight into the k^T layout the score matmul wants (with a
    transposed operand OpenBLAS takes a slower, badly threaded path at T = 128); row sums as a
    matmul with a column of ones (BLAS beats ``np.sum`` on short rows); scores, logits and
    weights in one allocation (glibc's malloc then keeps the memory between calls instead of
    returning it to the system and page-faulting it in again). The two variants of a choice
    run in separate blocks with a pause between them, never call by call, because each
    changes the state that decides the other's speed: OpenBLAS's spinning worker threads, and
    malloc's thresholds, which only ever grow in a process. So the allocation row runs whole
    ``multi_head_attention`` calls in fresh interpreters, three of each variant, alternating.
    """
    timing = {"rounds": 1, "block_seconds": 0.0, "settle": 0.0} if quick else {"rounds": 7}
    sizes = QUICK_SIZES if quick else SIZES
    rows = []
    for size in sizes:
        for what, ours_name, ours, other_name, other in in_process_comparisons(*size):
            times = time_interleaved([Candidate("ours", ours, "engine"), Candidate("other", other, "alternative")],
                                     **timing)
            rows.append(row(what, size, ours_name, times["ours"], other_name, times["other"]))
    for size in sizes:
        calls = 3 if quick else max(20, 40_000 // size[0])
        times = {"one": [], "three": []}
        for _ in range(1 if quick else 3):
            for variant in times:
                times[variant] += fresh_process_times(variant, *size, calls)
        rows.append(row("multi_head_attention (fresh process)", size, "maps in one (3, nh, T, T) block", times["one"],
                        "maps as three new arrays", times["three"]))
    return rows
