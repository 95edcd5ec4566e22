"""Taking the output apart: what each head adds, what is left when heads are knocked out, what a key carries.

The output projection is linear, so the output is a sum over heads:

    output = concat W_O + b_O = sum_h head_h W_O[rows of h] + b_O

where head h owns rows h*hv:(h+1)*hv of W_O (the rows that read its block of the concatenation).
Each term ``head_h W_O[rows of h]`` is head h's *contribution*, a (Tq, C_out) matrix. Knocking a
head out (head ablation) drops its term. Without W_O (``w_o`` None) the output is the
concatenation itself: head h's contribution is its head output in its own columns, zeros elsewhere.

Pure functions of arrays; shapes as in the package glossary (nh, Tq, Tk, hv, C_out).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


def output_rows_per_head(w_o: np.ndarray | None, n_heads: int, hv: int) -> np.ndarray:
    """W_O cut into each head's rows: (nh*hv, C_out) -> (nh, hv, C_out); no W_O acts as the identity."""
    if w_o is None:
        w_o = np.eye(n_heads * hv)  # (nh*hv, nh*hv): output = concat
    return w_o.reshape(n_heads, hv, w_o.shape[1])  # (nh, hv, C_out)


def head_contributions(heads: np.ndarray, w_o: np.ndarray | None) -> np.ndarray:
    """What each head adds to the output: heads[h] @ W_O[rows of h]. (nh, Tq, hv) -> (nh, Tq, C_out).

    Parameters
    ----------
    heads : ndarray, shape (nh, Tq, hv)
        The heads' outputs (``AttentionTrace.heads``).
    w_o : ndarray, shape (nh*hv, C_out), or None for no output projection

    Returns
    -------
    ndarray, shape (nh, Tq, C_out)
        Summed over heads and plus b_O, the layer's output (``sum_of_contributions``).
    """
    n_heads, _, hv = heads.shape
    return heads @ output_rows_per_head(w_o, n_heads, hv)  # (nh, Tq, C_out)


def sum_of_contributions(contributions: np.ndarray, b_o: np.ndarray | None) -> np.ndarray:
    """The output rebuilt from the heads' contributions: sum over heads, plus b_O. (nh, Tq, C_out) -> (Tq, C_out)."""
    total = contributions.sum(axis=0)  # (Tq, C_out)
    return total if b_o is None else total + b_o


def contribution_identity(
    heads: np.ndarray, w_o: np.ndarray | None, b_o: np.ndarray | None, output: np.ndarray
) -> tuple[np.ndarray, float]:
    """The contributions and max |output - (sum_h contribution_h + b_O)|: rounding error only (about 1e-16)."""
    contributions = head_contributions(heads, w_o)  # (nh, Tq, C_out)
    gap = np.abs(output - sum_of_contributions(contributions, b_o))  # (Tq, C_out)
    return contributions, float(gap.max(initial=0.0))


@dataclass(frozen=True)
class KnockOut:
    """The output with some heads knocked out, and how far each token's output moved."""

    heads_off: tuple[int, ...]  # the heads whose contributions were zeroed, sorted
    output: np.ndarray  # (Tq, C_out) sum of the remaining contributions + b_O
    change: np.ndarray  # (Tq, C_out) knocked-out output minus the full output
    change_norm: np.ndarray  # (Tq,) Euclidean norm of each token's change


def knock_out(
    heads: np.ndarray, w_o: np.ndarray | None, b_o: np.ndarray | None, heads_off: Iterable[int]
) -> KnockOut:
    """Zero the contributions of ``heads_off`` (head ablation) and return the new output and its change.

    The change is minus the removed contributions; b_O stays. Knocking out no head changes nothing;
    knocking out every head leaves b_O (or zeros) in every row. Raises ValueError for a head that
    does not exist.
    """
    n_heads = heads.shape[0]
    off = tuple(sorted(set(int(h) for h in heads_off)))
    for h in off:
        if not 0 <= h < n_heads:
            raise ValueError(f"head {h} does not exist: choose heads 0 to {n_heads - 1}")
    contributions = head_contributions(heads, w_o)  # (nh, Tq, C_out)
    keep = np.ones(n_heads, dtype=bool)  # (nh,)
    keep[list(off)] = False
    output = sum_of_contributions(contributions[keep], b_o)  # (Tq, C_out)
    change = -contributions[list(off)].sum(axis=0)  # (Tq, C_out)
    return KnockOut(off, output, change, np.linalg.norm(change, axis=-1))  # change_norm (Tq,)


# ---- what a key carries: weight x norm (Kobayashi et al. 2020) -------------------------------


def value_norm_weights(weights: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Attention weight times the size of what the key passes on: weights[h, i, j] * ||v[h, j]||.

    (nh, Tq, Tk), (nh, Tk, hv) -> (nh, Tq, Tk). A key can take much weight and add little when its
    value vector is short (Kobayashi et al. 2020, "Attention is Not Only a Weight", EMNLP).
    This variant measures v_j before W_O; ``output_norm_weights`` measures it after.
    """
    norms = np.linalg.norm(v, axis=-1)  # (nh, Tk)
    return weights * norms[:, None, :]  # (nh, Tq, Tk)


def output_norm_weights(weights: np.ndarray, v: np.ndarray, w_o: np.ndarray | None,
                        row_scale: np.ndarray | None = None) -> np.ndarray:
    """The size of what key j adds to row i of head h's contribution: ||c[h,i] weights[h,i,j] v[h,j] W_O(h)||.

    W_O(h) are head h's rows of W_O. ``row_scale`` c (nh, Tq) is the number a kernel multiplies row i of
    A·V by before the concatenation (a differential head's RMSNorm and gain; None: 1), so row i of head
    h's contribution is sum_j c[h,i] weights[h,i,j] v[h,j] W_O(h) exactly, and each term is key j's
    share. This is Kobayashi et al.'s ||alpha f(x)|| (their f includes the output projection): how
    much key j adds before the terms partly cancel; |weight| for a kernel whose weights can be
    negative. Without W_O and c it is ``value_norm_weights`` (for weights >= 0).
    (nh, Tq, Tk), (nh, Tk, hv), (nh*hv, C_out), (nh, Tq) -> (nh, Tq, Tk).
    """
    n_heads, _, hv = v.shape
    transformed = v @ output_rows_per_head(w_o, n_heads, hv)  # (nh, Tk, C_out)
    norms = np.linalg.norm(transformed, axis=-1)  # (nh, Tk)
    scaled = weights if row_scale is None else weights * row_scale[..., None]  # (nh, Tq, Tk)
    return np.abs(scaled) * norms[:, None, :]  # (nh, Tq, Tk)


def head_output_shares(contributions: np.ndarray) -> np.ndarray:
    """Share of each output column that comes from each head, (nh, Tq, C_out) -> (nh, C_out); columns sum to 1.

    A head's share of a column is the norm over tokens of its contribution to that column, divided
    by the sum of those norms over heads (0 for a column no head writes to).
    """
    size = np.linalg.norm(contributions, axis=1)  # (nh, C_out)
    total = size.sum(axis=0, keepdims=True)  # (1, C_out)
    return np.divide(size, total, out=np.zeros_like(size), where=total > 0)  # (nh, C_out)


def head_share_of_output(contributions: np.ndarray) -> np.ndarray:
    """Each head's share of the whole output: the norm of its contribution over all tokens and columns,
    divided by the sum over heads. (nh, Tq, C_out) -> (nh,); sums to 1 (zeros if every contribution is 0)."""
    size = np.linalg.norm(contributions.reshape(contributions.shape[0], -1), axis=1)  # (nh,)
    total = size.sum()
    return size / total if total > 0 else np.zeros_like(size)
