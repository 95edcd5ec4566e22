"""The sidebar shared by every toy-model page: widgets <-> MHAConfig <-> URL.

On a session's first run the URL's query parameters fill the widgets; after that the
widgets are the truth and the URL follows them on every run, so a copied link restores the
same view. Widget keys start with ``w_``; ``keep_widget_state`` (called by app.py on every
run) stops Streamlit from dropping them when a page does not draw the sidebar.
"""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import streamlit as st

from mha_core.config import LIMITS, MHAConfig, build_mask, valid_head_counts, valid_kv_head_counts
from mha_core.inputs import token_labels, tokenize
from mha_core.presets import PRESET_DESCRIPTIONS, PRESET_INITS
from ui.markdown import literal
from ui.settings import (
    INIT_LABELS,
    MASK_LABELS,
    SCALE_LABELS,
    SHORT_POSITION_LABELS,
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
from ui.urlstate import config_from_params, params_from_config, repair, view_from_params, view_params

MAX_UPLOAD_BYTES = 1_000_000
KV_HEADS_OF = "kv_heads_of"  # session state: the head count the key/value heads widget's value was chosen for
# Widgets keep their values across page switches and while hidden (Streamlit >= 1.5x); without it
# a page that does not draw a widget drops its value. keep_widget_state is the older belt to it.
KEEP = "session"
FONT_SIZE = 12  # the figures' base font size (plotly's default)
PRESENT_FONT_SIZE = 16  # ... in presentation mode


def keep_widget_state() -> None:
    """Re-assign every widget value so that Streamlit keeps it across page switches."""
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith("w_"):
            st.session_state[key] = st.session_state[key]


SECOND_SENTENCE = ("a", "dog", "ran")  # offered when cross-attention is switched on


def _seed_widgets(config: MHAConfig, view: dict | None = None) -> None:
    """Put ``config`` into the widgets' session state (only before they are drawn in a run)."""
    ss = st.session_state
    ss[KV_HEADS_OF] = config.n_heads
    values = values_of(config)
    for row in model_settings():
        value = values[row.name]
        SEEDS.get(row.widget, _seed_value)(row, row.default_for(values) if value is None else value)
    for row in VIEW_SETTINGS:
        ss[row.key] = (view or {}).get(row.name, row.default)


def _seed_value(row: Setting, value) -> None:
    st.session_state[row.key] = value


def _seed_sentence(row: Setting, value) -> None:
    st.session_state[row.key] = " ".join(value)


def _seed_second_sentence(row: Setting, value) -> None:
    st.session_state.w_cross = value is not None
    st.session_state[row.key] = " ".join(value or SECOND_SENTENCE)


def _seed_select(row: Setting, value) -> None:
    """A choice a link cannot carry (an uploaded embedding) starts from the default."""
    st.session_state[row.key] = value if value in row.link_choices() else row.default_for({})


def _seed_grid(row: Setting, value) -> None:
    _set_grid(value)


SEEDS = {  # Setting.widget -> how a value goes into its widget, where not as it is
    "sentence": _seed_sentence,
    "second_sentence": _seed_second_sentence,
    "select": _seed_select,
    "grid": _seed_grid,
}


def open_config(config: MHAConfig, view: dict | None = None) -> None:
    """Load ``config`` into the sidebar on the next run (use from a button's on_click)."""
    st.session_state.pending_config = (config, view)


def _startup() -> None:
    """First run of a session: read the URL. Later runs: apply a config a button asked for."""
    ss = st.session_state
    if "config_loaded" not in ss:
        params = st.query_params.to_dict()
        config, messages = config_from_params(params)
        view, view_messages = view_from_params(params, config)
        _seed_widgets(config, view)
        ss.url_messages = messages + view_messages
        ss.config_loaded = True
    pending = ss.pop("pending_config", None)
    if pending is not None:
        _seed_widgets(*pending)


def _sentence(key: str, label: str, help_text: str) -> tuple[str, ...]:
    """A text box of words; an empty one gives the example sentence, a long one its first tokens."""
    typed = tokenize(st.text_input(label, key=key, help=help_text, persist_state=KEEP))
    tokens, reason = fit_sentence(typed, MHAConfig().tokens)
    if reason:
        (st.warning if typed else st.error)(f"{label} {reason}.")
    return tokens


def _set_grid(grid) -> None:
    """Make ``grid`` the custom mask and the editor's new starting point (a new editor: old edits go)."""
    ss = st.session_state
    ss.custom_grid = ss.grid_base = grid
    ss.grid_version = ss.get("grid_version", 0) + 1


def _fitted_grid(tq: int, tk: int) -> tuple[tuple[bool, ...], ...]:
    """The custom mask, or all allowed when it was made for another sentence."""
    grid = st.session_state.get("custom_grid")
    if grid is None or len(grid) != tq or any(len(r) != tk for r in grid):
        grid = tuple(tuple(True for _ in range(tk)) for _ in range(tq))
        _set_grid(grid)
    return grid


def _custom_grid(tokens, key_tokens, start: MHAConfig) -> tuple[tuple[bool, ...], ...]:
    """In the sidebar: which mask the grid starts from. The grid itself is edited on the page (``mask_editor``),
    where there is room for a column per key, and kept outside widget state."""
    tq, tk = len(tokens), len(key_tokens)
    grid = _fitted_grid(tq, tk)
    base = st.selectbox(
        "Start the grid from",
        ["none", "causal", "padding", "window"],
        key="w_grid_start",
        persist_state=KEEP,
        format_func=MASK_LABELS.get,
    )
    if st.button("Reset the grid to it", key="grid_reset"):
        mask = build_mask(replace(start, mask=base))
        grid = tuple(tuple(bool(c) for c in row) for row in (np.ones((tq, tk), bool) if mask is None else mask))
        _set_grid(grid)
    st.caption("Edit the grid on the page, beside the heatmap: a click on a cell allows or blocks that key.")
    return grid


def _apply_grid_edits(editor_key: str, columns: list[str]) -> None:
    """The editor's changes (cells set since it was drawn from ``grid_base``) onto the custom mask, before the run."""
    ss = st.session_state
    grid = [list(row) for row in ss.grid_base]
    for row, changes in ss[editor_key]["edited_rows"].items():
        for column, allowed in changes.items():
            grid[int(row)][columns.index(column)] = bool(allowed)
    ss.custom_grid = tuple(tuple(row) for row in grid)


def mask_editor(config: MHAConfig) -> None:
    """The custom mask as a grid of checkboxes in the main area: rows = queries, columns = keys, a click
    toggles a cell. Draws nothing unless the mask is custom. Its edits reach the sidebar's configuration
    through a callback, before the next run computes anything."""
    import pandas as pd  # only this control needs pandas

    if config.mask != "custom":
        return
    ss = st.session_state
    base = ss.get("grid_base")
    if base is None or np.shape(base) != (len(config.tokens), len(config.key_tokens)):
        _set_grid(config.custom_mask)
        base = ss.grid_base
    columns = token_labels(config.key_tokens)
    key = f"grid_{ss.grid_version}"
    st.markdown("**Custom mask** — ticked: the query (row) may attend to the key (column).")
    st.data_editor(
        pd.DataFrame(list(base), index=token_labels(config.tokens), columns=columns),
        key=key,
        num_rows="fixed",
        width="content",
        on_change=_apply_grid_edits,
        args=(key, columns),
        column_config={c: st.column_config.CheckboxColumn(c, width="small") for c in columns},
    )


def _uploaded_embedding(n_rows: int, d_model: int):
    """Parse and validate an uploaded CSV / .npy matrix; None (with a message) when unusable."""
    ss = st.session_state
    upload = st.file_uploader("Embedding matrix (.csv or .npy)", type=["csv", "npy"], key="upload_embedding")
    st.caption(f"One row per token ({n_rows}), {d_model} columns (= d_model). Uploads do not travel in links.")
    if upload is not None:
        try:
            ss.uploaded_matrix = (upload.name, parse_matrix(upload.name, upload.getvalue()))
        except ValueError as err:
            st.error(f"Could not use {upload.name}: {err} Using seeded random embeddings.")
            return None
    elif "uploaded_matrix" in ss:
        # A file uploader forgets its file on a page switch; the parsed matrix is kept instead.
        st.caption(f"Using {ss.uploaded_matrix[0]}, uploaded earlier. Upload another file to replace it.")
    else:
        st.info("No file yet: using seeded random embeddings.")
        return None
    name, table = ss.uploaded_matrix
    if table.shape != (n_rows, d_model):
        st.error(
            f"{name} has shape {table.shape}, but {n_rows} tokens with d_model {d_model} need "
            f"({n_rows}, {d_model}). Using seeded random embeddings."
        )
        return None
    return tuple(tuple(float(v) for v in row) for row in table)


# What an uploaded array holds, by dtype kind, when it is not real numbers (numpy's dtype.kind letters).
NOT_REAL_KINDS = {
    "c": "complex numbers; only real numbers can be embeddings (save np.real(a) if the real part is meant)",
    "b": "true/false values; save them as numbers (a.astype(float)) if 0 and 1 are meant",
    "U": "text",
    "S": "bytes (text)",
    "M": "dates and times",
    "m": "time spans",
    "O": "Python objects",
    "V": "records (a structured array)",
}


def _npy_dtype(data: bytes) -> np.dtype:
    """The dtype written in a .npy file's header, read without loading (or unpickling) the data."""
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    _, _, dtype = read_header(stream)  # (shape, fortran_order, dtype)
    return dtype


def _refuse_unless_real(dtype: np.dtype) -> None:
    """ValueError naming what the array holds unless it holds real numbers (integers or floats)."""
    if dtype.kind not in "iuf":
        what = NOT_REAL_KINDS.get(dtype.kind, "values that are not numbers")
        raise ValueError(f"it must be a 2-D matrix of numbers, but it holds {what} (dtype {dtype}).")


def _load_npy(data: bytes) -> np.ndarray:
    """The array in .npy bytes, its dtype checked from the header first; ValueError otherwise."""
    try:
        dtype = _npy_dtype(data)
    except Exception as err:  # a malformed header can fail in many ways
        raise ValueError(f"it is not a valid .npy file ({type(err).__name__}).") from None
    if dtype.hasobject:  # its payload is a pickle, which could run code: never loaded
        raise ValueError(f"it is not a valid .npy file of numbers: it holds Python objects (dtype {dtype}).")
    _refuse_unless_real(dtype)
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as err:  # a truncated payload can fail in many ways inside np.load
        raise ValueError(f"it is not a valid .npy file ({type(err).__name__}).") from None


def parse_matrix(name: str, data: bytes) -> np.ndarray:
    """A finite 2-D float matrix from CSV text or .npy bytes of real numbers; ValueError with the reason otherwise.

    Complex, boolean, text, date, object and structured arrays are refused, never converted
    (a complex matrix cast to float would silently lose its imaginary part).
    """
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValueError(f"the file is {len(data):,} bytes; the limit is {MAX_UPLOAD_BYTES:,}.")
    if name.lower().endswith(".npy"):
        table = _load_npy(data)
    else:
        try:
            text = data.decode("utf-8")
            table = np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2)
        except (UnicodeDecodeError, ValueError):
            raise ValueError("it is not a CSV of numbers (comma-separated, no header).") from None
    _refuse_unless_real(table.dtype)
    if table.ndim != 2:
        raise ValueError(f"it must be a 2-D matrix of numbers, got shape {table.shape} of {table.dtype}.")
    table = table.astype(np.float64)
    if not np.all(np.isfinite(table)):
        raise ValueError("it contains NaN or infinite values.")
    return table


def presenting() -> bool:
    """True while presentation mode (toggle ``w_present``, ``present=1`` in the URL) is on."""
    return bool(st.session_state.get("w_present", False))


def figure_font_size() -> int:
    """The figures' base font size: larger in presentation mode, whose CSS makes the page's text ~1.3x larger."""
    return PRESENT_FONT_SIZE if presenting() else FONT_SIZE


def clamp_choice(key: str, size: int) -> None:
    """Reset the selector ``key`` to 0 when its stored choice no longer exists (a shorter sentence, fewer heads)."""
    if not 0 <= int(st.session_state.get(key, 0)) < size:
        st.session_state[key] = 0


def _short(tokens: tuple[str, ...], words: int = 6) -> str:
    """A sentence cut to its first ``words`` words, saying how long it is when cut (keeps the bar one line)."""
    if len(tokens) <= words:
        return " ".join(tokens)
    return " ".join(tokens[:words]) + f" … ({len(tokens)} tokens)"


def summary_line(config: MHAConfig) -> str:
    """The settings in one line of Markdown, for the compact bar of presentation mode."""
    sentence = f"**{literal(_short(config.tokens))}**"  # as typed: no emoji, maths or italics from the words
    if config.kv_tokens is not None:
        sentence += f" → **{literal(_short(config.kv_tokens))}**"
    parts = [sentence, f"{config.n_heads} heads", f"mask: {MASK_LABELS[config.mask].split(' (')[0]}"]
    if config.key_value_heads != config.n_heads:
        parts.append(f"{config.key_value_heads} K/V head{'s' if config.key_value_heads > 1 else ''}")
    if config.pe != "none":
        parts.append(f"positions: {SHORT_POSITION_LABELS[config.pe]}")
    if config.null_key:
        parts.append("null key")
    if config.init != "xavier":
        parts.append(f"weights: {INIT_LABELS[config.init].split('  ')[0]}")
    if config.scale_rule != "sqrt_dk":
        parts.append(f"scale: {SCALE_LABELS[config.scale_rule].split('  ')[0]}")
    if not config.output_projection:
        parts.append("no W_O")
    return " · ".join(parts)


# Presentation mode: bigger text, no sidebar (its controls move behind the compact bar).
# Injected only while the mode is on, so it never touches the normal layout.
PRESENTATION_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"] {
  display: none !important;
}
[data-testid="stMainBlockContainer"] { padding: 3.6rem 2rem 1rem 2rem; max-width: 100%; }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.3rem; line-height: 1.4; }
[data-testid="stMain"] [data-testid="stCaptionContainer"] p { font-size: 1.15rem; }
[data-testid="stMain"] h1 { font-size: 2.2rem; padding: 0.2rem 0; }
[data-testid="stMain"] [data-testid="stWidgetLabel"] p { font-size: 1.15rem; }
[data-testid="stMain"] button p { font-size: 1.2rem; }
[data-testid="stMain"] [data-testid="stMetricValue"] p { font-size: 2.6rem; line-height: 1.2; }
[data-testid="stMain"] [data-testid="stMetricLabel"] p { font-size: 1.15rem; }
[data-testid="stMain"] [data-testid="stSelectbox"] input { font-size: 1.2rem; }
</style>
"""


def _presentation_bar():
    """The compact bar of presentation mode: a summary slot, a "Show controls" popover, the mode toggle."""
    st.html(PRESENTATION_CSS)
    bar = st.container(horizontal=True, vertical_alignment="center", gap="medium", key="present_bar")
    summary = bar.empty()
    controls = bar.popover("Show controls", icon=":material/tune:")
    bar.toggle("Presenting", key="w_present", persist_state=KEEP, help="Off: the controls go back to the sidebar.")
    return summary, controls


def presentation_switch() -> bool:
    """Presentation mode on a page without the model's sidebar (Lessons, Seed notebooks, Real model).

    The link's ``present=1`` turns it on when the session starts here; the toggle sits in the sidebar, or
    at the top of the page while presenting (the sidebar is hidden then); the link follows the toggle.
    """
    ss = st.session_state
    if "w_present" not in ss:
        ss.w_present = st.query_params.get("present") == "1"
    if presenting():
        st.html(PRESENTATION_CSS)
        st.toggle("Presenting", key="w_present", persist_state=KEEP, help="Off: back to the normal layout.")
    else:
        st.sidebar.toggle(
            "Presentation mode", key="w_present", persist_state=KEEP, help="For a projector: big text, no sidebar."
        )
    if presenting():
        st.query_params["present"] = "1"
    elif "present" in st.query_params:
        del st.query_params["present"]
    return presenting()


def sidebar() -> MHAConfig:
    """Draw the controls, keep the URL in step, and return the configuration they describe.

    Normally the controls are in the sidebar, under a "Presentation mode" toggle. In
    presentation mode the sidebar is hidden and the same controls sit in a "Show controls"
    popover beside a one-line summary of the settings at the top of the page; there a bad
    link's messages are shown once, not on every rerun in front of the class.
    """
    _startup()
    ss = st.session_state
    summary = None
    if presenting():
        summary, box = _presentation_bar()
        for message in ss.pop("url_messages", []):
            st.warning(f"Link: {message}")
    else:
        box = st.sidebar
        box.toggle(
            "Presentation mode",
            key="w_present",
            persist_state=KEEP,
            help="For a projector: big text, one head at a time, controls folded away.",
        )
        for message in ss.get("url_messages", []):
            box.warning(f"Link: {message}")
    with box:
        values = _draw_settings()
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


def _draw_settings() -> dict[str, object]:
    """One widget per setting that applies, under its section's header; the values by setting name."""
    values: dict[str, object] = {}
    section = None
    for row in model_settings():
        if row.section != section:
            section = row.section
            st.header(section)
        if row.applies(values):
            values[row.name] = WIDGETS[row.widget](row, values)
        elif row.kept_unused:
            values[row.name] = st.session_state.get(row.key, row.default_for(values))
        else:
            values[row.name] = row.default_for(values)
    return values


def _sentence_widget(row: Setting, values) -> tuple[str, ...]:
    return _sentence(row.key, row.label, row.help)


def _second_sentence_widget(row: Setting, values) -> tuple[str, ...] | None:
    cross = st.toggle("Cross-attention (keys/values from a second sentence)", key="w_cross", persist_state=KEEP)
    return _sentence(row.key, row.label, row.help) if cross else None


def _number_widget(row: Setting, values) -> int | float:
    low, high = row.widget_bounds(values)
    step = 1 if row.kind == "int" else 0.1
    value = st.number_input(
        row.label, min_value=low, max_value=high, step=step, key=row.key, help=row.help, persist_state=KEEP
    )
    return int(value) if row.kind == "int" else float(value)


def _heads_widget(row: Setting, values) -> int:
    """Only the head counts that divide d_model; a count that no longer fits becomes the nearest below."""
    ss = st.session_state
    d_model = values["d_model"]
    choices = valid_head_counts(d_model)
    if ss.get(row.key) not in choices:
        ss[row.key] = fitting_heads(ss.get(row.key) or 1, d_model)
    heads = st.selectbox(row.label, choices, key=row.key, help=row.help, persist_state=KEEP)
    st.caption(
        f"Head size d_k = {d_model // heads}. Limits: {LIMITS['max_tokens']} tokens, "
        f"d_model ≤ {LIMITS['max_d_model']}, {LIMITS['max_heads']} heads."
    )
    return int(heads)


def _select_widget(row: Setting, values) -> str:
    return st.selectbox(
        row.label, list(row.choices), key=row.key, help=row.help, persist_state=KEEP, format_func=row.choices.get,
        disabled=row.disabled(values),
    )


def _kv_heads_widget(row: Setting, values) -> int:
    """Only the key/value head counts that divide the heads. When the head count changes, multi-head stays
    multi-head and a grouping keeps its group size where it can (``kv_heads_after``), saying so when not."""
    ss = st.session_state
    heads = values["heads"]
    before = ss.get(KV_HEADS_OF, heads)  # the head count the stored choice was made for
    if before != heads and ss.get(row.key) is not None:
        ss[row.key], note = kv_heads_after(heads, before, int(ss[row.key]))
        if note:
            st.info(f"Key/value heads: {note}.")
    choices = valid_kv_head_counts(heads)
    if ss.get(row.key) not in choices:
        ss[row.key] = fitting_kv_heads(ss.get(row.key) or heads, heads)
    ss[KV_HEADS_OF] = heads
    kv = st.segmented_control(row.label, choices, key=row.key, help=row.help, persist_state=KEEP, required=True)
    st.caption(f"{heads // kv} query head(s) per K/V head: "
               + ("multi-head (MHA)." if kv == heads else "multi-query (MQA)." if kv == 1 else "grouped-query (GQA)."))
    return int(kv)


def _init_widget(row: Setting, values) -> str:
    init = _select_widget(row, values)
    if init in PRESET_INITS:
        st.caption(PRESET_DESCRIPTIONS[init] + " Inputs are hand-built too: position in dims 0-1, word in dims 2-3.")
    return init


def _toggle_widget(row: Setting, values) -> bool:
    return bool(st.toggle(row.label, key=row.key, help=row.help, persist_state=KEEP, disabled=row.disabled(values)))


def _slider_widget(row: Setting, values) -> int:
    """A slider whose range follows the sentence; a stored value outside it is moved to the nearest end."""
    ss = st.session_state
    low, high = row.widget_bounds(values)
    ss[row.key] = min(max(int(ss.get(row.key, row.default_for(values))), low), high)
    return int(st.slider(row.label, low, high, key=row.key, help=row.help, persist_state=KEEP))


def _grid_widget(row: Setting, values) -> tuple[tuple[bool, ...], ...]:
    return _custom_grid(values["tokens"], key_tokens(values), config_of({**values, row.name: None}))


WIDGETS = {  # Setting.widget -> how the sidebar draws it; each returns the setting's value
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
        table = _uploaded_embedding(n_rows, d_model)
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
    current = st.query_params.to_dict()
    if current != params:
        st.query_params.from_dict(params)
