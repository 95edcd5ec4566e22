"""The what-if sweep shipped with the app (issue 36): for a few texts, the sparse sweep (top-k for each k of
``SWEEP_K``, MoBA for each block count of ``SWEEP_BLOCKS``, all 30 layers) and the four sink losses, computed once
and stored in ``SHIPPED_FILE`` (JSON, ~2 KB), so the what-ifs' first view on the default text reads them instead of
running 16 changed forward passes.

A record holds what it was made for: the model file's sha256 (a loaded SmolLM2 is always the pinned file,
``GGUF_FILE``: the loader refuses any other), the text, the sweep's settings. ``shipped_record`` gives a record only
when all of them match the model and the settings in force; otherwise it says why (the caller recomputes).
Regenerate with ``python -m ui.pages.real_model.whatif_sweep``. Pure Python and NumPy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_core._smollm2_files import GGUF_FILE
from mha_core.smollm2 import SmolLM2
from mha_core.smollm2_whatif import (
    MOBA_BLOCK,
    SINK_VARIANTS,
    SWEEP_BLOCKS,
    SWEEP_K,
    Progress,
    fit_sinks,
    moba_losses,
    sink_losses,
    sparse_losses,
)

SHIPPED_FILE = Path(__file__).resolve().parent / "data" / "smollm2_whatif_sweep.json"
FORMAT = 1  # the file's layout; a new layout makes every old record stale


def current_settings(model: SmolLM2) -> dict:
    """What a record must have been made with to be used now: the model file, the sweep's grid, the layout."""
    return {"format": FORMAT, "model_sha256": GGUF_FILE.sha256, "layers": model.config.n_layers,
            "sweep_k": list(SWEEP_K), "sweep_blocks": list(SWEEP_BLOCKS), "moba_block": MOBA_BLOCK,
            "sink_variants": list(SINK_VARIANTS)}


@dataclass(frozen=True)
class ShippedRecord:
    """One text's shipped numbers: mean losses (nats) with top-k in all layers (``topk``, one per k of ``SWEEP_K``),
    with MoBA (``moba``, one per block count of ``SWEEP_BLOCKS``), the dense loss, and ``sinks`` by variant."""

    text: str
    topk: tuple[float, ...]
    moba: tuple[float, ...]
    dense: float
    sinks: dict[str, float]


def sweep_record(model: SmolLM2, text: str, progress: Progress | None = None) -> dict:
    """The numbers of one text, computed now, with the settings they were made with (a JSON-ready dict)."""
    run = model.forward(text, traces=())
    layers, total = range(model.config.n_layers), len(SWEEP_K) + len(SWEEP_BLOCKS) + 1
    topk, moba = [], []
    for k in SWEEP_K:
        topk.append(float(sparse_losses(model, run, layers, k).mean()))
        if progress is not None:
            progress(len(topk), total)
    for blocks in SWEEP_BLOCKS:
        moba.append(float(moba_losses(model, run, layers, blocks).mean()))
        if progress is not None:
            progress(len(topk) + len(moba), total)
    sinks = sink_losses(model, run, fit_sinks(model, run))
    if progress is not None:
        progress(total, total)
    return {"settings": current_settings(model), "text": text, "topk": topk, "moba": moba,
            "dense": float(model.prompt_losses(run).mean()), "sinks": sinks}


def write_shipped(model: SmolLM2, texts: Sequence[str], path: Path = SHIPPED_FILE,
                  progress: Progress | None = None) -> None:
    """Compute every text's record and write the file (UTF-8 JSON, floats written in full)."""
    records = [sweep_record(model, text, progress) for text in texts]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"records": records}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def read_shipped(path: Path = SHIPPED_FILE) -> list[dict]:
    """The file's records ([] when it is missing or unreadable: nothing is shipped, everything is computed)."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))["records"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [record for record in records if isinstance(record, dict)]


def stale_reasons(record: dict, settings: dict) -> list[str]:
    """The settings a record was made with that differ from ``settings`` (their names; [] = usable)."""
    made = record.get("settings") if isinstance(record.get("settings"), dict) else {}
    return [name for name, value in settings.items() if made.get(name) != value]


def shipped_record(records: Sequence[dict], model: SmolLM2, text: str) -> tuple[ShippedRecord | None, list[str]]:
    """The record made for ``text`` with the current settings, or (None, the reasons it is stale; [] when no record
    was made for ``text``)."""
    settings = current_settings(model)
    for record in records:
        if record.get("text") != text:
            continue
        reasons = stale_reasons(record, settings)
        try:
            shipped = ShippedRecord(text, tuple(map(float, record["topk"])), tuple(map(float, record["moba"])),
                                    float(record["dense"]), {name: float(record["sinks"][name])
                                                             for name in SINK_VARIANTS})
        except (KeyError, TypeError, ValueError):
            return None, [*reasons, "numbers"]
        if reasons or len(shipped.topk) != len(SWEEP_K) or len(shipped.moba) != len(SWEEP_BLOCKS):
            return None, reasons or ["numbers"]
        if not np.isfinite([*shipped.topk, *shipped.moba, shipped.dense]).all():
            return None, ["numbers"]
        return shipped, []
    return None, []
