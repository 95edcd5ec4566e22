"""The SmolLM2 view's what-ifs in AppTest: the link opens them (bad values: a message and the default), and the
shown losses and kept keys are the engine's (mha_core.smollm2_whatif) for the same settings."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from mha_core import smollm2_whatif as wi
from tests.address_bar import address
from tests.app_opener import open_app
from tests.shown_charts import chart_elements, decode, figure_of
from ui.pages.real_model.smollm2 import DEFAULT_PROMPT

# The default text's losses are read from the sweep shipped with the app (mha_core/data/smollm2_whatif_sweep.json),
# made by this engine on another CPU: a float32 forward through 30 layers rounds differently with another BLAS kernel
# (5e-7 relative measured between two CPUs of this machine kind). A wrong variant, layer or k moves a loss by > 1e-3.
ACROSS_CPUS = 1e-5

PAGE = "app_pages/real_model.py"
LAYERS = (20, 25)
LINK = {"model": "smollm2", "rm_sparse": "25,20", "rm_sparse_k": "2", "rm_sparse_at": "25.3", "rm_sinks": "1"}


@pytest.fixture(scope="module")
def linked(smollm2) -> AppTest:
    return open_app(PAGE, timeout=600, **LINK)


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.forward(DEFAULT_PROMPT)


def frame(at: AppTest, column: str):
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


def chart(at: AppTest, title_part: str) -> dict:
    for element in chart_elements(at):
        spec = figure_of(element)
        if title_part in str(spec["layout"].get("title", "")):
            return spec
    raise AssertionError(f"no chart titled with {title_part!r}")


def test_the_link_fills_the_widgets_and_is_written_back(linked):
    assert linked.toggle(key="w_sm_sparse_on").value and linked.toggle(key="w_sm_sinks_on").value
    assert linked.multiselect(key="w_sm_sparse_layers").value == list(LAYERS)
    assert linked.select_slider(key="w_sm_sparse_k").value == 2
    assert (linked.selectbox(key="w_sm_sparse_layer").value, linked.selectbox(key="w_sm_sparse_head").value) == (25, 3)
    assert address(linked)["rm_sparse"] == "20,25" and address(linked)["rm_sparse_at"] == "25.3"


def test_shown_sweep_is_the_engines(linked, smollm2, run):
    shown = frame(linked, "k")
    assert shown["k"].tolist() == list(wi.SWEEP_K)
    dense = float(smollm2.prompt_losses(run).mean())
    for k in (1, 8):
        expected = float(wi.sparse_losses(smollm2, run, LAYERS, k).mean())
        row = shown[shown["k"] == k].iloc[0]
        assert row["loss"] == pytest.approx(expected, abs=1e-9)
        assert row["rise"] == pytest.approx(expected - dense, abs=1e-9)
    moba = frame(linked, "blocks")
    assert moba["blocks"].tolist() == list(wi.SWEEP_BLOCKS)
    row = moba[moba["blocks"] == 2].iloc[0]
    assert row["keys"] == 2 * wi.MOBA_BLOCK
    assert row["loss"] == pytest.approx(float(wi.moba_losses(smollm2, run, LAYERS, 2).mean()), abs=1e-9)
    spec = chart(linked, "Loss against k")
    y = spec["data"][0]["y"]
    y = decode(y) if isinstance(y, dict) else np.asarray(y)
    np.testing.assert_allclose(y, shown["loss"].to_numpy(), atol=1e-12)


def test_shown_kept_keys_are_the_engines(linked, smollm2, run):
    z = chart(linked, "Keys kept")["data"][0]["z"]
    z = decode(z)
    kept = wi.kept_keys(smollm2, run, 25, 2, LAYERS)[3]  # (T, T)
    t = run.n_tokens
    np.testing.assert_array_equal(np.nan_to_num(z, nan=0.0) > 0.5, kept)
    assert (kept.sum(axis=-1) == np.minimum(2, np.arange(1, t + 1))).all()


def test_shown_head_tolerance_is_the_engines(linked, smollm2, run):
    z = decode(chart(linked, "Which heads tolerate")["data"][0]["z"])  # (L, nh), k = 2 from the link
    np.testing.assert_allclose(z, wi.head_output_change(smollm2, run, 2), atol=1e-6)


def test_shown_sink_losses_are_the_engines(linked, smollm2, run):
    shown = frame(linked, "variant")
    sinks = wi.fit_sinks(smollm2, run)
    for variant in ("without", "fitted"):
        row = shown[shown["variant"] == variant].iloc[0]
        assert row["loss"] == pytest.approx(wi.sink_loss(smollm2, run, variant, sinks), rel=ACROSS_CPUS, abs=1e-9)
    needy = frame(linked, "mass")
    mass = wi.first_token_mass(run)
    assert len(needy) == int((mass >= 0.3).sum())
    top = needy.iloc[0]
    assert top["mass"] == pytest.approx(mass.max(), abs=1e-7)


def test_bad_link_values_get_a_message_and_the_default(smollm2):
    at = open_app(PAGE, timeout=600, model="smollm2", rm_sparse="abc,29", rm_sparse_k="5", rm_sparse_at="99.1",
                  rm_whatif_text="novel")
    warnings = " ".join(w.value for w in at.warning)
    for param in ("rm_sparse=abc,29", "rm_sparse_k=5", "rm_sparse_at=99.1", "rm_whatif_text=novel"):
        assert param in warnings
    assert at.multiselect(key="w_sm_sparse_layers").value == [29]
    assert at.select_slider(key="w_sm_sparse_k").value == wi.SWEEP_K[2]
    assert at.segmented_control(key="w_sm_whatif_text").value == "prompt"
    assert at.selectbox(key="w_sm_sparse_layer").value == 29 and "rm_sparse_at" not in address(at)  # the default


def test_the_shown_head_is_written_only_when_it_is_not_the_default():
    from ui.pages.real_model import whatif as wv

    assert "rm_sparse_at" not in wv.link_params(wv.WhatIfLink((20, 25), at=(20, 0)))
    assert wv.link_params(wv.WhatIfLink((20, 25), at=(20, 1)))["rm_sparse_at"] == "20.1"
    assert wv.link_params(wv.WhatIfLink((20, 25), at=(25, 0)))["rm_sparse_at"] == "25.0"
    assert "rm_sparse_at" not in wv.link_params(wv.WhatIfLink((), at=(0, 0)))  # all layers: layer 0's head 0
    assert "rm_sparse_at" not in wv.link_params(wv.WhatIfLink(None, at=(25, 3)))  # sparse off: nothing of it


def shown_text(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "subheader", "warning", "info") for e in getattr(at, kind)]
    parts += [at.toggle(key=key).label for key in ("w_sm_sparse_on", "w_sm_sinks_on")]
    parts += [at.multiselect(key="w_sm_sparse_layers").label]
    return "\n".join(parts)


@pytest.mark.parametrize("lang", ["es", "zh-CN"])
def test_other_languages_translate_the_words_and_keep_the_numbers(smollm2, linked, lang):
    from ui.i18n import _ as translate
    from ui.i18n import using_language

    at = open_app(PAGE, timeout=600, lang=lang, **LINK)
    text = shown_text(at)
    mine = (
        "Sparse selection: keep only the top-k keys per query",
        "Sinks without the sink token",
        "What if: change SmolLM2's attention after training",
        "Sparse layers (none chosen: all 30)",
    )
    with using_language(lang):
        for msgid in mine:
            assert msgid not in text and translate(msgid) in text, msgid
    np.testing.assert_array_equal(frame(at, "k")["loss"].to_numpy(), frame(linked, "k")["loss"].to_numpy())
    np.testing.assert_array_equal(frame(at, "variant")["loss"].to_numpy(), frame(linked, "variant")["loss"].to_numpy())
    assert any(msgid in shown_text(linked) for msgid in mine)  # the English page shows them


def test_all_layers_from_the_link(smollm2, run):
    at = open_app(PAGE, timeout=600, model="smollm2", rm_sparse="all")
    assert at.multiselect(key="w_sm_sparse_layers").value == []
    assert address(at)["rm_sparse"] == "all"
    assert "sparse layers: 30;" in str(chart(at, "Loss against k")["layout"]["title"])
    shown = frame(at, "k")
    k1 = shown[shown["k"] == 1].iloc[0]["loss"]
    assert k1 == pytest.approx(float(wi.sparse_losses(smollm2, run, range(30), 1).mean()), rel=ACROSS_CPUS, abs=1e-9)


def test_a_shown_head_outside_the_sparse_layers_is_reported():
    from ui.pages.real_model import whatif as wv

    messages = []
    link = wv.read_link({"rm_sparse": "20,25", "rm_sparse_at": "5.1"}, 30, 9, messages)
    assert link.at is None and link.layers == (20, 25) and "layer 5 is not one of the sparse layers" in messages[0]
