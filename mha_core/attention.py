"""Multi-head attention, one function per step of the maths.

Every step returns its result instead of printing it; ``multi_head_attention`` collects all
of them in a frozen ``AttentionTrace`` so that a page can show any intermediate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AttentionWeights:
    """The learned parameters of one multi-head attention layer (row convention, ``x @ w + b``).

    Parameters
    ----------
    w_q : ndarray, shape (C_q, nh*hs)
    w_k : ndarray, shape (C_k, nh*hs)
    w_v : ndarray, shape (C_v, nh*hv)
    w_o : ndarray, shape (nh*hv, C_out), or None for no output projection (output = concat)
    b_q, b_k, b_v, b_o : ndarray, shape (nh*hs,), (nh*hs,), (nh*hv,), (C_out,), or None
    """

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray | None = None
    b_q: np.ndarray | None = None
    b_k: np.ndarray | None = None
    b_v: np.ndarray | None = None
    b_o: np.ndarray | None = None

    def arrays(self) -> list[np.ndarray]:
        """Every parameter that is set, in field order."""
        fields = (self.w_q, self.w_k, self.w_v, self.w_o, self.b_q, self.b_k, self.b_v, self.b_o)
        return [np.asarray(a) for a in fields if a is not None]


@dataclass(frozen=True)
class AttentionTrace:
    """Every intermediate of one multi-head attention call; arrays are read-only.

    Fields: ``q (nh,Tq,hs)``, ``k (nh,Tk,hs)``, ``v (nh,Tk,hv)``, ``scores (nh,Tq,Tk)`` = raw q.k,
    ``logits (nh,Tq,Tk)`` = scores * scale with masked entries exactly -inf,
    ``weights (nh,Tq,Tk)`` = softmax of logits over keys, ``heads (nh,Tq,hv)`` = weights @ v,
    ``concat (Tq, nh*hv)``, ``output (Tq, C_out)``, ``fully_masked (nh,Tq)`` = rows with no key
    to attend to (their weights and head outputs are 0), ``scale`` = the factor applied to scores.
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    logits: np.ndarray
    weights: np.ndarray
    heads: np.ndarray
    concat: np.ndarray
    output: np.ndarray
    fully_masked: np.ndarray
    scale: float

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def n_heads(self) -> int:
        return self.q.shape[0]


def softmax(logits: np.ndarray, axis: int = -1, *, out: np.ndarray | None = None) -> np.ndarray:
    """Softmax along ``axis``, safe for any finite logits and for -inf (masked) entries.

    The maximum is subtracted first, so no finite input overflows. Each slice sums to 1,
    except a slice whose entries are all -inf: it comes out as all zeros, with no NaN and
    no RuntimeWarning. The result is written to ``out`` when given (logits' shape and dtype),
    else to one new array; the exponential and the normalisation work in it in place.
    Integer logits compute in float64.
    """
    logits = np.asarray(logits)
    if logits.dtype.kind != "f":
        logits = logits.astype(np.float64)
    peak = logits.max(axis=axis, keepdims=True)  # logits' shape with size 1 along axis
    np.maximum(peak, np.finfo(peak.dtype).min, out=peak)  # an all -inf slice gets a finite peak: exp(-inf) = 0
    out = np.subtract(logits, peak, out=out)  # logits' shape
    np.exp(out, out=out)
    total = sum_along(out, axis)  # logits' shape with size 1 along axis
    # A slice with a finite entry sums to >= 1 (its maximum contributes exp(0) = 1); only an
    # all -inf slice sums to 0, and it is all 0 already: dividing it by 1 keeps it so, silently.
    np.maximum(total, 1, out=total)
    out /= total
    return out


def sum_along(x: np.ndarray, axis: int) -> np.ndarray:
    """``x.sum(axis, keepdims=True)`` computed as a matmul with a column of ones.

    For the short rows of attention (T <= 1024) BLAS sums 2-4x faster than ``np.sum``; the
    result differs from it only by rounding.
    """
    rows = np.swapaxes(x, axis, -1)  # the summed axis last
    total = rows @ np.ones((rows.shape[-1], 1), dtype=x.dtype)  # rows' shape with size 1 last
    return np.swapaxes(total, axis, -1)  # x's shape with size 1 along axis


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """(T, nh*hs) -> (nh, T, hs): head i is the column block i*hs:(i+1)*hs."""
    t, width = x.shape
    return x.reshape(t, n_heads, width // n_heads).transpose(1, 0, 2)  # (nh, T, hs)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(nh, T, hs) -> (T, nh*hs), the inverse of ``split_heads``."""
    n_heads, t, size = x.shape
    return x.transpose(1, 0, 2).reshape(t, n_heads * size)  # (T, nh*hs)


def project(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Linear map in row convention: (T, C_in) @ (C_in, C_out) + (C_out,) -> (T, C_out)."""
    y = x @ w  # (T, C_out)
    if b is not None:
        y += b
    return y


def project_keys(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, n_heads: int) -> np.ndarray:
    """Keys split into heads, (Tk, C_k) -> (nh, Tk, hs), laid out so that each head's k^T is contiguous.

    The numbers of ``split_heads(project(x, w, b), n_heads)``, computed as (x w)^T = w^T x^T:
    the score matmul q @ k^T then gets a plain (hs, Tk) operand without a transposing copy.
    """
    k_t = w.T @ x.T  # (nh*hs, Tk)
    if b is not None:
        k_t += b[:, None]
    return k_t.reshape(n_heads, -1, x.shape[0]).transpose(0, 2, 1)  # (nh, Tk, hs), a view of (nh, hs, Tk)


def attention_scores(q: np.ndarray, k: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """Raw dot products of every query with every key: (nh,Tq,hs), (nh,Tk,hs) -> (nh,Tq,Tk), into ``out`` if given."""
    k_t = np.ascontiguousarray(k.transpose(0, 2, 1))  # (nh, hs, Tk); no copy for keys from project_keys
    # A plain (hs, Tk) operand, not a transposed view: OpenBLAS multiplies by a transposed one
    # up to 3x slower at T = 128 (a badly threaded path; bench/bench_kernels.py).
    return np.matmul(q, k_t, out=out)  # (nh, Tq, Tk)


def scale_and_mask(scores: np.ndarray, scale, mask: np.ndarray | None, *, out: np.ndarray | None = None) -> np.ndarray:
    """Multiply by ``scale`` and set entries where ``mask`` is False to exactly -inf, into ``out`` if given.

    ``mask`` may be any shape that broadcasts to the scores'; pass it un-broadcast, so that
    ``~mask`` stays small: (Tq, Tk) rather than (nh, Tq, Tk).
    """
    logits = np.multiply(scores, scale, out=out)  # (nh, Tq, Tk); scale has the scores' dtype, so no promotion
    if mask is not None:
        np.copyto(logits, -np.inf, where=~mask)
    return logits


def scaled_dot_product_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None = None,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """softmax(q k^T * scale, masked) @ v for every head at once.

    Parameters
    ----------
    q : ndarray, shape (nh, Tq, hs)
    k : ndarray, shape (nh, Tk, hs)
    v : ndarray, shape (nh, Tk, hv)
    mask : bool ndarray broadcastable to (nh, Tq, Tk), True = may attend; None = all keys
    scale : float, default 1/sqrt(hs)

    Returns
    -------
    scores, logits, weights : ndarray, shape (nh, Tq, Tk)
        Raw q.k, scaled and masked (-inf where masked), softmax over keys (rows sum to 1,
        except rows with every key masked, which are 0).
    heads : ndarray, shape (nh, Tq, hv)
    """
    dtype = compute_dtype(q, k, v)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scale = dtype.type(scale)  # a float64 scalar would promote float32 arrays
    scores, logits, weights = attention_maps(q.shape[0], q.shape[1], k.shape[1], dtype)  # (nh, Tq, Tk) each
    attention_scores(q, k, out=scores)
    scale_and_mask(scores, scale, mask, out=logits)
    softmax(logits, axis=-1, out=weights)
    heads = weights @ v  # (nh, Tq, hv)
    return scores, logits, weights, heads


def attention_maps(n_heads: int, tq: int, tk: int, dtype: np.dtype) -> np.ndarray:
    """Uninitialised memory for scores, logits and weights: (3, nh, Tq, Tk), one allocation.

    Why one block: glibc's malloc keeps freed memory for reuse only up to a threshold that
    follows the largest block freed so far (twice its size); beyond it the memory goes back
    to the system, and the next call pays a page fault for every page it touches again. One
    block is large enough to lift the threshold above a whole call's arrays, so they are
    reused from call to call: a call at T = 128 ran twice as fast (bench/bench_kernels.py).
    Blocks above 32 MiB (T = 1024 with 12 heads) are mapped afresh on every call regardless.
    """
    return np.empty((3, n_heads, tq, tk), dtype=dtype)  # (3, nh, Tq, Tk)


def compute_dtype(*arrays: np.ndarray) -> np.dtype:
    """float32 stays float32, float64 stays float64, integers and booleans compute in float64."""
    dtype = np.result_type(*arrays)
    if dtype.kind != "f":  # not a floating type (np.issubdtype says the same, 6x slower)
        return np.dtype(np.float64)
    if dtype.itemsize < 4:
        return np.dtype(np.float32)
    return dtype


def _check_shapes(x_q, x_k, x_v, weights: AttentionWeights, n_heads: int) -> None:
    """Raise ValueError, naming the shapes, when the inputs and parameters do not fit together."""
    if isinstance(n_heads, bool) or not isinstance(n_heads, int | np.integer) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive integer, got {n_heads!r}")
    for name, x in (("x_q", x_q), ("x_k", x_k), ("x_v", x_v)):
        if x.ndim != 2:
            raise ValueError(f"{name} must be a (tokens, features) matrix, got shape {x.shape}")
    if x_k.shape[0] != x_v.shape[0]:
        raise ValueError(f"x_k has {x_k.shape[0]} tokens but x_v has {x_v.shape[0]}: keys and values pair up")
    for name, x, w in (("q", x_q, weights.w_q), ("k", x_k, weights.w_k), ("v", x_v, weights.w_v)):
        if w.ndim != 2 or w.shape[0] != x.shape[1]:
            raise ValueError(f"w_{name} has shape {w.shape} but x_{name} has {x.shape[1]} features")
    if weights.w_q.shape[1] != weights.w_k.shape[1]:
        raise ValueError(f"w_q {weights.w_q.shape} and w_k {weights.w_k.shape} must have as many columns")
    for name in ("q", "v"):
        width = getattr(weights, f"w_{name}").shape[1]
        if width % n_heads:
            raise ValueError(f"w_{name} has {width} columns, not divisible by {n_heads} heads")
    if weights.w_o is not None and weights.w_o.shape[0] != weights.w_v.shape[1]:
        raise ValueError(f"w_o has {weights.w_o.shape[0]} rows but the heads concatenate to {weights.w_v.shape[1]}")
    if weights.w_o is None and weights.b_o is not None:
        raise ValueError("b_o is set but w_o is None: an output bias needs an output projection")
    for name in ("q", "k", "v", "o"):
        b, w = getattr(weights, f"b_{name}"), getattr(weights, f"w_{name}")
        if b is not None and b.shape != (w.shape[1],):
            raise ValueError(f"b_{name} has shape {b.shape}, expected ({w.shape[1]},)")


def _checked_mask(mask, n_heads: int, tq: int, tk: int) -> np.ndarray | None:
    """The boolean mask as given (it broadcasts to (nh, Tq, Tk)), or a ValueError that says what was wrong.

    It is not broadcast here: a (Tq, Tk) mask stays (Tq, Tk), so masking never builds an
    (nh, Tq, Tk) boolean array.
    """
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


def _fully_masked_rows(mask: np.ndarray | None, n_heads: int, tq: int) -> np.ndarray:
    """(nh, Tq) booleans: True where a query may attend to no key at all."""
    if mask is None:
        return np.zeros((n_heads, tq), dtype=bool)  # (nh, Tq)
    return np.broadcast_to(~mask.any(axis=-1), (n_heads, tq)).copy()  # (nh, Tq)


def multi_head_attention(
    x_q: np.ndarray,
    weights: AttentionWeights,
    n_heads: int,
    *,
    x_k: np.ndarray | None = None,
    x_v: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    scale: float | None = None,
) -> AttentionTrace:
    """Multi-head attention with every intermediate returned.

    Parameters
    ----------
    x_q : ndarray, shape (Tq, C_q)
        The tokens that ask (queries).
    weights : AttentionWeights
    n_heads : int
        nh; the projections' widths must be divisible by it.
    x_k : ndarray, shape (Tk, C_k), default x_q (self-attention)
    x_v : ndarray, shape (Tk, C_v), default x_k
    mask : bool ndarray broadcastable to (nh, Tq, Tk), optional
        **True = may attend.** torch's ``nn.MultiheadAttention`` uses the opposite sense for a
        boolean ``attn_mask`` (True = blocked); ``F.scaled_dot_product_attention`` uses ours.
    scale : float, default 1/sqrt(hs)

    Returns
    -------
    AttentionTrace
        A query row whose keys are all masked gets weights 0 and head output 0 and is flagged
        in ``fully_masked``; no NaN, no warning. Rows otherwise sum to 1.

    dtype: float32 in, float32 throughout and out; float64 in, float64 out; integer inputs
    compute in float64.
    """
    x_k = x_q if x_k is None else x_k
    x_v = x_k if x_v is None else x_v
    dtype = compute_dtype(x_q, x_k, x_v, *weights.arrays())
    x_q, x_k, x_v = (np.asarray(x, dtype=dtype) for x in (x_q, x_k, x_v))
    cast = {name: None if a is None else np.asarray(a, dtype=dtype) for name, a in weights.__dict__.items()}
    weights = AttentionWeights(**cast)
    _check_shapes(x_q, x_k, x_v, weights, n_heads)
    mask = _checked_mask(mask, n_heads, x_q.shape[0], x_k.shape[0])  # broadcasts to (nh, Tq, Tk)

    q = split_heads(project(x_q, weights.w_q, weights.b_q), n_heads)  # (nh, Tq, hs)
    k = project_keys(x_k, weights.w_k, weights.b_k, n_heads)  # (nh, Tk, hs)
    v = split_heads(project(x_v, weights.w_v, weights.b_v), n_heads)  # (nh, Tk, hv)
    scores, logits, attn, heads = scaled_dot_product_attention(q, k, v, mask, scale)
    concat = merge_heads(heads)  # (Tq, nh*hv)
    output = concat if weights.w_o is None else project(concat, weights.w_o, weights.b_o)  # (Tq, C_out)
    fully_masked = _fully_masked_rows(mask, n_heads, x_q.shape[0])  # (nh, Tq)
    used_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return AttentionTrace(
        q=q,
        k=k,
        v=v,
        scores=scores,
        logits=logits,
        weights=attn,
        heads=heads,
        concat=concat,
        output=output.copy() if output is concat else output,
        fully_masked=fully_masked,
        scale=float(used_scale),
    )
