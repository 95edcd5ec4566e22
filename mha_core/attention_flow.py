"""Attention rollout and attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"). Pure NumPy.

Both read only the attention weights, averaged over the heads of a layer, with the residual connection added as
the paper does: Â_l = 0.5 · mean_h A_l + 0.5 · I (rows still sum to 1).

- **Rollout**: Ã_l = Â_l · Ã_(l-1), Ã_0 = Â_0. Row i of Ã_l says how much of token i's vector after layer l
  comes from each input token, if mixing were only these matrices, multiplied through.
- **Flow**: the layers as a graph, one node per (layer boundary, token), an edge from token i after layer l to
  token j before it with capacity Â_l[i, j]; the flow from i after layer l to input j is the maximum flow
  between those two nodes (``max_flow``: Dinic's algorithm, written here; tests/ check it against networkx).

Max-flow is costly, so flow is computed only for prompts of at most ``MAX_FLOW_TOKENS`` tokens.
Shapes: L layers, nh heads, T tokens.
"""

from __future__ import annotations

from collections import deque

import numpy as np

RESIDUAL = 0.5  # the paper's weight of the identity (the residual connection) in Â
MAX_FLOW_TOKENS = 12  # T² max-flows over a graph of (L+1)·T nodes: ~1 s at 12 tokens and 30 layers, here
EPS = 1e-12  # a capacity at or below this counts as used up


def residual_attention(attentions: np.ndarray, residual: float = RESIDUAL) -> np.ndarray:
    """Â_l = (1 − r) · mean over heads of A_l + r · I for every layer: (L, nh, T, T) -> (L, T, T), rows sum to 1."""
    mean = np.asarray(attentions, dtype=np.float64).mean(axis=1)  # (L, T, T)
    return (1.0 - residual) * mean + residual * np.eye(mean.shape[-1])  # (L, T, T)


def rollout(attentions: np.ndarray, residual: float = RESIDUAL) -> np.ndarray:
    """Rollout after every layer: (L, nh, T, T) -> (L, T, T); entry [l, i, j] is input j's share in token i
    after layer l (rows sum to 1)."""
    augmented = residual_attention(attentions, residual)  # (L, T, T)
    rolled = np.empty_like(augmented)
    rolled[0] = augmented[0]
    for layer in range(1, len(augmented)):
        rolled[layer] = augmented[layer] @ rolled[layer - 1]  # (T, T)
    return rolled


def max_flow(n_nodes: int, edges: list[tuple[int, int, float]], source: int, sink: int) -> float:
    """The maximum flow from ``source`` to ``sink`` over directed ``edges`` (u, v, capacity) (Dinic's algorithm:
    breadth-first levels, then augmenting paths that climb one level at a time, until the sink is cut off)."""
    heads: list[list[int]] = [[] for _n in range(n_nodes)]
    to, capacity = [], []
    for u, v, c in edges:
        for a, b, cap in ((u, v, float(c)), (v, u, 0.0)):  # edge 2k and its reverse 2k + 1
            heads[a].append(len(to))
            to.append(b)
            capacity.append(cap)
    total = 0.0
    while True:
        level = _levels(heads, to, capacity, source, n_nodes)
        if level[sink] < 0:
            return total
        next_edge = [0] * n_nodes
        while (pushed := _augment(heads, to, capacity, level, next_edge, source, sink, np.inf)) > EPS:
            total += pushed


def _levels(heads, to, capacity, source: int, n_nodes: int) -> list[int]:
    """Each node's distance from the source over edges with capacity left (-1: unreachable)."""
    level = [-1] * n_nodes
    level[source] = 0
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for e in heads[u]:
            if capacity[e] > EPS and level[to[e]] < 0:
                level[to[e]] = level[u] + 1
                queue.append(to[e])
    return level


def _augment(heads, to, capacity, level, next_edge, u: int, sink: int, pushed: float) -> float:
    """One augmenting path from u to the sink along increasing levels; the amount sent (0: none left)."""
    if u == sink:
        return pushed
    while next_edge[u] < len(heads[u]):
        e = heads[u][next_edge[u]]
        v = to[e]
        if capacity[e] > EPS and level[v] == level[u] + 1:
            sent = _augment(heads, to, capacity, level, next_edge, v, sink, min(pushed, capacity[e]))
            if sent > EPS:
                capacity[e] -= sent
                capacity[e ^ 1] += sent
                return sent
        next_edge[u] += 1
    return 0.0


def flow_graph(augmented: np.ndarray) -> tuple[int, list[tuple[int, int, float]]]:
    """The layer graph of Â (L, T, T): node l·T + t is token t before layer l (l = L: after the last layer);
    an edge from token i after layer l to token j before it with capacity Â_l[i, j] (zero weights: no edge)."""
    n_layers, t, _t = augmented.shape
    edges = [((layer + 1) * t + i, layer * t + j, float(augmented[layer, i, j]))
             for layer in range(n_layers) for i in range(t) for j in range(t) if augmented[layer, i, j] > 0]
    return (n_layers + 1) * t, edges


def flow(attentions: np.ndarray, queries=None, residual: float = RESIDUAL) -> np.ndarray:
    """Attention flow from tokens after the last layer to every input token: (L, nh, T, T) -> (q, T).

    ``queries``: the output tokens (default all, in order); row r is the max-flow from token queries[r] after the
    last layer to each input token. ValueError past ``MAX_FLOW_TOKENS`` tokens.
    """
    t = attentions.shape[-1]
    if t > MAX_FLOW_TOKENS:
        raise ValueError(f"attention flow takes {t}² max-flows at {t} tokens: at most {MAX_FLOW_TOKENS} tokens here")
    augmented = residual_attention(attentions, residual)  # (L, T, T)
    n_nodes, edges = flow_graph(augmented)
    top = len(augmented) * t  # node of token 0 after the last layer
    queries = range(t) if queries is None else queries
    return np.array([[max_flow(n_nodes, edges, top + i, j) for j in range(t)] for i in queries])  # (q, T)
