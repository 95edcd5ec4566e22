"""``kernel=qknorm`` from a link on every page: Heads, Step by step (its own step), Decoding, Compare, the lesson, the
notebook and the static pack; every number shown is compared with the engine's trace (q̂, k̂, the weights, the bound),
never with the function that drew it."""

from __future__ import annotations

import numpy as np
import pytest

from deploy import static_pack
from mha_core.config import MHAConfig, run
from mha_core.qk_norm import logit_bound, qk_norm_params
from tests.app_opener import open_app
from tests.test_app_heads import app, grid_matrices
from tests.test_app_step_by_step import charts as step_charts
from tests.test_app_step_by_step import open_page, z_of
from tests.test_static_pack import decode, page_data
from ui.pipeline.notebook import notebook_for_config
from ui.pipeline.records import step_inputs
from ui.pipeline.steps import build_steps
from ui.state.urlstate import config_from_params

FIGURE = 1e-5  # figures travel as float32
LINK = {"tokens": "the cat sat on a mat", "d_model": "16", "heads": "4", "kv_heads": "2", "seed": "9",
        "mask": "causal", "pe": "rope", "kernel": "qknorm"}


def engine():
    config, _messages = config_from_params(LINK)
    return config, run(config).trace


def test_heads_shows_the_engines_weights():
    at = app(LINK)
    assert not at.exception
    _config, trace = engine()
    shown = np.stack(grid_matrices(at))  # masked cells are blank (NaN)
    assert np.array_equal(np.isnan(shown[0]), ~np.tri(6, dtype=bool))
    np.testing.assert_allclose(np.nan_to_num(shown, nan=0.0), trace.weights, rtol=0, atol=FIGURE)


def test_step_by_step_shows_the_norm_before_rope_with_the_engines_arrays_and_bound():
    at = open_page(**LINK)
    config, trace = engine()
    views = step_charts(at)
    np.testing.assert_allclose(z_of(views["Q_0 as projected"]), trace.q_projected[0], rtol=0, atol=FIGURE)
    np.testing.assert_allclose(z_of(views["Q̂_0 = RMSNorm(Q_0) ⊙ g_q"]), trace.q_unrotated[0], rtol=0, atol=FIGURE)
    np.testing.assert_allclose(z_of(views["K̂_(0) = RMSNorm(K_(0)) ⊙ g_k"]), trace.k_unrotated[0], rtol=0, atol=FIGURE)
    params = qk_norm_params(config.head_size, config.seed)
    np.testing.assert_allclose(z_of(views["The learned gains g_q, g_k (shared by the heads)"]),
                               np.stack([params.gain_q, params.gain_k]), rtol=0, atol=FIGURE)
    text = " ".join(m.value for m in at.markdown)
    bound = logit_bound(config.head_size, trace.scale, params)
    assert f"= {bound:.4f}**" in text
    assert f"**{np.max(np.abs(trace.scores[0] * trace.scale)):.4f}**" in text
    slugs = [s.slug for s in build_steps(step_inputs(run(config)), head=0)]
    assert slugs.index("split") < slugs.index("qk_norm") < slugs.index("rope") < slugs.index("scores")


@pytest.mark.parametrize("extra", [{}, {"null": "1", "pe": "alibi"}])
def test_decoding_rows_are_full_attentions(extra):
    at = open_app("app_pages/decoding.py", **{**LINK, **extra})
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["max |Δ| vs full causal"]) <= 1e-12


def test_compare_opens_qknorm_against_the_plain_head():
    at = open_app("app_pages/compare.py", **{**LINK, "b_kernel": "softmax"})
    assert not at.exception


def test_the_lesson_opens_and_its_claims_hold():
    at = open_app("app_pages/lessons.py", lesson="qknorm")
    text = " ".join(m.value for m in at.markdown)
    assert "QK-norm" in text
    from ui.pages.lessons.registry import LESSONS
    lesson = LESSONS["qknorm"]
    assert all(c.holds for c in lesson.findings(lesson.panels).claims)


def notebook_namespace(config: MHAConfig, plant: tuple[str, str] | None = None) -> dict:
    """Every code cell of ``config``'s notebook executed in one namespace (matplotlib left out), optionally with
    ``plant`` = (old, new) replaced in the QK-norm cell."""
    cells = [c.source for c in notebook_for_config(config, "http://x").cells if c.cell_type == "code"]
    if plant is not None:
        cells = [c.replace(*plant) if "rms_norm(Q_h, g_q)" in c else c for c in cells]
    namespace: dict = {}
    for source in cells:
        exec(compile(source.replace("import matplotlib.pyplot as plt", "raise ImportError"), "cell", "exec"),
             namespace)
    return namespace


@pytest.mark.parametrize("extra", [{}, {"pe": "none", "kv_heads": "1", "mask": "none"}, {"pe": "1", "bias": "1"}])
def test_the_notebook_runs_its_asserts_and_ends_with_the_engines_weights(extra, capsys):
    config, _messages = config_from_params({**LINK, **extra})
    namespace = notebook_namespace(config)
    capsys.readouterr()
    np.testing.assert_allclose(namespace["A"], run(config).trace.weights, atol=1e-12)


def test_a_planted_norm_without_gains_fails_the_notebooks_assert(capsys):
    config, _messages = config_from_params(LINK)
    with pytest.raises(AssertionError):
        notebook_namespace(config, ("Q_h = rms_norm(Q_h, g_q)", "Q_h = rms_norm(Q_h, 1.0)"))
    capsys.readouterr()


def test_the_static_pack_builds_a_qknorm_link_with_the_engines_weights(tmp_path):
    line = "?" + "&".join(f"{k}={v.replace(' ', '+')}" for k, v in LINK.items())
    out = tmp_path / "pack"
    report = static_pack.build_pack(out, [line, "lessons?lesson=qknorm"], lessons=())  # the links' pages only
    assert not report.skipped
    figure = page_data(out / "link-1.html")["figures"][0]
    _config, trace = engine()
    z = decode(figure["data"][0]["z"]).astype(np.float64)  # head 0, masked cells NaN
    causal = np.tri(6, dtype=bool)
    assert np.array_equal(np.isfinite(z), causal)
    assert np.array_equal(z[causal], trace.weights[0][causal].astype(np.float32).astype(np.float64))


def test_flashattention_tiles_the_normalised_q_and_k_and_gives_the_engines_head():
    from mha_core.flash import flash_of_run

    at = open_app("app_pages/flash.py", **LINK)
    assert not any("no softmax row to tile" in e.value for e in [*at.error, *at.warning, *at.info])
    config, trace = engine()
    tiled = flash_of_run(run(config), 1, 2, 2)
    np.testing.assert_allclose(tiled.output, trace.heads[1], atol=1e-12)
