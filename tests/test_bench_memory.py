"""The "memory" benchmark section: its links are at the caps, its judgement reads the series right, and
(where Chromium is installed) its quick mode runs against a real server and returns sane rows."""

from __future__ import annotations

import urllib.parse

import pytest

from bench import bench_memory
from deploy.launch import missing_browser
from mha_core.config import LIMITS
from ui.state.urlstate import config_from_params

BROWSER_MISSING = missing_browser()


def test_every_configuration_is_at_the_caps_and_distinct():
    configs = set()
    for seed in range(1, 6):
        params = dict(urllib.parse.parse_qsl(bench_memory.caps_query(seed)[1:]))
        config, messages = config_from_params(params)
        assert not messages
        assert (len(config.tokens), config.d_model, config.n_heads) == (
            LIMITS["max_tokens"], LIMITS["max_d_model"], LIMITS["max_heads"])
        configs.add(config)
    assert len(configs) == 5


def test_the_verdict_judges_growth_over_the_window_and_the_peak():
    series = [{"configs": 0, "rss_mb": 100.0}] + [{"configs": n, "rss_mb": 300.0 + n / 10} for n in range(10, 210, 10)]
    growth, peak = bench_memory.verdict_rows(series, peak=590.0, window=100)
    assert growth["step"] == "growth over configs 100..200"
    assert growth["rss_mb"] == pytest.approx(10.0) and growth["met"] is True
    assert peak["met"] is True
    growth, peak = bench_memory.verdict_rows(series[:-1] + [{"configs": 200, "rss_mb": 400.0}], peak=601.0, window=100)
    assert growth["met"] is False and peak["met"] is False


@pytest.mark.skipif(BROWSER_MISSING is not None, reason=f"browser benchmark skipped: {BROWSER_MISSING}")
def test_quick_mode_opens_the_real_model_then_the_caps_and_samples_memory():
    rows = bench_memory.run(quick=True)
    series = [row for row in rows if "configs" in row]
    assert [row["configs"] for row in series] == [0, 0, 2, 4, 6]
    assert all(row["rss_mb"] > 50 for row in series)
    verdicts = rows[len(series):]
    assert [row["met"] for row in verdicts] == [None, None]  # quick mode judges nothing
    # The peak is at least every sample, within the kernel's batching of RSS counters per CPU (VmRSS ran 0.07 MB
    # above a VmHWM read later, once in CI): half a MB of slack still fails a peak read from the wrong field.
    assert verdicts[1]["rss_mb"] >= max(row["rss_mb"] for row in series) - 0.5
