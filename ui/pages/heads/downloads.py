"""Heads' download buttons: each builds its bytes only when clicked, from the run's small frozen config."""

import streamlit as st

from ui.charts import export
from ui.run.compute import result_later


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
