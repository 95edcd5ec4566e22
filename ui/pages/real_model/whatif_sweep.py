"""Regenerate the what-if sweep shipped with the app (mha_core/data/smollm2_whatif_sweep.json) for the Real model
page's default prompt and the calibration text:

    python -m ui.pages.real_model.whatif_sweep

Takes ~2 minutes on one core (16 changed forward passes of SmolLM2 per text). The page uses a record only when the
model file, the text and the sweep's settings are those it was made for.
"""

from __future__ import annotations

import sys

from mha_core.smollm2 import load_smollm2
from mha_core.smollm2_shipped import SHIPPED_FILE, write_shipped
from mha_core.smollm2_whatif import CALIBRATION_TEXT
from ui.pages.real_model.smollm2 import DEFAULT_PROMPT

SHIPPED_TEXTS = (DEFAULT_PROMPT, CALIBRATION_TEXT)


def main() -> None:
    model = load_smollm2(allow_download=False)
    write_shipped(model, SHIPPED_TEXTS, progress=lambda done, total: print(f"{done}/{total}", file=sys.stderr))
    print(f"wrote {SHIPPED_FILE} ({SHIPPED_FILE.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
