"""Targeted ablation on SmolLM2: which heads make the model prefer its top token over an alternative? Pure NumPy.

The measure is the logit difference after the prompt's last token, d = logit[top] − logit[alternative]
(d > 0: the model prefers the top token). Each head is ranked by how much turning it off (``mha_core.ablation``:
zero or mean) moves d, exactly: the prompt runs again from the head's layer with that head off. Then heads are
turned off together in that order, each set run again exactly, until d < 0 (the alternative's logit beats the
top token's).

Ranking 270 heads one run each is 270 partial runs of up to 30 layers. ``logit_differences`` runs them side by
side, layer after layer: every ablated stream's attention goes through the engine one stream at a time, and the
feed-forward part of a layer (row-wise, the costly part) runs once on all streams stacked, ``ROWS_PER_PASS``
rows at a time so memory stays bounded.

Shapes: T tokens, C = 576, nh = 9, hs = 64, L = 30 (``mha_core``'s glossary); n the number of head sets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mha_core.ablation import ABLATIONS, Head, ablate_concat, checked_heads
from mha_core.smollm2 import SmolLM2, rms_norm, self_attention
from mha_core.smollm2_runs import SmolRun
from mha_core.steps import output_projection

ROWS_PER_PASS = 2048  # rows of stacked streams per feed-forward pass: ~40 MB of (rows, d_ff) float32 arrays
MAX_GREEDY = 40  # at most this many heads turned off together before giving up


def token_rows(model: SmolLM2, top: int, alternative: int) -> np.ndarray:
    """The unembedding columns of the two tokens, (C, 2): logits of a normed row x are x @ these."""
    return model.embedding.transposed(np.array([top, alternative]))  # (C, 2)


def difference(model: SmolLM2, last: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """d = logit[top] − logit[alternative] from each stream's last-layer output at its last token: (n, C) -> (n,)."""
    logits = model.norm(last) @ rows  # (n, 2)
    return (logits[:, 0] - logits[:, 1]).astype(np.float64)  # (n,)


def attention_output(model: SmolLM2, x: np.ndarray, index: int, attention, heads_off: Sequence[int],
                     means: np.ndarray | None) -> np.ndarray:
    """Layer ``index``'s attention output (T, C) on the stream x (T, C), with ``heads_off`` replaced before W_O."""
    weights = model.layers[index]
    trace = self_attention(rms_norm(x, weights.attn_norm, model.config.eps), attention, model.config)
    if not heads_off:
        return trace.output  # (T, C)
    concat = ablate_concat(trace.concat, heads_off, model.config.head_size, means)  # (T, nh*hs)
    return output_projection(concat, attention.w_o, attention.b_o)  # (T, C)


def logit_differences(model: SmolLM2, run: SmolRun, head_sets: Sequence[Sequence[Head]], top: int,
                      alternative: int, mode: str = "zero", means: np.ndarray | None = None,
                      progress: Callable[[float], None] | None = None) -> np.ndarray:
    """d = logit[top] − logit[alternative] after the prompt with each set of ``head_sets`` off, exactly: (n,).

    Each set runs again from its first layer (the layers before are ``run``'s). ``progress`` is called with the
    share of the work done (0..1) after each layer. An empty set gives the clean run's d.
    """
    if mode not in ABLATIONS:
        raise ValueError(f"ablation mode {mode!r} is not one of {', '.join(ABLATIONS)}")
    if mode == "mean" and means is None:
        raise ValueError("mean ablation needs each head's mean output (head_means)")
    config, t = model.config, run.n_tokens
    sets = [checked_heads(heads, config.n_layers, config.n_heads) for heads in head_sets]
    starts = [heads[0][0] if heads else config.n_layers for heads in sets]
    streams: dict[int, np.ndarray] = {}  # set number -> its residual stream (T, C) before the current layer
    total = max(sum(config.n_layers - s for s in starts), 1)
    done = 0
    for index in range(config.n_layers):
        streams.update({n: run.layers[index].input for n, start in enumerate(starts) if start == index})
        if not streams:
            continue
        attention = model.layers[index].attention()  # dequantized once for every stream
        order = sorted(streams)
        x = np.concatenate([streams[n] for n in order])  # (n*T, C)
        attended = np.concatenate([attention_output(
            model, streams[n], index, attention, [h for layer, h in sets[n] if layer == index],
            None if mode == "zero" else means[index]) for n in order])  # (n*T, C)
        out = np.concatenate([model.after_attention(x[i:i + ROWS_PER_PASS], attended[i:i + ROWS_PER_PASS], index)
                              for i in range(0, x.shape[0], ROWS_PER_PASS)])  # (n*T, C)
        streams = {n: out[k * t:(k + 1) * t] for k, n in enumerate(order)}
        done += len(order)
        if progress is not None:
            progress(done / total)
    rows = token_rows(model, top, alternative)  # (C, 2)
    clean = difference(model, run.layers[-1].output[-1:], rows)[0]
    result = np.full(len(sets), clean)  # (n,)
    if streams:
        order = sorted(streams)
        result[order] = difference(model, np.stack([streams[n][-1] for n in order]), rows)
    return result


@dataclass(frozen=True)
class Targeted:
    """Which heads move d = logit[top] − logit[alternative], and which set of them makes the alternative win.

    ``clean`` d with every head; ``heads`` all (layer, head) pairs in layer order and ``differences (L*nh,)`` d with
    each one off alone; ``ranking`` the pairs ordered by ``clean − d`` (how far turning the head off pulls d
    towards the alternative), largest first; ``greedy`` the first k heads of that ranking turned off together for
    k = 1, 2, ... and ``greedy_differences`` d for each; ``wins`` whether the last set gives d < 0.
    """

    top: int
    alternative: int
    mode: str
    clean: float
    heads: tuple[Head, ...]
    differences: np.ndarray
    ranking: tuple[Head, ...]
    greedy_differences: tuple[float, ...]

    def __post_init__(self) -> None:
        self.differences.flags.writeable = False

    @property
    def moves(self) -> np.ndarray:
        """clean − d for each head of ``heads``, (L*nh,): > 0 when turning it off helps the alternative."""
        return self.clean - self.differences

    @property
    def greedy(self) -> tuple[Head, ...]:
        """The heads turned off together at the end of the greedy search, in the order they were added."""
        return self.ranking[:len(self.greedy_differences)]

    @property
    def wins(self) -> bool:
        return bool(self.greedy_differences) and self.greedy_differences[-1] < 0


def rank_heads(model: SmolLM2, run: SmolRun, top: int, alternative: int, mode: str = "zero",
               means: np.ndarray | None = None, progress: Callable[[float], None] | None = None) -> Targeted:
    """Every head's exact effect on d, then the greedy search (``greedy_search``)."""
    config = model.config
    heads = tuple((layer, head) for layer in range(config.n_layers) for head in range(config.n_heads))
    sets = [((layer, head),) for layer, head in heads] + [()]
    values = logit_differences(model, run, sets, top, alternative, mode, means, progress)  # (L*nh + 1,)
    clean, differences = float(values[-1]), values[:-1]
    order = np.argsort(-(clean - differences), kind="stable")  # (L*nh,)
    ranking = tuple(heads[i] for i in order)
    greedy = greedy_search(model, run, ranking, top, alternative, mode, means)
    return Targeted(top, alternative, mode, clean, heads, differences, ranking, greedy)


def greedy_search(model: SmolLM2, run: SmolRun, ranking: Sequence[Head], top: int, alternative: int,
                  mode: str = "zero", means: np.ndarray | None = None) -> tuple[float, ...]:
    """d with the first k heads of ``ranking`` off together, k = 1, 2, ..., each run exactly, until d < 0 or
    ``MAX_GREEDY`` heads are off."""
    found: list[float] = []
    for k in range(1, min(MAX_GREEDY, len(ranking)) + 1):
        found.append(float(logit_differences(model, run, [ranking[:k]], top, alternative, mode, means)[0]))
        if found[-1] < 0:
            break
    return tuple(found)
