"""The real models one process holds once, for every page, lesson and static build that reads them."""

from __future__ import annotations

import functools

from mha_core import smollm2 as smol


@functools.lru_cache(maxsize=1)
def shared_smollm2(model_file: str | None) -> smol.SmolLM2:
    """The verified SmolLM2 from a file already on this machine; ``model_file`` ($MHA_SMOLLM2_FILE) is only the
    cache key. ModelNotFetchedError when it must be downloaded first; a failure is not kept."""
    return smol.load_smollm2(allow_download=False)
