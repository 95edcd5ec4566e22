"""Section "engine": ``mha_core.multi_head_attention`` against torch on the CPU, same weights."""

from __future__ import annotations

import numpy as np

from bench.machine import blas_threads
from bench.timing import Candidate, median_ms, time_interleaved
from mha_core import AttentionWeights, multi_head_attention

SIZES = ((16, 64, 4), (128, 256, 8), (512, 512, 8), (1024, 768, 12))  # (T, d_model, heads)
QUICK_SIZES = ((16, 64, 4), (32, 64, 4))
DTYPES = ("float32", "float64")
PEAK_SIZE = 2048  # the square matmul that measures this machine's peak
AGREEMENT = {"float32": 1e-4, "float64": 1e-10}  # largest |ours - torch| accepted; numbers are of order 1


def attention_flops(t: int, d_model: int) -> int:
    """FLOPs of one self-attention call: 4 projections 4 * 2*T*d^2, q.k and weights.v 2 * 2*T^2*d."""
    return 8 * t * d_model**2 + 4 * t**2 * d_model


def random_layer(t: int, d_model: int, dtype: str, seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Tokens (T, C) and one layer's parameters in row convention, scaled so the softmax is not saturated."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((t, d_model)).astype(dtype)  # (T, C)
    params = {}
    for name in ("q", "k", "v", "o"):
        params[f"w_{name}"] = (rng.standard_normal((d_model, d_model)) / np.sqrt(d_model)).astype(dtype)  # (C, C)
        params[f"b_{name}"] = (0.1 * rng.standard_normal(d_model)).astype(dtype)  # (C,)
    return x, params


def matmul_call(n: int, dtype: str):
    """A no-argument call of an (n, n) @ (n, n) NumPy product: 2*n^3 FLOPs, this machine's matmul peak."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)).astype(dtype)  # (n, n)
    b = rng.standard_normal((n, n)).astype(dtype)  # (n, n)
    return lambda: a @ b


def torch_candidates(x: np.ndarray, params: dict[str, np.ndarray], n_heads: int) -> dict:
    """torch's three ways to the same attention, as no-argument calls, plus their results for checking.

    ``nn.MultiheadAttention`` gets a batch of one (batch_first), the layout its fast path wants,
    and its weights in its own (out, in) convention. ``scaled_dot_product_attention`` gets the
    projections made by torch matmuls (``addmm``) with the same weights.
    """
    import torch

    t, d_model = x.shape
    hs = d_model // n_heads
    tensors = {name: torch.from_numpy(value) for name, value in params.items()}
    layer = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True, dtype=tensors["w_q"].dtype).eval()
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([tensors[f"w_{n}"].T for n in "qkv"]))  # (3C, C)
        layer.in_proj_bias.copy_(torch.cat([tensors[f"b_{n}"] for n in "qkv"]))  # (3C,)
        layer.out_proj.weight.copy_(tensors["w_o"].T)  # (C, C)
        layer.out_proj.bias.copy_(tensors["b_o"])  # (C,)
    tokens = torch.from_numpy(x)  # (T, C)
    batch = tokens.unsqueeze(0)  # (1, T, C)

    def mha_with_weights():
        with torch.inference_mode():
            return layer(batch, batch, batch, need_weights=True, average_attn_weights=False)

    def mha_without_weights():
        with torch.inference_mode():
            return layer(batch, batch, batch, need_weights=False)

    def sdpa():
        with torch.inference_mode():
            q, k, v = (torch.addmm(tensors[f"b_{n}"], tokens, tensors[f"w_{n}"]) for n in "qkv")  # (T, C) each
            q, k, v = (m.view(t, n_heads, hs).transpose(0, 1) for m in (q, k, v))  # (nh, T, hs) each
            heads = torch.nn.functional.scaled_dot_product_attention(q, k, v)  # (nh, T, hs)
            return torch.addmm(tensors["b_o"], heads.transpose(0, 1).reshape(t, d_model), tensors["w_o"])  # (T, C)

    return {"mha_weights": mha_with_weights, "mha_no_weights": mha_without_weights, "sdpa": sdpa}


def largest_difference(trace, calls: dict) -> float:
    """max |ours - torch| over the output of all three torch calls and the per-head weights of MHA."""
    output, weights = calls["mha_weights"]()
    differences = [
        np.abs(trace.output - output[0].numpy()).max(),
        np.abs(trace.weights - weights[0].numpy()).max(),
        np.abs(trace.output - calls["mha_no_weights"]()[0][0].numpy()).max(),
        np.abs(trace.output - calls["sdpa"]().numpy()).max(),
    ]
    return float(max(differences))


def goals(row: dict) -> str:
    """The issue's goals that apply to this row, each with its verdict and margin."""
    verdicts = []
    ratio = row.get("ours_vs_mha")
    if row["dtype"] == "float32" and ratio is not None:
        limit = 0.5 if row["T"] == 16 else 1.0 if row["T"] >= 128 else None
        if limit is not None:
            verdict = "met" if ratio <= limit else f"MISSED by {ratio / limit - 1:.0%}"
            verdicts.append(f"vs MHA {ratio:.2f} <= {limit}: {verdict}")
    if row["T"] >= 512:
        share = row["ours_peak_fraction"]
        verdict = "met" if share >= 0.6 else f"MISSED by {0.6 - share:.0%} of peak"
        verdicts.append(f"peak {share:.0%} >= 60%: {verdict}")
    return "; ".join(verdicts)


def size_candidates(t: int, d_model: int, n_heads: int, dtype: str) -> tuple[list[Candidate], float | None]:
    """Ours and torch's three variants at one size, named "<variant>@<T>", and their largest difference."""
    x, params = random_layer(t, d_model, dtype)
    weights = AttentionWeights(**params)
    candidates = [Candidate(f"ours@{t}", lambda: multi_head_attention(x, weights, n_heads), f"numpy@{t}")]
    try:
        calls = torch_candidates(x, params, n_heads)
    except ImportError:
        return candidates, None
    difference = largest_difference(multi_head_attention(x, weights, n_heads), calls)
    return candidates + [Candidate(f"{name}@{t}", call, f"torch@{t}") for name, call in calls.items()], difference


def size_row(t: int, d_model: int, n_heads: int, dtype: str, ms: dict[str, float], peak: float) -> dict:
    """One table row from the medians (ms) of every candidate and this dtype's matmul peak (GFLOP/s)."""
    flops = attention_flops(t, d_model)
    row = {"dtype": dtype, "T": t, "d_model": d_model, "heads": n_heads, "gflop": flops / 1e9}
    ours = ms[f"ours@{t}"]
    row["ours_ms"] = ours
    for name in ("mha_weights", "mha_no_weights", "sdpa"):
        row[f"{name}_ms"] = ms.get(f"{name}@{t}")
    for name, label in (("mha_weights", "mha"), ("mha_no_weights", "mha_no_weights"), ("sdpa", "sdpa")):
        row[f"ours_vs_{label}"] = ours / row[f"{name}_ms"] if row[f"{name}_ms"] else None
    row["ours_gflops"] = flops / (ours / 1e3) / 1e9
    row["peak_gflops"] = peak
    row["ours_peak_fraction"] = row["ours_gflops"] / peak
    mha = row["mha_weights_ms"]
    row["mha_peak_fraction"] = flops / (mha / 1e3) / 1e9 / peak if mha else None
    return row


def measure_dtype(sizes, dtype: str, peak_size: int, timing: dict) -> list[dict]:
    """Every size of one dtype, timed in the same rounds: the matmul peak, then each size's NumPy and torch blocks."""
    candidates = [Candidate("peak", matmul_call(peak_size, dtype), "numpy peak")]
    differences = {}
    for t, d_model, n_heads in sizes:
        more, differences[t] = size_candidates(t, d_model, n_heads, dtype)
        candidates += more
    times = time_interleaved(candidates, **timing)
    ms = {name: median_ms(seconds) for name, seconds in times.items()}
    peak = 2 * peak_size**3 / (ms["peak"] / 1e3) / 1e9
    rows = []
    for t, d_model, n_heads in sizes:
        row = size_row(t, d_model, n_heads, dtype, ms, peak)
        row["calls"] = len(times[f"ours@{t}"])
        row["threads"] = blas_threads()
        row["max_abs_diff"] = differences[t]
        row["agrees"] = None if differences[t] is None else differences[t] <= AGREEMENT[dtype]
        row["goals"] = goals(row)
        rows.append(row)
    return rows


def run(quick: bool = False) -> list[dict]:
    """Engine vs torch (CPU, same weights, no mask): ``multi_head_attention`` (which returns every
    intermediate, per-head weights included) against ``torch.nn.MultiheadAttention`` with
    ``need_weights=True, average_attn_weights=False`` (the fair comparison: it also returns the
    per-head weights; column ``mha``), the same without weights (``mha_no_weights``), and
    ``F.scaled_dot_product_attention`` with the projections made by torch matmuls (``sdpa``).

    Times are medians in ms; ``ours_vs_X`` = ours / X (below 1: ours is faster). GFLOP =
    8*T*d^2 + 4*T^2*d; ``peak_gflops`` is this run's NumPy matmul speed on a 2048x2048 product of
    the same dtype (median), and ``ours_peak_fraction`` = ours' GFLOP/s over it. All sizes of a
    dtype are timed in the same rounds: each round runs the peak matmul, then for every size a
    block of NumPy calls and a block of torch calls (the three variants interleaved call by call).
    ``torch.set_num_threads`` is set to NumPy's BLAS thread count, so both use the same cores.
    NumPy and torch calls are timed in separate interleaved blocks with a pause between them
    (see bench/timing.py: each library's spinning worker threads slow the other down);
    ``calls`` is the number of timed calls of ours. ``max_abs_diff`` is the largest difference
    between our output and weights and torch's. Goals (issue 4): ours_vs_mha <= 1.0 at T >= 128
    and <= 0.5 at T = 16 in float32; >= 60% of the matmul peak at T >= 512.
    """
    threads = blas_threads()
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        pass
    sizes, peak_size = (QUICK_SIZES, 128) if quick else (SIZES, PEAK_SIZE)
    timing = {"rounds": 1, "settle": 0.0, "block_seconds": 0.0} if quick else {"rounds": 7, "settle": 0.25}
    return [row for dtype in DTYPES for row in measure_dtype(sizes, dtype, peak_size, timing)]
