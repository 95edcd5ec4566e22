"""Pure table builders: arrays + labels in, a pandas DataFrame (or plain text) out. No streamlit.

Rows and columns are named with position-carrying token labels ("0:the"), the same labels as
the figures, so a table, a heatmap and a CSV of one matrix line up cell by cell.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_core.attention import AttentionTrace
from mha_core.diagnostics import head_similarity, head_summary
from mha_core.kernels import attention_kernel
from ui.charts.kernels import row_sums_sentence as kernel_row_sums
from ui.i18n import N_, _

# Column names of the head-diagnostics table, with what each number means (for column help), for weights whose
# rows are probability distributions; ``diagnostic_columns`` gives the words for any kernel. The column names stay in
# English (the table's and the CSV's keys; a page shows ``_(label)`` as the header); the meanings are marked and
# ``diagnostic_columns`` translates them.
DIAGNOSTIC_COLUMNS = {
    "entropy": (N_("entropy"), N_("0 = each row puts all its weight on one key, 1 = spread evenly over the keys it "
                                  "may see")),
    "max_weight": (N_("mean row max"), N_("the mean of each row's largest weight (1 = one-hot rows); a panel title's "
                                          "max is the single largest")),
    "diagonal": (N_("on itself"), N_("mean weight of token i on key i (the diagonal)")),
    "previous": (N_("on previous"), N_("mean weight of token i on key i-1")),
    "first": (N_("on first token"), N_("mean weight on key 0 (an attention 'sink')")),
}


def diagnostic_columns(trace: AttentionTrace) -> dict[str, tuple[str, str]]:
    """The head-diagnostics columns by name: (label, meaning), in words true of the kernel's weights.

    Signed rows that need not sum to 1 (differential) have no entropy, and their other columns are
    means of signed weights: the meanings say so.
    """
    kernel = attention_kernel(trace.kernel)
    if kernel.rows_are_distributions:
        return {name: (label, _(meaning)) for name, (label, meaning) in DIAGNOSTIC_COLUMNS.items()}
    words = dict(weights=_(kernel.weights_label), total=kernel.row_sum_formula)
    return {
        "entropy": ("entropy", _("not defined here: a row of the {weights} can hold negative weights and sums to "
                                 "{total}, so it is no probability distribution and has no entropy").format(**words)),
        "max_weight": ("mean row max", _("the mean of each row's largest (most positive) signed weight; a row sums to "
                                         "{total}, and next to negative weights one weight can exceed that").format(
                                             **words)),
        "diagonal": ("on itself", _("mean signed weight of token i on key i (below 0: v_i is subtracted)")),
        "previous": ("on previous", _("mean signed weight of token i on key i-1 (below 0: v_i-1 is subtracted)")),
        "first": ("on first token", _("mean signed weight on key 0 (below 0: v_0 is subtracted)")),
    }


def diagnostics_caption(trace: AttentionTrace) -> str:
    """What the head-diagnostics numbers are averages of, with this run's row sum when it is not 1."""
    kernel = attention_kernel(trace.kernel)
    if kernel.rows_are_distributions:
        return _("Averages over the query rows (fully masked rows left out). Entropy 0 = sharp, 1 = even.")
    if kernel.row_sum is None and not kernel.rows_sum_to_one:  # no one sum for the run (Gated DeltaNet's M)
        return _("Averages over the query rows (fully masked rows left out) of the signed {weights}: {row_sums}, and "
                 "a weight below 0 subtracts its key's value. No entropy (—): a signed row is no probability "
                 "distribution.").format(weights=_(kernel.weights_label), row_sums=_(kernel.row_sums))
    total = 1.0 if kernel.row_sum is None else kernel.row_sum(trace.kernel_parts)
    return _("Averages over the query rows (fully masked rows left out) of the signed {weights}: each row sums to "
             "{formula} = {total} here, and a weight below 0 subtracts its key's value. No entropy (—): a signed row "
             "is no probability distribution.").format(weights=_(kernel.weights_label), formula=kernel.row_sum_formula,
                                                       total=f"{total:.3f}")


def matrix_frame(matrix: np.ndarray, row_labels: list[str], col_labels: list[str]) -> pd.DataFrame:
    """A (R, C) matrix as a DataFrame indexed by the row labels, with the column labels as columns."""
    matrix = np.asarray(matrix)
    if matrix.shape != (len(row_labels), len(col_labels)):
        raise ValueError(
            f"matrix of shape {matrix.shape} does not fit {len(row_labels)} row and {len(col_labels)} column labels"
        )
    return pd.DataFrame(matrix, index=pd.Index(row_labels, name="row"), columns=list(col_labels))


def stacked_frame(
    matrices: np.ndarray, titles: list[str], row_labels: list[str], col_labels: list[str]
) -> pd.DataFrame:
    """(n, R, C) matrices as one long table: index (panel title, row label), one column per key."""
    matrices = np.asarray(matrices)
    n, r, c = matrices.shape
    if (n, r, c) != (len(titles), len(row_labels), len(col_labels)):
        raise ValueError(
            f"matrices of shape {matrices.shape} do not fit {len(titles)} titles, "
            f"{len(row_labels)} rows, {len(col_labels)} columns"
        )
    index = pd.MultiIndex.from_product([titles, row_labels], names=["head", "query"])
    return pd.DataFrame(matrices.reshape(n * r, c), index=index, columns=list(col_labels))


SELF_ONLY = ("diagonal", "previous")  # key i is token i only when the keys are the queries' own sentence


def head_summary_columns(trace: AttentionTrace, cross: bool = False) -> dict[str, np.ndarray]:
    """Per head (nh,) each: entropy, max weight, diagonal / previous / first-token mass (NaN = no row counted), by
    column label (``DIAGNOSTIC_COLUMNS``, English).

    In cross-attention (``cross``) key i is a word of another sentence, so "on itself" and "on previous"
    mean nothing and are left out. A kernel whose rows are no probability distributions (signed) has no
    entropy column.
    """
    distributions = attention_kernel(trace.kernel).rows_are_distributions
    summary = head_summary(trace.weights, trace.fully_masked, np.isfinite(trace.logits), distributions)
    return {DIAGNOSTIC_COLUMNS[name][0]: values for name, values in summary.items()
            if not (cross and name in SELF_ONLY)}


def head_names(n_heads: int) -> list[str]:
    """'head 0', 'head 1', ... in the run's language: the rows of every per-head table."""
    return [_("head {h}").format(h=h) for h in range(n_heads)]


def head_summary_frame(trace: AttentionTrace, cross: bool = False) -> pd.DataFrame:
    """One row per head (``head_summary_columns``), indexed by 'head h'."""
    frame = pd.DataFrame(head_summary_columns(trace, cross))
    frame.index = pd.Index(head_names(trace.n_heads), name="head")
    return frame


def similarity_frame(trace: AttentionTrace) -> pd.DataFrame:
    """Cosine similarity between every pair of heads' weight matrices, labelled 'head h'."""
    names = head_names(trace.n_heads)
    return matrix_frame(head_similarity(trace.weights), names, names)


def fully_masked_queries(trace: AttentionTrace, query_labels: list[str]) -> list[str]:
    """Labels of the query rows that have no key to attend to in at least one head."""
    rows = np.asarray(trace.fully_masked).any(axis=0)  # (Tq,)
    return [label for label, masked in zip(query_labels, rows, strict=True) if masked]


def null_key_shares(trace: AttentionTrace) -> np.ndarray:
    """(nh, Tq) the share of each row the null key takes, 1 − Σ_j A_ij (all 0 without the null key)."""
    if not trace.null_key:
        return np.zeros(trace.weights.shape[:2])  # (nh, Tq)
    return 1.0 - trace.weights.sum(axis=-1)  # (nh, Tq)


def row_sums_sentence(trace: AttentionTrace) -> str:
    """What the rows of the weights sum to: 1, or with the null key less, with the range of its share."""
    variant = kernel_row_sums(trace)  # another kernel's rows (issue 26)
    if variant is not None:
        return variant
    if not trace.null_key:
        return _("Each row sums to 1.")
    shares = null_key_shares(trace)  # (nh, Tq)
    return _("With the null key (softmax₁) each row sums to less than 1: the null key (logit 0, value 0) takes the "
             "rest, 1 − Σ = {low} to {high} of a row here (all heads and queries).").format(
        low=f"{shares.min():.3f}", high=f"{shares.max():.3f}")
