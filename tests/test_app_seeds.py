"""The Seed notebooks page: the match marks come from compare(), the page shows them, the buttons load the seeds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl

import numpy as np
import pytest
from page_links import links
from streamlit.testing.v1 import AppTest

import content.seeds
from content.seeds import SEED_EXAMPLES, compare
from tests.address_bar import address
from ui.charts.marks import CELL_FAILS, CELL_HOLDS, FAILS, HOLDS
from ui.charts.marks import UNSEEDED as UNSEEDED_MARK
from ui.pages.seeds import (
    embedding_csv,
    match_mark,
    overview_table,
    side_by_side,
)
from ui.widgets.uploads import parse_matrix

ROOT = Path(__file__).resolve().parents[1]
CASES = [(ex.key, case) for ex in SEED_EXAMPLES.values() for case in ex.cases]
REPRODUCIBLE = [(key, case) for key, case in CASES if case.printed is not None]
UNSEEDED = [(key, case) for key, case in CASES if case.printed is None]


def seeds_page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.switch_page("app_pages/seeds.py")
    return at.run()


@pytest.fixture(scope="module")
def page() -> AppTest:
    return seeds_page()


def test_the_five_seeds_are_all_there_and_unseeded_ones_are_marked():
    assert list(SEED_EXAMPLES) == ["000", "001", "002", "003", "004"]
    assert {key for key, _ in UNSEEDED} == {"000", "004"}
    assert not SEED_EXAMPLES["000"].reproducible and not SEED_EXAMPLES["004"].reproducible


@pytest.mark.parametrize(("key", "case"), REPRODUCIBLE, ids=[f"{k}:{c.name}" for k, c in REPRODUCIBLE])
def test_every_reproducible_case_matches_at_its_printed_precision(key, case):
    comparison = compare(case)
    assert comparison.matches is True
    half_unit = 0.5 * 10.0**-case.decimals
    for name, printed in case.printed.items():
        assert np.max(np.abs(np.asarray(comparison.ours[name], dtype=float) - printed)) <= half_unit * 1.001
    mark = match_mark(case, comparison)
    assert mark.startswith(f"{HOLDS} matches to {case.decimals} decimals")


@pytest.mark.parametrize(("key", "case"), UNSEEDED, ids=[f"{k}:{c.name}" for k, c in UNSEEDED])
def test_unseeded_cases_say_so_and_pass_every_structural_check(key, case):
    comparison = compare(case)
    assert comparison.matches is None
    assert match_mark(case, comparison).startswith(f"{UNSEEDED_MARK} not reproducible")
    assert comparison.checks and all(comparison.checks.values()), comparison.checks


def test_a_wrong_number_gets_the_mismatch_mark():
    key, case = REPRODUCIBLE[0]
    name, printed = next(iter(case.printed.items()))
    tampered = replace(case, printed={**case.printed, name: printed + 10.0**-case.decimals})
    comparison = compare(tampered)
    assert comparison.matches is False
    assert match_mark(tampered, comparison).startswith(f"{FAILS} does not match")


def test_the_overview_verdict_is_built_from_the_comparisons_it_is_given():
    comparisons = {key: [compare(case) for case in ex.cases] for key, ex in SEED_EXAMPLES.items()}
    key, case = REPRODUCIBLE[0]
    index = SEED_EXAMPLES[key].cases.index(case)
    comparisons[key][index] = replace(comparisons[key][index], matches=False)
    verdicts = dict(zip(SEED_EXAMPLES, overview_table(SEED_EXAMPLES, comparisons)["our engine"], strict=True))
    n = len(SEED_EXAMPLES[key].cases)
    assert verdicts[key].startswith(f"{CELL_FAILS} {n - 1} of {n}"), verdicts[key]
    others = [line for k, line in verdicts.items() if k != key]
    assert not any(CELL_FAILS in line for line in others), others


def test_the_page_compares_each_case_at_most_once_per_server(monkeypatch):
    calls = []

    def counting_compare(case):
        calls.append(case.name)
        return compare(case)

    monkeypatch.setattr(content.seeds, "compare", counting_compare)  # the page imports it on every run
    at = seeds_page()
    first = len(calls)  # 0 when an earlier test already filled the cache
    at.run()
    assert not at.exception
    assert first <= len(CASES)
    assert len(calls) == first, calls[first:]


def test_the_page_renders_every_seed_with_one_mark_per_case(page):
    assert not page.exception
    assert len(page.tabs) == len(SEED_EXAMPLES)
    marks = [m.value for m in page.markdown if m.value.startswith((f"**{HOLDS}", f"**{FAILS}", f"**{UNSEEDED_MARK}"))]
    assert len(marks) == len(CASES)
    assert sum(m.startswith(f"**{HOLDS} matches") for m in marks) == len(REPRODUCIBLE)
    assert sum(m.startswith(f"**{UNSEEDED_MARK} not reproducible") for m in marks) == len(UNSEEDED)
    assert not any(FAILS in m for m in marks)
    assert len(page.table) == 1 + len(SEED_EXAMPLES)  # the overview, then one conventions table per seed
    verdicts = page.table[0].value["our engine"].tolist()
    for example, line in zip(SEED_EXAMPLES.values(), verdicts, strict=True):
        assert line.startswith(CELL_HOLDS if example.reproducible else f"unseeded: {CELL_HOLDS} structural checks pass"), line
    unseeded_notes = [w.value for w in page.warning if "Unseeded randomness" in w.value]
    assert len(unseeded_notes) == sum(not ex.reproducible for ex in SEED_EXAMPLES.values())


def test_the_page_tables_hold_the_printed_numbers_beside_ours(page):
    expected = []
    for _, case in REPRODUCIBLE:
        comparison = compare(case)
        for name in case.printed:
            printed, ours, _ = side_by_side(comparison, name)
            expected += [printed, ours]
    shown = [d.value for d in page.dataframe]
    assert len(shown) == len(expected)
    for table, want in zip(shown, expected, strict=True):
        np.testing.assert_array_equal(table.to_numpy(dtype=float), want.to_numpy(dtype=float))


@pytest.mark.parametrize("key", list(SEED_EXAMPLES))
def test_load_button_puts_the_seeds_settings_into_the_sidebar(key):
    wanted = SEED_EXAMPLES[key].explorer
    at = seeds_page()
    loading = [k for k, ex in SEED_EXAMPLES.items() if ex.explorer is not None]
    found = links(at, "Load these settings into the explorer")  # one real link per seed, in the tabs' order
    assert len(found) == len(loading) and {link.proto.page for link in found} == {""}  # "": the Heads page's path
    proto = found[loading.index(key)].proto
    at.query_params.clear()
    at.query_params.update(dict(parse_qsl(proto.query_string)))
    at.switch_page("app_pages/heads.py").run()  # as the browser follows the link
    assert not at.exception
    assert "Heads" in [t.value for t in at.title]
    config = at.session_state["config"]
    # An uploaded matrix cannot travel through the button: the page says so and offers the CSV.
    assert config == replace(wanted, embedding="random", custom_embedding=None)
    value = address(at).get("d_model")
    assert (value[0] if isinstance(value, list) else value) == str(wanted.d_model)


@pytest.mark.parametrize("key", [k for k, ex in SEED_EXAMPLES.items() if ex.explorer and ex.explorer.custom_embedding])
def test_the_input_matrix_download_is_what_the_sidebar_uploader_accepts(key):
    config = SEED_EXAMPLES[key].explorer
    data = embedding_csv(config)
    table = parse_matrix(f"seed{key}_inputs.csv", data)
    np.testing.assert_array_equal(table, np.asarray(config.custom_embedding))
    assert table.shape == (len(config.tokens), config.d_model)


def test_no_download_without_an_uploaded_matrix():
    assert embedding_csv(SEED_EXAMPLES["004"].explorer) is None
