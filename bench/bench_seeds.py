"""Section "seeds": the engine against the seeds' one-head-at-a-time loops, same inputs."""

from __future__ import annotations

import numpy as np

from bench.seed_loops import seed002_attention, seed003_attention
from bench.timing import Candidate, median_ms, time_interleaved
from mha_core import AttentionWeights, multi_head_attention

# (T, d_model, heads): the seeds' own sizes, then T = 512 at a seed's width and at a realistic one.
SEED002_SIZES = ((4, 4, 2), (6, 8, 4), (6, 8, 2), (512, 8, 4), (512, 512, 8))
SEED003_SIZES = ((6, 8, 2), (512, 8, 2), (512, 512, 8))
QUICK_SIZES = ((6, 8, 2), (32, 16, 4))
TOLERANCE = 1e-9  # float64, numbers of order 1


def seed002_case(t: int, d_model: int, n_heads: int, rng: np.random.Generator) -> tuple:
    """Seed 002's call and ours on the same random float64 inputs: no biases, no output projection."""
    x = rng.standard_normal((t, d_model))  # (T, C)
    w_q, w_k, w_v = (rng.standard_normal((d_model, d_model)) / np.sqrt(d_model) for _ in range(3))  # (C, C) each
    weights = AttentionWeights(w_q, w_k, w_v)

    def seed():
        return seed002_attention(x, w_q, w_k, w_v, n_heads)  # (T, C)

    def ours():
        return multi_head_attention(x, weights, n_heads).output  # (T, C)

    return seed, ours, seed


def seed003_case(t: int, d_model: int, n_heads: int, rng: np.random.Generator) -> tuple:
    """Seed 003's call (tokens as columns, weights per head) and ours on the same parameters, fused."""
    size = d_model // n_heads
    x_columns = rng.standard_normal((d_model, t))  # (C, T)
    per_head = [
        tuple(rng.standard_normal((size, d_model)) / np.sqrt(d_model) for _ in range(3))  # omegas (hs, C)
        + tuple(0.1 * rng.standard_normal((size, 1)) for _ in range(3))  # betas (hs, 1)
        for _ in range(n_heads)
    ]
    omega_c = rng.standard_normal((d_model, d_model)) / np.sqrt(d_model)  # (C, C)
    # Our row convention: head i's omega^T is the column block i of w, its beta the block of b.
    fused = {
        f"w_{name}": np.hstack([head[i].T for head in per_head]) for i, name in enumerate("qkv")
    }  # (C, nh*hs) each
    fused |= {f"b_{name}": np.concatenate([head[3 + i][:, 0] for head in per_head]) for i, name in enumerate("qkv")}
    weights = AttentionWeights(**fused, w_o=omega_c.T)
    x = np.ascontiguousarray(x_columns.T)  # (T, C)

    def seed():
        return seed003_attention(x_columns, per_head, omega_c)  # (C, T)

    def ours():
        return multi_head_attention(x, weights, n_heads).output  # (T, C)

    return seed, ours, lambda: seed().T


def measure_case(name: str, make_case, size: tuple[int, int, int], timing: dict) -> dict:
    """One table row: a seed's loop and our engine timed call by call, interleaved."""
    t, d_model, n_heads = size
    seed, ours, seed_as_rows = make_case(t, d_model, n_heads, np.random.default_rng(0))
    difference = float(np.abs(seed_as_rows() - ours()).max())
    times = time_interleaved([Candidate("seed", seed, "numpy"), Candidate("ours", ours, "numpy")], **timing)
    seed_ms, ours_ms = median_ms(times["seed"]), median_ms(times["ours"])
    return {
        "seed": name,
        "T": t,
        "d_model": d_model,
        "heads": n_heads,
        "dtype": "float64",
        "seed_ms": seed_ms,
        "ours_ms": ours_ms,
        "ours_vs_seed": ours_ms / seed_ms,
        "calls": len(times["ours"]),
        "max_abs_diff": difference,
        "agrees": difference <= TOLERANCE,
    }


def run(quick: bool = False) -> list[dict]:
    """Engine vs the seeds' own algorithms: seed 002 (project, then a Python loop over the
    heads' column blocks, concatenate) and seed 003 (tokens as columns, separate weights and
    biases per head, a loop over heads, then the output projection), re-implemented in
    bench/seed_loops.py without their prints, against ``multi_head_attention`` with the same
    parameters fused into one matrix per projection, in float64 as the seeds compute.

    Rows: the seeds' own sizes (seed 002: 4x4 with 2 heads, 6x8 with 4 and 2; seed 003: 6x8 with
    2), then T = 512 at the seed's width and at d_model = 512 with 8 heads. Times are medians in
    ms of calls interleaved seed, ours, seed, ours, ...; ``ours_vs_seed`` = ours / seed (below 1:
    ours is faster). Ours returns every intermediate (scores, logits, weights, heads, ...), the
    seeds only the output. ``max_abs_diff`` is the largest difference between the two outputs.
    """
    cases = [("002", seed002_case, size) for size in SEED002_SIZES]
    cases += [("003", seed003_case, size) for size in SEED003_SIZES]
    timing = {"rounds": 7}
    if quick:
        cases = [(name, make, size) for name, make in (("002", seed002_case), ("003", seed003_case)) for size in QUICK_SIZES]
        timing = {"rounds": 1, "block_seconds": 0.0}
    return [measure_case(name, make, size, timing) for name, make, size in cases]
