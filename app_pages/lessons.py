"""Lessons: one short lesson per known learner confusion, and the hand-built head presets.

``?lesson=<key>`` opens a lesson directly, so a teacher can put one link per lesson on a slide.
This page has its own configurations and does not draw the sidebar controls.
"""

from dataclasses import replace

import streamlit as st

from mha_core.presets import PRESETS
from ui.charts import describe
from ui.charts.figures import attention_grid, matrix_heatmap
from ui.charts.marks import claim_list
from ui.i18n import LANGUAGES, _, current_language, sentences, using_language
from ui.pages.lessons import (
    LESSONS,
    PRESET_CONFIGS,
    Findings,
    Grid,
    Lesson,
    app_root,
    explorer_params,
    explorer_query,
    lesson_label,
    lesson_params,
    lesson_query,
    preset_grid,
)
from ui.state import navigation
from ui.state.address import address
from ui.state.device import chart_config, on_phone
from ui.widgets.live import show_chart
from ui.widgets.number_columns import number_columns
from ui.widgets.presentation import presentation_switch, presenting
from ui.widgets.state import KEEP

OVERVIEW = "overview"
PAGE_PATH = "lessons"  # this page's URL path (from its file name)
FONT_SIZE = 15  # readable from the back of a classroom
PRESENT_FONT_SIZE = 18  # ... and from the back of a lecture hall, in presentation mode
PHONE_FONT_SIZE = 12  # a phone held close: the colour bar and labels leave the heatmap its width


SQUARE_MAP_PX = 440  # a lone square heatmap's cells at most this tall: with its title it fits a 1280x720 projector
CELL_PX = (14, 44)  # its cells' side, least and most


def square_map_size(row_labels: list[str], col_labels: list[str], font: int) -> dict:
    """``matrix_heatmap``'s height, width and width_px (its cells' width) for a lone heatmap whose cells are square:
    ``SQUARE_MAP_PX`` tall at most, its labels and colour bar around it. A fixed height across the page's width
    squashed an 11x11 map into a strip."""
    rows, cols = len(row_labels), len(col_labels)
    cell = int(min(max(SQUARE_MAP_PX / max(rows, cols), CELL_PX[0]), CELL_PX[1]))
    left = int(0.6 * font * max(map(len, row_labels))) + 16  # the rows' labels, ~0.6 em a character
    below = int(0.45 * font * max(map(len, col_labels))) + 2 * font  # the columns' labels, turned 45 degrees
    title = 30 + 2 * font
    colour_bar = 6 * font  # the colour bar and its title on the right
    return dict(height=cell * rows + title + below, width=cell * cols + left + colour_bar, width_px=cell * cols)


def font_size() -> int:
    """The figures' font: larger for a classroom, the app's usual size on a phone (where width is scarce)."""
    if on_phone():
        return PHONE_FONT_SIZE
    return PRESENT_FONT_SIZE if presenting() else FONT_SIZE


# One entry per lesson and language: the findings depend on the lesson's key only (its configurations are fixed)
# and their sentences on the language, so the cache can never hold more than the lessons in every language; the
# saturation and sqrt(d_k) tables take 40-60 ms each.
@st.cache_data(max_entries=len(LESSONS) * len(LANGUAGES), show_spinner=False)
def lesson_findings(key: str, language: str) -> Findings:
    """The findings of lesson ``key``, their sentences in ``language``, computed once per server."""
    lesson = LESSONS[key]
    with using_language(language):
        return lesson.findings(lesson.panels)


@st.cache_data(max_entries=1, show_spinner=False)  # the presets are fixed: one grid
def cached_preset_grid() -> Grid:
    """Head 0 of every hand-built preset, computed once per server."""
    return preset_grid()


def full_link(query: str, page: str = "") -> str:
    """An absolute link when the browser's URL is known, else the query string alone."""
    root = app_root(st.context.url, PAGE_PATH)
    return f"{root}/{page}{query}" if root else f"{page}{query}"


def pick(key: str) -> None:
    """Button callback: show lesson ``key``, from its top."""
    st.session_state.lesson_pick = key
    navigation.request_top()


def draw_grid(grid: Grid, chart_key: str) -> None:
    """A lesson's panels: side by side on a wide screen, one under another on a phone (each ~full width)."""
    cols = 1 if on_phone() else grid.max_cols
    rows = -(-grid.matrices.shape[0] // cols)
    panel_px = 300 if on_phone() else 340 if cols <= 2 else 240 if rows == 1 else 190
    figure = attention_grid(
        grid.matrices,
        grid.row_labels,
        grid.col_labels,
        kind=grid.kind,
        titles=grid.titles,
        max_cols=cols,
        panel_px=panel_px,
        font_size=font_size(),
        square=cols <= 2 and not on_phone(),
        mask=grid.mask,
    )
    alt = describe.grid_lines(grid.matrices, grid.row_labels, grid.col_labels, kind=grid.kind, titles=grid.titles,
                              mask=grid.mask)
    show_chart(figure, key=chart_key, config=chart_config(grid.kind), alt=sentences(*alt))


def draw_figures(lesson: Lesson, figures) -> None:
    heatmaps = [f for f in figures if not isinstance(f, Grid)]
    for i, grid in enumerate(f for f in figures if isinstance(f, Grid)):
        draw_grid(grid, f"lesson_{lesson.key}_grid_{i}")
    if heatmaps:
        columns = [st.container() for _heat in heatmaps] if on_phone() else st.columns(len(heatmaps))
        rows, cols = heatmaps[0].matrix.shape
        lone_square = len(heatmaps) == 1 and rows == cols and not on_phone()
        heat = heatmaps[0]
        size = square_map_size(heat.row_labels, heat.col_labels, font_size()) if lone_square else {"height": 320}
        for i, (column, heat) in enumerate(zip(columns, heatmaps, strict=True)):
            figure = matrix_heatmap(
                heat.matrix,
                heat.row_labels,
                heat.col_labels,
                title=heat.title,
                value_name=heat.value_name,
                signed=False,
                zmin=0.0,
                zmax=1.0,
                font_size=font_size(),
                row_name=heat.row_name,
                col_name=heat.col_name,
                allowed=heat.allowed,
                **size,
            )
            alt = describe.describe_matrix(heat.matrix, heat.row_labels, heat.col_labels, title=heat.title,
                                           value_name=heat.value_name, row_name=heat.row_name or "row",
                                           col_name=heat.col_name or "column")
            show_chart(figure, key=f"lesson_{lesson.key}_heatmap_{i}", where=column, config=chart_config("heatmap"),
                       alt=alt, width="content" if lone_square else "stretch")


def open_button(label: str, config, view, key: str) -> None:
    """A link that opens ``config`` in the explorer in this tab (a real link: Back returns to the lesson), and
    beside it the same view in a new tab; a teacher who is presenting stays in presentation mode in both."""
    view = {**view, "present": True} if presenting() else view
    row = st.container(horizontal=True, vertical_alignment="center", gap="small", key=key)
    row.page_link(navigation.page("heads"), label=label, query_params=explorer_params(config, view),
                  icon=":material/arrow_forward:")
    row.link_button(_("New tab"), full_link(explorer_query(config, view)), icon=":material/open_in_new:")


def render_lesson(lesson: Lesson) -> None:
    keys = list(LESSONS)
    position = keys.index(lesson.key)
    st.header(f"{position + 1}. {_(lesson.title)}")
    source = f"[{_(lesson.source)}]({lesson.source_url})" if lesson.source_url else _(lesson.source)
    st.markdown(f"*“{_(lesson.question)}”* — {source}")
    if answer_hidden(lesson):
        lesson_navigation(keys, position)
        return
    findings = lesson_findings(lesson.key, current_language())
    if findings.warning:
        st.warning(findings.warning, icon=":material/warning:")
    draw_figures(lesson, findings.figures)
    if findings.note:
        st.caption(findings.note)
    st.markdown(claim_list(findings.claims))
    st.info(_(lesson.explanation), icon=":material/lightbulb:")
    for caption, table in findings.tables:
        st.caption(caption)
        shown = table.rename(columns=_)  # column names are marked where the lesson builds its table
        st.dataframe(shown, hide_index=True, column_config=number_formats(shown))
    st.subheader(_("Open in the explorer"))
    for i, panel in enumerate(lesson.panels):
        left, right = st.columns([2, 3], vertical_alignment="center")
        with left:
            open_button(_(panel.caption), panel.config, panel.view, f"lesson_open_{lesson.key}_{i}")
        with right:
            st.code(full_link(explorer_query(panel.config, {**panel.view, "present": presenting()})), language=None,
                    wrap_lines=True)
    st.caption(_("Link to this lesson, for a slide:"))
    st.code(full_link(lesson_query(lesson.key, presenting()), PAGE_PATH), language=None, wrap_lines=True)
    lesson_navigation(keys, position)


def lesson_navigation(keys: list[str], position: int) -> None:
    """Links to the previous and next lesson: real links, so the browser's Back returns to this one."""
    back, _middle, forward = st.columns([1, 2, 1])
    lessons = navigation.page(PAGE_PATH)
    if position > 0:
        with back.container(key="lesson_prev"):
            st.page_link(lessons, label=_("← previous lesson"), query_params=lesson_params(keys[position - 1], presenting()))
    if position < len(keys) - 1:
        with forward.container(key="lesson_next"):
            st.page_link(lessons, label=_("next lesson →"), query_params=lesson_params(keys[position + 1], presenting()))


def answer_hidden(lesson: Lesson) -> bool:
    """Predict first (toggle ``w_lesson_predict``): the figures, claims and explanation wait behind a Reveal
    button, once per lesson, so a class can answer the question before it sees the numbers."""
    if not st.toggle(_("Predict first: hide the answer until the class has guessed"), key="w_lesson_predict",
                     persist_state=KEEP):
        return False
    revealed = st.session_state.setdefault("lessons_revealed", set())
    if lesson.key in revealed:
        return False
    st.info(_("Answer the question first, then reveal what the numbers say."), icon=":material/help:")
    st.button(_("Reveal the answer"), key=f"lesson_reveal_{lesson.key}", on_click=revealed.add, args=(lesson.key,),
              type="primary")
    return True


def number_formats(table) -> dict:
    """Percent columns as whole percents, other decimals to 3 places, integers as they are."""
    floats = [c for c in table.columns if table[c].dtype.kind == "f"]
    percents = [c for c in floats if c.endswith("(%)")]
    return number_columns([c for c in floats if c not in percents], "%.3f") | number_columns(percents, "%.0f%%")


def render_overview() -> None:
    st.write(
        _("{n} short lessons, one for each confusion learners keep reporting about multi-head attention. Each shows "
          "a configuration that makes the point, the numbers behind it, and a link for your slides.").format(
            n=len(LESSONS))
    )
    for key, lesson in LESSONS.items():
        left, right = st.columns(2, vertical_alignment="center")
        with left:
            st.markdown(f"**{_(lesson.title)}**  \n*“{_(lesson.question)}”* ({_(lesson.source)})")
        with right:
            st.button(_("Show this lesson"), key=f"lesson_show_{key}", on_click=pick, args=(key,))
            st.code(full_link(lesson_query(key, presenting()), PAGE_PATH), language=None, wrap_lines=True)
    render_presets()


def render_presets() -> None:
    st.header(_("Hand-built heads"))
    st.write(
        _("These heads' weights are constructed, not drawn at random, so you know the pattern before you look: a "
          "good first picture before random weights. Shown here: head 0 of each, on the sentence '{sentence}'.").format(
            sentence=" ".join(next(iter(PRESET_CONFIGS.values())).tokens))
    )
    grid = cached_preset_grid()
    draw_grid(replace(grid, titles=[_(title) for title in grid.titles]), "preset_grid")
    for init, config in PRESET_CONFIGS.items():
        preset = PRESETS[init]
        left, right = st.columns(2, vertical_alignment="center")
        with left:
            st.markdown(f"**{_(preset.name)}** — {_(preset.description)}")
            open_button(_("Open the {name} head").format(name=_(preset.name)), config, {}, f"preset_open_{init}")
        with right:
            st.code(full_link(explorer_query(config)), language=None, wrap_lines=True)


def requested_lesson() -> str | None:
    """The lesson the link asks for (``?lesson=``); an unknown one gets a warning and the overview."""
    requested = address().get("lesson")
    if requested is not None and requested not in LESSONS:
        st.warning(_("There is no lesson called '{requested}'. Choose one of: {keys}.").format(
            requested=requested, keys=", ".join(LESSONS)))
        return None
    return requested


def follow_link(requested: str | None) -> None:
    """Show the lesson the address bar names when a link or Back/Forward changed it (it differs from the lesson
    this page last wrote there); otherwise the picker (``lesson_pick``) is the truth."""
    ss = st.session_state
    wanted = requested or OVERVIEW
    if "lesson_pick" not in ss:
        ss.lesson_pick = wanted
    elif wanted != ss.get("lesson_written", wanted) and (requested is not None or navigation.history_navigation()):
        ss.lesson_pick = wanted
        navigation.scroll_to_top()  # a new lesson opens at its top, as a new page does


def main() -> None:
    presentation_switch()
    requested = requested_lesson()
    top = st.container()  # the overview's title goes above the picker
    follow_link(requested)
    choice = st.pills(
        _("Lesson"),
        [OVERVIEW, *LESSONS],
        key="lesson_pick",
        required=True,
        format_func=lambda k: _("All lessons") if k == OVERVIEW else lesson_label(k),
        label_visibility="collapsed",
    )
    if choice == OVERVIEW:
        if "lesson" in address():
            del address()["lesson"]
        top.title(_("Lessons"))
        st.session_state.lesson_written = OVERVIEW
        render_overview()
    else:
        address()["lesson"] = choice
        st.session_state.lesson_written = choice
        render_lesson(LESSONS[choice])


main()
