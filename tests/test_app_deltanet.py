"""Gated DeltaNet on every page (issue 34): a link with ``kernel=deltanet`` opens Heads, Step by step, Decoding,
Compare, About and the lessons with no exception, and what they show is the engine's: the implied matrix M as
the weights, its steps' matrices and stated gaps, the decoder's constant-size state, the notebook's variables."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mha_core.config import MHAConfig, run
from mha_core.decoder import decoder_config
from mha_core.variant_decoding import decode_variant_run
from tests.app_opener import open_app
from tests.shown_charts import chart_elements, decode, figure_of
from tests.test_app_heads import grid_matrices

FIGURE = 1e-5  # figures travel as float32
PARAMS = {"kernel": "deltanet", "mask": "causal", "tokens": "the cat sat on the mat and ran", "seed": "4"}
CONFIG = MHAConfig(kernel="deltanet", mask="causal", tokens=("the", "cat", "sat", "on", "the", "mat", "and", "ran"),
                   seed=4)


def figures(at) -> dict[str, dict]:
    return {e.proto.id.rsplit("-", 1)[-1]: figure_of(e) for e in chart_elements(at)}


def heatmaps(at) -> list[np.ndarray]:
    """Every heatmap trace's z of the run, decoded, in page order."""
    out = []
    for figure in figures(at).values():
        for trace in figure["data"]:
            if trace.get("type") == "heatmap" and isinstance(trace.get("z"), dict):
                out.append(decode(trace["z"]).astype(np.float64))
    return out


def shown(matrices: list[np.ndarray], want: np.ndarray) -> bool:
    """Some shown matrix is ``want`` (cells drawn as blank or NaN left out)."""
    for z in matrices:
        if z.shape == want.shape:
            drawn = np.isfinite(z)
            if drawn.any() and np.allclose(z[drawn], want[drawn], rtol=0, atol=FIGURE):
                return True
    return False


def test_heads_shows_the_implied_matrix_m_as_each_heads_weights():
    at = open_app(**PARAMS)
    trace = run(CONFIG).trace
    panels = grid_matrices(at)
    assert len(panels) == trace.n_heads
    for z, want in zip(panels, trace.weights, strict=True):
        drawn = np.isfinite(z)
        np.testing.assert_allclose(z[drawn], want[drawn], rtol=0, atol=FIGURE)
    assert (trace.weights < 0).any()  # signed, on a diverging scale
    switch = at.button_group(key="w_view")  # the view shown is named on the first screen: the weights are M
    assert switch.value == "weights" and "implied matrix M" in switch.options[switch.indices[0]]
    at.session_state["diagnostics_open"] = True  # and What each head does, once opened, averages the signed M
    at.run()
    assert any("of the signed implied matrix M" in m.value for m in at.markdown)


def test_step_by_step_shows_the_engines_q_hat_gates_m_state_and_the_three_forms_gaps():
    at = open_app("app_pages/step_by_step.py", **PARAMS)
    trace = run(CONFIG).trace
    parts = trace.kernel_parts
    head = 0
    matrices = heatmaps(at)
    for want in (parts.q_hat[head], parts.k_hat[head], np.stack([parts.beta[head], parts.alpha[head]], -1),
                 parts.similarity[head], trace.weights[head], parts.state[head], parts.recurrent_heads[head]):
        assert shown(matrices, want), want.shape
    text = " ".join(m.value for m in [*at.markdown, *at.header, *at.subheader])
    for title in ("Normalise q and k; β and α from x (Gated DeltaNet)", "The implied matrix M (Gated DeltaNet)",
                  "Three forms, one output; a state of constant size (Gated DeltaNet)"):
        assert title in text
    gaps = re.search(r"largest difference from M V, all heads: \*\*(\S+)\*\*.*largest difference: \*\*(\S+)\*\*", text)
    assert gaps is not None
    assert gaps.group(1) == f"{np.max(np.abs(parts.recurrent_heads - trace.heads)):.1e}"
    assert gaps.group(2) == f"{np.max(np.abs(parts.chunked_heads - trace.heads)):.1e}"
    assert float(gaps.group(1)) < 1e-12 and float(gaps.group(2)) < 1e-12
    negative = int(np.sum(trace.weights[head][np.tril(np.ones((8, 8), bool))] < 0))
    assert f"{negative} of its entries in head {head} are negative" in text


def test_decoding_shows_a_state_of_constant_size_against_the_growing_kv_cache():
    at = open_app("app_pages/decoding.py", **PARAMS)
    config = at.session_state["config"]
    nh, hs = config.n_heads, config.head_size
    for t in (2, 7):
        at.slider(key="w_dec_step").set_value(t).run()
        assert not at.exception
        metrics = {m.label: m.value for m in at.metric}
        assert int(metrics["Numbers kept (this layer)"].replace(",", "")) == nh * hs * hs  # the same at every step
        assert metrics["MHA's KV cache would hold"] == f"{2 * nh * hs * (t + 1):,}"
        steps = decode_variant_run(run(decoder_config(config)), upto=t)
        state = dict(steps[-1].held)["state S per query head"]
        assert shown(heatmaps(at), state[0])  # head 0's state after token t, the engine's
    text = " ".join(m.value for m in at.markdown)
    assert "state of constant size" in text and f"{nh * hs * hs} numbers" in text


def test_decodings_positions_section_draws_m_on_a_scale_centred_on_0():
    at = open_app("app_pages/decoding.py", **PARAMS)
    trace = run(CONFIG).trace
    heatmap = figures(at)["dec_pe_none"]["data"][0]
    z = decode(heatmap["z"]).astype(np.float64)
    drawn = np.isfinite(z)
    np.testing.assert_allclose(z[drawn], trace.weights[0][drawn], rtol=0, atol=FIGURE)
    assert heatmap["zmin"] == -heatmap["zmax"] <= trace.weights[0].min() < 0  # negative weights not clipped at 0


def test_with_shared_kv_heads_decoding_shows_the_chosen_query_heads_own_state():
    """β and α are per query head, so is the state: head 1 shares K/V head 0 with head 0 but keeps its own S."""
    at = open_app("app_pages/decoding.py", **PARAMS, kv_heads=2)
    config = at.session_state["config"]
    at.slider(key="w_dec_step").set_value(5).run()
    at.selectbox(key="w_dec_head").set_value(1).run()
    assert not at.exception
    state = dict(decode_variant_run(run(decoder_config(config)), upto=5)[-1].held)["state S per query head"]
    assert state.shape[0] == config.n_heads == 4 and not np.allclose(state[0], state[1])
    assert shown(heatmaps(at), state[1]) and not shown(heatmaps(at), state[0])
    assert "S (head 1), after token 5" in [f["layout"]["title"]["text"] for f in figures(at).values()
                                           if f["layout"].get("title")]


@pytest.mark.parametrize("page", ["app_pages/compare.py", "app_pages/about.py"])
def test_compare_and_about_open_with_the_kernel(page):
    at = open_app(page, **PARAMS)
    if page.endswith("about.py"):
        kernels = next(t.value for t in at.table if t.value.index.name == "kernel")
        assert kernels.loc["deltanet", "negative weights"] == "yes"


def test_a_link_without_the_causal_mask_falls_back_to_it_with_a_message():
    at = open_app(kernel="deltanet")
    assert at.session_state["config"].mask == "causal" and at.session_state["config"].kernel == "deltanet"
    words = " ".join(w.value for w in [*at.warning, *at.info, *at.error, *at.caption])
    assert "use the causal mask" in words


# ---- the notebook and the static pack ------------------------------------------------------------------------

LINK = "?tokens=a+b+c+d+e+f&kernel=deltanet&mask=causal&pe=rope&kv_heads=2&seed=3"
SAVED = ("beta", "g", "q_hat", "k_hat", "A", "sim", "S_state", "recurrent", "heads", "Y")


def _executed_notebook(tmp_path, link: str = LINK) -> dict[str, np.ndarray]:
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from tests.test_notebook import executed_values
    from ui.state import notebook_link

    nb, _msgs = notebook_link.notebook_for_link(link)
    return executed_values(nb, tmp_path, "saved", SAVED)


def test_the_notebook_computes_beta_alpha_m_and_the_state_as_the_engine_does(tmp_path):
    from urllib.parse import parse_qsl

    from ui.state.urlstate import config_from_params

    config, messages = config_from_params(dict(parse_qsl(LINK.lstrip("?"))))
    assert messages == [] and config.kernel == "deltanet"
    got = _executed_notebook(tmp_path)
    trace = run(config).trace
    parts = trace.kernel_parts
    want = {"beta": parts.beta, "g": parts.g, "q_hat": parts.q_hat, "k_hat": parts.k_hat, "A": trace.weights,
            "sim": parts.similarity, "S_state": parts.state, "recurrent": parts.recurrent_heads, "heads": trace.heads,
            "Y": trace.output}
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize(("slug", "old", "new", "failing"), [
    ("deltanet_gates", "np.exp(A_log)", "A_log", 'app["g"]'),  # exp(A_log) forgotten
    ("deltanet_matrix", "r[:, j:] = alpha[:, j, None, None] * (", "r[:, j:] = (", 'app["A"]'),  # the decay skipped
    ("deltanet_forms", "beta[:, t, None] * (V_h[:, t] - recalled)", "beta[:, t, None] * V_h[:, t] - recalled",
     "assert np.allclose(recurrent, A @ V_h)"),  # β on the wrong term: the recurrence no longer gives M V
])
def test_a_planted_wrong_deltanet_cell_fails_at_its_own_assert(monkeypatch, tmp_path, slug, old, new, failing):
    nbclient = pytest.importorskip("nbclient")
    from tests.test_notebook import _planted
    from ui.charts import notebook_kernels

    _planted(monkeypatch, slug, old, new, notebook_kernels.KERNEL_CELLS)
    with pytest.raises(nbclient.exceptions.CellExecutionError) as error:
        _executed_notebook(tmp_path)
    assert "AssertionError" in str(error.value) and failing in str(error.value)


def test_the_static_pack_draws_m_for_a_deltanet_link(tmp_path):
    from deploy import static_pack
    from tests.test_static_pack import decode as pack_decode
    from tests.test_static_pack import page_data

    out = tmp_path / "pack"
    static_pack.build_pack(out, ["?kernel=deltanet&mask=causal"], lessons=())  # the link's page only
    trace = run(MHAConfig(kernel="deltanet", mask="causal")).trace
    shown_z = [pack_decode(f["data"][0]["z"]).astype(np.float64) for f in page_data(out / "link-1.html")["figures"]]
    assert len(shown_z) == trace.n_heads
    for z, want in zip(shown_z, trace.weights, strict=True):
        drawn = np.isfinite(z)
        np.testing.assert_array_equal(z[drawn], want.astype(np.float32)[drawn].astype(np.float64))


# ---- the lesson ------------------------------------------------------------------------------------------------


def test_the_lesson_asks_first_then_shows_claims_that_hold_with_the_engines_numbers():
    from ui.pages.lessons.registry import LESSONS

    lesson = LESSONS["deltanet"]
    assert "Before you look" in lesson.question
    findings = lesson.findings(lesson.panels)
    assert all(claim.holds for claim in findings.claims), [c.text for c in findings.claims if not c.holds]
    trace = run(lesson.panels[1].config).trace
    np.testing.assert_array_equal(findings.figures[1].matrices[0], trace.weights[0])
    table = findings.tables[0][1]
    assert list(table["kind"]) == ["Gated DeltaNet"] * 3 + ["gated attention (KV cache)"]
    at = open_app("app_pages/lessons.py", lesson="deltanet")
    text = " ".join(m.value for m in [*at.markdown, *at.caption, *at.subheader, *at.header, *at.info, *at.success])
    assert lesson.question in text or lesson.question.split(":")[0] in text


def test_a_lesson_claim_fails_when_the_engine_skips_the_decay(monkeypatch):
    import mha_core.deltanet as deltanet
    from ui.pages.lessons.registry import LESSONS

    original = deltanet.implied_matrix
    monkeypatch.setattr(deltanet, "implied_matrix", lambda q, k, g, beta: original(q, k, np.zeros_like(g), beta))
    lesson = LESSONS["deltanet"]
    claims = lesson.findings(lesson.panels).claims
    assert not claims[1].holds and not claims[2].holds  # M V no longer the recurrence; M no longer the product


# ---- in zh-CN and es -----------------------------------------------------------------------------------------

STEP_TITLES = ("Normalise q and k; β and α from x (Gated DeltaNet)", "The implied matrix M (Gated DeltaNet)",
               "Three forms, one output; a state of constant size (Gated DeltaNet)")


def _page_text(at) -> str:
    return " ".join(e.value for e in [*at.markdown, *at.header, *at.subheader, *at.caption, *at.info])


@pytest.mark.parametrize("code", ["zh-CN", "es"])
def test_step_by_step_and_the_lesson_speak_the_language_with_the_same_numbers(code):
    from ui.i18n import _, using_language
    from ui.pages.lessons.registry import LESSONS

    english = _page_text(open_app("app_pages/step_by_step.py", **PARAMS))
    text = _page_text(open_app("app_pages/step_by_step.py", **PARAMS, lang=code))
    with using_language(code):
        titles = [_(t) for t in STEP_TITLES]
        question = _(LESSONS["deltanet"].question)
        lesson_title = _(LESSONS["deltanet"].title)
    for english_title, title in zip(STEP_TITLES, titles, strict=True):
        assert title != english_title and title in text and english_title not in text
    for english_words in ("Gated DeltaNet first makes every q and k", "The state is linear in the values",
                          "The same heads, three ways"):  # the steps' words: shown in English, translated here
        assert english_words in english and english_words not in text
    gaps = re.compile(r"\*\*(\d\.\de-\d\d)\*\*")
    assert gaps.findall(text) == gaps.findall(english) and len(gaps.findall(text)) >= 2
    lesson = _page_text(open_app("app_pages/lessons.py", lesson="deltanet", lang=code))
    assert lesson_title in lesson and (question in lesson or question.split("：")[0].split(":")[0] in lesson)
