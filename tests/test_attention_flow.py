"""Attention rollout and flow (mha_core.attention_flow) against references written here from Abnar & Zuidema
(2020): rollout as a product of 0.5·A + 0.5·I, heads averaged; flow as networkx's maximum flow over the layer
graph built here, for a decoder's causal weights and an encoder's full ones."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import attention_flow as af

nx = pytest.importorskip("networkx", reason="networkx is not installed (pip install -r requirements-dev.txt)")


def random_attentions(rng, layers: int, heads: int, t: int, causal: bool) -> np.ndarray:
    raw = rng.random((layers, heads, t, t)) ** 3  # peaked rows
    if causal:
        raw = raw * np.tri(t)
    return raw / raw.sum(axis=-1, keepdims=True)


def paper_rollout(attentions: np.ndarray) -> list[np.ndarray]:
    """The paper's recursion, one layer at a time: Ã(l) = Â(l) Ã(l−1) with Â = 0.5 W_att + 0.5 I, W_att the
    heads' mean."""
    t = attentions.shape[-1]
    out, rolled = [], np.eye(t)
    for layer in attentions:
        a_hat = 0.5 * sum(layer) / len(layer) + 0.5 * np.eye(t)
        rolled = a_hat @ rolled
        out.append(rolled)
    return out


def paper_flow(attentions: np.ndarray) -> np.ndarray:
    """networkx's maximum flow from each output token to each input token over the graph of 0.5 W_att + 0.5 I."""
    n_layers, _h, t, _t = attentions.shape
    graph = nx.DiGraph()
    for layer in range(n_layers):
        a_hat = 0.5 * attentions[layer].mean(axis=0) + 0.5 * np.eye(t)
        for i in range(t):
            for j in range(t):
                if a_hat[i, j] > 0:
                    graph.add_edge(("after", layer, i), ("before", layer, j), capacity=a_hat[i, j])
    for layer in range(1, n_layers):
        for j in range(t):  # token j before layer l is token j after layer l - 1
            graph.add_edge(("before", layer, j), ("after", layer - 1, j), capacity=np.inf)
    return np.array([[nx.maximum_flow_value(graph, ("after", n_layers - 1, i), ("before", 0, j)) for j in range(t)]
                     for i in range(t)])


def test_rollout_of_one_layer_by_hand():
    attentions = np.array([[[[1.0, 0.0], [0.5, 0.5]]]])  # L = 1, nh = 1, T = 2
    np.testing.assert_allclose(af.rollout(attentions)[0], [[1.0, 0.0], [0.25, 0.75]])


@pytest.mark.parametrize("causal", [True, False])
def test_rollout_equals_the_papers_recursion(causal):
    attentions = random_attentions(np.random.default_rng(1), 5, 3, 7, causal)
    rolled = af.rollout(attentions)
    for layer, expected in enumerate(paper_rollout(attentions)):
        np.testing.assert_allclose(rolled[layer], expected, atol=1e-12, rtol=0)
    np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_flow_equals_networkx_max_flow(causal):
    attentions = random_attentions(np.random.default_rng(2), 4, 3, 6, causal)
    np.testing.assert_allclose(af.flow(attentions), paper_flow(attentions), atol=1e-9, rtol=0)


def test_flow_for_chosen_queries_and_its_limit():
    attentions = random_attentions(np.random.default_rng(3), 3, 2, 5, True)
    np.testing.assert_allclose(af.flow(attentions, queries=[4, 1]), af.flow(attentions)[[4, 1]], atol=1e-12)
    too_long = np.ones((1, 1, af.MAX_FLOW_TOKENS + 1, af.MAX_FLOW_TOKENS + 1)) / (af.MAX_FLOW_TOKENS + 1)
    with pytest.raises(ValueError, match="at most"):
        af.flow(too_long)


def test_max_flow_on_a_textbook_graph():
    # s=0, t=3: 0->1 (3), 0->2 (2), 1->2 (1), 1->3 (2), 2->3 (3): max flow 5
    assert af.max_flow(4, [(0, 1, 3), (0, 2, 2), (1, 2, 1), (1, 3, 2), (2, 3, 3)], 0, 3) == pytest.approx(5.0)
