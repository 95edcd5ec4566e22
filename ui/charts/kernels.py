"""What the pages need to show the attention kernels (issue 26) truthfully: pure builders, no streamlit.

- ``grid_kind``: the view a weights figure is drawn as: diverging, centred on 0, where the kernel's weights
  can be negative (``Kernel.signed``), the fixed 0..1 scale otherwise; ``view_kind`` also draws the other
  views as the kernel makes them (``ui.charts.views.kernel_view``);
- ``row_sums_sentence``: what a row of weights sums to, for captions, from the kernel's record;
- ``kernel_rows``: the About page's table of kernels.
"""

from __future__ import annotations

from mha_core.attention import AttentionTrace
from mha_core.kernels import KERNELS
from ui.charts.labels import said
from ui.charts.views import kernel_view
from ui.i18n import N_, _


def weights_signed(trace: AttentionTrace) -> bool:
    """The trace's weights can be negative (its kernel says so)."""
    return KERNELS[trace.kernel].signed


def grid_kind(trace: AttentionTrace, view: str) -> str:
    """The matrix view (``ui.charts.views``) a figure of ``view`` is drawn as: signed weights on a diverging scale."""
    return "signed_weights" if view == "weights" and weights_signed(trace) else view


def view_kind(trace: AttentionTrace, view: str) -> str:
    """The figure kind of the Heads switch's ``view`` for the trace's kernel: ``grid_kind`` for the weights, the
    kernel's own record of the other views (its maps, its words)."""
    kind = grid_kind(trace, view)
    return kind if kind != view else kernel_view(view, trace.kernel).name


def first_upper(words: str) -> str:
    """``words`` with its first letter upper case and the rest kept: str.capitalize() would lower 'A₁ − λA₂'."""
    return words[:1].upper() + words[1:]


def row_sums_sentence(trace: AttentionTrace) -> str | None:
    """What the rows sum to under a kernel other than softmax, with the numbers of this run; None for softmax."""
    kernel = KERNELS[trace.kernel]
    if not kernel.variant:  # the softmax head: the pages' own captions say it
        return None
    if kernel.spare is not None:  # each row gives its own share to no key (a learned sink)
        spare = kernel.spare(trace.kernel_parts)  # (nh, Tq)
        return _(kernel.spare_words).format(kernel=first_upper(_(kernel.label)), low=f"{spare.min():.3f}",
                                            high=f"{spare.max():.3f}")
    if kernel.row_sum is not None:  # a sum this run's parameters set (differential: 1 − λ)
        words = dict(kernel=first_upper(_(kernel.label)), formula=kernel.row_sum_formula,
                     total=f"{kernel.row_sum(trace.kernel_parts):.3f}")
        if kernel.signed:
            return _("{kernel}: each row sums to {formula} = {total}, not 1, and weights can be negative, so the "
                     "colours are centred on 0 (blue below).").format(**words)
        return _("{kernel}: each row sums to {formula} = {total}, not 1.").format(**words)
    words = dict(kernel=first_upper(_(kernel.short_label)), row_sums=said(kernel.row_sums), formula=kernel.formula)
    if kernel.softmax_rows:  # a softmax over some of the keys (sparse selection)
        return _("{kernel} attention: {row_sums} ({formula}).").format(**words)
    return _("{kernel} attention: {row_sums} ({formula}); no softmax.").format(**words)


# The About page's table of kernels: its column headers, marked here and translated where shown (``kernel_columns``).
# The first column ("kernel") is the index the page sets.
KERNEL_COLUMNS = ["kernel", N_("name"), N_("what it does"), N_("rows sum to"), N_("negative weights"),
                  N_("cannot combine with"), N_("from")]


def kernel_columns() -> list[str]:
    """``KERNEL_COLUMNS`` in the current language, the first ("kernel", the index the page sets) kept as it is."""
    return [KERNEL_COLUMNS[0], *(_(name) for name in KERNEL_COLUMNS[1:])]


def kernel_rows() -> list[tuple[str, ...]]:
    """One row per kernel of the engine's table (the About page), and a last one for MLA, in the current language
    (the kernels' names, settings and papers are kept as written)."""
    yes, no = _("yes"), _("no")
    rows = [(k.name, said(k.label), said(k.summary), said(k.row_sums), yes if k.signed else no,
             "; ".join(r.setting for r in k.refuses) or "–", k.paper) for k in KERNELS.values()]
    rows.append(("mla_rank > 0", _("multi-head latent attention (MLA)"),
                 _("Keys and values are up-projected from one latent of rank r per token; RoPE rides on a few "
                   "decoupled dimensions; a decoder caches r + d_rope numbers per token."), _("each row sums to 1"), no,
                 _("kernel ≠ softmax; kv_heads; bias; hand-built heads"), "DeepSeek-AI 2024 (DeepSeek-V2)"))
    return rows
