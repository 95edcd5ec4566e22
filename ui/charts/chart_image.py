"""The camera button of every chart saves an SVG (plotly's client-side ``toImageButtonOptions``), named
after the page and the view, e.g. ``mha-explorer_step_by_step_weights.svg``. Pure: no streamlit."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

FILE_PREFIX = "mha-explorer"


def current_page(url: str | None, pages, default: str) -> str:
    """The page a URL opens, one of ``pages`` (``default`` for the app's root or an unknown path)."""
    path = urlsplit(url or "").path.rstrip("/")
    last = path.rsplit("/", 1)[-1] if path else ""
    return last if last in pages else default


def file_stem(*parts: str) -> str:
    """'mha-explorer_heads_weights': the parts joined by '_', each cut to letters, digits, '-' and '_'."""
    clean = [re.sub(r"[^A-Za-z0-9_-]+", "-", part).strip("-") for part in (FILE_PREFIX, *parts) if part]
    return "_".join(part for part in clean if part)


def svg_button_options(page: str, view: str) -> dict:
    """plotly.js ``toImageButtonOptions``: an SVG of the chart at its size on screen, in a named file."""
    return {"format": "svg", "filename": file_stem(page, view)}
