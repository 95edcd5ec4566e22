"""A component's JavaScript served once per page from ``static/mha/``, not sent inside every element (issue 38).

A components-v2 element carries its module's whole text in each message a run sends: the live chart's 39 KB went
seven times into a Step by step Seed +, making messages of 45–58 KB. The page's websocket listener saw each of those
~15–20 ms after the one before, and the run's last message 90–120 ms after the press; with the loader below in each
element, the run's messages arrived together and the last one 55–80 ms after the press. Side by side in one run
(the servers of both versions up at once, Seed + in turns, medians of 15): 132 → 101 ms to every heatmap redrawn,
against the floor page's 69 ms.

Here the element's module is a few lines that import the real one from the app's static files
(``<base>/app/static/mha/<file>?v=<digest>``, Streamlit's static serving; .streamlit/config.toml) and hand on its
default export. The browser fetches the file once per page; every later element imports it from its module map.

The digest is of every file in ``static/mha/`` together, so a module that imports a neighbour (``./x.js`` plus the
same ``?v=``) never meets an older version of it from the browser's cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

SERVED_DIR = Path(__file__).resolve().parents[2] / "static" / "mha"
URL_PATH = "app/static/mha"  # where Streamlit serves SERVED_DIR, below the app's base path

# The loader: the app's base path is read off Streamlit's own bundle (<base>/static/js/index.*.js), so a proxy's
# path prefix is kept; the named modules are fetched side by side and the first one's default export is the element's.
_LOADER = """const bundle = [...document.querySelectorAll("script[src]")].find(s => /\\/static\\/js\\/index[^/]*\\.js/.test(s.src));
const base = new URL("../../{path}/", bundle ? bundle.src : document.baseURI);
const [served] = await Promise.all({urls}.map(url => import(new URL(url, base).href)));
export default served.default;
"""


@functools.cache
def version() -> str:
    """The digest of every served file (names and bytes): the ``v=`` of their URLs."""
    digest = hashlib.sha256()
    for path in sorted(SERVED_DIR.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def module_url(file: str) -> str:
    """A served file's address relative to ``<base>/app/static/mha/``, with the version."""
    if not (SERVED_DIR / file).is_file():
        raise FileNotFoundError(f"{file} is not in {SERVED_DIR}")
    return f"{file}?v={version()}"


def loader(entry: str, *imports: str) -> str:
    """The inline module of an element: imports ``entry`` (and ``imports``, fetched alongside) from the served files
    and exports ``entry``'s default function."""
    urls = json.dumps([module_url(file) for file in (entry, *imports)])
    return _LOADER.format(path=URL_PATH, urls=urls)
