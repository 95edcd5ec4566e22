"""What-ifs on SmolLM2's trained weights (issue 36): change one choice of its attention at inference time and
read the next-token loss. Pure NumPy.

- **Sparse selection.** In the chosen layers each query keeps only its k keys of highest logit (SmolLM2's own
  q.k, scaled, after RoPE; ``mha_core.sparse.top_k_of``, ties to the earlier key) and the softmax runs over those
  alone. k ≥ the number of keys a query sees is the dense model exactly. The layers before the first chosen one are
  the clean run's; the rest run again.
- **MoBA's block selection** (``mha_core.sparse.moba_kernel``, no parameters, so it applies to trained weights as
  they are): keys in blocks of B = ``MOBA_BLOCK``, each query keeps its own block and its best earlier blocks by
  q . mean(K of the block), ``blocks`` in all.
- **Sinks without the sink token.** In every layer and head the first token's column is dropped (its logit set to
  -inf) and the softmax runs over the other keys, with or without a learned sink logit s_h per head in the gpt-oss
  form (``mha_core.sink_kernel.sink_softmax``: exp(L_ij) / (exp(s_h) + Σ_j exp(L_ij))). s_h = 0 is the null key.
  The fitted s_h gives back the head's mean weight on the first token m_h over a text's queries 1..T-1 in the clean
  run: with r_i = log Σ_{j≥1} exp(L_ij) of row i, the sink's share of row i is σ(s − r_i), and
  mean_i σ(s − r_i) = m_h has one root (the mean rises with s), found by bisection to 1e-12. A closed form exists
  per row only (s = L_i0, the dropped logit itself); over many rows the root is the fit.

Query 0 sees only the first token: without it its row is empty (weights 0, its head output 0) unless a sink
takes it all. Shapes: T tokens, C = 576, nh = 9 query heads, kv = 3, L = 30 layers (``mha_core``'s glossary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from mha_core.attention import AttentionTrace
from mha_core.sink_kernel import sink_softmax
from mha_core.smollm2 import SmolLM2, rms_norm, self_attention
from mha_core.smollm2_runs import SmolRun
from mha_core.sparse import MobaParams, moba_kernel, top_k_of
from mha_core.steps import apply_mask, merge_heads, output_projection, softmax, weighted_sum

CALIBRATION_TEXT = (
    "The river rises in the hills above the town and runs south through farms and woods until it reaches the sea. "
    "In spring the water is high and fast; in late summer children can wade across it at the old ford below the "
    "mill. The mill was built in 1820, burned down twice, and now holds a small museum about the river and the "
    "people who worked beside it."
)  # ~75 tokens of plain prose, not any prompt the tests use
SWEEP_K = (1, 2, 4, 8, 16, 32, 64)  # keys kept per query in the sweep (the prompt has at most 128 tokens)
MOBA_BLOCK = 8  # B: MoBA's block size on SmolLM2 (MoBA itself uses blocks of 512 and more on long contexts)
SWEEP_BLOCKS = (1, 2, 4, 8, 16)  # blocks kept per query: at most 8, 16, 32, 64, 128 keys
SINK_VARIANTS = ("with", "without", "fitted", "null")  # the first token kept; dropped; dropped + fitted s_h; + s_h = 0
BISECTION_STEPS = 200

Progress = Callable[[int, int], None]  # (done, total)


def sparse_weights(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Softmax over each row's k largest finite logits only. (nh,T,T) -> (weights (nh,T,T), kept (nh,T,T) bool)."""
    kept = top_k_of(logits, k, np.isfinite(logits))  # (nh, T, T): at most k per row, never a masked key
    return softmax(apply_mask(logits, kept), axis=-1), kept  # (nh, T, T), rows sum to 1


def drop_first(logits: np.ndarray) -> np.ndarray:
    """The logits with the first key's column set to -inf. (nh,T,T) -> (nh,T,T)."""
    dropped = logits.copy()  # (nh, T, T)
    dropped[:, :, 0] = -np.inf
    return dropped


def moba_weights(trace: AttentionTrace, block: int, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """MoBA's selection on a layer's trace (``mha_core.sparse.moba_kernel``: each query's own block and its best earlier
    ones by q . mean(K of the block), ``blocks`` in all) -> (weights (nh,T,T), kept (nh,T,T) bool)."""
    t = trace.q.shape[1]
    out = moba_kernel(trace.q, trace.k, trace.v, np.tri(t, dtype=bool), trace.scale, params=MobaParams(block, blocks))
    return out.weights, out.parts.kept  # (nh, T, T) x2


def attention_with(model: SmolLM2, x: np.ndarray, index: int,
                   weights_of: Callable[[np.ndarray], np.ndarray], *, whole_trace: bool = False) -> np.ndarray:
    """Layer ``index`` on the stream x (T, C) with the attention weights ``weights_of(logits (nh,T,T))`` (of the whole
    ``AttentionTrace`` when ``whole_trace``). -> (T, C)."""
    attention = model.layers[index].attention()  # dequantized now
    trace = self_attention(rms_norm(x, model.layers[index].attn_norm, model.config.eps), attention, model.config)
    heads = weighted_sum(weights_of(trace if whole_trace else trace.logits), trace.v)  # (nh, T, hs)
    out = output_projection(merge_heads(heads), attention.w_o, attention.b_o)  # (T, C)
    return model.after_attention(x, out, index)  # (T, C)


def _run_from(model: SmolLM2, run: SmolRun, changed: dict[int, Callable], whole_trace: bool = False) -> np.ndarray:
    """The loss on each next token (T-1,) with layer l's weights made by ``changed[l]``, from the first changed layer."""
    if not changed:
        return model.prompt_losses(run)
    first = min(changed)
    x = run.layers[first].input  # (T, C): the layers before are the clean run's
    for index in range(first, model.config.n_layers):
        if index in changed:
            x = attention_with(model, x, index, changed[index], whole_trace=whole_trace)
        else:
            x = model.layer(x, index, keep_trace=False).output  # (T, C)
    return model.read_out(model.norm(x), run.token_ids)[0]  # (T-1,)


def checked_layers(layers: Iterable[int], n_layers: int) -> tuple[int, ...]:
    """The layers sorted, once each; ValueError for one that does not exist."""
    chosen = tuple(sorted({int(layer) for layer in layers}))
    if any(not 0 <= layer < n_layers for layer in chosen):
        raise ValueError(f"layers must lie in 0..{n_layers - 1}, got {list(chosen)}")
    return chosen


def sparse_losses(model: SmolLM2, run: SmolRun, layers: Iterable[int], k: int) -> np.ndarray:
    """The loss on each next token of ``run``'s prompt (T-1,) with top-k attention in ``layers``."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    chosen = checked_layers(layers, model.config.n_layers)
    return _run_from(model, run, {layer: (lambda logits: sparse_weights(logits, k)[0]) for layer in chosen})


def moba_losses(model: SmolLM2, run: SmolRun, layers: Iterable[int], blocks: int,
                block: int = MOBA_BLOCK) -> np.ndarray:
    """The loss on each next token of ``run``'s prompt (T-1,) with MoBA (``blocks`` blocks of ``block``) in ``layers``."""
    if blocks < 1 or block < 1:
        raise ValueError(f"MoBA needs at least 1 block of at least 1 key, got {blocks} blocks of {block}")
    chosen = checked_layers(layers, model.config.n_layers)
    return _run_from(model, run, {layer: (lambda trace: moba_weights(trace, block, blocks)[0]) for layer in chosen},
                     whole_trace=True)


def selection(method: str, k: int) -> Callable[[AttentionTrace], tuple[np.ndarray, np.ndarray]]:
    """trace -> (weights, kept) of ``method`` "topk" (k keys) or "moba" (k blocks of ``MOBA_BLOCK``)."""
    if method == "topk":
        return lambda trace: sparse_weights(trace.logits, k)
    if method == "moba":
        return lambda trace: moba_weights(trace, MOBA_BLOCK, k)
    raise ValueError(f"method {method!r} is not topk or moba")


def kept_keys(model: SmolLM2, run: SmolRun, layer: int, k: int, sparse_layers: Iterable[int],
              method: str = "topk") -> np.ndarray:
    """The keys each query of each head keeps in ``layer`` (nh, T, T) bool, on the stream the sparse run gives it
    (the sparse layers before ``layer`` change its input); ``method`` "topk" (k keys) or "moba" (k blocks)."""
    chosen, select = checked_layers(sparse_layers, model.config.n_layers), selection(method, k)
    x = run.layers[layer].input  # (T, C)
    earlier = [index for index in chosen if index < layer]
    if earlier:
        x = run.layers[earlier[0]].input  # (T, C)
        for index in range(earlier[0], layer):
            x = (attention_with(model, x, index, lambda trace: select(trace)[0], whole_trace=True) if index in chosen
                 else model.layer(x, index, keep_trace=False).output)  # (T, C)
    attention = model.layers[layer].attention()
    trace = self_attention(rms_norm(x, model.layers[layer].attn_norm, model.config.eps), attention, model.config)
    return select(trace)[1]  # (nh, T, T)


@dataclass(frozen=True)
class SparseSweep:
    """Mean loss (nats) against k: ``ks (n,)``, ``losses (n,)`` with top-k in ``layers``, ``dense`` the clean loss."""

    layers: tuple[int, ...]
    ks: tuple[int, ...]
    losses: np.ndarray
    dense: float

    def __post_init__(self) -> None:
        self.losses.flags.writeable = False


def sparse_sweep(model: SmolLM2, run: SmolRun, layers: Iterable[int], ks: Iterable[int] = SWEEP_K,
                 progress: Progress | None = None) -> SparseSweep:
    """``sparse_losses``' mean for each k of ``ks`` (sorted); ``progress(done, total)`` after each."""
    chosen, ks = checked_layers(layers, model.config.n_layers), tuple(sorted({int(k) for k in ks}))
    losses = []
    for done, k in enumerate(ks, start=1):
        losses.append(_mean(sparse_losses(model, run, chosen, k)))
        if progress is not None:
            progress(done, len(ks))
    return SparseSweep(chosen, ks, np.array(losses), _mean(model.prompt_losses(run)))


def _mean(losses: np.ndarray) -> float:
    return float(losses.mean()) if losses.size else float("nan")


# ---- sinks without the sink token ----


def first_token_mass(run: SmolRun) -> np.ndarray:
    """m_h: each head's mean weight on the first token over queries 1..T-1 of the clean run, (L, nh)."""
    if run.n_tokens < 2:
        raise ValueError("a sink is fitted on at least 2 tokens (query 0 has no choice)")
    return np.stack([layer.weights[:, 1:, 0].mean(axis=-1) for layer in run.layers])  # (L, nh)


def fit_sink(row_log_sums: np.ndarray, mass: float) -> float:
    """The s with mean_i σ(s − r_i) = ``mass`` for the rows' r_i = log Σ_{j≥1} exp(L_ij) (n,), by bisection.

    ``mass`` 0 gives -inf (no sink), 1 gives +inf; the mean rises with s, so the root is unique.
    """
    if mass <= 0.0:
        return -np.inf
    if mass >= 1.0:
        return np.inf
    r = np.asarray(row_log_sums, dtype=np.float64)  # (n,)
    low, high = r.min() + np.log(mass / (1 - mass)) - 1.0, r.max() + np.log(mass / (1 - mass)) + 1.0  # brackets
    for _step in range(BISECTION_STEPS):
        middle = 0.5 * (low + high)
        share = np.mean(0.5 + 0.5 * np.tanh(0.5 * (middle - r)))  # σ without overflow
        low, high = (middle, high) if share < mass else (low, middle)
        if high - low < 1e-12:
            break
    return 0.5 * (low + high)


def row_log_sums(logits: np.ndarray) -> np.ndarray:
    """r_i = log Σ_{j≥1} exp(L_ij) of queries 1..T-1, per head: (nh, T, T) -> (nh, T-1), float64."""
    rest = logits[:, 1:, 1:].astype(np.float64)  # (nh, T-1, T-1)
    peak = rest.max(axis=-1, keepdims=True)  # (nh, T-1, 1): finite, every query i ≥ 1 sees key 1
    return np.log(np.exp(rest - peak).sum(axis=-1)) + peak[..., 0]  # (nh, T-1)


def fit_sinks(model: SmolLM2, run: SmolRun) -> np.ndarray:
    """s_h of every layer and head (L, nh) that gives back m_h (``first_token_mass``) on ``run``'s clean logits."""
    mass = first_token_mass(run)  # (L, nh)
    sinks = np.empty_like(mass, dtype=np.float64)  # (L, nh)
    for index in range(model.config.n_layers):
        _normed, trace, _weights = model.layer_trace(run, index)
        sums = row_log_sums(trace.logits)  # (nh, T-1)
        sinks[index] = [fit_sink(sums[head], mass[index, head]) for head in range(model.config.n_heads)]
    return sinks


def sink_weights(variant: str, sinks: np.ndarray | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """The weights of one ``SINK_VARIANTS`` entry from a layer's logits; ``sinks (nh,)`` for "fitted"."""
    if variant == "with":
        return lambda logits: softmax(logits, axis=-1)
    if variant == "without":
        return lambda logits: softmax(drop_first(logits), axis=-1)
    if variant == "null":
        return lambda logits: sink_softmax(drop_first(logits), np.zeros(logits.shape[0]))
    if variant == "fitted":
        if sinks is None:
            raise ValueError("the fitted variant needs the sinks (nh,)")
        return lambda logits: sink_softmax(drop_first(logits), sinks)
    raise ValueError(f"variant {variant!r} is not one of {', '.join(SINK_VARIANTS)}")


def sink_loss(model: SmolLM2, run: SmolRun, variant: str, sinks: np.ndarray | None = None) -> float:
    """Mean loss on ``run``'s prompt with every layer's weights from ``sink_weights(variant)``; ``sinks (L, nh)``."""
    if variant == "with":
        return _mean(model.prompt_losses(run))
    changed = {index: sink_weights(variant, None if sinks is None else sinks[index])
               for index in range(model.config.n_layers)}
    return _mean(_run_from(model, run, changed))


def sink_losses(model: SmolLM2, run: SmolRun, sinks: np.ndarray,
                progress: Progress | None = None) -> dict[str, float]:
    """``sink_loss`` for each of ``SINK_VARIANTS`` (every layer changed); ``sinks (L, nh)``."""
    losses = {}
    for done, variant in enumerate(SINK_VARIANTS, start=1):
        losses[variant] = sink_loss(model, run, variant, sinks)
        if progress is not None:
            progress(done, len(SINK_VARIANTS))
    return losses


# ---- which heads tolerate sparsity ----


def head_output_change(model: SmolLM2, run: SmolRun, k: int) -> np.ndarray:
    """Per layer and head (L, nh): ‖o_k − o‖ / ‖o‖ (Frobenius over tokens and features) of the head's output o = A·V
    (T, hs) on the clean run's input to its layer, with top-k weights in that head alone. Bounded cost: one attention
    pass per layer, none of the later layers rerun."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    change = np.empty((model.config.n_layers, model.config.n_heads))  # (L, nh)
    for index in range(model.config.n_layers):
        _normed, trace, _weights = model.layer_trace(run, index)
        dense = np.asarray(trace.heads, dtype=np.float64)  # (nh, T, hs)
        sparse = weighted_sum(sparse_weights(trace.logits, k)[0], trace.v).astype(np.float64)  # (nh, T, hs)
        change[index] = (np.linalg.norm((sparse - dense).reshape(dense.shape[0], -1), axis=-1)
                         / np.linalg.norm(dense.reshape(dense.shape[0], -1), axis=-1))
    return change
