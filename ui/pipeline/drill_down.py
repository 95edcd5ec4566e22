"""The drill-down: one cell of one head, number by number, recomputed from q_i and k_j.

``drill_down`` redoes the dot product, the scale, the ALiBi bias, the mask and the softmax of one
row by hand and keeps the engine's score beside it; the tables and LaTeX here put those numbers on
screen. It knows every option that changes a logit or a weight, reading each from the trace:
the key/value head a query head reads (K/V sharing), the rotated q and k (RoPE), the bias (ALiBi),
the mask, the scale and the null key (softmax₁: one more key of logit 0 and value 0 in every row).
Pure builders, no streamlit (drawn by ``ui.widgets.step_views``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_core.positions import position_scheme
from ui.charts.numbers import DECIMALS, fixed, float_columns
from ui.i18n import N_, _, ngettext
from ui.pipeline.records import StepInputs, dim_labels, latex_number

MAX_LATEX_TERMS = 4  # a dot product with more terms is written a + b + ... + z
NULL_KEY_LABEL = N_("∅ null key")  # its row in the softmax table, shown as _(NULL_KEY_LABEL); token labels carry a
# position ("0:the"), so no clash


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
    row_logits: np.ndarray  # (Tk,) query i's scaled scores (+ bias), -inf where masked
    row_max: float  # m_i: max of the allowed logits, and of the null key's 0 (0 when nothing is allowed)
    row_exp: np.ndarray  # (Tk,) exp(logit - max), 0 where masked
    row_weights: np.ndarray  # (Tk,) softmax of the row (all 0 when fully masked)
    fully_masked: bool
    kv_head: int  # the key/value head that k_j comes from (the head itself unless K/V heads are shared)
    kv_shared: bool  # fewer key/value heads than query heads (GQA, MQA)
    rotated: bool  # q_i and k_j are RoPE's rotated vectors
    row_bias: np.ndarray | None  # (Tk,) the positional scheme's bias added to the scaled scores, or None
    null_key: bool  # softmax₁: the row has one more key, logit 0 and value 0
    null_exp: float  # the null key's exp(0 - max); 0 without the null key
    pe: str = "none"  # the positional scheme that acted inside attention (its words for the bias)

    @property
    def logit(self) -> float:
        return float(self.row_logits[self.j])

    @property
    def weight(self) -> float:
        return float(self.row_weights[self.j])

    @property
    def bias(self) -> float | None:
        """The scheme's bias b_ij, or None without a bias."""
        return None if self.row_bias is None else float(self.row_bias[self.j])

    @property
    def keys_exp_sum(self) -> float:
        """Σ_k exp(L_ik − m_i) over the row's real keys."""
        return float(self.row_exp.sum())

    @property
    def denominator(self) -> float:
        """The softmax's denominator: the keys' exps, plus the null key's exp(0 − m_i) when there is one."""
        return self.null_exp + self.keys_exp_sum

    @property
    def null_weight(self) -> float:
        """The share of the row the null key takes, 1 − Σ_j A_ij (0 without the null key)."""
        return self.null_exp / self.denominator if self.null_key else 0.0


def drill_down(inputs: StepInputs, head: int, i: int, j: int) -> DrillDown:
    """Recompute cell (i, j) of head ``head`` by hand: dot product, scale, bias, mask, softmax of row i.

    Everything is read from ``inputs.trace``: q_i and k_j as the scores used them (rotated with RoPE),
    k_j from the key/value head ``trace.kv_head_of(head)``, ALiBi's ``trace.bias``, ``trace.scale``,
    and ``trace.null_key`` (softmax₁: the denominator gets exp(0 − m_i), and m_i includes the 0).
    """
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
    bias = 0.0 if trace.bias is None else trace.bias[head, i]  # (Tk,) the scheme's bias (ALiBi: -m|i - j|), or nothing
    row_logits = np.where(allowed_row, row_scores * trace.scale + bias, -np.inf)  # (Tk,)
    fully = not allowed_row.any()
    peaks = [float(row_logits[allowed_row].max())] if not fully else []
    if trace.null_key:
        peaks.append(0.0)  # the null key's logit is part of the row: m_i = max(0, max_k L_ik)
    row_max = max(peaks, default=0.0)
    row_exp = np.exp(row_logits - row_max)  # (Tk,) exp(-inf) = 0 where masked
    null_exp = float(np.exp(0.0 - row_max)) if trace.null_key else 0.0
    total = null_exp + row_exp.sum()
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
        kv_head=g,
        kv_shared=trace.kv_heads < trace.n_heads,
        rotated=trace.q_unrotated is not None,
        row_bias=None if trace.bias is None else np.asarray(bias),
        null_key=bool(trace.null_key),
        null_exp=null_exp,
        pe=trace.pe,
    )


SUM_ROW = N_("sum of the products = score")  # the tables' words are in the run's language: _(SUM_ROW), _(BIAS_ROW)


def products_table(drill: DrillDown) -> pd.DataFrame:
    """q_i, k_j and their elementwise product, one row per dimension of the head."""
    return pd.DataFrame(
        {"q_i": drill.q_i, "k_j": drill.k_j, "q_i × k_j": drill.products},
        index=pd.Index(drill.dims, name=_("dim")),
    )


BIAS_ROW = N_("positional bias b")  # the scheme's name and formula are in the notes under the table


def score_table(drill: DrillDown) -> pd.DataFrame:
    """The numbers from the products to the logit, each on its own row (the scheme's bias when there is one)."""
    scaled = drill.score * drill.scale
    values = {
        _(SUM_ROW): drill.score,
        _("engine's S[i, j] (should be equal)"): drill.engine_score,
        _("scale s"): drill.scale,
        _("score × s"): scaled,
    }
    if drill.bias is not None:
        values[_(BIAS_ROW)] = drill.bias
        values[_("score × s + b")] = scaled + drill.bias
    values[_("logit after the mask")] = drill.logit
    return pd.DataFrame({_("value"): list(values.values())}, index=pd.Index(list(values), name=_("quantity")))


def softmax_row_table(drill: DrillDown) -> pd.DataFrame:
    """Query i's row through the softmax: logit, logit − max, exp, weight; the chosen key marked.

    With the null key its row comes last (``NULL_KEY_LABEL``): logit 0, its exp(0 − m) and its weight
    1 − Σ_j A_ij, so the weight column sums to 1 with it, as the denominator does.
    """
    logit, weight, chosen = _("logit"), _("weight"), _("chosen")
    shifted, exps = _("logit − max"), _("exp(logit − max)")
    frame = pd.DataFrame(
        {
            logit: drill.row_logits,
            shifted: drill.row_logits - drill.row_max,
            exps: drill.row_exp,
            weight: drill.row_weights,
            chosen: [_("◀ key j") if s == drill.j else "" for s in range(len(drill.key_labels))],
        },
        index=pd.Index(drill.key_labels, name=_("key")),
    )
    if not drill.null_key:
        return frame
    null_row = pd.DataFrame(
        {
            logit: [0.0],
            shifted: [0.0 - drill.row_max],
            exps: [drill.null_exp],
            weight: [drill.null_weight],
            chosen: [""],
        },
        index=pd.Index([_(NULL_KEY_LABEL)], name=_("key")),
    )
    return pd.concat([frame, null_row])


def drill_notes(drill: DrillDown) -> list[str]:
    """One markdown line for each option that changes this cell's logit or weight (none for plain attention)."""
    i, j, h, g = drill.i, drill.j, drill.head, drill.kv_head
    notes = []
    if drill.kv_shared:
        notes.append(_("**K/V sharing**: head {h} reads the keys of key/value head {g}, shared with other query "
                       "heads, so k_j is row {j} of K_({g}).").format(h=h, g=g, j=j))
    if drill.rotated:
        notes.append(_("**RoPE**: q_i and k_j are the vectors after the rotation by their positions ({i} and {j}), "
                       "so the score already depends on how far apart they are.").format(i=i, j=j))
    if drill.bias is not None:
        scheme = position_scheme(drill.pe)
        formula = f" = {_(scheme.bias_text)}" if scheme.bias_text else ""
        notes.append(_("**{scheme}**: the bias b{formula} = {bias} is added to the scaled score: L = S·s + b.").format(
            scheme=_(scheme.short_label), formula=formula, bias=f"{drill.bias:.4f}"))
    if drill.null_key:
        notes.append(_("**Null key (softmax₁)**: row {i} has one more key, of logit 0 and value 0. Its e^(0 − m) "
                       "joins the denominator, so the real keys' weights sum to {kept} and the null key takes "
                       "1 − Σ = {share}.").format(i=i, kept=f"{1 - drill.null_weight:.4f}",
                                                  share=f"{drill.null_weight:.4f}"))
    return notes


def highlight_key(frame: pd.DataFrame, label: str, colour: str = "rgba(255, 0, 255, 0.25)"):
    """A Styler that shades the row ``label`` (the chosen key) of a softmax-row table."""
    def shade(row: pd.Series) -> list[str]:
        return [f"background-color: {colour}; font-weight: bold" if row.name == label else "" for _cell in row]

    shown = frame.style.apply(shade, axis=1)
    return shown.format(functools.partial(fixed, decimals=DECIMALS), subset=float_columns(frame))  # no -0.0000


def dot_product_latex(drill: DrillDown, per_line: int = 2) -> str:
    """S_ij written out term by term with the numbers, ``per_line`` terms a line (abbreviated when the head is wide)."""
    terms = [f"{_paren(a)} \\times {_paren(b)}" for a, b in zip(drill.q_i, drill.k_j, strict=True)]
    if len(terms) > MAX_LATEX_TERMS:
        hidden = len(terms) - MAX_LATEX_TERMS
        more = ngettext("{n} more term", "{n} more terms", hidden).format(n=hidden)
        terms = terms[: MAX_LATEX_TERMS - 1] + [rf"\dots\ (\text{{{more}}})", terms[-1]]
    lines = [" + ".join(terms[k : k + per_line]) for k in range(0, len(terms), per_line)]
    ij = f"{drill.i},{drill.j}"
    body = r" \\ &\quad + ".join(lines)
    return (
        rf"\begin{{aligned}} S_{{{ij}}} &= q_{{{drill.i}}} \cdot k_{{{drill.j}}} = \textstyle\sum_d q_{{{drill.i},d}}\, k_{{{drill.j},d}} \\ "
        rf"&= {body} \\ &= {latex_number(drill.score)} \end{{aligned}}"
    )


def logit_latex(drill: DrillDown, narrow: bool = False) -> str:
    """The scaling, the scheme's bias (when there is one) and the mask with the numbers put in.

    ``narrow`` (a phone): the notes are cut into parts that ``latex_lines`` puts one under another.
    """
    ij = f"{drill.i},{drill.j}"
    scaled = drill.score * drill.scale
    if drill.bias is None:
        symbols = rf"S_{{{ij}}} \times s"
        numbers = rf"{latex_number(drill.score)} \times {latex_number(drill.scale)} = {latex_number(scaled)}"
    else:
        symbols = rf"S_{{{ij}}} \times s + b_{{{ij}}}"
        numbers = (rf"{latex_number(drill.score)} \times {latex_number(drill.scale)} + {_paren(drill.bias)}"
                   rf" = {latex_number(scaled + drill.bias)}")
    if drill.allowed:
        is_bias = _("is {scheme}'s bias").format(scheme=_(position_scheme(drill.pe).short_label))
        whose = rf"b \text{{ {is_bias}}}"
        bias_note = f"; {whose}" if drill.bias is not None else ""
        if narrow and bias_note:
            bias_note = rf") \quad ({whose}"
        allowed = _("allowed by the mask")
        return rf"L_{{{ij}}} = {symbols} = {numbers} \quad (\text{{{allowed}}}{bias_note})"
    if narrow:
        masked, without = _("masked"), _("without the mask:")
        return (rf"L_{{{ij}}} = -\infty \quad (\text{{{masked}}}) \quad \text{{{without}}}"
                rf" \quad {symbols} = {numbers}")
    would_be = _("masked; without the mask it would be")
    return rf"L_{{{ij}}} = -\infty \quad (\text{{{would_be} }} {symbols} = {numbers})"


def _denominator_latex(drill: DrillDown) -> tuple[str, str]:
    """The softmax's denominator of row i: (in symbols, with the numbers put in)."""
    i = drill.i
    keys = rf"\sum_k e^{{L_{{{i},k}} - m_{{{i}}}}}"
    if not drill.null_key:
        return keys, latex_number(drill.denominator)
    return (rf"e^{{0 - m_{{{i}}}}} + {keys}",
            rf"{latex_number(drill.null_exp)} + {latex_number(drill.keys_exp_sum)}")


def softmax_latex(drill: DrillDown) -> str:
    """The chosen cell's softmax with the numbers put in (the null key's term in the denominator when on)."""
    i, ij = drill.i, f"{drill.i},{drill.j}"
    if drill.fully_masked:
        if drill.null_key:
            why = _("row {i} has every key masked: the null key takes all its weight").format(i=i)
        else:
            why = _("row {i} has every key masked: zeros by our policy").format(i=i)
        return rf"A_{{{ij}}} = 0 \quad (\text{{{why}}})"
    symbols, numbers = _denominator_latex(drill)
    total = latex_number(drill.denominator)
    head = rf"A_{{{ij}}} = \frac{{e^{{L_{{{ij}}} - m_{{{i}}}}}}}{{{symbols}}}"
    if not drill.allowed:
        put_in = rf" = \frac{{e^{{-\infty}}}}{{{numbers}}}"
        return head + put_in + (rf" = \frac{{0}}{{{total}}}" if drill.null_key else "") + " = 0"
    exps = rf" = \frac{{e^{{{latex_number(drill.logit)} - {_paren(drill.row_max)}}}}}{{{numbers}}}"
    return head + exps + rf" = \frac{{{latex_number(float(drill.row_exp[drill.j]))}}}{{{total}}} = {latex_number(drill.weight)}"


def null_key_latex(drill: DrillDown) -> str:
    """The null key's share of row i with the numbers put in, and the row maximum m_i that includes its 0.

    "" without the null key.
    """
    if not drill.null_key:
        return ""
    i = drill.i
    symbols, numbers = _denominator_latex(drill)
    peak = r"\max\big(0,\ \max_k L_{" + f"{i},k" + r"}\big)"
    return (
        rf"A_{{{i},\varnothing}} = 1 - \textstyle\sum_j A_{{{i},j}} = \frac{{e^{{0 - m_{{{i}}}}}}}{{{symbols}}}"
        rf" = \frac{{{latex_number(drill.null_exp)}}}{{{latex_number(drill.denominator)}}}"
        rf" = {latex_number(drill.null_weight)},\qquad m_{{{i}}} = {peak} = {latex_number(drill.row_max)}"
    )
