"""A fourth attention kernel is one row of ``mha_core.kernels.KERNELS``: every page that shows a kernel takes it.

The row is sigmoid attention (Ramapuram et al. 2024): each scaled, masked logit goes through σ(x − log T_k) on its
own, so a masked key gets 0 and a row's weights do not sum to 1. It differs in kind from softmax, differential and
linear (no normalisation at all), and it is registered as the README's "Add a kernel" says, for one test at a time
(``monkeypatch.setitem``). Every number a page shows is compared with ``by_hand`` below: the sigmoid weights, the
heads, their concatenation and the output computed here in NumPy from the engine's queries, keys and values (the
kernel's inputs), never with the kernel's own function.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

from mha_core import kernels
from mha_core.config import MHAConfig, run
from mha_core.kernels import Kernel, Refusal
from tests.app_opener import open_app
from tests.shown_steps import open_downloads, step_formulas, step_titles
from tests.test_app_compare import compare_page, panels
from tests.test_app_heads import DOWNLOADS, app, grid_matrices
from tests.test_app_heads_kernel_words import csv_frame, downloads, figure_titles, switch_labels  # noqa: F401
from tests.test_app_step_by_step import charts as step_charts
from tests.test_app_step_by_step import open_page, z_of
from tests.test_kernel_links import undocumented_kernels
from tests.test_stated_numbers_downloads import blocks, csv, offered, opened, step_block  # noqa: F401
from ui.state.urlstate import config_from_params

ROOT = Path(__file__).resolve().parents[1]
FIGURE = 1e-5  # figures travel as float32
CSV = 1e-7  # CSVs keep 8 or 9 significant digits
LINK = {"tokens": "the cat sat on a mat", "d_model": "16", "heads": "4", "kv_heads": "2", "seed": "9",
        "mask": "causal", "kernel": "sigmoid"}


def sigmoid_weights(logits):
    """σ(L − log T_k) entry by entry; a masked logit (−inf) gives exactly 0."""
    return 1.0 / (1.0 + np.exp(np.log(logits.shape[-1]) - logits))


SIGMOID = Kernel(
    "sigmoid", "sigmoid (σ(· − log T))", "sigmoid",
    "Each scaled, masked logit goes through a sigmoid on its own, shifted by −log T_k: no row is normalised.",
    rows_sum_to_one=False, row_sums="a row's weights sum to anything between 0 and T_k", signed=False,
    weights_of=sigmoid_weights, paper="Ramapuram et al. 2024", formula="A = σ(QKᵀ/√d_k − log T_k)",
    weights_tex=r"A_{ij} = \sigma\!\Big(\frac{q_i\cdot k_j}{\sqrt{d_k}} - \log T_k\Big),\quad \sigma(x) = "
                r"\frac{1}{1 + e^{-x}}",
    refuses=(Refusal("null_key", "the null key is a softmax₁ idea; sigmoid attention has no denominator to add 1 "
                     "to: turn the null key off", lambda c: bool(getattr(c, "null_key", False)), {"null_key": False}),),
)


@pytest.fixture
def sigmoid(monkeypatch):
    monkeypatch.setitem(kernels.KERNELS, SIGMOID.name, SIGMOID)
    return SIGMOID


def by_hand(result) -> dict[str, np.ndarray]:
    """Sigmoid attention written out here from the engine's positioned q, k and v: L, A, heads, concat, Y."""
    t, w = result.trace, result.weights
    reads = [t.kv_head_of(h) for h in range(t.n_heads)]
    k, v = t.k[reads], t.v[reads]  # (nh, Tk, hs): each query head's key/value head
    logits = t.q @ k.transpose(0, 2, 1) * t.scale  # (nh, Tq, Tk)
    if t.bias is not None:
        logits = logits + t.bias
    allowed = np.ones(logits.shape[-2:], dtype=bool) if result.mask is None else result.mask
    logits = np.where(allowed, logits, -np.inf)
    shifted = np.where(allowed, logits, 0.0) - np.log(logits.shape[-1])
    weights = np.where(allowed, 1.0 / (1.0 + np.exp(-shifted)), 0.0)  # (nh, Tq, Tk)
    heads = weights @ v  # (nh, Tq, hv)
    concat = np.concatenate(list(heads), axis=1)  # (Tq, nh*hv)
    output = concat if w.w_o is None else concat @ w.w_o + (0.0 if w.b_o is None else w.b_o)
    return {"L": logits, "A": weights, "heads": heads, "concat": concat, "Y": output}


def test_the_readme_documents_every_kernel():
    assert undocumented_kernels((ROOT / "README.md").read_text(encoding="utf-8")) == set()


def test_the_readme_check_notices_a_new_kernel(sigmoid):
    assert undocumented_kernels((ROOT / "README.md").read_text(encoding="utf-8")) == {"sigmoid"}


def engine_result(params: dict[str, str]):
    config, messages = config_from_params(params)
    assert messages == [] and config.kernel == "sigmoid"
    return run(config)


def test_the_engine_runs_the_row_and_its_rows_do_not_sum_to_one(sigmoid):
    result = run(MHAConfig(kernel="sigmoid", mask="causal"))
    want = by_hand(result)
    for name, shown in (("A", result.trace.weights), ("heads", result.trace.heads), ("Y", result.trace.output)):
        np.testing.assert_allclose(shown, want[name], rtol=0, atol=1e-12, err_msg=name)
    assert np.abs(result.trace.weights.sum(axis=-1) - 1.0).max() > 0.1  # not a softmax in disguise
    assert (result.trace.weights[:, ~result.mask] == 0).all()


def test_a_link_reads_it_and_its_refusal_says_what_to_change(sigmoid):
    config, messages = config_from_params({"kernel": "sigmoid", "null": "1"})
    assert config.kernel == "sigmoid" and not config.null_key
    assert any(SIGMOID.refuses[0].reason in m for m in messages), messages


def test_step_by_step_shows_every_step_in_the_rows_words_and_the_numbers_by_hand(sigmoid):
    at = open_page(**LINK, head=3)
    want = by_hand(engine_result(LINK))
    headers = step_titles(at)
    assert any(SIGMOID.weights_title in h for h in headers), headers
    assert not any("Softmax" in h for h in headers), headers
    formulas = "\n".join(step_formulas(at))
    assert SIGMOID.weights_tex in formulas, formulas
    jump = next(m.value for m in at.markdown if m.value.startswith("**Jump to:**"))
    assert f"{SIGMOID.short_label}](#kernel_weights)" in jump
    text = "\n".join(m.value for m in at.markdown)
    for words in (SIGMOID.weights_why, SIGMOID.scale_why, SIGMOID.mask_why):  # the kept steps in the row's words
        assert words in text and "softmax" not in words, words
    assert "after the softmax" not in text and "softmax does not saturate" not in text
    assert any("sigmoid kernel's numbers are in its steps above" in c.value for c in at.caption)
    views = step_charts(at)
    allowed = engine_result(LINK).mask
    weights = z_of(views[f"A_3: {SIGMOID.formula}"])
    np.testing.assert_allclose(weights[allowed], want["A"][3][allowed], rtol=0, atol=FIGURE)
    logits = z_of(views["L_3 (scaled, masked logits)"])
    np.testing.assert_allclose(logits[allowed], want["L"][3][allowed], rtol=0, atol=FIGURE)
    mixed = next(z_of(f) for title, f in views.items() if title.startswith("head_3 = A_3 V"))
    np.testing.assert_allclose(mixed, want["heads"][3], rtol=0, atol=FIGURE)


def test_step_by_step_downloads_hold_the_numbers_by_hand(sigmoid, offered):  # noqa: F811
    params = {**LINK, "head": "3"}
    open_downloads(open_page(**params))
    result = engine_result(LINK)
    want = by_hand(result)
    mine = [(r"L_3 \(scaled", want["L"][3]), (r"A_3: ", want["A"][3]), (r"head_3 = A_3 V", want["heads"][3]),
            (r"concat", want["concat"]), (r"Y:", want["Y"])]
    checked = set()
    files = opened(offered)
    for key, (_, data) in files.items():
        if key == "sbs_dl_npz":
            arrays = np.load(io.BytesIO(data), allow_pickle=False)
            np.testing.assert_allclose(arrays["weights"], want["A"], rtol=0, atol=1e-12)
            np.testing.assert_allclose(arrays["output"], want["Y"], rtol=0, atol=1e-12)
            checked.add("npz")
        elif key.endswith("notebook"):
            assert sigmoid_weights.__name__ in data.decode()
            checked.add("notebook")
        else:
            for title, block in blocks(csv(data, 2)).items():
                expected = next((a for p, a in mine if re.match(p, title)), None)
                if expected is not None:
                    checked.add(title.split(" ")[0].rstrip(":"))
                else:
                    expected = step_block(title, result, 3)  # the steps before the kernel's: the engine's arrays
                assert expected is not None, f"{key}: a title this test cannot name: {title}"
                shown = block.to_numpy(dtype=float)[:, : np.shape(expected)[1]]
                finite = np.isfinite(np.asarray(expected, dtype=float))
                np.testing.assert_allclose(shown[finite], np.asarray(expected, dtype=float)[finite], rtol=CSV,
                                           atol=1e-9, err_msg=f"{key}: {title}")
    assert {"npz", "notebook", "L_3", "A_3", "head_3", "concat", "Y"} <= checked, checked


def test_the_notebook_embeds_the_rows_function_runs_and_reproduces_the_numbers(sigmoid, tmp_path):
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from tests.test_notebook import execute
    from ui.state import notebook_link

    link = "?" + "&".join(f"{k}={v.replace(' ', '+')}" for k, v in LINK.items())
    nb, messages = notebook_link.notebook_for_link(link)
    assert messages == []
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "def sigmoid_weights(logits):" in source and "A = sigmoid_weights(L)" in source
    assert f"{SIGMOID.weights_title}" in "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    nb.cells.append(type(nb.cells[0])(cell_type="code", metadata={}, outputs=[], execution_count=None,
                                      source=f"np.savez({str(tmp_path / 'out.npz')!r}, A=A, Y=Y)"))
    execute(nb, tmp_path)  # every assert of the notebook holds
    saved = np.load(tmp_path / "out.npz")
    want = by_hand(engine_result(LINK))
    np.testing.assert_allclose(saved["A"], want["A"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(saved["Y"], want["Y"], rtol=0, atol=1e-12)


def test_heads_names_the_weights_and_their_logits_in_the_rows_words(sigmoid, downloads):  # noqa: F811
    at = app(LINK, opened=(DOWNLOADS,))
    assert not at.exception
    want = by_hand(engine_result(LINK))
    assert switch_labels(at)[0] == SIGMOID.weights_label == "weights (sigmoid)"
    shown = grid_matrices(at)
    assert len(shown) == 4
    for h, z in enumerate(shown):
        drawn = np.isfinite(z)
        np.testing.assert_allclose(z[drawn], want["A"][h][drawn], rtol=0, atol=FIGURE)
    _, frame = csv_frame(downloads, f"{SIGMOID.weights_label} (CSV)")
    for h in range(4):
        np.testing.assert_allclose(frame.loc[f"head {h}"].to_numpy(dtype=float), want["A"][h], rtol=0, atol=1e-8)
    captions = "\n".join(c.value for c in at.caption)
    assert f"Sigmoid attention: {SIGMOID.row_sums} ({SIGMOID.formula})" in captions, captions
    assert "sum to 1" not in captions.replace("not 1", "")


def test_heads_logits_view_is_captioned_from_the_row(sigmoid, downloads):  # noqa: F811
    at = app({**LINK, "view": "logits"})
    assert not at.exception
    want = by_hand(engine_result(LINK))
    captions = [c.value for c in at.caption]
    assert any("sigmoid gives them weight 0" in c for c in captions), captions
    assert not any("softmax gives them" in c for c in captions)
    for h, z in enumerate(grid_matrices(at)):
        drawn = np.isfinite(z)
        np.testing.assert_allclose(z[drawn], want["L"][h][drawn], rtol=0, atol=FIGURE)


def test_compare_draws_it_as_b(sigmoid):
    at = compare_page({**LINK, "kernel": "softmax", "b_kernel": "sigmoid"})
    assert not at.exception, [e.value for e in at.exception]
    want = by_hand(engine_result(LINK))
    a, b = panels(at, "cmp_pair")
    drawn = np.isfinite(b)
    np.testing.assert_allclose(b[drawn], want["A"][0][drawn], rtol=0, atol=FIGURE)
    assert any("sigmoid" in m.value for m in at.markdown)


def test_about_lists_the_row(sigmoid):
    at = open_app("app_pages/about.py")
    table = next(t.value for t in at.table if "rows sum to" in t.value.columns)
    assert table.loc["sigmoid", "name"] == SIGMOID.label
    assert table.loc["sigmoid", "rows sum to"] == SIGMOID.row_sums
    assert table.loc["sigmoid", "cannot combine with"] == "null_key"


def test_flash_attention_refuses_it_and_names_it(sigmoid):
    at = open_app("app_pages/flash.py", kernel="sigmoid")
    errors = "\n".join(e.value for e in at.error)
    assert "sigmoid" in errors and "softmax" in errors, errors


@pytest.mark.parametrize("page", ["seeds", "lessons"])
def test_the_other_pages_open_with_it(sigmoid, page):
    open_app(f"app_pages/{page}.py", kernel="sigmoid")


def test_decoding_decodes_it(sigmoid):
    open_app("app_pages/decoding.py", kernel="sigmoid", mask="causal")
