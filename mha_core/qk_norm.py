"""QK-norm (OLMo 2, Qwen3, Gemma 3): each head's query and key go through an RMSNorm with learned gains before
positions turn them, then the 2017 softmax head runs on them.

    q̂ = q / sqrt(mean(q²) + eps) ⊙ g_q,   k̂ = k / sqrt(mean(k²) + eps) ⊙ g_k   (per head, over its hs features)

as Qwen3 writes it (``q_norm``/``k_norm`` of size hs, shared by the heads, applied before RoPE); OLMo 2 normalises
the whole projection (nh·hs features) at once instead. The gains are learned; here they are drawn near 1 from
the configuration's seed, on a stream of their own.

Why it matters: RMS(q̂ / g_q) = 1, so ‖q̂‖ ≤ √hs · max|g_q| whatever the weights, and RoPE keeps lengths, so

    |logit| = scale · |q̂ · k̂| ≤ scale · ‖q̂‖ ‖k̂‖ ≤ scale · hs · max|g_q| · max|g_k|   (``logit_bound``)

(+ a positional bias where a scheme adds one). A saturated softmax can no longer come from ‖q‖‖k‖ growing.

The norm acts before positions (``Kernel.before_positions``): where the gains of a rotated pair (f, f + hs/2)
differ, turning first and normalising after gives other numbers. Shapes: nh heads, kv key/value heads, T tokens,
hs head size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.kernel_base import Kernel, KernelOutput, _read_only, no_latent, softmax_kernel
from mha_core.marks import N_, Message

QK_NORM_EPS = 1e-6  # Qwen3's rms_norm_eps
GAIN_STD = 0.1  # the gains' spread around 1 (a trained model's drift from its initialisation at 1)


@dataclass(frozen=True)
class QKNormParams:
    """The learned gains of a QK-norm layer: ``gain_q (hs,)``, ``gain_k (hs,)`` shared by the heads (Qwen3), and
    ``eps``, the RMSNorm's epsilon."""

    gain_q: np.ndarray
    gain_k: np.ndarray
    eps: float = QK_NORM_EPS

    def __post_init__(self) -> None:
        _read_only(self)


def qk_norm_params(head_size: int, seed: int) -> QKNormParams:
    """Gains near 1, 1 + normal(0, 0.1), from their own stream of ``seed`` (the layer's weights stay as they were)."""
    rng = np.random.default_rng([seed, 2025, 9388])
    gain_q, gain_k = 1.0 + rng.normal(0.0, GAIN_STD, size=(2, head_size))  # (hs,) each
    return QKNormParams(gain_q, gain_k)


def plain_qk_norm_params(head_size: int) -> QKNormParams:
    """Gains of 1: the RMSNorm alone."""
    return QKNormParams(np.ones(head_size), np.ones(head_size))


def rms_normalise(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x²) + eps) ⊙ gain over the last axis (one head's hs features): shape kept."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gain.astype(x.dtype)  # x's shape


def normalise_qk(q: np.ndarray, k: np.ndarray, params: QKNormParams | None) -> tuple[np.ndarray, np.ndarray]:
    """The row's ``before_positions`` hook: q (nh,T,hs), k (kv,T,hs) -> q̂, k̂ of the same shapes."""
    params = plain_qk_norm_params(q.shape[-1]) if params is None else params
    return rms_normalise(q, params.gain_q, params.eps), rms_normalise(k, params.gain_k, params.eps)


def logit_bound(head_size: int, scale: float, params: QKNormParams) -> float:
    """scale · hs · max|g_q| · max|g_k|: no scaled score scale · q̂·k̂ of the layer is larger in size."""
    return float(abs(scale) * head_size * np.max(np.abs(params.gain_q)) * np.max(np.abs(params.gain_k)))


@dataclass(frozen=True)
class QKNormParts:
    """A QK-norm layer's own numbers in the trace: ``gains (2, hs)``, the rows g_q and g_k it used, and ``bound`` =
    ``logit_bound`` for this run's scale (the parameters themselves are the run's ``kernel_params``)."""

    gains: np.ndarray
    bound: float

    def __post_init__(self) -> None:
        _read_only(self)


def qk_norm_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False,
                   params: QKNormParams | None = None) -> KernelOutput:
    """The softmax head on q̂ and k̂ (normalised before positions, by ``normalise_qk``). Rows sum to 1."""
    params = plain_qk_norm_params(q.shape[-1]) if params is None else params
    out = softmax_kernel(q, k, v, mask, scale, bias, null_key)
    parts = QKNormParts(np.stack([params.gain_q, params.gain_k]), logit_bound(q.shape[-1], scale, params))  # (2, hs)
    return KernelOutput(out.scores, out.logits, out.weights, out.heads, out.mixed, parts)


_QK_NORM = Message(N_("QK-norm"))

QK_NORM = Kernel(
    "qknorm", N_("QK-norm (softmax of RMS-normalised q, k)"), N_("QK-norm"),
    N_("Each head's q and k are RMS-normalised with learned gains before positions turn them; then the softmax "
       "head: no logit can be larger than scale · d_k · max gain²."),
    rows_sum_to_one=True, row_sums=N_("each row sums to 1"), signed=False, attend=qk_norm_kernel,
    cache_policies=True, tiled=True, paper="Dehghani et al. 2023; OLMo 2, Qwen3, Gemma 3",
    formula="A = softmax(RMSNorm(Q)·g_q (RMSNorm(K)·g_k)ᵀ/√d_k)",
    weights_label=N_("weights (QK-norm)"), drill_down=True,
    params=lambda c: qk_norm_params(c.head_size, c.seed), before_positions=normalise_qk,
    early_steps=("qk_norm",), steps=("softmax",),
    refuses=(no_latent(_QK_NORM),),
    scale_why=N_("The scores are multiplied by s as in the 2017 head; after QK-norm they are already bounded by "
                 "d_k · max gain², so the scale sets how sharp the softmax can get at most."),
)
