"""Pure builders for the FlashAttention page: its link settings, the tile map, the running state, the traffic
and the live comparison with the engine. No streamlit here: everything is tested without a server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_core.attention import AttentionTrace
from mha_core.config import MHAConfig, RunResult
from mha_core.flash import (
    FLASH_READS_FORMULA,
    FLASH_WRITES_FORMULA,
    SRAM_FORMULA,
    STANDARD_READS_FORMULA,
    STANDARD_WRITES_FORMULA,
    FlashRun,
    TileStep,
    Traffic,
    tile_count,
    weights_from_lse,
)
from ui.charts.numbers import count
from ui.i18n import N_, _, ngettext, sentences
from ui.pipeline.records import Panel
from ui.state.settings import Setting, key_tokens

DEFAULT_BLOCK = 2


def _tiles(values) -> int:
    return tile_count(len(values["tokens"]), len(key_tokens(values)), values["br"], values["bc"])


# The page's own link parameters: read after the model's settings (their limits follow the sentence).
FLASH_SETTINGS: tuple[Setting, ...] = (
    Setting("br", "int", label=N_("B_r: query rows per tile"), default=lambda v: min(DEFAULT_BLOCK, len(v["tokens"])),
            limits=lambda v: (1, len(v["tokens"]))),
    Setting("bc", "int", label=N_("B_c: keys per tile"), default=lambda v: min(DEFAULT_BLOCK, len(key_tokens(v))),
            limits=lambda v: (1, len(key_tokens(v)))),
    # The link's ``tile`` is the step's index from 0; the page counts steps from 1 (``step_number``).
    Setting("tile", "int", label=N_("Step (tiles in the kernel's order)"), default=0, limits=lambda v: (0, _tiles(v) - 1)),
)
SETTING = {row.name: row for row in FLASH_SETTINGS}


def step_number(index: int, steps: int) -> str:
    """Step ``index`` (from 0, as the link's ``tile``) as the page counts it, from 1: '1 of 9'."""
    return _("{step} of {steps}").format(step=index + 1, steps=steps)


@dataclass(frozen=True)
class Skipped:
    """The 'Tiles skipped' metric: its value, and a sentence when nothing can be skipped (else "")."""

    value: str
    note: str


def skipped_so_far(run: FlashRun, index: int, masked: bool) -> Skipped:
    """How many tiles the kernel has skipped by step ``index``, of all it skips; ``masked``: the layer has a mask."""
    total = run.traffic.tiles_skipped
    if total:
        return Skipped(_("{skipped} of {total}").format(skipped=sum(s.skipped for s in run.steps[: index + 1]),
                                                        total=total), "")
    if not masked:
        return Skipped(_("none"), _("Nothing can be skipped without a mask: every tile has pairs to compute."))
    return Skipped(_("none"), _("No tile is masked in full with these block sizes: every tile has a pair to compute."))


def engine_lse(trace: AttentionTrace, head: int) -> np.ndarray:
    """(Tq,) the log-sum-exp of head ``head``'s rows of the engine's logits (the null key's 0 included when on);
    -inf for a row with every key masked."""
    logits = np.asarray(trace.logits[head])  # (Tq, Tk)
    if trace.null_key:
        logits = np.concatenate([logits, np.zeros((logits.shape[0], 1))], axis=1)  # (Tq, Tk+1)
    peak = logits.max(axis=1)  # (Tq,)
    safe = np.where(np.isneginf(peak), 0.0, peak)  # (Tq,)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(logits - safe[:, None]).sum(axis=1))  # (Tq,)


def finished_rows(run: FlashRun, index: int) -> np.ndarray:
    """(Tq,) True for the query rows whose every tile has been visited by step ``index``."""
    done = np.zeros(run.output.shape[0], dtype=bool)  # (Tq,)
    last_of_block: dict[int, TileStep] = {}
    for step in run.steps:
        last_of_block[step.row_block] = step
    for step in last_of_block.values():
        if step.index <= index:
            done[step.rows[0] : step.rows[1]] = True
    return done


@dataclass(frozen=True)
class LiveCheck:
    """max |Δ| of the finished rows against the engine: output and log-sum-exp (None before any row finishes), and
    what the head hands on after the kernel (``FlashRun.after``) against the engine's concatenation (None without)."""

    rows_finished: int
    rows: int
    output: float | None
    lse: float | None
    handed_on: float | None = None


def _gap(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max |a - b|, where a row that is -inf in both counts as equal."""
    both = np.isneginf(ours) & np.isneginf(theirs)
    with np.errstate(invalid="ignore"):
        return float(np.max(np.where(both, 0.0, np.abs(ours - theirs)), initial=0.0))


def live_check(run: FlashRun, index: int, trace: AttentionTrace) -> LiveCheck:
    """The kernel's output and log-sum-exp so far against the engine's, over the rows finished by step ``index``."""
    done = finished_rows(run, index)
    if not done.any():
        return LiveCheck(0, done.size, None, None)
    output = _gap(run.output_after(index)[done], np.asarray(trace.heads[run.head])[done])
    lse = _gap(run.lse_after(index)[done], engine_lse(trace, run.head)[done])
    handed = None if run.after is None else _gap(run.handed_on_after(index)[done], engine_handed_on(trace, run.head)[done])
    return LiveCheck(int(done.sum()), done.size, output, lse, handed)


def engine_handed_on(trace: AttentionTrace, head: int) -> np.ndarray:
    """(Tq, hv) head ``head``'s columns of the engine's concatenation: what the head hands on to W_O."""
    hv = trace.heads.shape[-1]
    return np.asarray(trace.concat[:, head * hv : (head + 1) * hv])  # (Tq, hv)


def block_label(bounds: tuple[int, int], labels: list[str]) -> str:
    """'1:cat–2:sat' for a block of positions, or the one label."""
    start, stop = bounds
    return labels[start] if stop - start == 1 else f"{labels[start]}–{labels[stop - 1]}"


TILE_MARKS = {("done", False): "✓", ("done", True): N_("skipped"), ("now", False): N_("▶ now"),
              ("now", True): N_("▶ skipped"), ("later", False): "·", ("later", True): N_("will skip")}


def tile_map(run: FlashRun, index: int, query_labels: list[str], key_labels: list[str]) -> pd.DataFrame:
    """The tiles as a grid (query blocks x key blocks): visited (✓), now (▶), to come (·), skipped by the mask."""
    rows = sorted({s.rows for s in run.steps})
    cols = sorted({s.cols for s in run.steps})
    marks = np.empty((len(rows), len(cols)), dtype=object)  # (row blocks, column blocks)
    for step in run.steps:
        when = "done" if step.index < index else "now" if step.index == index else "later"
        marks[step.row_block, step.col_block] = _(TILE_MARKS[when, step.skipped])
    grid = pd.DataFrame(marks, index=[block_label(r, query_labels) for r in rows],
                        columns=[block_label(c, key_labels) for c in cols])
    grid.index.name = _("query block ↓ / key block →")
    return grid


def state_table(step: TileStep, query_labels: list[str]) -> pd.DataFrame:
    """One row per query of the tile: m before and after, the rescale factor, l before and after."""
    labels = query_labels[step.rows[0] : step.rows[1]]
    return pd.DataFrame({"m_old": step.m_old, "m_new": step.m_new, _("rescale e^(m_old − m_new)"): step.rescale,
                         "ℓ_old": step.l_old, "ℓ_new": step.l_new}, index=pd.Index(labels, name=_("query")))


def traffic_table(traffic: Traffic) -> pd.DataFrame:
    """Numbers read from and written to HBM per head, standard against tiled, with the formulas (the on-chip
    numbers are ``sram_sentence``'s: standard attention has no tile to count them for)."""
    rows = [
        (_("HBM reads"), traffic.standard_reads, traffic.flash_reads, STANDARD_READS_FORMULA, FLASH_READS_FORMULA),
        (_("HBM writes"), traffic.standard_writes, traffic.flash_writes, STANDARD_WRITES_FORMULA, FLASH_WRITES_FORMULA),
        (_("HBM total"), traffic.standard_reads + traffic.standard_writes, traffic.flash_reads + traffic.flash_writes,
         "", ""),
    ]
    frame = pd.DataFrame(rows, columns=[_("numbers"), _("standard attention"), _("tiled kernel"),
                                        _("standard: formula"), _("tiled: formula")]).set_index(_("numbers"))
    return frame


def sram_sentence(traffic: Traffic) -> str:
    """The on-chip memory one tile needs, and why standard attention has no such number (Markdown)."""
    worked = (f"{traffic.block_rows}·{traffic.hs} + {traffic.block_cols}·{traffic.hs} + {traffic.block_cols}·{traffic.hv}"
              f" + {traffic.block_rows}·{traffic.block_cols} + {traffic.block_rows}·{traffic.hv} + 2·{traffic.block_rows}")
    return _("On chip (SRAM), one tile needs **{numbers}** numbers: {formula} = {worked}. Standard attention has no "
             "tile, so no such number: it keeps the whole {tq}×{tk} scores and weights in HBM, which is the traffic "
             "counted above.").format(numbers=count(traffic.sram_numbers), formula=SRAM_FORMULA, worked=worked,
                                      tq=traffic.tq, tk=traffic.tk)


def reads_worked(traffic: Traffic) -> str:
    """``FLASH_READS_FORMULA`` with this run's numbers, and its value: the count the loop made."""
    size = f"({traffic.hs} + {traffic.hv})"
    blocks = math.ceil(traffic.tq / traffic.block_rows)
    return (f"{traffic.tq}·{traffic.hs} + {blocks}·{traffic.tk}·{size} − {traffic.skipped_keys}·{size} = "
            f"{traffic.flash_reads_by_formula:,}")


@dataclass(frozen=True)
class NotStored:
    """What the kernel wrote, what returning the weights would add, and the weights recomputed from the lse."""

    written: int  # O and lse: Tq (hv + 1)
    weights: int  # Tq Tk more numbers to write (and read back by whoever wants them)
    recomputed_gap: float  # max |exp(S - lse) - the engine's weights|


def not_stored(run: FlashRun, result: RunResult) -> NotStored:
    """The point of the page, in numbers, for head ``run.head``."""
    trace = result.trace
    g = trace.kv_head_of(run.head)
    bias = None if trace.bias is None else trace.bias[run.head]
    mask = None if result.mask is None else np.broadcast_to(result.mask, trace.logits.shape[1:])  # (Tq, Tk)
    recomputed = weights_from_lse(trace.q[run.head], trace.k[g], trace.scale, run.lse, bias, mask)  # (Tq, Tk)
    gap = float(np.max(np.abs(recomputed - trace.weights[run.head])))
    return NotStored(run.traffic.flash_writes, run.traffic.weights_numbers, gap)


def tile_panels(step: TileStep, query_labels: list[str], key_labels: list[str]) -> tuple[Panel, ...]:
    """The step's S tile and P̃ = exp(S − m_new), a masked pair grey with a × in both (its exp(−∞) = 0 is no small
    weight); () for a skipped tile."""
    if step.skipped:
        return ()
    rows, cols = slice(*step.rows), slice(*step.cols)
    seen = ~np.isneginf(step.logits)  # (br, bc) the pairs that may attend
    return (
        Panel(_("S tile ({row}, {col}) = Q_i K_jᵀ · scale (masked)").format(row=step.row_block, col=step.col_block),
              step.logits,
              query_labels[rows], key_labels[cols], "logit", axis_titles=(_("query"), _("key")), allowed=seen),
        Panel("P̃ = exp(S − m_new)", step.exponentials, query_labels[rows], key_labels[cols], "exp", kind="weights",
              axis_titles=(_("query"), _("key")), allowed=seen),
    )


def _listed(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return words[0] if len(words) == 1 else _("{first} and {last}").format(first=", ".join(words[:-1]), last=words[-1])


def _named(labels: list[str]) -> str:
    """'row **0:the**', 'rows **0:the** and **1:cat**', 'rows **0:the**, **1:cat** and **2:sat**'."""
    return ngettext("row {labels}", "rows {labels}", len(labels)).format(
        labels=_listed([f"**{label}**" for label in labels]))


def rows_finishing(run: FlashRun, index: int) -> np.ndarray:
    """(Tq,) True for the query rows whose last tile is step ``index``."""
    before = finished_rows(run, index - 1) if index else np.zeros(run.output.shape[0], dtype=bool)  # (Tq,)
    return finished_rows(run, index) & ~before


def step_sentence(run: FlashRun, index: int, query_labels: list[str], key_labels: list[str]) -> str:
    """What step ``index`` did, in a few sentences (Markdown), naming every row of the tile that sees its first
    key here and every row whose last tile this is."""
    step = run.steps[index]
    queries = block_label(step.rows, query_labels)
    keys = block_label(step.cols, key_labels)
    parts = [_("Tile ({row}, {col}): queries **{queries}**, keys **{keys}**.").format(
        row=step.row_block, col=step.col_block, queries=queries, keys=keys)]
    start = step.rows[0]
    if step.skipped:
        parts.append(_("Every pair in it is masked, so the kernel **skips it**: K and V of these keys are never "
                       "loaded, and m, ℓ and O pass through unchanged."))
    else:
        first = np.isneginf(step.m_old) & ~np.isneginf(step.m_new)  # (br,) rows that see their first key here
        if first.any():
            rows = np.flatnonzero(first)
            starts = _listed([f"{step.m_new[r]:.4f}" for r in rows])
            parts.append(ngettext(
                "{rows} sees its first key here: m starts at {starts} (the rescale factor e^(−∞) = 0 multiplies an "
                "empty sum).",
                "{rows} see their first key here: m starts at {starts} respectively (the rescale factor e^(−∞) = 0 "
                "multiplies an empty sum).", rows.size).format(
                rows=_named([query_labels[start + r] for r in rows]).capitalize(), starts=starts))
        grew = (step.m_new > step.m_old) & ~first  # (br,) rows whose maximum grew over keys seen before
        if grew.any():
            r = int(np.argmin(np.where(grew, step.rescale, np.inf)))
            label = query_labels[start + r]
            parts.append(_("In row **{label}** the maximum grew from {old:.4f} to {new:.4f}: ℓ and O so far were "
                           "measured against the old maximum, so both are multiplied by e^({old:.4f} − {new:.4f}) = "
                           "**{rescale:.4f}** before the tile is added.").format(
                label=label, old=step.m_old[r], new=step.m_new[r], rescale=step.rescale[r]))
        elif not first.any():
            parts.append(_("No row's maximum grew: the rescale factor is 1 and the tile's terms are simply added."))
    done = np.flatnonzero(rows_finishing(run, index))
    if done.size:
        parts.append(ngettext("This is the last tile of {rows}: it is finished, O = O~ / ℓ.",
                              "This is the last tile of {rows}: they are finished, O = O~ / ℓ.", done.size).format(
            rows=_named([query_labels[r] for r in done])))
    return sentences(*parts)


def config_note(config: MHAConfig) -> str:
    """The configuration in words, for the line above the stepper."""
    kind = _("cross-attention") if config.is_cross else _("self-attention")
    return _("{queries} queries × {keys} keys ({kind}), mask: {mask}").format(
        queries=len(config.tokens), keys=len(config.key_tokens), kind=kind, mask=config.mask)
