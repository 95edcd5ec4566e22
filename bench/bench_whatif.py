"""What-ifs on SmolLM2 (issue 36): the first view with and without the shipped sweep, and QK-norm after the fact.

    python -m bench --only whatif [--quick]

Rows (a fresh process with one BLAS thread, the page opened in AppTest as a link does):
- the what-ifs' first view on the default prompt (``rm_sparse=all&rm_sinks=1``) read from the shipped sweep
  (mha_core/data/smollm2_whatif_sweep.json): the wall clock of the page's run after a run without the what-ifs has
  loaded the model and run the prompt (goal < 5 s);
- the same view with no shipped file (every k, every MoBA block count and the four sink variants computed);
- QK-norm after the fact in all 30 layers, both gains, on 128 tokens (the cap): ``mha_core.smollm2_qknorm``;
- the top-k sweep the issue budgets: 8 values of k (``SWEEP_K`` and 128) in all 30 layers on 256 random tokens
  (twice the page's cap; goal < 2 min on one core). bench_smollm2 times the page's sweep (with MoBA) at 128.

``--quick`` (CI): the shipped first view and QK-norm on 16 tokens; the computed first view (~1 min) and the 256-token
sweep are left out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.bench_minilm import row

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"first_view_s": 5.0, "sweep_256_s": 120.0}

FRESH_PROCESS = r"""
import json, sys, time
from pathlib import Path
import numpy as np
from streamlit.testing.v1 import AppTest
from mha_core import smollm2_shipped as shipped
from mha_core import smollm2_qknorm as qn
from mha_core.smollm2 import load_smollm2
quick, out = sys.argv[1] == "1", {}
def page(**params):
    at = AppTest.from_file("app.py", default_timeout=900)
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page("app_pages/real_model.py")
    start, cpu = time.perf_counter(), time.process_time()
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return time.perf_counter() - start, time.process_time() - cpu
out["warm_s"], _cpu = page(model="smollm2")
out["shipped_s"], out["shipped_cpu_s"] = page(model="smollm2", rm_sparse="all", rm_sinks="1")
if not quick:
    shipped.SHIPPED_FILE = Path("/nonexistent/smollm2_whatif_sweep.json")
    out["computed_s"], out["computed_cpu_s"] = page(model="smollm2", rm_sparse="all", rm_sinks="1")
model = load_smollm2(allow_download=False)
ids = np.random.default_rng(0).integers(1000, 20000, 16 if quick else 128)
run = model.forward(ids, traces=())
for gain in qn.GAINS:
    start, cpu = time.perf_counter(), time.process_time()
    qn.qk_norm_run(model, run, range(30), gain)
    out[f"qknorm_{gain}_s"], out[f"qknorm_{gain}_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
out["tokens"] = len(ids)
if not quick:  # the issue's budget: 8 values of k, all 30 layers, 256 tokens, under 2 min on one core
    from dataclasses import replace
    from mha_core.smollm2_whatif import SWEEP_K, sparse_sweep
    ks, model = (*SWEEP_K, 128), replace(model, max_tokens=256)  # the page caps prompts at 128 tokens
    long_run = model.forward(np.random.default_rng(1).integers(1000, 20000, 256), traces=())
    start, cpu = time.perf_counter(), time.process_time()
    sparse_sweep(model, long_run, range(30), ks)
    out["sweep256_s"], out["sweep256_cpu_s"], out["sweep256_ks"] = time.perf_counter() - start, time.process_time() - cpu, ks
print(json.dumps(out))
"""


def run(quick: bool = False) -> list[dict]:
    """The what-ifs' first view from the shipped sweep and computed, and QK-norm after the fact (issue 36).

    Each page time is one AppTest run of the Real model page in a fresh process (one BLAS thread) after a first run
    without the what-ifs has loaded SmolLM2 and run the default prompt: what a student waits for when turning the
    what-ifs on. CPU time beside it (the machine is shared)."""
    from mha_core.smollm2 import ModelUnavailableError, load_smollm2

    try:
        load_smollm2(allow_download=False)
    except ModelUnavailableError as error:
        return [row("SmolLM2 what-ifs", None, "", note=f"skipped: {str(error).splitlines()[0]}")]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, "1" if quick else "0"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    rows = [row("what-ifs' first view, default prompt, shipped sweep", out["shipped_s"], "s", GOALS["first_view_s"],
                f"CPU {out['shipped_cpu_s']:.2f} s; the page without them first: {out['warm_s']:.1f} s")]
    if "computed_s" in out:
        rows.append(row("what-ifs' first view, default prompt, no shipped file", out["computed_s"], "s",
                        note=f"CPU {out['computed_cpu_s']:.1f} s: 7 top-k + 5 MoBA + 3 sink runs, 30 layers"))
    for gain in ("one", "matched"):
        rows.append(row(f"QK-norm after the fact, all 30 layers, gain {gain}, {out['tokens']} tokens",
                        out[f"qknorm_{gain}_s"], "s", note=f"CPU {out[f'qknorm_{gain}_cpu_s']:.2f} s"))
    if "sweep256_s" in out:
        ks = tuple(out["sweep256_ks"])
        rows.append(row(f"top-k sweep, all 30 layers, 256 tokens, {len(ks)} values of k {ks}", out["sweep256_s"], "s",
                        GOALS["sweep_256_s"], f"one run after the forward; CPU {out['sweep256_cpu_s']:.1f} s"))
    return rows
