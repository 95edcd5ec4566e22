"""Head ablation, the parts every model shares: turn heads off in the concatenation of head outputs. Pure NumPy.

A head is turned off after its attention and before W_O: its hs columns of the concatenation (T, nh*hs) are
replaced, by 0 ("zero") or by the head's mean output over a reference text ("mean"), so nothing it read from
the input reaches W_O. The models' own re-runs are ``mha_core.smollm2_ablation`` and ``mha_core.minilm_ablation``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from mha_core.marks import N_

ABLATIONS = {
    "zero": N_("Zero: each turned-off head's output is set to 0."),
    "mean": N_("Mean: each turned-off head's output is set to its mean over a reference text."),
}
# What "mean" averages over: ordinary English prose, not the prompt (whose own mean would leak it back in).
REFERENCE_TEXT = (
    "The river runs past the old mill and under a stone bridge before it reaches the town. In spring the water "
    "rises, and children watch the boats go by from the bank. Most people in the town work in shops, schools or on "
    "the farms nearby, and on market days the square is full of stalls selling bread, cheese and fresh fruit."
)

Head = tuple[int, int]  # (layer, head)


def checked_heads(heads: Iterable[Head], n_layers: int, n_heads: int) -> tuple[Head, ...]:
    """The (layer, head) pairs sorted and once each; ValueError naming the first one that does not exist."""
    pairs = sorted({(int(layer), int(head)) for layer, head in heads})
    for layer, head in pairs:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"layer {layer}, head {head} does not exist: layers 0..{n_layers - 1}, "
                             f"heads 0..{n_heads - 1}")
    return tuple(pairs)


def ablate_concat(concat: np.ndarray, heads_off: Iterable[int], head_size: int,
                  means: np.ndarray | None = None) -> np.ndarray:
    """The concatenation of head outputs with each head of ``heads_off`` replaced: a new array.

    concat (T, nh*hs): head h owns columns h*hs .. (h+1)*hs - 1. ``means`` (nh, hs): each head's
    replacement row (mean ablation); None sets the columns to 0. -> (T, nh*hs).
    """
    edited = np.array(concat, copy=True)  # (T, nh*hs)
    for head in heads_off:
        columns = slice(head * head_size, (head + 1) * head_size)
        edited[:, columns] = 0.0 if means is None else means[head]  # (T, hs) <- 0 or (hs,)
    return edited


def kl_divergence(logits_p: np.ndarray, logits_q: np.ndarray) -> float:
    """KL(p ‖ q) = Σ p (log p − log q) in nats for p = softmax(logits_p), q = softmax(logits_q), both (V,).

    Computed from log-softmaxes (logit minus the log of the sum), so a probability that underflows to 0
    still has its finite log and the sum stays finite.
    """
    log_p, log_q = log_softmax(logits_p), log_softmax(logits_q)  # (V,), (V,)
    return float(np.sum(np.exp(log_p) * (log_p - log_q)))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax of a logit vector in float64: (V,) -> (V,)."""
    z = np.asarray(logits, dtype=np.float64)  # (V,)
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


