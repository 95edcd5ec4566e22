"""The seed examples: every printed number reproduced, structure checked, and the JSON reference cases matched."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from content.seeds import (
    EXAMPLE_SEED,
    SEED001_W,
    SEED001_X,
    SEED003_D,
    SEED003_HEADS,
    SEED_EXAMPLES,
    CaseComparison,
    SeedCase,
    compare,
    printed_tolerance,
    seed000_inputs,
    seed002_draws,
    seed003_inputs,
    seed003_parameters,
    seed004_inputs,
)
from mha_core import AttentionWeights, merge_heads, multi_head_attention, run

DATA = Path(__file__).parent / "data"
ALL_CASES = [(key, case) for key, example in SEED_EXAMPLES.items() for case in example.cases]


def case_id(item) -> str:
    key, case = item
    return f"{key}:{case.name}"


def test_examples_are_the_five_seeds_in_order():
    assert list(SEED_EXAMPLES) == ["000", "001", "002", "003", "004"]
    for key, example in SEED_EXAMPLES.items():
        assert example.key == key
        assert example.source_file.startswith(f"{key}_") and example.source_file.endswith(".txt")
        assert example.cases, key
        assert example.title and example.summary and example.note
        assert {"layout", "weights", "scale", "mask", "output projection", "bias"} <= set(example.conventions)


def test_reproducible_means_every_case_has_printed_numbers():
    assert {key for key, ex in SEED_EXAMPLES.items() if not ex.reproducible} == {"000", "004"}
    for example in SEED_EXAMPLES.values():
        has_printed = [case.printed is not None for case in example.cases]
        assert all(has_printed) if example.reproducible else not any(has_printed), example.key


@pytest.mark.parametrize("item", ALL_CASES, ids=[case_id(i) for i in ALL_CASES])
def test_case_matches_what_the_seed_printed(item):
    key, case = item
    result = compare(case)
    assert isinstance(result, CaseComparison) and result.name == case.name
    failed = [name for name, ok in result.checks.items() if not ok]
    assert not failed, f"{key} {case.name}: failed checks {failed}"
    if case.printed is None:
        assert result.matches is None and result.tolerance is None and result.max_abs_diff == {}
        assert case.shapes, "a case without printed numbers must at least fix the shapes"
        return
    assert result.tolerance == pytest.approx(0.5 * 10.0**-case.decimals, rel=2e-3)
    assert set(result.max_abs_diff) == set(case.printed)
    for name, diff in result.max_abs_diff.items():
        assert diff <= result.tolerance, f"{key} {case.name}: {name} differs by {diff:.3g} > {result.tolerance:.3g}"
    assert result.matches is True


def test_seed_001_prints_eight_decimals_of_scores_weights_and_outputs():
    case = SEED_EXAMPLES["001"].cases[0]
    assert case.decimals == 8 and set(case.printed) == {"scores", "weights", "output"}


def test_seed_003_matches_true_values_at_three_decimals():
    case = next(c for c in SEED_EXAMPLES["003"].cases if "true values" in c.name)
    assert case.decimals == 3 and case.printed["output"].shape == (8, 6)
    assert compare(case).max_abs_diff["output"] < 5e-4


def test_compare_notices_a_wrong_number_and_a_wrong_shape():
    case = SEED_EXAMPLES["001"].cases[0]
    nudged = {name: value.copy() for name, value in case.printed.items()}
    nudged["weights"][1, 2] += 2e-8  # four times the tolerance of 8 printed decimals
    wrong = compare(dataclasses.replace(case, printed=nudged))
    assert wrong.matches is False
    assert wrong.max_abs_diff["weights"] > wrong.tolerance
    assert wrong.max_abs_diff["scores"] <= wrong.tolerance

    transposed = dict(case.printed, output=np.zeros((3, 2)))
    bad_shape = compare(dataclasses.replace(case, printed=transposed))
    assert bad_shape.matches is False and math.isinf(bad_shape.max_abs_diff["output"])
    assert bad_shape.checks["output has shape (3, 2)"] is False


def test_structural_checks_catch_broken_attention():
    def broken() -> dict[str, np.ndarray]:
        weights = np.array([[[0.5, 0.4], [0.0, 0.0]]])  # row 0 sums to 0.9; row 1 flagged below
        mask = np.array([[True, True], [False, False]])
        return {"weights": weights, "mask": mask, "fully_masked": np.array([[False, False]])}

    checks = compare(SeedCase("broken", "", broken, None, None, shapes={"weights": (1, 2, 3)})).checks
    assert checks["weights has shape (1, 2, 3)"] is False
    assert checks["every weight row sums to 1"] is False
    assert checks["rows flagged fully masked are exactly those with no key"] is False

    def leaking() -> dict[str, np.ndarray]:
        return {"weights": np.array([[[0.5, 0.5]]]), "mask": np.array([[True, False]])}

    assert compare(SeedCase("leak", "", leaking, None, None)).checks["masked keys get weight exactly 0"] is False

    def nan() -> dict[str, np.ndarray]:
        return {"output": np.array([np.nan])}

    assert compare(SeedCase("nan", "", nan, None, None)).checks["no NaN or inf anywhere"] is False


def test_printed_tolerance_is_half_a_unit_of_the_last_decimal():
    assert printed_tolerance(3) == pytest.approx(5e-4, rel=2e-3) and printed_tolerance(3) >= 5e-4
    assert printed_tolerance(8) == pytest.approx(5e-9, rel=2e-3) and printed_tolerance(8) >= 5e-9


def test_seed_000_valid_length_zero_gives_zeros_and_flags_where_the_seed_gives_nan():
    case = next(c for c in SEED_EXAMPLES["000"].cases if "valid length 0" in c.name)
    ours = case.compute()
    assert ours["fully_masked"][1].all() and not ours["fully_masked"][0].any()
    np.testing.assert_array_equal(ours["weights"][1], 0.0)
    np.testing.assert_array_equal(ours["output"][1], 0.0)
    # The seed's recipe, exp(-inf - max) / sum with max = -inf, is 0/0 = NaN on such a row:
    with np.errstate(invalid="ignore"):
        row = np.full(6, -np.inf)
        seed_style = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    assert np.isnan(seed_style).all()


def test_seed_000_padding_hides_the_keys_past_each_valid_length():
    ours = SEED_EXAMPLES["000"].cases[0].compute()
    np.testing.assert_array_equal(ours["weights"][0, :, :, 3:], 0.0)  # valid length 3
    np.testing.assert_array_equal(ours["weights"][1, :, :, 2:], 0.0)  # valid length 2
    assert np.all(ours["weights"][0, :, :, :3].sum(axis=-1) > 1 - 1e-12)


def test_unseeded_seeds_use_default_rng_with_a_fixed_seed():
    a, b = seed000_inputs(), seed000_inputs(EXAMPLE_SEED)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.allclose(seed000_inputs(EXAMPLE_SEED + 1)[0], a[0])
    w = seed004_inputs()[3]
    # He init: std sqrt(2 / 512) = 0.0625 over 262144 draws
    assert abs(w.w_q.std() / math.sqrt(2 / 512) - 1) < 0.01
    q, k, v, _ = seed004_inputs()
    assert not np.allclose(q, k) and not np.allclose(k, v)  # three different inputs


def test_seed_002_inputs_are_integers_and_the_engine_computes_in_float64():
    ours = SEED_EXAMPLES["002"].cases[1].compute()
    assert np.issubdtype(ours["X"].dtype, np.integer)
    assert ours["output"].dtype == np.float64 and ours["weights"].dtype == np.float64


def test_seed_003_column_layout_full_precision():
    # The column-layout formulas, written out per head: q = W x + b for a column x; score[m, n] = k_m . q_n;
    # softmax over each column; O = V A; X' = omega_c [O1; O2]. Our row-convention run must agree to 1e-12.
    x = seed003_inputs()  # (C, T)
    p = seed003_parameters()
    hs = SEED003_D // SEED003_HEADS
    outputs, attentions = [], []
    for h in (1, 2):
        q = p[f"omega_q{h}"] @ x + p[f"beta_q{h}"]  # (hs, T)
        k = p[f"omega_k{h}"] @ x + p[f"beta_k{h}"]  # (hs, T)
        v = p[f"omega_v{h}"] @ x + p[f"beta_v{h}"]  # (hs, T)
        s = k.T @ q / math.sqrt(hs)  # (T keys, T queries)
        a = np.exp(s - s.max(axis=0)) / np.exp(s - s.max(axis=0)).sum(axis=0)  # columns sum to 1
        attentions.append(a)
        outputs.append(v @ a)  # (hs, T)
    x_prime = p["omega_c"] @ np.vstack(outputs)  # (C, T)

    ours = next(c for c in SEED_EXAMPLES["003"].cases if "true values" in c.name).compute()
    np.testing.assert_allclose(ours["output"], x_prime, rtol=0, atol=1e-12)
    for h in range(2):
        np.testing.assert_allclose(ours["weights"][h], attentions[h].T, rtol=0, atol=1e-12)


@pytest.mark.parametrize("key", [k for k, ex in SEED_EXAMPLES.items() if ex.explorer is not None])
def test_explorer_configurations_run(key):
    result = run(SEED_EXAMPLES[key].explorer)
    assert np.all(np.isfinite(result.trace.output))


def test_explorer_configurations_carry_the_seed_settings():
    e001 = run(SEED_EXAMPLES["001"].explorer)
    np.testing.assert_array_equal(e001.x_q, SEED001_X)
    assert e001.trace.scale == pytest.approx(1 / math.sqrt(3), abs=1e-15)
    assert e001.trace.output.shape == (3, 4)  # no output projection: concat of one head of size 4

    e003 = run(SEED_EXAMPLES["003"].explorer)
    np.testing.assert_allclose(e003.x_q, seed003_inputs().T, rtol=0, atol=5e-9)
    assert e003.weights.b_q is not None and e003.trace.n_heads == 2

    e000 = SEED_EXAMPLES["000"].explorer
    assert e000.is_cross and len(e000.tokens) == 4 and len(e000.kv_tokens) == 6
    assert (e000.d_model, e000.n_heads, e000.init, e000.mask, e000.valid_len) == (100, 5, "uniform", "padding", 3)

    e004 = SEED_EXAMPLES["004"].explorer
    assert (len(e004.tokens), e004.d_model, e004.n_heads, e004.init) == (10, 512, 8, "he")


# ---------------------------------------------------------------------------------------------
# The JSON reference cases in tests/data, built from their explicit inputs (not from examples.py)
# ---------------------------------------------------------------------------------------------

JSON_FILES = sorted(DATA.glob("seed*.json"))  # the seed reference cases; other data files belong to other tests


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def run_json_case(case: dict):
    """Our engine on a reference case's explicit inputs, with its numeric scale."""
    inputs = case["inputs"]
    n_heads = inputs["n_heads"]
    scale = case["conventions"]["scale"]
    if "X" in inputs:
        w_o = None if inputs["W_o"] is None else np.array(inputs["W_o"])
        weights = AttentionWeights(*(np.array(inputs[n]) for n in ("W_q", "W_k", "W_v")), w_o=w_o)
        return multi_head_attention(np.array(inputs["X"]), weights, n_heads, scale=scale)
    # Already-projected Q, K, V: identity projections hand them to attention unchanged.
    q, k, v = (np.array(inputs[n]) for n in ("Q", "K", "V"))
    eye = np.eye(q.shape[1])
    return multi_head_attention(q, AttentionWeights(eye, eye, eye), n_heads, x_k=k, x_v=v, scale=scale)


def named(trace, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The trace's array for a reference name, in the reference's shape."""
    arrays = {
        "scores": trace.logits,  # the references' scores are scaled scores (no mask in these cases)
        "weights": trace.weights,
        "output": trace.output,
        "Q": merge_heads(trace.q),
        "K": merge_heads(trace.k),
        "V": merge_heads(trace.v),
    }
    ours = arrays[name]
    if ours.shape != shape and ours.shape[0] == 1:
        ours = ours[0]  # one head: the reference drops the head axis
    return ours


def test_json_reference_cases_are_present():
    assert len(JSON_FILES) >= 4


def assert_case_matches(path, expected_key: str, tolerance_key: str) -> None:
    """Every array under ``case[expected_key]`` equals the engine's to the case's ``tolerance_key`` (absolute)."""
    case = load(path)
    trace = run_json_case(case)
    tol = case[tolerance_key]["abs"]
    for name, values in case[expected_key].items():
        expected = np.array(values, dtype=float)
        np.testing.assert_allclose(named(trace, name, expected.shape), expected, rtol=0, atol=tol, err_msg=name)


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.stem)
def test_json_printed_numbers(path):
    assert_case_matches(path, "expected", "tolerance")


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.stem)
def test_json_full_precision_intermediates(path):
    assert_case_matches(path, "expected_full_precision", "tolerance_full_precision")


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.stem)
def test_json_scale_is_the_rule_it_names(path):
    case = load(path)
    conv, inputs = case["conventions"], case["inputs"]
    width = np.array(inputs["W_q"] if "W_q" in inputs else inputs["Q"]).shape[1]
    tokens = len(inputs["X"] if "X" in inputs else inputs["Q"])
    rule = {"1/sqrt(d_head)": 1 / math.sqrt(width // inputs["n_heads"]), "1/sqrt(n_tokens)": 1 / math.sqrt(tokens)}
    assert conv["scale"] == pytest.approx(rule[conv["scale_rule"]], abs=1e-15)


def test_examples_rebuild_the_json_inputs():
    seed001 = load(DATA / "seed001_single_head_scale_by_token_count.json")["inputs"]
    np.testing.assert_array_equal(SEED001_X, seed001["X"])
    for name in ("W_q", "W_k", "W_v"):
        np.testing.assert_array_equal(SEED001_W, seed001[name])
    for stem, (m, n) in {"seed002_test_case_1_4x4_2heads": (4, 4), "seed002_test_case_2_6x8_4heads": (6, 8)}.items():
        ref = load(DATA / f"{stem}.json")["inputs"]
        x, weights = seed002_draws(m, n)
        np.testing.assert_array_equal(x, ref["X"])
        np.testing.assert_array_equal(weights.w_q, ref["W_q"])
        np.testing.assert_array_equal(weights.w_k, ref["W_k"])
        np.testing.assert_array_equal(weights.w_v, ref["W_v"])
        np.testing.assert_array_equal(x @ weights.w_q, ref["Q"])  # the reference's own projections agree
