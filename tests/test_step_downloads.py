"""Downloads (issue 23, item 11): CSVs Excel reads as UTF-8, and Step by step's per-step CSVs and whole-run .npz.

The CSV is read back with pandas and compared with the engine's arrays it claims to hold (the trace, the mask,
the embeddings), not with the tables that made it.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from tests.shown_steps import open_downloads
from ui.charts import export
from ui.pipeline.records import step_inputs
from ui.pipeline.step_export import run_step_frame
from ui.pipeline.steps import build_steps

ROOT = Path(__file__).resolve().parents[1]
BOM = b"\xef\xbb\xbf"
ACCENTED = ("café", "naïve", "über", "façade")


def test_csv_starts_with_a_byte_order_mark_and_keeps_accented_tokens():
    frame = pd.DataFrame([[0.5, 0.25]], index=pd.Index(["0:café"], name="query"), columns=["0:naïve", "1:über"])
    data = export.csv_bytes(frame)
    assert data.startswith(BOM)  # what makes Excel read the file as UTF-8
    assert data[len(BOM):].decode("utf-8").splitlines() == ["query,0:naïve,1:über", "0:café,0.5,0.25"]
    assert data.count(BOM) == 1


@pytest.fixture(scope="module")
def accented_run():
    return run(MHAConfig(tokens=ACCENTED, d_model=8, n_heads=2, mask="causal", seed=4))


def read_back(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame through its CSV bytes and pandas, as a user's script would load the download."""
    return pd.read_csv(io.BytesIO(export.csv_bytes(frame)), index_col=[0, 1], encoding="utf-8-sig")


def block(frame: pd.DataFrame, title_start: str) -> pd.DataFrame:
    """The rows of the matrix whose title starts with ``title_start``, without the columns it does not have."""
    titles = [t for t in frame.index.get_level_values(0).unique() if t.startswith(title_start)]
    assert len(titles) == 1, (title_start, list(frame.index.get_level_values(0).unique()))
    return frame.loc[titles[0]].dropna(axis=1, how="all")


def test_step_csvs_hold_the_engine_arrays(accented_run):
    result, head = accented_run, 1
    trace = result.trace
    scores = read_back(run_step_frame(result, head, "scores"))
    np.testing.assert_allclose(block(scores, "S_1").to_numpy(), trace.scores[head], rtol=1e-8)
    assert list(block(scores, "S_1").index) == result.query_labels == ["0:café", "1:naïve", "2:über", "3:façade"]
    assert list(block(scores, "S_1").columns) == result.key_labels
    masked = read_back(run_step_frame(result, head, "mask"))
    np.testing.assert_array_equal(block(masked, "M").to_numpy() == 1.0, result.mask)
    logits = block(masked, "L_1").to_numpy()
    np.testing.assert_array_equal(np.isneginf(logits), ~result.mask)  # masked logits written as -inf
    np.testing.assert_allclose(logits[result.mask], trace.logits[head][result.mask], rtol=1e-8)
    weights = read_back(run_step_frame(result, head, "softmax"))
    np.testing.assert_allclose(block(weights, "A_1").to_numpy(), trace.weights[head], rtol=1e-8, atol=1e-12)
    inputs = read_back(run_step_frame(result, head, "input"))
    np.testing.assert_allclose(block(inputs, "E").to_numpy(), result.embeddings, rtol=1e-8)
    qkv = read_back(run_step_frame(result, head, "qkv"))
    np.testing.assert_allclose(block(qkv, "W_Q").to_numpy(), result.weights.w_q, rtol=1e-8)


def test_every_step_with_matrices_has_a_table_with_each_of_them(accented_run):
    for step in build_steps(step_inputs(accented_run), 0):
        frame = run_step_frame(accented_run, 0, step.slug)
        if not step.panels:
            assert frame is None
            continue
        assert list(frame.index.get_level_values(0).unique()) == [p.title for p in step.panels]
        assert sum(p.matrix.shape[0] for p in step.panels) == len(frame)


def test_step_by_step_page_offers_each_step_and_the_whole_run():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/step_by_step.py").run()
    assert not at.exception
    assert not at.get("download_button")[1:], "the step downloads are drawn only while their section is open"
    open_downloads(at)
    keys = {button.proto.id.rsplit("-", 1)[-1]: button.proto.label for button in at.get("download_button")}
    assert keys["sbs_dl_npz"] == "The whole run, every intermediate (.npz)"
    result = run(MHAConfig())
    for number, step in enumerate(build_steps(step_inputs(result), 0), start=1):
        if step.panels and step.slug != "softmax":  # the page draws the softmax itself (behind predict-then-reveal)
            assert keys[f"sbs_dl_{step.slug}"] == f"Step {number}'s matrices (CSV)"


def test_an_uploaded_csv_saved_by_excel_with_a_byte_order_mark_is_read():
    from ui.widgets.uploads import parse_matrix

    table = parse_matrix("inputs.csv", BOM + b"0.5,1\r\n-2,3.25\r\n")  # Excel's "CSV UTF-8 (comma delimited)"
    np.testing.assert_array_equal(table, [[0.5, 1.0], [-2.0, 3.25]])


def test_the_pages_step_csv_is_the_chosen_heads_engine_matrix(downloads):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["head"] = "2"
    at.query_params["mask"] = "causal"
    at.switch_page("app_pages/step_by_step.py").run()
    open_downloads(at)
    assert not at.exception
    trace = run(MHAConfig(mask="causal")).trace
    scores = pd.read_csv(io.BytesIO(downloads["sbs_dl_scores"]()), index_col=[0, 1], encoding="utf-8-sig")
    np.testing.assert_allclose(block(scores, "S_2").to_numpy(), trace.scores[2], rtol=1e-8)
    mixed = pd.read_csv(io.BytesIO(downloads["sbs_dl_mix"]()), index_col=[0, 1], encoding="utf-8-sig")
    np.testing.assert_allclose(block(mixed, "head_2").to_numpy(), trace.heads[2], rtol=1e-8, atol=1e-12)
