"""The drill-down: one cell of one head, number by number, recomputed from q_i and k_j.

``drill_down`` redoes the dot product, the scale, the mask and the softmax of one row by hand and
keeps the engine's score beside it; the tables and LaTeX here put those numbers on screen.
Pure builders, no streamlit (drawn by ``ui.step_views``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ui.steps import StepInputs, dim_labels, latex_number

MAX_LATEX_TERMS = 4  # a dot product with more terms is written a + b + ... + z


def _paren(x: float) -> str:
    """A number in parentheses when negative, so a product reads (−0.3)(0.5)."""
    return f"({latex_number(x)})" if x < 0 else latex_number(x)


@dataclass(frozen=True)
class DrillDown:
    """How one cell (query i, key j) of one head is computed, recomputed here from q_i and k_j."""

    head: int
    i: int
    j: int
    query_label: str
    key_label: str
    key_labels: list[str]
    dims: list[str]  # the head's feature columns
    q_i: np.ndarray  # (hs,)
    k_j: np.ndarray  # (hs,)
    products: np.ndarray  # (hs,) q_i * k_j
    score: float  # sum of the products
    engine_score: float  # trace.scores[head, i, j], for comparison
    scale: float
    allowed: bool  # the mask lets query i attend to key j
    row_logits: np.ndarray  # (Tk,) query i's scaled scores, -inf where masked
    row_max: float  # max of the allowed logits (0 when the row is fully masked)
    row_exp: np.ndarray  # (Tk,) exp(logit - max), 0 where masked
    row_weights: np.ndarray  # (Tk,) softmax of the row (all 0 when fully masked)
    fully_masked: bool

    @property
    def logit(self) -> float:
        return float(self.row_logits[self.j])

    @property
    def weight(self) -> float:
        return float(self.row_weights[self.j])


def drill_down(inputs: StepInputs, head: int, i: int, j: int) -> DrillDown:
    """Recompute cell (i, j) of head ``head`` by hand: dot product, scale, mask, softmax of row i."""
    trace = inputs.trace
    nh, tq, hs = trace.q.shape
    tk = trace.k.shape[1]
    for name, value, size in (("head", head, nh), ("query", i, tq), ("key", j, tk)):
        if not 0 <= value < size:
            raise ValueError(f"{name} {value} does not exist: choose 0 to {size - 1}")
    q_i = trace.q[head, i]  # (hs,)
    g = trace.kv_head_of(head)  # the key/value head it reads (itself unless K/V heads are shared)
    k_j = trace.k[g, j]  # (hs,)
    products = q_i * k_j  # (hs,)
    allowed_row = np.ones(tk, dtype=bool) if inputs.mask is None else np.asarray(inputs.mask[i], dtype=bool)  # (Tk,)
    row_scores = np.array([np.sum(q_i * trace.k[g, s]) for s in range(tk)])  # (Tk,) one dot product per key
    bias = 0.0 if trace.bias is None else trace.bias[head, i]  # (Tk,) ALiBi's -m|i - j|, or nothing
    row_logits = np.where(allowed_row, row_scores * trace.scale + bias, -np.inf)  # (Tk,)
    fully = not allowed_row.any()
    row_max = 0.0 if fully else float(row_logits[allowed_row].max())
    row_exp = np.exp(row_logits - row_max)  # (Tk,) exp(-inf) = 0 where masked
    total = row_exp.sum()
    row_weights = row_exp / total if total > 0 else np.zeros(tk)  # (Tk,)
    start = head * hs
    return DrillDown(
        head=head,
        i=i,
        j=j,
        query_label=inputs.query_labels[i],
        key_label=inputs.key_labels[j],
        key_labels=list(inputs.key_labels),
        dims=dim_labels(hs, start),
        q_i=q_i,
        k_j=k_j,
        products=products,
        score=float(np.sum(products)),
        engine_score=float(trace.scores[head, i, j]),
        scale=float(trace.scale),
        allowed=bool(allowed_row[j]),
        row_logits=row_logits,
        row_max=row_max,
        row_exp=row_exp,
        row_weights=row_weights,
        fully_masked=fully,
    )


SUM_ROW = "sum of the products = score"


def products_table(drill: DrillDown) -> pd.DataFrame:
    """q_i, k_j and their elementwise product, one row per dimension of the head."""
    return pd.DataFrame(
        {"q_i": drill.q_i, "k_j": drill.k_j, "q_i × k_j": drill.products},
        index=pd.Index(drill.dims, name="dim"),
    )


def score_table(drill: DrillDown) -> pd.DataFrame:
    """The numbers from the products to the logit, each on its own row."""
    values = {
        SUM_ROW: drill.score,
        "engine's S[i, j] (should be equal)": drill.engine_score,
        "scale s": drill.scale,
        "score × s": drill.score * drill.scale,
        "logit after the mask": drill.logit,
    }
    return pd.DataFrame({"value": list(values.values())}, index=pd.Index(list(values), name="quantity"))


def softmax_row_table(drill: DrillDown) -> pd.DataFrame:
    """Query i's row through the softmax: logit, logit − max, exp, weight; the chosen key marked."""
    return pd.DataFrame(
        {
            "logit": drill.row_logits,
            "logit − max": drill.row_logits - drill.row_max,
            "exp(logit − max)": drill.row_exp,
            "weight": drill.row_weights,
            "chosen": ["◀ key j" if s == drill.j else "" for s in range(len(drill.key_labels))],
        },
        index=pd.Index(drill.key_labels, name="key"),
    )


def highlight_key(frame: pd.DataFrame, label: str, colour: str = "rgba(255, 0, 255, 0.25)"):
    """A Styler that shades the row ``label`` (the chosen key) of a softmax-row table."""
    def shade(row: pd.Series) -> list[str]:
        return [f"background-color: {colour}; font-weight: bold" if row.name == label else "" for _ in row]

    return frame.style.apply(shade, axis=1).format(precision=4)


def dot_product_latex(drill: DrillDown) -> str:
    """S_ij written out term by term with the numbers, two terms a line (abbreviated when the head is wide)."""
    terms = [f"{_paren(a)} \\times {_paren(b)}" for a, b in zip(drill.q_i, drill.k_j, strict=True)]
    if len(terms) > MAX_LATEX_TERMS:
        hidden = len(terms) - MAX_LATEX_TERMS
        terms = terms[: MAX_LATEX_TERMS - 1] + [rf"\dots\ ({hidden}\text{{ more terms}})", terms[-1]]
    lines = [" + ".join(terms[k : k + 2]) for k in range(0, len(terms), 2)]
    ij = f"{drill.i},{drill.j}"
    body = r" \\ &\quad + ".join(lines)
    return (
        rf"\begin{{aligned}} S_{{{ij}}} &= q_{{{drill.i}}} \cdot k_{{{drill.j}}} = \textstyle\sum_d q_{{{drill.i},d}}\, k_{{{drill.j},d}} \\ "
        rf"&= {body} \\ &= {latex_number(drill.score)} \end{{aligned}}"
    )


def logit_latex(drill: DrillDown) -> str:
    """The scaling and the mask with the numbers put in."""
    ij = f"{drill.i},{drill.j}"
    scaled = rf"{latex_number(drill.score)} \times {latex_number(drill.scale)} = {latex_number(drill.score * drill.scale)}"
    if drill.allowed:
        return rf"L_{{{ij}}} = S_{{{ij}}} \times s = {scaled} \quad (\text{{allowed by the mask}})"
    return rf"L_{{{ij}}} = -\infty \quad (\text{{masked; without the mask it would be }} {scaled})"


def softmax_latex(drill: DrillDown) -> str:
    """The chosen cell's softmax with the numbers put in."""
    i, ij = drill.i, f"{drill.i},{drill.j}"
    if drill.fully_masked:
        return rf"A_{{{ij}}} = 0 \quad (\text{{row {i} has every key masked: zeros by our policy}})"
    total = float(drill.row_exp.sum())
    if not drill.allowed:
        return rf"A_{{{ij}}} = \frac{{e^{{-\infty}}}}{{{latex_number(total)}}} = 0"
    return (
        rf"A_{{{ij}}} = \frac{{e^{{L_{{{ij}}} - m_{{{i}}}}}}}{{\sum_k e^{{L_{{{i},k}} - m_{{{i}}}}}}}"
        rf" = \frac{{e^{{{latex_number(drill.logit)} - {_paren(drill.row_max)}}}}}{{{latex_number(total)}}}"
        rf" = \frac{{{latex_number(float(drill.row_exp[drill.j]))}}}{{{latex_number(total)}}} = {latex_number(drill.weight)}"
    )
