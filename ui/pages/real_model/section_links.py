"""The links of the Real model page's "Head roles" and "Attention rollout and flow" sections (either model).
Pure: no streamlit.

A section opens from a link when its parameters are in it, and the link then carries its choices:

- ``rm_roles=<role>`` (``induction``, ``previous``, ...: the model's role table): the roles section, with that
  role's example head shown;
- ``rm_flow=rollout|flow`` what is shown beside raw attention, ``rm_flow_layer`` the layer (0..L-1),
  ``rm_flow_token=all|<position>`` every token (the matrices) or one token (its numbers), ``rm_flow_dir=from|to``
  (the encoder only) that token's row (what it draws from) or its column (where it goes).

A bad value gets a message and the default, and the section still opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping

from mha_core.head_roles import Role
from ui.i18n import N_, _
from ui.pages.real_model.ablation import MODE_ROW, OFF_PARAM
from ui.state.settings import Setting
from ui.state.urlstate import read_settings, write_settings

ROLES_PARAM = "rm_roles"
FLOW_METHODS = {"rollout": N_("rollout"), "flow": N_("flow")}
DIRECTIONS = {"from": N_("what it draws from (its row)"), "to": N_("where it goes (its column)")}
ALL_TOKENS = "all"
TOKEN_PARAM = "rm_flow_token"
DIR_PARAM = "rm_flow_dir"


def role_row(roles: Mapping[str, Role], default: str) -> Setting:
    """The example role shown, as a settings row read and written like every other page's."""
    return Setting("role", "choice", url=ROLES_PARAM, label=N_("Example head of"), default=default,
                   choices={key: role.name for key, role in roles.items()})


def role_from_link(params: Mapping[str, str], roles: Mapping[str, Role], default: str,
                   messages: list[str]) -> str | None:
    """The role the link asks for (None: the link does not open the section)."""
    if ROLES_PARAM not in params:
        return None
    return read_settings(params, (role_row(roles, default),), {}, messages)["role"]


def flow_rows(n_layers: int, causal: bool) -> tuple[Setting, ...]:
    """What is shown beside raw attention, the layer, and (an encoder's) direction, as settings rows."""
    rows = (Setting("flow_method", "choice", url="rm_flow", label=N_("Beside raw attention"), default="rollout",
                    choices=FLOW_METHODS),
            Setting("flow_layer", "int", url="rm_flow_layer", label=N_("After layer"), default=n_layers - 1,
                    limits=(0, n_layers - 1)))
    if causal:
        return rows
    return (*rows, Setting("flow_dir", "choice", url=DIR_PARAM, label=N_("One token's"), default="from",
                           choices=DIRECTIONS))


def token_from_link(raw: str | None, n_tokens: int, messages: list[str]) -> str | int:
    """``rm_flow_token``: ``all`` (also when absent) or a position 0..T-1; anything else, a message and ``all``."""
    if raw is None or raw == ALL_TOKENS:
        return ALL_TOKENS
    if raw.isdigit() and int(raw) < n_tokens:
        return int(raw)
    messages.append(_("`{param}={raw}` is not {all} or a token position (0..{last}): showing every token.").format(
        param=TOKEN_PARAM, raw=raw, all=ALL_TOKENS, last=n_tokens - 1))
    return ALL_TOKENS


def flow_from_link(params: Mapping[str, str], n_layers: int, n_tokens: int, causal: bool,
                   messages: list[str]) -> dict | None:
    """The flow section's choices from the link (None: no flow parameter, the section stays closed)."""
    rows = flow_rows(n_layers, causal)
    if not any(name in params for name in (*(row.param for row in rows), TOKEN_PARAM)):
        return None
    values = read_settings(params, rows, {}, messages)
    values["flow_token"] = token_from_link(params.get(TOKEN_PARAM), n_tokens, messages)
    if causal and DIR_PARAM in params:
        messages.append(_("`{param}` is for the encoder, MiniLM: this causal model shows one token by its row (what "
                          "it draws from).").format(param=DIR_PARAM))
    return values


def flow_params(values: Mapping[str, object], n_layers: int, causal: bool) -> dict[str, str]:
    """The parameters that reopen the flow section as ``values`` (method, layer, token, direction) show it."""
    return {**write_settings(flow_rows(n_layers, causal), values), TOKEN_PARAM: str(values["flow_token"])}


def flow_param_names() -> tuple[str, ...]:
    """Every flow parameter a link may carry (to clear them when the section closes)."""
    return (*(row.param for row in flow_rows(2, causal=False)), TOKEN_PARAM)


def per_model_params() -> tuple[str, ...]:
    """The parameters a model's own sections write (heads off, token sets, roles, flow): each model keeps its own
    in its widgets, so a switch of model drops them from the address bar rather than hand one model's heads to the
    other (where a MiniLM head 5.11 does not exist)."""
    return (OFF_PARAM, MODE_ROW.param, "rm_sq", "rm_sk", ROLES_PARAM, *flow_param_names())  # rm_sq, rm_sk: token sets


def sync_params(query_params: MutableMapping[str, str], names: Iterable[str], params: Mapping[str, str]) -> None:
    """Make the address bar (``address()``) carry ``params`` and none of the other ``names``: one update for
    everything that changed, so one history entry."""
    for name in names:
        if name in query_params and name not in params:
            del query_params[name]
    changed = {name: value for name, value in params.items() if query_params.get(name) != value}
    if changed:
        query_params.update(changed)
