"""About: what the app computes and why, the shapes, the conventions, the engine's own source."""

import inspect

import pandas as pd
import streamlit as st

import mha_core
from mha_core.attention import multi_head_attention, scaled_dot_product_attention, softmax
from mha_core.config import LIMITS
from mha_core.positions import SCHEMES
from ui.charts.kernels import kernel_columns, kernel_rows
from ui.i18n import N_, _, listing
from ui.pages.about import glossary_rows
from ui.pipeline.step_kinds import STEP_KINDS
from ui.pipeline.steps import FULLY_MASKED_POLICY
from ui.state import navigation
from ui.widgets.sidebar import sidebar

LIMIT_MEANINGS = {
    "max_tokens": N_("tokens per sentence (queries, and keys/values in cross-attention)"),
    "max_d_model": N_("model width d_model"),
    "max_heads": N_("number of heads"),
    "max_seed": N_("largest seed"),
    "max_temperature": N_("largest temperature"),
}

INTRODUCTION = N_(
    "MHA Explorer runs **one multi-head attention layer** on a sentence you type, with small random (or "
    "hand-built) weights, and shows every number on the way: the embeddings, the queries, keys and values, "
    "each head's scores, logits and weights, the heads' outputs, their concatenation and the output projection. "
    "It is a toy: no training, one layer, no feed-forward block, but exactly the maths of a transformer's "
    "attention."
)
CONVENTIONS = N_("""
- **Row vectors**: a token is a row, a layer is `y = x @ W + b`; `W_Q` has shape (C, nh·hs).
- **Heads are contiguous column blocks**: head *h* owns columns *h·hs* to *(h+1)·hs − 1* of Q, K and V (as in
  torch); splitting is a reshape, not a copy.
- **Mask True = may attend.** torch's `nn.MultiheadAttention` takes a boolean `attn_mask` in the opposite sense
  (True = blocked); `torch.nn.functional.scaled_dot_product_attention` uses ours.
- **Scale** 1/√d_k by default, with d_k = hs the head size (other rules in the sidebar).
- **Token labels carry their position** (`0:the`, `4:the`), so repeated words stay separate.
- Everything is computed in float64 with NumPy; randomness only from `np.random.default_rng(seed)`.
""")


def position_rows() -> list[tuple[str, str, str, str, str]]:
    """One row per positional scheme of the engine's table: link value, label, what it does, where it acts, paper."""
    def acts_on(scheme) -> str:
        parts = [_(name) for name, on in ((N_("the tokens"), scheme.add_to_tokens),
                                          (N_("q and k (turned)"), scheme.angles),
                                          (N_("the logits (a bias)"), scheme.bias)) if on is not None]
        return listing(parts) or _("nothing")

    return [(s.name, _(s.label), _(s.summary), acts_on(s), s.paper or "–") for s in SCHEMES.values()]


def limit_text(value) -> str:
    """64 -> '64', 4294967295 -> '4,294,967,295', 1000.0 -> '1,000'."""
    return f"{value:,}" if isinstance(value, int) else f"{value:,g}"


def pages_section() -> None:
    st.header(_("Pages"))
    for info in navigation.PAGES:
        if info.name != "about":
            st.page_link(navigation.page(info.name), label=info.label, icon=info.icon)


def steps_section() -> None:
    st.header(_("Why each step exists"))
    st.caption(_("The steps of the Step by step page, in order; some appear there only when their option is on in "
                 "the sidebar."))
    steps = [(_(kind.title), _(kind.summary)) for kind in STEP_KINDS.values()]
    st.table(pd.DataFrame(steps, columns=[_("step"), _("why")]).set_index(_("step")))


def positions_section() -> None:
    st.header(_("Positional schemes"))
    st.caption(_("Attention alone cannot tell word order; each scheme tells it one way. Choose one under Inputs → "
                 "Positions (link parameter `pe`)."))
    columns = ["pe", _("scheme"), _("what it does"), _("acts on"), _("from")]
    st.table(pd.DataFrame(position_rows(), columns=columns).set_index("pe"))


def limits_section() -> None:
    st.header(_("Limits"))
    st.markdown(_("So that one request cannot exhaust a small public host, the inputs are capped:"))
    limits = pd.DataFrame(
        [(_(LIMIT_MEANINGS.get(name, name)), limit_text(value)) for name, value in LIMITS.items()],
        columns=[_("what"), _("at most")],
    ).set_index(_("what"))
    st.table(limits)


def source_section() -> None:
    st.header(_("The engine's source"))
    st.markdown(_("This is the code that computes every matrix in the app (`mha_core/attention.py`), shown live:"))
    functions = [multi_head_attention, scaled_dot_product_attention, softmax]
    for tab, function in zip(st.tabs([f.__name__ for f in functions]), functions, strict=True):
        with tab:
            st.code(inspect.getsource(function), language="python", line_numbers=True, wrap_lines=True)


def kernels_section() -> None:
    st.header(_("Attention kernels"))  # read from the engine's table (mha_core.kernels.KERNELS)
    st.caption(_("How a head turns its scores into weights. Choose one under Scores → Attention kernel (link "
                 "parameters `kernel`, `mla_rank`, `mla_rope`)."))
    st.table(pd.DataFrame(kernel_rows(), columns=kernel_columns()).set_index("kernel"))


def main() -> None:
    sidebar()
    st.title(_("About MHA Explorer"))
    st.markdown(_(INTRODUCTION))
    pages_section()
    steps_section()
    positions_section()
    kernels_section()
    st.header(_("Glossary of shapes"))
    glossary = pd.DataFrame([(symbol, _(meaning)) for symbol, meaning in glossary_rows(mha_core.__doc__ or "")], columns=[_("symbol"), _("meaning")])
    st.table(glossary.set_index(_("symbol")))
    st.header(_("Conventions"))
    st.markdown(_(CONVENTIONS))
    st.header(_("Rows with every key masked"))
    st.markdown(_(FULLY_MASKED_POLICY))
    limits_section()
    source_section()


main()
