"""What the Seed notebooks page shows, as pure functions: match marks, side-by-side tables, downloads.

Every number comes from ``content.seeds.compare``, the same function the tests call, so the
page and the tests cannot disagree about whether a seed is reproduced. The builders take the
comparisons as arguments: the page computes them once per server and hands the same ones to the
overview and to each case. No streamlit in here.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from content.seeds import RANGE_CHECK, SHAPE_CHECK, CaseComparison, SeedCase, SeedExample
from mha_core.config import MHAConfig
from ui.charts.marks import UNSEEDED, cell_mark, mark
from ui.i18n import _, listing, ngettext


def largest_difference(comparison: CaseComparison) -> float:
    """The largest |ours − printed| over every printed array of the case (0 when nothing was printed)."""
    return max(comparison.max_abs_diff.values(), default=0.0)


def match_mark(case: SeedCase, comparison: CaseComparison) -> str:
    """One markdown line that says whether our numbers equal the seed's at its printed precision."""
    if comparison.matches is None:
        return UNSEEDED + " " + _("not reproducible (the seed's draws were unseeded): structural checks below instead")
    worst = largest_difference(comparison)
    if comparison.matches:
        return mark(True) + " " + _("matches to {decimals} decimals (max |Δ| = {gap:.2g})").format(
            decimals=case.decimals, gap=worst)
    return mark(False) + " " + _(
        "does not match: max |Δ| = {gap:.2g}, more than half a unit of the {decimals}th decimal ({tolerance:.1g})"
    ).format(gap=worst, decimals=case.decimals, tolerance=comparison.tolerance)


def check_text(text: str) -> str:
    """A check's words in the current language: its own translation, or a numbered template's filled in again."""
    for template in (SHAPE_CHECK, RANGE_CHECK):
        fields = re.match(re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>.+)", re.escape(template)) + "$", text)
        if fields:
            return _(template).format(**fields.groupdict())
    return _(text)


def check_lines(checks: dict[str, bool]) -> list[str]:
    """'(tick) every weight row sums to 1', one markdown line per structural check."""
    return [f"{mark(passed)} {check_text(text)}" for text, passed in checks.items()]


def as_table(values: np.ndarray) -> pd.DataFrame:
    """A 0-, 1- or 2-D array as a table: rows and columns numbered from 0 (1-D arrays become one row)."""
    matrix = np.atleast_2d(np.asarray(values, dtype=np.float64))  # (R, C)
    if matrix.ndim != 2:
        matrix = matrix.reshape(matrix.shape[0], -1)  # (R, rest)
    return pd.DataFrame(matrix, columns=[str(c) for c in range(matrix.shape[1])])


def side_by_side(comparison: CaseComparison, name: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(printed, ours, |ours − printed|) tables for one printed array of a case."""
    printed = np.asarray(comparison.printed[name], dtype=np.float64)
    ours = np.asarray(comparison.ours[name], dtype=np.float64)
    return as_table(printed), as_table(ours), as_table(np.abs(ours - printed))


def verdict(comparisons: Sequence[CaseComparison]) -> str:
    """One table cell for the overview: how many of a seed's cases match, or that it could only be checked for structure.

    A cell is not markdown, so its marks are the plain ✓ / ✗ and the words say the same.
    """
    n = len(comparisons)
    if all(c.matches is None for c in comparisons):
        passed = all(all(c.checks.values()) for c in comparisons)
        checked = (ngettext("unseeded: {mark} structural checks pass ({n} case)",
                            "unseeded: {mark} structural checks pass ({n} cases)", n) if passed else
                   ngettext("unseeded: {mark} structural checks FAIL ({n} case)",
                            "unseeded: {mark} structural checks FAIL ({n} cases)", n))
        return checked.format(mark=cell_mark(passed), n=n)
    matched = sum(c.matches is True for c in comparisons)
    cases = ngettext("{mark} {matched} of {n} case matches the printed numbers",
                     "{mark} {matched} of {n} cases match the printed numbers", n)
    return cases.format(mark=cell_mark(matched == n), matched=matched, n=n)


def overview_table(
    examples: Mapping[str, SeedExample], comparisons: Mapping[str, Sequence[CaseComparison]]
) -> pd.DataFrame:
    """One row per seed: its title and its verdict. ``comparisons[key]`` holds that seed's cases' comparisons, in order."""
    return pd.DataFrame(
        {
            _("seed"): list(examples),
            _("what it is"): [_(ex.title) for ex in examples.values()],
            _("our engine"): [verdict(comparisons[key]) for key in examples],
        }
    )


def conventions_table(example: SeedExample) -> pd.DataFrame:
    """The seed's conventions as a two-column table."""
    return pd.DataFrame({"": [_(name) for name in example.conventions],
                         _("in this seed"): [_(text) for text in example.conventions.values()]})


def embedding_csv(config: MHAConfig) -> bytes | None:
    """The configuration's uploaded embedding as CSV bytes the sidebar's uploader accepts; None without one."""
    if config.custom_embedding is None:
        return None
    buffer = io.StringIO()
    np.savetxt(buffer, np.asarray(config.custom_embedding, dtype=np.float64), delimiter=",", fmt="%.17g")
    return buffer.getvalue().encode("utf-8")


def explorer_summary(config: MHAConfig) -> str:
    """What the load button sets, in one line."""
    parts = [
        (_("{n} tokens attending over {kv}").format(n=len(config.tokens), kv=len(config.kv_tokens)) if config.is_cross
         else _("{n} tokens").format(n=len(config.tokens))),
        f"d_model {config.d_model}",
        ngettext("{n} head", "{n} heads", config.n_heads).format(n=config.n_heads),
        _("{init} weights").format(init=config.init),
        _("scale {rule}").format(rule=config.scale_rule),
        (_("mask {mask} (valid length {n})").format(mask=config.mask, n=config.valid_len) if config.mask == "padding"
         else _("mask {mask}").format(mask=config.mask)),
        _("biases") if config.bias else _("no biases"),
        "W_O" if config.output_projection else _("no W_O"),
    ]
    return listing(parts)
