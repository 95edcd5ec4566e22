"""A decoder's read-out through its tied embedding, one block of the vocabulary at a time: the loss on each next
token of a prompt and the logits after its last token, without ever holding the (T, V) logits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

UNEMBED_CHUNK = 8192  # vocabulary rows dequantized at a time for the logits (8192 x 576 float32 = 19 MB)


def read_out(final: np.ndarray, token_ids: np.ndarray, rows_of: Callable[[slice], np.ndarray],
             vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The loss on each next token of the prompt (T - 1,) and the logits after its last token (V,).

    ``final`` (T, C) is the normed last residual; ``rows_of(slice)`` gives those rows of the embedding, transposed
    (C, chunk). Loss i = log Σ_v exp(logit_i,v) − logit_i,token[i+1], in float64. One pass over the vocabulary,
    UNEMBED_CHUNK rows of E at a time, with a running maximum and sum (the online softmax), so the (T, V) logits
    (25 MB at 128 tokens, 50 in float64) never exist at once.
    """
    final, targets = np.asarray(final, dtype=np.float32), np.asarray(token_ids)[1:]  # (T, C), (T-1,)
    n = final.shape[0] - 1
    peak = np.full(n, -np.inf)  # (T-1,) running max of each row's logits
    total = np.zeros(n)  # (T-1,) running Σ exp(logit - peak)
    target_logit = np.empty(n)  # (T-1,)
    next_logits = np.empty(vocab_size, dtype=np.float32)  # (V,)
    for start in range(0, vocab_size, UNEMBED_CHUNK):
        stop = min(start + UNEMBED_CHUNK, vocab_size)
        logits = final @ rows_of(slice(start, stop))  # (T, chunk)
        next_logits[start:stop] = logits[-1]
        rows = logits[:-1].astype(np.float64)  # (T-1, chunk)
        new_peak = np.maximum(peak, rows.max(axis=1, initial=-np.inf))  # (T-1,)
        total = total * np.exp(peak - new_peak) + np.exp(rows - new_peak[:, None]).sum(axis=1)
        peak = new_peak
        inside = (targets >= start) & (targets < stop)  # (T-1,) whose target is in this chunk
        target_logit[inside] = rows[inside, targets[inside] - start]
    return np.log(total) + peak - target_logit, next_logits
