"""The "Notebook (.ipynb)" download button of Heads and Step by step (the notebook itself: ``ui.pipeline.notebook``)."""

from __future__ import annotations

import streamlit as st

from mha_core.config import MHAConfig
from ui.i18n import _
from ui.pipeline.notebook import notebook_bytes
from ui.state.notebook_link import DEFAULT_APP_URL, view_url


def mla_note(page: str) -> str:
    """Why there is no notebook for latent attention, and where its steps are instead (as seen from ``page``)."""
    if page == "step_by_step":
        return _("Notebook (.ipynb): not written for latent attention (MLA) yet; every step, latent attention's "
                 "included, is shown below with its numbers.")
    return _("Notebook (.ipynb): not written for latent attention (MLA) yet; Step by step shows each of its steps "
             "with its numbers.")


def notebook_button(config: MHAConfig, page: str, key: str = "dl_notebook") -> None:
    """A download of this view as a runnable NumPy notebook, built only when clicked.

    The callable keeps the frozen config and the link, never the arrays (see ``ui.run.compute.result_later``).
    The notebook writes softmax, differential and linear heads; for latent attention (MLA) the page says so instead.
    """
    if config.mla_rank:
        st.caption(mla_note(page))
        return
    page_url = (st.context.url or DEFAULT_APP_URL).split("?", 1)[0].rstrip("/")
    root = page_url[: -len(page)].rstrip("/") if page_url.endswith("/" + page) else page_url
    link_back = view_url(root, page, config)

    def build() -> bytes:
        return notebook_bytes(config, link_back)

    st.download_button(_("Notebook (.ipynb)"), data=build, file_name=f"mha_{page}.ipynb",
                       mime="application/x-ipynb+json", key=key, on_click="ignore", icon=":material/download:",
                       help=_("This view rebuilt step by step in plain NumPy, each step checked against the app's numbers."))
