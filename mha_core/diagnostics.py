"""What each head does, in numbers: pure functions of an AttentionTrace's weights.

Every per-head figure is a mean over the query rows that have at least one key to attend to
(fully masked rows are left out; ``fully_masked`` None means none is); a head with no such row
gets NaN. What heads add to the output (contributions, knock-out) is in ``mha_core.contributions``.
"""

from __future__ import annotations

import numpy as np


def _no_row_masked(weights: np.ndarray) -> np.ndarray:
    """(nh, Tq) all False: the ``fully_masked`` of weights without a mask."""
    return np.zeros(weights.shape[:2], dtype=bool)  # (nh, Tq)


def _row_mean(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mean of ``values (nh, Tq)`` over the rows where ``rows (nh, Tq)`` is True; NaN where none. Shape (nh,)."""
    counts = rows.sum(axis=1)  # (nh,)
    totals = np.where(rows, values, 0.0).sum(axis=1)  # (nh,)
    return np.divide(totals, counts, out=np.full(totals.shape, np.nan), where=counts > 0)


def normalized_entropy(weights: np.ndarray, fully_masked: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """Per head: row entropy / log(number of keys the row may attend to), averaged. 0 = one key, 1 = even. Shape (nh,).

    ``allowed (nh, Tq, Tk)`` marks the keys each row may attend to (``np.isfinite(trace.logits)``);
    None means every key. Rows with a single allowed key have no choice to make and are left out.
    Only for rows of a probability distribution: a negative weight (a differential head's) has no
    entropy, so it raises ValueError.
    """
    if (weights < 0).any():
        raise ValueError(f"entropy needs weights of at least 0; the smallest here is {weights.min():.3g} "
                         "(signed rows, e.g. differential attention's A1 - lambda A2, are no distribution)")
    if allowed is None:
        allowed = np.ones(weights.shape, dtype=bool)  # (nh, Tq, Tk)
    n_keys = allowed.sum(axis=-1)  # (nh, Tq)
    safe = np.where(weights > 0, weights, 1.0)  # 0 * log 0 counts as 0
    entropy = -(weights * np.log(safe)).sum(axis=-1)  # (nh, Tq)
    norm = np.log(np.maximum(n_keys, 2))  # (nh, Tq)
    return _row_mean(entropy / norm, (n_keys > 1) & ~fully_masked)


def max_weight(weights: np.ndarray, fully_masked: np.ndarray | None = None) -> np.ndarray:
    """Per head: the mean of each row's largest weight (1 = one-hot rows, 1/Tk = flat rows). Shape (nh,)."""
    if fully_masked is None:
        fully_masked = _no_row_masked(weights)
    return _row_mean(weights.max(axis=-1), ~fully_masked)


def diagonal_mass(weights: np.ndarray, fully_masked: np.ndarray, offset: int = 0) -> np.ndarray:
    """Per head: mean weight of query i on key i - offset (0: itself, 1: the previous token). Shape (nh,).

    Only rows i with a key i - offset (0 <= i - offset < Tk) count.
    """
    nh, tq, tk = weights.shape
    rows = np.arange(tq)
    cols = rows - offset
    has_key = (cols >= 0) & (cols < tk)  # (Tq,)
    picked = np.zeros((nh, tq))
    picked[:, has_key] = weights[:, rows[has_key], cols[has_key]]
    return _row_mean(picked, has_key[None, :] & ~fully_masked)


def key_mass(weights: np.ndarray, fully_masked: np.ndarray | None, key: int) -> np.ndarray:
    """Per head: mean weight the queries put on one key (-1: the last, e.g. [SEP]). Shape (nh,)."""
    if fully_masked is None:
        fully_masked = _no_row_masked(weights)
    return _row_mean(weights[:, :, key], ~fully_masked)


def first_token_mass(weights: np.ndarray, fully_masked: np.ndarray) -> np.ndarray:
    """Per head: mean weight on key 0 (an attention sink). Shape (nh,)."""
    return key_mass(weights, fully_masked, 0)


def same_word_mass(weights: np.ndarray, word_ids) -> np.ndarray:
    """Per head: mean weight a piece of a split word puts on the *other* pieces of its word. Shape (nh,).

    ``word_ids`` gives each key's word (an int) or None for a token of no word ([CLS], [SEP]); the
    weights are (nh, T, T) self-attention. Only queries that belong to a word of two or more
    pieces count; NaN when the sentence has none.
    """
    words = np.array([-1 if w is None else w for w in word_ids])  # (T,), -1 for no word
    same = (words[:, None] == words[None, :]) & (words[:, None] >= 0)  # (T, T)
    np.fill_diagonal(same, False)  # the piece itself does not count
    rows = same.any(axis=1)  # (T,) queries with a sibling piece
    if not rows.any():
        return np.full(weights.shape[0], np.nan)  # (nh,)
    return np.where(same[None], weights, 0.0).sum(axis=-1)[:, rows].mean(axis=1)  # (nh,)


def heads_agree(weights: np.ndarray) -> float:
    """Share of query rows in which every head gives its largest weight to the same key (ties: the first key)."""
    choice = weights.argmax(axis=-1)  # (nh, Tq)
    return float(np.all(choice == choice[0], axis=0).mean())


def row_spread(scores: np.ndarray) -> np.ndarray:
    """Per head: the standard deviation of a row's scores over the keys, averaged over rows. (nh, Tq, Tk) -> (nh,).

    For unmasked scores or logits only (a -inf entry has no spread)."""
    return scores.std(axis=-1).mean(axis=-1)  # (nh,)


def renormalised_rows(weights: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Weights restricted to the keys ``mask`` allows and divided by what is left of each row. (Tq, Tk) -> (Tq, Tk).

    Applied to unmasked softmax weights this gives the masked softmax: the rule behind a causal mask.
    A row with nothing left comes out NaN.
    """
    kept = np.where(mask, weights, 0.0)  # (Tq, Tk)
    return kept / kept.sum(axis=-1, keepdims=True)  # (Tq, Tk)


def head_summary(weights: np.ndarray, fully_masked: np.ndarray, allowed: np.ndarray | None = None,
                 distributions: bool = True) -> dict[str, np.ndarray]:
    """All per-head diagnostics by name, each of shape (nh,); ``allowed`` as in ``normalized_entropy``.

    ``distributions`` False (signed rows that need not sum to 1) leaves 'entropy' out: such a row is
    no probability distribution. The other measures are then means of the signed weights.
    """
    entropy = {"entropy": normalized_entropy(weights, fully_masked, allowed)} if distributions else {}
    return {
        **entropy,
        "max_weight": max_weight(weights, fully_masked),
        "diagonal": diagonal_mass(weights, fully_masked, 0),
        "previous": diagonal_mass(weights, fully_masked, 1),
        "first": first_token_mass(weights, fully_masked),
    }


def head_similarity(weights: np.ndarray) -> np.ndarray:
    """Cosine similarity of every pair of heads' weight matrices, flattened. Shape (nh, nh).

    1 on the diagonal, except for a head whose weights are all zero (every row masked): it has
    similarity 0 to every head, itself included.
    """
    flat = weights.reshape(weights.shape[0], -1)  # (nh, Tq*Tk)
    norms = np.linalg.norm(flat, axis=1)  # (nh,)
    unit = np.divide(flat, norms[:, None], out=np.zeros_like(flat), where=norms[:, None] > 0)
    return unit @ unit.T  # (nh, nh)


def encoder_patterns(
    weights: np.ndarray, fully_masked: np.ndarray, allowed: np.ndarray, word_ids
) -> dict[str, np.ndarray]:
    """The patterns of an encoder's heads on one sentence, each of shape (nh,).

    'previous' and 'next': mass on key i-1 and i+1; 'first' and 'last': mass on key 0 and on the
    last key ([CLS] and [SEP] in BERT); 'same_word': mass on the other pieces of one's word
    (``same_word_mass``); 'entropy': ``normalized_entropy`` over the ``allowed`` keys.
    """
    return {
        "previous": diagonal_mass(weights, fully_masked, 1),
        "next": diagonal_mass(weights, fully_masked, -1),
        "first": key_mass(weights, fully_masked, 0),
        "last": key_mass(weights, fully_masked, -1),
        "same_word": same_word_mass(weights, word_ids),
        "entropy": normalized_entropy(weights, fully_masked, allowed),
    }
