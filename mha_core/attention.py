"""Multi-head attention, one function per step of the maths.

    project -> split heads -> [rotate (RoPE)] -> scores -> scale -> [+ bias (ALiBi)] -> mask
    -> softmax -> weighted sum -> merge heads (concat) -> output projection

Every step returns its result instead of printing it; ``multi_head_attention`` collects all
of them in a frozen ``AttentionTrace`` so that a page can show any intermediate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mha_core.attention_checks import (
    check_latent_shapes,
    check_shapes,
    checked_mask,
    checked_positions,
    fully_masked_rows,
    is_cross_attention,
)
from mha_core.grouping import kv_head_of
from mha_core.positions import ROPE_BASE, apply_positions, check_inside_attention, position_scheme


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


@dataclass(frozen=True)
class AttentionTrace:
    """Every intermediate of one multi-head attention call; arrays are read-only.

    Fields: ``q (nh,Tq,hs)``, ``k (kv,Tk,hs)``, ``v (kv,Tk,hv)`` (kv = nh unless key/value heads
    are shared; query head h reads key/value head h // (nh/kv)), ``scores (nh,Tq,Tk)`` = raw q.k,
    ``logits (nh,Tq,Tk)`` = scores * scale (+ bias) with masked entries exactly -inf,
    ``weights (nh,Tq,Tk)`` = softmax of logits over keys, ``heads (nh,Tq,hv)`` = weights @ v,
    ``concat (Tq, nh*hv)``, ``output (Tq, C_out)``, ``fully_masked (nh,Tq)`` = rows with no key
    to attend to (their weights and head outputs are 0), ``scale`` = the factor applied to scores.

    With RoPE, ``q`` and ``k`` are the rotated ones (the scores are their products);
    ``q_unrotated``, ``k_unrotated`` hold them before the turn and ``q_angles (Tq,hs/2)``,
    ``k_angles (Tk,hs/2)`` the angle of every pair (always float64, see ``rope_angles``).
    With ALiBi, ``bias (nh,Tq,Tk)`` is what was added to the scaled scores. With ``null_key``,
    each row may also put weight 1 - sum(row) on an implicit key of logit 0 and value 0. The
    new fields are None (False) otherwise.

    ``kernel`` names the record of ``mha_core.kernels.KERNELS`` that made the weights: for softmax
    everything above holds as written. For another kernel ``weights`` is the (nh,Tq,Tk) matrix the
    kernel implies (differential: A1 - lambda A2, signed; linear: phi(q).phi(k) over its row sum),
    ``heads`` = weights @ v still, ``concat`` is what the kernel concatenates (differential: the
    normalised heads), ``scores``/``logits`` stay the whole head's q.k and its scaled, masked logits,
    and ``kernel_parts`` holds the kernel's own record (``DifferentialParts``, ``LinearParts``).
    ``mla`` is an ``mha_core.mla.MLAParts`` when keys and values come from a latent (then kv = nh and
    ``k``, ``v`` are the materialised ones).
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
    pe: str = "none"
    q_unrotated: np.ndarray | None = None
    k_unrotated: np.ndarray | None = None
    q_angles: np.ndarray | None = None
    k_angles: np.ndarray | None = None
    bias: np.ndarray | None = None
    null_key: bool = False
    kernel: str = "softmax"
    kernel_parts: object | None = None
    mla: object | None = None

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def n_heads(self) -> int:
        return self.q.shape[0]

    @property
    def kv_heads(self) -> int:
        """Number of key/value heads: nh (MHA), 1 (MQA) or a divisor in between (GQA)."""
        return self.k.shape[0]

    def kv_head_of(self, head: int) -> int:
        """The key/value head that query head ``head`` reads (``grouping.kv_head_of``)."""
        return kv_head_of(head, self.n_heads, self.kv_heads)

    def values_per_query_head(self) -> np.ndarray:
        """V as each query head reads it: (kv, Tk, hv) -> (nh, Tk, hv); with shared K/V heads a group reads one."""
        return self.v[[self.kv_head_of(h) for h in range(self.n_heads)]]  # (nh, Tk, hv)


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


def multi_head_attention(
    x_q: np.ndarray,
    weights: AttentionWeights,
    n_heads: int,
    *,
    x_k: np.ndarray | None = None,
    x_v: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    kv_heads: int | None = None,
    pe: str = "none",
    rope_base: float = ROPE_BASE,
    q_positions: np.ndarray | None = None,
    k_positions: np.ndarray | None = None,
    null_key: bool = False,
    kernel: str = "softmax",
    kernel_params: object | None = None,
    mla: object | None = None,
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
    kv_heads : int, default nh
        Key/value heads, dividing nh: nh is multi-head, 1 multi-query, between grouped-query
        attention. ``w_k``/``w_v`` then have kv*hs / kv*hv columns; query head h reads
        key/value head h // (nh/kv).
    pe : str, default "none"
        A positional scheme of ``mha_core.positions.SCHEMES`` that acts inside attention (RoPE
        turns q and k by their positions before the scores; ALiBi adds -m_h |i - j| to the
        logits, self-attention only), or "none". One that adds to the tokens (sinusoidal) is
        added to x before this call.
    rope_base : float, default 10000, RoPE's theta
    q_positions : ndarray, shape (Tq,), default 0..Tq-1
    k_positions : ndarray, shape (Tk,), default 0..Tk-1
        Where the tokens stand, for RoPE and ALiBi (a decoder's cache gives later positions).
    null_key : bool, default False
        softmax_1: each row may put weight on an implicit key of logit 0 and value 0.
    kernel : str, default "softmax"
        A record of ``mha_core.kernels.KERNELS``: softmax, differential or linear. Positions act on
        each of its sub-heads (differential: the two halves of a head) and the default scale is the
        sub-head's 1/sqrt(hs/parts).
    kernel_params : the kernel's learned scalars (``DifferentialParams``), default its plain ones
    mla : ``mha_core.mla.MLAWeights``, optional
        Keys and values from a shared latent (multi-head latent attention); ``weights.w_k``,
        ``w_v``, ``b_k``, ``b_v`` are then None, and kv_heads = nh.

    Returns
    -------
    AttentionTrace
        A query row whose keys are all masked gets weights 0 and head output 0 and is flagged
        in ``fully_masked``; no NaN, no warning. Rows otherwise sum to 1 (at most 1 with
        ``null_key``).

    dtype: float32 in, float32 throughout and out; float64 in, float64 out; integer inputs
    compute in float64.
    """
    from mha_core import kernels  # they build on this module's steps

    chosen = kernels.attention_kernel(kernel)
    cross_given = x_k is not None
    x_k = x_q if x_k is None else x_k
    kv_heads = n_heads if kv_heads is None else kv_heads
    x_q, x_k, x_v, weights, mla = _cast_and_check(x_q, x_k, x_k if x_v is None else x_v, weights, mla, n_heads, kv_heads)
    tq, tk = x_q.shape[0], x_k.shape[0]
    mask = checked_mask(mask, n_heads, tq, tk)  # broadcasts to (nh, Tq, Tk)
    head_size = weights.w_q.shape[1] // n_heads
    explicit_positions = q_positions is not None and k_positions is not None
    cross = (cross_given and not explicit_positions and position_scheme(pe).self_attention_only
             and is_cross_attention(x_q, x_k))  # compared only where a scheme cares: it reads every number
    _check_options(kernel, head_size, pe, null_key, mla, cross, rope_base)
    scale = default_scale(head_size // chosen.sub_heads) if scale is None else float(scale)  # computed once, reported
    q_positions = checked_positions(q_positions, tq, "q_positions")  # (Tq,)
    k_positions = checked_positions(k_positions, tk, "k_positions")  # (Tk,)
    placed, v, latent_inputs = _queries_keys_values(x_q, x_k, x_v, weights, mla, n_heads, kv_heads, pe,
                                                    q_positions, k_positions, rope_base, chosen.sub_heads)
    out = chosen.attend(placed.q, placed.k, v, mask, scale, placed.bias, null_key, kernel_params)
    concat = merge_heads(out.mixed)  # (Tq, nh*hv)
    return AttentionTrace(
        q=placed.q, k=placed.k, v=v, scores=out.scores, logits=out.logits, weights=out.weights, heads=out.heads,
        concat=concat,
        output=output_projection(concat, weights.w_o, weights.b_o),  # (Tq, C_out)
        fully_masked=fully_masked_rows(mask, n_heads, tq),  # (nh, Tq)
        scale=scale, null_key=bool(null_key), pe=pe, bias=placed.bias,
        q_unrotated=placed.q_unrotated, k_unrotated=placed.k_unrotated, q_angles=placed.q_angles,
        k_angles=placed.k_angles, kernel=kernel, kernel_parts=out.parts,
        mla=None if mla is None else _finish_latent(latent_inputs, mla, out.scores),
    )


def _cast_and_check(x_q, x_k, x_v, weights: AttentionWeights, mla, n_heads: int, kv_heads: int):
    """The inputs and weights in one compute dtype (``compute_dtype``), their shapes checked."""
    dtype = compute_dtype(x_q, x_k, x_v, *weights.arrays(), *(() if mla is None else (mla.w_dkv,)))
    x_q, x_k, x_v = (np.asarray(x, dtype=dtype) for x in (x_q, x_k, x_v))
    weights = weights.astype(dtype)
    if mla is None:
        check_shapes(x_q, x_k, x_v, weights, n_heads, kv_heads)
    else:
        mla = mla.astype(dtype)
        check_latent_shapes(x_q, x_k, weights, mla, n_heads, kv_heads)
    return x_q, x_k, x_v, weights, mla


def _check_options(kernel: str, head_size: int, pe: str, null_key: bool, mla, cross: bool, rope_base: float) -> None:
    """ValueError when the kernel refuses the options, or the positional scheme cannot act on these heads."""
    from mha_core import kernels

    refusal = kernels.kernel_refusal(kernel, _KernelSettings(head_size, pe, null_key, 0 if mla is None else mla.rank))
    if refusal is not None:
        raise ValueError(f"kernel={kernel!r}: {refusal.reason}")
    if mla is not None and position_scheme(pe).turns and not mla.rope_dims:
        raise ValueError(f"{pe} cannot turn MLA's latent keys (W_UK could no longer be folded into the query): "
                         "give the layer decoupled RoPE dimensions (w_kr with 2 or more columns)")
    parts = kernels.attention_kernel(kernel).sub_heads
    turned_size = head_size // parts if mla is None else mla.rope_dims  # the features a scheme turns
    check_inside_attention(pe, turned_size, cross, rope_base)


def _queries_keys_values(x_q, x_k, x_v, weights: AttentionWeights, mla, n_heads: int, kv_heads: int, pe: str,
                         q_positions, k_positions, rope_base: float, parts: int):
    """Project and split q, k, v and place the positions (q and k turned, or a bias): (placed, v, latent inputs)."""
    q = split_heads(project(x_q, weights.w_q, weights.b_q), n_heads)  # (nh, Tq, hs)
    if mla is not None:
        from mha_core import mla as latent

        inputs = latent.latent_attention_inputs(q, x_k, mla, pe, q_positions, k_positions, rope_base)
        return inputs.placed, inputs.v, inputs  # q (nh,Tq,hs), k (nh,Tk,hs) turned; v (nh,Tk,hv)
    k = split_heads(project(x_k, weights.w_k, weights.b_k), kv_heads)  # (kv, Tk, hs)
    v = split_heads(project(x_v, weights.w_v, weights.b_v), kv_heads)  # (kv, Tk, hv)
    return apply_positions_per_part(pe, q, k, q_positions, k_positions, rope_base, parts), v, None


def _finish_latent(inputs, mla, scores: np.ndarray):
    """MLA's record of the latent, its keys and the absorbed scores (``mha_core.mla.finish``)."""
    from mha_core import mla as latent

    return latent.finish(inputs, mla, scores)


@dataclass(frozen=True)
class _KernelSettings:
    """What a kernel's refusals read, in the engine (a configuration has the same attribute names)."""

    head_size: int
    pe: str
    null_key: bool
    mla_rank: int


def apply_positions_per_part(pe: str, q, k, q_positions, k_positions, rope_base: float, parts: int):
    """A scheme acting on each of a head's ``parts`` (differential: its two halves), q and k joined back after."""
    from mha_core.kernels import join_sub_heads, split_sub_heads
    from mha_core.positions import Positioned

    placed = apply_positions(pe, split_sub_heads(q, parts), split_sub_heads(k, parts), q_positions, k_positions,
                             rope_base=rope_base)  # on (nh*parts, T, hs/parts)
    if parts == 1:
        return placed
    join = lambda x: None if x is None else join_sub_heads(x, parts)  # noqa: E731
    return Positioned(join(placed.q), join(placed.k), placed.bias, join(placed.q_unrotated),
                      join(placed.k_unrotated), placed.q_angles, placed.k_angles)  # (nh,Tq,hs), (kv,Tk,hs)


