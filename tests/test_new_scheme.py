"""A fifth positional scheme is one row of ``mha_core.positions.SCHEMES``: every page that offers schemes takes it.

Two rows are registered, one test at a time (``monkeypatch``), with no other edit:

- PLAIN does nothing ("none, labelled differently"), so every number it gives must be the engine's numbers with
  no positions; it reaches the sidebar, the link, Step by step, Decoding, Compare and About;
- KERPLE-log (Chi et al. 2022, with ALiBi's slopes): a bias −m_h·log(1 + |i − j|) on the logits, a scheme that
  differs in kind from PLAIN. Every page and download is opened with it; each label and formula must come from
  its row (never ALiBi's words), each number must equal the bias and weights computed by hand below, and the
  kernels that take no bias (linear, differential) must refuse it with a message and fall back.

The README check notices that the README does not document a new row; a counting test holds that no code outside
``mha_core/positions.py`` compares a scheme's name with a string.
"""

from __future__ import annotations

import ast
import io
import re
from dataclasses import replace
from pathlib import Path

import nbformat
import numpy as np
import pytest

from mha_core import positions
from mha_core.attention import AttentionWeights, multi_head_attention
from mha_core.config import MHAConfig, run
from mha_core.decoder import decode_run, decoder_config
from mha_core.flash import flash_of_run
from mha_core.positions import ALIBI_SLOPES_SOURCE, PositionScheme, SchemeAt, alibi_slopes
from tests.address_bar import address
from tests.shown_steps import open_downloads, step_formulas, step_titles
from tests.sidebar_controls import control
from tests.test_app_compare import compare_page
from tests.test_app_compare import panels as compare_panels
from tests.test_app_decoding import open_page
from tests.test_app_heads import grid_matrices
from tests.test_app_step_by_step import charts, table_with_index, z_of
from tests.test_stated_numbers_downloads import blocks, csv, offered, opened  # noqa: F401 (offered: a fixture)
from ui.pipeline.drill_down import BIAS_ROW
from ui.state import notebook_link
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
    box = control(at, "w_pe")
    assert PLAIN.label in box.options
    box.set_value("plain").run()
    assert not at.exception
    assert at.session_state["config"].pe == "plain"
    assert address(at)["pe"] in ("plain", ["plain"])
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
    assert address(at)["b_pe"] in ("plain", ["plain"])


def test_about_lists_the_new_scheme(plain):
    at = open_page("app_pages/about.py")
    assert not at.exception
    schemes = next(t.value for t in at.table if "acts on" in t.value.columns)
    assert list(schemes.index) == list(positions.SCHEMES)
    assert schemes.loc["plain", "scheme"] == PLAIN.label and schemes.loc["plain", "acts on"] == "nothing"


# ---- a scheme with a bias: KERPLE-log ---------------------------------------------------------------------------


def kerple_log_bias(n_heads: int, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
    """KERPLE-log's bias with ALiBi's slopes: −m_h·log(1 + |i − j|), (nh,), (Tq,), (Tk,) -> (nh, Tq, Tk)."""
    distance = np.abs(np.subtract.outer(q_positions, k_positions))  # (Tq, Tk)
    return -alibi_slopes(n_heads)[:, None, None] * np.log1p(distance)  # (nh, Tq, Tk)


def _kerple_formula(at: SchemeAt) -> str:
    slope = float(alibi_slopes(at.n_heads)[at.head])
    return rf"L_{{ij}} = S_{{ij}}\, s - m_{{{at.head}}} \log(1 + |i - j|),\qquad m_{{{at.head}}} = {slope:.4g}"


# The row as a developer adds it to mha_core/positions.py: a function and one record, every word its own.
KERPLE = PositionScheme(
    "kerple_log", "KERPLE-log (log-distance penalty)", "KERPLE-log",
    "−m_h log(1 + |i − j|) is added to head h's logits: a penalty that grows with the distance, ever more slowly.",
    bias=kerple_log_bias, self_attention_only=True, paper="Chi et al. 2022",
    step_title="Add the KERPLE-log penalty", bias_text="−m·log(1 + |i − j|)", formula=_kerple_formula,
    why=lambda at: (f"KERPLE-log subtracts m·log(1 + |i − j|) from each logit: far keys are penalised, but less "
                    f"and less for each further step. Head {at.head} uses m = {alibi_slopes(at.n_heads)[at.head]:.4g}."),
    numpy_source=lambda at: ("# KERPLE-log: ALiBi's slopes m_h, and the penalty -m_h log(1 + |i - j|)\n"
                             + ALIBI_SLOPES_SOURCE
                             + "B = -m[:, None, None] * np.log1p(np.abs(np.arange(T_q)[:, None] - np.arange(T_k)[None, :]))"
                             "  # (nh, T_q, T_k)"),
)
PARAMS = {"pe": "kerple_log", "mask": "causal"}  # the default sentence (6 tokens), d_model 16, 4 heads of size 4
SLOPES = np.array([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])  # ALiBi's slopes for 4 heads: 2^(-8k/4), k = 1..4
FIGURE = 1e-6  # figures travel as float32


@pytest.fixture
def kerple(monkeypatch):
    monkeypatch.setitem(positions.SCHEMES, KERPLE.name, KERPLE)
    return KERPLE


def by_hand(config: MHAConfig) -> dict[str, np.ndarray]:
    """The bias, logits, weights and heads of a KERPLE-log layer, from its inputs and weights with plain NumPy."""
    result = run(replace(config, pe="none"))  # the same embeddings and weights; KERPLE-log adds nothing to them
    w, x = result.weights, result.embeddings  # x (T, C): no positions are added to the tokens
    t, nh = x.shape[0], config.n_heads
    hs = x.shape[1] // nh
    q = (x @ w.w_q).reshape(t, nh, hs).transpose(1, 0, 2)  # (nh, T, hs)
    k = (x @ w.w_k).reshape(t, nh, hs).transpose(1, 0, 2)  # (nh, T, hs)
    v = (x @ w.w_v).reshape(t, nh, hs).transpose(1, 0, 2)  # (nh, T, hs)
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    bias = -SLOPES[:nh, None, None] * np.log(1.0 + np.abs(i - j))  # (nh, T, T)
    logits = np.where(j <= i, q @ k.transpose(0, 2, 1) / np.sqrt(hs) + bias, -np.inf)  # causal
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)  # (nh, T, T)
    return {"bias": bias, "before_mask": q @ k.transpose(0, 2, 1) / np.sqrt(hs) + bias, "logits": logits,
            "weights": weights, "heads": weights @ v}


HAND = by_hand(MHAConfig(mask="causal"))
CAUSAL = np.tri(6, dtype=bool)


def test_the_engine_gives_the_hand_computed_bias_and_weights(kerple):
    trace = run(MHAConfig(pe="kerple_log", mask="causal")).trace
    np.testing.assert_allclose(trace.bias, HAND["bias"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(trace.weights, HAND["weights"], rtol=0, atol=1e-12)
    assert np.abs(HAND["bias"] - run(MHAConfig(pe="alibi", mask="causal")).trace.bias).max() > 0.1  # not ALiBi's


def test_the_heads_page_draws_the_hand_computed_weights(kerple):
    at = open_page("app_pages/heads.py", **PARAMS)
    for h, z in enumerate(grid_matrices(at)):
        np.testing.assert_allclose(np.where(CAUSAL, z, 0.0), HAND["weights"][h], rtol=0, atol=FIGURE)


def _words(at) -> str:
    """Every title, formula and sentence of a page."""
    return "\n".join(str(e.value) for e in (*at.title, *at.header, *at.subheader, *at.markdown, *at.latex,
                                             *at.caption, *at.info, *at.warning, *at.error))


def test_step_by_step_titles_its_step_from_the_row_and_shows_the_hand_computed_numbers(kerple, offered):  # noqa: F811
    head, i, j = 2, 4, 1  # a cell three tokens apart: log(4), not ALiBi's 3
    at = open_downloads(open_page("app_pages/step_by_step.py", **PARAMS, head=head, qi=i, kj=j))
    headings = step_titles(at)
    assert any(re.fullmatch(rf"\d+\. {re.escape(KERPLE.step_title)}", t) for t in headings), headings
    words = _words(at)
    assert "ALiBi" not in words and "|i - j|," not in words  # no word of another scheme
    assert KERPLE.formula(SchemeAt(head, 4, 4)) in step_formulas(at)
    assert f"m_{{{head}}} = {SLOPES[head]:.4g}" in KERPLE.formula(SchemeAt(head, 4, 4))  # the slope by hand
    assert KERPLE.why(SchemeAt(head, 4, 4)) in words
    views = charts(at)
    bias_title = f"B_{head} = {KERPLE.bias_text} (KERPLE-log bias)"
    np.testing.assert_allclose(z_of(views[bias_title]), HAND["bias"][head], rtol=0, atol=FIGURE)
    np.testing.assert_allclose(z_of(views[f"S_{head} × scale + B_{head}"]), HAND["before_mask"][head], rtol=0,
                               atol=FIGURE)
    weights = next(v for t, v in views.items() if t.startswith(f"A_{head} = softmax"))
    np.testing.assert_allclose(np.where(CAUSAL, z_of(weights), 0.0), HAND["weights"][head], rtol=0, atol=FIGURE)
    # the drill-down: the bias of cell (i, j) and the scheme's words
    scores = table_with_index(at, BIAS_ROW)
    assert abs(float(scores.loc[BIAS_ROW].iloc[0]) - HAND["bias"][head, i, j]) <= 1e-6
    assert f"**KERPLE-log**: the bias b = {KERPLE.bias_text} = {HAND['bias'][head, i, j]:.4f}" in words
    # every download of the page
    files = opened(offered)
    arrays = np.load(io.BytesIO(files["sbs_dl_npz"][1]), allow_pickle=False)
    np.testing.assert_allclose(arrays["bias"], HAND["bias"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(arrays["weights"], HAND["weights"], rtol=0, atol=1e-12)
    hand = {bias_title: HAND["bias"][head], f"S_{head} × scale + B_{head}": HAND["before_mask"][head]}
    checked = set()
    for key in (key for key in files if key.startswith("sbs_dl_") and key != "sbs_dl_npz"):
        for title, block in blocks(csv(files[key][1], 2)).items():
            if title in hand:
                np.testing.assert_allclose(block.to_numpy(dtype=float), hand[title], rtol=1e-7, atol=1e-9)
                checked.add(title)
    assert checked == set(hand)  # the bias step's CSV holds both matrices, the bias under the scheme's title
    (book,) = [data for key, (_, data) in files.items() if key.endswith("notebook")]
    namespace = _executed(book)
    np.testing.assert_allclose(namespace["B"], HAND["bias"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(namespace["A"], HAND["weights"], rtol=0, atol=1e-12)


def _executed(book: bytes | str) -> dict:
    """Run a notebook's code cells in plain Python (its own asserts against the app's numbers included)."""
    nb = nbformat.reads(book if isinstance(book, str) else book.decode("utf-8"), as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and "matplotlib" not in cell.source:
            exec(compile(cell.source, "<notebook cell>", "exec"), namespace)  # noqa: S102
    return namespace


def test_its_notebook_rebuilds_the_bias_with_the_rows_own_numpy_lines(kerple):
    nb, messages = notebook_link.notebook_for_link("?pe=kerple_log&mask=causal")
    assert messages == []
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert KERPLE.numpy_source(SchemeAt(0, 4, 4)) in source and "np.log1p" in source  # not the app's B embedded
    titles = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## ")]
    assert any(t.endswith(KERPLE.step_title) for t in titles), titles
    namespace = _executed(nbformat.writes(nb))
    np.testing.assert_allclose(namespace["B"], HAND["bias"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(namespace["A"], HAND["weights"], rtol=0, atol=1e-12)


def test_decoding_it_gives_the_hand_computed_causal_rows(kerple):
    at = open_page("app_pages/decoding.py", **PARAMS)
    last = len(at.session_state["config"].tokens) - 1
    at.slider(key="w_dec_step").set_value(last).run()
    assert not at.exception
    views = charts(at)
    decoded = next(v for t, v in views.items() if t.startswith(f"Decoded rows 0..{last}"))
    np.testing.assert_allclose(np.where(CAUSAL, z_of(decoded), 0.0), HAND["weights"][0], rtol=0, atol=FIGURE)
    np.testing.assert_allclose(np.where(CAUSAL, z_of(views[KERPLE.label]), 0.0), HAND["weights"][0], rtol=0,
                               atol=FIGURE)
    steps = decode_run(run(decoder_config(MHAConfig(pe="kerple_log"))))
    for t, step in enumerate(steps):
        np.testing.assert_allclose(step.weights[:, 0], HAND["weights"][:, t, : t + 1], rtol=0, atol=1e-12)


def test_compare_draws_it_as_b(kerple):
    at = compare_page({"b_pe": "kerple_log", "mask": "causal"})
    assert not at.exception
    b = compare_panels(at, "cmp_pair")[1]
    np.testing.assert_allclose(np.where(CAUSAL, b, 0.0), HAND["weights"][0], rtol=0, atol=FIGURE)


def test_about_lists_it_by_what_it_does(kerple):
    at = open_page("app_pages/about.py")
    schemes = next(t.value for t in at.table if "acts on" in t.value.columns)
    assert schemes.loc["kerple_log", "scheme"] == KERPLE.label
    assert schemes.loc["kerple_log", "acts on"] == "the logits (a bias)"


def test_flash_attention_names_its_rule_by_the_row_and_tiles_the_hand_computed_heads(kerple):
    at = open_page("app_pages/flash.py", **PARAMS, br=2, bc=3)
    rules = next(f.value for f in at.dataframe if "setting" in f.value.columns)
    assert "KERPLE-log: a bias on the logits" in list(rules["setting"])
    assert "positional scheme: KERPLE-log" in list(rules["setting"])
    assert "ALiBi" not in " ".join(rules["setting"]) + " ".join(rules["in the kernel"])
    result = run(MHAConfig(pe="kerple_log", mask="causal"))
    for head in range(4):
        tiled = flash_of_run(result, head, 2, 3)
        np.testing.assert_allclose(tiled.output, HAND["heads"][head], rtol=0, atol=1e-12)


@pytest.mark.parametrize("kernel", ["linear", "differential"])
def test_a_kernel_without_a_bias_refuses_it_with_a_message_and_falls_back(kerple, kernel):
    config, messages = config_from_params({"kernel": kernel, **PARAMS})
    assert config.kernel == kernel and config.pe == "none"
    assert any("adds a bias" in m for m in messages), messages
    at = open_page("app_pages/heads.py", kernel=kernel, **PARAMS)
    assert at.session_state["config"].pe == "none"
    assert "adds a bias" in _words(at)
    for h, z in enumerate(grid_matrices(at)):
        expected = run(MHAConfig(kernel=kernel, mask="causal")).trace.weights[h]
        np.testing.assert_allclose(np.where(CAUSAL, z, 0.0), expected, rtol=0, atol=FIGURE)
    eye = np.eye(8)
    with pytest.raises(ValueError, match="adds a bias"):  # the engine refuses too, before any shape breaks
        multi_head_attention(np.ones((3, 8)), AttentionWeights(eye, eye, eye), 2, pe="kerple_log", kernel=kernel)


# ---- no branch on a scheme's name outside its table ------------------------------------------------------------

CODE = ("ui", "app_pages", "mha_core", "content", "app.py")
PE_NAME = re.compile(r"(^|_)pe$")  # pe, b_pe, ...


def _is_scheme_name(node: ast.AST) -> bool:
    """``pe``, ``config.pe``, ``getattr(c, "pe", ...)``, ``scheme.name``: an expression that holds a scheme's name."""
    if isinstance(node, ast.Name):
        return bool(PE_NAME.search(node.id))
    if isinstance(node, ast.Attribute):
        owner = node.value.id if isinstance(node.value, ast.Name) else getattr(node.value, "attr", "")
        return bool(PE_NAME.search(node.attr)) or (node.attr == "name" and ("scheme" in owner or owner == "positions"))
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "pe")


def _is_text(node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_text(e) for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def scheme_name_branches(root: Path) -> list[str]:
    """Every comparison of a scheme's name with a string outside mha_core/positions.py, as 'file:line: code'."""
    found = []
    for top in (top for top in CODE if (root / top).exists()):
        for path in sorted((root / top).rglob("*.py")) if (root / top).is_dir() else [root / top]:
            name = path.relative_to(root).as_posix()
            if name == "mha_core/positions.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
                if any(map(_is_scheme_name, sides)) and any(map(_is_text, sides)):
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_outside_the_table_compares_a_schemes_name_with_a_string():
    assert all((ROOT / top).exists() for top in CODE)  # a renamed folder is not silently left out
    assert scheme_name_branches(ROOT) == []


def test_the_count_sees_a_branch_on_a_schemes_name(tmp_path):
    (tmp_path / "ui").mkdir()
    (tmp_path / "ui" / "page.py").write_text('def title(config, c):\n'
                                             '    if config.pe != "alibi" or getattr(c, "pe", "none") == "rope":\n'
                                             '        return pe in ("rope", "alibi")\n')
    found = [line.split(": ", 1)[0] for line in scheme_name_branches(tmp_path)]
    assert found == ["ui/page.py:2", "ui/page.py:2", "ui/page.py:3"]  # three comparisons, two on one line
