"""The SmolLM2 lessons' numbers, computed once per process, and once per machine where ``$MHA_LESSON_CACHE`` names
a folder that several processes share (the test run's workers, their servers and the static pack builds they start).

A stored result is the pickle of what the function returned (bit for bit the same arrays and floats). Its file name
holds the model file's sha256 (the file is verified first), a hash of the app's code (every ``.py`` file of
``mha_core`` and ``ui``) and numpy's version: a result computed by other code or from another file is never read.
Without the variable (a served app), nothing is written and each process computes as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np

ENV_VAR = "MHA_LESSON_CACHE"
ROOT = Path(__file__).resolve().parents[3]
CODE_FOLDERS = ("mha_core", "ui")  # the engine and the lessons read nothing else


@functools.cache
def code_hash() -> str:
    """sha256 over the path and text of every .py file of the app's engine and ui, and numpy's version."""
    digest = hashlib.sha256(np.__version__.encode())
    for path in sorted(p for folder in CODE_FOLDERS for p in (ROOT / folder).rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def model_sha256() -> str:
    """The sha256 of the SmolLM2 file the lessons read, once it is verified; RuntimeError when it is missing or not
    the genuine one (as loading it would raise)."""
    from mha_core._smollm2_files import GGUF_FILE, find_gguf, verify_gguf

    verify_gguf(find_gguf(allow_download=False).path)  # hashed once per process, as the model's load does
    return GGUF_FILE.sha256


def stored_path(folder: Path, function: Callable) -> Path:
    """Where ``function``'s result lives in ``folder``: named after the function, the model file and the code."""
    name = f"{function.__module__}.{function.__qualname__}"
    return folder / f"{name}-{model_sha256()[:16]}-{code_hash()[:16]}.pickle"


def read_or_compute(folder: Path, function: Callable):
    """The stored result of ``function`` in ``folder``, or computed and stored there. One process computes while the
    others wait for it (a lock file beside the result); a file appears whole (written aside, then renamed)."""
    import fcntl  # POSIX only, as the test runs that set the folder are; the app itself never imports it

    path = stored_path(folder, function)
    folder.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return pickle.loads(path.read_bytes())
        result = function()
        aside = path.with_suffix(f".{os.getpid()}.tmp")
        aside.write_bytes(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(aside, path)
        return result


def measured_once(function: Callable[[], object]) -> Callable[[], object]:
    """``functools.cache`` for a lesson's numbers (a function of no arguments), shared through ``$MHA_LESSON_CACHE``
    when it is set. A failure (the model file missing) is neither kept nor stored."""

    @functools.cache
    @functools.wraps(function)
    def once():
        folder = os.environ.get(ENV_VAR)
        if not folder:
            return function()
        try:
            model_sha256()
        except RuntimeError:  # the model file is missing or damaged: the function raises what it always did
            return function()
        return read_or_compute(Path(folder), function)

    return once
