"""Head roles with honest scores: what each head of a causal model does on a random sequence repeated twice.

The probe is n random ordinary tokens followed by the same n tokens again (2n positions, i = 0..2n-1), so no
role can come from the meaning of the text, and each role names the keys it reads:

    previous-token   query i (i >= 1) on key i - 1
    induction        query i of the second copy (i >= n) on key i - n + 1, the token after its earlier occurrence
    duplicate-token  query i of the second copy on key i - n, its own earlier occurrence
    first-token      query i (i >= 1) on key 0, whatever token is there (an attention sink)
    local window     query i (i >= W - 1) on keys i - W + 1..i, itself and the W - 1 before it

A head's score for a role is the mean, over those queries, of the weight on those keys (0..1). A head gets
the role of its highest score only when that score reaches ``THRESHOLD``; otherwise it has no clear role.
The local window contains key i - 1, so a previous-token head scores at least as high there: when both reach
the threshold the head is called previous-token, the narrower role. ``uniform_scores`` are what a head that spreads its weight evenly over
the keys it may see would score: the threshold is set well above the largest of them.

Shapes: L layers, nh heads, T = 2n positions (``mha_core``'s glossary).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.marks import N_

THRESHOLD = 0.4  # a role is named when its score is at least this (the reason: ``uniform_scores`` and the page)
LOCAL_WINDOW = 4  # W: the token itself and the 3 before it


def role_positions(role: str, half: int) -> tuple[np.ndarray, np.ndarray]:
    """The queries of ``role`` on a sequence of 2 * ``half`` tokens and, for each, the keys it names.

    -> (queries (q,), keys (q, k)): keys[r] are the key positions read by queries[r].
    """
    t = 2 * half
    if role == "previous":
        queries = np.arange(1, t)
        return queries, (queries - 1)[:, None]
    if role == "induction":
        queries = np.arange(half, t)
        return queries, (queries - half + 1)[:, None]
    if role == "duplicate":
        queries = np.arange(half, t)
        return queries, (queries - half)[:, None]
    if role == "first":
        queries = np.arange(1, t)
        return queries, np.zeros((t - 1, 1), dtype=int)
    if role == "local":
        queries = np.arange(LOCAL_WINDOW - 1, t)
        return queries, queries[:, None] - np.arange(LOCAL_WINDOW)[None, :]
    raise ValueError(f"unknown role {role!r}: choose one of {', '.join(ROLES)}")


@dataclass(frozen=True)
class Role:
    """One role: its key, its name, how its score is defined, and what to look for in a heatmap."""

    key: str
    name: str
    definition: str
    look_for: str


ROLES = {role.key: role for role in (
    Role("previous", N_("previous-token"), N_("mean over queries i = 1..2n−1 of the weight on key i − 1"),
         N_("a bright line just below the diagonal: every token looks one step back.")),
    Role("induction", N_("induction"),
         N_("mean over queries i = n..2n−1 of the weight on key i − n + 1, the token after the earlier copy"),
         N_("in the second copy, a stripe parallel to the diagonal, n − 1 columns to its left: each token looks at "
            "what followed it last time, and the model then predicts it.")),
    Role("duplicate", N_("duplicate-token"), N_("mean over queries i = n..2n−1 of the weight on key i − n, "
                                                "its own earlier occurrence"),
         N_("in the second copy, a stripe n columns to the left of the diagonal: each token finds itself earlier.")),
    Role("first", N_("first-token (sink)"), N_("mean over queries i = 1..2n−1 of the weight on key 0"),
         N_("a bright first column: weight parked on token 0 whatever it is, usually a head with nothing better to "
            "read.")),
    Role("local", N_("local window"), N_("mean over queries i = 3..2n−1 of the weight on keys i − 3..i"),
         N_("a band along the diagonal a few cells wide: each token reads its close neighbours.")),
)}
NO_ROLE = N_("no clear role")


def role_scores(attentions: np.ndarray, half: int) -> dict[str, np.ndarray]:
    """Every role's score for every head: attentions (L, nh, 2n, 2n) on the repeated sequence -> role -> (L, nh)."""
    scores = {}
    for key in ROLES:
        queries, keys = role_positions(key, half)
        weights = attentions[:, :, queries[:, None], keys]  # (L, nh, q, k)
        scores[key] = weights.sum(axis=-1).mean(axis=-1)  # (L, nh)
    return scores


def uniform_scores(half: int) -> dict[str, float]:
    """Each role's score for a head that spreads its weight evenly over keys 0..i (the causal mask's keys)."""
    t = 2 * half
    uniform = np.tri(t) / np.arange(1, t + 1)[:, None]  # (T, T): row i is 1/(i+1) on keys 0..i
    return {key: float(score[0, 0]) for key, score in role_scores(uniform[None, None], half).items()}


def assign_roles(scores: dict[str, np.ndarray], threshold: float = THRESHOLD) -> np.ndarray:
    """Each head's role key, or "" for no clear role, (L, nh): the role of its highest score if that score reaches
    ``threshold``; where that is the local window and the previous-token score reaches it too, previous-token
    (the window contains key i − 1, so such a head scores at least as high there)."""
    keys = list(ROLES)
    stacked = np.stack([scores[key] for key in keys])  # (roles, L, nh)
    best = stacked.argmax(axis=0)  # (L, nh)
    roles = np.where(stacked.max(axis=0) >= threshold, np.array(keys)[best], "")  # (L, nh)
    return np.where((roles == "local") & (scores["previous"] >= threshold), "previous", roles)
