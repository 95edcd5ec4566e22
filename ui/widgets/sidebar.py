"""The sidebar shared by every toy-model page: controls <-> MHAConfig <-> URL.

One control per row of the settings table (``ui/state/settings.py``), drawn by ``WIDGETS[row.widget]`` at a
``Place``: in the sidebar they draw into ``Controls`` and reach the browser as ONE element (``controls.py``; the
mask grid and the upload stay Streamlit widgets, under it); Compare's configuration B draws the same table with
Streamlit's widgets. In presentation mode the element sits in a popover beside a summary line.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from mha_core.config import LIMITS, MHAConfig, valid_head_counts, valid_kv_head_counts
from mha_core.inputs import tokenize
from mha_core.presets import PRESETS
from ui.i18n import _, ngettext, sentences
from ui.state.address import address
from ui.state.settings import (
    VIEW_SETTINGS,
    Setting,
    config_of,
    fit_sentence,
    fitting_heads,
    fitting_kv_heads,
    key_tokens,
    kv_heads_after,
    model_settings,
    values_of,
)
from ui.state.urlstate import params_from_config, repair, view_params
from ui.widgets.controls import Controls
from ui.widgets.language import language_params
from ui.widgets.mask_editor import custom_grid
from ui.widgets.presentation import presentation_bar, presenting, summary_line
from ui.widgets.state import KV_HEADS_OF, SIDEBAR, Place, clamp_choice, note_written, startup
from ui.widgets.uploads import uploaded_embedding


def _sentence(row: Setting, place: Place) -> tuple[str, ...]:
    """A text box of words; an empty one gives the example sentence, a long one its first tokens."""
    label = place.label(row)
    typed = tokenize(place.draw.text_input(label, key=place.key(row.name), help=row.help_text, **place.options))
    tokens, reason = fit_sentence(typed, MHAConfig().tokens)
    if reason:
        (place.draw.warning if typed else place.draw.error)(_("{label} {reason}.").format(label=label, reason=reason))
    return tokens


def sidebar() -> MHAConfig:
    """Draw the controls, keep the URL in step, and return the configuration they describe.

    Normally the controls are in the sidebar, under a "Presentation mode" toggle. In
    presentation mode the sidebar is hidden and the same controls sit in a "Show controls"
    popover beside a one-line summary of the settings at the top of the page; there a bad
    link's messages are shown once, not on every rerun in front of the class.
    """
    startup()
    ss = st.session_state
    summary = None
    if presenting():
        summary, box = presentation_bar()
        for message in ss.pop("url_messages", []):
            st.warning(_("Link: {message}").format(message=message))
    else:
        box = st.sidebar
        for message in ss.get("url_messages", []):
            box.warning(_("Link: {message}").format(message=message))
    place = replace(SIDEBAR, ui=Controls())
    if summary is None:
        place.draw.toggle(_("Presentation mode"), key="w_present",
                          help=_("For a projector: big text, one head at a time, controls folded away."))
    with box:
        values = _draw_settings(place)
        place.draw.draw()  # every control as one element, above the mask grid's and the upload's widgets
        embedding, table = _embedding_in_use(values)
        config = config_of({**values, "embedding": embedding}, custom_embedding=table)
        repairs: list[str] = []
        config = repair(config, repairs)
        for message in repairs:
            st.warning(message)
    if summary is not None:
        summary.markdown(summary_line(config))
    _clamp_view(config)
    _write_url(config)
    ss.config = config
    return config


def _draw_settings(place: Place) -> dict[str, object]:
    """One control per setting that applies, under its section's header; the values by setting name. The mask
    grid is Streamlit's widgets: the controls before it are drawn (as one element) first."""
    values: dict[str, object] = {}
    section = None
    for row in model_settings():
        if row.section != section:
            section = row.section
            place.draw.header(_(section))
        if row.applies(values):
            if row.widget == "grid":
                place.draw.draw()
            values[row.name] = WIDGETS[row.widget](row, values, place)
        elif row.kept_unused:
            values[row.name] = st.session_state.get(row.key, row.default_for(values))
        else:
            values[row.name] = row.default_for(values)
    return values


def _sentence_widget(row: Setting, values, place: Place) -> tuple[str, ...]:
    return _sentence(row, place)


def _second_sentence_widget(row: Setting, values, place: Place) -> tuple[str, ...] | None:
    cross = place.draw.toggle(place.label_prefix + _("Cross-attention (keys/values from a second sentence)"),
                              key=place.key("cross"), **place.options)
    return _sentence(row, place) if cross else None


def _number_widget(row: Setting, values, place: Place) -> int | float:
    low, high = row.widget_bounds(values)
    step = 1 if row.kind == "int" else 0.1
    value = place.draw.number_input(place.label(row), min_value=low, max_value=high, step=step,
                                    key=place.key(row.name), help=row.help_text, **place.options)
    return int(value) if row.kind == "int" else float(value)


def _heads_widget(row: Setting, values, place: Place) -> int:
    """Only the head counts that divide d_model; a count that no longer fits becomes the nearest below."""
    ss, key = st.session_state, place.key(row.name)
    d_model = values["d_model"]
    choices = valid_head_counts(d_model)
    if ss.get(key) not in choices:
        ss[key] = fitting_heads(ss.get(key) or 1, d_model)
    heads = place.draw.selectbox(place.label(row), choices, key=key, help=row.help_text, **place.options)
    place.draw.caption(_("Head size d_k = {hs}. Limits: {tokens} tokens, d_model ≤ {d_model}, {heads} heads.").format(
        hs=d_model // heads, tokens=LIMITS["max_tokens"], d_model=LIMITS["max_d_model"], heads=LIMITS["max_heads"]))
    return int(heads)


def choice_labels(row: Setting):
    """The row's choice labels in this run's language, fixed now: Streamlit (and AppTest) may format an option
    after the run, where no language is set."""
    labels = {value: row.choice_label(value) for value in row.choices}
    return lambda value: labels.get(value, str(value))


def _select_widget(row: Setting, values, place: Place) -> str:
    choices = row.link_choices() if place.link_only else row.choices
    value = place.draw.selectbox(
        place.label(row), list(choices), key=place.key(row.name), help=row.help_text, format_func=choice_labels(row),
        disabled=row.disabled(values), **place.options,
    )
    note = row.note and row.note({**values, row.name: value})
    if note:
        place.draw.caption(note)
    return value


def _kv_heads_widget(row: Setting, values, place: Place) -> int:
    """Only the key/value head counts that divide the heads. When the head count changes, multi-head stays
    multi-head and a grouping keeps its group size where it can (``kv_heads_after``), saying so when not."""
    ss, key, heads_of = st.session_state, place.key(row.name), place.note(KV_HEADS_OF)
    heads = values["heads"]
    before = ss.get(heads_of, heads)  # the head count the stored choice was made for
    if before != heads and ss.get(key) is not None:
        ss[key], note = kv_heads_after(heads, before, int(ss[key]))
        if note:
            place.draw.info(_("Key/value heads: {note}.").format(note=note))
    choices = valid_kv_head_counts(heads)
    if ss.get(key) not in choices:
        ss[key] = fitting_kv_heads(ss.get(key) or heads, heads)
    ss[heads_of] = heads
    kv = place.draw.segmented_control(place.label(row), choices, key=key, help=row.help_text, required=True, **place.options)
    group = heads // kv
    kind = _("multi-head (MHA).") if kv == heads else _("multi-query (MQA).") if kv == 1 else _("grouped-query (GQA).")
    place.draw.caption(ngettext("{n} query head per K/V head: {kind}", "{n} query heads per K/V head: {kind}", group).format(
        n=group, kind=kind))
    return int(kv)


def _init_widget(row: Setting, values, place: Place) -> str:
    init = _select_widget(row, values, place)
    if init in PRESETS:
        place.draw.caption(sentences(_(PRESETS[init].description),
                                     _("Inputs are hand-built too: position in dims 0-1, word in dims 2-3.")))
    return init


def _toggle_widget(row: Setting, values, place: Place) -> bool:
    return bool(place.draw.toggle(place.label(row), key=place.key(row.name), help=row.help_text,
                                  disabled=row.disabled(values), **place.options))


def _slider_widget(row: Setting, values, place: Place) -> int:
    """A slider whose range follows the sentence; a stored value outside it is moved to the nearest end."""
    ss, key = st.session_state, place.key(row.name)
    low, high = row.widget_bounds(values)
    ss[key] = min(max(int(ss.get(key, row.default_for(values))), low), high)
    return int(place.draw.slider(place.label(row), low, high, key=key, help=row.help_text, **place.options))


def _grid_widget(row: Setting, values, place: Place) -> tuple[tuple[bool, ...], ...]:
    return custom_grid(values["tokens"], key_tokens(values), config_of({**values, row.name: None}))


WIDGETS = {  # Setting.widget -> how it is drawn (at a Place: the sidebar, Compare's B); returns the value
    "sentence": _sentence_widget,
    "second_sentence": _second_sentence_widget,
    "number": _number_widget,
    "heads": _heads_widget,
    "kv_heads": _kv_heads_widget,
    "select": _select_widget,
    "init": _init_widget,
    "toggle": _toggle_widget,
    "slider": _slider_widget,
    "grid": _grid_widget,
}


def _embedding_in_use(values) -> tuple[str, tuple | None]:
    """The embedding the sidebar's choice can give now, and the uploaded matrix when it is one."""
    tokens, d_model, embedding = values["tokens"], values["d_model"], values["embedding"]
    if embedding == "custom":
        n_rows = len(tokens) + (len(values["kv_tokens"]) if values["kv_tokens"] else 0)
        table = uploaded_embedding(n_rows, d_model)
        return ("custom", table) if table is not None else ("random", None)
    return embedding, None


def _clamp_view(config: MHAConfig) -> None:
    """Keep the chosen head, query and key inside the current shapes."""
    values = values_of(config)
    for row in VIEW_SETTINGS:
        if row.limits is not None:
            clamp_choice(row.key, row.bounds(values)[1] + 1)


def _write_url(config: MHAConfig) -> None:
    """Make the address bar describe ``config`` and the current view (only when it changed)."""
    params = params_from_config(config)
    params.update(view_params({row.name: st.session_state.get(row.key, row.default) for row in VIEW_SETTINGS}))
    params.update(language_params())  # the link keeps the language (drawn by app.py on every page)
    current = address().to_dict()
    if current != params:
        address().from_dict(params)
    note_written(params)

