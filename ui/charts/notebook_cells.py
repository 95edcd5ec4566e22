"""The notebook's cells: one short NumPy cell per step of Step by step (``STEP_CELLS``, keyed by the step's
slug), each with its assert against the engine's numbers, and the helpers that write arrays as source.
Used by ``ui.pipeline.notebook``; no streamlit in here. A cell's whole-line comments are prose a student reads: they
are in the current language (``comment``); the code, its shape comments and the asserts are the same in every one."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mha_core.attention import merge_heads
from mha_core.config import MHAConfig, RunResult
from mha_core.positions import SchemeAt
from mha_core.presets import PRESET_INITS
from ui.i18n import _

COMMENT_WIDTH = 110  # a comment's lines, "# " included, stay about as wide as the code beside them


def comment(text: str) -> str:
    """``text`` (already in the current language) as whole-line Python comments, wrapped to ``COMMENT_WIDTH``."""
    return "\n".join("# " + line for line in textwrap.wrap(text, COMMENT_WIDTH - 2))


def _number(x) -> str:
    """A float exactly as Python reads it back (repr round-trips); -inf as -np.inf."""
    if isinstance(x, bool | np.bool_):
        return "True" if x else "False"
    x = float(x)
    if math.isnan(x):
        return "np.nan"
    if math.isinf(x):
        return "-np.inf" if x < 0 else "np.inf"
    return repr(x)


MAX_LITERAL = 512  # numbers: a larger array is written as the hex of its float64 bytes (fast to read, exact)


def array_source(a: np.ndarray, indent: int = 4) -> str:
    """Source that rebuilds ``a`` exactly (float64 or bool): ``np.array([...])``, one row of the last axis per line,
    or, above MAX_LITERAL numbers, ``np.frombuffer(bytes.fromhex(...))`` (Python parses 30 MB of literals in minutes)."""
    a = np.asarray(a)
    if a.size > MAX_LITERAL:
        kind = "bool" if a.dtype == np.bool_ else "<f8"
        data = np.ascontiguousarray(a, dtype=bool if kind == "bool" else "<f8").tobytes().hex()
        return f'np.frombuffer(bytes.fromhex("{data}"), dtype="{kind}").reshape{a.shape}.copy()'
    dtype = ", dtype=bool" if a.dtype == np.bool_ else ""
    if a.ndim == 0:
        return f"np.array({_number(a)}{dtype})"
    if a.ndim == 1:
        return f"np.array([{', '.join(_number(x) for x in a)}]{dtype})"

    def nested(b: np.ndarray, depth: int) -> str:
        if b.ndim == 1:
            return "[" + ", ".join(_number(x) for x in b) + "]"
        pad = " " * (indent + depth + 1)
        return "[" + f",\n{pad}".join(nested(row, depth + 1) for row in b) + "]"

    return f"np.array({nested(a, 9 - indent)}{dtype})"


# ---- the steps as NumPy cells --------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What the cells are written from: the run, its configuration, and the names the cells share."""

    result: RunResult

    @property
    def config(self) -> MHAConfig:
        return self.result.config

    @property
    def shared(self) -> bool:
        return self.config.key_value_heads < self.config.n_heads

    @property
    def mask(self) -> np.ndarray:
        """(T_q, T_k) the run's mask, True = may attend (all True without one)."""
        mask = self.result.mask
        return np.ones((len(self.config.tokens), len(self.config.key_tokens)), dtype=bool) if mask is None else mask

    @property
    def reads(self) -> np.ndarray:
        """(nh,) the key/value head each query head reads."""
        nh, kv = self.config.n_heads, self.config.key_value_heads
        return np.arange(nh) // (nh // kv)

    @property
    def scheme_at(self) -> SchemeAt:
        """What the positional scheme's NumPy lines may put numbers in for."""
        c = self.config
        return SchemeAt(0, c.n_heads, c.head_size, c.rope_base)


def check(name: str, expected: str | None = None) -> str:
    """The assert line: same shape, and the same numbers as the app's (``app[...]``) to np.allclose's tolerance."""
    expected = expected or name
    return f'assert {name}.shape == app["{expected}"].shape and np.allclose({name}, app["{expected}"])'


@dataclass(frozen=True)
class Cell:
    """One step: its code, the assert that follows it, and what the app computed for it (name -> array)."""

    code: str
    asserts: str
    expected: dict[str, np.ndarray]
    title: str = ""  # the step's own title, when it is not its kind's (a positional scheme's step)


def _input_cell(ctx: Context) -> Cell:
    r = ctx.result
    lines = [comment(_("E: token embeddings, one row per token (the app's, embedded)"))]
    if ctx.config.init in PRESET_INITS:
        lines[0] = comment(_("E: the hand-built heads' inputs: position in dims 0-1, word in dims 2-3 (the app's, "
                             "embedded)"))
    lines.append(f"E = {array_source(r.embeddings)}  # (T_q, C)")
    if ctx.config.is_cross:
        lines.append(f"E_kv = {array_source(r.key_embeddings)}  # (T_k, C): keys and values come from a second sentence")
    else:
        lines.append("E_kv = E  # (T_k, C): self-attention, keys and values from the same tokens")
    asserts = "assert E.shape == (T_q, C) and E_kv.shape == (T_k, C)"
    return Cell("\n".join(lines), asserts, {})


def _no_positions_on_tokens(ctx: Context) -> tuple[str, str]:
    why = _("the hand-built heads carry their positions in dims 0-1 of E") if ctx.config.init in PRESET_INITS else (
        _("no scheme adds to the tokens here"))
    off = comment(_("Positional encoding is off ({why}): X = E").format(why=why))
    return f"{off}\nX = E  # (T_q, C)\nX_kv = E_kv  # (T_k, C)", "\n".join([check("X"), check("X_kv")])


def scheme_source(ctx: Context, embedded: dict[str, tuple[np.ndarray, str]]) -> str:
    """The positional scheme's NumPy lines from its record (``numpy_source``); a scheme without them gets its
    arrays ``embedded`` (name -> (the engine's array, its shape comment)) as data."""
    scheme = ctx.config.positions
    if scheme.numpy_source is not None:
        return scheme.numpy_source(ctx.scheme_at)
    lines = [comment(_("The numbers of scheme {scheme}: the app's, embedded (its record has no NumPy lines)").format(
        scheme=repr(ctx.config.pe)))]
    lines += [f"{name} = {array_source(array)}  # {shape}" for name, (array, shape) in embedded.items()]
    return "\n".join(lines)


def _positional_cell(ctx: Context) -> Cell:
    r = ctx.result
    if r.positional is None:
        code, asserts = _no_positions_on_tokens(ctx)
        return Cell(code, asserts, {"X": r.x_q, "X_kv": r.x_kv})
    t = max(len(ctx.config.tokens), len(ctx.config.key_tokens))
    table = ctx.config.positions.add_to_tokens(t, ctx.config.d_model)  # (T, C) the engine's own table
    code = (scheme_source(ctx, {"P": (table, "(T, C)")}) + "\n"
            "X = E + P[:T_q]  # (T_q, C)\n"
            "X_kv = E_kv + P[:T_k]  # (T_k, C)")
    return Cell(code, "\n".join([check("X"), check("X_kv")]), {"X": r.x_q, "X_kv": r.x_kv},
                ctx.config.positions.title())


def weights_source(ctx: Context) -> str:
    w = ctx.result.weights
    lines = [comment(_("The learned weights (seed {seed}, init {init}): the app's, embedded").format(
        seed=ctx.config.seed, init=repr(ctx.config.init)))]
    for name, array, shape in (("W_Q", w.w_q, "(C, nh*hs)"), ("W_K", w.w_k, "(C, kv*hs)"), ("W_V", w.w_v, "(C, kv*hs)"),
                               ("W_O", w.w_o, "(nh*hs, C)"), ("b_Q", w.b_q, "(nh*hs,)"), ("b_K", w.b_k, "(kv*hs,)"),
                               ("b_V", w.b_v, "(kv*hs,)"), ("b_O", w.b_o, "(C,)")):
        if array is not None:
            lines.append(f"{name} = {array_source(array)}  # {shape}")
    return "\n".join(lines)


def _projection_cell(ctx: Context) -> Cell:
    w, t = ctx.result.weights, ctx.result.trace
    b = {n: f" + b_{n}" if getattr(w, f"b_{n.lower()}") is not None else "" for n in "QKV"}
    code = (f"Q = X @ W_Q{b['Q']}  # (T_q, nh*hs)\n"
            f"K = X_kv @ W_K{b['K']}  # (T_k, kv*hs)\n"
            f"V = X_kv @ W_V{b['V']}  # (T_k, kv*hs)")
    q = t.projected_q
    k = t.projected_k
    expected = {"Q": merge_heads(q), "K": merge_heads(k), "V": merge_heads(t.v)}
    return Cell(code, "\n".join(check(n) for n in "QKV"), expected)


def _split_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    code = (comment(_("head h owns columns h*hs:(h+1)*hs")) + "\n"
            "Q_h = Q.reshape(T_q, nh, hs).transpose(1, 0, 2)  # (nh, T_q, hs)\n"
            "K_h = K.reshape(T_k, kv, hs).transpose(1, 0, 2)  # (kv, T_k, hs)\n"
            "V_h = V.reshape(T_k, kv, hs).transpose(1, 0, 2)  # (kv, T_k, hs)")
    q = t.projected_q
    k = t.projected_k
    return Cell(code, "\n".join(check(n) for n in ("Q_h", "K_h", "V_h")), {"Q_h": q, "K_h": k, "V_h": t.v})


def _kv_share_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    k = t.projected_k
    code = (comment(_("query head h reads key/value head h // (nh / kv): one K/V head per group of query heads"))
            + "\n"
            "reads = np.arange(nh) // (nh // kv)  # (nh,)\n"
            "K_h = K_h[reads]  # (nh, T_k, hs)\n"
            "V_h = V_h[reads]  # (nh, T_k, hs)")
    expected = {"reads": ctx.reads, "K_h_read": k[ctx.reads], "V_h_read": t.v[ctx.reads]}
    asserts = "\n".join(['assert np.array_equal(reads, app["reads"])', check("K_h", "K_h_read"), check("V_h", "V_h_read")])
    return Cell(code, asserts, expected)


def _rope_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    angles = scheme_source(ctx, {"theta_q": (t.q_angles, "(T_q, hs/2)"), "theta_k": (t.k_angles, "(T_k, hs/2)")})
    code = (f"{angles}\n"
            "\n"
            "def rotate(x, theta):  # turn each pair (d_p, d_(p+hs/2)) of every row by its angle\n"
            "    first, second = x[..., : hs // 2], x[..., hs // 2 :]  # (heads, T, hs/2) each\n"
            "    cos, sin = np.cos(theta), np.sin(theta)  # (T, hs/2) each\n"
            "    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)  # (heads, T, hs)\n"
            "\n"
            "Q_h = rotate(Q_h, theta_q)  # (nh, T_q, hs)\n"
            "K_h = rotate(K_h, theta_k)  # (nh or kv, T_k, hs)")
    k = t.k[ctx.reads] if ctx.shared else t.k
    expected = {"theta_q": t.q_angles, "theta_k": t.k_angles, "Q_rot": t.q, "K_rot": k}
    asserts = "\n".join([check("theta_q"), check("theta_k"), check("Q_h", "Q_rot"), check("K_h", "K_rot")])
    return Cell(code, asserts, expected, ctx.config.positions.title())


def _scores_cell(ctx: Context) -> Cell:
    code = "S = Q_h @ K_h.transpose(0, 2, 1)  # (nh, T_q, T_k): S[h, i, j] = q_i . k_j in head h"
    return Cell(code, check("S"), {"S": ctx.result.trace.scores})


SCALE_SOURCE = {
    "sqrt_dk": "s = 1 / np.sqrt(hs)  # 1/sqrt(d_k)",
    "sqrt_t": "s = 1 / np.sqrt(T_k)  # 1/sqrt(T): seed 001's rule, not the standard one",
    "none": "s = 1.0  # no scaling",
    "temperature": "s = 1 / temperature",
}


def _scale_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    rule = SCALE_SOURCE[ctx.config.scale_rule]
    if ctx.config.scale_rule == "temperature":
        rule = f"temperature = {_number(ctx.config.temperature)}\n{rule}"
    code = f"{rule}\nL = S * s  # (nh, T_q, T_k)"
    asserts = "\n".join(['assert np.isclose(s, app["s"])', check("L", "L_scaled")])
    return Cell(code, asserts, {"s": np.asarray(t.scale), "L_scaled": t.scores * t.scale})


def _alibi_cell(ctx: Context) -> Cell:
    """The cell of a scheme that adds a bias to the logits (its slug is ALiBi's, the first such scheme)."""
    t = ctx.result.trace
    code = scheme_source(ctx, {"B": (t.bias, "(nh, T_q, T_k)")}) + "\nL = L + B  # (nh, T_q, T_k)"
    expected = {"B": t.bias, "L_biased": t.scores * t.scale + t.bias}
    return Cell(code, "\n".join([check("B"), check("L", "L_biased")]), expected, ctx.config.positions.title())


def _mask_source(ctx: Context) -> str:
    config, mask = ctx.config, ctx.result.mask
    if config.mask == "none":
        return "M = np.ones((T_q, T_k), dtype=bool)  # (T_q, T_k): no mask, every query may attend to every key"
    if config.mask == "causal":
        return "M = np.tri(T_q, T_k, dtype=bool)  # (T_q, T_k): query i may attend to keys 0..i"
    if config.mask == "padding":
        valid = len(config.key_tokens) if config.valid_len is None else config.valid_len
        return (f"valid_len = {valid}  # the first valid_len keys are real\n"
                "M = np.broadcast_to(np.arange(T_k) < valid_len, (T_q, T_k))  # (T_q, T_k)")
    if config.mask == "window":
        return (f"window = {config.window}\n"
                "M = np.abs(np.arange(T_q)[:, None] - np.arange(T_k)[None, :]) <= window  # (T_q, T_k): |i - j| <= window")
    if config.mask == "custom":
        return f"M = {array_source(mask)}  # (T_q, T_k): the link's custom mask, True = may attend"
    raise NotImplementedError(f"the notebook has no NumPy cell for mask {config.mask!r}: add it to ui.charts.notebook_cells._mask_source")


def _mask_cell(ctx: Context) -> Cell:
    r = ctx.result
    code = _mask_source(ctx) + "\nL = np.where(M, L, -np.inf)  # (nh, T_q, T_k): a masked logit is -inf, its weight 0"
    asserts = "\n".join(['assert np.array_equal(M, app["M"])', check("L")])
    return Cell(code, asserts, {"M": ctx.mask, "L": r.trace.logits})


def _softmax_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    if t.null_key:
        code = (comment(_("softmax_1 (the null key): one more key of logit 0 and value 0 in every row's denominator"))
                + "\n"
                "m = np.maximum(L.max(axis=-1, keepdims=True), 0.0)  # (nh, T_q, 1): the row's max, the null key's 0 included\n"
                "e = np.exp(L - m)  # (nh, T_q, T_k)\n"
                "A = e / (np.exp(-m) + e.sum(axis=-1, keepdims=True))  # (nh, T_q, T_k): rows sum to less than 1")
    else:
        code = ("m = L.max(axis=-1, keepdims=True)  # (nh, T_q, 1): subtracting the row's max prevents overflow\n"
                "m = np.where(np.isfinite(m), m, 0.0)  # a row with every key masked: its weights stay 0, not NaN\n"
                "e = np.exp(L - m)  # (nh, T_q, T_k)\n"
                "total = e.sum(axis=-1, keepdims=True)  # (nh, T_q, 1)\n"
                "A = e / np.where(total > 0, total, 1.0)  # (nh, T_q, T_k): rows sum to 1 (0 when fully masked)")
    return Cell(code, check("A"), {"A": t.weights})


def _mix_cell(ctx: Context) -> Cell:
    code = "heads = A @ V_h  # (nh, T_q, hs): head_h = A_h V_h, each query's weighted sum of the value rows"
    return Cell(code, check("heads"), {"heads": ctx.result.trace.heads})


def _concat_cell(ctx: Context) -> Cell:
    # A kernel with a step after A·V (differential's norm, gated's gate) concatenates what it made: ``mixed``
    source = "mixed" if ctx.config.attention_kernel.after_mix else "heads"
    code = f"concat = {source}.transpose(1, 0, 2).reshape(T_q, nh * hs)  # (T_q, nh*hs): [head_0 | head_1 | ...]"
    return Cell(code, check("concat"), {"concat": ctx.result.trace.concat})


def _output_cell(ctx: Context) -> Cell:
    w = ctx.result.weights
    if w.w_o is None:
        code = "Y = concat  # (T_q, nh*hs): W_O is off, the output is the concatenation and the heads never mix"
    else:
        code = f"Y = concat @ W_O{' + b_O' if w.b_o is not None else ''}  # (T_q, C): W_O mixes the heads"
    return Cell(code, check("Y"), {"Y": ctx.result.trace.output})


# One NumPy cell per step of the Step-by-step page, keyed by the step's slug in ``ui.pipeline.step_kinds.STEP_KINDS``.
STEP_CELLS: dict[str, Callable[[Context], Cell]] = {
    "input": _input_cell,
    "positional": _positional_cell,
    "qkv": _projection_cell,
    "split": _split_cell,
    "kv_share": _kv_share_cell,
    "rope": _rope_cell,
    "scores": _scores_cell,
    "scale": _scale_cell,
    "alibi": _alibi_cell,
    "mask": _mask_cell,
    "softmax": _softmax_cell,
    "mix": _mix_cell,
    "concat": _concat_cell,
    "output": _output_cell,
}
