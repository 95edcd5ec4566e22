"""Heads' per-head table made without pandas (ui/pages/heads/diagnostics.py), and kept per configuration and language.

The Arrow table is compared byte for byte with what Streamlit makes of the pandas DataFrame the page used to show
(every kernel, self- and cross-attention, NaN cells, three languages), and its numbers with the engine's. The kept
table must follow the seed and the language: a key without either shows a stale table, which these tests catch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit import dataframe_util
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from mha_core.diagnostics import head_similarity, head_summary
from mha_core.kernels import KERNELS
from tests.sidebar_controls import set_control
from ui.charts import tables
from ui.i18n import _, using_language
from ui.pages.heads.diagnostics import build_diagnostics
from ui.widgets.number_columns import in_language

ROOT = Path(__file__).resolve().parents[1]
LANGUAGES = ("en", "zh-CN", "es")


def pandas_route(result) -> pd.DataFrame:
    """The table as the page built it before: the DataFrame, "—" for a signed kernel's entropy, headers renamed."""
    frame = tables.head_summary_frame(result.trace, cross=result.config.is_cross)
    if "entropy" not in frame.columns:
        frame.insert(0, "entropy", "—")
    return in_language(frame)[0]


def kernel_config(kernel: str) -> MHAConfig:
    """The kernel at seed 5, with the causal mask where it needs one (MoBA chooses among earlier keys)."""
    config = MHAConfig(kernel=kernel, seed=5)
    return config if config.problem() is None else MHAConfig(kernel=kernel, seed=5, mask="causal")


CONFIGS = [kernel_config(kernel) for kernel in KERNELS] + [
    MHAConfig(kv_tokens=("a", "dog", "ran", "far"), seed=2),  # cross-attention: no "on itself", "on previous"
    MHAConfig(tokens=("one",), d_model=8, n_heads=2),  # one token: "on previous" counts no row (NaN, sent as null)
    MHAConfig(kernel="differential", kv_tokens=("a", "dog"), n_heads=2, d_model=8),
]


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.kernel}{'-cross' if c.is_cross else ''}-T{len(c.tokens)}")
def test_the_arrow_table_is_the_bytes_streamlit_made_of_the_pandas_table(config, language):
    result = run(config)
    with using_language(language):
        shown = build_diagnostics(result)
        before = pandas_route(result)
    assert dataframe_util.convert_arrow_table_to_arrow_bytes(shown.table) == \
        dataframe_util.convert_pandas_df_to_arrow_bytes(before)
    assert shown.headers == (before.index.name, *before.columns)


@pytest.mark.parametrize("config", CONFIGS[:3] + CONFIGS[-2:], ids=lambda c: c.kernel)
def test_the_tables_numbers_and_the_similarity_are_the_engines(config):
    trace = run(config).trace
    shown = build_diagnostics(run(config))
    frame = shown.table.to_pandas()
    distributions = not (trace.weights < 0).any()
    engine = head_summary(trace.weights, trace.fully_masked, np.isfinite(trace.logits), distributions)
    labels = {name: label for name, (label, _meaning) in tables.DIAGNOSTIC_COLUMNS.items()}
    for name, values in engine.items():
        if config.is_cross and name in tables.SELF_ONLY:
            assert labels[name] not in frame.columns
            continue
        np.testing.assert_array_equal(frame[labels[name]].to_numpy(float), values, err_msg=name)
    if not distributions:
        assert (frame["entropy"] == "—").all()
    np.testing.assert_array_equal(shown.similarity, head_similarity(trace.weights))
    assert list(frame.index) == [f"head {h}" for h in range(trace.n_heads)]


def shown_table(at: AppTest) -> pd.DataFrame:
    (table,) = at.main.dataframe  # the page's only table at the defaults
    return table.value


def test_the_kept_table_follows_the_seed_and_the_language():
    """The same configuration in English, then in Chinese, then another seed and back: each time the table is the
    engine's for the seed shown, with headers in the language shown (planted: a key without the configuration kept
    seed 3's numbers for seed 4; a key without the language kept the English headers)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["seed"] = "3"
    at.session_state["diagnostics_open"] = True  # What each head does, drawn only while open: as a click leaves it
    at.run()
    english = shown_table(at)
    assert "mean row max" in english.columns
    at.selectbox(key="w_lang").set_value("zh-CN").run()
    chinese = shown_table(at)
    with using_language("zh-CN"):
        header, rows = _("mean row max"), [_("head {h}").format(h=h) for h in range(4)]
    assert header != "mean row max" and header in chinese.columns and list(chinese.index) == rows
    np.testing.assert_array_equal(chinese[header].to_numpy(float), english["mean row max"].to_numpy(float))
    for seed in (4, 3):
        set_control(at, "w_seed", seed)
        maxima = head_summary(*(lambda t: (t.weights, t.fully_masked, np.isfinite(t.logits)))(
            run(MHAConfig(seed=seed)).trace))["max_weight"]
        np.testing.assert_array_equal(shown_table(at)[header].to_numpy(float), maxima)
    assert not at.exception
