"""Side-by-side timing: repetitions interleaved, medians reported.

Why the candidates come in groups. NumPy's BLAS (OpenBLAS) and torch (OpenMP) each keep their
own pool of worker threads, and each pool's workers keep spinning for a while after a call
(OpenBLAS measured here ~0.1 s, OpenMP a few ms) so that the next call starts at once. On a
2-core machine a pool still spinning steals a core from the other library: a torch call made
right after a NumPy call was measured up to 10x slower than the same call alone, and the other
way round 2-6x. So candidates that share a thread pool form a group and are interleaved call by
call (A, B, C, A, B, C, ...); between groups the run pauses ``settle`` seconds, and each group
starts with one untimed call. Rounds repeat the groups, so slow drifts of a noisy machine reach
every candidate alike.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """One thing to time: a call with no arguments, and the thread pool it runs on."""

    name: str
    call: Callable[[], object]
    group: str  # candidates of one group share a thread pool (e.g. "numpy", "torch")


def seconds_of(call: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def groups_in_order(candidates: list[Candidate]) -> list[list[Candidate]]:
    """The candidates split by group, groups in order of first appearance."""
    groups: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(candidate.group, []).append(candidate)
    return list(groups.values())


def calls_per_block(group: list[Candidate], block_seconds: float, max_calls: int) -> int:
    """How many interleaved passes over a group fill about ``block_seconds`` (one untimed pass to estimate)."""
    one_pass = sum(seconds_of(candidate.call) for candidate in group)
    return max(1, min(max_calls, math.ceil(block_seconds / max(one_pass, 1e-6))))


def time_interleaved(
    candidates: list[Candidate],
    *,
    rounds: int,
    block_seconds: float = 0.2,
    max_calls: int = 2000,
    settle: float = 0.25,
) -> dict[str, list[float]]:
    """Seconds of every timed call, per candidate name, measured as the module docstring says.

    Each round runs every group once: pause ``settle`` seconds (only when there are several
    groups), one untimed pass, then enough interleaved passes to fill about ``block_seconds``.
    """
    groups = groups_in_order(candidates)
    passes = {id(group[0]): calls_per_block(group, block_seconds, max_calls) for group in groups}
    times: dict[str, list[float]] = {candidate.name: [] for candidate in candidates}
    for _ in range(rounds):
        for group in groups:
            if len(groups) > 1 and settle > 0:
                time.sleep(settle)
            for candidate in group:
                candidate.call()
            for _ in range(passes[id(group[0])]):
                for candidate in group:
                    times[candidate.name].append(seconds_of(candidate.call))
    return times


def median_ms(seconds: list[float]) -> float:
    """The median of some timings, in milliseconds."""
    return statistics.median(seconds) * 1e3
