"""Charts in words: what an attention figure shows, in sentences with its numbers. No streamlit in here.

A text alternative for a reader who cannot see the heatmap (a screen reader reads it from the chart's
``alt``), and a summary for anyone who wants the numbers without hovering. Every number is computed
from the very arrays the figure draws (the same matrices, labels, mask and titles it is given), e.g.

    head 2: each query attends mostly to the previous token (5 of 5 rows); strongest 0.91 from “2:sat” to “1:cat”.

Labels are quoted with “ ” (token labels carry their position, "2:sat"). Numbers are printed by
``ui.charts.numbers.fixed`` (two decimals, no negative zero). The patterns a head is tested for are
records (``PATTERNS``): a new one is a row. The sentences are in the current language (``ui.i18n``): each one is a
whole marked sentence with its numbers and labels as placeholders, and the parts join with "; " as in English.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ui.charts.labels import concat_columns, said
from ui.charts.markdown import literal
from ui.charts.numbers import fixed
from ui.charts.views import matrix_view
from ui.i18n import N_, _, ngettext

DECIMALS = 2
PATTERN_SHARE = 0.5  # a head "does" a pattern when at least this share of the rows it can show it in do


def quoted(label: str, markdown: bool = False) -> str:
    """A label as the sentences quote it: “2:sat”; for Markdown (``markdown``) a code span instead, which shows a
    token as typed (``ui.charts.markdown.literal``) and marks where it starts and ends."""
    return literal(label) if markdown else f"“{label}”"


@dataclass(frozen=True)
class Pattern:
    """Where a query's strongest key may sit relative to the query: the head's habit, in words."""

    name: str
    key_of: Callable[[int], int]  # the key index the pattern expects for query row i
    self_only: bool  # meaningful only when the keys are the queries' own sentence (key i is token i)
    sentence: str  # the whole clause, marked: "each query attends mostly to ... ({matching} of {rows} rows)"
    place: str  # where those rows look, marked: the label of a count ("the previous token 3")


PATTERNS: tuple[Pattern, ...] = (
    Pattern("previous", lambda i: i - 1, True,
            N_("each query attends mostly to the previous token ({matching} of {rows} rows)"), N_("the previous token")),
    Pattern("itself", lambda i: i, True,
            N_("each query attends mostly to itself ({matching} of {rows} rows)"), N_("itself")),
    Pattern("next", lambda i: i + 1, True,
            N_("each query attends mostly to the next token ({matching} of {rows} rows)"), N_("the next token")),
    Pattern("first", lambda i: 0, False,
            N_("each query attends mostly to the first token ({matching} of {rows} rows)"), N_("the first token")),
)


def masked_cells(matrix: np.ndarray, mask: np.ndarray | None, neginf_masked: bool) -> np.ndarray:
    """(Tq, Tk) True where a cell is masked: ``mask`` False (True = may attend), or -inf when that means masked."""
    masked = np.isneginf(matrix) if neginf_masked else np.zeros(matrix.shape, dtype=bool)  # (Tq, Tk)
    if mask is not None:
        masked = masked | ~np.broadcast_to(np.asarray(mask, dtype=bool), matrix.shape)
    return masked


TIE = 1e-9  # two allowed cells of a row this close share its largest value: the row has no single strongest key


def _argmax_keys(matrix: np.ndarray, masked: np.ndarray) -> np.ndarray:
    """(Tq,) the strongest allowed key of each row; -1 for a row with no allowed finite cell, or whose largest
    value two or more keys share (a flat row has no strongest key: it must not count for the first one)."""
    values = np.where(masked | ~np.isfinite(matrix), -np.inf, matrix)  # (Tq, Tk)
    best = values.argmax(axis=-1)  # (Tq,)
    top = values.max(axis=-1)  # (Tq,)
    shared = (values >= top[:, None] - TIE).sum(axis=-1) > 1  # (Tq,)
    return np.where(np.isneginf(top) | shared, -1, best)


def _even_rows(matrix: np.ndarray, masked: np.ndarray) -> tuple[int, int]:
    """(rows whose allowed cells are all equal, rows with an allowed cell)."""
    allowed = ~masked & np.isfinite(matrix)  # (Tq, Tk)
    rows = allowed.any(axis=-1)  # (Tq,)
    high = np.where(allowed, matrix, -np.inf).max(axis=-1)  # (Tq,)
    low = np.where(allowed, matrix, np.inf).min(axis=-1)  # (Tq,)
    return int((rows & (high - low <= TIE)).sum()), int(rows.sum())


@dataclass(frozen=True)
class PatternFound:
    """A pattern and how many of the rows that could show it do."""

    pattern: Pattern
    matching: int
    rows: int


def head_pattern(matrix: np.ndarray, masked: np.ndarray, *, self_attention: bool) -> PatternFound | None:
    """The pattern most rows follow (at least ``PATTERN_SHARE`` of the rows where its key exists and is allowed),
    or None. Ties go to the earlier pattern in ``PATTERNS``."""
    best_keys = _argmax_keys(matrix, masked)  # (Tq,)
    n_keys = matrix.shape[1]
    found = None
    for pattern in PATTERNS:
        if pattern.self_only and not self_attention:
            continue
        rows = matching = 0
        for i, best in enumerate(best_keys):
            j = pattern.key_of(i)
            if best < 0 or not 0 <= j < n_keys or masked[i, j]:
                continue  # a row that cannot show this pattern
            rows += 1
            matching += int(best == j)
        if rows and matching >= PATTERN_SHARE * rows and (found is None or matching / rows > found.matching / found.rows):
            found = PatternFound(pattern, matching, rows)
    return found


def common_key(matrix: np.ndarray, masked: np.ndarray) -> tuple[int, int, int] | None:
    """(key, rows whose strongest key it is, rows with a key) when one key is the strongest of at least
    ``PATTERN_SHARE`` of the rows (and of two or more), else None."""
    best_keys = _argmax_keys(matrix, masked)
    counted = best_keys[best_keys >= 0]
    if counted.size < 2:
        return None
    keys, counts = np.unique(counted, return_counts=True)
    top = int(counts.argmax())
    if counts[top] < PATTERN_SHARE * counted.size:
        return None
    return int(keys[top]), int(counts[top]), int(counted.size)


def _extreme(matrix: np.ndarray, masked: np.ndarray, largest: bool) -> tuple[float, int, int] | None:
    """(value, row, column) of the largest (or smallest) finite unmasked cell, first in reading order; None if none."""
    shown = ~masked & np.isfinite(matrix)
    if not shown.any():
        return None
    values = np.where(shown, matrix, -np.inf if largest else np.inf)
    flat = int(values.argmax() if largest else values.argmin())
    i, j = np.unravel_index(flat, matrix.shape)
    return float(matrix[i, j]), int(i), int(j)


def _mask_phrase(masked: np.ndarray, query_labels: list[str]) -> list[str]:
    """How many cells are masked, and which query rows (labels as quoted) have no key at all."""
    if not masked.any():
        return []
    parts = [_("{masked} of {cells} cells masked (grey)").format(masked=int(masked.sum()), cells=masked.size)]
    empty = [query_labels[i] for i in np.flatnonzero(masked.all(axis=-1))]
    if empty:
        parts.append(_("no key to attend to for {labels}").format(labels=", ".join(empty)))
    return parts


def _joined(parts: list[str]) -> str:
    """'part; part; part' with the current language's separator (Chinese: a full-width semicolon)."""
    text = parts[0]
    for part in parts[1:]:
        text = _("{first}; {second}").format(first=text, second=part)
    return text


def _titled(title: str, parts: list[str]) -> str:
    """'<title>: part; part.' (no title: 'part; part.'), the shape of every sentence here."""
    text = _joined(parts)
    return (_("{title}: {text}.") if title else _("{text}.")).format(title=title, text=text)


def panel_sentence(matrix: np.ndarray, query_labels, key_labels, *, kind: str = "weights", title: str = "",
                   mask: np.ndarray | None = None, null_key: bool = False, markdown: bool = False) -> str:
    """One panel (Tq, Tk) of an attention grid in one sentence (see the module docstring).

    Sequential views (weights): the pattern most rows follow, or the key most rows look at, and the
    strongest cell; with ``null_key`` (weights only) the share of a row the null key takes, 1 − Σ_j A_ij.
    Diverging views (logits, scores, differences): the largest positive and the most negative value.
    Both: how many cells are masked and which rows have no key. ``markdown``: labels as code spans.
    """
    view = matrix_view(kind)
    matrix = np.asarray(matrix, dtype=np.float64)  # (Tq, Tk)
    masked = masked_cells(matrix, mask, view.masked_is_neginf)
    self_attention = list(query_labels) == list(key_labels)
    query_labels = [quoted(label, markdown) for label in query_labels]  # as the sentence prints them
    key_labels = [quoted(label, markdown) for label in key_labels]
    parts = []
    if view.sequential:
        found = head_pattern(matrix, masked, self_attention=self_attention)
        common = common_key(matrix, masked)
        even, rows_with_keys = _even_rows(matrix, masked)
        evenly = bool(rows_with_keys) and even == rows_with_keys
        if evenly:
            low, high = _extreme(matrix, masked, largest=False), _extreme(matrix, masked, largest=True)
            spread = _("every weight {value}").format(value=fixed(high[0], DECIMALS)) if high[0] - low[0] <= TIE else (
                _("a row's weights all equal, {low} to {high} across rows").format(
                    low=fixed(low[0], DECIMALS), high=fixed(high[0], DECIMALS)))
            parts.append(_("each query spreads its weight evenly over the keys it may see ({spread})").format(
                spread=spread))
        elif found is not None:
            parts.append(_(found.pattern.sentence).format(matching=found.matching, rows=found.rows))
        elif common is not None:
            key, count, rows = common
            parts.append(_("most queries attend mostly to {key} ({count} of {rows} rows)").format(
                key=key_labels[key], count=count, rows=rows))
        else:
            parts.append(_("no single pattern: the rows' strongest keys differ"))
        top = None if evenly else _extreme(matrix, masked, largest=True)
        if top is not None:
            value, i, j = top
            parts.append(_("strongest {value} from {query} to {key}").format(
                value=fixed(value, DECIMALS), query=query_labels[i], key=key_labels[j]))
        if null_key and kind == "weights":
            rows = ~masked.all(axis=-1)  # rows with a key: a fully masked row gives 0 everywhere by policy
            if rows.any():
                share = 1.0 - np.where(masked, 0.0, matrix).sum(axis=-1)[rows]  # (rows,)
                parts.append(_("the null key takes {mean} of a row on average ({low} to {high})").format(
                    mean=fixed(share.mean(), DECIMALS), low=fixed(share.min(), DECIMALS),
                    high=fixed(share.max(), DECIMALS)))
    else:
        parts += _signed_parts(matrix, masked, query_labels, key_labels)
    parts += _mask_phrase(masked, query_labels)
    return _titled(title, parts)


def _signed_parts(matrix: np.ndarray, masked: np.ndarray, query_labels, key_labels) -> list[str]:
    """A diverging view's phrases (logits, scores, differences): its largest positive and most negative value."""
    parts = []
    top = _extreme(matrix, masked, largest=True)
    low = _extreme(matrix, masked, largest=False)
    if top is not None and top[0] > 0:
        value, i, j = top
        parts.append(_("largest positive {value} from {query} to {key}").format(
            value=fixed(value, DECIMALS), query=query_labels[i], key=key_labels[j]))
    if low is not None and low[0] < 0:
        value, i, j = low
        parts.append(_("most negative {value} from {query} to {key}").format(
            value=fixed(value, DECIMALS), query=query_labels[i], key=key_labels[j]))
    if top is not None and low is not None and top[0] <= 0 <= low[0]:
        parts.append(_("every value is 0"))
    return parts


def grid_lines(matrices: np.ndarray, query_labels, key_labels, *, kind: str = "weights",
               titles: list[str] | None = None, mask: np.ndarray | None = None,
               null_key: bool = False, markdown: bool = False) -> list[str]:
    """An attention grid (n, Tq, Tk) in words: a line on what it shows, then one sentence per panel.

    Takes what ``ui.charts.figures.attention_grid`` takes (its matrices, labels, view, titles and mask);
    ``markdown``: labels as code spans, for ``st.markdown``.
    """
    view = matrix_view(kind)
    matrices = np.asarray(matrices)
    n, n_queries, n_keys = matrices.shape
    titles = titles or [_("head {h}").format(h=h) for h in range(n)]
    colours = (_("dark = small, bright = large") if view.sequential
               else _("red above 0, blue below 0, white near 0"))
    panels = ngettext("{n} panel", "{n} panels", n).format(n=n)
    head = _("Heatmap of the {value}, {panels} of {queries} queries (rows) by {keys} keys (columns); {colours}.").format(
        value=_(view.value_name), panels=panels, queries=n_queries, keys=n_keys, colours=colours)
    masks = np.broadcast_to(np.asarray(mask, dtype=bool), matrices.shape) if mask is not None else [None] * n
    return [head] + [
        panel_sentence(matrices[h], query_labels, key_labels, kind=kind, title=titles[h], mask=masks[h],
                       null_key=null_key, markdown=markdown)
        for h in range(n)
    ]


def describe_grid(matrices: np.ndarray, query_labels, key_labels, **options) -> str:
    """``grid_lines`` as one text, a line each: the ``alt`` of an attention grid."""
    return "\n".join(grid_lines(matrices, query_labels, key_labels, **options))


def plural(noun: str) -> str:
    """'query' -> 'queries', 'token' -> 'tokens': the nouns the sentences count rows and columns in."""
    return noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"


# The nouns a single heatmap's rows and columns are named with (``row_name``, ``col_name`` of the pages): each
# counted, marked so that a sentence can say "5 queries" in the current language; another noun is said as given.
NOUNS = {
    N_("row"): N_("{n} rows"), N_("column"): N_("{n} columns"), N_("token"): N_("{n} tokens"),
    N_("query"): N_("{n} queries"), N_("key"): N_("{n} keys"), N_("feature"): N_("{n} features"),
    N_("layer"): N_("{n} layers"), N_("head"): N_("{n} heads"),
}


def counted(n: int, noun: str) -> str:
    """'5 queries': ``n`` and the plural of a row or column noun, in the current language."""
    return _(NOUNS[noun]).format(n=n) if noun in NOUNS else f"{n} {plural(noun)}"


def describe_matrix(matrix: np.ndarray, row_labels, col_labels, *, title: str = "", value_name: str = "value",
                    row_name: str = "row", col_name: str = "column") -> str:
    """A single heatmap (R, C) (``matrix_heatmap``: outputs, concatenation, a step's matrix) in one sentence:
    its size, its largest and its smallest value and where they are; masked (-inf) cells counted."""
    matrix = np.asarray(matrix, dtype=np.float64)  # (R, C)
    rows, cols = matrix.shape
    masked = np.isneginf(matrix)
    parts = [_("heatmap of {value}, {rows} by {cols}").format(
        value=said(value_name), rows=counted(rows, row_name), cols=counted(cols, col_name))]
    where = dict(row=said(row_name), col=said(col_name))
    for sentence, largest in ((N_("largest {value} at {row} {row_label}, {col} {col_label}"), True),
                              (N_("smallest {value} at {row} {row_label}, {col} {col_label}"), False)):
        found = _extreme(matrix, masked, largest)
        if found is not None:
            value, i, j = found
            parts.append(_(sentence).format(value=fixed(value, DECIMALS), row_label=quoted(row_labels[i]),
                                            col_label=quoted(col_labels[j]), **where))
    if masked.any():
        parts.append(_("{masked} of {cells} cells masked (−∞)").format(masked=int(masked.sum()), cells=masked.size))
    return _titled(title, parts)


def describe_concat(concat: np.ndarray, query_labels, n_heads: int) -> str:
    """The heads' outputs side by side (Tq, nh*hv) (``concat_heatmap``) in words: ``describe_matrix``'s size and
    extremes, then which head's block is the largest and which the smallest by mean |value|."""
    concat = np.asarray(concat, dtype=np.float64)  # (Tq, nh*hv)
    width = concat.shape[1] // n_heads
    text = describe_matrix(concat, query_labels, concat_columns(concat.shape[1], n_heads),
                           title=_("The {n} heads' outputs side by side").format(n=n_heads),
                           value_name=N_("values"), row_name="token", col_name="column")
    if n_heads < 2:
        return text
    size = np.abs(concat).reshape(concat.shape[0], n_heads, width).mean(axis=(0, 2))  # (nh,) mean |value| per head
    big, small = int(size.argmax()), int(size.argmin())
    spread = _("mean |value| per head {low} (head {small}) to {high} (head {big})").format(
        low=fixed(size.min(), DECIMALS), small=small, high=fixed(size.max(), DECIMALS), big=big)
    return _("{text}.").format(text=_joined([text.removesuffix(_("{text}.").format(text="")), spread]))


def describe_mask(allowed: np.ndarray, row_labels, col_labels, *, title: str = "") -> str:
    """A mask matrix (True / 1 = may attend) in one sentence: allowed and masked counts, its shape by name
    (causal: each query sees itself and the tokens before it), rows that see nothing."""
    allowed = np.asarray(allowed).astype(bool)  # (R, C)
    rows, cols = allowed.shape
    parts = [_("{allowed} of {pairs} pairs allowed, {masked} masked").format(
        allowed=int(allowed.sum()), pairs=allowed.size, masked=int((~allowed).sum()))]
    if allowed.all():
        parts.append(_("every query may attend to every key"))
    elif rows == cols and np.array_equal(allowed, np.tri(rows, dtype=bool)):
        parts.append(_("causal: each query sees itself and the tokens before it"))
    empty = [quoted(row_labels[i]) for i in np.flatnonzero(~allowed.any(axis=-1))]
    if empty:
        parts.append(_("no key allowed for {labels}").format(labels=", ".join(empty)))
    return _titled(title or _("mask"), parts)


def describe_panel(matrix: np.ndarray, row_labels, col_labels, *, kind: str = "signed", title: str = "",
                   value_name: str = "value") -> str:
    """One matrix of Step by step (a ``ui.pipeline.steps.Panel``'s fields) in one sentence, by its kind:
    "mask" (1 = may attend) as ``describe_mask``, "weights" as an attention panel, "signed" as ``describe_matrix``."""
    if kind == "mask":
        return describe_mask(matrix, row_labels, col_labels, title=title)
    if kind == "weights":
        return panel_sentence(matrix, row_labels, col_labels, kind="weights", title=title)
    return describe_matrix(matrix, row_labels, col_labels, title=title, value_name=value_name)


def describe_similarity(similarity: np.ndarray, *, title: str = "") -> str:
    """The heads' cosine similarity (nh, nh) (``similarity_heatmap``) in one sentence: the most and the least
    alike pair of two different heads (the diagonal, a head with itself, is 1 and says nothing)."""
    similarity = np.asarray(similarity, dtype=np.float64)  # (nh, nh)
    n = similarity.shape[0]
    parts = [_("cosine similarity of every pair of the {n} heads' weight matrices, 1 = the same pattern").format(n=n)]
    if n > 1:
        rows, cols = np.triu_indices(n, k=1)  # every pair once, (n(n-1)/2,) each
        values = similarity[rows, cols]
        for sentence, at in ((N_("most alike: head {a} and head {b} ({value})"), int(values.argmax())),
                             (N_("least alike: head {a} and head {b} ({value})"), int(values.argmin()))):
            parts.append(_(sentence).format(a=rows[at], b=cols[at], value=fixed(values[at], DECIMALS)))
    return _titled(title, parts)
