"""One run as a runnable NumPy notebook (.ipynb): the same layer, rebuilt step by step in plain NumPy.

``build_notebook(result, link_back)`` writes a notebook that

- holds the engine's inputs and weights as data (E, W_Q, W_K, W_V, W_O and the biases; the weights
  are not re-drawn from the seed, so they are the app's to the last bit),
- rebuilds every step in plain NumPy, one short cell per step, in the order and with the names of the
  Step-by-step page (the steps and their titles come from ``ui.pipeline.steps``: ``build_steps`` decides which
  optional steps a configuration has, ``STEP_KINDS`` names them),
- follows each step with ``assert np.allclose(...)`` against the engine's numbers for that link,
  embedded in the notebook, so a student who changes a cell sees which assert breaks,
- imports nothing but numpy (matplotlib if installed, for the last cell's picture), and ends with the
  link back to the app view.

A step with no NumPy cell here (a new step kind, a new mask; latent attention today) raises
``NotImplementedError`` naming the steps in the page's words and sending the reader to Step by step, rather than
writing a notebook that silently skips it. A positional scheme of the engine's table with no
NumPy recipe here still gets its notebook: its positions, angles or bias are the app's, embedded as data.
No streamlit and no link reading in here: a link is read, and its notebook asked for, by ``ui.state.notebook_link``
(also the command line).
"""

from __future__ import annotations

import numpy as np

from mha_core.config import MHAConfig, RunResult, run
from ui.charts.notebook_cells import STEP_CELLS, Context, array_source, weights_source
from ui.charts.notebook_kernels import KERNEL_CELLS
from ui.i18n import _
from ui.pipeline.records import step_inputs
from ui.pipeline.step_kinds import STEP_KINDS, StepKind
from ui.pipeline.steps import build_steps

# ---- numbers as Python source --------------------------------------------------------------------


def step_kinds(result: RunResult) -> list[StepKind]:
    """The steps of this run, in the Step-by-step page's order (its own builder decides the optional ones); a step
    a kernel's record makes brings its own kind (its title in the kernel's words)."""
    return [step.kind for step in build_steps(step_inputs(result), head=0)]


# ---- the notebook -------------------------------------------------------------------------------


def _setup_source(ctx: Context) -> str:
    c = ctx.config
    return "\n".join([
        "import numpy as np",
        "",
        f"tokens = {list(c.tokens)!r}  # the queries' sentence",
        f"kv_tokens = {list(c.key_tokens)!r}  # keys and values" + (" (cross-attention)" if c.is_cross else " (the same sentence)"),
        "T_q, T_k = len(tokens), len(kv_tokens)  # tokens",
        f"C = {c.d_model}  # d_model",
        f"nh = {c.n_heads}  # heads",
        f"kv = {c.key_value_heads}  # key/value heads (nh: multi-head; 1: multi-query; between: grouped-query)",
        "hs = C // nh  # head size d_k",
    ])


def _app_source(expected: dict[str, np.ndarray]) -> str:
    lines = ["# What the app computed for this link, step by step: the asserts below compare with these",
             "app = {}"]
    lines += [f'app["{name}"] = {array_source(value)}' for name, value in expected.items()]
    return "\n".join(lines)


DRAW_SOURCE = """\
# Every head's attention weights: matplotlib if it is installed, else printed
try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
if plt is None:
    np.set_printoptions(precision=3, suppress=True, linewidth=120)
    for h in range(nh):
        print(f"head {h}: rows = queries {tokens}, columns = keys {kv_tokens}")
        print(A[h])
else:
    signed = bool((A < 0).any())  # differential attention: weights below 0 too, on a scale centred on 0
    top = float(np.abs(A).max()) if signed else 1.0
    fig, axes = plt.subplots(1, nh, figsize=(3 * nh, 3), squeeze=False)
    for h, ax in enumerate(axes[0]):
        ax.imshow(np.where(M, A[h], np.nan), vmin=-top if signed else 0, vmax=top,
                  cmap="RdBu_r" if signed else "viridis")  # masked cells blank
        ax.set_title(f"head {h}")
        ax.set_xticks(range(T_k), [f"{j}:{w}" for j, w in enumerate(kv_tokens)], rotation=90)
        ax.set_yticks(range(T_q), [f"{i}:{w}" for i, w in enumerate(tokens)])
    plt.tight_layout()
    plt.show()"""


def _title(kind: StepKind, number: int, title: str = "") -> str:
    return f"## {number}. {_(title or kind.title)}\n\n{_(kind.summary)}"


def unwritten_steps_message(slugs: list[str]) -> str:
    """What a teacher is told when a link has steps the notebook cannot rebuild yet (latent attention's)."""
    titles = ", ".join(f"'{_(STEP_KINDS[slug].title)}'" if slug in STEP_KINDS else f"'{slug}'" for slug in slugs)
    return _("the notebook cannot be written for this link yet: it has no NumPy cells for the step(s) {titles}. "
             "Open the link on the app's Step by step page, which shows each of these steps with its numbers.").format(
        titles=titles)


def build_notebook(result: RunResult, link_back: str, messages: list[str] | tuple[str, ...] = ()):
    """The notebook (an ``nbformat.NotebookNode``) of one run: setup, data, one cell per step with its assert,
    the picture, the link back."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook  # ~0.1 s: only when a notebook is made

    ctx = Context(result)
    kinds = step_kinds(result)
    slugs = [kind.slug for kind in kinds]
    makers = {**STEP_CELLS, **KERNEL_CELLS}  # the softmax head's steps and the other kernels'
    missing = [slug for slug in slugs if slug not in makers]
    if missing:  # a developer adds a cell to ui.charts.notebook_cells.STEP_CELLS or notebook_kernels.KERNEL_CELLS
        raise NotImplementedError(unwritten_steps_message(missing))
    steps = [(slug, makers[slug](ctx)) for slug in slugs]
    expected: dict[str, np.ndarray] = {}
    for _slug, cell in steps:
        expected.update(cell.expected)
    c = result.config
    on, off = _("on"), _("off")
    intro = [
        "# " + _("Multi-head attention in plain NumPy, one step per cell"),
        "",
        _("Rebuilt from this view of MHA Explorer: <{link}>").format(link=link_back),
        "",
        _("Configuration: {heads} heads of size {size}, d_model {d_model}, key/value heads {kv}, seed {seed}, init "
          "`{init}`, mask `{mask}`, positions `{pe}`, scale `{scale}`, null key {null_key}, W_O {w_o}, bias "
          "{bias}.").format(heads=c.n_heads, size=c.head_size, d_model=c.d_model, kv=c.key_value_heads, seed=c.seed,
                            init=c.init, mask=c.mask, pe=c.pe, scale=c.scale_rule, null_key=on if c.null_key else off,
                            w_o=on if c.output_projection else off, bias=on if c.bias else off),
        "",
        _("The inputs and weights are the app's, as data (the weights are not re-drawn from the seed). Every step is "
          "followed by an `assert` against the app's numbers for this link: change a step and see which assert "
          "breaks. Shapes: T_q queries, T_k keys, C = d_model, nh heads, kv key/value heads, hs head size; row "
          "vectors, `y = x @ W + b`; a mask is True where a query may attend to a key."),
    ]
    if messages:
        intro += ["", _("The link was read as the app reads it:"), ""] + [f"- {m}" for m in messages]
    cells = [
        new_markdown_cell("\n".join(intro)),
        new_code_cell(_setup_source(ctx)),
        new_markdown_cell("## " + _("The app's numbers") + "\n\n"
                          + _("Every intermediate the app computed for this link, for the checks.")),
        new_code_cell(_app_source(expected)),
        new_markdown_cell("## " + _("The weights") + "\n\n"
                          + _("W_Q, W_K, W_V, W_O (and biases) exactly as the app has them.")),
        new_code_cell(weights_source(ctx)),
    ]
    for number, (kind, (_slug, cell)) in enumerate(zip(kinds, steps, strict=True), start=1):
        cells += [new_markdown_cell(_title(kind, number, cell.title)), new_code_cell(cell.code), new_code_cell(cell.asserts)]
    cells += [
        new_markdown_cell("## " + _("The heads' weights")),
        new_code_cell(DRAW_SOURCE),
        new_markdown_cell(_("Every assert passed: this is the app's layer, number for number.") + "\n\n"
                          + _("Back to the app: <{link}>").format(link=link_back)),
    ]
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    return notebook


def notebook_for_config(config: MHAConfig, link_back: str, messages=()):
    """The notebook of a valid configuration (the engine runs once here)."""
    return build_notebook(run(config), link_back, messages)


def notebook_bytes(config: MHAConfig, link_back: str) -> bytes:
    """The .ipynb file of ``config`` as UTF-8 bytes (for a download button)."""
    import nbformat

    return nbformat.writes(notebook_for_config(config, link_back)).encode("utf-8")
