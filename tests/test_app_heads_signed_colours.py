"""The Heads page's colour-range switch follows the kernel's record: weights that can be negative (a record with
``signed``: differential attention's A₁ − λA₂) have one range, centred on 0 and as wide as the largest |weight|
shown, so the 0..1 / 0..max / per-head switch is not offered; a link asking for one gets the fixed range and a
message. Whatever the link asks, the colour bar covers every weight shown (the engine's ``trace.weights``)."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from mha_core.kernels import KERNELS
from tests.test_app_heads import app, charts, grid_matrices
from ui.charts.colour_ranges import SIGNED_COLOURS
from ui.state.settings import COLOUR_RANGE_LABELS

FIGURE = 1e-5  # figures travel as float32
SIGNED = [name for name, kernel in KERNELS.items() if kernel.signed]


def colour_switch_offered(at) -> list[str] | None:
    """The colour-range switch's options, or None when it is not drawn."""
    for group in at.get("button_group"):
        if group.proto.label == "Colour range":
            return [o.content for o in group.proto.options]
    return None


def colour_bar(at) -> tuple[float, float]:
    axis = charts(at)["heads_grid"]["layout"]["coloraxis"]
    return axis["cmin"], axis["cmax"]


def test_the_record_says_differential_weights_are_signed_and_they_are():
    assert "differential" in SIGNED
    assert (run(MHAConfig(kernel="differential", mask="causal")).trace.weights < 0).any()  # the test has teeth


@pytest.mark.parametrize("colours", list(COLOUR_RANGE_LABELS))
@pytest.mark.parametrize("name", SIGNED)
@pytest.mark.parametrize("average", [False, True])
def test_signed_weights_offer_no_range_from_0_and_the_colour_bar_covers_every_weight(name, colours, average):
    params = {"kernel": name, "mask": "causal", "colours": colours, **({"avg": "1"} if average else {})}
    at = app(params)
    assert not at.exception, [e.value for e in at.exception]
    assert colour_switch_offered(at) is None
    weights = run(MHAConfig(kernel=name, mask="causal")).trace.weights  # (nh, T, T), signed
    shown = grid_matrices(at)
    expected = [*weights, weights.mean(axis=0)] if average else list(weights)
    assert len(shown) == len(expected)
    low, high = colour_bar(at)
    for z, want in zip(shown, expected, strict=True):
        drawn = np.isfinite(z)
        np.testing.assert_allclose(z[drawn], want[drawn], rtol=0, atol=FIGURE)  # the engine's weights
        assert low <= want[drawn].min() and want[drawn].max() <= high  # every shown weight inside the bar
    assert low < 0 < high
    caption = " ".join(c.value for c in at.caption)
    assert SIGNED_COLOURS in caption
    assert KERNELS[name].label[1:] in caption  # the record's label as written (A₁ − λA₂, not a₁ − λa₂)
    asked_for_a_range = colours != "fixed"
    assert any("no colour range to choose" in i.value for i in at.info) == asked_for_a_range
    if asked_for_a_range:
        assert at.session_state["w_colours"] == "fixed"


def test_presentation_of_signed_weights_has_no_colour_range_switch_and_covers_the_head():
    at = app({"kernel": "differential", "present": "1", "head": "1", "colours": "max"})
    assert not at.exception
    assert colour_switch_offered(at) is None
    weights = run(MHAConfig(kernel="differential")).trace.weights[1]
    low, high = colour_bar(at)
    assert low <= weights.min() and weights.max() <= high


def test_weights_from_0_up_still_offer_every_range():
    at = app({"kernel": "softmax", "colours": "max"})
    assert colour_switch_offered(at) == list(COLOUR_RANGE_LABELS.values())
    weights = run(MHAConfig()).trace.weights
    assert colour_bar(at) == (0.0, pytest.approx(float(weights.max()), abs=FIGURE))
    assert not any("no colour range to choose" in i.value for i in at.info)
