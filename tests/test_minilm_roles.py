"""Head roles of MiniLM, a bidirectional encoder (mha_core.head_roles' ENCODER_ROLES, mha_core.minilm_roles):
each score against its definition written here as a loop; hand-made heads whose role is known; the spread-evenly
baseline; and the scores against the same definitions computed on transformers' own BertModel attentions
(output_attentions) for the same probe, within 1e-5."""

from __future__ import annotations

import os

import numpy as np
import pytest

from mha_core import head_roles as hr
from mha_core import minilm_roles as mr

HALF = 24
T = 2 * HALF + 2  # [CLS], two copies, [SEP]


def definitions(attentions: np.ndarray, half: int) -> dict[str, np.ndarray]:
    """Every encoder role's score (..., L, nh) from the definitions on the page, one query at a time."""
    t = attentions.shape[-1]
    picks = {
        "previous": [(i, [i - 1]) for i in range(1, t)],
        "next": [(i, [i + 1]) for i in range(0, t - 1)],
        "duplicate": [(i, [i + half if i <= half else i - half]) for i in range(1, 2 * half + 1)],
        "cls": [(i, [0]) for i in range(1, t)],
        "sep": [(i, [t - 1]) for i in range(0, t - 1)],
        "local": [(i, [i - 2, i - 1, i, i + 1, i + 2]) for i in range(2, t - 2)],
    }
    return {role: sum(attentions[..., i, keys].sum(axis=-1) for i, keys in chosen) / len(chosen)
            for role, chosen in picks.items()}


def test_encoder_scores_equal_their_definitions_on_random_heads():
    rng = np.random.default_rng(3)
    raw = rng.random((2, 3, T, T))
    attentions = raw / raw.sum(axis=-1, keepdims=True)  # (2, 3, T, T): every key visible
    ours = hr.role_scores(attentions, HALF, hr.ENCODER_ROLES)
    assert list(ours) == ["previous", "next", "duplicate", "cls", "sep", "local"]
    for role, expected in definitions(attentions, HALF).items():
        np.testing.assert_allclose(ours[role], expected, atol=1e-12, rtol=0, err_msg=role)


def one_key(keys_of) -> np.ndarray:
    weights = np.zeros((T, T))
    for i in range(T):
        weights[i, keys_of(i) % T] = 1.0
    return weights


def test_known_encoder_heads_get_their_role():
    window = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :]) <= 2  # (T, T): keys i-2..i+2
    heads = {
        "previous": one_key(lambda i: i - 1),
        "next": one_key(lambda i: i + 1),
        "duplicate": one_key(lambda i: i + HALF if 1 <= i <= HALF else i - HALF if HALF < i <= 2 * HALF else 0),
        "cls": one_key(lambda i: 0),
        "sep": one_key(lambda i: T - 1),
        "local": window / window.sum(axis=1, keepdims=True),
        "": np.full((T, T), 1.0 / T),
    }
    attentions = np.stack([list(heads.values())])  # (1, 7, T, T)
    roles = hr.assign_roles(hr.role_scores(attentions, HALF, hr.ENCODER_ROLES), roles=hr.ENCODER_ROLES)
    assert list(roles[0]) == list(heads)


def test_next_token_wins_over_the_window_that_contains_it():
    scores = {key: np.zeros((1, 3)) for key in hr.ENCODER_ROLES}
    scores["local"][0] = [0.9, 0.9, 0.9]
    scores["next"][0] = [0.5, 0.3, 0.45]
    scores["previous"][0] = [0.1, 0.3, 0.41]
    assert list(hr.assign_roles(scores, roles=hr.ENCODER_ROLES)[0]) == ["next", "local", "next"]


def test_encoder_threshold_is_above_a_spread_evenly_head():
    uniform = hr.uniform_scores(HALF, hr.ENCODER_ROLES, T, causal=False)
    assert uniform["local"] == pytest.approx(5 / T, rel=1e-12)
    assert uniform["cls"] == pytest.approx(1 / T, rel=1e-12)
    assert max(uniform.values()) < hr.THRESHOLD


def test_the_probe_is_cls_two_copies_sep(model):
    probe = mr.run_probe(model, HALF, seed=0)
    assert probe.tokens[0] == "[CLS]" and probe.tokens[-1] == "[SEP]"
    assert probe.tokens[1:HALF + 1] == probe.tokens[HALF + 1:-1]
    assert len(set(probe.tokens[1:HALF + 1])) == HALF
    assert not any(token.startswith("##") or token.startswith("[") for token in probe.tokens[1:-1])
    assert probe.attentions.shape == (6, 12, T, T)


def test_encoder_role_scores_equal_their_definitions_on_transformers_attentions(model):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    bert = transformers.BertModel.from_pretrained(str(model.source.directory), attn_implementation="eager").eval()
    probe = mr.run_probe(model, HALF, seed=0)
    with torch.no_grad():
        out = bert(input_ids=torch.tensor(probe.token_ids)[None], output_attentions=True)
    theirs = torch.stack(out.attentions)[:, 0].double().numpy()  # (L, nh, T, T)
    ours = mr.encoder_role_scores(probe)
    expected = definitions(theirs, HALF)
    for role in hr.ENCODER_ROLES:
        np.testing.assert_allclose(ours[role], expected[role], atol=1e-5, rtol=0, err_msg=role)
    assert expected["previous"].max() > hr.THRESHOLD  # MiniLM has a previous-token head to find
