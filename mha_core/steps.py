"""The primitive steps of attention, one function per step of the maths; every variant builds on them.

    project -> split heads -> scores -> scale -> [+ bias] -> mask -> softmax -> weighted sum -> merge heads
    -> output projection

This module imports nothing from ``mha_core`` but the positional schemes (``place_per_part``): the kernels, MLA,
the decoders and ``attention.multi_head_attention`` sit above it. Shapes: ``T`` tokens, ``C`` width, ``nh`` heads, ``kv``
key/value heads, ``hs`` head size, ``hv`` value size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mha_core.positions import Positioned, apply_positions


@dataclass(frozen=True)
class AttentionWeights:
    """The learned parameters of one multi-head attention layer (row convention, ``x @ w + b``).

    Parameters
    ----------
    w_q : ndarray, shape (C_q, nh*hs)
    w_k : ndarray, shape (C_k, kv*hs); kv = nh unless keys and values are shared (kv_heads)
    w_v : ndarray, shape (C_v, kv*hv)
    w_o : ndarray, shape (nh*hv, C_out), or None for no output projection (output = concat)
    b_q, b_k, b_v, b_o : ndarray, shape (nh*hs,), (kv*hs,), (kv*hv,), (C_out,), or None
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

    def astype(self, dtype: np.dtype) -> AttentionWeights:
        """The same parameters as arrays of ``dtype`` (no copy where they already are)."""
        return AttentionWeights(**{name: None if a is None else np.asarray(a, dtype=dtype)
                                   for name, a in self.__dict__.items()})



def project(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Linear map in row convention: (T, C_in) @ (C_in, C_out) + (C_out,) -> (T, C_out)."""
    y = x @ w  # (T, C_out)
    if b is not None:
        y += b
    return y


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """(T, nh*hs) -> (nh, T, hs): head i is the column block i*hs:(i+1)*hs."""
    t, width = x.shape
    return x.reshape(t, n_heads, width // n_heads).transpose(1, 0, 2)  # (nh, T, hs)


def group_heads(x: np.ndarray, kv_heads: int) -> np.ndarray:
    """(nh, T, d) -> (kv, nh/kv, T, d): the query heads that read the same key/value head, together."""
    n_heads, t, size = x.shape
    return x.reshape(kv_heads, n_heads // kv_heads, t, size)  # (kv, nh/kv, T, d)


def attention_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Dot product of every query with every key: (nh,Tq,hs), (kv,Tk,hs) -> (nh,Tq,Tk).

    Query head h meets key head h // (nh/kv); with kv = nh that is its own.
    """
    k_t = np.ascontiguousarray(k.transpose(0, 2, 1))  # (kv, hs, Tk)
    # k^T copied to a plain array rather than passed as a transposed view: OpenBLAS multiplies
    # a transposed operand on a slower path (row "scores q @ k^T" of bench/bench_kernels.py).
    scores = group_heads(q, k.shape[0]) @ k_t[:, None]  # (kv, nh/kv, Tq, Tk)
    return scores.reshape(q.shape[0], q.shape[1], k.shape[1])  # (nh, Tq, Tk)


def default_scale(head_size: int) -> float:
    """1 / sqrt(hs): keeps the scores' spread near 1 whatever the head size."""
    return 1.0 / math.sqrt(head_size)


def scale_scores(scores: np.ndarray, scale: float) -> np.ndarray:
    """scores * scale, (nh, Tq, Tk); a Python float keeps float32 scores float32."""
    return scores * scale  # (nh, Tq, Tk)


def apply_mask(logits: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Logits with entries where ``mask`` is False set to exactly -inf, (nh, Tq, Tk).

    ``mask`` may be any shape that broadcasts to the logits'; None leaves them as they are.
    """
    if mask is None:
        return logits
    return np.where(mask, logits, -np.inf)  # (nh, Tq, Tk)


def softmax(logits: np.ndarray, axis: int = -1, *, null_key: bool = False) -> np.ndarray:
    """Softmax along ``axis``, safe for any finite logits and for -inf (masked) entries.

    The maximum is subtracted first, so no finite input overflows. Each slice sums to 1,
    except a slice whose entries are all -inf: it comes out as all zeros, with no NaN and
    no RuntimeWarning. Integer logits compute in float64.

    ``null_key=True`` is softmax_1: exp(l_j) / (1 + sum_k exp(l_k)), as if every slice had
    one more entry of logit 0 whose weight is left out; slices then sum to at most 1.
    """
    logits = np.asarray(logits)
    if logits.dtype.kind != "f":
        logits = logits.astype(np.float64)
    peak = logits.max(axis=axis, keepdims=True)  # logits' shape with size 1 along axis
    # The peak must be finite: an all -inf slice would give -inf - (-inf) = NaN. With the null
    # key the slice's true maximum includes its logit 0.
    floor = 0.0 if null_key else np.finfo(logits.dtype).min
    np.maximum(peak, floor, out=peak)
    weights = logits - peak  # logits' shape
    np.exp(weights, out=weights)
    total = weights.sum(axis=axis, keepdims=True)  # logits' shape with size 1 along axis
    if null_key:
        total += np.exp(-peak)  # the null key's exp(0 - peak); total >= 1 now
    else:
        # A slice with a finite entry sums to >= 1 (its maximum contributes exp(0) = 1); only
        # an all -inf slice sums to 0, and it is all 0 already: dividing it by 1 keeps it so.
        np.maximum(total, 1, out=total)
    weights /= total
    return weights


def weighted_sum(weights: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Each query's average of the values under its weights: (nh,Tq,Tk), (kv,Tk,hv) -> (nh,Tq,hv)."""
    heads = group_heads(weights, v.shape[0]) @ v[:, None]  # (kv, nh/kv, Tq, hv)
    return heads.reshape(weights.shape[0], weights.shape[1], v.shape[-1])  # (nh, Tq, hv)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(nh, T, hs) -> (T, nh*hs), the inverse of ``split_heads`` (the concat of the heads)."""
    n_heads, t, size = x.shape
    return x.transpose(1, 0, 2).reshape(t, n_heads * size)  # (T, nh*hs)


def output_projection(concat: np.ndarray, w_o: np.ndarray | None, b_o: np.ndarray | None) -> np.ndarray:
    """W_O mixes the heads: (Tq, nh*hv) -> (Tq, C_out); without W_O the output is a copy of the concat."""
    if w_o is None:
        return concat.copy()  # (Tq, nh*hv)
    return project(concat, w_o, b_o)  # (Tq, C_out)


def scaled_dot_product_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    *,
    bias: np.ndarray | None = None,
    null_key: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """softmax(q k^T * scale + bias, masked) @ v for every head at once.

    Parameters
    ----------
    q : ndarray, shape (nh, Tq, hs)
    k : ndarray, shape (kv, Tk, hs), kv dividing nh (query head h reads key head h // (nh/kv))
    v : ndarray, shape (kv, Tk, hv)
    mask : bool ndarray broadcastable to (nh, Tq, Tk), True = may attend; None = all keys
    scale : float, default 1/sqrt(hs)
    bias : ndarray broadcastable to (nh, Tq, Tk), optional; added to the scaled scores (ALiBi)
    null_key : bool, default False; softmax_1 (an implicit key of logit 0 and value 0)

    Returns
    -------
    scores, logits, weights : ndarray, shape (nh, Tq, Tk)
        Raw q.k, scaled (+ bias) and masked (-inf where masked), softmax over keys (rows sum
        to 1, except rows with every key masked, which are 0; below 1 with ``null_key``).
    heads : ndarray, shape (nh, Tq, hv)
    """
    scale = default_scale(q.shape[-1]) if scale is None else scale
    scores = attention_scores(q, k)  # (nh, Tq, Tk)
    logits = scale_scores(scores, scale)  # (nh, Tq, Tk)
    if bias is not None:
        logits += bias
    logits = apply_mask(logits, mask)  # (nh, Tq, Tk)
    weights = softmax(logits, axis=-1, null_key=null_key)  # (nh, Tq, Tk)
    heads = weighted_sum(weights, v)  # (nh, Tq, hv)
    return scores, logits, weights, heads


def compute_dtype(*arrays: np.ndarray) -> np.dtype:
    """float32 stays float32, float64 stays float64, integers and booleans compute in float64."""
    dtype = np.result_type(*arrays)
    if dtype.kind != "f":
        return np.dtype(np.float64)
    if dtype.itemsize < 4:
        return np.dtype(np.float32)
    return dtype


def split_sub_heads(x: np.ndarray, parts: int) -> np.ndarray:
    """(n, T, hs) -> (n*parts, T, hs/parts): part p of head i becomes sub-head i*parts + p."""
    if parts == 1:
        return x
    n, t, size = x.shape
    return x.reshape(n, t, parts, size // parts).transpose(0, 2, 1, 3).reshape(n * parts, t, size // parts)


def join_sub_heads(x: np.ndarray, parts: int) -> np.ndarray:
    """(n*parts, T, hs/parts) -> (n, T, hs), the inverse of ``split_sub_heads``."""
    if parts == 1:
        return x
    n_parts, t, size = x.shape
    return x.reshape(n_parts // parts, parts, t, size).transpose(0, 2, 1, 3).reshape(n_parts // parts, t, size * parts)


def apply_positions_per_part(pe: str, q, k, q_positions, k_positions, rope_base: float, parts: int,
                             key_positions: np.ndarray | None = None) -> Positioned:
    """A scheme acting on each of a head's ``parts`` (differential: its two halves), q and k joined back after.

    ``key_positions`` are every key's positions when ``k`` holds the new keys only (a decoder's step: the
    bias spans the cache).
    """
    placed = apply_positions(pe, split_sub_heads(q, parts), split_sub_heads(k, parts), q_positions, k_positions,
                             rope_base=rope_base, key_positions=key_positions)  # on (nh*parts, T, hs/parts)
    if parts == 1:
        return placed
    join = lambda x: None if x is None else join_sub_heads(x, parts)  # noqa: E731
    return Positioned(join(placed.q), join(placed.k), placed.bias, join(placed.q_unrotated),
                      join(placed.k_unrotated), placed.q_angles, placed.k_angles)  # (nh,Tq,hs), (kv,Tk,hs)
