"""A/B compare: configuration B is A (the sidebar's) with some settings changed, in the same link.

B's settings travel as ``b_``-prefixed query parameters, one per row of the settings table whose
value differs from A's (``?scale=sqrt_dk&b_scale=none``); an empty ``b_`` value means "this
setting's default". Nothing here names a setting: every function walks ``model_settings()``.
Pure (no streamlit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_core.config import MHAConfig, RunResult
from ui.i18n import _
from ui.state.settings import model_settings, values_of
from ui.state.urlstate import config_from_params, params_from_config

B_PREFIX = "b_"


def b_overrides(params: Mapping[str, str]) -> dict[str, str]:
    """The ``b_`` parameters of a link, without their prefix."""
    return {k[len(B_PREFIX) :]: v for k, v in params.items() if k.startswith(B_PREFIX)}


def config_b(config_a: MHAConfig, overrides: Mapping[str, str]) -> tuple[MHAConfig, list[str]]:
    """B: A's link with ``overrides`` (parameter -> text) laid over it, read like any link (never raises)."""
    config, messages = config_from_params({**params_from_config(config_a), **overrides})
    return config, [f"B: {m}" for m in messages]


def b_params(config_a: MHAConfig, config_b_: MHAConfig) -> dict[str, str]:
    """The ``b_`` parameters that turn A's link into B's: only the settings that differ."""
    pa, pb = params_from_config(config_a), params_from_config(config_b_)
    out = {f"{B_PREFIX}{k}": v for k, v in pb.items() if pa.get(k) != v}
    out.update({f"{B_PREFIX}{k}": "" for k in pa if k not in pb})  # A's value, unset in B: B's default
    return out


def differences(config_a: MHAConfig, config_b_: MHAConfig) -> list[tuple[str, object, object]]:
    """(label, A's value, B's value) for every setting that differs."""
    va, vb = values_of(config_a), values_of(config_b_)
    return [(row.short_name, va[row.name], vb[row.name]) for row in model_settings() if va[row.name] != vb[row.name]]


@dataclass(frozen=True)
class Comparison:
    """What can be compared: the heads both have, their weights and B - A; or why nothing can."""

    n_heads: int  # heads compared: 0..n_heads-1 (the smaller head count)
    weights_a: np.ndarray  # (n, Tq, Tk)
    weights_b: np.ndarray  # (n, Tq, Tk)
    delta: np.ndarray  # (n, Tq, Tk) B - A
    note: str  # what is compared, in a sentence


def compare(result_a: RunResult, result_b: RunResult) -> Comparison | str:
    """The per-head comparison, or a message saying why A and B cannot be compared cell by cell."""
    if result_a.query_labels != result_b.query_labels or result_a.key_labels != result_b.key_labels:
        return _(
            "A and B attend over different tokens (the sentence or the key/value sentence differs), so their "
            "weights have no cell in common: change the sentence in both, or compare two settings on one sentence."
        )
    na, nb = result_a.trace.n_heads, result_b.trace.n_heads
    n = min(na, nb)
    wa = result_a.trace.weights[:n]  # (n, Tq, Tk)
    wb = result_b.trace.weights[:n]  # (n, Tq, Tk)
    note = _("All {n} heads compared.").format(n=n) if na == nb else _(
        "A has {na} heads and B {nb}: heads 0..{last} are compared (head h of A against head h of B; "
        "with another head count each head has another size, so this is a comparison of patterns, not of one head)."
    ).format(na=na, nb=nb, last=n - 1)
    return Comparison(n, wa, wb, wb - wa, note)


def head_changes(comparison: Comparison, query_labels: list[str], key_labels: list[str]) -> pd.DataFrame:
    """Per head: the largest |B - A|, the cell where it is (query, key), A's and B's weight there."""
    rows = []
    for h in range(comparison.n_heads):
        size = np.abs(comparison.delta[h])  # (Tq, Tk)
        i, j = np.unravel_index(int(size.argmax()), size.shape)
        rows.append(
            {
                "head": _("head {h}").format(h=h),
                "largest |B − A|": float(size[i, j]),
                "query": query_labels[i],
                "key": key_labels[j],
                "A": float(comparison.weights_a[h, i, j]),
                "B": float(comparison.weights_b[h, i, j]),
                "mean |B − A|": float(size.mean()),
            }
        )
    return pd.DataFrame(rows).set_index("head")


def summary_line(row: pd.Series) -> str:
    """'head 0: largest change 0.31 at query 2:sat → key 0:the (0.12 → 0.43)'."""
    return _("{head}: largest change {change:.3f} at query {query} → key {key} ({a:.3f} → {b:.3f})").format(
        head=row.name, change=row["largest |B − A|"], query=row["query"], key=row["key"], a=row["A"], b=row["B"])
