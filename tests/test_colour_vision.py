"""The colour scales under simulated colour-vision deficiencies (issue 23, item 15).

Simulation: colorspacious's "sRGB1+CVD" space (Machado, Oliveira and Fernandes 2009) at severity 100, i.e.
deuteranopia, protanopia and tritanopia. Distances: ΔE in CAM02-UCS (colorspacious.deltaE), where about 1 to
2 is a just-noticeable difference between two patches side by side.

Checked:
- the weight scale (viridis) and the diverging scale (RdBu reversed), each sampled at 9 evenly spaced steps (a
  colour bar's ticks): every two neighbouring steps stay at least NEIGHBOUR_DELTA_E apart under each deficiency;
- the masked grey stays at least MASKED_DELTA_E from the lowest weight colour (a masked cell must not pass for a
  weight of 0), and from the diverging scale's middle (a logit near 0);
- the mask matrix's two colours stay far apart.
- the masked grey stays at least MASKED_ANYWHERE_DELTA_E from every colour of the weight scale (sampled at 101
  points): the grey rgb(150, 150, 150) came within ΔE 3.9 of viridis' teal middle under protanopia (4.5 under
  deuteranopia); rgb(170, 170, 170) stays ≥ 9.8 away.
"""

from __future__ import annotations

import numpy as np
import plotly.colors
import pytest

from ui.charts.figures import MASKED_SOLID, SIGNED_SCALE, WEIGHT_SCALE
from ui.pipeline.panels import ALLOWED_COLOUR

cs = pytest.importorskip("colorspacious")

DEFICIENCIES = ("deuteranomaly", "protanomaly", "tritanomaly")  # at severity 100: -anopia
STEPS = 9
NEIGHBOUR_DELTA_E = 5.0
MASKED_DELTA_E = 20.0
MASKED_ANYWHERE_DELTA_E = 8.0


def rgb1(colour: str) -> np.ndarray:
    """'rgb(150, 150, 150)' or '#440154' as sRGB in 0..1."""
    as_rgb = plotly.colors.convert_colors_to_same_type([colour], "rgb")[0][0]
    return np.array(plotly.colors.unlabel_rgb(as_rgb), dtype=float) / 255


def seen(colours: np.ndarray, deficiency: str | None) -> np.ndarray:
    """sRGB colours as a viewer with ``deficiency`` (None: typical vision) sees them, clipped to the gamut."""
    if deficiency is None:
        return colours
    space = {"name": "sRGB1+CVD", "cvd_type": deficiency, "severity": 100}
    return np.clip(cs.cspace_convert(colours, space, "sRGB1"), 0, 1)


def delta_e(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return cs.deltaE(a, b, input_space="sRGB1", uniform_space="CAM02-UCS")


def steps_of(scale) -> np.ndarray:
    return np.array([rgb1(c) for c in plotly.colors.sample_colorscale(scale, list(np.linspace(0, 1, STEPS)))])


def test_the_simulation_is_not_the_identity():
    # pure red and green look alike to a deuteranope: the simulation must say so, or every check below is void
    red, green = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.6, 0.0])
    assert delta_e(red, green) > 30
    assert delta_e(seen(red, "deuteranomaly"), seen(green, "deuteranomaly")) < delta_e(red, green) / 2


@pytest.mark.parametrize("deficiency", (None, *DEFICIENCIES))
@pytest.mark.parametrize(("name", "scale"), [("weights (viridis)", WEIGHT_SCALE), ("signed (RdBu)", SIGNED_SCALE)])
def test_neighbouring_steps_stay_distinguishable(name, scale, deficiency):
    colours = seen(steps_of(scale), deficiency)
    gaps = [float(delta_e(colours[i], colours[i + 1])) for i in range(STEPS - 1)]
    assert min(gaps) >= NEIGHBOUR_DELTA_E, f"{name} under {deficiency}: ΔE between steps {np.round(gaps, 1)}"


@pytest.mark.parametrize("deficiency", (None, *DEFICIENCIES))
def test_masked_grey_stays_apart_from_a_zero_weight_and_a_zero_logit(deficiency):
    grey = seen(rgb1(MASKED_SOLID), deficiency)
    lowest_weight = seen(steps_of(WEIGHT_SCALE)[0], deficiency)
    zero_logit = seen(steps_of(SIGNED_SCALE)[STEPS // 2], deficiency)
    assert delta_e(grey, lowest_weight) >= MASKED_DELTA_E
    assert delta_e(grey, zero_logit) >= MASKED_DELTA_E


@pytest.mark.parametrize("deficiency", (None, *DEFICIENCIES))
def test_mask_matrix_colours_stay_apart(deficiency):
    assert delta_e(seen(rgb1(MASKED_SOLID), deficiency), seen(rgb1(ALLOWED_COLOUR), deficiency)) >= MASKED_DELTA_E


@pytest.mark.parametrize("deficiency", (None, *DEFICIENCIES))
def test_masked_grey_is_no_colour_of_the_weight_scale(deficiency):
    scale = plotly.colors.sample_colorscale(WEIGHT_SCALE, list(np.linspace(0, 1, 101)))
    colours = seen(np.array([rgb1(c) for c in scale]), deficiency)
    distances = delta_e(colours, seen(rgb1(MASKED_SOLID), deficiency)[None])
    assert distances.min() >= MASKED_ANYWHERE_DELTA_E, f"closest at {np.argmin(distances) / 100:.2f} of the scale"
