"""Head roles with honest scores: what each head does on a random sequence repeated twice.

The probe is n random ordinary tokens followed by the same n tokens again, so no role can come from the meaning
of the text. A causal model (SmolLM2) reads exactly those 2n positions, i = 0..2n-1; an encoder (MiniLM) reads
them between its [CLS] (position 0) and [SEP] (position T - 1), T = 2n + 2, the copies at 1..n and n+1..2n.
Each role names, for each of its queries, the keys it reads. The causal roles (``ROLES``):

    previous-token   query i (i >= 1) on key i - 1
    induction        query i of the second copy (i >= n) on key i - n + 1, the token after its earlier occurrence
    duplicate-token  query i of the second copy on key i - n, its own earlier occurrence
    first-token      query i (i >= 1) on key 0, whatever token is there (an attention sink)
    local window     query i (i >= W - 1) on keys i - W + 1..i, itself and the W - 1 before it

The encoder's (``ENCODER_ROLES``), where every query sees every key:

    previous-token   query i (i >= 1) on key i - 1
    next-token       query i (i <= T - 2) on key i + 1
    duplicate-token  query i of either copy on the same token in the other copy (i + n or i - n)
    [CLS]            query i (i >= 1) on key 0
    [SEP]            query i (i <= T - 2) on key T - 1
    local window     query i (2 <= i <= T - 3) on keys i - 2..i + 2, itself and two on each side

Induction is not an encoder role here: it is the copy that predicts the next token from what followed the token
last time, and an encoder sees the next token itself (``ENCODER_NO_INDUCTION`` says so on the page).

A head's score for a role is the mean, over those queries, of the weight on those keys (0..1). A head gets
the role of its highest score only when that score reaches ``THRESHOLD``; otherwise it has no clear role.
A local window contains key i - 1 (and i + 1): where it wins and a role it contains (``Role.within``) reaches the
threshold too, the head is named after that narrower role. ``uniform_scores`` are what a head that spreads its
weight evenly over the keys it may see would score: the threshold is set well above the largest of them.

Shapes: L layers, nh heads, T positions (``mha_core``'s glossary).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mha_core.marks import N_

THRESHOLD = 0.4  # a role is named when its score is at least this (the reason: ``uniform_scores`` and the page)
LOCAL_WINDOW = 4  # W: the token itself and the 3 before it (causal)
ENCODER_REACH = 2  # the encoder's window: the token itself and 2 on each side

Positions = Callable[[int, int], tuple[np.ndarray, np.ndarray]]  # (n, T) -> queries (q,), keys (q, k)


def _shifted(offset: int) -> Positions:
    """Every query i whose key i + offset exists, on that key."""
    def positions(half: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        queries = np.arange(max(0, -offset), t - max(0, offset))  # (q,)
        return queries, (queries + offset)[:, None]
    return positions


def _fixed_key(key: Callable[[int], int]) -> Positions:
    """Every other query on one key, ``key(T)``."""
    def positions(half: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        k = key(t)
        queries = np.delete(np.arange(t), k)  # (T - 1,)
        return queries, np.full((t - 1, 1), k)
    return positions


def _second_copy(offset: int) -> Positions:
    """Causal: each query of the second copy (n..2n-1) on key i - n + offset."""
    def positions(half: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        queries = np.arange(half, 2 * half)  # (n,)
        return queries, (queries - half + offset)[:, None]
    return positions


def _window(before: int, after: int) -> Positions:
    """Each query with a full window on keys i - before..i + after."""
    def positions(half: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        queries = np.arange(before, t - after)  # (q,)
        return queries, queries[:, None] + np.arange(-before, after + 1)[None, :]
    return positions


def _other_copy(half: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Encoder: each query of either copy (1..2n) on the same token in the other copy."""
    queries = np.arange(1, 2 * half + 1)  # (2n,)
    return queries, np.where(queries <= half, queries + half, queries - half)[:, None]


@dataclass(frozen=True)
class Role:
    """One role: its key, its name, how its score is defined, what to look for in a heatmap, the keys it reads
    (``positions(n, T)``) and the wider role whose keys contain its own (``within``), if any."""

    key: str
    name: str
    definition: str
    look_for: str
    positions: Positions
    within: str = ""


def _table(*roles: Role) -> dict[str, Role]:
    return {role.key: role for role in roles}


ROLES = _table(
    Role("previous", N_("previous-token"), N_("mean over queries i = 1..2n−1 of the weight on key i − 1"),
         N_("a bright line just below the diagonal: every token looks one step back."), _shifted(-1), "local"),
    Role("induction", N_("induction"),
         N_("mean over queries i = n..2n−1 of the weight on key i − n + 1, the token after the earlier copy"),
         N_("in the second copy, a stripe parallel to the diagonal, n − 1 columns to its left: each token looks at "
            "what followed it last time, and the model then predicts it."), _second_copy(1)),
    Role("duplicate", N_("duplicate-token"), N_("mean over queries i = n..2n−1 of the weight on key i − n, "
                                                "its own earlier occurrence"),
         N_("in the second copy, a stripe n columns to the left of the diagonal: each token finds itself earlier."),
         _second_copy(0)),
    Role("first", N_("first-token (sink)"), N_("mean over queries i = 1..2n−1 of the weight on key 0"),
         N_("a bright first column: weight parked on token 0 whatever it is, usually a head with nothing better to "
            "read."), _fixed_key(lambda t: 0)),
    Role("local", N_("local window"), N_("mean over queries i = 3..2n−1 of the weight on keys i − 3..i"),
         N_("a band along the diagonal a few cells wide: each token reads its close neighbours."),
         _window(LOCAL_WINDOW - 1, 0)),
)
ENCODER_ROLES = _table(
    Role("previous", N_("previous-token"), N_("mean over queries i = 1..T−1 of the weight on key i − 1"),
         N_("a bright line just below the diagonal: every token looks one step back."), _shifted(-1), "local"),
    Role("next", N_("next-token"), N_("mean over queries i = 0..T−2 of the weight on key i + 1"),
         N_("the mirror image: a line one step right of the diagonal. An encoder sees both directions at once."),
         _shifted(1), "local"),
    Role("duplicate", N_("duplicate-token"),
         N_("mean over queries i = 1..2n (both copies) of the weight on the same token in the other copy, i ± n"),
         N_("two stripes n columns from the diagonal, one on each side: each token finds its twin in the other "
            "copy, looking back or ahead."), _other_copy),
    Role("cls", N_("[CLS]"), N_("mean over queries i = 1..T−1 of the weight on key 0, [CLS]"),
         N_("a bright first column. When a head finds nothing it is built for, it parks its weight on a "
            "token that carries little information, and [CLS] is always there."), _fixed_key(lambda t: 0)),
    Role("sep", N_("[SEP]"), N_("mean over queries i = 0..T−2 of the weight on key T − 1, [SEP]"),
         N_("a bright last column: the same parking habit, on the closing token. Some models prefer [SEP], "
            "some [CLS]; compare the two numbers."), _fixed_key(lambda t: t - 1)),
    Role("local", N_("local window"), N_("mean over queries i = 2..T−3 of the weight on keys i − 2..i + 2"),
         N_("a band along the diagonal five cells wide: each token reads itself and two neighbours on each side."),
         _window(ENCODER_REACH, ENCODER_REACH)),
)
NO_ROLE = N_("no clear role")
ENCODER_NO_INDUCTION = N_(
    "Induction is left out for this encoder: an induction head copies what followed a token last time in order to "
    "predict the next token, and an encoder trained to fill in hidden words sees the next token itself. The "
    "repeat is still measured, in both directions, by the duplicate-token score."
)


def role_positions(role: str, half: int, t: int | None = None, roles: dict[str, Role] = ROLES):
    """The queries of ``role`` on a probe of ``t`` positions (2n when None) and, for each, the keys it names.

    -> (queries (q,), keys (q, k)): keys[r] are the key positions read by queries[r].
    """
    if role not in roles:
        raise ValueError(f"unknown role {role!r}: choose one of {', '.join(roles)}")
    return roles[role].positions(half, 2 * half if t is None else t)


def role_scores(attentions: np.ndarray, half: int, roles: dict[str, Role] = ROLES) -> dict[str, np.ndarray]:
    """Every role's score for every head: attentions (L, nh, T, T) on the repeated sequence -> role -> (L, nh)."""
    t = attentions.shape[-1]
    scores = {}
    for key, role in roles.items():
        queries, keys = role.positions(half, t)
        weights = attentions[:, :, queries[:, None], keys]  # (L, nh, q, k)
        scores[key] = weights.sum(axis=-1).mean(axis=-1)  # (L, nh)
    return scores


def uniform_scores(half: int, roles: dict[str, Role] = ROLES, t: int | None = None,
                   causal: bool = True) -> dict[str, float]:
    """Each role's score for a head that spreads its weight evenly over the keys it may see: keys 0..i when
    ``causal``, else all ``t`` keys (t = 2n when None)."""
    t = 2 * half if t is None else t
    uniform = np.tri(t) / np.arange(1, t + 1)[:, None] if causal else np.full((t, t), 1.0 / t)  # (T, T)
    return {key: float(score[0, 0]) for key, score in role_scores(uniform[None, None], half, roles).items()}


def assign_roles(scores: dict[str, np.ndarray], threshold: float = THRESHOLD,
                 roles: dict[str, Role] = ROLES) -> np.ndarray:
    """Each head's role key, or "" for no clear role, (L, nh): the role of its highest score if that score reaches
    ``threshold``; where that role contains narrower ones (``Role.within``) that reach it too, the highest of those
    (a local window contains key i − 1, so a previous-token head scores at least as high there)."""
    keys = list(scores)
    stacked = np.stack([scores[key] for key in keys])  # (roles, L, nh)
    best = stacked.argmax(axis=0)  # (L, nh)
    named = np.where(stacked.max(axis=0) >= threshold, np.array(keys)[best], "")  # (L, nh)
    for wide in keys:
        narrow = [key for key in keys if roles[key].within == wide]
        if not narrow:
            continue
        inner = np.stack([scores[key] for key in narrow])  # (narrow, L, nh)
        pick = np.array(narrow)[inner.argmax(axis=0)]  # (L, nh)
        named = np.where((named == wide) & (inner.max(axis=0) >= threshold), pick, named)
    return named
