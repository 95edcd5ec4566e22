"""QK-norm after the fact (issue 36): SmolLM2 was trained without it; normalise each head's q and k anyway and read
what happens to the logits and the loss. Pure NumPy.

In the chosen layers each head's q and k go through an RMSNorm over their hs features before RoPE, as Qwen3's
``q_norm``/``k_norm`` do (``mha_core.qk_norm``, the engine's "qknorm" kernel, eps ``QK_NORM_EPS``):

    q̂ = g · q / sqrt(mean(q²) + eps),   k̂ = k / sqrt(mean(k²) + eps),   logit = scale · q̂ · k̂

Two gains (``GAINS``):

- **"one"**: g = 1, the RMSNorm alone. Then |logit| ≤ scale · hs = √hs = 8 on SmolLM2 (hs = 64), whatever the
  weights: a trained layer whose logits spread over tens of nats can no longer be as sharp.
- **"matched"**: one gain g_l per layer, fitted so that the root-mean-square of layer l's normalised logits over the
  visible (query, key) pairs of the clean run equals that of its trained logits over the same pairs. The logits
  are linear in g, so g_l = RMS(trained) / RMS(normalised with g = 1), a closed form. It gives back each layer's
  overall logit scale, not the direction of q or k nor the ratio between heads or between queries of different
  length: what a gain learned in training with the norm in place would have had to find.

The gain stands on q alone (g_q = g, g_k = 1): the logits depend only on g_q · g_k. Layers before the first chosen
one are the clean run's; the layers after run on the changed stream. Shapes: T tokens, C = 576, nh = 9, kv = 3,
hs = 64, L = 30 layers (``mha_core``'s glossary).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mha_core.attention import AttentionTrace, multi_head_attention
from mha_core.masks import causal_mask
from mha_core.qk_norm import QK_NORM_EPS, QKNormParams
from mha_core.smollm2 import SmolLM2, rms_norm, self_attention
from mha_core.smollm2_runs import SmolRun
from mha_core.smollm2_whatif import Progress, checked_layers

GAINS = ("one", "matched")  # g = 1; g_l fitted per layer to the trained logits' RMS


def qk_normed_attention(x: np.ndarray, model: SmolLM2, index: int, gain: float) -> AttentionTrace:
    """Layer ``index``'s attention on the RMS-normed stream x (T, C) with q and k RMS-normalised per head before RoPE,
    q's gain ``gain``, k's 1 (the engine's "qknorm" kernel)."""
    config, attention = model.config, model.layers[index].attention()
    params = QKNormParams(np.full(config.head_size, gain), np.ones(config.head_size), QK_NORM_EPS)  # (hs,) x2
    return multi_head_attention(x, attention, config.n_heads, kv_heads=config.kv_heads,
                                mask=causal_mask(x.shape[0]), pe="rope", rope_base=config.rope_base,
                                kernel="qknorm", kernel_params=params)


def layer_attention(model: SmolLM2, x: np.ndarray, index: int, gain: float | None) -> AttentionTrace:
    """Layer ``index``'s attention on its input stream x (T, C): trained (``gain`` None) or QK-normed."""
    normed = rms_norm(x, model.layers[index].attn_norm, model.config.eps)  # (T, C)
    if gain is None:
        return self_attention(normed, model.layers[index].attention(), model.config)
    return qk_normed_attention(normed, model, index, gain)


def visible(logits: np.ndarray) -> np.ndarray:
    """The logits of the visible (query, key) pairs, every head: (nh, T, T) -> (nh·T(T+1)/2,), float64."""
    return np.asarray(logits, dtype=np.float64)[:, np.tri(logits.shape[-1], dtype=bool)]  # (n,)


def rms(values: np.ndarray) -> float:
    """sqrt(mean(values²)) of a 1-D array."""
    return float(np.sqrt(np.mean(values * values)))


def matched_gain(trained_logits: np.ndarray, unit_logits: np.ndarray) -> float:
    """g with RMS(g · unit) = RMS(trained) over the visible pairs: RMS(trained) / RMS(unit). (nh,T,T) x2 -> float."""
    return rms(visible(trained_logits)) / rms(visible(unit_logits))


def matched_gains(model: SmolLM2, run: SmolRun) -> np.ndarray:
    """g_l of every layer (L,), each fitted on its input in the clean run (``matched_gain``)."""
    gains = np.empty(model.config.n_layers)  # (L,)
    for index, layer in enumerate(run.layers):
        trained = layer_attention(model, layer.input, index, None).logits  # (nh, T, T)
        gains[index] = matched_gain(trained, layer_attention(model, layer.input, index, 1.0).logits)
    return gains


@dataclass(frozen=True)
class QKNormRun:
    """One run with QK-norm in ``layers``: each layer's visible logits' min and max in the clean run (``before``,
    (L, 2)) and in this run (``after``, (L, 2)), the gain each changed layer used (``gains``, (L,), NaN where the
    layer is as trained), and the loss on each next token (``losses``, (T-1,)); ``dense`` the clean mean loss."""

    layers: tuple[int, ...]
    gain: str
    gains: np.ndarray
    before: np.ndarray
    after: np.ndarray
    losses: np.ndarray
    dense: float

    def __post_init__(self) -> None:
        for array in (self.gains, self.before, self.after, self.losses):
            array.flags.writeable = False

    @property
    def loss(self) -> float:
        """The mean loss on the text (nats)."""
        return float(self.losses.mean()) if self.losses.size else float("nan")


def _span(logits: np.ndarray) -> tuple[float, float]:
    values = visible(logits)  # (n,)
    return float(values.min()), float(values.max())


def qk_norm_run(model: SmolLM2, run: SmolRun, layers: Iterable[int], gain: str = "one",
                progress: Progress | None = None) -> QKNormRun:
    """The run of ``run``'s tokens with QK-norm (``gain`` one of ``GAINS``) in ``layers``; ``progress(done, L)``."""
    if gain not in GAINS:
        raise ValueError(f"gain {gain!r} is not one of {', '.join(GAINS)}")
    chosen, n_layers = checked_layers(layers, model.config.n_layers), model.config.n_layers
    fitted = matched_gains(model, run) if gain == "matched" else np.ones(n_layers)  # (L,)
    gains = np.where(np.isin(np.arange(n_layers), chosen), fitted, np.nan)  # (L,)
    before, after = np.empty((n_layers, 2)), np.empty((n_layers, 2))  # (L, 2) x2
    x = run.layers[0].input  # (T, C)
    for index in range(n_layers):
        clean = layer_attention(model, run.layers[index].input, index, None)
        before[index] = _span(clean.logits)
        if not chosen or index < chosen[0]:  # the clean run's layer, as it is
            after[index], x = before[index], run.layers[index].output  # (T, C)
        else:
            trace = layer_attention(model, x, index, None if np.isnan(gains[index]) else float(gains[index]))
            after[index] = _span(trace.logits)
            x = model.after_attention(x, trace.output, index)  # (T, C)
        if progress is not None:
            progress(index + 1, n_layers)
    losses = model.read_out(model.norm(x), run.token_ids)[0]  # (T-1,)
    dense = model.prompt_losses(run)
    return QKNormRun(chosen, gain, gains, before, after, losses, float(dense.mean()) if dense.size else float("nan"))
