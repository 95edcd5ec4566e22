"""The notebook of a gated-attention or learned-sinks link (ui/charts/notebook_gated.py): executed in a kernel that
can import numpy but not this project, its variables compared with the engine's intermediates
(``run(config).trace.kernel_parts``), and a planted wrong step fails at its own assert."""

from __future__ import annotations

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

import nbclient  # noqa: E402

from mha_core.config import run  # noqa: E402
from tests.test_notebook import _planted, execute, notebook_against_engine  # noqa: E402
from ui.charts import notebook_kernels  # noqa: E402
from ui.state import notebook_link  # noqa: E402

LINKS = [
    "?tokens=the+cat+sat+on+the+mat&kernel=gated&mask=causal",
    "?tokens=a+b+c+d+e&kernel=gated&mask=causal&pe=rope&kv_heads=2&d_model=16&heads=4",
    "?tokens=a+b+c&kv_tokens=x+y+z+w&kernel=gated&pe=1&wo=0",  # cross-attention: the gate reads the queries' X
    "?tokens=the+cat+sat+on+the+mat&kernel=sink&mask=causal",
    "?tokens=a+b+c+d+e&kernel=sink&mask=causal&pe=alibi&kv_heads=2",
    "?tokens=a+b+c+d&kernel=sink&mask=padding&valid_len=0",  # every key masked: the sink takes every row whole
]
SAVED = ("A", "heads", "G_h", "mixed", "opening", "sink_share", "concat", "Y")


def engine_values(config) -> dict[str, np.ndarray]:
    trace = run(config).trace
    parts = trace.kernel_parts
    want = {"A": trace.weights, "heads": trace.heads, "concat": trace.concat, "Y": trace.output}
    if config.kernel == "gated":
        return want | {"G_h": parts.gate, "mixed": parts.gated_heads, "opening": parts.opening}
    return want | {"sink_share": parts.sink_share}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("gated_sinks_notebooks")


@pytest.mark.parametrize("link", LINKS)
def test_the_notebook_holds_the_engines_gate_and_sinks(link, workdir):
    config, _, got = notebook_against_engine(link, workdir, f"saved_{LINKS.index(link)}", SAVED, engine_values)
    if config.mask == "padding":
        assert np.all(got["sink_share"] == 1.0)


@pytest.mark.parametrize(("link", "slug", "old", "new", "failing"), [
    (LINKS[1], "output_gate", "G.reshape(T_q, nh, hs).transpose(1, 0, 2)", "G.reshape(T_q, hs, nh).transpose(2, 0, 1)",
     "G_h"),  # the gate's features read across heads: a wrong gate axis
    (LINKS[3], "sink_weights", "A = P[..., :-1]", "A = P[..., :-1] / P[..., :-1].sum(axis=-1, keepdims=True)",
     "A"),  # the sink's share handed back to the keys
])
def test_a_planted_wrong_step_fails_at_its_own_assert(monkeypatch, workdir, link, slug, old, new, failing):
    _planted(monkeypatch, slug, old, new, notebook_kernels.KERNEL_CELLS)
    nb, _ = notebook_link.notebook_for_link(link)
    with pytest.raises(nbclient.exceptions.CellExecutionError) as error:
        execute(nb, workdir)
    assert "AssertionError" in str(error.value)
    assert f'app["{failing}"]' in str(error.value)
