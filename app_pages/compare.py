"""Compare A/B: the sidebar's configuration (A) against B, A with some settings changed, in one link.

B's changes travel as ``b_`` parameters (ui/pages/compare.py); its controls are the sidebar's own widgets
(``ui/widgets/sidebar.py`` WIDGETS), one per setting that applies to B, at a place of their own (``cmp_`` keys).
"""

import numpy as np
import streamlit as st

from ui.charts import describe, figures, tables
from ui.charts.kernels import weights_signed
from ui.i18n import _, sentences
from ui.pages import compare
from ui.run.compute import compute, result_later
from ui.state.address import address
from ui.state.device import chart_config, on_phone
from ui.state.settings import Setting, model_settings, values_of
from ui.state.urlstate import WRITERS
from ui.widgets.live import show_chart
from ui.widgets.sidebar import WIDGETS, sidebar
from ui.widgets.state import Place, seed_widget, widget_value

B_KINDS = ("tokens", "int", "float", "flag", "choice")  # the kinds B has a control for (not a custom grid)
B_COLUMNS = 4


def b_place(row: Setting) -> Place:
    """Where B's control of ``row`` lives: ``cmp_`` keys, a "B: " label; a change becomes a ``b_`` parameter."""
    return Place(prefix="cmp_", note_prefix="cmp_", label_prefix="B: ", link_only=True,
                 options={"on_change": _remember, "args": (row,)})


def _remember(row: Setting) -> None:
    """A B control changed: keep its value as link text (B's settings are A's link plus these)."""
    value = widget_value(row, b_place(row))
    text = "" if value is None else WRITERS[row.kind](value)  # "" = the setting's default (no second sentence)
    st.session_state.cmp_overrides = {**st.session_state.cmp_overrides, row.param: text}


def _reset() -> None:
    st.session_state.cmp_overrides = {}


def b_controls(config_b) -> None:
    """One control per setting that applies to B, showing B's value, drawn by the sidebar's widget table."""
    values = values_of(config_b)
    rows = [row for row in model_settings() if row.kind in B_KINDS and row.widget in WIDGETS and row.applies(values)]
    columns = st.columns(B_COLUMNS)
    for n, row in enumerate(rows):
        place = b_place(row)
        seed_widget(row, values, place)
        with columns[n % B_COLUMNS]:
            WIDGETS[row.widget](row, values, place)
    st.button(_("B = A again"), key="cmp_reset", on_click=_reset)


def pair_figure(comparison, result_a, result_b, head: int):
    """Head ``head`` of A and of B side by side, weights on the fixed 0..1 scale, each with its own mask; and the
    figure in words (its alt), from the same matrices."""
    tq, tk = comparison.weights_a.shape[1:]
    masks = np.stack([np.ones((tq, tk), bool) if r.mask is None else r.mask for r in (result_a, result_b)])
    matrices = np.stack([comparison.weights_a[head], comparison.weights_b[head]])  # (2, Tq, Tk)
    labels = (result_a.query_labels, result_a.key_labels)
    kind = "signed_weights" if weights_signed(result_a.trace) or weights_signed(result_b.trace) else "weights"
    titles = [_("A: head {h}").format(h=head), _("B: head {h}").format(h=head)]
    figure = figures.attention_grid(
        matrices,
        *labels,
        titles=titles,
        kind=kind,
        max_cols=1 if on_phone() else 2,  # a phone: A above B
        panel_px=300,
        square=not on_phone(),
        mask=masks,
    )
    return figure, sentences(*describe.grid_lines(matrices, *labels, kind=kind, titles=titles, mask=masks))


def delta_figure(comparison, result_a):
    """B − A for every head on a scale centred on 0, and the figure in words (its alt)."""
    labels = (result_a.query_labels, result_a.key_labels)
    titles = [_("B − A, head {h}").format(h=h) for h in range(comparison.n_heads)]
    figure = figures.attention_grid(comparison.delta, *labels, kind="difference", max_cols=1 if on_phone() else 2,
                                    panel_px=170, titles=titles)
    return figure, sentences(*describe.grid_lines(comparison.delta, *labels, kind="difference", titles=titles))


def configuration_b(config_a, incoming: dict[str, str]):
    """B from the session's changes (the link's ``b_`` parameters at first); the link made to carry them.

    Returns B, the messages of reading it, and its ``b_`` parameters.
    """
    ss = st.session_state
    if "cmp_overrides" not in ss:
        ss.cmp_overrides = incoming
    config_b, messages = compare.config_b(config_a, ss.cmp_overrides)
    link = compare.b_params(config_a, config_b)
    ss.cmp_overrides = compare.b_overrides(link)  # only what differs from A
    for name, value in link.items():
        address()[name] = value
    return config_b, messages, link


def show_differences(config_a, config_b) -> None:
    changed = compare.differences(config_a, config_b)
    if not changed:
        st.info(_("B is the same as A: change one of B's settings above (e.g. B: Scale → none, or B: Mask → causal)."))
    else:
        st.markdown(_("B differs from A in: {changes}").format(
            changes="; ".join(f"**{label}** {a} → {b}" for label, a, b in changed)))


def show_comparison(comparison, result_a, result_b) -> None:
    """One line per head, the chosen head of A and B side by side, and B − A for every head."""
    changes = compare.head_changes(comparison, result_a.query_labels, result_a.key_labels)
    st.caption(comparison.note)
    if compare.differences(result_a.config, result_b.config) and not np.any(comparison.delta[np.isfinite(comparison.delta)]):
        st.info(_("B's change leaves every head's weights as they were: B − A is 0 in every cell."))  # e.g. W_O off
    st.markdown("\n".join(f"- {compare.summary_line(row)}" for _head, row in changes.iterrows()))
    left, right = st.columns([5, 4])
    with left:
        head = st.selectbox(_("Head"), list(range(comparison.n_heads)), key="cmp_head",
                            format_func=lambda h: _("head {h}").format(h=h))
        pair, alt = pair_figure(comparison, result_a, result_b, head)
        # The column's width: the figure's own (square cells) is wider than the column on most screens, and
        # st.plotly_chart's "content" was capped at the column; the live chart's "content" is not (it overflowed).
        show_chart(pair, key="cmp_pair", config=chart_config(), alt=alt)
    with right:
        delta, alt = delta_figure(comparison, result_a)
        show_chart(delta, key="cmp_delta", config=chart_config(), alt=alt)
        st.caption(_("Red: B gives the cell more weight than A; blue: less. Centred on 0."))


def downloads(config_a, config_b) -> None:
    st.download_button(_("A, B and B − A weights (CSV)"), data=lambda: weights_csv(config_a, config_b),
                       file_name="compare.csv", mime="text/csv", key="dl_compare", on_click="ignore",
                       icon=":material/download:")
    st.download_button(_("Per-head changes (CSV)"), data=lambda: head_changes_csv(config_a, config_b),
                       file_name="compare_heads.csv", mime="text/csv", key="dl_compare_heads", on_click="ignore",
                       icon=":material/download:")


def main() -> None:
    incoming = compare.b_overrides(address().to_dict())  # read before the sidebar rewrites the URL
    config_a = sidebar()
    config_b, messages, link = configuration_b(config_a, incoming)
    st.title(_("Compare A and B"))
    st.caption(_("A is the sidebar's configuration; B is A with the settings below changed. The link carries both."))
    for message in messages:
        st.warning(message)
    with st.expander(_("Configuration B"), expanded=not link):
        b_controls(config_b)
    show_differences(config_a, config_b)
    result_a, result_b = compute(config_a), compute(config_b)
    if result_a is None or result_b is None:
        return
    comparison = compare.compare(result_a, result_b)
    if isinstance(comparison, str):
        st.warning(comparison)
        return
    show_comparison(comparison, result_a, result_b)
    downloads(config_a, config_b)


# The downloads are built on click from the two frozen configs (ui.run.compute.result_later): a callable
# lives as long as its session, so it must not hold the results.
def compared_later(config_a, config_b):
    """A's result and the comparison of A with B, again from the two configs."""
    result_a = result_later(config_a)
    return result_a, compare.compare(result_a, result_later(config_b))


def weights_csv(config_a, config_b) -> bytes:
    """A's, B's and B − A's weights per head, one long table."""
    result_a, comparison = compared_later(config_a, config_b)
    titles = [f"{which} head {h}" for which in ("A", "B", "B-A") for h in range(comparison.n_heads)]
    stacked = np.concatenate([comparison.weights_a, comparison.weights_b, comparison.delta])  # (3n, Tq, Tk)
    return tables.stacked_frame(stacked, titles, result_a.query_labels, result_a.key_labels).to_csv().encode()


def head_changes_csv(config_a, config_b) -> bytes:
    """Per head: how much B changes A's weights."""
    result_a, comparison = compared_later(config_a, config_b)
    return compare.head_changes(comparison, result_a.query_labels, result_a.key_labels).to_csv().encode()


main()
