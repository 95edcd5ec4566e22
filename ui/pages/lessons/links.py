"""Links the Lessons page hands out: to a configuration in the explorer, and to one lesson."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from mha_core.config import MHAConfig
from ui.state.urlstate import explorer_params, params_from_config, view_params  # noqa: F401 (explorer_params: re-exported)

DEFAULT_PARAMS = params_from_config(MHAConfig())


def short_params(config: MHAConfig, view: Mapping[str, object] | None = None) -> dict[str, str]:
    """Query parameters that restore ``config`` and ``view``, leaving out those equal to the defaults."""
    params = {k: v for k, v in params_from_config(config).items() if DEFAULT_PARAMS.get(k) != v}
    params.update(view_params(view or {}))
    return params


def explorer_query(config: MHAConfig, view: Mapping[str, object] | None = None) -> str:
    """'?tokens=...&mask=causal': the query string of a Heads-page link."""
    return "?" + urlencode(short_params(config, view))


def lesson_params(key: str, present: bool = False) -> dict[str, str]:
    """{'lesson': 'causal'} (and ``present=1`` while presenting): a Lessons-page link's parameters."""
    return {"lesson": key, **({"present": "1"} if present else {})}


def lesson_query(key: str, present: bool = False) -> str:
    """'?lesson=causal': the query string of a Lessons-page link (with ``present=1`` while presenting)."""
    return "?" + urlencode(lesson_params(key, present))


def app_root(page_url: str | None, page_path: str) -> str:
    """The app's root URL from the URL of a page served at ``page_path`` ('' when unknown)."""
    if not page_url:
        return ""
    url = page_url.rstrip("/")
    suffix = "/" + page_path
    return url[: -len(suffix)] if url.endswith(suffix) else url
