"""The shareable configuration <-> URL query parameters, as pure functions (no streamlit).

Both directions walk the settings tables of ``ui/state/settings.py``. ``config_from_params`` never
raises: every value it cannot use becomes a message and falls back to something valid, so a
mistyped link still opens a working page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mha_core.config import CHECKS, MHAConfig
from mha_core.inputs import tokenize
from ui.i18n import _
from ui.state.settings import (
    ASKED,
    VIEW_DEFAULTS,
    VIEW_SETTINGS,
    Setting,
    Values,
    config_of,
    fit_sentence,
    key_tokens,
    model_settings,
    values_of,
)

DEFAULT = MHAConfig()
MAX_REPAIRS = 3 * len(CHECKS)  # each fix removes a problem; a few fixes may uncover one more each


# A reader turns a link's text for one row into its value; "" means "use the default" except where
# an empty value is itself worth a message (an empty sentence, a custom mask without its grid).


def _int(raw: str, row: Setting, values: Values, messages: list[str]) -> int:
    default, (low, high) = row.default_for(values), row.bounds(values)
    try:
        value = int(raw) if raw else default
    except ValueError:
        messages.append(_("`{param}={raw}` is not a whole number: using {default}.").format(
            param=row.param, raw=raw, default=default))
        return default
    if not low <= value <= high:
        clipped = min(max(value, low), high)
        messages.append(_("`{param}={raw}` is outside {low}..{high}: using {clipped}.").format(
            param=row.param, raw=raw, low=low, high=high, clipped=clipped))
        return clipped
    return value


def _float(raw: str, row: Setting, values: Values, messages: list[str]) -> float:
    """A number in (low, high]; anything else (NaN too) falls back to the default."""
    default, (low, high) = row.default_for(values), row.bounds(values)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low < value <= high:  # False for NaN too
        messages.append(_("`{param}={raw}` must be a number above {low:g} and at most {high:g}: using {default:g}.").format(
            param=row.param, raw=raw, low=low, high=high, default=default))
        return default
    return value


def _choice(raw: str, row: Setting, values: Values, messages: list[str]) -> str:
    default, choices = row.default_for(values), row.link_choices()
    if raw in row.legacy:
        return row.legacy[raw]
    if raw and raw not in choices:
        messages.append(_("`{param}={raw}` is not one of {choices}: using {default}.").format(
            param=row.param, raw=raw, choices=", ".join(choices), default=default))
    return raw if raw in choices else default


def _flag(raw: str, row: Setting, values: Values, messages: list[str]) -> bool:
    default = row.default_for(values)
    if raw and raw not in ("0", "1"):
        messages.append(_("`{param}={raw}` must be 0 or 1: using {default}.").format(
            param=row.param, raw=raw, default=int(default)))
    return raw == "1" if raw in ("0", "1") else default


def _tokens(raw: str, row: Setting, values: Values, messages: list[str]):
    tokens, reason = fit_sentence(tokenize(raw), row.default_for(values))
    if reason:
        messages.append(_("`{param}` {reason}.").format(param=row.param, reason=reason))
    return tokens


def _grid(raw: str, row: Setting, values: Values, messages: list[str]):
    """A (Tq, Tk) grid of booleans; a malformed one becomes 'all allowed'."""
    tq, tk = len(values["tokens"]), len(key_tokens(values))
    if not raw:  # mask=custom and no grid in the link: nothing was given wrong, so say what was missing
        messages.append(_("`mask=custom` without `{param}` (its grid: one row of 0/1 per query, joined by '.'): "
                          "starting the custom mask from 'all allowed'; edit it on the page.").format(param=row.param))
        return tuple(tuple(True for _ in range(tk)) for _ in range(tq))
    try:
        grid = decode_mask(raw)
        if len(grid) != tq or any(len(r) != tk for r in grid):
            raise ValueError(_("the custom mask must have {rows} rows of {columns} digits").format(rows=tq, columns=tk))
    except ValueError as err:
        messages.append(_("`{param}`: {error}; starting the custom mask from 'all allowed'.").format(
            param=row.param, error=err))
        grid = tuple(tuple(True for _ in range(tk)) for _ in range(tq))
    return grid


def _heads(raw: str, row: Setting, values: Values, messages: list[str]) -> tuple[int, ...]:
    """A set of head numbers, e.g. '0,2'; anything that is not a head of this model is left out."""
    n_heads = values["heads"]
    heads, bad = set(), []
    for part in filter(None, (p.strip() for p in raw.split(","))):
        if part.isdigit() and int(part) < n_heads:
            heads.add(int(part))
        else:
            bad.append(part)
    if bad:
        messages.append(_("`{param}={raw}`: {bad} is not a head (choose 0..{last}): using {heads}.").format(
            param=row.param, raw=raw, bad=", ".join(bad), last=n_heads - 1,
            heads=",".join(map(str, sorted(heads))) or _("none")))
    return tuple(sorted(heads))


READERS = {"int": _int, "float": _float, "choice": _choice, "flag": _flag, "tokens": _tokens, "grid": _grid, "heads": _heads}
WRITERS = {
    "int": str,
    "float": lambda value: f"{value:g}",
    "choice": str,
    "flag": lambda value: str(int(value)),
    "tokens": " ".join,
    "grid": lambda grid: encode_mask(grid),
    "heads": lambda heads: ",".join(map(str, sorted(heads))),
}


def read_settings(params: Mapping[str, str], rows: Sequence[Setting], values: dict, messages: list[str]) -> dict:
    """Read ``rows`` from the link in order into ``values``; a row that does not apply gets its default."""
    for row in rows:
        raw = params.get(row.param)
        if (raw is not None or row.kind == "grid") and (row.applies(values) or row.kept_unused):
            value = READERS[row.kind](raw or "", row, values, messages)
        else:
            value = row.default_for(values)
        if row.fit is not None:
            fitted, reason = row.fit(value, values)
            if reason:
                messages.append(_("`{param}={value}` {reason}: using {fitted}.").format(
                    param=row.param, value=value, reason=reason, fitted=fitted))
                values[ASKED.format(row.name)] = value
            value = fitted
        values[row.name] = value
    return values


def write_settings(rows: Sequence[Setting], values: Values) -> dict[str, str]:
    """The query parameters for ``rows``: those that apply, carry a value and may travel in a link."""
    params = {}
    for row in rows:
        if not row.applies(values):
            continue
        value = values.get(row.name)
        value = row.default_for(values) if value is None else value
        value = tuple(value) if isinstance(value, list) else value  # a multi-select widget holds a list
        if value is None or (row.written == "changed" and value == row.default_for(values)):
            continue
        if row.kind == "choice" and value not in row.link_choices():
            continue
        params[row.param] = _old_spelling(row, value) or WRITERS[row.kind](value)
    return params


def _old_spelling(row: Setting, value) -> str | None:
    """The old URL value of a choice that has one (pe=0 / pe=1), where the row asks for it."""
    if not row.writes_legacy:
        return None
    return next((old for old, new in row.legacy.items() if new == value), None)


def encode_mask(mask) -> str:
    """Rows of 0/1 joined by '.', e.g. '100.110.111' for a causal 3x3 mask."""
    return ".".join("".join("1" if cell else "0" for cell in row) for row in mask)


def decode_mask(text: str) -> tuple[tuple[bool, ...], ...]:
    """Inverse of ``encode_mask``; ValueError when a character is not 0 or 1."""
    rows = text.split(".")
    if any(ch not in "01" for row in rows for ch in row):
        raise ValueError(_("a custom mask is written as rows of 0 and 1 separated by dots, e.g. 100.110.111"))
    return tuple(tuple(ch == "1" for ch in row) for row in rows)


def config_from_params(params: Mapping[str, str]) -> tuple[MHAConfig, list[str]]:
    """A valid configuration from query parameters, and a message for each value not used as given."""
    msgs: list[str] = []
    values = read_settings(params, model_settings(), {}, msgs)
    return repair(config_of(values), msgs), msgs


def repair(config: MHAConfig, msgs: list[str]) -> MHAConfig:
    """Apply the fix of each problem the configuration has, one at a time, until it validates.

    The problems and their fixes are the engine's (``MHAConfig.problem``); each fix adds a message.
    """
    for _attempt in range(MAX_REPAIRS):
        found = config.problem()
        if found is None:
            return config
        fixed = found.fix(config)
        msgs.append(_("{problem} — falling back to {settings}.").format(
            problem=_(found.message), settings=_describe(config, fixed)))
        config = fixed
    return DEFAULT


def _describe(old: MHAConfig, new: MHAConfig) -> str:
    if new is DEFAULT:
        return _("the default settings")
    changed = [f"{k}={v}" for k, v in new.__dict__.items() if old.__dict__[k] != v and k != "custom_mask"]
    return ", ".join(changed) or _("valid settings")


def params_from_config(config: MHAConfig) -> dict[str, str]:
    """Query parameters that restore ``config`` exactly (uploaded embeddings cannot travel in a link)."""
    return write_settings(model_settings(), values_of(config))


def view_from_params(params: Mapping[str, str], config: MHAConfig) -> tuple[dict, list[str]]:
    """The on-screen view (matrix shown, head average, chosen head/query/key, presentation mode)."""
    msgs: list[str] = []
    values = read_settings(params, VIEW_SETTINGS, values_of(config), msgs)
    return {row.name: values[row.name] for row in VIEW_SETTINGS}, msgs


def view_params(view: Mapping) -> dict[str, str]:
    """Query parameters for the view settings that differ from the defaults."""
    return write_settings(VIEW_SETTINGS, {**VIEW_DEFAULTS, **view})


def explorer_params(config: MHAConfig, view: Mapping[str, object] | None = None) -> dict[str, str]:
    """Every parameter the Heads page writes for ``config`` and ``view``: a link the app follows itself carries
    them all, so the page has nothing to rewrite and the visit is one history entry (Back returns)."""
    return {**params_from_config(config), **view_params(view or {})}
