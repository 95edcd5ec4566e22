"""The weights' colour ranges (the ``colours`` setting: ``ui.state.settings`` COLOUR_RANGE_LABELS): what a
bright cell means under each, the panels' titles when each head has its own range, and when the fixed 0..1
range leaves the panels dark. Pure: arrays and strings in, strings and numbers out."""

from __future__ import annotations

import numpy as np

from ui.charts.labels import max_title
from ui.i18n import N_, _

# Colour ranges of the weights view (the ``colours`` setting), each with what a bright cell then means (the
# Heads caption's sentence): the fixed 0..1 compares heads; the others make long sentences readable.
COLOUR_RANGES = {
    "fixed": N_("A bright cell is a large weight, not an 'important word'."),
    "max": N_("A bright cell is a large weight among those shown (the colours run from 0 to the largest), "
              "not an 'important word'."),
    "head": N_("A bright cell is a large weight for its head: each panel runs from 0 to its own largest weight, "
               "written in its title, so a colour means a different weight in each panel."),
}


# Signed weights (a kernel whose record says ``signed``: differential attention's A₁ − λA₂) have one range: centred
# on 0 and as wide as the largest |weight| shown, so that a negative weight is never cut off or drawn as 0. None
# of the ranges above (all from 0 up) is offered for them.
SIGNED_COLOURS = N_("Red is a positive weight, blue a negative one: the colours run from −m to +m, m the largest "
                    "|weight| shown (the same for every head).")


def offered_ranges(signed: bool) -> tuple[str, ...]:
    """The colour ranges the weights' switch offers: every one of ``COLOUR_RANGES`` for weights ≥ 0, none for
    signed weights (``SIGNED_COLOURS`` is their only range)."""
    return () if signed else tuple(COLOUR_RANGES)


def largest_weight(matrices: np.ndarray) -> float:
    """The largest finite value (at least 1e-9): the top of an adaptive weights scale."""
    finite = np.asarray(matrices)[np.isfinite(matrices)]
    return float(max(finite.max(), 1e-9)) if finite.size else 1.0


DIM_ROW_MAX = 0.15  # a typical row's largest weight below this leaves 0..1 colours dark (64 tokens: ~0.09)


def bright_cells(colours: str, weights: np.ndarray, per_head_label: str | None, signed: bool = False) -> str:
    """The caption's sentence on what a bright cell is under the colour range ``colours``; on the fixed 0..1,
    when ``weights`` (nh, Tq, Tk) would be drawn nearly all dark, that they are and, where the page has the
    per-head colour range (named ``per_head_label``; None: it has no such switch), how to see the patterns.
    The default stays 0..1, so an old link still shows what it showed. ``signed`` weights: ``SIGNED_COLOURS``."""
    if signed:
        return _(SIGNED_COLOURS)
    hint = dark_hint(weights, per_head_label) if colours == "fixed" else None
    return _(COLOUR_RANGES[colours]) + (f" {hint}" if hint else "")


def dark_hint(matrices: np.ndarray, per_head_label: str | None) -> str | None:
    """A sentence for the caption when the fixed 0..1 range draws nearly every cell dark: the typical row's
    largest weight (median over heads and rows) is below ``DIM_ROW_MAX``; else None. (nh, Tq, Tk) weights in.
    It names the colour range ``per_head_label`` as the way out; None (a page without that switch, the static
    pack): it states the fact only."""
    finite = np.where(np.isfinite(matrices), matrices, 0.0)  # (nh, Tq, Tk)
    typical = float(np.median(finite.max(axis=-1)))  # over (nh, Tq)
    if typical >= DIM_ROW_MAX:
        return None
    if per_head_label:
        return _("A typical row's largest weight is {typical}, so on 0..1 nearly every cell is dark: Colour range "
                 "'{label}' shows each head's pattern.").format(typical=f"{typical:.2f}", label=per_head_label)
    return _("A typical row's largest weight is {typical}, so on 0..1 nearly every cell is dark.").format(
        typical=f"{typical:.2f}")


def panel_titles(titles: list[str] | None, matrices: np.ndarray, per_head: bool) -> list[str]:
    """The panels' titles ('head 0', ... unless given); with a colour range per head each says where its range
    ends, the panel's largest value: 'head 3 · max 0.412'."""
    titles = titles or [_("head {h}").format(h=h) for h in range(matrices.shape[0])]
    if not per_head:
        return titles
    return [max_title(title, largest_weight(matrices[h])) for h, title in enumerate(titles)]
