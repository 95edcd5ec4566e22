"""A new matrix view on the Heads page is one record of ``ui.charts.views.MATRIX_VIEWS``.

The record here shows e^logit, the softmax's numerators before they are divided by the row's sum:
the switch offers it, a link carries it, and the figure names its values and draws the matrices
the record takes from the trace, with no other edit. Registered for one test at a time.
"""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from tests.address_bar import address
from tests.test_app_heads import app, charts, decode, grid_matrices
from ui.charts import views
from ui.charts.views import SEQUENTIAL, MatrixView
from ui.state.urlstate import view_from_params

NUMERATORS = MatrixView(
    "numerators", "softmax numerators e^logit", "e^logit", "e^logit", SEQUENTIAL,
    caption="Colour = e^logit, before each row is divided by its sum. {row_sums}",
    take=lambda trace: np.exp(trace.logits),
)


@pytest.fixture
def numerators(monkeypatch):
    monkeypatch.setitem(views.MATRIX_VIEWS, NUMERATORS.name, NUMERATORS)
    return NUMERATORS


def test_a_link_reads_the_new_view(numerators):
    view, messages = view_from_params({"view": "numerators"}, MHAConfig())
    assert view["view"] == "numerators" and messages == []


def test_without_the_record_the_link_falls_back_to_weights():
    view, messages = view_from_params({"view": "numerators"}, MHAConfig())
    assert view["view"] == "weights" and "numerators" in messages[0]


def test_the_heads_page_offers_draws_and_links_the_new_view(numerators):
    at = app({"view": "numerators", "mask": "causal"})
    assert not at.exception and not at.warning
    switch = at.get("button_group")[0] if at.get("button_group") else None
    options = [o.content for o in switch.proto.options] if switch is not None else []
    assert at.session_state["w_view"] == "numerators"
    assert any("e^logit" in label for label in options), options
    expected = np.exp(run(MHAConfig(mask="causal")).trace.logits)  # (nh, T, T), 0 where masked
    shown = grid_matrices(at)
    assert len(shown) == expected.shape[0]
    for h, z in enumerate(shown):
        finite = np.isfinite(z)
        np.testing.assert_allclose(z[finite], expected[h][finite], rtol=1e-6)
        assert not finite[np.triu_indices_from(z, 1)].any()  # masked cells are the grey layer's
    figure = charts(at)["heads_grid"]
    assert "e^logit %{z" in figure["data"][0]["hovertemplate"]
    assert figure["layout"]["coloraxis"]["colorbar"]["title"]["text"].startswith("e^logit, 0..")
    assert decode(figure["data"][0]["z"]).shape == expected.shape[1:]


def test_choosing_the_new_view_puts_it_in_the_link(numerators):
    at = app()
    assert "view" not in address(at)  # the default, weights, is not written
    at.session_state["w_view"] = "numerators"
    at.run()
    assert not at.exception and address(at)["view"] == "numerators"
    np.testing.assert_allclose(grid_matrices(at)[0], np.exp(run(MHAConfig()).trace.logits[0]), rtol=1e-6)
