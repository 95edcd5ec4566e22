"""Boolean attention masks, True = the query (row) may attend to the key (column).

Every builder returns shape (Tq, Tk); combine them with ``combine_masks`` (logical and).
"""

from __future__ import annotations

import numpy as np


def causal_mask(tq: int, tk: int | None = None) -> np.ndarray:
    """Query i may attend to keys 0..i (top-left aligned when Tq != Tk). Shape (Tq, Tk)."""
    tk = tq if tk is None else tk
    return np.tri(tq, tk, dtype=bool)  # (Tq, Tk), lower triangle incl. diagonal


def padding_mask(tq: int, tk: int, valid_len: int) -> np.ndarray:
    """Every query may attend to the first ``valid_len`` keys only (seed 000's valid_lens). Shape (Tq, Tk)."""
    keys = np.arange(tk) < valid_len  # (Tk,)
    return np.broadcast_to(keys, (tq, tk)).copy()  # (Tq, Tk)


def window_mask(tq: int, tk: int, radius: int, *, causal: bool = False) -> np.ndarray:
    """Query i may attend to keys j with |i - j| <= radius (only j <= i when ``causal``). Shape (Tq, Tk)."""
    offset = np.arange(tq)[:, None] - np.arange(tk)[None, :]  # (Tq, Tk), i - j
    allowed = np.abs(offset) <= radius
    if causal:
        allowed &= offset >= 0
    return allowed


def combine_masks(*masks: np.ndarray | None) -> np.ndarray | None:
    """Logical and of the masks given (None means no restriction); None when all are None."""
    present = [np.asarray(m, dtype=bool) for m in masks if m is not None]
    if not present:
        return None
    return np.logical_and.reduce(np.broadcast_arrays(*present))
