"""Smoke tests of the benchmarks: every section of ours runs in quick mode and returns sane rows.

Timings are never judged here (they belong to ``python -m bench``); what is asserted is the
shape of the rows, that every time is a finite positive number, and that the engine agrees with
the implementations it is timed against.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench import __main__ as bench_main
from bench import bench_engine, bench_kernels, bench_seeds
from bench.__main__ import main
from bench.registry import SECTIONS, select
from bench.report import format_value, markdown_table
from bench.seed_loops import seed002_attention, seed003_attention
from bench.timing import Candidate, time_interleaved

HAS_TORCH = importlib.util.find_spec("torch") is not None
ENGINE_KEYS = {"dtype", "T", "d_model", "heads", "gflop", "ours_ms", "ours_gflops", "peak_gflops", "ours_peak_fraction",
               "calls", "threads", "max_abs_diff", "agrees", "goals"}
TORCH_KEYS = {"mha_weights_ms", "mha_no_weights_ms", "sdpa_ms", "ours_vs_mha", "ours_vs_mha_no_weights", "ours_vs_sdpa"}
SEEDS_KEYS = {"seed", "T", "d_model", "heads", "dtype", "seed_ms", "ours_ms", "ours_vs_seed", "calls", "max_abs_diff", "agrees"}


def finite_positive(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def all_engine_rows():
    return bench_engine.run(quick=True)


@pytest.fixture(scope="module")
def engine_rows(all_engine_rows):
    """The rows of plain multi-head attention against torch's three ways."""
    return [row for row in all_engine_rows if row["variant"] == "mha"]


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_engine_variant_rows_time_every_variant_against_torch_and_agree(all_engine_rows):
    variants = [row for row in all_engine_rows if row["variant"] != "mha"]
    assert [row["variant"] for row in variants] == list(bench_engine.VARIANTS) * len(bench_engine.QUICK_VARIANT_SIZES)
    for row in variants:
        for key in ("ours_ms", "sdpa_ms", "ours_vs_sdpa"):
            assert finite_positive(row[key]), (key, row[key])
        assert row["agrees"] is True, (row["variant"], row["max_abs_diff"])
    decode_row = next(row for row in variants if row["variant"] == "decode")
    t, d_model, n_heads, kv_heads = bench_engine.QUICK_VARIANT_SIZES[0]
    assert decode_row["cache_numbers"] == 2 * kv_heads * t * (d_model // n_heads)
    assert decode_row["cache_bytes"] == 4 * decode_row["cache_numbers"]


@pytest.fixture(scope="module")
def seeds_rows():
    return bench_seeds.run(quick=True)


def test_engine_rows_cover_both_dtypes_and_the_quick_sizes(engine_rows):
    expected = {(dtype, t, d, h) for dtype in bench_engine.DTYPES for t, d, h in bench_engine.QUICK_SIZES}
    assert {(r["dtype"], r["T"], r["d_model"], r["heads"]) for r in engine_rows} == expected
    for row in engine_rows:
        assert set(row) >= ENGINE_KEYS, ENGINE_KEYS - set(row)


def test_engine_times_are_finite_and_positive(engine_rows):
    for row in engine_rows:
        for key in ("ours_ms", "gflop", "ours_gflops", "peak_gflops", "ours_peak_fraction"):
            assert finite_positive(row[key]), (key, row[key])
        assert row["calls"] >= 1 and row["threads"] >= 1


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_engine_torch_columns_are_finite_positive_and_outputs_agree(engine_rows):
    for row in engine_rows:
        assert set(row) >= TORCH_KEYS, TORCH_KEYS - set(row)
        for key in TORCH_KEYS:
            assert finite_positive(row[key]), (key, row[key])
        assert row["agrees"] is True, row["max_abs_diff"]
        # the ratio is what the table says it is
        assert row["ours_vs_mha"] == pytest.approx(row["ours_ms"] / row["mha_weights_ms"], rel=1e-12)


def test_engine_goal_text_names_the_t16_float32_goal(engine_rows):
    row = next(r for r in engine_rows if r["dtype"] == "float32" and r["T"] == 16)
    if HAS_TORCH:
        assert "<= 0.5" in row["goals"]
    float64 = next(r for r in engine_rows if r["dtype"] == "float64" and r["T"] == 16)
    assert float64["goals"] == ""  # no goal for float64 at T = 16


def test_flop_count_matches_the_issue_formula():
    # 8 T d^2 + 4 T^2 d at T = 2, d = 3: 8*2*9 + 4*4*3 = 144 + 48
    assert bench_engine.attention_flops(2, 3) == 192


def test_seeds_rows_have_the_keys_finite_times_and_agree(seeds_rows):
    assert {r["seed"] for r in seeds_rows} == {"002", "003"}
    for row in seeds_rows:
        assert set(row) >= SEEDS_KEYS, SEEDS_KEYS - set(row)
        for key in ("seed_ms", "ours_ms", "ours_vs_seed"):
            assert finite_positive(row[key]), (key, row[key])
        assert row["agrees"] is True and row["max_abs_diff"] <= bench_seeds.TOLERANCE


def test_kernels_rows_compare_each_choice_with_finite_times():
    rows = bench_kernels.run(quick=True)
    assert len(rows) == len(bench_kernels.QUICK_SIZES)
    for row in rows:
        for key in ("engine_ms", "alternative_ms", "ours_vs_alternative"):
            assert finite_positive(row[key]), (key, row[key])


def test_kernels_alternatives_compute_the_same_numbers():
    for what, _name, ours, _other_name, other in bench_kernels.in_process_comparisons(8, 12, 2):
        np.testing.assert_allclose(ours(), other(), rtol=1e-5, atol=1e-6, err_msg=what)


def test_seed002_loop_reproduces_the_seed_identity_example():
    # seed 002, its identity example: Q = K = V = I (2x2), 2 heads of size 1, no scaling effect
    # (sqrt(1) = 1): row 0 of head 0 is softmax([1, 0]) . [1, 0] = e / (1 + e) = 0.73105858.
    eye = np.eye(2)
    p = math.e / (1 + math.e)
    np.testing.assert_allclose(seed002_attention(eye, eye, eye, eye, 2), [[p, 0.5], [0.5, p]], rtol=0, atol=1e-12)


def test_seed003_loop_with_one_head_and_identity_weights_is_plain_attention():
    # one head, omega = I, beta = 0, omega_c = I: output column n = sum_m softmax_m(x_m . x_n / sqrt(C)) x_m
    x = np.array([[1.0, 0.0], [0.0, 2.0]])  # (C, T): token 0 = (1, 0), token 1 = (0, 2)
    zero = np.zeros((2, 1))
    out = seed003_attention(x, [(np.eye(2), np.eye(2), np.eye(2), zero, zero, zero)], np.eye(2))
    a = 1 / math.sqrt(2)
    w0 = np.exp([a * 1, 0.0]) / np.exp([a * 1, 0.0]).sum()  # query 0 against keys 0, 1: dots 1, 0
    w1 = np.exp([0.0, a * 4]) / np.exp([0.0, a * 4]).sum()  # query 1: dots 0, 4
    np.testing.assert_allclose(out[:, 0], x @ w0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out[:, 1], x @ w1, rtol=0, atol=1e-12)


def test_interleaved_timing_alternates_within_a_group_and_blocks_groups():
    order = []
    candidates = [Candidate(name, lambda name=name: order.append(name), group) for name, group in
                  (("a", "numpy"), ("b", "numpy"), ("c", "torch"))]
    times = time_interleaved(candidates, rounds=2, block_seconds=0.0, settle=0.0)
    assert {name: len(seconds) for name, seconds in times.items()} == {"a": 2, "b": 2, "c": 2}
    assert all(finite_positive(s) or s == 0.0 for seconds in times.values() for s in seconds)
    # per round per group: one block-size estimate pass (first round only), one untimed pass, one timed pass
    assert order == ["a", "b", "c"] + ["a", "b", "a", "b", "c", "c"] * 2


def test_select_keeps_registry_order_and_rejects_unknown_names():
    assert [s.name for s in select("seeds,engine")] == ["engine", "seeds"]
    assert [s.name for s in select(None)] == [s.name for s in SECTIONS]
    with pytest.raises(ValueError, match="unknown section"):
        select("engine,nope")


def test_format_and_markdown_table():
    assert [format_value(v) for v in (1234.5, 12.345, 1.2345, 0.012345, None, True)] == \
        ["1234", "12.3", "1.23", "0.0123", "-", "yes"]
    assert markdown_table([{"a": 1, "b": 0.5}, {"a": 2, "c": "x|y"}]).splitlines() == [
        "| a | b | c |", "|---|---|---|", "| 1 | 0.5 | - |", "| 2 | - | x/y |"]


def test_main_quick_writes_markdown_and_json(tmp_path, capsys):
    assert main(["--quick", "--only", "seeds", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "quick.json").read_text())
    section = data["sections"]["seeds"]
    assert section["quick"] is True and section["rows"] and section["machine"]["cores"] >= 1
    markdown = (tmp_path / "quick.md").read_text()
    assert "## Engine vs the seeds' loops over heads" in markdown and "| seed | T |" in markdown
    assert "ours_vs_seed" in capsys.readouterr().out


def test_main_rejects_an_unknown_section(tmp_path):
    assert main(["--quick", "--only", "nope", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "quick.json").exists()


def test_a_section_said_to_be_tested_is_run_in_quick_mode_by_that_test_file():
    """CI's bench step (``--untested``) leaves these sections to the file named: it must run their quick mode."""
    root = Path(__file__).resolve().parents[1]
    tested = [s for s in SECTIONS if s.tested_by]
    assert tested and [s for s in SECTIONS if not s.tested_by]
    for section in tested:
        module, function = section.target.split(":")
        call = f"{module.rsplit('.', 1)[1]}.{function}(quick=True)"
        assert call in (root / section.tested_by).read_text(encoding="utf-8"), (section.name, call)


def test_untested_leaves_out_the_sections_a_test_runs(tmp_path, capsys, monkeypatch):
    from bench import registry

    monkeypatch.setattr(registry, "SECTIONS", (registry.Section("a", "A", "bench.bench_seeds:run", "x.py"),
                                               registry.Section("b", "B", "bench.bench_seeds:run")))
    monkeypatch.setattr(bench_main, "SECTIONS", registry.SECTIONS)
    monkeypatch.setattr(bench_main, "run_section", lambda section, quick: {"rows": [{"ran": section.name}],
                                                                            "machine_line": "", "seconds": 0.0})
    monkeypatch.setattr(bench_main, "write_results", lambda *args: [])
    assert bench_main.main(["--quick", "--untested", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "(b) ==" in out and "(a) ==" not in out

