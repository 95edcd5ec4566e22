"""Pure builders for "Which heads make it say this?" (targeted ablation) on the Real model page's SmolLM2 view.

- the link: ``rm_alt`` the alternative next token as its text (one token; spaces as in the text), ``rm_rank=1``
  when the heads are ranked; a value that is not one token, or is the top token, gets a message and the
  runner-up token instead;
- the ranking and the greedy search as tables, and one sentence of numbers.

The numbers are ``mha_core.targeted_ablation``'s; nothing here computes a model.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mha_core.smollm2 import SmolLM2
from mha_core.targeted_ablation import Targeted
from ui.i18n import _, sentences
from ui.pages.real_model.smollm2 import shown_token

ALT_PARAM = "rm_alt"
RANK_PARAM = "rm_rank"
N_OPTIONS = 10  # the alternatives offered: the most likely tokens after the top one
RANKED_ROWS = 15  # rows of the ranking table


def alternative_options(next_logits: np.ndarray, n: int = N_OPTIONS) -> list[int]:
    """The token ids ranked 2..n+1 by the clean logits (the top token is not an alternative to itself)."""
    return [int(i) for i in np.argsort(-np.asarray(next_logits), kind="stable")[1:n + 1]]


def alternative_from_text(model: SmolLM2, text: str, top: int, fallback: int, messages: list[str]) -> int:
    """The one token ``text`` stands for; ``fallback`` and a message when it is not one token or is the top one."""
    ids = model.encode(text) if text else np.array([], dtype=np.int64)
    if ids.size != 1:
        messages.append(_("'{text}' is {n} tokens, not one; the alternative is '{fallback}' instead.").format(
            text=text, n=ids.size, fallback=shown_token(model.token_label(fallback))))
        return fallback
    if int(ids[0]) == top:
        messages.append(_("'{text}' is the top token itself; the alternative is '{fallback}' instead.").format(
            text=text, fallback=shown_token(model.token_label(fallback))))
        return fallback
    return int(ids[0])


def link_alternative(params: Mapping[str, str]) -> tuple[str | None, bool]:
    """The link's alternative text (None when absent) and whether it asks for the ranking (``rm_rank=1``)."""
    return params.get(ALT_PARAM), params.get(RANK_PARAM) == "1"


def targeted_params(model: SmolLM2, alternative: int, runner_up: int, ranked: bool) -> dict[str, str]:
    """The query parameters that reopen this view: the alternative's text unless it is the runner-up, and rm_rank."""
    params = {} if alternative == runner_up else {ALT_PARAM: model.token_text(alternative)}
    return {**params, RANK_PARAM: "1"} if ranked else params


def head_label(head: tuple[int, int]) -> str:
    return _("layer {layer}, head {head}").format(layer=head[0], head=head[1])


def ranking_frame(result: Targeted, n: int = RANKED_ROWS) -> pd.DataFrame:
    """The ``n`` heads whose removal pulls d furthest towards the alternative: d with the head off and the move."""
    where = {head: i for i, head in enumerate(result.heads)}
    picked = [where[head] for head in result.ranking[:n]]
    return pd.DataFrame({
        "head": [head_label(result.heads[i]) for i in picked],
        "d": result.differences[picked],
        "move": result.moves[picked],
    }, index=pd.RangeIndex(1, len(picked) + 1, name="rank"))


def greedy_frame(result: Targeted) -> pd.DataFrame:
    """One row per step of the greedy search: the head added and d with all heads so far off."""
    return pd.DataFrame({
        "head": [head_label(head) for head in result.greedy],
        "d": np.asarray(result.greedy_differences, dtype=np.float64),
    }, index=pd.RangeIndex(1, len(result.greedy) + 1, name="heads off"))


def summary_sentence(model: SmolLM2, result: Targeted) -> str:
    """d before, the strongest single head, and what the greedy search found, in numbers."""
    top, alternative = (shown_token(model.token_label(i)) for i in (result.top, result.alternative))
    best = result.ranking[0]
    parts = [_("With every head, logit('{top}') − logit('{alt}') = {d}.").format(
        top=top, alt=alternative, d=f"{result.clean:.3f}"),
        _("Turning off {head} alone moves it most: to {d}.").format(
            head=head_label(best), d=f"{result.differences[result.heads.index(best)]:.3f}")]
    if result.wins:
        parts.append(_("With the first {n} heads of the ranking off together, '{alt}' beats '{top}' (d = {d}).").format(
            n=len(result.greedy), alt=alternative, top=top, d=f"{result.greedy_differences[-1]:.3f}"))
    else:
        parts.append(_("Even with the first {n} heads of the ranking off together, '{top}' still beats '{alt}' "
                       "(d = {d}).").format(n=len(result.greedy), top=top, alt=alternative,
                                            d=f"{result.greedy_differences[-1]:.3f}"))
    return sentences(*parts)
