"""Head roles of MiniLM (a bidirectional encoder): the repeated random probe between [CLS] and [SEP], run through
the model, scored by ``mha_core.head_roles``' encoder table.

The probe: [CLS], n random whole-word pieces (never a '##' continuation, never a control token), the same n again,
[SEP]: T = 2n + 2 positions. Shapes: L layers, nh heads, T positions (``mha_core``'s glossary).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core import head_roles as hr
from mha_core.pretrained import MiniLM, embed, encoder_layer

WORDS = (1996, 29612)  # the vocabulary's whole words and their '##' pieces start at id 1996 ('the'); '##' only after


@dataclass(frozen=True)
class EncoderProbe:
    """The probe's ``token_ids (T,)``, ``tokens`` (word pieces), ``half`` n and ``attentions (L, nh, T, T)``."""

    token_ids: np.ndarray
    tokens: tuple[str, ...]
    half: int
    attentions: np.ndarray


def probe_ids(model: MiniLM, half: int, seed: int) -> np.ndarray:
    """[CLS], ``half`` random whole-word pieces, the same again, [SEP]: (2n + 2,) ids."""
    tokenizer = model.tokenizer
    words = [i for i in range(*WORDS) if not tokenizer.id_to_token(i).startswith("##")]
    first = np.random.default_rng(seed).choice(words, size=half, replace=False)  # (n,)
    return np.concatenate([[tokenizer.token_to_id("[CLS]")], first, first, [tokenizer.token_to_id("[SEP]")]])


def run_probe(model: MiniLM, half: int = 24, seed: int = 0) -> EncoderProbe:
    """The probe through every encoder layer (the model's own embedding and layers): its attention weights."""
    ids = probe_ids(model, half, seed).astype(np.int64)  # (T,)
    x = embed(ids, model.embeddings, model.config.eps)  # (T, C)
    weights = []
    for layer in model.layers:
        run = encoder_layer(x, layer, model.config)
        weights.append(run.attention.weights)  # (nh, T, T)
        x = run.output  # (T, C)
    tokens = tuple(model.tokenizer.id_to_token(int(i)) for i in ids)
    return EncoderProbe(ids, tokens, half, np.stack(weights))  # attentions (L, nh, T, T)


def encoder_role_scores(probe: EncoderProbe) -> dict[str, np.ndarray]:
    """Every encoder role's score for every head of MiniLM on ``probe``: role -> (L, nh)."""
    return hr.role_scores(probe.attentions, probe.half, hr.ENCODER_ROLES)
