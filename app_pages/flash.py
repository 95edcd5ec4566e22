"""FlashAttention: the layer's attention computed tile by tile with the online softmax, stepped one tile at a time,
checked live against the engine; the memory traffic it saves, and why it never has the weights to return."""

import numpy as np
import streamlit as st

from mha_core.flash import PAPER_FORMULA, FlashRun, flash_of_run, kernel_problem, kernel_rules_in_force
from ui.charts.numbers import count
from ui.i18n import _, sentences
from ui.pages.flash import (
    FLASH_SETTINGS,
    SETTING,
    config_note,
    engine_handed_on,
    live_check,
    not_stored,
    reads_worked,
    skipped_so_far,
    sram_sentence,
    state_table,
    step_number,
    step_sentence,
    tile_map,
    tile_panels,
    traffic_table,
)
from ui.pipeline.records import Panel, dim_labels
from ui.run.compute import compute, result_later
from ui.state import page_params
from ui.state.settings import values_of
from ui.widgets import step_views as views
from ui.widgets.number_columns import number_columns
from ui.widgets.presentation import figure_font_size
from ui.widgets.sidebar import sidebar
from ui.widgets.state import KEEP

MESSAGES = "flash_link_messages"  # session state: what the link asked for that could not be used
MAX_RUNS = 4  # a run at the caps (64 x 64 tiles of 1, hs = 64) holds 4,096 steps, 9.6 MB (measured with tracemalloc)


@st.cache_resource(max_entries=MAX_RUNS, show_spinner=False)
def cached_flash(config, head: int, block_rows: int, block_cols: int) -> FlashRun:
    """``flash_of_run`` for the cached engine result of ``config`` (bounded, shared, read-only)."""
    return flash_of_run(result_later(config), head, block_rows, block_cols)


def move_step(delta: int, last: int) -> None:
    """The previous / next buttons: one tile along, within 0..last."""
    st.session_state.w_tile = min(max(int(st.session_state.get("w_tile", 0)) + delta, 0), last)


def block_controls(values: dict, n_heads: int) -> int:
    """B_r, B_c and the head; writes the block sizes into ``values`` and returns the head."""
    left, middle, right = st.columns(3)
    for column, name in ((left, "br"), (middle, "bc")):
        row = SETTING[name]
        page_params.clamp(row, values)
        low, high = row.bounds(values)
        values[name] = int(column.number_input(_(row.label), low, high, step=1, key=row.key, persist_state=KEEP))
    return int(right.selectbox(_("Head"), range(n_heads), key="w_head", persist_state=KEEP,
                               format_func=lambda h: _("head {h}").format(h=h)))


def step_controls(values: dict) -> int:
    """The step slider with ◀ ▶ (it holds the index from 0 and reads '1 of 9' from 1); writes it into ``values``
    and returns it."""
    row = SETTING["tile"]
    index = page_params.clamp(row, values)
    last = row.bounds(values)[1]
    if last == 0:
        st.caption(_("One tile holds the whole matrix (B_r = Tq, B_c = Tk): a single step, as standard attention."))
    else:
        left, back, forward = st.columns([8, 1, 1], vertical_alignment="bottom")
        index = left.select_slider(_(row.label), range(last + 1), key=row.key, persist_state=KEEP,
                                   format_func=lambda i: step_number(i, last + 1))
        back.button("◀", key="flash_back", on_click=move_step, args=(-1, last), disabled=index == 0,
                    help=_("previous tile"))
        forward.button("▶", key="flash_next", on_click=move_step, args=(1, last), disabled=index == last,
                       help=_("next tile"))
    values["tile"] = index
    return index


def show_step(kernel: FlashRun, index: int, result) -> None:
    """The tile of this step, the running state and the output so far beside the engine's."""
    step = kernel.steps[index]
    q_labels, k_labels = result.query_labels, result.key_labels
    st.markdown(step_sentence(kernel, index, q_labels, k_labels))
    check = live_check(kernel, index, result.trace)
    skipped = skipped_so_far(kernel, index, masked=result.mask is not None)
    metrics = st.columns(3)
    metrics[0].metric(_("Tiles skipped"), skipped.value, help=_("So far, of all the mask lets it skip."))
    metrics[1].metric("max |Δ| O vs engine", "—" if check.output is None else f"{check.output:.1e}",
                      help=_("Over the {finished} of {rows} query rows finished by this step.").format(
                          finished=check.rows_finished, rows=check.rows))
    metrics[2].metric("max |Δ| m + log ℓ vs engine", "—" if check.lse is None else f"{check.lse:.1e}",
                      help=_("Against the engine's row log-sum-exp of its logits (with the null key's 0 when on), "
                             "over the finished rows."))
    if skipped.note:
        st.caption(skipped.note)
    font = figure_font_size()
    panels = tile_panels(step, q_labels, k_labels)
    if panels:
        views.show_panels(panels, "flash_tile", font_size=font)
    st.markdown(_("**The running state of this tile's rows**"))
    st.dataframe(state_table(step, q_labels), key="flash_state",
                 column_config=number_columns(["m_old", "m_new", _("rescale e^(m_old − m_new)"), "ℓ_old", "ℓ_new"]))
    hv = kernel.output.shape[1]
    head = kernel.head
    left, right = st.columns(2)
    width = views.plot_px(1 / 2)
    with left:
        views.show_panel(Panel(_("O after step {step} (head {head})").format(step=index + 1, head=head), kernel.output_after(index), q_labels,
                               dim_labels(hv, head * hv), _("output"), row_block=step.rows),
                         "flash_partial", width_px=width, font_size=font)
    with right:
        views.show_panel(Panel(_("softmax(S) V from the engine (head {head})").format(head=head), np.asarray(result.trace.heads[head]),
                               q_labels, dim_labels(hv, head * hv), _("output"), row_block=step.rows),
                         "flash_engine", width_px=width, font_size=font)
    st.caption(_("Rows not started yet are blank. A row is finished once its last tile is done; until then it is "
                 "O~ / ℓ over the keys seen so far, and a later tile with a larger maximum rescales it."))
    show_after_kernel(kernel, index, result, check)
    st.markdown(_("**The tiles in the kernel's order** (query blocks one after another; within one, the key blocks)"))
    st.dataframe(tile_map(kernel, index, q_labels, k_labels), key="flash_tiles")


def show_after_kernel(kernel: FlashRun, index: int, result, check) -> None:
    """What multiplies O after the kernel (``Kernel.after_tiles``: gated attention's gate), the product so far beside
    the head's columns of the engine's concatenation; nothing for a head whose O is what it hands on."""
    if kernel.after is None:
        return
    head, hv = kernel.head, kernel.output.shape[1]
    st.markdown(_("**After the kernel.** {words}").format(words=_(result.config.attention_kernel.after_tiles_words)))
    st.metric(_("max |Δ| handed on vs engine"), "—" if check.handed_on is None else f"{check.handed_on:.1e}",
              help=_("Over the {finished} of {rows} query rows finished by this step.").format(
                  finished=check.rows_finished, rows=check.rows))
    left, right = st.columns(2)
    width, font = views.plot_px(1 / 2), figure_font_size()
    with left:
        views.show_panel(Panel(_("O after step {step}, after the kernel (head {head})").format(step=index + 1, head=head),
                               kernel.handed_on_after(index), result.query_labels, dim_labels(hv, head * hv),
                               _("output"), row_block=kernel.steps[index].rows),
                         "flash_handed_on", width_px=width, font_size=font)
    with right:
        views.show_panel(Panel(_("Head {head}'s columns of the engine's concatenation").format(head=head),
                               engine_handed_on(result.trace, head), result.query_labels, dim_labels(hv, head * hv),
                               _("output"), row_block=kernel.steps[index].rows),
                         "flash_engine_handed_on", width_px=width, font_size=font)


def show_traffic(kernel: FlashRun) -> None:
    st.header(_("Memory traffic"), anchor="traffic")
    traffic = kernel.traffic
    st.markdown(
        _("One head, counted in numbers moved between the GPU's large, slow memory (HBM) and its small on-chip "
          "memory (SRAM). Standard attention writes the {tq}×{tk} scores, reads them back for the "
          "softmax, writes the weights and reads them again for P·V. The tiled kernel reads each query block once "
          "and the keys and values once per query block, and writes only O and one log-sum-exp per row.")
        .format(tq=traffic.tq, tk=traffic.tk))
    st.dataframe(traffic_table(traffic), key="flash_traffic")
    st.markdown(_("Tiled reads here: {reads}, where w_skip = {skipped_keys} is the number of keys in the "
                  "{tiles_skipped} skipped tiles, each counted at its own width (a last key tile can be shorter than "
                  "B_c).").format(reads=reads_worked(traffic), skipped_keys=traffic.skipped_keys,
                                  tiles_skipped=traffic.tiles_skipped))
    st.markdown(sram_sentence(traffic))
    st.caption(sentences(_("{text}.").format(text=_(PAPER_FORMULA)), _(
        "Masks that are rules of i and j (causal, window, padding) and a positional scheme's bias (ALiBi's) cost no "
        "reads; a custom mask's bits are not counted.")))


def show_not_stored(kernel: FlashRun, result) -> None:
    st.header(_("The weights were never stored"), anchor="never-stored")
    point = not_stored(kernel, result)
    st.markdown(
        _("The kernel wrote **{written}** numbers for head {head}: its output O and one log-sum-exp "
          "per row. The attention weights existed only one tile at a time, on chip, and were overwritten by the "
          "next tile. To return them, as `need_weights=True` or `output_attentions=True` asks, it would have to "
          "write **{weights}** more numbers (Tq × Tk per head) — exactly the traffic it exists to avoid; "
          "which is why fused kernels refuse, and why libraries fall back to the slow path when asked.")
        .format(written=count(point.written), head=kernel.head, weights=count(point.weights)))
    st.markdown(
        _("What *is* saved is enough to rebuild any weight tile by tile: exp(S_ij − lse_i), as the backward pass "
          "does. Rebuilt here from the saved log-sum-exp: max |Δ| against the engine's weights = "
          "**{gap:.1e}**.").format(gap=point.recomputed_gap))


def main() -> None:
    raw = page_params.capture(FLASH_SETTINGS)
    config = sidebar()
    st.title(_("FlashAttention: attention without storing the weights"))
    result = compute(config)
    if result is None:
        return
    values = values_of(config)
    page_params.seed_and_report(FLASH_SETTINGS, raw, values, MESSAGES)
    problem = kernel_problem(config)
    if problem is not None:
        st.error(_("The tiled kernel cannot run these settings: {problem}.").format(problem=_(problem)))
        return
    st.markdown(
        _("A fused attention kernel never holds the whole matrix of scores. It takes a block of B_r queries, sweeps "
          "the keys B_c at a time, and keeps per row only the running maximum **m**, the running sum **ℓ** and an "
          "unnormalised output **O~**. When a tile brings a larger maximum, what was summed so far is multiplied by "
          "the rescale factor **e^(m_old − m_new)**. At the end O = O~ / ℓ is exactly softmax(S)·V. "
          "Here: the sidebar's layer, {config}.").format(config=config_note(config)))
    head = block_controls(values, config.n_heads)
    index = step_controls(values)
    page_params.write(FLASH_SETTINGS, values)
    kernel = cached_flash(config, head, values["br"], values["bc"])
    show_step(kernel, index, result)
    with st.expander(_("How each setting of this layer enters the tile loop")):
        st.dataframe({_("setting"): [_(r.named(config)) for r in kernel_rules_in_force(config)],
                      _("in the kernel"): [_(r.enters) for r in kernel_rules_in_force(config)]},
                     hide_index=True, key="flash_rules")
    show_traffic(kernel)
    show_not_stored(kernel, result)


main()
