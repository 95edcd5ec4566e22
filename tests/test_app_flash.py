"""AppTest of the FlashAttention page: what it shows for a tile equals numbers this test derives from the engine's
logits and values (not from the kernel), its live max |Δ| is the kernel's difference with the engine and shows a
planted bug, its traffic counts are the ones worked on paper, and bad link values fall back with a message."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from mha_core import flash
from mha_core.config import MHAConfig, run
from mha_core.flash import KERNEL_RULES, KernelRule, flash_of_run
from tests import shown_charts
from tests.address_bar import address
from tests.test_app_step_by_step import charts, z_of
from ui.pages.flash import reads_worked, step_sentence

ROOT = Path(__file__).resolve().parents[1]
PAGE = "app_pages/flash.py"
FIGURE = 1e-5  # figures travel as float32
TABLE = 1e-12  # tables carry float64


@pytest.fixture(autouse=True)
def cold_caches():
    """The page caches kernel runs per server; a test that plants a bug must not get another test's runs."""
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def open_page(**params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = str(value)
    at.switch_page(PAGE).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def shown_step(at: AppTest) -> str:
    """What the step slider reads for its value (it holds the index from 0)."""
    slider = at.select_slider(key="w_tile")
    return slider.options[slider.value]


def frame(at: AppTest, column: str):
    return next(f.value for f in at.dataframe if column in f.value.columns)


def engine_state(config: MHAConfig, head: int, rows: tuple[int, int], cols: tuple[int, int]):
    """What the tile (rows, cols) must show, from the engine's logits and values only.

    After the tile, row r has seen keys 0..cols[1]-1 of its block's sweep: m_new is their largest logit
    (and the null key's 0), m_old that of keys 0..cols[0]-1, l_new the sum of exp(logit - m_new) over the keys
    seen, and the output so far the softmax over those keys times their values.
    """
    result = run(config)
    trace = result.trace
    logits = np.array(trace.logits[head])  # (Tq, Tk)
    v = np.array(trace.v[trace.kv_head_of(head)])  # (Tk, hv)
    r0, r1 = rows
    seen = logits[r0:r1, : cols[1]]  # (br, c1)
    before = logits[r0:r1, : cols[0]]  # (br, c0)
    floor = 0.0 if config.null_key else -np.inf
    m_new = np.maximum(seen.max(axis=1), floor)
    m_old = np.maximum(before.max(axis=1, initial=-np.inf), floor)
    exps = np.exp(seen - m_new[:, None])  # (br, c1)
    l_new = exps.sum(axis=1) + (np.exp(-m_new) if config.null_key else 0)
    partial = exps @ v[: cols[1]] / l_new[:, None]  # (br, hv)
    tile = logits[r0:r1, cols[0] : cols[1]]  # (br, bc)
    return dict(tile=tile, m_new=m_new, m_old=m_old, rescale=np.exp(m_old - m_new), l_new=l_new, partial=partial,
                exps=np.exp(tile - m_new[:, None]))


@pytest.mark.parametrize(("params", "head", "index", "rows", "cols"), [
    ({"br": 2, "bc": 2, "tile": 4}, 0, 4, (2, 4), (2, 4)),  # no mask: the middle tile
    ({"mask": "causal", "br": 3, "bc": 2, "tile": 4, "head": 1}, 1, 4, (3, 6), (2, 4)),
    ({"pe": "alibi", "mask": "causal", "null": 1, "br": 2, "bc": 3, "tile": 3, "head": 2}, 2, 3, (2, 4), (3, 6)),
    ({"pe": "rope", "kv_heads": 2, "br": 4, "bc": 1, "tile": 9, "head": 3}, 3, 9, (4, 6), (3, 4)),
])
def test_the_shown_tile_state_and_partial_output_are_the_engines_numbers(params, head, index, rows, cols):
    at = open_page(**params)
    config = at.session_state["config"]
    assert (at.session_state["w_tile"], at.session_state["w_head"]) == (index, head)
    expected = engine_state(config, head, rows, cols)
    figures = charts(at)
    tile = z_of(next(f for t, f in figures.items() if t.startswith("S tile")))
    np.testing.assert_array_equal(np.isnan(tile), np.isneginf(expected["tile"]))
    finite = np.isfinite(expected["tile"])
    np.testing.assert_allclose(tile[finite], expected["tile"][finite], rtol=0, atol=FIGURE)
    exps = z_of(next(f for t, f in figures.items() if t.startswith("P̃")))
    np.testing.assert_array_equal(np.isnan(exps), np.isneginf(expected["tile"]))  # masked: drawn grey, not 0.00
    np.testing.assert_allclose(exps[finite], expected["exps"][finite], rtol=0, atol=FIGURE)
    state = frame(at, "m_new")
    np.testing.assert_allclose(state["m_new"], expected["m_new"], rtol=0, atol=TABLE)
    np.testing.assert_allclose(state["m_old"], expected["m_old"], rtol=0, atol=TABLE)
    np.testing.assert_allclose(state["rescale e^(m_old − m_new)"], expected["rescale"], rtol=0, atol=TABLE)
    np.testing.assert_allclose(state["ℓ_new"], expected["l_new"], rtol=0, atol=TABLE)
    partial = z_of(next(f for t, f in figures.items() if t.startswith(f"O after step {index + 1}")))
    np.testing.assert_allclose(partial[rows[0] : rows[1]], expected["partial"], rtol=0, atol=FIGURE)
    engine = z_of(next(f for t, f in figures.items() if t.startswith("softmax(S) V from the engine")))
    np.testing.assert_allclose(engine, run(config).trace.heads[head], rtol=0, atol=FIGURE)


def shown_gap(config: MHAConfig, head: int, br: int, bc: int) -> tuple[str, str]:
    """The two live metrics at the last step as the page should write them: the kernel against the engine."""
    result = run(config)
    kernel = flash_of_run(result, head, br, bc)
    logits = np.array(result.trace.logits[head])  # (Tq, Tk)
    peak = logits.max(axis=1)
    lse = peak + np.log(np.exp(logits - peak[:, None]).sum(axis=1))  # (Tq,) no null key, no masked row here
    return (f"{np.max(np.abs(kernel.output - result.trace.heads[head])):.1e}",
            f"{np.max(np.abs(kernel.lse - lse)):.1e}")


def test_the_live_max_difference_is_the_kernels_and_shows_a_planted_wrong_sign(monkeypatch):
    at = open_page(mask="causal", br=2, bc=2, tile=8)
    config = at.session_state["config"]
    shown = (metric(at, "max |Δ| O vs engine"), metric(at, "max |Δ| m + log ℓ vs engine"))
    assert shown == shown_gap(config, 0, 2, 2)
    assert float(shown[0]) <= 1e-12 and float(shown[1]) <= 1e-12
    monkeypatch.setattr(flash, "rescale_factor",
                        lambda m_old, m_new: np.where(np.isneginf(m_old), 0.0, np.exp(m_new - m_old)))
    st.cache_resource.clear()
    at = open_page(mask="causal", br=2, bc=2, tile=8)
    shown = (metric(at, "max |Δ| O vs engine"), metric(at, "max |Δ| m + log ℓ vs engine"))
    assert shown == shown_gap(config, 0, 2, 2)  # the same formula, on the buggy kernel
    assert float(shown[0]) > 1e-3  # and the page shows the bug


def test_before_any_row_is_finished_the_live_check_says_so():
    at = open_page(br=2, bc=2, tile=0)
    assert metric(at, "max |Δ| O vs engine") == "—"
    at.button(key="flash_next").click().run()
    at.button(key="flash_next").click().run()  # step 3: the first query block is finished
    assert at.session_state["w_tile"] == 2 and metric(at, "max |Δ| O vs engine") != "—"


def test_the_tile_map_marks_the_tiles_above_the_causal_diagonal_as_skipped():
    at = open_page(mask="causal", br=2, bc=2, tile=8)
    grid = frame(at, "0:the–1:cat").to_numpy()
    for i in range(3):
        for j in range(3):
            assert (grid[i, j] in ("skipped", "▶ skipped")) == (2 * j > 2 * i + 1), (i, j, grid[i, j])
    assert metric(at, "Tiles skipped") == "3 of 3"


def test_the_traffic_and_the_never_stored_numbers_are_those_worked_on_paper():
    # As tests/test_flash.py: T = 6, hs = hv = 4, B_r = B_c = 2, causal: standard 144 reads, 96 writes;
    # tiled 168 - 3 skipped tiles x 16 = 120 reads, 6 x (4 + 1) = 30 writes; SRAM 40; weights 6 x 6 = 36.
    at = open_page(mask="causal", br=2, bc=2)
    traffic = frame(at, "tiled kernel")
    assert traffic.loc["HBM reads", "standard attention"] == 144 and traffic.loc["HBM reads", "tiled kernel"] == 120
    assert traffic.loc["HBM writes", "standard attention"] == 96 and traffic.loc["HBM writes", "tiled kernel"] == 30
    text = "\n".join(m.value for m in at.markdown)
    assert "one tile needs **40** numbers" in text
    assert "None" not in traffic.astype(str).to_numpy() and not traffic.isna().to_numpy().any()
    assert "wrote **30** numbers" in text and "write **36** more numbers" in text
    gap = float(text.split("weights = **")[1].split("**")[0])
    assert gap <= 1e-12


@pytest.mark.parametrize(("params", "head", "rows", "cols"), [
    ({"mask": "causal", "br": 2, "bc": 2, "tile": 0}, 0, (0, 2), (0, 2)),
    ({"mask": "window", "window": 1, "br": 3, "bc": 3, "tile": 3, "head": 1}, 1, (3, 6), (3, 6)),
    ({"pe": "alibi", "mask": "causal", "null": 1, "br": 2, "bc": 3, "tile": 3, "head": 2}, 2, (2, 4), (3, 6)),
])
def test_a_masked_pair_is_grey_with_a_cross_in_the_s_tile_and_in_p_tilde(params, head, rows, cols):
    at = open_page(**params)
    masked = ~run(at.session_state["config"]).mask[rows[0] : rows[1], cols[0] : cols[1]]  # (br, bc) the engine's
    assert masked.any() and not masked.all()
    figures = charts(at)
    for prefix in ("S tile", "P̃"):
        panel, *layers = next(f for t, f in figures.items() if t.startswith(prefix))["data"]
        assert np.array_equal(np.isnan(shown_charts.decode(panel["z"])), masked), prefix  # no colour, no "0.00"
        assert all(text == "" for text, hidden in zip(np.ravel(panel["text"]), masked.ravel(), strict=True) if hidden)
        assert len(layers) == 1, prefix
        grey = layers[0]
        assert grey["showscale"] is False and np.array_equal(np.array(grey["text"]) == "×", masked), prefix
        assert np.array_equal(~np.isnan(shown_charts.decode(grey["z"])), masked), prefix


def test_the_step_sentence_names_every_row_that_starts_or_finishes_in_the_tile():
    at = open_page(mask="causal", br=2, bc=2, tile=0)
    text = "\n".join(m.value for m in at.markdown)
    assert "Rows **0:the** and **1:cat** see their first key here" in text


@pytest.mark.parametrize(("params", "expected", "message"), [
    ({"br": "0"}, {"w_br": 1}, "`br=0` is outside 1..6: using 1."),
    ({"br": "7", "bc": "abc"}, {"w_br": 6, "w_bc": 2}, "`bc=abc` is not a whole number: using 2."),
    ({"bc": "2.5"}, {"w_bc": 2}, "`bc=2.5` is not a whole number"),
    ({"tile": "-3"}, {"w_tile": 0}, "`tile=-3` is outside 0..8: using 0."),
    ({"br": "3", "bc": "3", "tile": "99"}, {"w_tile": 3}, "`tile=99` is outside 0..3: using 3."),
])
def test_bad_link_values_get_a_message_and_a_valid_fallback(params, expected, message):
    at = open_page(**params)
    assert {key: at.session_state[key] for key in expected} == expected
    warnings = [w.value for w in at.warning]
    assert any(message in w for w in warnings), warnings


def test_the_link_follows_the_widgets_and_restores_the_view():
    at = open_page(mask="causal")
    at.number_input(key="w_br").set_value(3).run()
    at.select_slider(key="w_tile").set_value(2).run()
    params = {name: address(at)[name] for name in ("br", "bc", "tile", "mask")}
    assert {k: v if isinstance(v, str) else v[0] for k, v in params.items()} == \
        {"br": "3", "bc": "2", "tile": "2", "mask": "causal"}
    again = open_page(mask="causal", br=3, bc=2, tile=2)
    assert (again.session_state["w_br"], again.session_state["w_tile"]) == (3, 2)
    assert not again.warning


def test_one_tile_for_the_whole_matrix_has_no_slider_and_is_standard_attention():
    at = open_page(br=6, bc=6)
    assert not at.select_slider and not at.slider
    assert any("a single step" in c.value for c in at.caption)
    assert float(metric(at, "max |Δ| O vs engine")) <= 1e-12


def test_a_refusing_kernel_rule_is_shown_as_a_message(monkeypatch):
    refusing = KernelRule("test rule", lambda c: c.mask == "window", "", lambda c: "a test refuses window masks")
    monkeypatch.setattr(flash, "KERNEL_RULES", (*KERNEL_RULES, refusing))
    at = open_page(mask="window")
    assert any("a test refuses window masks" in e.value for e in at.error)
    assert not at.metric


def test_sixty_four_tokens_with_tiles_of_one_run():
    tokens = "+".join(f"w{i}" for i in range(64))
    at = open_page(tokens=tokens.replace("+", " "), mask="causal", br=1, bc=1, tile=4095)
    assert shown_step(at) == "4096 of 4096"
    assert metric(at, "Tiles skipped") == f"{64 * 63 // 2} of {64 * 63 // 2}"
    assert float(metric(at, "max |Δ| O vs engine")) <= 1e-12
    assert math.isclose(float(metric(at, "max |Δ| m + log ℓ vs engine")), 0, abs_tol=1e-12)


@pytest.mark.parametrize("params", [
    {"tokens": "hi"},  # one token: one tile
    {"kv_tokens": "a dog ran far away now and then", "br": 4, "bc": 3},  # Tk = 8 > Tq = 6
    {"kv_tokens": "a dog", "mask": "window", "window": 0, "bc": 2},  # rows with every key masked
    {"init": "previous", "mask": "causal", "null": 1},
    {"mask": "custom", "cmask": "100000.110000.000000.111100.000010.111111", "br": 3, "bc": 3},
    {"present": 1, "mask": "causal"},
])
def test_other_shapes_and_options_run_and_end_on_the_engines_output(params):
    at = open_page(**params)
    config = at.session_state["config"]
    if at.select_slider:
        at.select_slider(key="w_tile").set_value(len(at.select_slider(key="w_tile").options) - 1).run()
    assert not at.exception
    result = run(config)
    kernel = flash_of_run(result, 0, at.session_state["w_br"], at.session_state["w_bc"])
    assert metric(at, "max |Δ| O vs engine") == f"{np.max(np.abs(kernel.output - result.trace.heads[0])):.1e}"
    assert float(metric(at, "max |Δ| O vs engine")) <= 1e-12


# ---- issue 32: one numbering base, nothing to skip, the printed reads, the counted algorithm -------------------


def test_the_step_slider_counts_from_one_as_every_other_step_number_on_the_page():
    at = open_page(mask="causal", br=2, bc=2, tile=4)  # the link's tile is the index from 0
    slider = at.select_slider(key="w_tile")
    assert slider.options[0] == "1 of 9" and slider.options[-1] == "9 of 9"
    assert shown_step(at) == "5 of 9"
    assert any(title.startswith("O after step 5 ") for title in charts(at))
    at.button(key="flash_next").click().run()
    assert shown_step(at) == "6 of 9" and address(at)["tile"] == "5"
    assert any(title.startswith("O after step 6 ") for title in charts(at))


@pytest.mark.parametrize(("params", "note"), [
    ({"br": 2, "bc": 2}, "Nothing can be skipped without a mask"),
    ({"mask": "causal", "br": 6, "bc": 6}, "No tile is masked in full"),
])
def test_with_nothing_to_skip_the_page_says_why_instead_of_0_of_0(params, note):
    at = open_page(**params)
    assert metric(at, "Tiles skipped") == "none"
    assert any(note in c.value for c in at.caption), [c.value for c in at.caption]


def test_with_tiles_to_skip_the_metric_counts_them():
    at = open_page(mask="causal", br=2, bc=2, tile=2)
    assert metric(at, "Tiles skipped") == "2 of 3"  # (0, 1) and (0, 2) are behind step 3
    assert not any("skipped without a mask" in c.value for c in at.caption)


def worked_value(text: str) -> tuple[int, int]:
    """'5·4 + 3·5·(4 + 4) − 4·(4 + 4) = 108' -> (the left side evaluated, the printed right side)."""
    left, right = text.split(" = ")
    expression = left.replace("·", "*").replace("−", "-")
    assert set(expression) <= set("0123456789+-*() "), expression
    return eval(expression), int(right.replace(",", ""))  # noqa: S307 (digits and operators only, checked above)


def counted_reads(q, k, v, mask, br: int, bc: int) -> int:
    """The reads counted here, tile by tile: Q once, K and V of every tile with a pair the mask allows."""
    tq, tk = q.shape[0], k.shape[0]
    reads = tq * q.shape[1]
    for r0 in range(0, tq, br):
        for c0 in range(0, tk, bc):
            c1 = min(c0 + bc, tk)
            if mask is None or mask[r0 : r0 + br, c0:c1].any():
                reads += (c1 - c0) * (k.shape[1] + v.shape[1])
    return reads


MASKS = {
    "none": lambda tq, tk: None,
    "causal": lambda tq, tk: np.tri(tq, tk, dtype=bool),
    "window 2": lambda tq, tk: np.tri(tq, tk, dtype=bool) & ~np.tri(tq, tk, -2, dtype=bool),
    "keys 0..2 padded away": lambda tq, tk: np.broadcast_to(np.arange(tk) >= 3, (tq, tk)),
}


@pytest.mark.parametrize("mask_name", list(MASKS))
@pytest.mark.parametrize("t", [5, 6, 7])
def test_the_printed_reads_formula_gives_the_loops_count_also_with_short_last_tiles(mask_name, t):
    rng = np.random.default_rng(t)
    q, k, v = rng.normal(size=(t, 4)), rng.normal(size=(t, 4)), rng.normal(size=(t, 3))
    mask = MASKS[mask_name](t, t)
    for br in range(1, t + 1):
        for bc in range(1, t + 1):
            traffic = flash.flash_attention_head(q, k, v, block_rows=br, block_cols=bc, scale=0.5, mask=mask).traffic
            evaluated, printed = worked_value(reads_worked(traffic))
            expected = counted_reads(q, k, v, mask, br, bc)
            assert evaluated == printed == traffic.flash_reads == expected, (t, br, bc, mask_name)


def test_the_issues_link_prints_108_reads_beside_a_formula_that_gives_108():
    at = open_page(tokens="a b c d e", d_model=8, heads=2, mask="causal", br=2, bc=2)
    assert frame(at, "tiled kernel").loc["HBM reads", "tiled kernel"] == 108
    line = next(m.value for m in at.markdown if m.value.startswith("Tiled reads here: "))
    assert worked_value(line.removeprefix("Tiled reads here: ").split(",")[0]) == (108, 108)
    assert "w_skip = 4" in line  # tiles (0, 1), (0, 2), (1, 2): 2 + 1 + 1 keys


def test_the_caption_names_the_counted_loop_order_and_its_count():
    at = open_page(mask="causal")
    caption = next(c.value for c in at.caption if "HBM" in c.value or "Θ" in c.value)
    assert "Counted here: FlashAttention-2's loop order" in caption
    assert "Θ(N·d + N²·d/B_r)" in caption and "M > 4d²" in caption


def test_the_second_tile_panel_names_no_rows_where_the_first_panels_colour_bar_stands():
    # At 1440x900 the P̃ panel's "query" was printed over the S tile's colour bar title "logit".
    at = open_page(mask="causal", br=2, bc=2, tile=4)
    figures = [shown_charts.figure_of(c) for c in shown_charts.chart_elements(at)]
    layout = next(f["layout"] for f in figures if any(a["text"].startswith("S tile") for a in
                                                       f["layout"].get("annotations", ())))
    assert layout["yaxis"]["title"]["text"] == "query" and "title" not in layout["yaxis2"]
    assert layout["xaxis2"]["title"]["text"] == "key"


def bold_rows(text: str, pattern: str) -> set[str]:
    """The bold labels in the clause of ``text`` that ``pattern`` (with one group: the listed rows) matches."""
    found = re.search(pattern, text)
    return set() if found is None else set(re.findall(r"\*\*([^*]+)\*\*", found.group(1)))


ROWS_LISTED = r"((?:\*\*[^*]+\*\*(?:, | and )?)+)"


@pytest.mark.parametrize("mask", ["none", "causal", "window", "padding"])
def test_the_sentence_names_the_rows_that_start_and_finish_there_as_the_engines_mask_says(mask):
    """Over a grid of T, B_r and B_c: the rows named as seeing their first key are those whose first allowed key
    (the engine's mask) lies in the tile; those named as finished are the tile's rows when it is their last."""
    words = ("the", "cat", "sat", "on", "a", "mat", "today")
    for t in range(1, len(words) + 1):
        config = MHAConfig(tokens=words[:t], mask=mask, valid_len=max(t - 2, 1) if mask == "padding" else None)
        result = run(config)
        allowed = np.ones((t, t), dtype=bool) if result.mask is None else result.mask  # (Tq, Tk)
        labels = result.query_labels
        for br in range(1, t + 1):
            for bc in range(1, t + 1):
                kernel = flash_of_run(result, 0, br, bc)
                for step in kernel.steps:
                    (r0, r1), (c0, c1) = step.rows, step.cols
                    text = step_sentence(kernel, step.index, labels, result.key_labels)
                    first = {labels[i] for i in range(r0, r1)
                             if allowed[i].any() and c0 <= int(np.argmax(allowed[i])) < c1}
                    assert bold_rows(text, rf"Rows? {ROWS_LISTED} sees? (?:its|their) first key") == first, text
                    last = {labels[i] for i in range(r0, r1)} if c1 == t else set()
                    assert bold_rows(text, rf"last tile of rows? {ROWS_LISTED}:") == last, text
