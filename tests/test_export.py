"""ui.charts.export: the downloaded bytes hold every field of the engine's records, each equal to the engine array it names.

Expectations come from ``run(config)`` computed here and from the records' own fields, never from
``export.intermediates``; the RoPE and ALiBi checks recompute what the engine did from the exported inputs.
"""

from __future__ import annotations

import io
import json
from dataclasses import fields, is_dataclass

import numpy as np
import pandas as pd
import pytest

from mha_core.attention import AttentionTrace, AttentionWeights
from mha_core.config import MHAConfig, RunResult, run
from ui.charts import export, tables

# Each option that changes an exported array is switched on by at least one configuration.
FULL = {  # every optional field of the trace, the parameters and the run is set in one of these
    "rope, null key, GQA, causal, bias": MHAConfig(pe="rope", null_key=True, kv_heads=2, mask="causal", bias=True),
    "alibi, null key, MQA, window, bias": MHAConfig(pe="alibi", null_key=True, kv_heads=1, mask="window", bias=True),
    "sinusoidal, null key, GQA, causal, bias": MHAConfig(pe="sinusoidal", null_key=True, kv_heads=2, mask="causal",
                                                         bias=True),
}
KERNEL_RUNS = {  # the records of the other kernels and of multi-head latent attention (they refuse the null key)
    "differential, rope, causal": MHAConfig(kernel="differential", pe="rope", mask="causal"),
    "linear, causal, GQA": MHAConfig(kernel="linear", mask="causal", kv_heads=2),
    "MLA, rope, causal": MHAConfig(mla_rank=4, mla_rope=2, pe="rope", mask="causal"),
    "QK-norm, rope, causal": MHAConfig(kernel="qknorm", pe="rope", mask="causal"),  # q and k as projected, kept
}
CONFIGS = {
    "causal, bias": MHAConfig(mask="causal", bias=True),
    "cross, padding, fully masked": MHAConfig(kv_tokens=("a", "dog", "ran"), mask="padding", valid_len=0),
    "no W_O, sinusoidal": MHAConfig(output_projection=False, pe="sinusoidal", n_heads=2),
    "cross, rope, GQA": MHAConfig(kv_tokens=("a", "dog", "ran"), pe="rope", kv_heads=2),
    **FULL,
    **KERNEL_RUNS,
}
EXTRAS = {"query_labels", "key_labels", "config_json"}  # in the npz besides the intermediates


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def result(request):
    return run(CONFIGS[request.param])


def load_npz(result: RunResult):
    return np.load(io.BytesIO(export.npz_bytes(result)), allow_pickle=False)


def engine_value(result: RunResult, name: str):
    """The engine's value of an exported name, looked up in the records themselves.

    The trace comes first: its attention weights are exported as "weights" (the RunResult's
    ``weights`` is the parameters record, exported as w_q ... b_o).
    """
    for record in records_of(result):
        if name in {f.name for f in fields(record)}:
            return getattr(record, name)
    raise AssertionError(f"{name!r} is exported but names no field of the trace, the parameters or the run")


def records_of(result: RunResult) -> list:
    """The trace, the parameters, the run and every record they hold (a kernel's parts, MLA's parts and weights)."""
    top = [result.trace, result.weights, result]
    nested = [getattr(r, f.name) for r in top for f in fields(r)
              if f.name != "config" and is_dataclass(getattr(r, f.name)) and getattr(r, f.name) not in top]
    return top + nested


def set_fields(record) -> dict[str, object]:
    """The fields of a record that hold an array or a scalar (not None, not a nested record or a list)."""
    values = {f.name: getattr(record, f.name) for f in fields(record)}
    return {name: v for name, v in values.items() if isinstance(v, np.ndarray | bool | int | float | str)}


def as_tuples(value):
    """JSON lists back to the tuples MHAConfig holds (tokens, custom mask and embedding rows)."""
    return tuple(as_tuples(v) for v in value) if isinstance(value, list) else value


# ---- the npz holds every field of the records, each equal to the engine's ------------------------


def test_the_full_configurations_set_every_optional_field():
    runs = [run(config) for config in FULL.values()]
    every = runs + [run(config) for config in KERNEL_RUNS.values()]
    for record_type, records in ((AttentionTrace, [r.trace for r in every]), (AttentionWeights, [r.weights for r in every]),
                                 (RunResult, every)):
        never_set = {f.name for f in fields(record_type)} - set().union(*(
            {f.name for f in fields(r) if getattr(r, f.name) is not None} for r in records))
        assert not never_set, f"{record_type.__name__}.{never_set} is None in every FULL run: add a run that sets it"
    assert {r.trace.pe for r in runs} >= {"rope", "alibi"} and all(r.trace.null_key for r in runs)
    assert all(r.trace.kv_heads < r.trace.n_heads for r in runs)


@pytest.mark.parametrize("name", list(FULL) + list(KERNEL_RUNS))
def test_every_array_and_scalar_field_of_the_records_is_in_the_npz(name):
    result = run({**FULL, **KERNEL_RUNS}[name])
    loaded = load_npz(result)
    for record in records_of(result):  # the trace's "weights" is its array, not the record
        for field, value in set_fields(record).items():
            assert field in loaded.files, f"{type(record).__name__}.{field} is missing from the npz"
            np.testing.assert_array_equal(loaded[field], value, err_msg=f"{type(record).__name__}.{field}")


def test_every_name_in_the_npz_holds_the_engine_value_it_names(result):
    engine = run(result.config)  # computed here, not read back through ui.charts.export
    loaded = load_npz(result)
    assert set(loaded.files) >= EXTRAS
    for name in set(loaded.files) - EXTRAS:
        expected = np.asarray(engine_value(engine, name))
        assert loaded[name].shape == expected.shape, name
        assert loaded[name].dtype == expected.dtype, name
        np.testing.assert_array_equal(loaded[name], expected, err_msg=name)
    assert list(loaded["query_labels"]) == engine.query_labels
    assert list(loaded["key_labels"]) == engine.key_labels


# Today's names and what they held before the export walked the records: old readers rely on them.
LEGACY = {
    "embeddings": lambda r: r.embeddings,
    "key_embeddings": lambda r: r.key_embeddings,
    "positional": lambda r: r.positional,
    "x_q": lambda r: r.x_q,
    "x_kv": lambda r: r.x_kv,
    "w_q": lambda r: r.weights.w_q,
    "w_k": lambda r: r.weights.w_k,
    "w_v": lambda r: r.weights.w_v,
    "w_o": lambda r: r.weights.w_o,
    "b_q": lambda r: r.weights.b_q,
    "b_k": lambda r: r.weights.b_k,
    "b_v": lambda r: r.weights.b_v,
    "b_o": lambda r: r.weights.b_o,
    "mask": lambda r: r.mask,
    "q": lambda r: r.trace.q,
    "k": lambda r: r.trace.k,
    "v": lambda r: r.trace.v,
    "scores": lambda r: r.trace.scores,
    "logits": lambda r: r.trace.logits,
    "weights": lambda r: r.trace.weights,
    "heads": lambda r: r.trace.heads,
    "concat": lambda r: r.trace.concat,
    "output": lambda r: r.trace.output,
    "fully_masked": lambda r: r.trace.fully_masked,
    "scale": lambda r: r.trace.scale,
    "query_labels": lambda r: r.query_labels,
    "key_labels": lambda r: r.key_labels,
}


def test_todays_names_keep_their_meaning(result):
    engine = run(result.config)
    loaded = load_npz(result)
    for name, attribute in LEGACY.items():
        value = attribute(engine)
        assert (name in loaded.files) == (value is not None), name
        if value is not None:
            np.testing.assert_array_equal(loaded[name], np.asarray(value), err_msg=name)


def test_alibi_logits_are_the_scaled_scores_plus_the_exported_bias():
    loaded = load_npz(run(FULL["alibi, null key, MQA, window, bias"]))
    assert str(loaded["pe"]) == "alibi" and bool(loaded["null_key"])
    logits, scaled, bias = loaded["logits"], loaded["scores"] * loaded["scale"], loaded["bias"]
    allowed = np.broadcast_to(loaded["mask"], logits.shape)
    np.testing.assert_allclose(logits[allowed], (scaled + bias)[allowed], rtol=0, atol=1e-12)
    assert np.all(np.isneginf(logits[~allowed]))
    assert np.abs(logits - scaled)[allowed].max() > 0.1  # without the bias the logits would not be explained


@pytest.mark.parametrize("name", ["rope, null key, GQA, causal, bias", "cross, rope, GQA"])
def test_rope_q_and_k_are_the_exported_projections_turned_by_the_exported_angles(name):
    config = CONFIGS[name]
    loaded = load_npz(run(config))
    nh, kv, hs = config.n_heads, config.key_value_heads, config.head_size
    half = hs // 2

    def split(x, heads):  # (T, heads*hs) -> (heads, T, hs)
        return x.reshape(x.shape[0], heads, hs).transpose(1, 0, 2)

    b_q = loaded["b_q"] if "b_q" in loaded.files else 0.0
    b_k = loaded["b_k"] if "b_k" in loaded.files else 0.0
    q0 = split(loaded["x_q"] @ loaded["w_q"] + b_q, nh)  # (nh, Tq, hs)
    k0 = split(loaded["x_kv"] @ loaded["w_k"] + b_k, kv)  # (kv, Tk, hs)
    np.testing.assert_allclose(loaded["q_unrotated"], q0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(loaded["k_unrotated"], k0, rtol=0, atol=1e-12)
    for rotated, plain, angles, tokens in ((loaded["q"], q0, loaded["q_angles"], config.tokens),
                                           (loaded["k"], k0, loaded["k_angles"], config.key_tokens)):
        position = np.arange(len(tokens))[:, None]  # (T, 1)
        np.testing.assert_allclose(angles, position * config.rope_base ** (-2 * np.arange(half) / hs), rtol=1e-15)
        cos, sin = np.cos(angles), np.sin(angles)  # (T, hs/2)
        a, b = plain[..., :half], plain[..., half:]
        np.testing.assert_allclose(rotated, np.concatenate([a * cos - b * sin, a * sin + b * cos], -1), rtol=0, atol=1e-12)
    assert not np.allclose(loaded["q"], q0)  # with RoPE q is not x_q W_Q: q_unrotated says what it was


ROUND_TRIP = {
    **CONFIGS,
    "custom mask and embedding": MHAConfig(
        tokens=("a", "b"), d_model=2, n_heads=1, mask="custom", custom_mask=((True, False), (True, True)),
        embedding="custom", custom_embedding=((0.5, -1.0), (2.0, 0.25)), rope_base=500.0, temperature=2.5,
        scale_rule="temperature"),
}


@pytest.mark.parametrize("name", list(ROUND_TRIP))
def test_the_configuration_round_trips_through_the_npz_and_the_json(name):
    config = ROUND_TRIP[name]
    result = run(config)
    loaded = load_npz(result)
    assert loaded["config_json"].shape == () and loaded["config_json"].dtype.kind == "U"
    from_npz = {key: as_tuples(value) for key, value in json.loads(str(loaded["config_json"])).items()}
    assert MHAConfig(**from_npz) == config
    from_json = {key: as_tuples(value) for key, value in json.loads(export.json_bytes(result))["config"].items()}
    assert MHAConfig(**from_json) == config


# ---- serialisation: npz exact, JSON with -inf as null --------------------------------------------


def test_npz_round_trips_every_intermediate_exactly(result):
    loaded = load_npz(result)
    arrays = export.intermediates(result)
    assert set(loaded.files) == set(arrays) | EXTRAS
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype, name
        np.testing.assert_array_equal(loaded[name], array, err_msg=name)


def test_json_round_trips_with_minus_infinity_as_null(result):
    document = json.loads(export.json_bytes(result))
    assert "-inf" in document["README"] and "null" in document["README"]
    for word in ("bias", "q_unrotated", "q_angles", "null_key"):
        assert word in document["README"], word
    assert document["query_labels"] == result.query_labels
    assert document["config"]["tokens"] == list(result.config.tokens)
    for name, array in export.intermediates(result).items():
        stored = document["arrays"][name]
        assert document["shapes"][name] == list(array.shape), name
        if array.dtype == np.bool_ or array.dtype.kind == "U":
            np.testing.assert_array_equal(np.array(stored, dtype=array.dtype), array, err_msg=name)
            continue
        as_float = np.array(stored, dtype=object)
        nulls = np.equal(as_float, None)
        np.testing.assert_array_equal(nulls, np.isneginf(array), err_msg=name)  # null exactly where -inf
        values = np.where(nulls, np.nan, as_float).astype(np.float64)
        np.testing.assert_array_equal(values[~nulls], np.asarray(array, dtype=np.float64)[~nulls], err_msg=name)


def test_every_name_in_the_json_holds_the_engine_value_it_names(result):
    engine = run(result.config)
    document = json.loads(export.json_bytes(result))
    assert document["query_labels"] == engine.query_labels and document["key_labels"] == engine.key_labels
    assert set(document["arrays"]) == set(load_npz(result).files) - EXTRAS
    for name, stored in document["arrays"].items():
        expected = np.asarray(engine_value(engine, name))
        if expected.dtype.kind == "U":
            assert stored == expected.item(), name
            continue
        stored = np.array(stored, dtype=object)
        stored = np.where(np.equal(stored, None), -np.inf, stored).astype(expected.dtype)  # null is a masked -inf
        np.testing.assert_array_equal(stored, expected, err_msg=name)


def test_json_is_strict_json_with_no_infinity_or_nan():
    data = export.json_bytes(run(MHAConfig(mask="causal"))).decode()
    assert "Infinity" not in data and "NaN" not in data
    json.loads(data, parse_constant=lambda name: pytest.fail(f"non-standard constant {name}"))


def test_masked_logits_really_are_null_in_json():
    document = json.loads(export.json_bytes(run(MHAConfig(mask="causal"))))
    first_row_of_head_0 = document["arrays"]["logits"][0][0]
    assert first_row_of_head_0[0] is not None
    assert first_row_of_head_0[1:] == [None] * 5


def test_csv_has_the_token_labels_and_reads_back():
    result = run(MHAConfig(mask="causal"))
    frame = tables.matrix_frame(result.trace.logits[1], result.query_labels, result.key_labels)
    back = pd.read_csv(io.BytesIO(export.csv_bytes(frame)), index_col=0)
    assert list(back.index) == result.query_labels and list(back.columns) == result.key_labels
    np.testing.assert_allclose(back.to_numpy(), result.trace.logits[1], rtol=1e-8)  # '-inf' reads back as -inf
    assert np.isneginf(back.loc["0:the", "5:mat"])


def test_stacked_csv_reads_back_with_its_two_level_index():
    result = run(MHAConfig(n_heads=2))
    titles = ["head 0", "head 1"]
    frame = tables.stacked_frame(result.trace.weights, titles, result.query_labels, result.key_labels)
    back = pd.read_csv(io.BytesIO(export.csv_bytes(frame)), index_col=[0, 1])
    np.testing.assert_allclose(back.loc["head 1"].to_numpy(), result.trace.weights[1], rtol=1e-8)
