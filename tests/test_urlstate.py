"""ui.state.urlstate: configuration <-> query parameters, pure functions, never raising on a bad link."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_core.config import INITS, LIMITS, MASKS, SCALE_RULES, MHAConfig, valid_head_counts
from mha_core.presets import PRESET_INITS
from ui.state.urlstate import (
    DEFAULT,
    VIEW_DEFAULTS,
    config_from_params,
    decode_mask,
    encode_mask,
    params_from_config,
    view_from_params,
    view_params,
)

words = st.sampled_from(["the", "cat", "sat", "on", "mat", "a", "dog", "é", "naïve"])
sentences = st.lists(words, min_size=1, max_size=10).map(tuple)


@st.composite
def configs(draw) -> MHAConfig:
    """Any valid configuration a link can carry (no uploaded embedding)."""
    tokens = draw(sentences)
    kv_tokens = draw(st.none() | sentences)
    key_tokens = kv_tokens or tokens
    d_model = draw(st.sampled_from([4, 6, 8, 12, 16, 24, 32]))
    n_heads = draw(st.sampled_from([h for h in valid_head_counts(d_model) if d_model // h >= 2]))
    mask = draw(st.sampled_from(MASKS))
    custom = None
    if mask == "custom":
        custom = tuple(tuple(draw(st.booleans()) for _ in key_tokens) for _ in tokens)
    scale = draw(st.sampled_from(SCALE_RULES))
    init = draw(st.sampled_from(INITS))
    # positions that can run here (RoPE: even head size; ALiBi: self-attention; neither with hand-built heads)
    schemes = ["none", "sinusoidal"] + ([] if init in PRESET_INITS else
                                       ["rope"] * (d_model // n_heads % 2 == 0) + ["alibi"] * (kv_tokens is None))
    pe = draw(st.sampled_from(schemes))
    return MHAConfig(
        tokens=tokens,
        kv_tokens=kv_tokens,
        d_model=d_model,
        n_heads=n_heads,
        seed=draw(st.integers(0, LIMITS["max_seed"])),
        init=init,
        bias=draw(st.booleans()),
        pe=pe,
        rope_base=draw(st.sampled_from([10000.0, 2.5, 500000.0])) if pe == "rope" else DEFAULT.rope_base,
        kv_heads=draw(st.sampled_from([k for k in range(1, n_heads + 1) if n_heads % k == 0])),
        scale_rule=scale,
        temperature=draw(st.sampled_from([0.5, 1.0, 2.5, 10.0])) if scale == "temperature" else 1.0,
        mask=mask,
        valid_len=draw(st.integers(0, len(key_tokens))) if mask == "padding" else None,
        window=draw(st.integers(0, 5)) if mask == "window" else DEFAULT.window,
        custom_mask=custom,
        embedding="random",
        output_projection=draw(st.booleans()),
    )


@settings(max_examples=150, deadline=None)
@given(configs())
def test_every_valid_config_survives_a_trip_through_the_url(config):
    params = params_from_config(config)
    assert all(isinstance(v, str) for v in params.values())
    back, messages = config_from_params(params)
    assert messages == []
    assert back == config


def test_the_default_link_is_the_default_config():
    config, messages = config_from_params({})
    assert config == DEFAULT and messages == []


def test_onehot_embeddings_travel_and_uploaded_ones_do_not():
    onehot = replace(DEFAULT, embedding="onehot", d_model=16)
    assert params_from_config(onehot)["emb"] == "onehot"
    assert config_from_params(params_from_config(onehot))[0].embedding == "onehot"
    config, messages = config_from_params({"emb": "custom"})
    assert config.embedding == "random" and messages


@pytest.mark.parametrize(
    ("params", "field", "expected", "words"),
    [
        ({"seed": "abc"}, "seed", DEFAULT.seed, "not a whole number"),
        ({"seed": "-3"}, "seed", 0, "outside"),
        ({"d_model": "-16"}, "d_model", 1, "outside"),
        ({"d_model": "100000"}, "d_model", LIMITS["max_d_model"], "outside"),
        ({"d_model": "12", "heads": "5"}, "n_heads", 4, "does not divide"),
        ({"heads": "99"}, "n_heads", 16, "outside"),
        ({"init": "magic"}, "init", DEFAULT.init, "not one of"),
        ({"mask": "diagonal"}, "mask", DEFAULT.mask, "not one of"),
        ({"scale": "cuberoot"}, "scale_rule", DEFAULT.scale_rule, "not one of"),
        ({"bias": "yes"}, "bias", DEFAULT.bias, "must be 0 or 1"),
        ({"scale": "temperature", "temperature": "hot"}, "temperature", 1.0, "above 0"),
        ({"scale": "temperature", "temperature": "-2"}, "temperature", 1.0, "above 0"),
        ({"scale": "temperature", "temperature": "nan"}, "temperature", 1.0, "above 0"),
        ({"tokens": "   "}, "tokens", DEFAULT.tokens, "empty"),
    ],
)
def test_a_bad_value_falls_back_with_a_message_that_names_it(params, field, expected, words):
    config, messages = config_from_params(params)
    assert getattr(config, field) == expected
    assert len(messages) >= 1
    assert words in " ".join(messages)
    config.validate()  # whatever the link said, the result computes


def test_too_many_tokens_are_cut_at_the_limit_with_a_message():
    config, messages = config_from_params({"tokens": " ".join(["w"] * 100)})
    assert len(config.tokens) == LIMITS["max_tokens"]
    assert "limit" in messages[0]


@pytest.mark.parametrize("cmask", ["10.11", "1x0.110.111", "", "111.111.111", "10.110.111.1111"])
def test_a_malformed_custom_mask_becomes_all_allowed_with_a_message(cmask):
    config, messages = config_from_params({"tokens": "a b c", "mask": "custom", "cmask": cmask})
    assert config.mask == "custom"
    assert config.custom_mask == ((True,) * 3,) * 3 or cmask == "111.111.111"
    if cmask != "111.111.111":
        assert any("cmask" in m for m in messages)


def test_a_preset_init_with_too_small_heads_is_repaired_to_xavier():
    config, messages = config_from_params({"init": "identity", "d_model": "4", "heads": "4"})
    assert config.init == "xavier"
    assert any("falling back" in m for m in messages)


def test_mask_encoding_round_trips_and_rejects_other_characters():
    grid = ((True, False, False), (True, True, False), (True, True, True))
    assert encode_mask(grid) == "100.110.111"
    assert decode_mask("100.110.111") == grid
    with pytest.raises(ValueError, match="rows of 0 and 1"):
        decode_mask("102.110")


def test_view_round_trips_and_only_non_defaults_travel():
    config = replace(DEFAULT, n_heads=4)
    view = {"view": "logits", "avg": True, "colours": "max", "head": 3, "qi": 2, "kj": 5, "present": True,
            "nums": "0"}
    params = view_params(view)
    assert params == {
        "view": "logits", "avg": "1", "colours": "max", "head": "3", "qi": "2", "kj": "5", "present": "1", "nums": "0"
    }
    back, messages = view_from_params(params, config)
    assert back == {**view, "knock": ()} and messages == []  # knock: a view setting at its default
    assert view_params(VIEW_DEFAULTS) == {}


def test_a_view_outside_the_shapes_is_clipped_with_a_message():
    config = replace(DEFAULT, n_heads=2)  # 6 tokens
    view, messages = view_from_params({"head": "7", "qi": "x", "view": "heat", "present": "2"}, config)
    assert view["head"] == 1 and view["qi"] == 0 and view["view"] == "weights" and view["present"] is False
    assert len(messages) == 4
