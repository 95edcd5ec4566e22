"""What ``mha_core.attention.multi_head_attention`` checks before it computes: shapes, the mask, positions,
and which query rows a mask leaves with no key. Each raises ``ValueError`` naming the values and what
would work. Pure NumPy."""

from __future__ import annotations

import numpy as np

from mha_core.steps import AttentionWeights


def check_shapes(x_q, x_k, x_v, weights: AttentionWeights, n_heads: int, kv_heads: int) -> None:
    """Raise ValueError, naming the shapes, when the inputs and parameters do not fit together."""
    for name, count in (("n_heads", n_heads), ("kv_heads", kv_heads)):
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
            raise ValueError(f"{name} must be a positive integer, got {count!r}")
    if n_heads % kv_heads:
        raise ValueError(f"kv_heads = {kv_heads} does not divide n_heads = {n_heads}: each key/value head serves "
                         f"an equal group of query heads (try a divisor of {n_heads}, e.g. 1 or {n_heads})")
    for name, x in (("x_q", x_q), ("x_k", x_k), ("x_v", x_v)):
        if x.ndim != 2:
            raise ValueError(f"{name} must be a (tokens, features) matrix, got shape {x.shape}")
    if x_k.shape[0] != x_v.shape[0]:
        raise ValueError(f"x_k has {x_k.shape[0]} tokens but x_v has {x_v.shape[0]}: keys and values pair up")
    for name, x, w in (("q", x_q, weights.w_q), ("k", x_k, weights.w_k), ("v", x_v, weights.w_v)):
        if w.ndim != 2 or w.shape[0] != x.shape[1]:
            raise ValueError(f"w_{name} has shape {w.shape} but x_{name} has {x.shape[1]} features")
    for name, width, count in (("q", weights.w_q.shape[1], n_heads), ("v", weights.w_v.shape[1], kv_heads)):
        if width % count:
            raise ValueError(f"w_{name} has {width} columns, not divisible by {count} heads")
    head_size = weights.w_q.shape[1] // n_heads
    if weights.w_k.shape[1] != kv_heads * head_size:
        raise ValueError(f"w_q {weights.w_q.shape} and w_k {weights.w_k.shape} must have as many columns per head: "
                         f"w_k needs kv_heads * hs = {kv_heads} * {head_size} = {kv_heads * head_size}")
    concat_width = n_heads * (weights.w_v.shape[1] // kv_heads)
    if weights.w_o is not None and weights.w_o.shape[0] != concat_width:
        raise ValueError(f"w_o has {weights.w_o.shape[0]} rows but the heads concatenate to {concat_width}")
    if weights.w_o is None and weights.b_o is not None:
        raise ValueError("b_o is set but w_o is None: an output bias needs an output projection")
    for name in ("q", "k", "v", "o"):
        b, w = getattr(weights, f"b_{name}"), getattr(weights, f"w_{name}")
        if b is not None and b.shape != (w.shape[1],):
            raise ValueError(f"b_{name} has shape {b.shape}, expected ({w.shape[1]},)")


def checked_mask(mask, n_heads: int, tq: int, tk: int) -> np.ndarray | None:
    """The boolean mask as given (it broadcasts to (nh, Tq, Tk)), or a ValueError that says what was wrong."""
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    try:
        fits = mask.ndim <= 3 and np.broadcast_shapes(mask.shape, (n_heads, tq, tk)) == (n_heads, tq, tk)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"mask of shape {mask.shape} does not broadcast to (heads, queries, keys) = {(n_heads, tq, tk)}")
    return mask


def checked_positions(positions, count: int, name: str) -> np.ndarray:
    """Token positions as a (count,) array, 0..count-1 by default."""
    if positions is None:
        return np.arange(count)  # (count,)
    positions = np.asarray(positions)
    if positions.shape != (count,) or positions.dtype.kind not in "iuf":
        raise ValueError(f"{name} must give one number per token, shape ({count},), got {positions.shape}")
    return positions


def fully_masked_rows(mask: np.ndarray | None, n_heads: int, tq: int) -> np.ndarray:
    """(nh, Tq) booleans: True where a query may attend to no key at all."""
    if mask is None:
        return np.zeros((n_heads, tq), dtype=bool)  # (nh, Tq)
    return np.broadcast_to(~mask.any(axis=-1), (n_heads, tq)).copy()  # (nh, Tq)


def is_cross_attention(x_q: np.ndarray, x_k: np.ndarray) -> bool:
    """True when the keys' tokens are not the queries' own."""
    return x_k is not x_q and not (x_k.shape == x_q.shape and np.array_equal(x_k, x_q))


def check_latent_shapes(x_q, x_k, weights: AttentionWeights, mla, n_heads: int, kv_heads: int) -> None:
    """Raise ValueError, naming the shapes, when an MLA layer's parts do not fit together."""
    if any(getattr(weights, name) is not None for name in ("w_k", "w_v", "b_k", "b_v")):
        raise ValueError("with mla, keys and values come from the latent: pass w_k, w_v, b_k and b_v as None")
    if isinstance(n_heads, bool) or not isinstance(n_heads, int | np.integer) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive integer, got {n_heads!r}")
    if kv_heads != n_heads:
        raise ValueError(f"with mla every query head has its own keys from the latent: kv_heads must be {n_heads}")
    for name, x in (("x_q", x_q), ("x_k", x_k)):
        if x.ndim != 2:
            raise ValueError(f"{name} must be a (tokens, features) matrix, got shape {x.shape}")
    if weights.w_q.shape[0] != x_q.shape[1] or weights.w_q.shape[1] % n_heads:
        raise ValueError(f"w_q has shape {weights.w_q.shape}: it needs {x_q.shape[1]} rows and nh*hs columns")
    head_size = weights.w_q.shape[1] // n_heads
    rank, rope = mla.rank, mla.rope_dims
    expected = {"w_dkv": (x_k.shape[1], rank), "w_uk": (rank, n_heads * (head_size - rope)),
                "w_kr": (x_k.shape[1], rope), "latent_gain": (rank,)}
    for name, shape in expected.items():
        if getattr(mla, name).shape != shape:
            raise ValueError(f"mla.{name} has shape {getattr(mla, name).shape}, expected {shape} "
                             f"(rank {rank}, {rope} RoPE dims, {n_heads} heads of {head_size})")
    if not 0 <= rope < head_size or rope % 2:
        raise ValueError(f"the decoupled RoPE dims ({rope}) must be even and below the head size {head_size}")
    if mla.w_uv.shape[0] != rank or mla.w_uv.shape[1] % n_heads:
        raise ValueError(f"mla.w_uv has shape {mla.w_uv.shape}: it needs {rank} rows and nh*hv columns")
    concat_width = mla.w_uv.shape[1]
    if weights.w_o is not None and weights.w_o.shape[0] != concat_width:
        raise ValueError(f"w_o has {weights.w_o.shape[0]} rows but the heads concatenate to {concat_width}")
