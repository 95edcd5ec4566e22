"""The notebook of a differential or linear attention link (ui/charts/notebook_kernels.py): executed in a kernel
that can import numpy but not this project, its variables compared with the engine's own intermediates
(``run(config).trace.kernel_parts``), and a planted wrong step fails at its own assert."""

from __future__ import annotations

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from mha_core.config import run  # noqa: E402
from tests.test_notebook import _planted, assert_close, execute, notebook_against_engine  # noqa: E402
from ui.charts import notebook_kernels  # noqa: E402
from ui.state import notebook_link  # noqa: E402

# Both kernels under every mask, RoPE (on each half for differential), K/V sharing, cross-attention, the scale
# rules, a bias scheme other than ALiBi is refused by both, so none here.
LINKS = [
    "?tokens=the+cat+sat+on+the+mat&kernel=differential",
    "?tokens=a+b+c+d+e&kernel=differential&mask=causal&pe=rope&kv_heads=2&d_model=16&heads=4",
    "?tokens=a+b+c+d&kernel=differential&mask=window&window=1&scale=temperature&temperature=0.7&d_model=8&heads=2",
    "?tokens=a+b+c&kv_tokens=x+y+z+w&kernel=differential&pe=1&kv_heads=1&wo=0",
    "?tokens=a+b+c+d+e&kernel=differential&mask=padding&valid_len=0",  # every row masked: weights 0, not NaN
    "?tokens=the+cat+sat+on+the+mat&kernel=linear",
    "?tokens=a+b+c+d+e&kernel=linear&mask=causal&pe=rope&kv_heads=2",  # the recurrent form too
    "?tokens=a+b+c+d&kernel=linear&mask=custom&cmask=1000.1100.1010.1111&bias=1",
    "?tokens=a+b+c&kv_tokens=x+y&kernel=linear&pe=1&d_model=8&heads=4&kv_heads=1",
]
SAVED = ("M", "L1", "L2", "A1", "A2", "lam", "A", "heads", "mixed", "phi_Q", "phi_K", "sim", "z", "S_state",
         "z_state", "recurrent", "Q_h", "K_h", "concat", "Y", "theta_q", "theta_k")


def engine_values(config) -> dict[str, np.ndarray]:
    """What each notebook variable must hold, from the engine's trace of ``config`` (K/V arrays as the query heads
    read them: the notebook shares them out before the kernel's steps)."""
    trace = run(config).trace
    parts = trace.kernel_parts
    reads = np.arange(config.n_heads) // (config.n_heads // config.key_value_heads)  # (nh,)
    want = {"A": trace.weights, "heads": trace.heads, "concat": trace.concat, "Y": trace.output, "Q_h": trace.q,
            "K_h": trace.k[reads]}
    if trace.q_angles is not None:
        want |= {"theta_q": trace.q_angles, "theta_k": trace.k_angles}
    if config.kernel == "differential":
        want |= {"L1": parts.logits1, "L2": parts.logits2, "A1": parts.map1, "A2": parts.map2,
                 "lam": np.asarray(parts.lam), "mixed": parts.normed_heads}
    else:
        want |= {"phi_Q": parts.phi_q, "phi_K": parts.phi_k[reads], "sim": parts.similarity, "z": parts.normaliser}
        if parts.recurrent_heads is not None:
            want |= {"S_state": parts.state, "z_state": parts.state_sum, "recurrent": parts.recurrent_heads}
    return want


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("kernel_notebooks")


@pytest.mark.parametrize("link", LINKS)
def test_the_notebook_of_a_kernel_link_holds_the_engines_intermediates(link, workdir):
    config, nb, got = notebook_against_engine(link, workdir, f"saved_{LINKS.index(link)}", SAVED, engine_values)
    assert config.kernel in ("differential", "linear")
    if config.kernel == "linear" and config.mask == "causal":
        assert_close("recurrent = A @ V", got["recurrent"], run(config).trace.heads)  # the two forms agree
    titles = [c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## ")]
    assert any(("differential" if config.kernel == "differential" else "(linear)") in t for t in titles)


@pytest.mark.parametrize(("link", "slug", "old", "new", "failing"), [
    (LINKS[1], "diff_combine", "A = A1 - lam * A2", "A = A1 + lam * A2", "A"),  # the second map added
    (LINKS[1], "diff_maps", "s = 1 / np.sqrt(h2)", "s = 1 / np.sqrt(hs)", "L1"),  # the whole head's scale
    (LINKS[1], "part_rope", "rotate(Q_h[..., h2:], theta_q)", "Q_h[..., h2:]", "Q_rot"),  # one half not turned
    (LINKS[0], "diff_norm", "axis=-1, keepdims=True", "axis=1, keepdims=True", "mixed"),  # normalised over tokens
    (LINKS[6], "linear_phi", "x + 1.0", "x", "phi_Q"),  # elu without the + 1
    (LINKS[6], "linear_weights", "np.where(M, phi_Q", "np.where(True, phi_Q", "sim"),  # the mask forgotten
    (LINKS[6], "linear_state", "for t in range(T_q):", "for t in range(T_q - 1, -1, -1):", "recurrent"),  # read backwards
])
def test_a_planted_wrong_kernel_step_fails_at_its_own_assert(monkeypatch, workdir, link, slug, old, new, failing):
    _planted(monkeypatch, slug, old, new, notebook_kernels.KERNEL_CELLS)
    nb, _ = notebook_link.notebook_for_link(link)
    with pytest.raises(nbclient.exceptions.CellExecutionError) as error:
        execute(nb, workdir)
    assert "AssertionError" in str(error.value)
    assert f'app["{failing}"]' in str(error.value)  # the failing cell is that step's assert
