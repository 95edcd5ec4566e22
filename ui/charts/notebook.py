"""Any link as a runnable NumPy notebook (.ipynb): the same layer, rebuilt step by step in plain NumPy.

``notebook_for_link(link)`` reads a link (a full URL or its query string) with the app's own reader
(``ui.state.urlstate.config_from_params``: the same repairs and messages as the page), runs the engine once,
and writes a notebook that

- holds the engine's inputs and weights as data (E, W_Q, W_K, W_V, W_O and the biases; the weights
  are not re-drawn from the seed, so they are the app's to the last bit),
- rebuilds every step in plain NumPy, one short cell per step, in the order and with the names of the
  Step-by-step page (the steps and their titles come from ``ui.pipeline.steps``: ``build_steps`` decides which
  optional steps a configuration has, ``STEP_KINDS`` names them),
- follows each step with ``assert np.allclose(...)`` against the engine's numbers for that link,
  embedded in the notebook, so a student who changes a cell sees which assert breaks,
- imports nothing but numpy (matplotlib if installed, for the last cell's picture), and ends with the
  link back to the app view.

A step with no NumPy cell here (a new step kind, a new mask) raises ``NotImplementedError`` naming what to
add, rather than writing a notebook that silently skips it. A positional scheme of the engine's table with no
NumPy recipe here still gets its notebook: its positions, angles or bias are the app's, embedded as data.
No streamlit in here.

Command line::

    python -m ui.charts.notebook "<link or query string>" [--app-url URL] > view.ipynb
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np

from mha_core.attention import merge_heads
from mha_core.config import MHAConfig, RunResult, run
from mha_core.presets import PRESET_INITS
from ui.pipeline.records import step_inputs
from ui.pipeline.step_kinds import STEP_KINDS
from ui.pipeline.steps import build_steps
from ui.state.urlstate import config_from_params, params_from_config

DEFAULT_APP_URL = "http://localhost:8501"
DEFAULT_PAGE = "heads"
NOTEBOOK_PAGES = ("heads", "step_by_step")  # the pages with a "Notebook (.ipynb)" button


# ---- reading a link ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """What a link asks for: the app's root URL, the page and the query parameters (last value wins, as in the app)."""

    app_url: str
    page: str
    params: dict[str, str]


def parse_link(link: str, app_url: str | None = None) -> Link:
    """A full URL (``http://host/step_by_step?tokens=...``) or a bare query string (``?tokens=...`` or ``tokens=...``)."""
    link = link.strip()
    parts = urlsplit(link)
    if parts.scheme and parts.netloc:
        path = parts.path.rstrip("/")
        last = path.rsplit("/", 1)[-1] if path else ""
        page = last if last in NOTEBOOK_PAGES or last in ("decoding", "lessons", "compare", "about") else ""
        root = f"{parts.scheme}://{parts.netloc}{path[: len(path) - len(page)].rstrip('/') if page else path}"
        query = parts.query
    else:
        before, query = link.split("?", 1) if "?" in link else ("", link)
        root, page = "", before.strip("/").rsplit("/", 1)[-1]  # 'step_by_step?tokens=...' names the page
    params = dict(parse_qsl(query, keep_blank_values=True))
    return Link(app_url or root or DEFAULT_APP_URL, page or DEFAULT_PAGE, params)


def view_url(app_url: str, page: str, config: MHAConfig) -> str:
    """The app view of ``config`` on ``page``: what the notebook links back to."""
    page_path = "" if page == DEFAULT_PAGE else page
    return f"{app_url.rstrip('/')}/{page_path}?{urlencode(params_from_config(config))}"


# ---- numbers as Python source --------------------------------------------------------------------


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
    def reads(self) -> np.ndarray:
        """(nh,) the key/value head each query head reads."""
        nh, kv = self.config.n_heads, self.config.key_value_heads
        return np.arange(nh) // (nh // kv)


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


def _input_cell(ctx: Context) -> Cell:
    r = ctx.result
    lines = ["# E: token embeddings, one row per token (the app's, embedded)"]
    if ctx.config.init in PRESET_INITS:
        lines[0] = "# E: the hand-built heads' inputs: position in dims 0-1, word in dims 2-3 (the app's, embedded)"
    lines.append(f"E = {array_source(r.embeddings)}  # (T_q, C)")
    if ctx.config.is_cross:
        lines.append(f"E_kv = {array_source(r.key_embeddings)}  # (T_k, C): keys and values come from a second sentence")
    else:
        lines.append("E_kv = E  # (T_k, C): self-attention, keys and values from the same tokens")
    asserts = "assert E.shape == (T_q, C) and E_kv.shape == (T_k, C)"
    return Cell("\n".join(lines), asserts, {})


def _sinusoidal(ctx: Context) -> tuple[str, str]:
    code = (
        "# P[t, 2i] = sin(t / 10000^(2i/C)), P[t, 2i+1] = cos(same angle)\n"
        "t = np.arange(max(T_q, T_k))[:, None]  # (T, 1)\n"
        "i = np.arange(C)[None, :] // 2  # (1, C): i for columns 2i and 2i+1\n"
        "angle = t / 10000.0 ** (2 * i / C)  # (T, C)\n"
        "P = np.where(np.arange(C) % 2 == 0, np.sin(angle), np.cos(angle))  # (T, C)\n"
        "X = E + P[:T_q]  # (T_q, C)\n"
        "X_kv = E_kv + P[:T_k]  # (T_k, C)"
    )
    return code, "\n".join([check("X"), check("X_kv")])


def _no_positions_on_tokens(ctx: Context) -> tuple[str, str]:
    why = "the hand-built heads carry their positions in dims 0-1 of E" if ctx.config.init in PRESET_INITS else (
        "no scheme adds to the tokens here")
    return f"# Positional encoding is off ({why}): X = E\nX = E  # (T_q, C)\nX_kv = E_kv  # (T_k, C)", \
        "\n".join([check("X"), check("X_kv")])


# How each positional scheme that adds to the tokens is written in NumPy. A scheme of ``mha_core.positions.SCHEMES``
# that is not here still gets a notebook: its P is the app's, embedded as data (no recipe to show).
ADD_TO_TOKENS: dict[str, Callable[[Context], tuple[str, str]]] = {
    "sinusoidal": _sinusoidal,
}


def _embedded_positions(ctx: Context) -> tuple[str, str]:
    t = max(len(ctx.config.tokens), len(ctx.config.key_tokens))
    p = ctx.config.positions.add_to_tokens(t, ctx.config.d_model)  # (T, C) the engine's own table
    code = (f"# Positions of scheme {ctx.config.pe!r}: the app's table, embedded (this notebook has no NumPy recipe for it)\n"
            f"P = {array_source(p)}  # (T, C)\n"
            "X = E + P[:T_q]  # (T_q, C)\n"
            "X_kv = E_kv + P[:T_k]  # (T_k, C)")
    return code, "\n".join([check("X"), check("X_kv")])


def _positional_cell(ctx: Context) -> Cell:
    r = ctx.result
    if r.positional is None:
        maker = _no_positions_on_tokens
    else:
        maker = ADD_TO_TOKENS.get(ctx.config.pe, _embedded_positions)
    code, asserts = maker(ctx)
    return Cell(code, asserts, {"X": r.x_q, "X_kv": r.x_kv})


def _weights_source(ctx: Context) -> str:
    w = ctx.result.weights
    lines = [f"# The learned weights (seed {ctx.config.seed}, init {ctx.config.init!r}): the app's, embedded"]
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
    q = t.q if t.q_unrotated is None else t.q_unrotated
    k = t.k if t.k_unrotated is None else t.k_unrotated
    expected = {"Q": merge_heads(q), "K": merge_heads(k), "V": merge_heads(t.v)}
    return Cell(code, "\n".join(check(n) for n in "QKV"), expected)


def _split_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    code = ("# head h owns columns h*hs:(h+1)*hs\n"
            "Q_h = Q.reshape(T_q, nh, hs).transpose(1, 0, 2)  # (nh, T_q, hs)\n"
            "K_h = K.reshape(T_k, kv, hs).transpose(1, 0, 2)  # (kv, T_k, hs)\n"
            "V_h = V.reshape(T_k, kv, hs).transpose(1, 0, 2)  # (kv, T_k, hs)")
    q = t.q if t.q_unrotated is None else t.q_unrotated
    k = t.k if t.k_unrotated is None else t.k_unrotated
    return Cell(code, "\n".join(check(n) for n in ("Q_h", "K_h", "V_h")), {"Q_h": q, "K_h": k, "V_h": t.v})


def _kv_share_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    k = t.k if t.k_unrotated is None else t.k_unrotated
    code = ("# query head h reads key/value head h // (nh / kv): one K/V head per group of query heads\n"
            "reads = np.arange(nh) // (nh // kv)  # (nh,)\n"
            "K_h = K_h[reads]  # (nh, T_k, hs)\n"
            "V_h = V_h[reads]  # (nh, T_k, hs)")
    expected = {"reads": ctx.reads, "K_h_read": k[ctx.reads], "V_h_read": t.v[ctx.reads]}
    asserts = "\n".join(['assert np.array_equal(reads, app["reads"])', check("K_h", "K_h_read"), check("V_h", "V_h_read")])
    return Cell(code, asserts, expected)


def _rope_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    code = (f"# RoPE: turn each pair (d_p, d_(p+hs/2)) of q and k by position * base^(-2p/hs)\n"
            f"base = {_number(ctx.config.rope_base)}\n"
            "frequency = 1.0 / base ** (np.arange(0, hs, 2) / hs)  # (hs/2,)\n"
            "theta_q = np.arange(T_q)[:, None] * frequency  # (T_q, hs/2)\n"
            "theta_k = np.arange(T_k)[:, None] * frequency  # (T_k, hs/2)\n"
            "\n"
            "def rotate(x, theta):\n"
            "    first, second = x[..., : hs // 2], x[..., hs // 2 :]  # (heads, T, hs/2) each\n"
            "    cos, sin = np.cos(theta), np.sin(theta)  # (T, hs/2) each\n"
            "    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)  # (heads, T, hs)\n"
            "\n"
            "Q_h = rotate(Q_h, theta_q)  # (nh, T_q, hs)\n"
            "K_h = rotate(K_h, theta_k)  # (nh or kv, T_k, hs)")
    if ctx.config.pe != "rope":  # another scheme that turns q and k: its angles are the app's, embedded
        start, stop = code.index("frequency ="), code.index("def rotate")
        code = (code[:start] + f"theta_q = {array_source(t.q_angles)}  # (T_q, hs/2): scheme {ctx.config.pe!r}'s angles\n"
                f"theta_k = {array_source(t.k_angles)}  # (T_k, hs/2)\n\n" + code[stop:])
    k = t.k[ctx.reads] if ctx.shared else t.k
    expected = {"theta_q": t.q_angles, "theta_k": t.k_angles, "Q_rot": t.q, "K_rot": k}
    asserts = "\n".join([check("theta_q"), check("theta_k"), check("Q_h", "Q_rot"), check("K_h", "K_rot")])
    return Cell(code, asserts, expected)


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
    t = ctx.result.trace
    code = ("# ALiBi: head h's slope m_h (the paper's geometric series), and the penalty -m_h |i - j|\n"
            "below = 2 ** int(np.floor(np.log2(nh)))  # the power of two at or below nh\n"
            "m = 2.0 ** (-8.0 / below * np.arange(1, below + 1))  # (below,)\n"
            "if below < nh:  # then every other slope of the next power of two\n"
            "    m = np.concatenate([m, (2.0 ** (-4.0 / below * np.arange(1, 2 * below + 1)))[0::2][: nh - below]])  # (nh,)\n"
            "B = -m[:, None, None] * np.abs(np.arange(T_q)[:, None] - np.arange(T_k)[None, :])  # (nh, T_q, T_k)\n"
            "L = L + B  # (nh, T_q, T_k)")
    if ctx.config.pe != "alibi":  # another scheme that adds a bias: the app's, embedded
        code = (f"B = {array_source(t.bias)}  # (nh, T_q, T_k): scheme {ctx.config.pe!r}'s bias, the app's\n"
                "L = L + B  # (nh, T_q, T_k)")
    expected = {"B": t.bias, "L_biased": t.scores * t.scale + t.bias}
    return Cell(code, "\n".join([check("B"), check("L", "L_biased")]), expected)


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
    raise NotImplementedError(f"the notebook has no NumPy cell for mask {config.mask!r}: add it to ui.charts.notebook._mask_source")


def _mask_cell(ctx: Context) -> Cell:
    r = ctx.result
    code = _mask_source(ctx) + "\nL = np.where(M, L, -np.inf)  # (nh, T_q, T_k): a masked logit is -inf, its weight 0"
    mask = np.ones((len(ctx.config.tokens), len(ctx.config.key_tokens)), dtype=bool) if r.mask is None else r.mask
    asserts = "\n".join(['assert np.array_equal(M, app["M"])', check("L")])
    return Cell(code, asserts, {"M": mask, "L": r.trace.logits})


def _softmax_cell(ctx: Context) -> Cell:
    t = ctx.result.trace
    if t.null_key:
        code = ("# softmax_1 (the null key): one more key of logit 0 and value 0 in every row's denominator\n"
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
    code = "concat = heads.transpose(1, 0, 2).reshape(T_q, nh * hs)  # (T_q, nh*hs): [head_0 | head_1 | ...]"
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


def step_slugs(result: RunResult) -> list[str]:
    """The steps of this run, in the Step-by-step page's order (its own builder decides the optional ones)."""
    return [step.slug for step in build_steps(step_inputs(result), head=0)]


# ---- the notebook -------------------------------------------------------------------------------


def _setup_source(ctx: Context) -> str:
    c = ctx.config
    return "\n".join([
        "import numpy as np",
        "",
        f"tokens = {list(c.tokens)!r}  # the queries' sentence",
        f"kv_tokens = {list(c.key_tokens)!r}  # keys and values" + (" (cross-attention)" if c.is_cross else " (the same sentence)"),
        "T_q, T_k = len(tokens), len(kv_tokens)  # tokens",
        f"C = {c.d_model}  # d_model",
        f"nh = {c.n_heads}  # heads",
        f"kv = {c.key_value_heads}  # key/value heads (nh: multi-head; 1: multi-query; between: grouped-query)",
        "hs = C // nh  # head size d_k",
    ])


def _app_source(expected: dict[str, np.ndarray]) -> str:
    lines = ["# What the app computed for this link, step by step: the asserts below compare with these",
             "app = {}"]
    lines += [f'app["{name}"] = {array_source(value)}' for name, value in expected.items()]
    return "\n".join(lines)


DRAW_SOURCE = """\
# Every head's attention weights: matplotlib if it is installed, else printed
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
if plt is None:
    np.set_printoptions(precision=3, suppress=True, linewidth=120)
    for h in range(nh):
        print(f"head {h}: rows = queries {tokens}, columns = keys {kv_tokens}")
        print(A[h])
else:
    fig, axes = plt.subplots(1, nh, figsize=(3 * nh, 3), squeeze=False)
    for h, ax in enumerate(axes[0]):
        ax.imshow(np.where(M, A[h], np.nan), vmin=0, vmax=1, cmap="viridis")  # masked cells blank
        ax.set_title(f"head {h}")
        ax.set_xticks(range(T_k), [f"{j}:{w}" for j, w in enumerate(kv_tokens)], rotation=90)
        ax.set_yticks(range(T_q), [f"{i}:{w}" for i, w in enumerate(tokens)])
    plt.tight_layout()
    plt.show()"""


def _title(slug: str, number: int) -> str:
    kind = STEP_KINDS[slug]
    return f"## {number}. {kind.title}\n\n{kind.summary}"


def build_notebook(result: RunResult, link_back: str, messages: list[str] | tuple[str, ...] = ()):
    """The notebook (an ``nbformat.NotebookNode``) of one run: setup, data, one cell per step with its assert,
    the picture, the link back."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook  # ~0.1 s: only when a notebook is made

    ctx = Context(result)
    slugs = step_slugs(result)
    missing = [slug for slug in slugs if slug not in STEP_CELLS]
    if missing:
        raise NotImplementedError(f"the notebook has no NumPy cell for step(s) {', '.join(missing)}: add them to "
                                  "ui.charts.notebook.STEP_CELLS")
    steps = [(slug, STEP_CELLS[slug](ctx)) for slug in slugs]
    expected: dict[str, np.ndarray] = {}
    for _, cell in steps:
        expected.update(cell.expected)
    c = result.config
    intro = [
        "# Multi-head attention in plain NumPy, one step per cell",
        "",
        f"Rebuilt from this view of MHA Explorer: <{link_back}>",
        "",
        f"Configuration: {c.n_heads} heads of size {c.head_size}, d_model {c.d_model}, key/value heads "
        f"{c.key_value_heads}, seed {c.seed}, init `{c.init}`, mask `{c.mask}`, positions `{c.pe}`, scale "
        f"`{c.scale_rule}`, null key {'on' if c.null_key else 'off'}, W_O {'on' if c.output_projection else 'off'}, "
        f"bias {'on' if c.bias else 'off'}.",
        "",
        "The inputs and weights are the app's, as data (the weights are not re-drawn from the seed). Every step is "
        "followed by an `assert` against the app's numbers for this link: change a step and see which assert breaks. "
        "Shapes: T_q queries, T_k keys, C = d_model, nh heads, kv key/value heads, hs head size; row vectors, "
        "`y = x @ W + b`; a mask is True where a query may attend to a key.",
    ]
    if messages:
        intro += ["", "The link was repaired as the app repairs it:", ""] + [f"- {m}" for m in messages]
    cells = [
        new_markdown_cell("\n".join(intro)),
        new_code_cell(_setup_source(ctx)),
        new_markdown_cell("## The app's numbers\n\nEvery intermediate the app computed for this link, for the checks."),
        new_code_cell(_app_source(expected)),
        new_markdown_cell("## The weights\n\nW_Q, W_K, W_V, W_O (and biases) exactly as the app has them."),
        new_code_cell(_weights_source(ctx)),
    ]
    for number, (slug, cell) in enumerate(steps, start=1):
        cells += [new_markdown_cell(_title(slug, number)), new_code_cell(cell.code), new_code_cell(cell.asserts)]
    cells += [
        new_markdown_cell("## The heads' weights"),
        new_code_cell(DRAW_SOURCE),
        new_markdown_cell(f"Every assert passed: this is the app's layer, number for number.\n\nBack to the app: <{link_back}>"),
    ]
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    return notebook


def notebook_for_config(config: MHAConfig, link_back: str, messages=()):
    """The notebook of a valid configuration (the engine runs once here)."""
    return build_notebook(run(config), link_back, messages)


def notebook_for_link(link: str, app_url: str | None = None) -> tuple[object, list[str]]:
    """Read ``link`` as the app does (repairs and messages included) and write its notebook."""
    parsed = parse_link(link, app_url)
    config, messages = config_from_params(parsed.params)
    link_back = view_url(parsed.app_url, parsed.page, config)
    return notebook_for_config(config, link_back, messages), messages


def notebook_bytes(config: MHAConfig, link_back: str) -> bytes:
    """The .ipynb file of ``config`` as UTF-8 bytes (for a download button)."""
    import nbformat

    return nbformat.writes(notebook_for_config(config, link_back)).encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.charts.notebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("link", help="an app link (http://host/step_by_step?tokens=...) or its query string")
    parser.add_argument("--app-url", default=None, help=f"the app's address for the link back (default: the link's, "
                        f"else {DEFAULT_APP_URL})")
    args = parser.parse_args(argv)
    import nbformat

    notebook, messages = notebook_for_link(args.link, args.app_url)
    for message in messages:
        print(f"note: {message}", file=sys.stderr)
    sys.stdout.write(nbformat.writes(notebook))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
