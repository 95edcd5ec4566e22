"""Multi-head attention: the dispatcher above the kernels, built from the steps of ``mha_core.steps``.

    project -> split heads -> [rotate (RoPE)] -> scores -> scale -> [+ bias (ALiBi)] -> mask
    -> softmax -> weighted sum -> merge heads (concat) -> output projection

Every step returns its result instead of printing it; ``multi_head_attention`` collects all
of them in a frozen ``AttentionTrace`` so that a page can show any intermediate.
"""

from __future__ import annotations

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
from mha_core.kernel_base import before_positions
from mha_core.kernels import attention_kernel, kernel_refusal
from mha_core.mla import finish, latent_attention_inputs
from mha_core.positions import ROPE_BASE, check_inside_attention, position_scheme
from mha_core.steps import (
    AttentionWeights,
    apply_mask,
    apply_positions_per_part,
    attention_scores,
    compute_dtype,
    default_scale,
    group_heads,
    join_sub_heads,
    merge_heads,
    output_projection,
    project,
    scale_scores,
    scaled_dot_product_attention,
    softmax,
    split_heads,
    split_sub_heads,
    weighted_sum,
)

# The primitive steps live in ``mha_core.steps`` (below the kernels and MLA); they are named here too, so that
# ``from mha_core.attention import softmax`` reads as it always did.
__all__ = [
    "AttentionTrace",
    "AttentionWeights",
    "apply_mask",
    "apply_positions_per_part",
    "attention_scores",
    "compute_dtype",
    "default_scale",
    "group_heads",
    "join_sub_heads",
    "merge_heads",
    "multi_head_attention",
    "output_projection",
    "project",
    "scale_scores",
    "scaled_dot_product_attention",
    "softmax",
    "split_heads",
    "split_sub_heads",
    "weighted_sum",
]


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
    ``k``, ``v`` are the materialised ones). When the kernel acts on q and k before positions (QK-norm,
    ``Kernel.before_positions``), ``q_projected (nh,Tq,hs)``, ``k_projected (kv,Tk,hs)`` hold them as projected
    and ``q_unrotated``/``q`` what the kernel made of them; None otherwise (``projected_q`` reads either).
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
    q_projected: np.ndarray | None = None
    k_projected: np.ndarray | None = None

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def projected_q(self) -> np.ndarray:
        """Q split into heads as projected, before any kernel or scheme acted on it: (nh, Tq, hs)."""
        return next(q for q in (self.q_projected, self.q_unrotated, self.q) if q is not None)

    @property
    def projected_k(self) -> np.ndarray:
        """K split into heads as projected: (kv, Tk, hs)."""
        return next(k for k in (self.k_projected, self.k_unrotated, self.k) if k is not None)

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
    chosen = attention_kernel(kernel)
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
    (q_in, k_in), placed, v, latent_inputs = _queries_keys_values(x_q, x_k, x_v, weights, mla, n_heads, kv_heads, pe,
                                                                  q_positions, k_positions, rope_base, chosen, kernel_params)
    given = {"x": x_q} if chosen.reads_input else {}  # a kernel that reads the layer's input (Tq, C) gets it
    out = chosen.attend(placed.q, placed.k, v, mask, scale, placed.bias, null_key, kernel_params, **given)
    concat = merge_heads(out.mixed)  # (Tq, nh*hv)
    return AttentionTrace(
        q=placed.q, k=placed.k, v=v, scores=out.scores, logits=out.logits, weights=out.weights, heads=out.heads,
        concat=concat,
        output=output_projection(concat, weights.w_o, weights.b_o),  # (Tq, C_out)
        fully_masked=fully_masked_rows(mask, n_heads, tq),  # (nh, Tq)
        scale=scale, null_key=bool(null_key), pe=pe, bias=placed.bias,
        q_unrotated=placed.q_unrotated, k_unrotated=placed.k_unrotated, q_angles=placed.q_angles,
        k_angles=placed.k_angles, kernel=kernel, kernel_parts=out.parts, q_projected=q_in, k_projected=k_in,
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
    refusal = kernel_refusal(kernel, _KernelSettings(head_size, pe, null_key, 0 if mla is None else mla.rank))
    if refusal is not None:
        raise ValueError(f"kernel={kernel!r}: {refusal.reason}")
    if mla is not None and position_scheme(pe).turns and not mla.rope_dims:
        raise ValueError(f"{pe} cannot turn MLA's latent keys (W_UK could no longer be folded into the query): "
                         "give the layer decoupled RoPE dimensions (w_kr with 2 or more columns)")
    parts = attention_kernel(kernel).sub_heads
    turned_size = head_size // parts if mla is None else mla.rope_dims  # the features a scheme turns
    check_inside_attention(pe, turned_size, cross, rope_base)


def _queries_keys_values(x_q, x_k, x_v, weights: AttentionWeights, mla, n_heads: int, kv_heads: int, pe: str,
                         q_positions, k_positions, rope_base: float, kernel, kernel_params):
    """Project and split q, k, v, let the kernel act on q and k where it does so before positions (QK-norm), and
    place the positions (q and k turned, or a bias): ((q, k) as projected or (None, None), placed, v, latent inputs)."""
    q = split_heads(project(x_q, weights.w_q, weights.b_q), n_heads)  # (nh, Tq, hs)
    if mla is not None:
        inputs = latent_attention_inputs(q, x_k, mla, pe, q_positions, k_positions, rope_base)
        return (None, None), inputs.placed, inputs.v, inputs  # q (nh,Tq,hs), k (nh,Tk,hs) turned; v (nh,Tk,hv)
    k = split_heads(project(x_k, weights.w_k, weights.b_k), kv_heads)  # (kv, Tk, hs)
    v = split_heads(project(x_v, weights.w_v, weights.b_v), kv_heads)  # (kv, Tk, hv)
    projected = (None, None) if kernel.before_positions is None else (q, k)
    q, k = before_positions(kernel, q, k, kernel_params)  # (nh, Tq, hs), (kv, Tk, hs)
    placed = apply_positions_per_part(pe, q, k, q_positions, k_positions, rope_base, kernel.sub_heads)
    return projected, placed, v, None


def _finish_latent(inputs, mla, scores: np.ndarray):
    """MLA's record of the latent, its keys and the absorbed scores (``mha_core.mla.finish``)."""
    return finish(inputs, mla, scores)


@dataclass(frozen=True)
class _KernelSettings:
    """What a kernel's refusals read, in the engine (a configuration has the same attribute names)."""

    head_size: int
    pe: str
    null_key: bool
    mla_rank: int
