"""Any link as a runnable NumPy notebook: the link read as its page reads it, then the notebook of its run.

``notebook_for_link(link)`` reads a link (a full URL or its query string) with the app's own reader
(``ui.state.urlstate.config_from_params``: the same repairs and messages as the page), runs the engine once,
and writes the notebook of ``ui.pipeline.notebook``.

A link is read as the page it names: a Heads or Step by step link (or a bare query: Heads) gets its notebook;
a link to another page of the app (FlashAttention, Compare A/B, ...) or to no page is refused (``NotANotebookLink``)
with a message naming the page and what a notebook covers; a parameter the page does not read is a note.
No streamlit in here.

Command line::

    python -m ui.state.notebook_link "<link or query string>" [--app-url URL] > view.ipynb
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

from mha_core.config import MHAConfig
from ui.i18n import N_, _
from ui.pipeline.notebook import notebook_for_config
from ui.state.page_table import PAGE_INFO
from ui.state.settings import VIEW_SETTINGS, model_settings
from ui.state.urlstate import config_from_params, params_from_config

DEFAULT_APP_URL = "http://localhost:8501"
DEFAULT_PAGE = "heads"
NOTEBOOK_PAGES = ("heads", "step_by_step")  # the pages with a "Notebook (.ipynb)" button
# What a notebook holds, for a teacher whose link names another page.
NOTEBOOK_COVERS = N_("a notebook rebuilds one attention layer in plain NumPy, step by step, as the Heads and Step by "
                      "step pages show it (the model settings of the link: sentence, heads, mask, positions, kernel, ...)")
# The parameters the Heads and Step by step pages read: the model's and the view's (which head, which cell, ...).
PAGE_PARAMS = frozenset(row.param for row in (*model_settings(), *VIEW_SETTINGS))


# ---- reading a link ---------------------------------------------------------------------------


class NotANotebookLink(ValueError):
    """A link the notebook cannot rebuild: a page it does not cover, or no page of the app; the message says why."""


@dataclass(frozen=True)
class Link:
    """What a link asks for: the app's root URL, the page and the query parameters (last value wins, as in the app)."""

    app_url: str
    page: str
    params: dict[str, str]
    notes: tuple[str, ...] = ()  # parameters the page does not read: the app ignores them, and so does the notebook


def _page_and_root(path: str, absolute: bool) -> tuple[str, str]:
    """The page a link's path names and the app's root before it. A full address whose last segment is no page
    keeps the whole path as the root (an app served under ``/mha`` opens Heads there); a relative link names a
    page or nothing."""
    path = path.strip("/")
    last = path.rsplit("/", 1)[-1]
    if last in PAGE_INFO:
        return last, path[: len(path) - len(last)].strip("/")
    if absolute or not last:
        return DEFAULT_PAGE, path
    raise NotANotebookLink(_("'{name}' is not a page of the app (its pages: {pages}).").format(
        name=last, pages=", ".join(PAGE_INFO)))


def _refusal(page: str, params: dict[str, str], root: str) -> NotANotebookLink:
    """Why a link to ``page`` gets no notebook, and the Step by step link of its model settings that does."""
    model = {name: value for name, value in params.items() if name in {row.param for row in model_settings()}}
    instead = (_("for the same settings, use {link}").format(link=f"{root.rstrip('/')}/step_by_step?{urlencode(model)}")
               if model else _("open Heads or Step by step with the settings you want and use its Notebook (.ipynb) "
                               "button"))
    return NotANotebookLink(
        _("this is a link to the {page} page, which has no notebook: {covers}. Instead, {instead}.").format(
            page=_(PAGE_INFO[page].title), covers=_(NOTEBOOK_COVERS), instead=instead))


def parse_link(link: str, app_url: str | None = None) -> Link:
    """A full URL (``http://host/step_by_step?tokens=...``), a page and its query (``step_by_step?tokens=...``) or a
    bare query string (``?tokens=...`` or ``tokens=...``: Heads).

    Raises ``NotANotebookLink`` for a link to a page the notebook does not cover (FlashAttention, Compare, ...) or
    to no page of the app. A parameter the page does not read is kept as a note (the app ignores it).
    """
    link = link.strip()
    parts = urlsplit(link)
    absolute = bool(parts.scheme and parts.netloc)
    if absolute:
        path, query = parts.path, parts.query
    else:
        path, query = link.split("?", 1) if "?" in link else ("", link)
    page, root_path = _page_and_root(path, absolute)
    root = f"{parts.scheme}://{parts.netloc}" + (f"/{root_path}" if root_path else "") if absolute else ""
    params = dict(parse_qsl(query, keep_blank_values=True))
    app_root = app_url or root or DEFAULT_APP_URL
    if page not in NOTEBOOK_PAGES:
        raise _refusal(page, params, app_root)
    notes = tuple(_("`{name}` is not a parameter of the {page} page: the app ignores it, and so does this "
                    "notebook.").format(name=name, page=_(PAGE_INFO[page].title))
                  for name in params if name not in PAGE_PARAMS)
    return Link(app_root, page, params, notes)


def view_url(app_url: str, page: str, config: MHAConfig) -> str:
    """The app view of ``config`` on ``page``: what the notebook links back to."""
    page_path = "" if page == DEFAULT_PAGE else page
    return f"{app_url.rstrip('/')}/{page_path}?{urlencode(params_from_config(config))}"


def notebook_for_link(link: str, app_url: str | None = None) -> tuple[object, list[str]]:
    """Read ``link`` as the app does (repairs and messages included) and write its notebook."""
    parsed = parse_link(link, app_url)
    config, repairs = config_from_params(parsed.params)
    messages = [*parsed.notes, *repairs]
    link_back = view_url(parsed.app_url, parsed.page, config)
    return notebook_for_config(config, link_back, messages), messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ui.state.notebook_link", description=__doc__.split("\n\n")[0])
    parser.add_argument("link", help="an app link (http://host/step_by_step?tokens=...) or its query string")
    parser.add_argument("--app-url", default=None, help=f"the app's address for the link back (default: the link's, "
                        f"else {DEFAULT_APP_URL})")
    args = parser.parse_args(argv)
    import nbformat

    try:
        notebook, messages = notebook_for_link(args.link, args.app_url)
    except NotANotebookLink as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except NotImplementedError as err:
        parsed = parse_link(args.link, args.app_url)
        step_by_step = view_url(parsed.app_url or DEFAULT_APP_URL, "step_by_step", config_from_params(parsed.params)[0])
        print(f"error: {err}\nStep by step for this link: {step_by_step}", file=sys.stderr)
        return 2
    for message in messages:
        print(f"note: {message}", file=sys.stderr)
    sys.stdout.write(nbformat.writes(notebook))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
