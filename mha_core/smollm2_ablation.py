"""Head ablation on SmolLM2: turn heads off and see what the model would say instead. Pure NumPy.

A head is turned off inside its layer, after attention and before W_O: its hs columns of the
concatenation of head outputs (T, nh*hs) are replaced, so nothing it computed reaches the residual
stream. Two replacements (``ABLATIONS``):

    zero   the columns become 0 (the head adds nothing at all);
    mean   the columns become the head's mean output over a reference text (``head_means``): the head
           still adds its average, only what it read from *this* prompt is gone (mean ablation).

The layers before the first layer that has a head turned off are unchanged, so their output is taken
from the clean run (each ``SmolLayerRun`` keeps its layer's input): only layers ``first..L-1`` run again.
transformers' Llama computes the same thing when a forward pre-hook sets those columns of ``o_proj``'s
input (tests/test_ablation_transformers.py).

Shapes: T tokens, C = 576, nh = 9 query heads, hs = 64, L = 30 layers, V = 49,152 (``mha_core``'s glossary).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mha_core.ablation import ABLATIONS, REFERENCE_TEXT, Head, ablate_concat, checked_heads, kl_divergence
from mha_core.smollm2 import SmolLM2, rms_norm, self_attention
from mha_core.smollm2_runs import SmolRun
from mha_core.steps import output_projection

__all__ = ["ABLATIONS", "REFERENCE_TEXT", "Ablation", "Head", "ablate", "ablate_concat", "ablated_layer",
           "checked_heads", "head_means", "kl_divergence"]


def ablated_layer(model: SmolLM2, x: np.ndarray, index: int, heads_off: Iterable[int],
                  means: np.ndarray | None = None) -> np.ndarray:
    """Layer ``index`` on the stream x (T, C) with ``heads_off`` turned off (``ablate_concat``). -> (T, C)."""
    weights = model.layers[index]
    attention = weights.attention()  # dequantized now
    trace = self_attention(rms_norm(x, weights.attn_norm, model.config.eps), attention, model.config)
    concat = ablate_concat(trace.concat, heads_off, model.config.head_size, means)  # (T, nh*hs)
    return model.after_attention(x, output_projection(concat, attention.w_o, attention.b_o), index)  # (T, C)


def head_means(model: SmolLM2, text: str = REFERENCE_TEXT) -> np.ndarray:
    """Each head's output averaged over every position of ``text`` (the clean model): (L, nh, hs), float32.

    A head's output at a position is its row of weights @ v, the hs numbers it puts in the concatenation.
    """
    x = model.embed(model.encode(text))  # (T, C)
    means = []
    for index in range(model.config.n_layers):
        layer = model.layer(x, index)
        means.append(layer.trace.heads.mean(axis=1))  # (nh, T, hs) -> (nh, hs)
        x = layer.output  # (T, C)
    return np.stack(means)  # (L, nh, hs)


@dataclass(frozen=True)
class Ablation:
    """The clean run beside the run with ``heads`` turned off.

    ``heads`` the (layer, head) pairs off, sorted; ``mode`` a key of ``ABLATIONS``; ``first_layer`` the
    first layer run again (the ones before are the clean run's); ``next_logits (V,)`` the ablated model's
    logits for the token after the prompt, ``clean_logits (V,)`` the clean ones; ``losses (T-1,)`` and
    ``clean_losses (T-1,)`` the cross-entropy (nats) of each next token of the prompt.
    """

    heads: tuple[Head, ...]
    mode: str
    first_layer: int
    next_logits: np.ndarray
    clean_logits: np.ndarray
    losses: np.ndarray
    clean_losses: np.ndarray

    def __post_init__(self) -> None:
        for value in (self.next_logits, self.clean_logits, self.losses, self.clean_losses):
            value.flags.writeable = False

    @property
    def kl(self) -> float:
        """KL(clean ‖ ablated) of the next-token distributions at temperature 1, in nats (0 when nothing changed)."""
        return kl_divergence(self.clean_logits, self.next_logits)

    @property
    def loss(self) -> float:
        """Mean loss over the prompt's next tokens with the heads off (NaN for a one-token prompt)."""
        return float(self.losses.mean()) if self.losses.size else float("nan")

    @property
    def clean_loss(self) -> float:
        return float(self.clean_losses.mean()) if self.clean_losses.size else float("nan")


def ablate(model: SmolLM2, run: SmolRun, heads: Iterable[Head], mode: str = "zero",
           means: np.ndarray | None = None, clean_losses: np.ndarray | None = None) -> Ablation:
    """Run ``run``'s prompt again with ``heads`` turned off, from the first layer that has one.

    ``mode`` "zero" or "mean" (then ``means`` (L, nh, hs) from ``head_means`` is required).
    ``clean_losses`` (T-1,): the clean run's ``model.prompt_losses(run)`` when the caller has them.
    No head off: the clean run's numbers. ValueError for an unknown mode or a head that does not exist.
    """
    if mode not in ABLATIONS:
        raise ValueError(f"ablation mode {mode!r} is not one of {', '.join(ABLATIONS)}")
    if mode == "mean" and means is None:
        raise ValueError("mean ablation needs each head's mean output (head_means)")
    config = model.config
    off = checked_heads(heads, config.n_layers, config.n_heads)
    clean_losses = model.prompt_losses(run) if clean_losses is None else clean_losses  # (T-1,)
    if not off:
        return Ablation(off, mode, config.n_layers, run.next_logits.copy(), run.next_logits.copy(),
                        np.array(clean_losses, copy=True), np.array(clean_losses, copy=True))
    first = off[0][0]
    x = run.layers[first].input  # (T, C): layers 0..first-1 are the clean run's
    for index in range(first, config.n_layers):
        in_layer = [head for layer, head in off if layer == index]
        if in_layer:
            x = ablated_layer(model, x, index, in_layer, None if mode == "zero" else means[index])
        else:
            x = model.layer(x, index, keep_trace=False).output  # (T, C)
    losses, next_logits = model.read_out(model.norm(x), run.token_ids)  # (T-1,), (V,)
    return Ablation(off, mode, first, next_logits, run.next_logits.copy(), losses, np.array(clean_losses, copy=True))
