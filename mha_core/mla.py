"""Multi-head latent attention (MLA, DeepSeek-V2 2024): keys and values from one shared latent of rank r.

Instead of kv heads of keys and values, every token keeps one latent vector c = RMSNorm(x W_DKV) of
r numbers (``kv_lora_rank``); head h's keys and values are up-projections of it, k_h = c W_UK,h and
v_h = c W_UV,h. RoPE cannot act on c (the rotation depends on the position and would stop W_UK from
being folded into the query), so d_rope decoupled dimensions carry it: a key part k_R = RoPE(x W_KR),
shared by every head, and the last d_rope features of each query head.

Layout here (the DeepSeek module's, with its head split): a query head of hs features is
[content (hs - d_rope) | rope (d_rope)], q = x W_Q as in the ordinary layer; a key head is
[c W_UK,h (hs - d_rope) | k_R (d_rope)]; the scale is 1/sqrt(hs) as for any head of hs features.

Scores two ways, equal up to rounding:
- materialised: build K from c, then q . k;
- absorbed: fold W_UK,h into the query, q_C^T (c W_UK,h)^T = (q_C W_UK,h^T) . c, plus q_R . k_R; the
  decoder then never builds K: the cache holds c and k_R, r + d_rope numbers per token, against
  2 nh hs for multi-head attention and 2 kv hs for grouped-query attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.decoder_state import Attended, Decoder, Reading
from mha_core.inputs import init_matrix
from mha_core.kernels import rms_norm
from mha_core.marks import N_, Message
from mha_core.positions import ROPE_BASE, Positioned, apply_positions
from mha_core.steps import attention_scores, project, softmax, split_heads

LATENT_NORM_EPS = 1e-6  # DeepSeek's RMSNorm epsilon on the latent


@dataclass(frozen=True)
class MLAWeights:
    """The key/value side of an MLA layer (queries and W_O are the ordinary layer's).

    ``w_dkv (C_k, r)``: down-projection to the latent; ``latent_gain (r,)``: the RMSNorm's gain;
    ``w_uk (r, nh*(hs - d_rope))``, ``w_uv (r, nh*hv)``: up-projections, head h owning a block of
    columns; ``w_kr (C_k, d_rope)``: the shared RoPE key part (0 columns without it).
    """

    w_dkv: np.ndarray
    w_uk: np.ndarray
    w_uv: np.ndarray
    w_kr: np.ndarray
    latent_gain: np.ndarray
    latent_eps: float = LATENT_NORM_EPS

    @property
    def rank(self) -> int:
        return self.w_dkv.shape[1]

    @property
    def rope_dims(self) -> int:
        return self.w_kr.shape[1]

    def astype(self, dtype) -> MLAWeights:
        return MLAWeights(*(np.asarray(a, dtype=dtype) for a in (self.w_dkv, self.w_uk, self.w_uv, self.w_kr,
                                                                  self.latent_gain)), self.latent_eps)


def mla_weights(d_model: int, n_heads: int, head_size: int, rank: int, rope_dims: int, seed: int,
                init: str = "xavier") -> MLAWeights:
    """MLA projections drawn by ``init`` from their own stream of ``seed`` (the ordinary layer's weights stay as they were)."""
    rng = np.random.default_rng([seed, 2405, 4434])

    def draw(rows: int, cols: int) -> np.ndarray:
        return init_matrix(rng, init, rows, cols)  # (rows, cols)

    content = head_size - rope_dims
    return MLAWeights(
        w_dkv=draw(d_model, rank),  # (C, r)
        w_uk=draw(rank, n_heads * content),  # (r, nh*(hs - d_rope))
        w_uv=draw(rank, n_heads * head_size),  # (r, nh*hv)
        w_kr=draw(d_model, rope_dims),  # (C, d_rope)
        latent_gain=np.ones(rank),  # (r,), DeepSeek's initial gain
    )


@dataclass(frozen=True)
class MLAParts:
    """An MLA layer's own intermediates; arrays are read-only.

    ``latent_raw (Tk,r)`` = x W_DKV, ``latent (Tk,r)`` its RMSNorm: what the cache holds;
    ``k_content (nh,Tk,hs-d_rope)`` = latent W_UK,h; ``k_rope (1,Tk,d_rope)`` the shared RoPE key part
    (turned), ``k_rope_unrotated`` before; ``absorbed_query (nh,Tq,r)`` = q_C W_UK,h^T;
    ``absorbed_scores (nh,Tq,Tk)`` = absorbed_query . latent + q_R . k_R: the raw scores without
    building K; ``score_gap`` = max |absorbed - materialised| scores; ``cache_per_token`` = r + d_rope.
    """

    latent_raw: np.ndarray
    latent: np.ndarray
    k_content: np.ndarray
    k_rope: np.ndarray
    k_rope_unrotated: np.ndarray
    absorbed_query: np.ndarray
    absorbed_scores: np.ndarray
    score_gap: float
    rank: int
    rope_dims: int

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def cache_per_token(self) -> int:
        """Numbers a decoder caches per token: the latent and the shared RoPE key, r + d_rope."""
        return self.rank + self.rope_dims


def default_mla_rope(head_size: int) -> int:
    """Decoupled RoPE dimensions for a head of ``head_size``: about a quarter of it, even, at least 2 (0 below 3)."""
    return 0 if head_size < 3 else max(2, head_size // 4 // 2 * 2)


def cache_per_token(n_heads: int, head_size: int, kv_heads: int | None = None, rank: int = 0,
                    rope_dims: int = 0) -> dict[str, int]:
    """Numbers cached per token and layer: MHA 2 nh hs, GQA 2 kv hs, MLA r + d_rope (rank 0: no MLA entry)."""
    sizes = {"MHA": 2 * n_heads * head_size}
    if kv_heads is not None and kv_heads != n_heads:
        sizes["GQA" if kv_heads > 1 else "MQA"] = 2 * kv_heads * head_size
    if rank:
        sizes["MLA"] = rank + rope_dims
    return sizes


def compress(x: np.ndarray, mla: MLAWeights) -> tuple[np.ndarray, np.ndarray]:
    """The latent of every token, before and after its RMSNorm: (T, C) -> (T, r) twice."""
    raw = project(x, mla.w_dkv)  # (T, r)
    return raw, rms_norm(raw, mla.latent_eps, mla.latent_gain)  # (T, r) x2


def up_project_heads(latent: np.ndarray, w_up: np.ndarray, n_heads: int) -> np.ndarray:
    """Every head's keys or values from the latent: (T, r) @ (r, nh*d) -> (nh, T, d)."""
    return split_heads(latent @ w_up, n_heads)  # (nh, T, d)


def head_blocks(w_up: np.ndarray, n_heads: int) -> np.ndarray:
    """W_UK or W_UV cut into its heads: (r, nh*d) -> (nh, r, d)."""
    rank, width = w_up.shape
    return w_up.reshape(rank, n_heads, width // n_heads).transpose(1, 0, 2)  # (nh, r, d)


def absorbed_scores(q_content: np.ndarray, q_rope: np.ndarray, latent: np.ndarray, k_rope: np.ndarray,
                    w_uk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw scores without building K: (q_C W_UK,h^T) . c + q_R . k_R.

    ``q_content (nh,Tq,hs-d_rope)``, ``q_rope (nh,Tq,d_rope)`` (turned), ``latent (Tk,r)``,
    ``k_rope (1,Tk,d_rope)`` (turned), ``w_uk (r, nh*(hs-d_rope))``; returns the absorbed query
    (nh,Tq,r) and the scores (nh,Tq,Tk).
    """
    n_heads = q_content.shape[0]
    absorbed_query = q_content @ head_blocks(w_uk, n_heads).transpose(0, 2, 1)  # (nh, Tq, r)
    scores = attention_scores(absorbed_query, latent[None])  # (nh, Tq, Tk), one latent for every head
    if q_rope.shape[-1]:
        scores = scores + attention_scores(q_rope, k_rope)  # (nh, Tq, Tk), the decoupled RoPE part
    return absorbed_query, scores


@dataclass(frozen=True)
class LatentInputs:
    """What MLA hands to the kernel: q, k turned as a ``Positioned`` (k materialised, (nh,Tk,hs)), v (nh,Tk,hv),
    and the pieces ``finish`` needs for the absorbed scores."""

    placed: Positioned
    v: np.ndarray
    latent_raw: np.ndarray
    latent: np.ndarray
    k_content: np.ndarray
    k_rope: np.ndarray
    k_rope_unrotated: np.ndarray


def latent_attention_inputs(q: np.ndarray, x_k: np.ndarray, mla: MLAWeights, pe: str, q_positions: np.ndarray,
                            k_positions: np.ndarray, rope_base: float = ROPE_BASE) -> LatentInputs:
    """Queries (nh,Tq,hs) and tokens x_k (Tk,C) -> turned q, materialised k (nh,Tk,hs), v (nh,Tk,hv).

    A scheme that turns acts on the last d_rope features of q and on the shared key part only;
    a bias (ALiBi) is made as for any head.
    """
    n_heads, _, head_size = q.shape
    rope = mla.rope_dims
    latent_raw, latent = compress(x_k, mla)  # (Tk, r) x2
    k_content = up_project_heads(latent, mla.w_uk, n_heads)  # (nh, Tk, hs - d_rope)
    v = up_project_heads(latent, mla.w_uv, n_heads)  # (nh, Tk, hv)
    k_rope_raw = project(x_k, mla.w_kr)[None]  # (1, Tk, d_rope), one key part for every head
    q_content, q_rope = q[..., : head_size - rope], q[..., head_size - rope:]  # (nh,Tq,hs-d_rope), (nh,Tq,d_rope)
    if rope:
        turned = apply_positions(pe, q_rope, k_rope_raw, q_positions, k_positions, rope_base=rope_base)
        q_turned = np.concatenate([q_content, turned.q], axis=-1)  # (nh, Tq, hs)
        k_rope = turned.k  # (1, Tk, d_rope)
    else:
        turned = apply_positions(pe, q, k_content, q_positions, k_positions, rope_base=rope_base)  # a bias at most
        q_turned, k_rope = q, k_rope_raw  # (nh, Tq, hs), (1, Tk, 0)
    k = np.concatenate([k_content, np.broadcast_to(k_rope, (n_heads, *k_rope.shape[1:]))], axis=-1)  # (nh, Tk, hs)
    k_unrotated = np.concatenate([k_content, np.broadcast_to(k_rope_raw, (n_heads, *k_rope_raw.shape[1:]))],
                                 axis=-1)  # (nh, Tk, hs)
    turns = turned.q_angles is not None
    placed = Positioned(q_turned, k, turned.bias, q if turns else None, k_unrotated if turns else None,
                        turned.q_angles, turned.k_angles)
    return LatentInputs(placed, v, latent_raw, latent, k_content, k_rope, k_rope_raw)


def finish(inputs: LatentInputs, mla: MLAWeights, materialised_scores: np.ndarray) -> MLAParts:
    """The absorbed scores of the same layer and their largest distance from the materialised ones."""
    q = inputs.placed.q  # (nh, Tq, hs)
    content = q.shape[-1] - mla.rope_dims
    absorbed_query, scores = absorbed_scores(q[..., :content], q[..., content:], inputs.latent, inputs.k_rope,
                                             mla.w_uk)  # (nh, Tq, r), (nh, Tq, Tk)
    gap = float(np.max(np.abs(scores - materialised_scores))) if scores.size else 0.0
    return MLAParts(inputs.latent_raw, inputs.latent, inputs.k_content, inputs.k_rope, inputs.k_rope_unrotated,
                    absorbed_query, scores, gap, mla.rank, mla.rope_dims)


def absorbed_heads(weights: np.ndarray, latent: np.ndarray, w_uv: np.ndarray) -> np.ndarray:
    """Heads without building V: (A_h c) W_UV,h, (nh,Tq,Tk), (Tk,r), (r,nh*hv) -> (nh,Tq,hv)."""
    return (weights @ latent) @ head_blocks(w_uv, weights.shape[0])  # (nh, Tq, hv)



# ---- decoding: the latent cache -------------------------------------------------------------


@dataclass(frozen=True)
class LatentCache:
    """What an MLA decoder keeps: ``latents (t,r)``, one latent per token, and ``rope_keys (1,t,d_rope)``, the shared
    RoPE key part turned at each token's position: r + d_rope numbers per token for all heads together."""

    latents: np.ndarray
    rope_keys: np.ndarray


def _start_latent_cache(layer, dtype) -> LatentCache:
    return LatentCache(np.empty((0, layer.mla.rank), dtype=dtype),  # (0, r)
                       np.empty((1, 0, layer.mla.rope_dims), dtype=dtype))  # (1, 0, d_rope)


def _keep_latent(layer, kept: LatentCache, token) -> tuple[LatentCache, Reading]:
    """Compress the token to its latent, turn q_R and k_R at its position, add c_t and k_R,t to the cache."""
    mla = layer.mla
    content = token.q.shape[-1] - mla.rope_dims
    _, latent = compress(token.x, mla)  # (1, r)
    k_rope = project(token.x, mla.w_kr)[None]  # (1, 1, d_rope)
    here = np.array([token.position])  # (1,)
    placed = apply_positions(layer.pe, token.q[..., content:], k_rope, here, here, rope_base=layer.rope_base,
                             key_positions=np.arange(token.position + 1))  # q_R, k_R turned; a bias (nh,1,t+1) at most
    kept = LatentCache(np.concatenate([kept.latents, latent], axis=0),  # (t+1, r)
                       np.concatenate([kept.rope_keys, placed.k], axis=1))  # (1, t+1, d_rope)
    q = np.concatenate([token.q[..., :content], placed.q], axis=-1)  # (nh, 1, hs), q_R turned
    return kept, Reading(q, bias=placed.bias)


def _attend_to_latents(layer, kept: LatentCache, reading: Reading) -> Attended:
    """The absorbed scores (q_C W_UK,h^T) . c + q_R . k_R, softmax, and the heads (A c) W_UV,h: K and V never built."""
    mla = layer.mla
    content = reading.q.shape[-1] - mla.rope_dims
    _, scores = absorbed_scores(reading.q[..., :content], reading.q[..., content:], kept.latents, kept.rope_keys,
                                mla.w_uk)  # (nh, 1, t+1)
    logits = scores * layer.scale + (0.0 if reading.bias is None else reading.bias)  # (nh, 1, t+1)
    row = softmax(logits, axis=-1, null_key=layer.null_key)  # (nh, 1, t+1)
    return Attended(row, absorbed_heads(row, kept.latents, mla.w_uv), logits)  # (nh,1,t+1), (nh,1,hv)


LATENT_CACHE = Decoder(
    N_("latent cache"), _start_latent_cache, _keep_latent, _attend_to_latents,
    lambda kept: ((N_("latent cache c"), kept.latents), (N_("RoPE key cache k_R"), kept.rope_keys)),
    words=N_("a **latent cache**: one latent vector c and the shared RoPE key k_R per token, from which every head's "
             "scores are taken the absorbed way (K and V are never built)"),
    sizes=lambda c: Message(N_("the latent c (r = {rank}) and the shared RoPE key k_R ({rope}) of every token: "
                               "{total} numbers per token for all heads together"), rank=c.mla_rank, rope=c.mla_rope,
                            total=c.mla_rank + c.mla_rope))
