"""The static pack's Heads pages follow the kernel's record as the live Heads page does (issue 32, item 4): the
same labels, the same maps (a differential head's "logits" are its two maps L₁, L₂; a linear head's the
similarities φ(q)·φ(k)), and the same fallbacks, which the pack refuses with the app's own message.

Each heatmap is decoded from the written HTML and compared with the engine array the live page shows
(``tests/test_app_heads_kernel_words.py`` ENGINE_MAPS), each title and label with the kernel record's words."""

from __future__ import annotations

import html
from dataclasses import replace

import numpy as np
import pytest

from deploy import static_pack
from mha_core import kernels
from mha_core.config import MHAConfig, run
from mha_core.kernels import KERNELS
from tests.test_app_heads import app
from tests.test_app_heads_kernel_words import ENGINE_MAPS
from tests.test_static_pack import decode, page_data

LINES = [
    "?kernel=differential&mask=causal&view=logits",  # 1
    "?kernel=linear&mask=causal&view=logits",  # 2
    "?kernel=differential&mask=causal",  # 3: the signed weights
    "?kernel=linear&mask=causal",  # 4
    "?kernel=differential&view=scores",  # 5
    "?kernel=differential&mask=causal&view=logits&avg=1",  # 6
    "?kernel=differential&colours=max",  # 7: signed weights have no such range
    "?kernel=softmax&mask=causal&view=logits",  # 8
]
BUILT = [1, 2, 3, 4, 5, 6, 8]


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    out = tmp_path_factory.mktemp("kernels") / "pack"
    return out, static_pack.build_pack(out, LINES, lessons=())  # the links' pages are what this file reads


def figures(out, number: int) -> list[tuple[str, np.ndarray, dict]]:
    """(title, values, colour axis) of every heatmap of link ``number``'s page (NaN: masked or blank)."""
    return [(f["title"], decode(f["data"][0]["z"]).astype(np.float64), f["layout"]["coloraxis"])
            for f in page_data(out / f"link-{number}.html")["figures"]]


def page_text(out, number: int) -> str:
    return html.unescape((out / f"link-{number}.html").read_text(encoding="utf-8"))


def assert_shows(z: np.ndarray, expected: np.ndarray, allowed: np.ndarray) -> None:
    """The heatmap holds ``expected`` (as float32) in every allowed finite cell and is blank in the others."""
    expected = np.asarray(expected, dtype=np.float64)
    drawn = allowed & np.isfinite(expected)
    assert z.shape == expected.shape
    assert np.array_equal(np.isnan(z), ~drawn)
    assert np.array_equal(z[drawn], expected.astype(np.float32)[drawn].astype(np.float64))


def test_only_the_views_a_kernel_has_are_built(pack):
    out, report = pack
    assert sorted(p.name for p in out.glob("link-*.html")) == sorted(f"link-{n}.html" for n in BUILT)
    assert [s.line for s in report.skipped] == [7]


@pytest.mark.parametrize(("number", "name"), [(1, "differential"), (2, "linear"), (8, "softmax")])
def test_the_maps_before_the_weights_are_the_kernels_own(pack, number, name):
    out, _ = pack
    result = run(MHAConfig(kernel=name, mask="causal"))
    inputs = KERNELS[name].inputs
    shown = figures(out, number)
    per_head = ENGINE_MAPS[name](result.trace)
    titles = [f"head {h}" + (f" · {n}" if n else "") for h in range(result.trace.n_heads) for n in inputs.names]
    assert [t for t, _, _ in shown] == titles
    expected = [m for maps in per_head for m in maps]
    for (_, z, _), want in zip(shown, expected, strict=True):
        assert_shows(z, want, result.mask)
    for _, z, axis in shown:  # the record's scale (a linear head's similarities from 0 up) and word for a cell
        assert (axis["cmin"] < 0) == inputs.signed
        assert axis["cmin"] <= np.nanmin(z) and np.nanmax(z) <= axis["cmax"]
    hover = page_data(out / f"link-{number}.html")["figures"][0]["data"][0]["hovertemplate"]
    assert f"{inputs.value_name} %{{z" in hover
    text = page_text(out, number)
    assert f"Showing: {inputs.label}." in text
    assert inputs.caption in text


def test_a_differential_heads_two_maps_are_not_the_whole_heads_logits(pack):
    out, _ = pack
    whole = run(MHAConfig(kernel="differential", mask="causal")).trace.logits[0]  # what the old pack drew
    z = figures(out, 1)[0][1]
    assert z.shape == whole.shape and not np.allclose(np.nan_to_num(z), np.where(np.isfinite(whole), whole, 0.0))


@pytest.mark.parametrize(("number", "name"), [(3, "differential"), (4, "linear")])
def test_the_weights_are_named_by_the_kernels_record_and_drawn_on_their_scale(pack, number, name):
    out, _ = pack
    result = run(MHAConfig(kernel=name, mask="causal"))
    weights = result.trace.weights
    shown = figures(out, number)
    assert [t for t, _, _ in shown] == [f"head {h}" for h in range(result.trace.n_heads)]
    for (_, z, axis), want in zip(shown, weights, strict=True):
        assert_shows(z, want, result.mask)
        finite = want[result.mask]
        assert axis["cmin"] <= finite.min() and finite.max() <= axis["cmax"]  # the colour bar covers every weight
    assert f"Showing: {KERNELS[name].weights_label}." in page_text(out, number)
    assert "weights (softmax)" not in page_text(out, number)
    signed = KERNELS[name].signed
    assert (shown[0][2]["cmin"] < 0) == signed


def test_the_raw_scores_caption_says_what_q_k_is_to_the_kernel(pack):
    out, _ = pack
    scores = run(MHAConfig(kernel="differential")).trace.scores
    for (_, z, _), want in zip(figures(out, 5), scores, strict=True):
        assert_shows(z, want, np.ones(want.shape, dtype=bool))
    assert KERNELS["differential"].scores_caption in page_text(out, 5)


def test_the_average_of_a_differential_heads_maps_is_taken_per_map(pack):
    out, _ = pack
    result = run(MHAConfig(kernel="differential", mask="causal"))
    parts = result.trace.kernel_parts
    shown = figures(out, 6)
    assert [t for t, _, _ in shown[-2:]] == ["average of heads · L₁", "average of heads · L₂"]
    assert_shows(shown[-2][1], parts.logits1.mean(axis=0), result.mask)
    assert_shows(shown[-1][1], parts.logits2.mean(axis=0), result.mask)


def live_info(params: dict[str, str]) -> list[str]:
    at = app(params)
    assert not at.exception
    return [i.value for i in at.info]


def test_a_colour_range_signed_weights_do_not_have_is_refused_with_the_apps_message(pack):
    _, report = pack
    (skipped,) = report.skipped
    assert len(skipped.messages) == 1 and skipped.messages[0] in live_info({"kernel": "differential",
                                                                            "colours": "max"})


def test_a_view_the_kernel_does_not_make_is_refused_with_the_apps_message(monkeypatch, tmp_path):
    plain = replace(KERNELS["softmax"], name="plain", label="plain (test)", weights_label="weights (plain)",
                    inputs=None)
    monkeypatch.setitem(kernels.KERNELS, "plain", plain)
    report = static_pack.build_pack(tmp_path / "pack", ["?kernel=plain&view=logits", "?kernel=plain"], lessons=())
    (skipped,) = report.skipped
    assert skipped.line == 1
    assert len(skipped.messages) == 1 and skipped.messages[0] in live_info({"kernel": "plain", "view": "logits"})
    assert "has no scaled + masked logits" in skipped.messages[0]
    assert "Showing: weights (plain)." in html.unescape((tmp_path / "pack" / "link-2.html").read_text("utf-8"))
