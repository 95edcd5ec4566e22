"""The notebook of a link (ui/pipeline/notebook.py, read from a link by ui/state/notebook_link.py), executed in a kernel that can import numpy but not this project.

Each generated notebook is run with nbclient; a last cell added here saves the notebook's own arrays,
which are compared with the app's download (``ui.charts.export.npz_bytes``, loaded as a file) to 1e-12: the
notebook's NumPy is independent code, the export is what the app hands out. The embedded weights must be
the engine's bit for bit. A planted wrong step makes the generated notebook fail at that step's assert.
"""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from mha_core.config import run  # noqa: E402
from ui.charts import export, notebook_cells  # noqa: E402
from ui.pipeline import notebook  # noqa: E402
from ui.state import notebook_link  # noqa: E402
from ui.state.urlstate import config_from_params  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-12

# Every mask, every positional scheme, K/V sharing, the null key, cross-attention, every scale rule,
# biases, W_O off, hand-built heads (one with a query bias), a fully masked row, an odd head count for ALiBi.
LINKS = [
    "?tokens=the+cat+sat+on+the+mat",
    "http://127.0.0.1:8501/step_by_step?tokens=a+b+c+d&mask=causal&d_model=8&heads=2",
    "?tokens=a+b+c+d+e&mask=padding&valid_len=3&bias=1",
    "?tokens=a+b+c+d+e&mask=window&window=1&scale=sqrt_t",
    "?tokens=a+b+c&mask=custom&cmask=100.011.111&scale=none",
    "?tokens=a+b+c+d&mask=padding&valid_len=0&null=1",  # every row fully masked, softmax_1
    "?tokens=a+b+c+d+e&pe=1&wo=0",
    "?tokens=a+b+c+d+e&pe=rope&rope_base=100&mask=causal&kv_heads=2",
    "?tokens=a+b+c+d+e+f&pe=alibi&d_model=12&heads=6&mask=causal",
    "?tokens=a+b+c&kv_tokens=x+y+z+w&pe=rope&kv_heads=1&null=1&bias=1&mask=causal",
    "?tokens=a+b+c&kv_tokens=x+y&pe=1&scale=temperature&temperature=0.5&emb=onehot&d_model=8",
    "?tokens=the+cat+sat+on+the+mat&init=first&d_model=8&heads=2",
    "?tokens=the+cat+sat+on+the+mat&init=same&mask=window&window=2",
    "?tokens=a+b+c&d_model=16&heads=5&mask=nonsense",  # repaired, with the app's messages
    "?tokens=a+b+c+d+e+f+g+h+i&d_model=32&heads=4&bias=1&mask=causal",  # weights above MAX_LITERAL: written as hex
]

GUARD = """\
import importlib.util, sys
assert all(importlib.util.find_spec(name) is None for name in ("mha_core", "ui", "content", "bench")), sys.path
"""
SAVE = "np.savez({path!r}, **{{n: globals()[n] for n in {names!r} if n in globals()}})"
SAVED = ("X", "X_kv", "Q", "K", "V", "Q_h", "K_h", "V_h", "P", "theta_q", "theta_k", "B", "M", "S", "s", "L", "A",
         "heads", "concat", "Y", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "E", "E_kv")


def execute(nb, workdir: Path):
    """Run the notebook in a fresh python3 kernel started in ``workdir`` (outside the project)."""
    # IPC sockets in workdir, not TCP ports: kernels started at once by parallel test workers cannot race for a port.
    from jupyter_client import KernelManager

    sockets = tempfile.mkdtemp(prefix="k", dir=workdir)
    manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
    client = nbclient.NotebookClient(nb, km=manager, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return nb


def executed_values(nb, workdir: Path, stem: str, names) -> dict[str, np.ndarray]:
    """Run ``nb`` (guarded: no plotting window) and return the arrays ``names`` it left in its globals, by name."""
    saved = workdir / f"{stem}.npz"
    nb.cells.insert(0, nbformat.v4.new_code_cell(GUARD))
    nb.cells.append(nbformat.v4.new_code_cell(SAVE.format(path=str(saved), names=names)))
    execute(nb, workdir)
    return dict(np.load(saved, allow_pickle=False))


def notebook_against_engine(link: str, workdir: Path, stem: str, names, expected):
    """Run the notebook of ``link`` (a link the app reads without a message) and assert it holds every array
    ``expected(config)`` names, each to TOL; return the config, the executed notebook and its saved arrays."""
    config, messages = config_from_params(dict(parse_qsl(urlsplit(link).query or link.lstrip("?"))))
    assert messages == []
    nb, _ = notebook_link.notebook_for_link(link)
    got = executed_values(nb, workdir, stem, names)
    assert_holds(got, expected(config))
    return config, nb, got


def assert_holds(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    """Every array of ``want`` is in ``got`` under its name, equal to TOL (``assert_close``)."""
    assert set(want) <= set(got), f"the notebook lacks {set(want) - set(got)}"
    for name, value in want.items():
        assert_close(name, got[name], value)


def imported_modules(nb) -> set[str]:
    """Every module a code cell of the notebook imports."""
    found = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.add(node.module)
    return found


def assert_close(name: str, got: np.ndarray, want: np.ndarray) -> None:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    assert np.array_equal(np.isfinite(got), np.isfinite(want)), f"{name}: the -inf cells differ"
    assert np.array_equal(got[~np.isfinite(got)], want[~np.isfinite(want)]), f"{name}: non-finite values differ"
    finite = np.isfinite(want)
    gap = float(np.max(np.abs(got[finite] - want[finite]), initial=0.0))
    assert gap <= TOL, f"{name}: max |notebook - app download| = {gap:.2e} > {TOL}"


def expected_from_download(saved: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What each notebook variable must hold, read from the app's .npz download (export names, export shapes)."""
    q, k, v = saved["q"], saved["k"], saved["v"]  # (nh, Tq, hs), (kv, Tk, hs), (kv, Tk, hs)
    nh, kv = q.shape[0], k.shape[0]
    reads = np.arange(nh) // (nh // kv)  # query head h reads K/V head h // (nh/kv): the export's documented layout
    q_in = saved.get("q_unrotated", q)
    k_in = saved.get("k_unrotated", k)
    tq, tk = q.shape[1], k.shape[1]
    want = {
        "X": saved["x_q"], "X_kv": saved["x_kv"], "E": saved["embeddings"], "E_kv": saved["key_embeddings"],
        "Q": q_in.transpose(1, 0, 2).reshape(tq, -1), "K": k_in.transpose(1, 0, 2).reshape(tk, -1),
        "V": v.transpose(1, 0, 2).reshape(tk, -1),
        "Q_h": q, "K_h": k[reads], "V_h": v[reads],
        "S": saved["scores"], "s": saved["scale"], "L": saved["logits"], "A": saved["weights"],
        "heads": saved["heads"], "concat": saved["concat"], "Y": saved["output"],
        "M": saved["mask"] if "mask" in saved else np.ones((tq, tk), dtype=bool),
        "W_Q": saved["w_q"], "W_K": saved["w_k"], "W_V": saved["w_v"],
    }
    for mine, theirs in (("W_O", "w_o"), ("b_Q", "b_q"), ("b_K", "b_k"), ("b_V", "b_v"), ("b_O", "b_o"),
                         ("B", "bias"), ("theta_q", "q_angles"), ("theta_k", "k_angles")):
        if theirs in saved:
            want[mine] = saved[theirs]
    if "positional" in saved:
        want["P[:T_q]"] = saved["positional"]
    return want


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("notebooks")


@pytest.mark.parametrize("link", LINKS)
def test_the_notebook_of_a_link_reproduces_the_apps_download(link, workdir):
    nb, messages = notebook_link.notebook_for_link(link)
    params = dict(parse_qsl(urlsplit(link).query or link.lstrip("?")))
    config, app_messages = config_from_params(params)
    assert messages == app_messages  # the app's own reader, repairs and messages
    for message in messages:
        assert message in nb.cells[0].source
    assert imported_modules(nb) <= {"numpy", "matplotlib.pyplot"}
    if config.d_model ** 2 > notebook_cells.MAX_LITERAL:
        assert "bytes.fromhex" in nb.cells[5].source  # the weights' cell
    got = executed_values(nb, workdir, f"saved_{LINKS.index(link)}", SAVED)
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    download = dict(np.load(io.BytesIO(export.npz_bytes(run(config))), allow_pickle=False))
    if "P" in got:
        got["P[:T_q]"] = got["P"][: download["x_q"].shape[0]]
    want = expected_from_download(download)
    assert_holds(got, want)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "E", "E_kv"):
        if name in want:
            assert np.array_equal(got[name], want[name]), f"{name} is not the engine's bit for bit"
    # The link back opens the same configuration.
    back = nb.cells[-2].source.split("Back to the app: <", 1)[1].rstrip(">")
    assert config_from_params(dict(parse_qsl(urlsplit(back).query))) == (config, [])


def test_the_steps_are_the_step_by_step_pages_in_its_order_with_its_titles():
    from ui.pipeline.records import step_inputs
    from ui.pipeline.step_kinds import STEP_KINDS
    from ui.pipeline.steps import build_steps

    config, _ = config_from_params({"tokens": "a b c", "pe": "rope", "kv_heads": "2", "mask": "causal"})
    result = run(config)
    titles = [c.source.splitlines()[0] for c in notebook.build_notebook(result, "x").cells
              if c.cell_type == "markdown" and c.source[:3] == "## " and c.source[3].isdigit()]
    page = [STEP_KINDS[s.slug].title for s in build_steps(step_inputs(result), head=1)]
    assert titles == [f"## {n}. {t}" for n, t in enumerate(page, start=1)]
    assert "Rotate queries and keys by position (RoPE)" in page and "Share keys and values among query heads" in page


def _planted(monkeypatch, slug: str, old: str, new: str, table: dict | None = None) -> None:
    """Replace ``old`` by ``new`` in the code of step ``slug``'s cell (``table``: the softmax steps' by default)."""
    table = notebook_cells.STEP_CELLS if table is None else table
    original = table[slug]

    def wrong(ctx):
        cell = original(ctx)
        assert old in cell.code, "the plant no longer matches the template"
        return notebook_cells.Cell(cell.code.replace(old, new), cell.asserts, cell.expected)

    monkeypatch.setitem(table, slug, wrong)


@pytest.mark.parametrize(("slug", "old", "new", "failing"), [
    ("scale", "s = 1 / np.sqrt(hs)", "s = 1 / hs", "L_scaled"),  # scaled by 1/d_k instead of 1/sqrt(d_k)
    ("concat", "heads.transpose(1, 0, 2)", "heads.transpose(0, 1, 2)", "concat"),  # heads stacked the wrong way
    ("softmax", "axis=-1, keepdims=True)  # (nh, T_q, 1): subtracting", "axis=0, keepdims=True)  # (nh, T_q, 1): subtracting", "A"),
])
def test_a_planted_wrong_step_fails_at_its_own_assert(monkeypatch, workdir, slug, old, new, failing):
    _planted(monkeypatch, slug, old, new)
    nb, _ = notebook_link.notebook_for_link("?tokens=a+b+c+d&mask=causal")
    with pytest.raises(nbclient.exceptions.CellExecutionError) as error:
        execute(nb, workdir)
    assert "AssertionError" in str(error.value)
    assert f'app["{failing}"]' in str(error.value)  # the failing cell is that step's assert


def test_the_command_line_writes_a_notebook_and_reports_repairs(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ui.state.notebook_link", "?tokens=a+b&heads=3&d_model=8"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    nb = nbformat.reads(done.stdout, as_version=4)
    nbformat.validate(nb)
    _, messages = config_from_params({"tokens": "a b", "heads": "3", "d_model": "8"})
    assert messages and all(f"note: {m}" in done.stderr for m in messages)  # the app's own messages
    assert json.loads(done.stdout)["metadata"]["kernelspec"]["name"] == "python3"


def test_the_pages_offer_the_notebook_of_their_own_view(downloads):
    from streamlit.testing.v1 import AppTest

    for page, params in (("heads", {"mask": "causal", "heads": "2"}), ("step_by_step", {"pe": "rope", "null": "1"})):
        downloads.clear()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        for name, value in params.items():
            at.query_params[name] = value
        at.session_state["heads_downloads"] = True  # Heads' downloads, drawn only while their section is open
        at.run()
        if page != "heads":
            at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception
        assert any(b.label == "Notebook (.ipynb)" for b in at.get("download_button")), page
        nb = nbformat.reads(downloads["dl_notebook"]().decode(), as_version=4)
        config, _ = config_from_params(params)
        back = nb.cells[-1].source.split("Back to the app: <", 1)[1].rstrip(">")
        assert f"/{page}?" in back or page == "heads"
        assert config_from_params(dict(parse_qsl(urlsplit(back).query)))[0] == config


def test_the_notebook_module_and_the_pack_builder_import_no_streamlit():
    code = ("import sys, ui.state.notebook_link, ui.charts.chart_image, deploy.static_pack; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'streamlit', 'nbformat'}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"  # nbformat too is imported only when a notebook is written


def test_a_scheme_added_to_the_engines_table_gets_a_notebook_that_runs(monkeypatch, workdir):
    from mha_core import positions
    from mha_core.positions import PositionScheme, distance_bias, rope_angles, sinusoidal_positional_encoding

    new = (
        PositionScheme("plain", "plain", "plain", "Nothing."),
        PositionScheme("half_waves", "half", "half", "Half the sinusoidal waves.",
                       add_to_tokens=lambda t, c: 0.5 * sinusoidal_positional_encoding(t, c)),
        PositionScheme("fast_turn", "fast", "fast", "RoPE turning twice as fast.",
                       angles=lambda p, hs, base: 2.0 * rope_angles(p, hs, base)),
        PositionScheme("steep", "steep", "steep", "ALiBi twice as steep.",
                       bias=lambda nh, qp, kp: 2.0 * distance_bias(nh, qp, kp), self_attention_only=True),
    )
    for scheme in new:
        monkeypatch.setitem(positions.SCHEMES, scheme.name, scheme)
    for scheme in new:
        nb, messages = notebook_link.notebook_for_link(f"?tokens=a+b+c+d&pe={scheme.name}&mask=causal")
        assert messages == []
        source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert (f"scheme {scheme.name!r}" in source) == (scheme.name != "plain")  # its numbers embedded
        execute(nb, workdir)  # every assert holds


def test_latent_attention_gets_a_message_not_a_traceback_or_a_notebook_that_skips_its_steps(capsys):
    assert notebook_link.main(["http://host:8501/heads?mla_rank=8&seed=2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the notebook cannot be written for this link yet")
    # in the page's words, not the code's: the steps by their titles, and where to see them
    assert "Compress keys and values to a latent (MLA)" in err and "Step by step" in err
    assert "STEP_CELLS" not in err and "ui.charts" not in err and "mla_latent" not in err
    link = err.split("Step by step for this link: ", 1)[1].strip()
    assert link.startswith("http://host:8501/step_by_step?") and "mla_rank=8" in link and "seed=2" in link


@pytest.mark.parametrize(("query", "offered"), [({"kernel": "linear"}, True), ({"mla_rank": "8"}, False)])
def test_the_heads_page_offers_the_notebook_of_a_kernel_and_says_why_not_for_latent_attention(query, offered):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in query.items():
        at.query_params[name] = value
    at.session_state["heads_downloads"] = True  # the downloads' section, drawn only while open
    at.run()
    assert not at.exception
    assert any(b.label == "Notebook (.ipynb)" for b in at.get("download_button")) == offered
    assert any("not written for latent attention (MLA)" in c.value for c in at.caption) == (not offered)


def test_step_by_step_does_not_send_the_reader_to_itself_for_latent_attention():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["mla_rank"] = "8"
    at.run()
    at.switch_page("app_pages/step_by_step.py").run()
    assert not at.exception
    notes = [c.value for c in at.caption if "not written for latent attention (MLA)" in c.value]
    assert len(notes) == 1 and "Step by step" not in notes[0] and "shown below" in notes[0], notes
