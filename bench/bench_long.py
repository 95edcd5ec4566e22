"""Longer than trained (issue 36): the default view's three long runs of SmolLM2, timed in a fresh process.

Usage: ``python -m bench --only long`` (``--quick``: T = 128, one run: the path runs, the time is not judged).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.bench_minilm import row

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 120.0  # the default view's three runs: at most 2 minutes on one core
FRESH_PROCESS = r"""
import json, sys, time
from mha_core.smollm2 import load_smollm2
from mha_core import smollm2_long as lg
from ui.pages.real_model.long_view import LongLink, compared_settings
model = load_smollm2(allow_download=False)
n_tokens, quick = int(sys.argv[1]), sys.argv[2] == "1"
settings = compared_settings(LongLink(True, n_tokens=n_tokens))
settings = settings[-1:] if quick else settings
ids, period = lg.long_token_ids(model, lg.LONG_TEXT, n_tokens)
rows = []
for setting in settings:
    wall, cpu = time.perf_counter(), time.process_time()
    run = lg.long_forward(model, ids, period, setting)
    rows.append({"method": setting.method, "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                 "loss_after": run.mean_loss(period)})
print(json.dumps(rows))
"""


def run(quick: bool = False) -> list[dict]:
    """SmolLM2 past its trained length (``mha_core.smollm2_long``): the default view (T = 256 tokens, s = 2, YaRN
    beside "inside" and RoPE as trained), each run's wall-clock and CPU time in a fresh process with one BLAS
    thread, and the loss after the first copy it measured. The view caches each run, so this is a first visit."""
    from mha_core.smollm2 import ModelUnavailableError, load_smollm2

    try:
        load_smollm2(allow_download=False)
    except ModelUnavailableError as error:
        return [row("SmolLM2 long runs", None, "", note=f"skipped: {str(error).splitlines()[0]}")]
    n_tokens = 128 if quick else 256
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(n_tokens), "1" if quick else "0"], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=True, timeout=1800)
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    rows = [row(f"long run, T = {n_tokens}, s = 2, {item['method']}", item["wall_s"], "s",
                note=f"1 BLAS thread; CPU {item['cpu_s']:.1f} s; loss after the first copy {item['loss_after']:.3f}")
            for item in measured]
    if not quick:
        rows.append(row(f"the default view, first visit: {len(measured)} runs", sum(i["wall_s"] for i in measured), "s",
                        GOAL_S, f"CPU {sum(i['cpu_s'] for i in measured):.1f} s"))
    return rows
