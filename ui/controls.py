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

from mha_core.config import LIMITS, MHAConfig, build_mask, valid_head_counts
from mha_core.inputs import token_labels, tokenize
from mha_core.presets import PRESET_DESCRIPTIONS, PRESET_INITS
from ui.urlstate import VIEW_DEFAULTS, config_from_params, params_from_config, repair, view_from_params, view_params

MAX_UPLOAD_BYTES = 1_000_000
# Widgets keep their values across page switches and while hidden (Streamlit >= 1.5x); without it
# a page that does not draw a widget drops its value. keep_widget_state is the older belt to it.
KEEP = "session"
FONT_SIZE = 12  # the figures' base font size (plotly's default)
PRESENT_FONT_SIZE = 16  # ... in presentation mode

INIT_LABELS = {
    "xavier": "Xavier / Glorot normal (default)",
    "uniform": "uniform [0, 1)  (seed 000)",
    "normal": "standard normal  (seed 003)",
    "he": "He normal  (seed 004)",
    "identity": "hand-built: identity head",
    "previous": "hand-built: previous-token head",
    "first": "hand-built: first-token (sink) head",
    "same": "hand-built: same-token head",
    "uniform_head": "hand-built: uniform head",
}
SCALE_LABELS = {
    "sqrt_dk": "1/√d_k  (standard)",
    "sqrt_t": "1/√T  (seed 001: number of tokens)",
    "none": "none (×1)",
    "temperature": "1/temperature",
}
MASK_LABELS = {
    "none": "none",
    "causal": "causal (no peeking ahead)",
    "padding": "padding (valid length)",
    "window": "sliding window",
    "custom": "custom (edit the grid)",
}
EMBEDDING_LABELS = {"random": "seeded random", "onehot": "one-hot", "custom": "uploaded matrix"}


def keep_widget_state() -> None:
    """Re-assign every widget value so that Streamlit keeps it across page switches."""
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith("w_"):
            st.session_state[key] = st.session_state[key]


def _seed_widgets(config: MHAConfig, view: dict | None = None) -> None:
    """Put ``config`` into the widgets' session state (only before they are drawn in a run)."""
    ss = st.session_state
    ss.w_tokens = " ".join(config.tokens)
    ss.w_cross = config.kv_tokens is not None
    ss.w_kv_tokens = " ".join(config.kv_tokens or ("a", "dog", "ran"))
    ss.w_d_model = config.d_model
    ss.w_heads = config.n_heads
    ss.w_seed = config.seed
    ss.w_init = config.init
    ss.w_bias = config.bias
    ss.w_pe = config.positional_encoding
    ss.w_scale = config.scale_rule
    ss.w_temperature = float(config.temperature)
    ss.w_mask = config.mask
    ss.w_valid_len = len(config.key_tokens) if config.valid_len is None else config.valid_len
    ss.w_window = config.window
    ss.w_embedding = config.embedding if config.embedding != "custom" else "random"
    ss.w_wo = config.output_projection
    ss.custom_grid = config.custom_mask
    ss.grid_version = ss.get("grid_version", 0) + 1
    for name, default in VIEW_DEFAULTS.items():
        ss[f"w_{name}"] = (view or {}).get(name, default)


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


def _sentence(key: str, label: str, help_text: str) -> tuple[str, ...] | None:
    tokens = tokenize(st.text_input(label, key=key, help=help_text, persist_state=KEEP))
    if not tokens:
        st.error(f"{label} is empty: type at least one word. Using the example 'the cat sat on the mat'.")
        return ("the", "cat", "sat", "on", "the", "mat")
    if len(tokens) > LIMITS["max_tokens"]:
        st.warning(
            f"{len(tokens)} tokens: the limit is {LIMITS['max_tokens']}, "
            f"so only the first {LIMITS['max_tokens']} are used."
        )
        return tokens[: LIMITS["max_tokens"]]
    return tokens


def _custom_grid(tokens, key_tokens, start: MHAConfig) -> tuple[tuple[bool, ...], ...]:
    """An editable checkbox grid (rows = queries, columns = keys), kept outside widget state."""
    import pandas as pd  # only this control needs pandas

    ss = st.session_state
    tq, tk = len(tokens), len(key_tokens)
    grid = ss.get("custom_grid")
    if grid is None or len(grid) != tq or any(len(r) != tk for r in grid):
        grid = tuple(tuple(True for _ in range(tk)) for _ in range(tq))
        ss.custom_grid = grid
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
        ss.custom_grid = grid
        ss.grid_version = ss.get("grid_version", 0) + 1
    columns = token_labels(key_tokens)
    frame = pd.DataFrame(list(grid), index=token_labels(tokens), columns=columns)
    edited = st.data_editor(
        frame,
        key=f"grid_{ss.get('grid_version', 0)}",
        num_rows="fixed",
        width="stretch",
        column_config={c: st.column_config.CheckboxColumn(c, width="small") for c in columns},
    )
    grid = tuple(tuple(bool(v) for v in row) for row in edited.to_numpy())
    ss.custom_grid = grid
    st.caption("Ticked = the query (row) may attend to the key (column).")
    return grid


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
    sentence = f"**{_short(config.tokens)}**"
    if config.kv_tokens is not None:
        sentence += f" → **{_short(config.kv_tokens)}**"
    parts = [sentence, f"{config.n_heads} heads", f"mask: {MASK_LABELS[config.mask].split(' (')[0]}"]
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
        st.header("Model")
        tokens = _sentence("w_tokens", "Sentence", "Words separated by spaces; repeated words stay separate tokens.")
        cross = st.toggle("Cross-attention (keys/values from a second sentence)", key="w_cross", persist_state=KEEP)
        kv_tokens = None
        if cross:
            kv_tokens = _sentence("w_kv_tokens", "Key/value sentence", "The tokens the queries look at.")
        d_model = st.number_input(
            "d_model (model width)",
            min_value=1,
            max_value=LIMITS["max_d_model"],
            step=1,
            key="w_d_model",
            persist_state=KEEP,
        )
        choices = valid_head_counts(int(d_model))
        if ss.get("w_heads") not in choices:
            ss.w_heads = max(h for h in choices if h <= max(ss.get("w_heads") or 1, 1))
        heads = st.selectbox("Heads (only those dividing d_model)", choices, key="w_heads", persist_state=KEEP)
        st.caption(
            f"Head size d_k = {int(d_model) // heads}. Limits: {LIMITS['max_tokens']} tokens, "
            f"d_model ≤ {LIMITS['max_d_model']}, {LIMITS['max_heads']} heads."
        )
        seed = st.number_input(
            "Seed", min_value=0, max_value=LIMITS["max_seed"], step=1, key="w_seed", persist_state=KEEP
        )
        init = st.selectbox("Weights", list(INIT_LABELS), key="w_init", persist_state=KEEP, format_func=INIT_LABELS.get)
        if init in PRESET_INITS:
            st.caption(
                PRESET_DESCRIPTIONS[init] + " Inputs are hand-built too: position in dims 0-1, word in dims 2-3."
            )
        bias = st.toggle("Biases", key="w_bias", persist_state=KEEP, disabled=init in PRESET_INITS)
        output_projection = st.toggle("Output projection W_O", key="w_wo", persist_state=KEEP)

        st.header("Inputs")
        embedding = st.selectbox(
            "Embeddings",
            list(EMBEDDING_LABELS),
            key="w_embedding",
            persist_state=KEEP,
            format_func=EMBEDDING_LABELS.get,
        )
        pe = st.toggle(
            "Add sinusoidal positional encoding", key="w_pe", persist_state=KEEP, disabled=init in PRESET_INITS
        )

        st.header("Scores")
        scale = st.selectbox(
            "Scale", list(SCALE_LABELS), key="w_scale", persist_state=KEEP, format_func=SCALE_LABELS.get
        )
        temperature = float(ss.get("w_temperature", 1.0))
        if scale == "temperature":
            temperature = st.number_input(
                "Temperature",
                min_value=0.01,
                max_value=LIMITS["max_temperature"],
                step=0.1,
                key="w_temperature",
                persist_state=KEEP,
            )
        mask = st.selectbox("Mask", list(MASK_LABELS), key="w_mask", persist_state=KEEP, format_func=MASK_LABELS.get)
        key_tokens = kv_tokens or tokens
        config = MHAConfig(
            tokens=tokens,
            kv_tokens=kv_tokens,
            d_model=int(d_model),
            n_heads=int(heads),
            seed=int(seed),
            init=init,
            bias=bool(bias),
            positional_encoding=bool(pe),
            scale_rule=scale,
            temperature=float(temperature),
            mask=mask,
            output_projection=bool(output_projection),
        )
        if mask == "padding":
            ss.w_valid_len = min(int(ss.get("w_valid_len", len(key_tokens))), len(key_tokens))
            valid = st.slider(
                "Valid length (keys that are real)", 0, len(key_tokens), key="w_valid_len", persist_state=KEEP
            )
            config = replace(config, valid_len=int(valid))
        if mask == "window":
            window = st.slider(
                "Window radius |i − j| ≤", 0, max(len(key_tokens) - 1, 1), key="w_window", persist_state=KEEP
            )
            config = replace(config, window=int(window))
        if mask == "custom":
            config = replace(config, custom_mask=_custom_grid(tokens, key_tokens, config))
        if embedding == "onehot" and len(set(tokens) | set(key_tokens)) > int(d_model):
            st.error(
                f"One-hot embeddings need d_model ≥ {len(set(tokens) | set(key_tokens))} (the number of distinct "
                "words): using seeded random embeddings."
            )
        elif embedding == "custom":
            n_rows = len(tokens) + (len(kv_tokens) if kv_tokens else 0)
            table = _uploaded_embedding(n_rows, int(d_model))
            if table is not None:
                config = replace(config, embedding="custom", custom_embedding=table)
        else:
            config = replace(config, embedding=embedding)
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


def _clamp_view(config: MHAConfig) -> None:
    """Keep the chosen head, query and key inside the current shapes."""
    limits = {"w_head": config.n_heads, "w_qi": len(config.tokens), "w_kj": len(config.key_tokens)}
    for key, size in limits.items():
        clamp_choice(key, size)


def _write_url(config: MHAConfig) -> None:
    """Make the address bar describe ``config`` and the current view (only when it changed)."""
    params = params_from_config(config)
    params.update(view_params({name: st.session_state.get(f"w_{name}", d) for name, d in VIEW_DEFAULTS.items()}))
    current = st.query_params.to_dict()
    if current != params:
        st.query_params.from_dict(params)
