"""The lineage table: cache bytes of published configurations, computed by ``mha_core.lineage`` from its records,
against values worked out by hand here; and the Decoding page's section, compared with the engine's decoder."""

from __future__ import annotations

import pytest

from mha_core.config import MHAConfig, run
from mha_core.decoder import decoder_config
from mha_core.lineage import LINEAGE, cache_bytes, kv_cache_bytes, measured_cache
from mha_core.variant_decoding import decode_variant_run
from tests.app_opener import open_app
from ui.pages.decoding.lineage import per_layer_table, size_text, totals_table

MODELS = {m.name: m for m in LINEAGE}


def test_llama_2_7b_keeps_half_a_mebibyte_per_token_and_two_gibibytes_at_4k():
    # 32 layers x 32 K/V heads x 128 features x 2 (K and V) x 2 bytes = 524288 bytes per token
    assert cache_bytes(MODELS["Llama 2 7B"], 1) == 524288
    assert cache_bytes(MODELS["Llama 2 7B"], 4096) == 2147483648 == kv_cache_bytes(32, 32, 128, 4096)
    # Llama 3 8B: 8 K/V heads, a quarter: 131072 per token
    assert cache_bytes(MODELS["Llama 3 8B"], 4096) == 536870912


def test_gemma_3_4b_sliding_layers_stop_growing_at_their_window():
    gemma = MODELS["Gemma 3 4B"]
    # per token and layer 2 x 4 x 256 x 2 bytes = 4096; 29 sliding layers keep at most 1024 tokens, 5 global keep all
    assert cache_bytes(gemma, 131072) == 29 * 1024 * 4096 + 5 * 131072 * 4096 == 2805989376
    assert cache_bytes(gemma, 1000) == 34 * 1000 * 4096  # inside the window every layer grows


def test_mla_dsa_and_deltanet_by_hand():
    assert cache_bytes(MODELS["DeepSeek-V3"], 1) == 61 * (512 + 64) * 2 == 70272
    assert cache_bytes(MODELS["DeepSeek-V3.2"], 1) - cache_bytes(MODELS["DeepSeek-V3"], 1) == 61 * 128 * 2
    qwen = MODELS["Qwen3-Next-80B-A3B"]
    state = 36 * 32 * 128 * 128 * 2  # the DeltaNet layers' constant state, bytes
    assert cache_bytes(qwen, 0) == state
    assert cache_bytes(qwen, 4096) == state + 12 * 2 * 2 * 256 * 2 * 4096
    assert MODELS["Falcon 7B"].layers == 32 and cache_bytes(MODELS["Falcon 7B"], 1) == 32 * 2 * 1 * 64 * 2


def test_the_tables_show_the_records_numbers():
    layers = per_layer_table()
    row = layers[(layers["model"] == "gpt-oss-120b") & (layers["what is kept"] == "the last 128 tokens")].iloc[0]
    assert row["layers"] == 18 and row["bytes per token, these layers"] == 18 * 2 * 8 * 64 * 2
    totals = totals_table().set_index("model")
    assert totals.loc["Llama 2 7B", "cache at 4k tokens"] == "2.0 GiB"
    assert totals.loc["Llama 2 7B", "cache at 1M tokens"] == "512.0 GiB"
    assert size_text(512) == "512 B" and size_text(1536) == "1.5 KiB"


def test_the_toys_measured_cache_is_the_engines_decoder():
    result = run(decoder_config(MHAConfig(n_heads=4, kv_heads=2, d_model=16)))
    steps = decode_variant_run(result)
    measured = measured_cache([s.numbers for s in steps], 8)
    assert measured.numbers == 6 * 2 * 2 * 4 and measured.growth == 2 * 2 * 4  # T x 2 x kv x hs
    assert measured.nbytes == sum(a.nbytes for _name, a in steps[-1].held)
    assert measured.extrapolated(4096) == 4096 * 2 * 2 * 4 * 8
    linear = run(decoder_config(MHAConfig(kernel="linear")))
    state = measured_cache([s.numbers for s in decode_variant_run(linear)], 8)
    assert state.growth == 0 and state.extrapolated(1048576) == state.nbytes


@pytest.mark.parametrize("params", [{"kv_heads": "2"}, {"kernel": "linear"}, {"kernel": "qknorm", "pe": "rope"}])
def test_the_decoding_page_shows_the_lineage_and_the_toys_row(params):
    at = open_app("app_pages/decoding.py", **params)
    shown = next(df.value for df in at.dataframe if "cache at 4k tokens" in df.value.columns)
    for model in LINEAGE:
        assert shown.set_index("model").loc[model.name, "cache at 128k tokens"] == size_text(cache_bytes(model, 131072))
    config = at.session_state["config"]
    toy = shown.iloc[-1]
    result = run(decoder_config(config))
    steps = decode_variant_run(result)
    grows = steps[-1].numbers - steps[-2].numbers
    expected = (steps[-1].numbers + (4096 - len(steps)) * grows) * 8
    assert toy["cache at 4k tokens"] == size_text(expected)
    if config.kernel != "linear":
        assert grows == 2 * config.key_value_heads * config.head_size
