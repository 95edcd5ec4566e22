"""One number format (ui.charts.numbers), and the tables, cells and mask panel that use it (issue 23, item 10).

Expectations are typed by hand ("0.7480") or read from what the page sends (the table's values and the
printf format of its column), never produced by the function under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.colors
import pyarrow as pa
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from tests.sidebar_controls import control
from ui.charts import numbers
from ui.charts.figures import MASKED_SOLID
from ui.pipeline import panels, records, steps
from ui.pipeline.drill_down import drill_down, highlight_key, softmax_row_table

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("value", "decimals", "text"), [
    (0.748, 4, "0.7480"), (0.7002, 4, "0.7002"), (1.0, 2, "1.00"), (-0.00003, 2, "0.00"), (-0.0, 4, "0.0000"),
    (-0.006, 2, "-0.01"), (-1.23456, 3, "-1.235"), (float("-inf"), 2, "−∞"), (float("nan"), 2, ""),
])
def test_fixed_keeps_trailing_zeros_and_never_prints_a_negative_zero(value, decimals, text):
    assert numbers.fixed(value, decimals) == text


def test_table_values_clear_negative_zeros_and_keep_other_columns():
    frame = pd.DataFrame({"x": [-1e-7, -0.0, 0.5, -np.inf], "name": ["a", "b", "c", "d"], "n": [1, 2, 3, 4]})
    shown = numbers.table_values(frame, 4)
    assert not np.signbit(shown["x"].to_numpy()[:3]).any()
    assert shown["x"].iloc[3] == -np.inf and list(shown["name"]) == list("abcd") and list(shown["n"]) == [1, 2, 3, 4]
    assert frame["x"].iloc[0] == -1e-7  # the original is left alone (its CSV keeps every digit)
    other = pd.DataFrame({"x": [0.123456789, -2.000049]})
    assert numbers.table_values(other, 4)["x"].tolist() == [0.123456789, -2.000049]  # kept to the last digit


def test_cell_text_prints_two_fixed_decimals_without_negative_zero():
    assert panels.cell_text(np.array([[-0.001, 0.5, -np.inf, -0.25]])) == [["0.00", "0.50", "", "-0.25"]]


def test_latex_numbers_have_no_negative_zero():
    assert records.latex_number(-0.00001) == "0.0000" and records.latex_number(-np.inf) == r"-\infty"


def test_drill_down_softmax_table_prints_fixed_decimals():
    result = run(MHAConfig(tokens=("a", "b", "c"), d_model=8, n_heads=2, init="identity"))
    drill = drill_down(records.step_inputs(result), 0, 0, 1)
    frame = softmax_row_table(drill)
    text = highlight_key(frame, drill.key_label).to_string()
    shown = re.findall(r"-?\d+\.\d+", text)
    assert shown and all(len(x.split(".")[1]) == 4 for x in shown), text
    assert not re.search(r"-0\.0000(?!\d)", text)


def shown_as_negative_zero(value: float, decimals: int) -> bool:
    """What printf('%.<decimals>f') makes of ``value`` starts with '-0.00…': a negative number shown as zero."""
    text = f"{value:.{decimals}f}"
    return text.startswith("-") and float(text) == 0.0


def check_tables(at: AppTest) -> int:
    """Every table on the page: each float column has a fixed-decimals format and no value that prints as -0.00.

    Returns how many numbers were checked."""
    checked = 0
    for table in at.dataframe:
        frame = table.value
        config = json.loads(table.proto.columns or "{}")
        formats = {entry.get("type_config", {}).get("format") for entry in config.values()}
        floats = frame.select_dtypes("float")
        if floats.empty:
            continue
        styled = table.proto.arrow_data.styler.display_values
        if styled:  # a pandas Styler: the browser prints its display strings
            shown = pa.ipc.open_stream(styled).read_all().to_pandas()[list(floats.columns)].to_numpy().ravel()
            assert all(re.fullmatch(r"-?\d+\.\d{4}", text) and not re.fullmatch(r"-0\.0+", text) for text in shown), shown
            checked += shown.size
            continue
        assert formats and all(f and re.fullmatch(r"%\.\d+f", f) for f in formats), (table.proto.id, config)
        decimals = max(int(f[2:-1]) for f in formats)
        values = floats.to_numpy().ravel()
        bad = [v for v in values if np.isfinite(v) and shown_as_negative_zero(v, decimals)]
        assert not bad, (table.proto.id, bad[:5])
        checked += values.size
    return checked


def test_step_by_step_tables_print_fixed_decimals_and_no_negative_zero():
    # one-hot embeddings: many products are 0 × a negative weight = -0.0, which printf shows as -0.0000
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["embedding"] = "onehot"
    at.query_params["qi"] = "1"
    at.switch_page("app_pages/step_by_step.py").run()
    control(at, "w_sbs_table").set_value(True).run()
    assert not at.exception
    assert check_tables(at) > 500


def test_mask_panel_is_two_colours_masked_grey_and_no_weight_colour():
    result = run(MHAConfig(tokens=("a", "b", "c", "d"), d_model=8, n_heads=2, mask="causal"))
    built = steps.build_steps(records.step_inputs(result), 0)
    mask_panel = next(p for s in built if s.slug == "mask" for p in s.panels if p.kind == "mask")
    trace = panels.panel_figure(mask_panel).to_dict()["data"][0]
    scale = trace["colorscale"]
    colour_at = {float(pos): colour for pos, colour in scale}
    assert colour_at[0.0] == MASKED_SOLID  # 0 = masked, the grey of every attention figure
    assert colour_at[1.0] != MASKED_SOLID
    viridis = {c.lower() for c in plotly.colors.sequential.Viridis}
    assert not {c.lower() for _, c in scale} & viridis
    assert trace["zmin"] == 0.0 and trace["zmax"] == 1.0


def test_presentation_css_enlarges_tables():
    from ui.widgets.presentation import PRESENTATION_CSS

    zoom = re.search(r'\[data-testid="stDataFrame"\]\s*\{\s*zoom:\s*([\d.]+)', PRESENTATION_CSS)
    assert zoom and float(zoom.group(1)) >= 1.3  # ~13 px cells become ~17 px


def test_step_by_step_heatmap_cells_never_read_minus_zero():
    # seed 0's default run has a cell of about -0.004: printed "-0.00" before the shared format
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/step_by_step.py").run()
    assert not at.exception
    texts = [text for figure in shown_charts.charts(at).values() for trace in figure["data"]
             for row in trace.get("text") or [] for text in row if isinstance(text, str)]
    numeric = [text for text in texts if re.fullmatch(r"-?\d+\.\d\d", text)]
    assert len(numeric) > 100
    assert not [text for text in numeric if re.fullmatch(r"-0\.00", text)]


def test_take_apart_table_prints_fixed_decimals():
    # its change table had no format: Streamlit dropped trailing zeros (0.748 above 0.7002)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["knock"] = "0"
    at.session_state["diagnostics_open"] = True  # and the head diagnostics' table, drawn only while open
    at.run()
    assert not at.exception
    assert any("‖change‖" in t.value.columns for t in at.dataframe)
    assert any("mean row max" in t.value.columns for t in at.dataframe)
    assert check_tables(at) > 0


def test_the_rope_offset_table_prints_fixed_decimals():
    # The Decoding page's RoPE offset table printed its scores as they came (0.7002 beside 0.748 and 1.303).
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["pe"] = "rope"
    at.switch_page("app_pages/decoding.py").run()
    assert not at.exception
    table = next(t for t in at.dataframe if list(t.value.columns) == ["offset p − p′", "score"])
    config = json.loads(table.proto.columns or "{}")
    assert config.get("score", {}).get("type_config", {}).get("format") == f"%.{numbers.DECIMALS}f", config
    assert len(table.value) == 11 and table.value["score"].dtype.kind == "f"  # the offsets −5..5
