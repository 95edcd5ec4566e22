"""The hand-built heads on the Lessons page: one configuration per row of ``mha_core.presets.PRESETS``."""

from __future__ import annotations

import numpy as np

from mha_core.config import MHAConfig, run
from mha_core.presets import PRESETS
from ui.pages.lessons.records import Grid

# The default sentence repeats "the", so the same-token preset has something to find.
PRESET_CONFIGS: dict[str, MHAConfig] = {init: MHAConfig(init=init) for init in PRESETS}


def preset_grid() -> Grid:
    """Head 0 of every preset, side by side on one 0..1 scale, titled with its short name."""
    results = [run(config) for config in PRESET_CONFIGS.values()]
    weights = np.stack([r.trace.weights[0] for r in results])  # (n_presets, T, T)
    titles = [PRESETS[init].name for init in PRESET_CONFIGS]
    return Grid(weights, results[0].query_labels, results[0].key_labels, titles, max_cols=len(PRESET_CONFIGS))
