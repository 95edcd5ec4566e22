"""Sparse selection (MoBA, DSA) on every page: each opens from a link with no exception, and the numbers shown are
the engine's. The dense row and ||o_sparse − o_dense|| shown are compared with a second engine run with the softmax
kernel (the dense head) and with the norm computed here, never with the kernel's own record of them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import shown_charts

from mha_core.config import MHAConfig, run
from tests.app_opener import open_app
from tests.test_app_step_by_step import panel_views, z_of
from ui.state.urlstate import config_from_params

FIGURE = 1e-5  # figures travel as float32
LINK = {"tokens": "the cat sat on a mat and slept", "d_model": "16", "heads": "4", "seed": "3", "mask": "causal",
        "topk": "2", "block": "2"}


def engine(kernel: str, **changes) -> tuple:
    config, messages = config_from_params({**LINK, "kernel": kernel, **changes})
    assert messages == []
    sparse = run(config)
    return sparse, run(replace(config, kernel="softmax"))


def shown(at, title: str) -> np.ndarray:
    """The matrix of the panel titled ``title`` (a figure with a title, or a row of titled panels)."""
    views = {}
    for chart in shown_charts.chart_elements(at):
        figure = shown_charts.figure_of(chart)
        layout = figure["layout"]
        titles = [note.get("text") for note in layout.get("annotations", [])] + [layout.get("title", {}).get("text")]
        if title in titles:  # the figure that holds the panel (Heads' other figures are laid out otherwise)
            views.update(panel_views(figure))
    return z_of(views[title])


@pytest.mark.parametrize("kernel", ["moba", "dsa"])
def test_heads_shows_the_kept_keys_the_dense_row_and_the_gap_of_the_chosen_head(kernel):
    at = open_app(None, **LINK, kernel=kernel)
    sparse, dense = engine(kernel)
    gap = np.linalg.norm(sparse.trace.heads - dense.trace.heads, axis=-1)  # (nh, T)
    for head in (0, 2):
        if head:
            at.radio(key="heads_sparse_head").set_value(head).run()
            assert not at.exception
        kept = sparse.trace.weights[head] > 0
        np.testing.assert_allclose(np.nan_to_num(shown(at, f"A_{head}: kept keys only")),
                                   np.where(kept, sparse.trace.weights[head], 0), atol=FIGURE)
        np.testing.assert_allclose(np.nan_to_num(shown(at, f"dense A_{head}: every allowed key")),
                                   np.where(sparse.mask, dense.trace.weights[head], 0), atol=FIGURE)
        np.testing.assert_allclose(shown(at, "‖o_sparse − o_dense‖ (query × head)"), gap.T, atol=FIGURE)
        assert gap.max() > 0.05  # k = 2 drops keys that mattered
    captions = " ".join(c.value for c in at.caption)
    assert "attention: each row sums to 1 over the keys it keeps" in captions
    assert "no softmax" not in captions  # its rows are a softmax, over the kept keys


def test_step_by_step_shows_moba_gates_and_blocks_from_the_keys():
    at = open_app("app_pages/step_by_step.py", **LINK, kernel="moba")
    sparse, _dense = engine("moba")
    k = sparse.trace.k[0]  # (T, hs) head 0's keys
    means = np.stack([k[b : b + 2].mean(axis=0) for b in range(0, 8, 2)])  # (4, hs)
    np.testing.assert_allclose(shown(at, "mean key of each block (head 0)"), means, atol=FIGURE)
    gate = sparse.trace.q[0] @ means.T  # (T, 4)
    visible = np.arange(4)[None, :] <= (np.arange(8) // 2)[:, None]
    np.testing.assert_allclose(np.nan_to_num(shown(at, "gate s = q_i · mean(K_b) (head 0)"))[visible], gate[visible],
                               atol=FIGURE)
    blocks = shown(at, "blocks kept (1) by query i (head 0)")
    assert np.array_equal(blocks.sum(axis=1), np.minimum(2, np.arange(8) // 2 + 1))


def test_step_by_step_shows_the_dsa_index_and_its_top_k():
    at = open_app("app_pages/step_by_step.py", **{**LINK, "topk": "3"}, kernel="dsa")
    sparse, dense = engine("dsa", topk="3")
    parts = sparse.trace.kernel_parts
    causal = np.tri(8, dtype=bool)
    np.testing.assert_allclose(np.nan_to_num(shown(at, "index I (every head shares it)"))[causal],
                               parts.index[causal], atol=FIGURE)
    kept = shown(at, "keys kept (1): the top-k of each row")
    assert np.array_equal(kept.sum(axis=1), np.minimum(3, np.arange(8) + 1))
    for t in range(8):  # the kept keys are those of the largest index in the row
        row = parts.index[t, : t + 1]
        assert row[kept[t, : t + 1] > 0].min() >= row[kept[t, : t + 1] == 0].max(initial=-np.inf)
    gap = np.linalg.norm(sparse.trace.heads - dense.trace.heads, axis=-1)
    np.testing.assert_allclose(shown(at, "‖o_sparse − o_dense‖ (query × head)"), gap.T, atol=FIGURE)


def test_k_equal_to_t_shows_a_zero_gap_on_the_page():
    at = open_app("app_pages/step_by_step.py", **{**LINK, "topk": "8"}, kernel="dsa")
    assert np.max(shown(at, "‖o_sparse − o_dense‖ (query × head)")) < FIGURE


@pytest.mark.parametrize("kernel", ["moba", "dsa"])
@pytest.mark.parametrize("page", ["app_pages/decoding.py", "app_pages/compare.py", "app_pages/about.py",
                                  "app_pages/flash.py"])
def test_the_other_pages_open_with_it(kernel, page):
    open_app(page, **LINK, kernel=kernel)


def test_decoding_says_what_a_dsa_layer_keeps_per_token():
    at = open_app("app_pages/decoding.py", **LINK, kernel="dsa")
    text = " ".join(m.value for m in at.markdown)
    assert "indexer key" in text
    assert f"{2 * 16 + 4} numbers per token" in text  # 2·kv·hs for K and V, plus dI for the indexer key


@pytest.mark.parametrize("changes, said", [({"kernel": "moba", "mask": "none"}, "causal mask"),
                                           ({"kernel": "dsa", "topk": "0"}, "topk=0"),
                                           ({"kernel": "moba", "kv_tokens": "a dog"}, "self-attention")])
def test_a_link_that_makes_no_sense_gets_a_message_and_a_valid_fallback(changes, said):
    at = open_app("app_pages/step_by_step.py", **{**LINK, **changes})
    messages = " ".join(w.value for w in at.warning) + " ".join(e.value for e in at.error)
    assert said in messages
    config = at.session_state["config"]
    assert config.problem() is None and config.mask == "causal" and 1 <= config.sparse_topk <= 64


def test_the_lesson_opens_and_every_claim_holds():
    at = open_app("app_pages/lessons.py", lesson="sparse")
    assert any("MoBA" in m.value for m in at.markdown)
    from ui.pages.lessons import LESSONS

    lesson = LESSONS["sparse"]
    findings = lesson.findings(lesson.panels)
    assert all(c.holds for c in findings.claims)
    moba = run(lesson.panels[0].config)
    assert moba.config.kernel == "moba" and moba.config == replace(MHAConfig(), **{
        f: getattr(moba.config, f) for f in ("tokens", "mask", "kernel", "sparse_topk", "sparse_block", "d_model",
                                             "n_heads", "seed")})


def test_the_static_pack_draws_the_sparse_weights_and_the_lesson(tmp_path):
    from deploy import static_pack
    from tests.test_static_pack import decode, page_data

    out = tmp_path / "pack"
    link = "?" + "&".join(f"{k}={v.replace(' ', '+')}" for k, v in LINK.items())
    report = static_pack.build_pack(out, [link + "&kernel=moba", link + "&kernel=dsa", "?kernel=dsa&mask=none"],
                                    lessons=("sparse",))  # the links' pages and the sparse lesson
    assert [s.line for s in report.skipped] == [3] and "causal mask" in report.skipped[0].messages[0]
    assert (out / "lesson-sparse.html").exists()
    for number, kernel in ((1, "moba"), (2, "dsa")):
        sparse, _dense = engine(kernel)
        shown = [decode(f["data"][0]["z"]).astype(float) for f in page_data(out / f"link-{number}.html")["figures"]]
        assert len(shown) == 4
        for head, z in enumerate(shown):
            drawn = ~np.isnan(z)
            assert np.array_equal(drawn, sparse.mask)  # the causal mask's cells are blank
            np.testing.assert_allclose(z[drawn], sparse.trace.weights[head][drawn], atol=FIGURE)


@pytest.mark.parametrize("kernel, extra", [("moba", "&pe=rope&kv_heads=2&block=3"), ("dsa", "&null=1&topk=3")])
def test_the_notebook_runs_every_assert_and_ends_with_the_sparse_weights(kernel, extra, tmp_path):
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from tests.test_notebook import execute
    from ui.state import notebook_link

    link = "?" + "&".join(f"{k}={v.replace(' ', '+')}" for k, v in LINK.items()) + f"&kernel={kernel}" + extra
    nb, messages = notebook_link.notebook_for_link(link)
    assert messages == []
    nb.cells.append(type(nb.cells[0])(cell_type="code", metadata={}, outputs=[], execution_count=None,
                                      source=f"np.savez({str(tmp_path / 'out.npz')!r}, A=A, kept=kept, gap=gap)"))
    execute(nb, tmp_path)  # every assert of the notebook holds
    saved = np.load(tmp_path / "out.npz")
    config, _messages = config_from_params({k: v.replace("+", " ") for k, v in (p.split("=") for p in link[1:].split("&"))})
    sparse, dense = run(config), run(replace(config, kernel="softmax"))
    np.testing.assert_allclose(saved["A"], sparse.trace.weights, atol=1e-12)
    np.testing.assert_allclose(saved["gap"], np.linalg.norm(sparse.trace.heads - dense.trace.heads, axis=-1),
                               atol=1e-12)
    assert saved["kept"].sum() < np.tri(8).sum() * (4 if kernel == "moba" else 1)  # some keys were dropped


@pytest.mark.parametrize("kernel", ["moba", "dsa"])
def test_compare_draws_the_dense_head_as_a_and_the_sparse_one_as_b(kernel):
    from tests.test_app_compare import compare_page, panels

    at = compare_page({**LINK, "kernel": "softmax", "b_kernel": kernel, "b_topk": "1", "b_block": "3"})
    assert not at.exception, [e.value for e in at.exception]
    sparse, dense = engine(kernel, topk="1", block="3")
    a, b = panels(at, "cmp_pair")
    for shown, want in ((a, dense.trace.weights[0]), (b, sparse.trace.weights[0])):
        drawn = np.isfinite(shown)
        assert np.array_equal(drawn, sparse.mask)
        np.testing.assert_allclose(shown[drawn], want[drawn], rtol=0, atol=FIGURE)
    assert not np.allclose(a[np.isfinite(a)], b[np.isfinite(b)], atol=1e-3)  # k = 1 drops keys


def test_decoding_assembles_the_sparse_rows_and_shows_the_indexer_keys_it_keeps():
    from tests.test_new_kernel_decoding import metrics, panel, panels

    at = open_app("app_pages/decoding.py", **LINK, kernel="dsa")
    sparse, _dense = engine("dsa")
    index_k = sparse.trace.kernel_parts.index_k  # (T, dI): the indexer's key of every token
    for t in (2, 7):
        at.slider("w_dec_step").set_value(t).run()
        assert not at.exception
        assembled = np.nan_to_num(panel(at, "dec_variant_assembled")[: t + 1])
        np.testing.assert_allclose(assembled, np.tril(sparse.trace.weights[0])[: t + 1], rtol=0, atol=FIGURE)
        held = panels(at, "dec_variant_held_")
        assert len(held) == 3  # K, V and the indexer keys
        np.testing.assert_allclose(held[2], index_k[: t + 1], rtol=0, atol=FIGURE)
        assert int(metrics(at)["Numbers kept (this layer)"].replace(",", "")) == (t + 1) * (2 * 16 + index_k.shape[1])
