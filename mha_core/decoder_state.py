"""What a decoder keeps between tokens: the contract of a kept-state record, and the key/value cache.

The one decoding loop (``mha_core.decoding``) runs, per token, project -> keep (place the token's positions and
store what it leaves behind) -> attend (the new query's row over what is kept). What is kept is a ``Decoder``
record of hooks: this module's ``KV_CACHE`` (the keys, turned at their own positions, and the values), a kernel's
own (``Kernel.decoder``: linear attention's constant-size state), MLA's latent cache (``mha_core.mla``) or a cache
policy's window (``mha_core.cache_policy``). It sits below the kernels and MLA, which define their records with it.

Shapes: ``nh`` query heads, ``kv`` key/value heads, ``hs`` head size, ``hv`` value size, ``t`` tokens kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mha_core.marks import N_
from mha_core.positions import ROPE_BASE
from mha_core.steps import AttentionWeights, apply_positions_per_part


@dataclass(frozen=True)
class DecoderLayer:
    """The layer a decoder runs, with its options resolved: ``kernel`` is a ``mha_core.kernels.Kernel`` record,
    ``scale`` the one factor every step uses, ``mla`` an ``mha_core.mla.MLAWeights`` or None."""

    weights: AttentionWeights
    n_heads: int
    kv_heads: int
    scale: float
    kernel: object
    pe: str = "none"
    rope_base: float = ROPE_BASE
    null_key: bool = False
    kernel_params: object | None = None
    mla: object | None = None


@dataclass(frozen=True)
class NewToken:
    """One token projected: ``x (1,C)``, ``q (nh,1,hs)``, ``k (kv,1,hs)``, ``v (kv,1,hv)`` (k and v None when
    keys and values come from a latent), at ``position``."""

    position: int
    x: np.ndarray
    q: np.ndarray
    k: np.ndarray | None
    v: np.ndarray | None


@dataclass(frozen=True)
class Reading:
    """What the new query reads after ``keep``: ``q (nh,1,hs)`` placed, and for a cache of keys the ``keys (kv,n,hs)``,
    ``values (kv,n,hv)`` and ``bias (nh,1,n)`` it attends over (None where the decoder reads something else)."""

    q: np.ndarray
    keys: np.ndarray | None = None
    values: np.ndarray | None = None
    bias: np.ndarray | None = None
    x: np.ndarray | None = None  # the query token's input (1, C), for a kernel that reads it (``reads_input``)


@dataclass(frozen=True)
class Attended:
    """One query row: ``weights (nh,1,n)`` over the n kept tokens, ``logits (nh,1,n)`` (None when the kernel forms
    none), ``heads (nh,1,hv)``: what the heads concatenate."""

    weights: np.ndarray
    heads: np.ndarray
    logits: np.ndarray | None = None


@dataclass(frozen=True)
class Decoder:
    """What a decoder keeps per token and how one step reads it, as hooks the loop calls.

    ``start(layer, dtype)`` -> the empty state; ``keep(layer, state, token)`` -> (the state with the token in,
    its ``Reading``); ``attend(layer, state, reading)`` -> ``Attended``; ``held(state)`` -> the kept arrays by
    name. Words for the Decoding page, marked with ``N_`` and translated where shown: ``words`` says what is kept
    (``{weights}`` stands for the kernel's ``weights_label``); ``size_words`` what it costs, its ``{placeholders}``
    filled by ``size_values(config)`` from a layer's dimensions (``head_size``, ``key_value_heads``, ``mla_rank``,
    ``mla_rope``). ``sizes(config)``: the same in English, for a record that gives no ``size_words``.
    """

    name: str
    start: Callable[[DecoderLayer, np.dtype], object]
    keep: Callable[[DecoderLayer, object, NewToken], tuple[object, Reading]]
    attend: Callable[[DecoderLayer, object, Reading], Attended]
    held: Callable[[object], tuple[tuple[str, np.ndarray], ...]]
    words: str = ""
    sizes: Callable[[object], str] = lambda config: ""
    size_words: str = ""
    size_values: Callable[[object], dict] = lambda config: {}

    def sizes_in(self, config, translate: Callable[[str], str] = str) -> str:
        """What the kept state costs for ``config``, its words passed through ``translate`` (the page's ``_``)."""
        if not self.size_words:
            return self.sizes(config)
        return translate(self.size_words).format(**self.size_values(config))


@dataclass(frozen=True)
class KVCache:
    """The keys and values of the tokens decoded so far; arrays are read-only.

    ``k (kv, t, hs)`` (rotated when RoPE is on), ``v (kv, t, hv)``: t tokens, kv key/value heads.
    A step returns a new cache and leaves this one as it was.
    """

    k: np.ndarray
    v: np.ndarray

    def __post_init__(self) -> None:
        self.k.setflags(write=False)
        self.v.setflags(write=False)

    @property
    def length(self) -> int:
        """Tokens cached, t."""
        return self.k.shape[1]

    @property
    def numbers(self) -> int:
        """Numbers held: kv * t * (hs + hv)."""
        return self.k.size + self.v.size

    @property
    def nbytes(self) -> int:
        """Bytes held: numbers * bytes per number (4 in float32, 8 in float64)."""
        return self.k.nbytes + self.v.nbytes

    def append(self, k_new: np.ndarray, v_new: np.ndarray) -> KVCache:
        """A cache one token longer: (kv, 1, hs), (kv, 1, hv) added at the end."""
        return KVCache(np.concatenate([self.k, k_new], axis=1), np.concatenate([self.v, v_new], axis=1))


def empty_cache(kv_heads: int, head_size: int, value_size: int, dtype=np.float64) -> KVCache:
    """A cache holding no token yet: k (kv, 0, hs), v (kv, 0, hv)."""
    return KVCache(np.empty((kv_heads, 0, head_size), dtype=dtype), np.empty((kv_heads, 0, value_size), dtype=dtype))


def attend_over_keys(layer: DecoderLayer, state, reading: Reading) -> Attended:
    """The kernel's own ``attend`` on the keys and values the query reads: the row any kernel's full attention gives."""
    given = {"x": reading.x} if layer.kernel.reads_input else {}  # (1, C): the query token's input
    out = layer.kernel.attend(reading.q, reading.keys, reading.values, None, layer.scale, reading.bias,
                              layer.null_key, layer.kernel_params, **given)  # (nh, 1, n) x2, (nh, 1, hv)
    return Attended(out.weights, out.mixed, out.logits)


def _start_cache(layer: DecoderLayer, dtype) -> KVCache:
    w = layer.weights
    return empty_cache(layer.kv_heads, w.w_k.shape[1] // layer.kv_heads, w.w_v.shape[1] // layer.kv_heads, dtype)


def _keep_in_cache(layer: DecoderLayer, cache: KVCache, token: NewToken) -> tuple[KVCache, Reading]:
    """Turn the new q and k at the token's position (each sub-head on its own), add k and v to the cache."""
    here = np.array([token.position])  # (1,) where the new token stands
    placed = apply_positions_per_part(layer.pe, token.q, token.k, here, here, layer.rope_base,
                                      layer.kernel.sub_heads, key_positions=np.arange(token.position + 1))
    cache = cache.append(placed.k, token.v)  # k (kv, t+1, hs), v (kv, t+1, hv)
    return cache, Reading(placed.q, cache.k, cache.v, placed.bias)  # q (nh,1,hs); bias (nh,1,t+1) at most


KV_CACHE = Decoder(
    "kv cache", _start_cache, _keep_in_cache, attend_over_keys,
    lambda cache: ((N_("K cache"), cache.k), (N_("V cache"), cache.v)),
    words=N_("a **KV cache**, as softmax heads do; each step's row ({weights}) is taken over the whole cache"),
    size_words=N_("the keys and values of every token, as softmax heads do: {numbers} numbers per token"),
    size_values=lambda c: {"numbers": 2 * c.key_value_heads * c.head_size})
