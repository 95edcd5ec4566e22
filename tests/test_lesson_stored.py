"""The SmolLM2 lessons' numbers stored for the other processes of a test run (ui/pages/lessons/stored.py): a stored
result is bit for bit what the lesson computes, and it is read only for the same model file and the same code."""

from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from ui.pages.lessons import induction, stored, whatifs


def same(a, b) -> bool:
    """``a`` and ``b`` hold the same values of the same types, arrays bit for bit (dtype, shape and bytes)."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and (a.dtype, a.shape) == (b.dtype, b.shape) and a.tobytes() == b.tobytes()
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b or (a != a and b != b)  # NaN


def test_same_tells_a_changed_array_a_changed_dtype_and_a_changed_field():
    record = induction.InductionAblation(((1, 2),), (0.5,), ((1, 3),), {"all": (1.0, 2.0)}, np.eye(2), ("a", "b"))
    assert same(record, dataclasses.replace(record, pattern=np.eye(2)))
    assert not same(record, dataclasses.replace(record, pattern=np.eye(2) * (1 + 1e-16) + np.eye(2) * 1e-15))
    assert not same(record, dataclasses.replace(record, pattern=np.eye(2, dtype=np.float32)))
    assert not same(record, dataclasses.replace(record, losses={"all": (1.0, 2.0 + 1e-15)}))


def test_the_test_run_shares_one_folder_with_the_processes_it_starts():
    assert Path(os.environ[stored.ENV_VAR]).is_dir()  # tests/conftest.py: every worker, server and build reads it


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A lesson-like function that counts its calls, measured_once around it, the run's folder in tmp_path; the
    model's sha256 and the code's hash are settable."""
    calls = []
    keys = {"model": "m" * 64, "code": "c" * 64}
    monkeypatch.setattr(stored, "model_sha256", lambda: keys["model"])
    monkeypatch.setattr(stored, "code_hash", lambda: keys["code"])
    monkeypatch.setenv(stored.ENV_VAR, str(tmp_path))

    def numbers():
        calls.append(1)
        return {"losses": np.linspace(0, 1, 7), "top": (3, 4), "mean": 0.1 + 0.2}

    return stored.measured_once(numbers), calls, keys, tmp_path


def test_a_stored_result_is_read_by_a_later_process_and_equals_the_computed_one(counted):
    once, calls, _keys, folder = counted
    first = once()
    assert len(calls) == 1 and len(list(folder.glob("*.pickle"))) == 1
    once.cache_clear()  # as a new process: nothing in memory
    assert same(once(), first) and len(calls) == 1


@pytest.mark.parametrize("changed", ["model", "code"])
def test_another_model_file_or_other_code_computes_again(counted, changed):
    once, calls, keys, folder = counted
    once()
    once.cache_clear()
    keys[changed] = "x" * 64
    once()
    assert len(calls) == 2 and len(list(folder.glob("*.pickle"))) == 2


def test_without_the_folder_each_process_computes_and_nothing_is_written(counted, monkeypatch):
    once, calls, _keys, folder = counted
    monkeypatch.delenv(stored.ENV_VAR)
    once()
    once.cache_clear()
    once()
    assert len(calls) == 2 and not list(folder.iterdir())


def test_a_missing_model_file_raises_the_lessons_own_error_and_stores_nothing(monkeypatch, tmp_path):
    def missing():
        raise RuntimeError("no file here")

    def lesson():
        raise RuntimeError("the lesson's own message")

    monkeypatch.setattr(stored, "model_sha256", missing)
    monkeypatch.setenv(stored.ENV_VAR, str(tmp_path))
    with pytest.raises(RuntimeError, match="the lesson's own message"):
        stored.measured_once(lesson)()
    assert not list(tmp_path.iterdir())


def test_the_code_hash_changes_with_any_file_of_the_engine(monkeypatch, tmp_path):
    for folder in stored.CODE_FOLDERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(stored, "ROOT", tmp_path)
    before = stored.code_hash.__wrapped__()
    (tmp_path / "mha_core" / "a.py").write_text("x = 2\n")
    assert stored.code_hash.__wrapped__() != before


@pytest.mark.parametrize("lesson", [induction.measured, whatifs.sink_numbers, whatifs.qknorm_numbers],
                         ids=["induction", "sinks", "qknorm"])
def test_what_a_later_process_reads_is_what_the_engine_computed(smollm2, lesson, tmp_path):
    function = lesson.__wrapped__.__wrapped__  # the lesson's own function (measured_once -> functools.cache -> it)
    computed = stored.read_or_compute(tmp_path, function)  # this process computes it and stores it
    assert same(pickle.loads(stored.stored_path(tmp_path, function).read_bytes()), computed)
    assert same(stored.read_or_compute(tmp_path, function), computed)  # read back, not computed: as another process
