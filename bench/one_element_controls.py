"""Issue 38's prototype, for the livechart bench only: the sidebar's controls drawn as ONE components-v2 element.

A Streamlit widget change reruns the page and the page sends every control again (~25 elements in the sidebar).
Here the same controls (the settings table's rows that apply, the language, presentation mode, the section headers,
the heads' and key/value heads' captions, each with its label and help) are real HTML controls inside one element
(``one_element_controls.js`` / ``.css``; components v2, no iframe), so a run sends one element for all of them.

- A change is sent with ``setTriggerValue("change", {name, value})``: the control's link parameter and its value as a
  link spells it. The ``on_change_change`` callback puts it into the session's parameters before the run; the run
  reads them as a link is read (``config_from_params``: bounds, choices, repairs), and the element is drawn from the
  result (``data``: every control with its value, its options and its caption), so it always shows what is computed.
- What the link reading says of a value it could not use is shown inside the element (``messages``), not as
  ``st.warning`` elements: still one element.
- The address is kept in step as the app does (``ui.state.address``; the page calls ``ui.widgets.address.send``).

Left out of the prototype (the app has them): the custom mask grid and the uploaded embedding (a link cannot carry
them either), presentation mode's popover (the checkbox is drawn and kept, nothing else), Compare's B place.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from mha_core.config import LIMITS, MHAConfig, valid_head_counts, valid_kv_head_counts
from ui.i18n import LANGUAGES, _, ngettext, set_language
from ui.state.address import address
from ui.state.settings import LANGUAGE, Setting, model_settings, values_of
from ui.state.urlstate import config_from_params, params_from_config
from ui.widgets.language import language_params
from ui.widgets.page_menu import compact

KEY = "one_controls"  # the element's key (its container's class: st-key-one_controls)
PARAMS = "one_params"  # session state: the controls' values as link parameters, after the last run read them
MESSAGES = "one_messages"  # session state: what the last change's reading said of values it could not use
EXTRA = ("lang", "present", "cross")  # parameters of controls that are not rows of the settings table
KINDS = {  # Setting.widget -> the element's control; rows of other widgets (the mask grid) are not drawn
    "sentence": "text", "second_sentence": "text", "number": "number", "slider": "number",
    "heads": "select", "init": "select", "select": "select", "toggle": "checkbox", "kv_heads": "segmented",
}
_HERE = Path(__file__).parent
_component = st.components.v2.component(
    "mha_bench_one_controls", html='<div class="mha-one" data-testid="mhaOneControls"></div>',
    css=compact((_HERE / "one_element_controls.css").read_text()),
    js=compact((_HERE / "one_element_controls.js").read_text()), isolate_styles=False)


def text_of(value) -> str:
    """A value as a link spells it (the element's controls hold these strings)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return " ".join(value)
    return "" if value is None else str(value)


def _changed() -> None:
    """The element's one change (``{name, value}``) into the session's parameters, before the run reads them."""
    change = (st.session_state.get(KEY) or {}).get("change")
    if not isinstance(change, dict) or not isinstance(change.get("name"), str):
        return
    params = st.session_state[PARAMS]
    params[change["name"]] = str(change.get("value", ""))
    if change["name"] == "cross" and params["cross"] != "1":
        params.pop("kv_tokens", None)


def _options(row: Setting, values: dict) -> list[list[str]]:
    """[value, label] of each choice the control offers for these values."""
    if row.widget == "heads":
        return [[str(n), str(n)] for n in valid_head_counts(values["d_model"])]
    if row.widget == "kv_heads":
        return [[str(n), str(n)] for n in valid_kv_head_counts(values["heads"])]
    return [[value, row.choice_label(value)] for value in row.link_choices()]


def _caption(row: Setting, values: dict) -> str:
    """The line the app's sidebar shows under a control (heads, key/value heads, a select's note), or ""."""
    if row.widget == "heads":
        return _("Head size d_k = {hs}. Limits: {tokens} tokens, d_model ≤ {d_model}, {heads} heads.").format(
            hs=values["d_model"] // values["heads"], tokens=LIMITS["max_tokens"], d_model=LIMITS["max_d_model"],
            heads=LIMITS["max_heads"])
    if row.widget == "kv_heads":
        group = values["heads"] // values["kv_heads"]
        return ngettext("{n} query head per K/V head: {kind}", "{n} query heads per K/V head: {kind}", group).format(
            n=group, kind=_("multi-head (MHA).") if group == 1 else _("grouped-query (GQA)."))
    return (row.note and row.note(values)) or ""


def _control(row: Setting, values: dict) -> dict:
    """One row of the settings table as the element draws it."""
    kind = KINDS[row.widget]
    control = {"kind": kind, "name": row.param, "label": _(row.label), "help": row.help_text or "",
               "value": text_of(values[row.name]), "note": _caption(row, values)}
    if kind in ("select", "segmented"):
        control["options"] = _options(row, values)
    if kind == "number":
        low, high = row.widget_bounds(values)
        control.update(min=low, max=high, step=1 if row.kind == "int" else 0.1)
    return control


def controls_data(config: MHAConfig, params: dict[str, str]) -> dict:
    """What the element draws: the headers and controls in the sidebar's order, with this configuration's values."""
    values = values_of(config)
    values["kv_heads"] = values["kv_heads"] or values["heads"]
    language = params.get("lang", "en")
    items = [{"kind": "select", "name": "lang", "label": _(LANGUAGE.label), "help": "", "value": language,
              "options": [[code, LANGUAGE.choices.get(code)] for code in LANGUAGES], "note": ""},
             {"kind": "checkbox", "name": "present", "label": _("Presentation mode"), "value": params["present"],
              "help": _("For a projector: big text, one head at a time, controls folded away."), "note": ""}]
    section = None
    for row in model_settings():
        if row.section != section:
            section = row.section
            items.append({"kind": "heading", "name": f"section-{section}", "label": _(section)})
        if row.widget == "second_sentence":
            items.append({"kind": "checkbox", "name": "cross", "value": params["cross"], "help": "", "note": "",
                          "label": _("Cross-attention (keys/values from a second sentence)")})
            if params["cross"] != "1":
                continue
        if row.widget in KINDS and row.applies(values):
            items.append(_control(row, values))
    return {"controls": items, "messages": st.session_state.get(MESSAGES, [])}


def one_element_controls() -> MHAConfig:
    """Draw the controls as one element in the sidebar and return the configuration they describe."""
    ss = st.session_state
    if PARAMS not in ss:  # the session's first run: the link's settings
        ss[PARAMS] = {**address().to_dict(), "present": "0", "cross": "1" if "kv_tokens" in address() else "0"}
    params = ss[PARAMS]
    if params.get("lang") in LANGUAGES:
        ss[LANGUAGE.key] = params["lang"]
        set_language(params["lang"])
    config, messages = config_from_params({k: v for k, v in params.items() if k not in EXTRA})
    ss[MESSAGES] = messages
    params = ss[PARAMS] = {**{name: params[name] for name in EXTRA if name in params}, **params_from_config(config)}
    with st.sidebar:
        _component(key=KEY, data=controls_data(config, params), on_change_change=_changed)
    address().from_dict({**params_from_config(config), **language_params()})
    return config
