"""Random attention problems for the tests: hypothesis strategies and plain-rng builders, named after shapes.

Glossary as in ``mha_core``: T tokens (Tq queries, Tk keys), C widths, nh heads, hs head size of
queries/keys, hv head size of values. A *problem* is everything one ``multi_head_attention``
call needs. The hypothesis strategies draw the shape (so failures shrink to small shapes) and a
seed; the values come from ``np.random.default_rng(seed)``, which keeps generation fast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mha_core import AttentionWeights, causal_mask, padding_mask, window_mask

MASK_KINDS = ("none", "causal", "padding", "window", "random", "random_per_head")

# Bounded, well-scaled floats: large enough to saturate a softmax, small enough that sums stay exact to ~1e-13.
finite_floats = st.floats(min_value=-20, max_value=20, allow_nan=False, allow_infinity=False, width=64)


@dataclass(frozen=True)
class ProblemShape:
    """Sizes and options of one attention call."""

    tq: int
    tk: int
    c_q: int
    c_k: int
    c_v: int
    n_heads: int
    hs: int
    hv: int
    c_out: int | None  # None: no output projection (w_o None)
    cross: bool  # False: self-attention, x_k and x_v default to x_q
    separate_v: bool  # cross-attention with values from their own input (seed 004)
    bias: bool
    mask: str  # one of MASK_KINDS
    scale: float | None  # None = the engine's default 1/sqrt(hs)
    allow_fully_masked: bool = False  # random masks may leave a query row with no key


@dataclass(frozen=True)
class MHAProblem:
    """Inputs, parameters and options of one ``multi_head_attention`` call."""

    shape: ProblemShape
    x_q: np.ndarray  # (Tq, C_q)
    x_k: np.ndarray | None  # (Tk, C_k); None = self-attention
    x_v: np.ndarray | None  # (Tk, C_v); None = x_k
    weights: AttentionWeights
    mask: np.ndarray | None  # (Tq, Tk) or (nh, Tq, Tk), True = may attend
    valid_len: int | None  # the padding mask's valid length, when mask kind is "padding"

    @property
    def n_heads(self) -> int:
        return self.shape.n_heads

    @property
    def keys(self) -> np.ndarray:
        return self.x_q if self.x_k is None else self.x_k  # (Tk, C_k)

    @property
    def values(self) -> np.ndarray:
        return self.keys if self.x_v is None else self.x_v  # (Tk, C_v)

    def kwargs(self) -> dict:
        """Keyword arguments for ``multi_head_attention`` after (x_q, weights, n_heads)."""
        return {"x_k": self.x_k, "x_v": self.x_v, "mask": self.mask, "scale": self.shape.scale}

    def full_mask(self) -> np.ndarray:
        """The mask as (nh, Tq, Tk); all True when there is none."""
        s = self.shape
        if self.mask is None:
            return np.ones((s.n_heads, s.tq, s.tk), dtype=bool)  # (nh, Tq, Tk)
        return np.broadcast_to(self.mask, (s.n_heads, s.tq, s.tk))  # (nh, Tq, Tk)


class RngPicks:
    """The choices a shape is made of, drawn from a numpy Generator (for plain loops over seeds)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        """A whole number from low to high, both included."""
        return int(self.rng.integers(low, high + 1))

    def chance(self, p: float) -> bool:
        """True with probability ``p``."""
        return bool(self.rng.random() < p)

    def uniform(self, low: float, high: float) -> float:
        return float(self.rng.uniform(low, high))

    def one_of(self, options: tuple):
        return options[int(self.rng.integers(len(options)))]


class HypothesisPicks:
    """The same choices drawn by hypothesis (``draw`` of a composite strategy), so that failures shrink."""

    def __init__(self, draw):
        self.draw = draw

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def chance(self, p: float) -> bool:
        return self.draw(st.booleans())  # hypothesis explores both sides; ``p`` only weighs the rng's draws

    def uniform(self, low: float, high: float) -> float:
        return self.draw(st.floats(low, high))

    def one_of(self, options: tuple):
        return self.draw(st.sampled_from(options))


def pick_shape(
    pick: RngPicks | HypothesisPicks,
    *,
    max_tokens: int = 6,
    max_heads: int = 4,
    max_head_size: int = 4,
    torch_mha: bool = False,
    cross: bool | None = None,
    mask: str | None = None,
    allow_fully_masked: bool | None = None,
) -> ProblemShape:
    """A shape from ``pick``'s choices; ``cross``, ``mask`` and ``allow_fully_masked`` pin those options.

    ``torch_mha``: only what ``nn.MultiheadAttention`` can express: hv = hs, C_q = nh*hs, output width
    nh*hs (or no output projection, which equals an identity out_proj), default scale.
    """
    n_heads = pick.integer(1, max_heads)
    hs = pick.integer(1, max_head_size)
    hv = hs if torch_mha else pick.integer(1, max_head_size)
    cross = pick.chance(0.5) if cross is None else cross
    tq = pick.integer(1, max_tokens)
    tk = pick.integer(1, max_tokens) if cross else tq
    if torch_mha:
        c_q = n_heads * hs
        c_out = None if pick.chance(0.25) else c_q  # None: compared against an identity out_proj
    else:
        c_q = pick.integer(1, 8)
        c_out = None if pick.chance(0.3) else pick.integer(1, 8)
    c_k = pick.integer(1, 8) if cross else c_q
    separate_v = cross and pick.chance(0.5)
    c_v = pick.integer(1, 8) if separate_v else c_k
    scale = None if torch_mha or pick.chance(0.6) else pick.uniform(0.05, 2.0)  # MHA fixes 1/sqrt(hs)
    return ProblemShape(
        tq=tq,
        tk=tk,
        c_q=c_q,
        c_k=c_k,
        c_v=c_v,
        n_heads=n_heads,
        hs=hs,
        hv=hv,
        c_out=c_out,
        cross=cross,
        separate_v=separate_v,
        bias=pick.chance(0.5),
        mask=pick.one_of(MASK_KINDS) if mask is None else mask,
        scale=scale,
        allow_fully_masked=pick.chance(0.5) if allow_fully_masked is None else allow_fully_masked,
    )


def random_shape(
    rng: np.random.Generator,
    *,
    max_tokens: int = 6,
    max_heads: int = 4,
    max_head_size: int = 4,
    torch_mha: bool = False,
    allow_fully_masked: bool = False,
) -> ProblemShape:
    """A random shape from ``rng`` (see ``pick_shape``)."""
    return pick_shape(
        RngPicks(rng),
        max_tokens=max_tokens,
        max_heads=max_heads,
        max_head_size=max_head_size,
        torch_mha=torch_mha,
        allow_fully_masked=allow_fully_masked,
    )


def random_matrix(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    """Normal weights with std 1/sqrt(fan_in): scores of order 1, so the softmax is not saturated. Shape (in, out)."""
    return rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)


def random_mask(rng: np.random.Generator, shape: ProblemShape) -> tuple[np.ndarray | None, int | None]:
    """The mask of kind ``shape.mask`` (True = may attend) and the padding's valid length."""
    tq, tk, nh = shape.tq, shape.tk, shape.n_heads
    if shape.mask == "none":
        return None, None
    if shape.mask == "causal":
        return causal_mask(tq, tk), None
    if shape.mask == "padding":
        low = 0 if shape.allow_fully_masked else 1
        valid_len = int(rng.integers(low, tk + 1))
        return padding_mask(tq, tk, valid_len), valid_len
    if shape.mask == "window":
        return window_mask(tq, tk, int(rng.integers(0, 3)), causal=bool(rng.random() < 0.5)), None
    grid = (nh, tq, tk) if shape.mask == "random_per_head" else (tq, tk)
    mask = rng.random(grid) < 0.6  # (nh, Tq, Tk) or (Tq, Tk)
    if not shape.allow_fully_masked:
        empty = ~mask.any(axis=-1)  # rows with no key: open one key at random
        mask[empty, rng.integers(0, tk, size=int(empty.sum()))] = True
    return mask, None


def random_problem(rng: np.random.Generator, shape: ProblemShape) -> MHAProblem:
    """Inputs (standard normal), weights, biases and mask for ``shape``."""
    s = shape
    x_q = rng.standard_normal((s.tq, s.c_q))  # (Tq, C_q)
    x_k = rng.standard_normal((s.tk, s.c_k)) if s.cross else None  # (Tk, C_k)
    x_v = rng.standard_normal((s.tk, s.c_v)) if s.separate_v else None  # (Tk, C_v)
    w_q = random_matrix(rng, s.c_q, s.n_heads * s.hs)  # (C_q, nh*hs)
    w_k = random_matrix(rng, s.c_k, s.n_heads * s.hs)  # (C_k, nh*hs)
    w_v = random_matrix(rng, s.c_v, s.n_heads * s.hv)  # (C_v, nh*hv)
    w_o = None if s.c_out is None else random_matrix(rng, s.n_heads * s.hv, s.c_out)  # (nh*hv, C_out)
    biases = dict.fromkeys(("b_q", "b_k", "b_v", "b_o"))
    if s.bias:
        biases["b_q"] = rng.standard_normal(s.n_heads * s.hs)  # (nh*hs,)
        biases["b_k"] = rng.standard_normal(s.n_heads * s.hs)  # (nh*hs,)
        biases["b_v"] = rng.standard_normal(s.n_heads * s.hv)  # (nh*hv,)
        biases["b_o"] = None if w_o is None else rng.standard_normal(s.c_out)  # (C_out,)
    mask, valid_len = random_mask(rng, s)
    weights = AttentionWeights(w_q, w_k, w_v, w_o, **biases)
    return MHAProblem(s, x_q, x_k, x_v, weights, mask, valid_len)


# ---------------------------------------------------------------------------------------------
# Hypothesis strategies
# ---------------------------------------------------------------------------------------------


@st.composite
def problem_shapes(draw, *, self_attention: bool | None = None, mask: str | None = None, max_tokens: int = 6):
    """A ProblemShape; ``self_attention`` and ``mask`` pin those options."""
    cross = None if self_attention is None else not self_attention
    return pick_shape(HypothesisPicks(draw), max_tokens=max_tokens, cross=cross, mask=mask)


@st.composite
def mha_problems(draw, **shape_options):
    """A full MHAProblem: the shape from ``problem_shapes``, the values from a drawn seed."""
    shape = draw(problem_shapes(**shape_options))
    seed = draw(st.integers(0, 2**32 - 1))
    return random_problem(np.random.default_rng(seed), shape)


def matrices_t_c(max_t: int = 8, max_c: int = 12):
    """(T, C) float64 matrices."""
    shapes = st.tuples(st.integers(1, max_t), st.integers(1, max_c))
    return shapes.flatmap(lambda shape: hnp.arrays(np.float64, shape, elements=finite_floats))


def tensors_nh_t_hs(max_nh: int = 4, max_t: int = 6, max_hs: int = 5):
    """(nh, T, hs) float64 tensors, e.g. heads split from a (T, nh*hs) projection."""
    shapes = st.tuples(st.integers(1, max_nh), st.integers(1, max_t), st.integers(1, max_hs))
    return shapes.flatmap(lambda shape: hnp.arrays(np.float64, shape, elements=finite_floats))


def logits_rows_k(max_rows: int = 6, max_k: int = 8, elements=finite_floats):
    """(rows, K) float64 logits, softmax along K."""
    shapes = st.tuples(st.integers(1, max_rows), st.integers(1, max_k))
    return shapes.flatmap(lambda shape: hnp.arrays(np.float64, shape, elements=elements))


def masks_nh_tq_tk(max_nh: int = 3, max_t: int = 6):
    """(nh, Tq, Tk) boolean masks, True = may attend; rows may be fully masked."""
    shapes = st.tuples(st.integers(1, max_nh), st.integers(1, max_t), st.integers(1, max_t))
    return shapes.flatmap(lambda shape: hnp.arrays(np.bool_, shape))
