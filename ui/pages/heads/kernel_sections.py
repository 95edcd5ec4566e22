"""A kernel's own sections on the Heads page, drawn by the slugs its row names (``Kernel.heads_sections``).

- ``sparse_keep``: sparse selection (MoBA, DSA): for every query row, the keys it keeps, its weights over them, the
  dense row beside them and ||o_sparse − o_dense|| per head and query, all from the engine's ``kernel_parts`` (the
  same builder as Step by step's step, ``ui.pipeline.kernel_steps_sparse.sparse_keep_step``);
- ``gate_opening``, ``sink_share``: gated attention's gate and learned sinks' share (``kernel_views.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ui.i18n import _
from ui.pages.heads.kernel_views import gate_opening_view, sink_share_view
from ui.pipeline.kernel_steps_sparse import sparse_keep_step
from ui.pipeline.records import step_inputs
from ui.widgets.step_views import show_panels


def sparse_keep_section(result) -> None:
    st.subheader(_("Which keys each query keeps, beside the dense row"))
    n_heads = result.trace.n_heads
    head = st.radio(_("Head"), range(n_heads), format_func=lambda h: _("head {h}").format(h=h), horizontal=True,
                    key="heads_sparse_head")
    step = sparse_keep_step(step_inputs(result), head, None)
    st.markdown(step.why)
    show_panels(step.panels, "heads_sparse")


KERNEL_SECTIONS: dict[str, Callable[[object], None]] = {
    "sparse_keep": sparse_keep_section,
    "gate_opening": gate_opening_view,  # gated attention (kernel_views.py)
    "sink_share": sink_share_view,  # learned sinks (kernel_views.py)
}


def kernel_sections(result, kernel) -> None:
    """The sections ``kernel`` (a ``Kernel`` row) names for the Heads page, in its order."""
    for slug in kernel.heads_sections:
        KERNEL_SECTIONS[slug](result)
