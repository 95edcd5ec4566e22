"""Heads' download buttons: each builds its bytes only when clicked, from the run's small frozen config.

The page's own downloads (every figure's table, every intermediate, the notebook) stand together in one section at
the end, drawn only while it is open: eight buttons re-sent on every rerun were a fifth of the page's messages
(issue 38). Take it apart keeps its own, inside its own lazy section.
"""

import streamlit as st

from ui.charts import export, tables
from ui.charts.head_panels import panel_titles, shown_matrices, shown_view, with_averages
from ui.charts.labels import concat_columns
from ui.i18n import N_, _
from ui.run.compute import result_later
from ui.widgets.notebook_button import notebook_button

DOWNLOADS_TITLE = N_("Download everything")


def download(label: str, data, file_name: str, mime: str, key: str) -> None:
    """A download button whose bytes ``data()`` builds only when it is clicked."""
    st.download_button(
        label, data=data, file_name=file_name, mime=mime, key=key, on_click="ignore", icon=":material/download:"
    )


def download_csv(label: str, config, table, file_name: str, key: str) -> None:
    """A download button for one table as CSV: ``table(result)`` builds it from ``config``'s result on click.

    The button's callable lives as long as the session (closed tabs too, for server.disconnectedSessionTTL):
    it keeps the small frozen config, never the arrays (issue 15: ~11 MB per session at the caps).
    """
    download(label, lambda: export.csv_bytes(table(result_later(config))), file_name, "text/csv", key)


def grid_frame(result, view: str, average: bool):
    """The matrices of the heads figure (plus the average panels) as one long table."""
    matrices, titles = shown_matrices(result.trace, view), panel_titles(result.trace, view)
    if average:
        matrices, titles = with_averages(matrices, titles, shown_view(result.trace, view).panel_names)
    return tables.stacked_frame(matrices, titles, result.query_labels, result.key_labels)


def downloads_section(result, view: str, average: bool) -> None:
    """Every download of the page's figures and of the whole run, in one section drawn only while it is open."""
    section = st.expander(f"**{_(DOWNLOADS_TITLE)}**", key="heads_downloads", on_change="rerun")
    if section.open:
        with section:
            download_buttons(result, view, average)


def download_buttons(result, view: str, average: bool) -> None:
    """The heads figure's table, the diagnostics, the similarity, the concatenation and the output (W_O on) as
    CSV; every intermediate as .npz and .json; the notebook. The callables keep the config, not the arrays."""
    config, shown = result.config, shown_view(result.trace, view)
    columns = concat_columns(result.trace.concat.shape[1], result.trace.n_heads)
    out_cols = [str(c) for c in range(result.trace.output.shape[1])]
    with st.container(horizontal=True, wrap=True):
        download_csv(_("{label} (CSV)").format(label=_(shown.label)), config, lambda r: grid_frame(r, view, average),
                     shown.file_name, "dl_grid")
        download_csv(_("Head diagnostics (CSV)"), config,
                     lambda r: tables.head_summary_frame(r.trace, cross=r.config.is_cross), "head_diagnostics.csv",
                     "dl_summary")
        download_csv(_("Head similarity (CSV)"), config, lambda r: tables.similarity_frame(r.trace),
                     "head_similarity.csv", "dl_similarity")
        download_csv(_("Concatenation (CSV)"), config,
                     lambda r: tables.matrix_frame(r.trace.concat, r.query_labels, columns), "concat.csv", "dl_concat")
        if config.output_projection:
            download_csv(_("Output after W_O (CSV)"), config,
                         lambda r: tables.matrix_frame(r.trace.output, r.query_labels, out_cols), "output.csv",
                         "dl_output")
        download(_("All intermediates (.npz)"), lambda: export.npz_bytes(result_later(config)), "mha_trace.npz",
                 "application/octet-stream", "dl_npz")
        download(_("All intermediates (.json)"), lambda: export.json_bytes(result_later(config)), "mha_trace.json",
                 "application/json", "dl_json")
        notebook_button(config, "heads")
    st.caption(
        _("Inputs, W_Q/W_K/W_V/W_O, mask, Q, K, V, scores, logits, weights, head outputs, concat, output. "
          "In the JSON, masked logits (−∞) are written as null (its README key says so).")
    )
