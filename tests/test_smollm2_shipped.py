"""The what-if sweep shipped with the app (mha_core/data/smollm2_whatif_sweep.json): small, made for the current model
file and settings, its numbers recomputed here by the engine (1e-6), a stale or garbled record refused, and the page
reading it (or, when stale, saying so and computing again)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mha_core import smollm2_shipped as shipped
from mha_core import smollm2_whatif as wi
from tests.app_opener import open_app
from ui.pages.real_model.smollm2 import DEFAULT_PROMPT
from ui.pages.real_model.whatif_sweep import SHIPPED_TEXTS

PAGE = "app_pages/real_model.py"


@pytest.fixture(scope="module")
def records():
    return shipped.read_shipped()


def test_the_file_is_small_and_holds_every_shipped_text(smollm2, records):
    assert shipped.SHIPPED_FILE.stat().st_size < 8_000
    assert [record["text"] for record in records] == list(SHIPPED_TEXTS)
    for text in SHIPPED_TEXTS:
        record, stale = shipped.shipped_record(records, smollm2, text)
        assert record is not None and stale == []


# The record was made by this engine on another CPU: a float32 forward through 30 layers rounds differently with
# another BLAS kernel (3.9e-7 relative measured between two CPUs of this machine kind). A wrong variant, layer, k or
# block moves a mean loss by > 1e-3.
ACROSS_CPUS = 1e-5


def test_shipped_points_are_the_engines(smollm2, records):
    record, _stale = shipped.shipped_record(records, smollm2, DEFAULT_PROMPT)
    run = smollm2.forward(DEFAULT_PROMPT)
    layers = range(30)
    assert record.topk[0] == pytest.approx(float(wi.sparse_losses(smollm2, run, layers, wi.SWEEP_K[0]).mean()),
                                           rel=ACROSS_CPUS)
    assert record.moba[0] == pytest.approx(float(wi.moba_losses(smollm2, run, layers, wi.SWEEP_BLOCKS[0]).mean()),
                                           rel=ACROSS_CPUS)
    assert record.dense == pytest.approx(float(smollm2.prompt_losses(run).mean()), rel=ACROSS_CPUS)
    assert record.sinks["without"] == pytest.approx(wi.sink_loss(smollm2, run, "without"), rel=ACROSS_CPUS)
    assert record.topk[-1] == pytest.approx(record.dense, rel=ACROSS_CPUS)  # k = 64 > 12 tokens: the dense model


def test_a_stale_or_garbled_record_is_refused(smollm2, records):
    record = json.loads(json.dumps(records[0]))
    record["settings"]["model_sha256"] = "0" * 64
    assert shipped.shipped_record([record], smollm2, record["text"]) == (None, ["model_sha256"])
    record = json.loads(json.dumps(records[0]))
    record["settings"]["sweep_k"] = [1, 2]
    assert shipped.shipped_record([record], smollm2, record["text"]) == (None, ["sweep_k"])
    record = json.loads(json.dumps(records[0]))
    record["topk"] = record["topk"][:3]
    assert shipped.shipped_record([record], smollm2, record["text"]) == (None, ["numbers"])
    record["topk"] = ["x"] * len(wi.SWEEP_K)
    assert shipped.shipped_record([record], smollm2, record["text"]) == (None, ["numbers"])
    assert shipped.shipped_record(records, smollm2, "a student's own prompt") == (None, [])


def test_a_missing_or_broken_file_ships_nothing(tmp_path):
    assert shipped.read_shipped(tmp_path / "absent.json") == []
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    assert shipped.read_shipped(tmp_path / "broken.json") == []


def test_the_page_reads_the_shipped_sweep(smollm2, records):
    at = open_app(PAGE, timeout=600, model="smollm2", rm_sparse="all", rm_sinks="1")
    assert any("shipped with the app" in c.value for c in at.caption)
    record, _stale = shipped.shipped_record(records, smollm2, DEFAULT_PROMPT)
    shown = [d.value for d in at.dataframe if "rise" in d.value.columns and "k" in d.value.columns][0]
    np.testing.assert_array_equal(shown["loss"].to_numpy(), np.array(record.topk))
    sinks = [d.value for d in at.dataframe if "variant" in d.value.columns][0]
    assert sinks["loss"].tolist() == [record.sinks[name] for name in wi.SINK_VARIANTS]


def test_a_stale_file_is_reported_and_the_page_computes_again(smollm2, records, tmp_path, monkeypatch):
    stale = json.loads(json.dumps(records))
    for record in stale:
        record["settings"]["model_sha256"] = "0" * 64
        record["sinks"] = {name: 99.0 for name in wi.SINK_VARIANTS}
    path = tmp_path / "stale.json"
    path.write_text(json.dumps({"records": stale}), encoding="utf-8")
    monkeypatch.setattr(shipped, "SHIPPED_FILE", path)
    at = open_app(PAGE, timeout=600, model="smollm2", rm_sinks="1")
    assert any("model_sha256" in i.value and "computing it again" in i.value for i in at.info)
    run = smollm2.forward(DEFAULT_PROMPT)
    sinks = [d.value for d in at.dataframe if "variant" in d.value.columns][0]
    assert sinks["loss"].iloc[1] == pytest.approx(wi.sink_loss(smollm2, run, "without"), abs=1e-9)
    assert 99.0 not in sinks["loss"].tolist()
