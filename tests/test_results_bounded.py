"""The toy pages' result cache stays bounded in bytes at the caps (issue 38).

A server that had opened both real models and 48 pages at the caps reached 780 MB (python -m bench --only
memory); the result cache alone held 12 results of 11.8 MB. Here configurations at the caps go through the
cache one after another; every result it hands out is watched by a weak reference, so what stays alive is
what the cache keeps. Its bytes are counted.
"""

from __future__ import annotations

import gc
import urllib.parse
import weakref

import numpy as np

from bench.bench_memory import caps_query
from ui.run.compute import MAX_RESULTS, cached_run
from ui.state.urlstate import config_from_params

MB = 2**20
RESULTS_BUDGET_MB = 50  # the most the result cache may hold at the caps, beside both real models on a 690 MB host


def result_bytes(result) -> int:
    """Bytes of the distinct numpy buffers reachable from ``result`` (views counted once, with their base)."""
    seen, bases, stack, total = set(), set(), [result], 0
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            base = item
            while isinstance(base.base, np.ndarray):
                base = base.base
            if id(base) not in bases:
                bases.add(id(base))
                total += base.nbytes
        elif not isinstance(item, str | bytes | int | float | type):
            stack.extend(gc.get_referents(item))
    return total


def test_the_results_kept_at_the_caps_stay_within_the_budget():
    cached_run.clear()
    watched = []
    for seed in range(1, 14):  # 13 configurations at the caps: more than any bound the cache has had
        config, _ = config_from_params(dict(urllib.parse.parse_qsl(caps_query(seed)[1:])))
        watched.append(weakref.ref(cached_run(config)))
    gc.collect()
    kept = [ref() for ref in watched if ref() is not None]
    assert kept[-1] is watched[-1]()  # the newest is kept...
    assert len(kept) == MAX_RESULTS  # ...and the cache is full: its bound, not our references, decides
    held = sum(result_bytes(result) for result in kept) / MB
    assert result_bytes(kept[-1]) / MB > 10  # a result at the caps is large (11.8 MB): the bytes are counted
    assert held <= RESULTS_BUDGET_MB, f"{len(kept)} results at the caps hold {held:.0f} MB"
    del kept
    cached_run.clear()
