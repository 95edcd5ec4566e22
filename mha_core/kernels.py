"""Attention kernels: how a head turns its queries and keys into the weights it averages the values with.

One table of records, ``KERNELS``, read by the engine, the configuration's checks and every page:

- **softmax** (Vaswani et al. 2017): softmax(q k^T * scale) over the keys; rows sum to 1.
- **differential** (Ye et al. 2024, "Differential Transformer"): each head splits its q and k in two
  halves of hs/2 and takes two softmax maps, A1 from the first halves and A2 from the second; its
  weights are A1 - lambda * A2 (signed: a row sums to 1 - lambda), with the paper's
  lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init, lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for
  layer l = 1, 2, .... Each head's output A V is normalised on its own (RMSNorm over hv, no learned gain)
  and multiplied by 1 - lambda_init before the concatenation.
- **linear** (Katharopoulos et al. 2020): phi(x) = elu(x) + 1 > 0 replaces exp; the weights are
  phi(q_i) . phi(k_j) divided by their row sum (no scale, as in the paper). With a causal mask the same heads come from a recurrence whose state has a constant size:
  S_t = S_{t-1} + phi(k_t) v_t^T (hs x hv), z_t = z_{t-1} + phi(k_t) (hs,), out_t = phi(q_t)^T S_t / phi(q_t)^T z_t.
- **gated** (``mha_core.gated``; Qiu et al. 2025, Qwen3-Next): a softmax head whose A V is multiplied, feature by
  feature, by sigma(X W_theta) before W_O.
- **sink** (``mha_core.sink_kernel``; gpt-oss): one learned logit per head joins every row, softmax, column dropped.

A kernel's function takes q (nh,Tq,hs), k (kv,Tk,hs), v (kv,Tk,hv) after positions, the mask, the
scale and the bias, and returns a ``KernelOutput``: the implied (nh,Tq,Tk) weights, the heads
weights @ v, what the heads concatenate (the normalised heads for differential) and its own
intermediates in a frozen record. ``Refusal`` rows say what a kernel cannot combine with, and how
to remove the conflict; ``mha_core.config`` turns them into messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mha_core.deltanet import DELTANET
from mha_core.gated import GATED
from mha_core.kernel_base import (  # noqa: F401  (the record and the softmax head, re-exported: kernels' old imports)
    Kernel,
    KernelOutput,
    _read_only,
    _scaled_logits,
    map_kernel,
    no_bias,
    no_latent,
    no_null_key,
    scheme_of,
    softmax_kernel,
)
from mha_core.kernel_records import Refusal, RowScale, WeightInputs
from mha_core.linear_state import LINEAR_STATE, add_to_state, elu_plus_one, read_state
from mha_core.marks import N_, Message
from mha_core.qk_norm import QK_NORM
from mha_core.sink_kernel import SINK
from mha_core.sparse import DSA, MOBA
from mha_core.steps import attention_scores, softmax, weighted_sum

DIFF_NORM_EPS = 1e-5  # RMSNorm's epsilon on each differential head (the paper's code and DiffLlama's default)
LAMBDA_STD = 0.1  # the paper's initialisation of the lambda vectors: normal(0, 0.1)


# ---- differential ----------------------------------------------------------------------------


def lambda_init_for_layer(layer: int) -> float:
    """The paper's lambda_init = 0.8 - 0.6 exp(-0.3 (l - 1)) for layer l = 1, 2, ... (0.2 for the first)."""
    return 0.8 - 0.6 * math.exp(-0.3 * (layer - 1))


@dataclass(frozen=True)
class DifferentialParams:
    """The learned scalars of a differential layer: four vectors of hs/2 (shared by the heads) and lambda_init.

    ``lambda_q1, lambda_k1, lambda_q2, lambda_k2 : (hs/2,)``; ``lambda_init`` from the layer's depth;
    ``norm_eps`` the epsilon of each head's RMSNorm.
    """

    lambda_q1: np.ndarray
    lambda_k1: np.ndarray
    lambda_q2: np.ndarray
    lambda_k2: np.ndarray
    lambda_init: float = 0.2
    norm_eps: float = DIFF_NORM_EPS

    def __post_init__(self) -> None:
        _read_only(self)

    @property
    def lam(self) -> float:
        """lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init (the paper's re-parameterisation)."""
        return float(math.exp(self.lambda_q1 @ self.lambda_k1) - math.exp(self.lambda_q2 @ self.lambda_k2)
                     + self.lambda_init)


def differential_params(head_size: int, seed: int, layer: int = 1) -> DifferentialParams:
    """The lambda vectors drawn as the paper initialises them, normal(0, 0.1), from their own stream of ``seed``."""
    rng = np.random.default_rng([seed, 2410, 5258])  # not the weights' stream: the layer's weights stay as they were
    q1, k1, q2, k2 = rng.normal(0.0, LAMBDA_STD, size=(4, head_size // 2))  # (hs/2,) each
    return DifferentialParams(q1, k1, q2, k2, lambda_init_for_layer(layer))


def plain_differential_params(head_size: int) -> DifferentialParams:
    """Zero lambda vectors: lambda = lambda_init (0.2 for the first layer)."""
    zero = np.zeros(head_size // 2)  # (hs/2,)
    return DifferentialParams(zero, zero, zero, zero)


@dataclass(frozen=True)
class DifferentialParts:
    """A differential layer's own intermediates; arrays are read-only.

    ``map1``, ``map2 (nh,Tq,Tk)``: softmax of the first and of the second halves' scaled, masked
    logits (``logits1``, ``logits2``); the weights are map1 - lam * map2. ``lam`` is lambda,
    ``output_gain`` = 1 - lambda_init; ``normed_heads (nh,Tq,hv)`` = RMSNorm(heads) * output_gain,
    what the heads concatenate. ``row_total`` = 1 - lam, the sum of a row that sees a key.
    """

    logits1: np.ndarray
    logits2: np.ndarray
    map1: np.ndarray
    map2: np.ndarray
    lam: float
    output_gain: float
    normed_heads: np.ndarray

    def __post_init__(self) -> None:
        _read_only(self)

    @property
    def row_total(self) -> float:
        return 1.0 - self.lam


def split_halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A head's features in two halves: (n, T, hs) -> (n, T, hs/2) twice."""
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]  # (n, T, hs/2) each


def rms_norm(x: np.ndarray, eps: float, gain: np.ndarray | None = None) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) over the last axis (times ``gain``); shape kept."""
    normed = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)  # x's shape
    return normed if gain is None else normed * gain


def differential_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False,
                        params: DifferentialParams | None = None) -> KernelOutput:
    """(softmax(q1 k1^T s) - lambda softmax(q2 k2^T s)) @ v per head, each head RMS-normalised, times 1 - lambda_init.

    ``scale`` s is the sub-head's, 1/sqrt(hs/2) in the paper. Rows of the weights sum to 1 - lambda.
    """
    params = plain_differential_params(q.shape[-1]) if params is None else params
    scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, Tq, Tk) x2: the whole head's
    (q1, q2), (k1, k2) = split_halves(q), split_halves(k)  # (nh, Tq, hs/2), (kv, Tk, hs/2)
    _, logits1 = _scaled_logits(q1, k1, mask, scale, bias)  # (nh, Tq, Tk)
    _, logits2 = _scaled_logits(q2, k2, mask, scale, bias)  # (nh, Tq, Tk)
    map1, map2 = softmax(logits1, axis=-1), softmax(logits2, axis=-1)  # (nh, Tq, Tk) each
    lam = params.lam
    weights = map1 - lam * map2  # (nh, Tq, Tk), signed
    heads = weighted_sum(weights, v)  # (nh, Tq, hv)
    normed = rms_norm(heads, params.norm_eps) * (1.0 - params.lambda_init)  # (nh, Tq, hv)
    parts = DifferentialParts(logits1, logits2, map1, map2, lam, 1.0 - params.lambda_init, normed)
    return KernelOutput(scores, logits, weights, heads, normed, parts)


# ---- linear ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearParts:
    """A linear-attention layer's own intermediates; arrays are read-only.

    ``phi_q (nh,Tq,hs)``, ``phi_k (kv,Tk,hs)``: the feature maps; ``similarity (nh,Tq,Tk)`` = phi(q) . phi(k),
    0 where masked; ``normaliser (nh,Tq)`` its row sums (the weights are similarity / normaliser).
    With a causal mask over one sentence, the recurrent form: ``recurrent_heads (nh,Tq,hv)``,
    and the state after the last token, ``state (nh,hs,hv)`` = S_T and ``state_sum (nh,hs)`` = z_T;
    None otherwise.
    """

    phi_q: np.ndarray
    phi_k: np.ndarray
    similarity: np.ndarray
    normaliser: np.ndarray
    recurrent_heads: np.ndarray | None = None
    state: np.ndarray | None = None
    state_sum: np.ndarray | None = None

    def __post_init__(self) -> None:
        _read_only(self)


@dataclass(frozen=True)
class LinearRecurrence:
    """The recurrent form over T tokens: ``heads (nh,T,hv)``, the last state ``state (nh,hs,hv)`` = S_T and
    ``state_sum (nh,hs)`` = z_T (only the running state is ever held: T of them would cost T times its size)."""

    heads: np.ndarray
    state: np.ndarray
    state_sum: np.ndarray


def linear_step(state: np.ndarray, state_sum: np.ndarray, phi_q_t, phi_k_t, v_t):
    """One token of the recurrence: add phi(k_t) v_t^T to S and phi(k_t) to z, then let phi(q_t) read them.

    ``state (nh,hs,hv)``, ``state_sum (nh,hs)``, ``phi_q_t (nh,hs)``, ``phi_k_t (nh,hs)``, ``v_t (nh,hv)``;
    returns the new state, the new sum and the head output ``(nh,hv)``. The token's own key is in
    the state it reads: query t attends to keys 0..t, as under a causal mask.
    """
    state, state_sum = add_to_state(state, state_sum, phi_k_t, v_t)  # (nh, hs, hv), (nh, hs)
    return state, state_sum, read_state(state, state_sum, phi_q_t)  # (nh, hs, hv), (nh, hs), (nh, hv)


def linear_recurrence(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray) -> LinearRecurrence:
    """Run ``linear_step`` over the tokens: phi_q (nh,T,hs), phi_k (kv,T,hs), v (kv,T,hv), query head h
    reading key/value head h // (nh/kv)."""
    n_heads, t, size = phi_q.shape
    group = n_heads // phi_k.shape[0]
    phi_k, v = np.repeat(phi_k, group, axis=0), np.repeat(v, group, axis=0)  # (nh, T, hs), (nh, T, hv)
    state = np.zeros((n_heads, size, v.shape[-1]), dtype=phi_q.dtype)  # (nh, hs, hv), constant size
    state_sum = np.zeros((n_heads, size), dtype=phi_q.dtype)  # (nh, hs)
    heads = []
    for i in range(t):
        state, state_sum, out = linear_step(state, state_sum, phi_q[:, i], phi_k[:, i], v[:, i])
        heads.append(out)
    return LinearRecurrence(np.stack(heads, axis=1), state, state_sum)  # (nh, T, hv), (nh, hs, hv), (nh, hs)


def _is_causal_square(mask, tq: int, tk: int) -> bool:
    return mask is not None and tq == tk and np.array_equal(np.broadcast_to(mask, mask.shape[:-2] + (tq, tk)),
                                                            np.broadcast_to(np.tri(tq, tk, dtype=bool),
                                                                            mask.shape[:-2] + (tq, tk)))


def linear_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False, params=None) -> KernelOutput:
    """phi(q) phi(k)^T, masked, divided by its row sums, @ v (Katharopoulos et al. 2020). No scale: the
    ratio is taken of phi's values. Rows sum to 1; a row with every key masked is 0."""
    scores, logits = _scaled_logits(q, k, mask, scale, bias)  # (nh, Tq, Tk) x2: the softmax head's view
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)  # (nh, Tq, hs), (kv, Tk, hs)
    similarity = attention_scores(phi_q, phi_k)  # (nh, Tq, Tk), > 0
    if mask is not None:
        similarity = np.where(mask, similarity, 0.0).astype(q.dtype)  # (nh, Tq, Tk)
    normaliser = similarity.sum(axis=-1)  # (nh, Tq)
    weights = similarity / np.where(normaliser > 0, normaliser, 1.0)[..., None]  # (nh, Tq, Tk)
    heads = weighted_sum(weights, v)  # (nh, Tq, hv)
    recurrent = None
    if _is_causal_square(mask, q.shape[1], k.shape[1]):
        recurrent = linear_recurrence(phi_q, phi_k, v)
    parts = LinearParts(phi_q, phi_k, similarity, normaliser,
                        None if recurrent is None else recurrent.heads,  # (nh, Tq, hv)
                        None if recurrent is None else recurrent.state,  # (nh, hs, hv)
                        None if recurrent is None else recurrent.state_sum)  # (nh, hs)
    return KernelOutput(scores, logits, weights, heads, heads, parts)


# ---- the table of kernels --------------------------------------------------------------------


def _rms_norm_scale(parts: DifferentialParts, heads: np.ndarray) -> np.ndarray:
    """c_i = (1 - lambda_init) / sqrt(mean(row i of A·V ^ 2) + eps): ``rms_norm`` and the gain, per row. (nh, Tq)."""
    return parts.output_gain / np.sqrt(np.mean(heads * heads, axis=-1) + DIFF_NORM_EPS)  # (nh, Tq)


_DIFFERENTIAL = Message(N_("differential attention"))  # what a refusal names
_LINEAR = Message(N_("linear attention"))

KERNELS: dict[str, Kernel] = {
    kernel.name: kernel
    for kernel in (
        Kernel("softmax", N_("softmax (2017)"), N_("softmax"),
               N_("Each query's scores go through a softmax: positive weights that sum to 1."),
               rows_sum_to_one=True, row_sums=N_("each row sums to 1"), signed=False, attend=softmax_kernel,
               cache_policies=True, tiled=True, paper="Vaswani et al. 2017", formula="A = softmax(QKᵀ/√d_k)", variant=False,
               drill_down=True, steps=("softmax",)),
        Kernel("differential", N_("differential (A₁ − λA₂)"), N_("differential"),
               N_("Two softmax maps per head, from the two halves of q and k; the weights are the first minus λ "
                  "times the second, so common-mode attention cancels and weights can be negative."),
               rows_sum_to_one=False, row_sums=N_("each row sums to 1 − λ, and weights can be negative"), signed=True,
               attend=differential_kernel, sub_heads=2, row_sum=lambda parts: 1.0 - parts.lam, row_sum_formula="1 − λ",
               refuses=(no_null_key(_DIFFERENTIAL), no_bias(_DIFFERENTIAL), no_latent(_DIFFERENTIAL),
                        Refusal("n_heads", N_("differential attention splits each head's q and k in two halves: the "
                                              "head size must be even (with RoPE a multiple of 4, each half turning in "
                                              "pairs); use fewer heads"),
                                lambda c: c.head_size % (4 if scheme_of(c).turns else 2) != 0,
                                {"kernel": "softmax"})),
               paper="Ye et al. 2024", formula="A = softmax(Q₁K₁ᵀ/√d) − λ·softmax(Q₂K₂ᵀ/√d)",
               row_scale=RowScale(_rms_norm_scale, N_("(1 − λ_init) / rms of row i of A·V (the head's RMSNorm)")),
               weights_label=N_("weights A₁ − λA₂"),
               params=lambda c: differential_params(c.head_size, c.seed), steps=("diff_maps", "diff_combine"),
               drops=("scores", "scale", "mask"), after_mix=("diff_norm",),
               output_words=N_("weights × V, then RMSNorm on its own and × (1 − λ_init) = {output_gain:.4f}"),
               mix_why=N_("Each query's output is the sum of the value rows weighted by A₁ − λA₂: not an average, "
                          "since the weights can be negative and sum to 1 − λ. The next step normalises each head on "
                          "its own."),
               inputs=WeightInputs(
                   ("L₁", "L₂"), lambda logits, parts: (parts.logits1, parts.logits2),
                   N_("half-head logits L₁, L₂ (scaled + masked)"), "L₁, L₂", N_("scaled, masked half-head logit"),
                   N_("Colour = each half of the head scoring on its own, scaled and masked, centred on 0 (red above, "
                      "blue below): L₁ from the first halves of q and k, L₂ from the second (scale 1/√(d_k/2) under "
                      "the standard rule). A₁ = softmax(L₁) and A₂ = softmax(L₂) make the weights A₁ − λA₂. "
                      "Grey cells are masked (−∞): both softmaxes give them 0."), "half_logits_L1_L2"),
               scores_caption=N_("Colour = the raw dot product q·k of the whole head, centred on 0. A differential "
                                 "head never uses this sum: it scores the two halves on their own (L₁ and L₂, the view "
                                 "before, are its two terms, each scaled). Grey cells are masked.")),
        Kernel("linear", N_("linear (φ = elu + 1)"), N_("linear"),
               N_("φ(q)·φ(k) with φ = elu + 1 > 0 replaces exp, divided by its row sum; under a causal mask the "
                  "heads come from a running state of constant size."),
               rows_sum_to_one=True, row_sums=N_("each row sums to 1"), signed=False, attend=linear_kernel,
               recurrent=True, decoder=LINEAR_STATE,
               refuses=(no_null_key(_LINEAR), no_bias(_LINEAR), no_latent(_LINEAR),
                        Refusal("scale_rule", N_("linear attention has no scale: φ(q)·φ(k) is divided by its row sum; "
                                                 "keep the standard scale rule"), lambda c: getattr(c, "scale_rule", "sqrt_dk") != "sqrt_dk",
                                {"scale_rule": "sqrt_dk"})),
               paper="Katharopoulos et al. 2020", formula="A_ij = φ(q_i)·φ(k_j) / Σ_j' φ(q_i)·φ(k_j')",
               weights_label=N_("weights φ(q)·φ(k) / row sum"),
               steps=("linear_phi", "linear_weights", "linear_state"), drops=("scores", "scale", "mask"),
               inputs=WeightInputs(
                   ("",), lambda logits, parts: (parts.similarity,), N_("φ(q)·φ(k), masked (before the row sum)"),
                   "φ(q)·φ(k)", "φ(q)·φ(k)",
                   N_("Colour = φ(q)·φ(k) with φ = elu + 1 > 0, from 0 up: what each query gives each key before its "
                      "row is divided by its sum, which gives the weights. No scale, no logits, no softmax. Grey cells "
                      "are masked: 0."), "phi_q_phi_k", signed=False, masked_is_neginf=False),
               scores_caption=N_("Colour = the raw dot product q·k, centred on 0. A linear head never forms it: φ = "
                                 "elu + 1 acts on q and on k before their product (φ(q)·φ(k), the view before). Grey "
                                 "cells are masked.")),
        MOBA,
        DSA,
        GATED,
        SINK,
        QK_NORM,
        DELTANET,
    )
}


def attention_kernel(name: str) -> Kernel:
    """The record of kernel ``name``; ValueError naming the choices otherwise."""
    if name not in KERNELS:
        raise ValueError(Message(N_("unknown attention kernel {name!r}: choose one of {choices}"), name=name,
                                 choices=", ".join(KERNELS)))
    return KERNELS[name]


def kernel_refusal(name: str, settings) -> Refusal | None:
    """The first refusal of kernel ``name`` that applies to ``settings`` (a configuration), or None."""
    return next((r for r in attention_kernel(name).refuses if r.applies(settings)), None)
