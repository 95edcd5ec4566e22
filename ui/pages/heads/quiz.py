"""Quick checks: short questions made from the student's own run, with answers computed from its arrays.

Pure (no streamlit): ``question(result, number)`` picks question ``number`` of this run
deterministically (the same link and number give the same question), and ``is_right`` marks an
answer. Four kinds: the key a query weights most, a row's sum, how many keys a query may see,
and which head's knock-out moves a token's output most.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.config import RunResult
from mha_core.contributions import knock_out
from ui.charts.kernels import row_sums_sentence as kernel_row_sums
from ui.i18n import _

ROW_SUM_TOLERANCE = 5e-3  # a typed row sum counts as right within this (answers are shown to 3 decimals)


@dataclass(frozen=True)
class Question:
    """One question: its text, the computed answer, and (for a choice) the options offered."""

    kind: str
    text: str
    answer: object  # an option (str) or a number
    options: tuple[str, ...] = ()  # empty: the answer is typed as a number
    why: str = ""
    head: int | None = None  # the head asked about, where there is one
    query: int = 0  # the query row asked about

    @property
    def answer_text(self) -> str:
        return f"{self.answer:.3f}" if isinstance(self.answer, float) else str(self.answer)


def largest_weight_question(result: RunResult, head: int, query: int) -> Question:
    """Which key gets query ``query``'s largest weight in head ``head``?"""
    row = result.trace.weights[head, query]  # (Tk,)
    key = result.key_labels[int(row.argmax())]
    return Question(
        "largest",
        _("In head {head}, which key gets the largest weight from query **{query}**?").format(
            head=head, query=result.query_labels[query]),
        key,
        tuple(result.key_labels),
        _("Its weight is {weight:.3f}.").format(weight=row.max()),
        head,
        query,
    )


def row_sum_question(result: RunResult, head: int, query: int) -> Question:
    """What is the sum of query ``query``'s weights in head ``head``? (1, or 0 when fully masked, <1 with a null key)"""
    total = float(result.trace.weights[head, query].sum())
    return Question(
        "row_sum",
        _("In head {head}, what is the sum of the weights in query **{query}**'s row?").format(
            head=head, query=result.query_labels[query]),
        total,
        why=kernel_row_sums(result.trace) or  # another kernel's rows (issue 26)
        _("Softmax rows sum to 1; a fully masked row is 0 by our policy; with the null key the rest goes nowhere."),
        head=head,
        query=query,
    )


def visible_keys_question(result: RunResult, query: int) -> Question:
    """After masking, how many keys can query ``query`` see?"""
    n_keys = len(result.key_labels)
    count = n_keys if result.mask is None else int(result.mask[query].sum())
    return Question(
        "visible",
        _("After masking, how many keys can query **{query}** attend to?").format(query=result.query_labels[query]),
        str(count),
        tuple(str(n) for n in range(n_keys + 1)),
        _("Mask: {mask}.").format(mask=result.config.mask),
        query=query,
    )


def knock_out_question(result: RunResult, query: int) -> Question:
    """Which head's knock-out changes query ``query``'s output most?"""
    trace, config = result.trace, result.config
    w_o = result.weights.w_o if config.output_projection else None
    b_o = result.weights.b_o if config.output_projection else None
    moved = [float(knock_out(trace.heads, w_o, b_o, [h]).change_norm[query]) for h in range(trace.n_heads)]
    best = int(np.argmax(moved))
    return Question(
        "knock",
        _("Knock out one head: which head's knock-out changes token **{query}**'s output most?").format(
            query=result.query_labels[query]),
        _("head {h}").format(h=best),
        tuple(_("head {h}").format(h=h) for h in range(trace.n_heads)),
        _("‖change‖ = {change:.3f}; knock heads out above to see the others.").format(change=moved[best]),
        query=query,
    )


KINDS = ("largest", "row_sum", "visible", "knock")


def question(result: RunResult, number: int) -> Question:
    """Question ``number`` for this run: kind, head and query drawn from a generator seeded by the number."""
    rng = np.random.default_rng([number, result.config.seed])
    kind = KINDS[number % len(KINDS)]
    head = int(rng.integers(result.trace.n_heads))
    query = int(rng.integers(len(result.query_labels)))
    if kind == "largest":
        return largest_weight_question(result, head, query)
    if kind == "row_sum":
        return row_sum_question(result, head, query)
    if kind == "visible":
        return visible_keys_question(result, query)
    return knock_out_question(result, query)


def is_right(q: Question, given) -> bool:
    """An option must match exactly; a number must be within ROW_SUM_TOLERANCE of the answer."""
    if q.options:
        return given == q.answer
    try:
        return abs(float(given) - float(q.answer)) <= ROW_SUM_TOLERANCE
    except (TypeError, ValueError):
        return False
