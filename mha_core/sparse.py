"""Sparse selection (issue 34): each query reads only some keys, chosen before the softmax.

- **MoBA** (Lu et al. 2025, "MoBA: Mixture of Block Attention"): the keys are cut into blocks of B; the gate of
  block b for query i is q_i . mean(K of block b), with no parameters. Query i keeps its own block (where the causal
  mask still holds) and the best of the earlier blocks, k blocks in all; a future block is never chosen.
- **DSA** (DeepSeek-V3.2's DeepSeek Sparse Attention): a lightning indexer of its own small heads scores every
  earlier token, I_{t,s} = sum_j w_{t,j} ReLU(q^I_{t,j} . k^I_s), and query t keeps its k best keys (one choice
  for every attention head). Its weights q^I = x W^I_Q, k^I = LayerNorm(x W^I_K), w = x W^I_w / sqrt(H^I) come from
  the layer's input x (``reads_input``), drawn from the configuration's seed; q^I . k^I is scaled by 1/sqrt(d^I)
  as in transformers' ``DeepseekV32Indexer``.

Both then take the softmax of the usual scaled logits over the kept keys only: with k covering every block or key
the weights are the dense head's exactly. Queries stand at the last Tq positions of the Tk keys (a decoder's
new token is the last one), and both are causal. Shapes: ``nh`` heads, ``kv`` key/value heads, ``Tq`` queries,
``Tk`` keys, ``nb`` blocks, ``HI`` indexer heads, ``dI`` the indexer's head size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mha_core.decoder_state import KV_CACHE, Attended, Decoder, DecoderLayer, KVCache, NewToken, Reading
from mha_core.kernel_base import Kernel, KernelOutput, _read_only, _scaled_logits, no_latent
from mha_core.kernel_records import Refusal, WeightInputs
from mha_core.marks import N_, Message
from mha_core.steps import apply_mask, softmax, weighted_sum

INDEX_HEADS = 2  # H^I: the indexer's heads (DeepSeek-V3.2 has 64; the toy has few tokens)
INDEX_SIZE = 4  # d^I: the indexer's head size (DeepSeek-V3.2: 128)
INDEX_NORM_EPS = 1e-6  # the LayerNorm on the indexer's keys (transformers' k_norm)
MAX_SPARSE = 64  # the largest block size and top-k a link may ask for (the token limit)


def causal_of(tq: int, tk: int) -> np.ndarray:
    """(Tq, Tk), True = may attend: query i stands at position i + Tk - Tq and sees keys 0..that position."""
    return np.tri(tq, tk, tk - tq, dtype=bool)  # (Tq, Tk)


def top_k_of(scores: np.ndarray, k: int, allowed: np.ndarray) -> np.ndarray:
    """True at the k largest allowed entries along the last axis (ties: the earlier one), shape kept.

    An entry not ``allowed`` is never chosen, even when fewer than k are allowed.
    """
    ranked = np.where(allowed, scores, -np.inf)  # scores' shape
    order = np.argsort(-ranked, axis=-1, kind="stable")  # best first, ties in position order
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(scores.shape[-1]), axis=-1)  # each entry's place in the order
    return (rank < k) & allowed  # scores' shape


@dataclass(frozen=True)
class SparseParts:
    """What a sparse head kept and what the dense head would have given; arrays are read-only.

    ``kept (nh,Tq,Tk)``: the keys each query of each head reads (chosen and allowed by the mask);
    ``dense_weights (nh,Tq,Tk)`` the softmax over every allowed key, ``dense_heads (nh,Tq,hv)`` = those @ v;
    ``gap (nh,Tq)`` = ||o_sparse - o_dense|| per head and query; ``topk`` k.
    """

    kept: np.ndarray
    dense_weights: np.ndarray
    dense_heads: np.ndarray
    gap: np.ndarray
    topk: int

    def __post_init__(self) -> None:
        _read_only(self)


@dataclass(frozen=True)
class MobaParts(SparseParts):
    """MoBA's own intermediates besides ``SparseParts``: ``block`` B, ``block_means (nh,nb,hs)`` the mean key of each
    block as head h reads it, ``gate (nh,Tq,nb)`` = q_i . mean_b (-inf for a future block), ``own (Tq,)`` each
    query's block, ``chosen (nh,Tq,nb)`` the blocks it keeps."""

    block: int = 1
    block_means: np.ndarray | None = None
    gate: np.ndarray | None = None
    own: np.ndarray | None = None
    chosen: np.ndarray | None = None


@dataclass(frozen=True)
class DsaParts(SparseParts):
    """DSA's indexer besides ``SparseParts``: ``index_q (Tq,HI,dI)``, ``index_k (Tk,dI)``, ``index_w (Tq,HI)`` (already
    / sqrt(HI)), ``index (Tq,Tk)`` = I_{t,s} (-inf where masked), shared by every head."""

    index_q: np.ndarray | None = None
    index_k: np.ndarray | None = None
    index_w: np.ndarray | None = None
    index: np.ndarray | None = None


def _sparse_softmax(q, k, v, mask, scale: float, bias, null_key: bool, choose):
    """The dense and the sparse head from the same logits; ``choose(allowed (nh,Tq,Tk))`` -> kept keys (nh,Tq,Tk).

    Returns (KernelOutput without parts, kept, dense weights, dense heads, gap)."""
    n_heads, tq, tk = q.shape[0], q.shape[1], k.shape[1]
    allowed = np.broadcast_to(causal_of(tq, tk), (n_heads, tq, tk))  # (nh, Tq, Tk)
    if mask is not None:
        allowed = allowed & np.broadcast_to(mask, (n_heads, tq, tk))  # (nh, Tq, Tk)
    scores, dense_logits = _scaled_logits(q, k, allowed, scale, bias)  # (nh, Tq, Tk) x2
    kept = choose(allowed)  # (nh, Tq, Tk)
    logits = apply_mask(dense_logits, kept)  # (nh, Tq, Tk): -inf where not kept
    dense = softmax(dense_logits, axis=-1, null_key=null_key)  # (nh, Tq, Tk)
    weights = softmax(logits, axis=-1, null_key=null_key)  # (nh, Tq, Tk), 0 where not kept
    heads, dense_heads = weighted_sum(weights, v), weighted_sum(dense, v)  # (nh, Tq, hv) x2
    gap = np.linalg.norm(heads - dense_heads, axis=-1)  # (nh, Tq)
    # ``logits`` stay the dense head's (the mask step's); the kept ones are ``np.where(kept, logits, -inf)``
    return KernelOutput(scores, dense_logits, weights, heads, heads), kept, dense, dense_heads, gap


def _per_query_head(k: np.ndarray, n_heads: int) -> np.ndarray:
    """(kv, Tk, d) -> (nh, Tk, d): the keys each query head reads (query head h reads h // (nh/kv))."""
    return np.repeat(k, n_heads // k.shape[0], axis=0)  # (nh, Tk, d)


# ---- MoBA ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MobaParams:
    """MoBA's settings (it learns nothing): ``block`` B keys per block, ``topk`` k blocks kept per query."""

    block: int = 2
    topk: int = 2


def block_means(k: np.ndarray, block: int) -> np.ndarray:
    """The mean key of each block of ``block`` keys: (n, Tk, hs) -> (n, nb, hs); the last block may be shorter."""
    starts = np.arange(0, k.shape[1], block)  # (nb,)
    sums = np.add.reduceat(k, starts, axis=1)  # (n, nb, hs)
    sizes = np.diff(np.append(starts, k.shape[1]))  # (nb,)
    return sums / sizes[:, None]  # (n, nb, hs)


def moba_gate(q: np.ndarray, means: np.ndarray, own: np.ndarray) -> np.ndarray:
    """q_i . mean_b for each head, query and block, (nh, Tq, nb); -inf for a block after the query's own."""
    gate = q @ means.transpose(0, 2, 1)  # (nh, Tq, nb)
    future = np.arange(means.shape[1])[None, :] > own[:, None]  # (Tq, nb)
    return np.where(future, -np.inf, gate)  # (nh, Tq, nb)


def moba_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False,
                params: MobaParams | None = None) -> KernelOutput:
    """Softmax over the keys of k blocks per query: its own block and the best earlier ones by q . mean(K)."""
    params = MobaParams() if params is None else params
    n_heads, tq, tk = q.shape[0], q.shape[1], k.shape[1]
    means = block_means(_per_query_head(k, n_heads), params.block)  # (nh, nb, hs)
    own = (np.arange(tq) + tk - tq) // params.block  # (Tq,): the block each query stands in
    gate = moba_gate(q, means, own)  # (nh, Tq, nb)
    blocks = np.arange(means.shape[1])  # (nb,)
    forced = np.where(blocks[None, :] == own[:, None], np.inf, gate)  # (nh, Tq, nb): its own block first
    chosen = top_k_of(forced, params.topk, blocks[None, :] <= own[:, None])  # (nh, Tq, nb): never a future block

    def choose(allowed):
        return chosen[..., np.arange(tk) // params.block] & allowed  # (nh, Tq, Tk)

    out, kept, dense, dense_heads, gap = _sparse_softmax(q, k, v, mask, scale, bias, null_key, choose)
    parts = MobaParts(kept, dense, dense_heads, gap, params.topk, params.block, means, gate, own, chosen)
    return KernelOutput(out.scores, out.logits, out.weights, out.heads, out.mixed, parts)


# ---- DeepSeek Sparse Attention ----------------------------------------------------------------


@dataclass(frozen=True)
class IndexerParams:
    """DSA's lightning indexer: ``w_q (C, HI*dI)``, ``w_k (C, dI)``, ``w_w (C, HI)``, and ``topk`` keys kept per query."""

    w_q: np.ndarray
    w_k: np.ndarray
    w_w: np.ndarray
    topk: int = 2

    def __post_init__(self) -> None:
        _read_only(self)

    @property
    def heads(self) -> int:
        return self.w_w.shape[1]

    @property
    def size(self) -> int:
        return self.w_k.shape[1]


def indexer_params(d_model: int, seed: int, topk: int) -> IndexerParams:
    """The indexer's weights, normal(0, 1/C), from their own stream of ``seed`` (the layer's weights stay as they were)."""
    rng = np.random.default_rng([seed, 2512, 2556])  # DeepSeek-V3.2's report, arXiv 2512.02556
    std = 1.0 / np.sqrt(d_model)
    w_q = rng.normal(0.0, std, size=(d_model, INDEX_HEADS * INDEX_SIZE))  # (C, HI*dI)
    w_k = rng.normal(0.0, std, size=(d_model, INDEX_SIZE))  # (C, dI)
    w_w = rng.normal(0.0, std, size=(d_model, INDEX_HEADS))  # (C, HI)
    return IndexerParams(w_q, w_k, w_w, topk)


def index_keys(x: np.ndarray, params: IndexerParams) -> np.ndarray:
    """k^I = LayerNorm(x W^I_K) (no gain): (T, C) -> (T, dI). What a decoder keeps besides K and V."""
    raw = x @ params.w_k  # (T, dI)
    centred = raw - raw.mean(axis=-1, keepdims=True)  # (T, dI)
    return centred / np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + INDEX_NORM_EPS)  # (T, dI)


def index_queries(x: np.ndarray, params: IndexerParams) -> tuple[np.ndarray, np.ndarray]:
    """q^I = x W^I_Q per indexer head, (T, HI, dI), and w = x W^I_w / sqrt(HI), (T, HI)."""
    q = (x @ params.w_q).reshape(x.shape[0], params.heads, params.size)  # (T, HI, dI)
    return q, (x @ params.w_w) / np.sqrt(params.heads)  # (T, HI, dI), (T, HI)


def lightning_index(index_q: np.ndarray, index_w: np.ndarray, index_k: np.ndarray) -> np.ndarray:
    """I_{t,s} = sum_j w_{t,j} ReLU(q^I_{t,j} . k^I_s / sqrt(dI)): (Tq,HI,dI), (Tq,HI), (Tk,dI) -> (Tq, Tk)."""
    dots = np.einsum("thd,sd->ths", index_q, index_k) / np.sqrt(index_k.shape[-1])  # (Tq, HI, Tk)
    return np.einsum("th,ths->ts", index_w, np.maximum(dots, 0.0))  # (Tq, Tk)


def dsa_attend(q, k, v, mask, scale: float, bias, null_key: bool, params: IndexerParams,
               index_q: np.ndarray, index_w: np.ndarray, index_k: np.ndarray) -> KernelOutput:
    """Softmax over the k keys the indexer ranks highest for each query (the same keys for every head)."""
    index = lightning_index(index_q, index_w, index_k)  # (Tq, Tk)

    def choose(allowed):
        return top_k_of(np.broadcast_to(index, allowed.shape), params.topk, allowed)  # (nh, Tq, Tk)

    out, kept, dense, dense_heads, gap = _sparse_softmax(q, k, v, mask, scale, bias, null_key, choose)
    shown = np.where(causal_of(*index.shape), index, -np.inf)  # (Tq, Tk): what the indexer ranks
    parts = DsaParts(kept, dense, dense_heads, gap, params.topk, index_q, index_k, index_w, shown)
    return KernelOutput(out.scores, out.logits, out.weights, out.heads, out.mixed, parts)


def dsa_kernel(q, k, v, mask, scale: float, bias=None, null_key: bool = False,
               params: IndexerParams | None = None, x: np.ndarray | None = None) -> KernelOutput:
    """DeepSeek Sparse Attention over self-attention's tokens x (T, C): the indexer reads x, the heads q, k, v."""
    if x is None or x.shape[0] != k.shape[1]:
        raise ValueError("DeepSeek Sparse Attention indexes the keys' own tokens: pass x (T, C) of self-attention")
    params = indexer_params(x.shape[1], 0, 2) if params is None else params
    index_q, index_w = index_queries(x, params)  # (T, HI, dI), (T, HI)
    return dsa_attend(q, k, v, mask, scale, bias, null_key, params, index_q, index_w, index_keys(x, params))


# ---- decoding: the KV cache, plus the indexer's keys for DSA ----------------------------------


@dataclass(frozen=True)
class IndexedCache:
    """A DSA decoder's state: the KV cache and the indexer's key of every token, ``index_k (t, dI)``."""

    cache: KVCache
    index_k: np.ndarray


def _start_indexed(layer: DecoderLayer, dtype) -> IndexedCache:
    return IndexedCache(KV_CACHE.start(layer, dtype), np.empty((0, layer.kernel_params.size), dtype=dtype))


def _keep_indexed(layer: DecoderLayer, state: IndexedCache, token: NewToken) -> tuple[IndexedCache, Reading]:
    cache, reading = KV_CACHE.keep(layer, state.cache, token)  # k (kv, t+1, hs), v (kv, t+1, hv)
    index_k = np.concatenate([state.index_k, index_keys(token.x, layer.kernel_params)])  # (t+1, dI)
    return IndexedCache(cache, index_k), reading


def _attend_indexed(layer: DecoderLayer, state: IndexedCache, reading: Reading) -> Attended:
    index_q, index_w = index_queries(reading.x, layer.kernel_params)  # (1, HI, dI), (1, HI)
    out = dsa_attend(reading.q, reading.keys, reading.values, None, layer.scale, reading.bias, layer.null_key,
                     layer.kernel_params, index_q, index_w, state.index_k)  # (nh, 1, t) rows
    return Attended(out.weights, out.mixed, out.logits)


INDEXED_CACHE = Decoder(
    "kv cache + indexer keys", _start_indexed, _keep_indexed, _attend_indexed,
    lambda state: ((N_("K cache"), state.cache.k), (N_("V cache"), state.cache.v),
                   (N_("indexer keys kᴵ"), state.index_k[None])),
    words=N_("a **KV cache** plus one **indexer key** kᴵ per token; each step's indexer scores every cached token "
             "and the row ({weights}) reads only the top-k keys"),
    size_words=N_("the keys and values of every token, as softmax heads do, plus the indexer's key: {numbers} "
                  "numbers per token"),
    size_values=lambda c: {"numbers": 2 * c.key_value_heads * c.head_size + INDEX_SIZE})

BLOCK_CACHE = Decoder(
    "kv cache (blocks)", KV_CACHE.start, KV_CACHE.keep, KV_CACHE.attend, KV_CACHE.held,
    words=N_("a **KV cache**, as softmax heads do (a block's mean key is taken from it); each step's row ({weights}) "
             "reads only the keys of its own block and of the top-k earlier blocks"),
    size_words=KV_CACHE.size_words, size_values=KV_CACHE.size_values)


# ---- the rows --------------------------------------------------------------------------------


def _sparse_refusals(what: Message) -> tuple[Refusal, ...]:
    """What MoBA and DSA cannot run with: a latent, a mask other than causal, a second sentence, a top-k or block size
    out of range. Each fix also sets the causal mask, so that one fix leaves nothing refused."""
    refusals = (
        no_latent(what),
        Refusal("kv_tokens", Message(N_("{what} chooses among a sentence's own earlier tokens: remove the key/value "
                                        "sentence (self-attention)"), what=what),
                lambda c: getattr(c, "kv_tokens", None) is not None, {"kv_tokens": None}),
        Refusal("sparse_topk", Message(N_("top-k must be a whole number from 1 to {high}"), high=MAX_SPARSE),
                lambda c: not _in_range(getattr(c, "sparse_topk", 2)), {"sparse_topk": 2}),
        Refusal("sparse_block", Message(N_("the block size must be a whole number from 1 to {high}"), high=MAX_SPARSE),
                lambda c: not _in_range(getattr(c, "sparse_block", 2)), {"sparse_block": 2}),
        Refusal("mask", Message(N_("{what} chooses among earlier keys (it is causal): choose the causal mask"),
                                what=what), lambda c: getattr(c, "mask", "causal") != "causal", {}),
    )
    return tuple(replace(r, fix={**r.fix, "mask": "causal"}) for r in refusals)


def _in_range(value) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and 1 <= value <= MAX_SPARSE


_MOBA = Message(N_("MoBA"))
_DSA = Message(N_("DeepSeek Sparse Attention"))
SPARSE_INPUTS_CAPTION = N_("Colour = the score after scaling and masking, centred on 0 (red above, blue below). Grey "
                           "cells are masked (−∞): the causal mask's, and every key the selection did not keep; the "
                           "softmax gives them weight 0.")


def _sparse_inputs(stem: str) -> WeightInputs:
    return WeightInputs(("",), lambda logits, parts: (np.where(parts.kept, logits, -np.inf),),
                        N_("scaled logits of the kept keys"), N_("logits"),
                        N_("scaled, masked logit"), SPARSE_INPUTS_CAPTION, stem)


MOBA = Kernel(
    "moba", N_("MoBA (block top-k)"), N_("MoBA"),
    N_("Keys are cut into blocks; each query keeps its own block and the earlier blocks whose mean key matches it "
       "best, k blocks in all, and takes a softmax over their keys only."),
    rows_sum_to_one=True, row_sums=N_("each row sums to 1 over the keys it keeps"), signed=False, attend=moba_kernel,
    refuses=_sparse_refusals(_MOBA), paper="Lu et al. 2025", decoder=BLOCK_CACHE,
    formula="A = softmax(QKᵀ/√d_k over the top-k blocks by q·mean(K_b))",
    weights_label=N_("weights (MoBA, kept blocks)"), inputs=_sparse_inputs("moba_logits"),
    params=lambda c: MobaParams(c.sparse_block, c.sparse_topk), steps=("moba_gate", "sparse_keep"),
    tunes=("sparse_block", "sparse_topk"), heads_sections=("sparse_keep",), softmax_rows=True)

DSA = Kernel(
    "dsa", N_("DeepSeek Sparse Attention (indexer top-k)"), N_("DSA"),
    N_("A small lightning indexer scores every earlier token from the layer's input; each query keeps its k "
       "best keys (the same for every head) and takes a softmax over them only."),
    rows_sum_to_one=True, row_sums=N_("each row sums to 1 over the keys it keeps"), signed=False, attend=dsa_kernel,
    refuses=_sparse_refusals(_DSA), paper="DeepSeek-AI 2025 (DeepSeek-V3.2)", decoder=INDEXED_CACHE,
    formula="I_ts = Σ_j w_tj·ReLU(qᴵ_tj·kᴵ_s); A = softmax(QKᵀ/√d_k over the top-k keys by I)",
    weights_label=N_("weights (DSA, kept keys)"), inputs=_sparse_inputs("dsa_logits"), reads_input=True,
    params=lambda c: indexer_params(c.d_model, c.seed, c.sparse_topk), steps=("dsa_index", "sparse_keep"),
    tunes=("sparse_topk",), heads_sections=("sparse_keep",), softmax_rows=True)
