"""The shareable configuration <-> URL query parameters, as pure functions (no streamlit).

``config_from_params`` never raises: every value it cannot use becomes a message and falls
back to something valid, so a mistyped link still opens a working page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from mha_core.config import EMBEDDINGS, INITS, LIMITS, MASKS, SCALE_RULES, MHAConfig, valid_head_counts
from mha_core.inputs import tokenize

DEFAULT = MHAConfig()

# View settings: not part of the computation, but of what is on screen (kept in links too).
VIEWS = ("weights", "logits", "scores")
VIEW_DEFAULTS = {"view": "weights", "avg": False, "head": 0, "qi": 0, "kj": 0, "present": False}


def _int(params, name: str, default: int, low: int, high: int, messages: list[str]) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        messages.append(f"`{name}={raw}` is not a whole number: using {default}.")
        return default
    if not low <= value <= high:
        clipped = min(max(value, low), high)
        messages.append(f"`{name}={raw}` is outside {low}..{high}: using {clipped}.")
        return clipped
    return value


def _choice(params, name: str, default: str, choices, messages: list[str]) -> str:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if raw not in choices:
        messages.append(f"`{name}={raw}` is not one of {', '.join(choices)}: using {default}.")
        return default
    return raw


def _flag(params, name: str, default: bool, messages: list[str]) -> bool:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if raw not in ("0", "1"):
        messages.append(f"`{name}={raw}` must be 0 or 1: using {int(default)}.")
        return default
    return raw == "1"


def _tokens(params, name: str, default, messages: list[str]):
    raw = params.get(name)
    if raw is None:
        return default
    tokens = tokenize(raw)
    if not tokens:
        if default is not None:
            messages.append(f"`{name}` is empty: using '{' '.join(default)}'.")
        return default
    if len(tokens) > LIMITS["max_tokens"]:
        messages.append(
            f"`{name}` has {len(tokens)} tokens; the limit is {LIMITS['max_tokens']}: "
            f"keeping the first {LIMITS['max_tokens']}."
        )
        tokens = tokens[: LIMITS["max_tokens"]]
    return tokens


def encode_mask(mask) -> str:
    """Rows of 0/1 joined by '.', e.g. '100.110.111' for a causal 3x3 mask."""
    return ".".join("".join("1" if cell else "0" for cell in row) for row in mask)


def decode_mask(text: str) -> tuple[tuple[bool, ...], ...]:
    """Inverse of ``encode_mask``; ValueError when a character is not 0 or 1."""
    rows = text.split(".")
    if any(ch not in "01" for row in rows for ch in row):
        raise ValueError("a custom mask is written as rows of 0 and 1 separated by dots, e.g. 100.110.111")
    return tuple(tuple(ch == "1" for ch in row) for row in rows)


def config_from_params(params: Mapping[str, str]) -> tuple[MHAConfig, list[str]]:
    """A valid configuration from query parameters, and a message for each value not used as given."""
    msgs: list[str] = []
    tokens = _tokens(params, "tokens", DEFAULT.tokens, msgs)
    kv_tokens = _tokens(params, "kv_tokens", None, msgs)
    d_model = _int(params, "d_model", DEFAULT.d_model, 1, LIMITS["max_d_model"], msgs)
    heads = _int(params, "heads", DEFAULT.n_heads, 1, LIMITS["max_heads"], msgs)
    if d_model % heads:
        fitting = valid_head_counts(d_model)
        new = max(h for h in fitting if h <= heads)
        msgs.append(
            f"`heads={heads}` does not divide d_model {d_model} (choose {', '.join(map(str, fitting))}): using {new}."
        )
        heads = new
    config = MHAConfig(
        tokens=tokens,
        kv_tokens=kv_tokens,
        d_model=d_model,
        n_heads=heads,
        seed=_int(params, "seed", DEFAULT.seed, 0, LIMITS["max_seed"], msgs),
        init=_choice(params, "init", DEFAULT.init, INITS, msgs),
        bias=_flag(params, "bias", DEFAULT.bias, msgs),
        positional_encoding=_flag(params, "pe", DEFAULT.positional_encoding, msgs),
        scale_rule=_choice(params, "scale", DEFAULT.scale_rule, SCALE_RULES, msgs),
        temperature=_temperature(params, msgs),
        mask=_choice(params, "mask", DEFAULT.mask, MASKS, msgs),
        embedding=_choice(params, "emb", DEFAULT.embedding, EMBEDDINGS[:2], msgs),
        output_projection=_flag(params, "wo", DEFAULT.output_projection, msgs),
    )
    tk = len(config.key_tokens)
    valid_len = _int(params, "valid_len", tk, 0, tk, msgs) if config.mask == "padding" else None
    window = _int(params, "window", DEFAULT.window, 0, LIMITS["max_tokens"], msgs)
    config = replace(config, valid_len=valid_len, window=window, custom_mask=_custom_mask(params, config, msgs))
    return repair(config, msgs), msgs


def _temperature(params, msgs: list[str]) -> float:
    raw = params.get("temperature")
    if raw is None or raw == "":
        return DEFAULT.temperature
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= LIMITS["max_temperature"]:  # False for NaN too
        msgs.append(f"`temperature={raw}` must be a number above 0 and at most {LIMITS['max_temperature']:g}: using 1.")
        return DEFAULT.temperature
    return value


def _custom_mask(params, config: MHAConfig, msgs: list[str]):
    if config.mask != "custom":
        return None
    tq, tk = len(config.tokens), len(config.key_tokens)
    try:
        grid = decode_mask(params.get("cmask", ""))
        if len(grid) != tq or any(len(row) != tk for row in grid):
            raise ValueError(f"the custom mask must have {tq} rows of {tk} digits")
    except ValueError as err:
        msgs.append(f"`cmask`: {err}; starting the custom mask from 'all allowed'.")
        grid = tuple(tuple(True for _ in range(tk)) for _ in range(tq))
    return grid


def repair(config: MHAConfig, msgs: list[str]) -> MHAConfig:
    """Fall back field by field until the configuration validates; each fallback adds a message."""
    for _ in range(4):
        try:
            config.validate()
            return config
        except ValueError as err:
            fallback = _fallback(config)
            msgs.append(f"{err} — falling back to {_describe(config, fallback)}.")
            config = fallback
    return DEFAULT


def _fallback(config: MHAConfig) -> MHAConfig:
    """The smallest change that removes the most likely cause of an invalid configuration."""
    if config.embedding == "onehot" and len(set(config.tokens) | set(config.key_tokens)) > config.d_model:
        return replace(config, embedding="random")
    if config.init not in INITS[:4] and config.head_size < 2:
        return replace(config, init="xavier")
    if config.mask == "custom":
        return replace(config, mask="none", custom_mask=None)
    return DEFAULT


def _describe(old: MHAConfig, new: MHAConfig) -> str:
    if new is DEFAULT:
        return "the default settings"
    changed = [f"{k}={v}" for k, v in new.__dict__.items() if old.__dict__[k] != v and k != "custom_mask"]
    return ", ".join(changed) or "valid settings"


def params_from_config(config: MHAConfig) -> dict[str, str]:
    """Query parameters that restore ``config`` exactly (uploaded embeddings cannot travel in a link)."""
    params = {
        "tokens": " ".join(config.tokens),
        "d_model": str(config.d_model),
        "heads": str(config.n_heads),
        "seed": str(config.seed),
        "init": config.init,
        "bias": str(int(config.bias)),
        "pe": str(int(config.positional_encoding)),
        "scale": config.scale_rule,
        "mask": config.mask,
    }
    if config.kv_tokens is not None:
        params["kv_tokens"] = " ".join(config.kv_tokens)
    if config.scale_rule == "temperature":
        params["temperature"] = f"{config.temperature:g}"
    if config.mask == "padding":
        params["valid_len"] = str(len(config.key_tokens) if config.valid_len is None else config.valid_len)
    if config.mask == "window":
        params["window"] = str(config.window)
    if config.mask == "custom" and config.custom_mask is not None:
        params["cmask"] = encode_mask(config.custom_mask)
    if config.embedding == "onehot":
        params["emb"] = "onehot"
    if not config.output_projection:
        params["wo"] = "0"
    return params


def view_from_params(params: Mapping[str, str], config: MHAConfig) -> tuple[dict, list[str]]:
    """The on-screen view (matrix shown, head average, chosen head/query/key, presentation mode)."""
    msgs: list[str] = []
    tq, tk = len(config.tokens), len(config.key_tokens)
    view = {
        "view": _choice(params, "view", VIEW_DEFAULTS["view"], VIEWS, msgs),
        "avg": _flag(params, "avg", VIEW_DEFAULTS["avg"], msgs),
        "head": _int(params, "head", 0, 0, config.n_heads - 1, msgs),
        "qi": _int(params, "qi", 0, 0, tq - 1, msgs),
        "kj": _int(params, "kj", 0, 0, tk - 1, msgs),
        "present": _flag(params, "present", VIEW_DEFAULTS["present"], msgs),
    }
    return view, msgs


def view_params(view: Mapping) -> dict[str, str]:
    """Query parameters for the view settings that differ from the defaults."""
    out = {}
    for name, default in VIEW_DEFAULTS.items():
        value = view.get(name, default)
        if value != default:
            out[name] = str(int(value)) if isinstance(value, bool) else str(value)
    return out
