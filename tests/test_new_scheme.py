"""A fifth positional scheme is one row of ``mha_core.positions.SCHEMES``: every page that offers schemes takes it.

The row here does nothing ("none, labelled differently"), so every number it gives must be the
engine's numbers with no positions. It is registered for one test at a time (``monkeypatch``) and
reaches the sidebar, the link, Step by step, Decoding, Compare and About with no other edit; the
README check notices that the README does not document it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mha_core import positions
from mha_core.config import MHAConfig, run
from mha_core.positions import PositionScheme
from tests.test_app_compare import compare_page
from tests.test_app_decoding import open_page
from tests.test_app_step_by_step import charts, z_of
from ui.state.urlstate import config_from_params, params_from_config

ROOT = Path(__file__).resolve().parents[1]
PLAIN = PositionScheme("plain", "plain (a test's scheme: no positions)", "plain", "Nothing: a test's scheme.")


@pytest.fixture
def plain(monkeypatch):
    monkeypatch.setitem(positions.SCHEMES, PLAIN.name, PLAIN)
    return PLAIN


def undocumented_schemes(readme: str) -> set[str]:
    """Schemes of the table that the README's ``pe`` row does not name."""
    row = re.search(r"^\| `pe` \|(.*)$", readme, flags=re.M).group(1)
    return {name for name in positions.SCHEMES if f"`{name}`" not in row}


def test_the_readme_documents_every_scheme():
    assert undocumented_schemes((ROOT / "README.md").read_text()) == set()


def test_the_readme_check_notices_a_new_scheme(plain):
    assert undocumented_schemes((ROOT / "README.md").read_text()) == {"plain"}


def test_a_link_reads_and_writes_the_new_scheme(plain):
    config, messages = config_from_params({"pe": "plain"})
    assert config.pe == "plain" and messages == []
    assert params_from_config(config)["pe"] == "plain"
    np.testing.assert_array_equal(run(config).trace.weights, run(replace(config, pe="none")).trace.weights)


def test_an_unknown_scheme_names_the_new_one_among_the_choices(plain):
    _, messages = config_from_params({"pe": "spiral"})
    assert messages == ["`pe=spiral` is not one of none, sinusoidal, rope, alibi, plain: using none."]


def test_the_sidebar_offers_it_and_the_heads_page_draws_it(plain):
    at = open_page("app_pages/heads.py")
    box = at.selectbox(key="w_pe")
    assert PLAIN.label in box.options
    box.set_value("plain").run()
    assert not at.exception
    assert at.session_state["config"].pe == "plain"
    assert at.query_params["pe"] in ("plain", ["plain"])
    summary = [c.value for c in at.caption]
    assert summary  # the page drew its captions with the new scheme in force


def test_step_by_step_with_the_new_scheme_shows_the_engines_weights(plain):
    at = open_page("app_pages/step_by_step.py", pe="plain")
    assert not at.exception
    expected = run(MHAConfig(pe="plain")).trace.weights[0]
    views = charts(at)
    title = next(t for t in views if t.startswith("A_0 = softmax"))
    np.testing.assert_allclose(z_of(views[title]), expected, rtol=0, atol=1e-6)  # figures travel as float32


def test_decoding_compares_the_new_scheme_beside_the_others(plain):
    at = open_page("app_pages/decoding.py", pe="plain")
    assert not at.exception
    views = charts(at)
    for scheme in positions.SCHEMES.values():
        assert scheme.label in views, (scheme.name, list(views))
    result = run(MHAConfig(pe="plain", mask="causal"))
    causal = np.where(result.mask, result.trace.weights[0], np.nan)  # a masked cell is drawn blank, grey with a ×
    np.testing.assert_allclose(z_of(views[PLAIN.label]), causal, rtol=0, atol=1e-6)


def test_compare_takes_the_new_scheme_as_b(plain):
    at = compare_page({"b_pe": "plain", "mask": "causal"})
    assert not at.exception
    assert at.query_params["b_pe"] in ("plain", ["plain"])


def test_about_lists_the_new_scheme(plain):
    at = open_page("app_pages/about.py")
    assert not at.exception
    schemes = next(t.value for t in at.table if "acts on" in t.value.columns)
    assert list(schemes.index) == list(positions.SCHEMES)
    assert schemes.loc["plain", "scheme"] == PLAIN.label and schemes.loc["plain", "acts on"] == "nothing"
