"""The lessons as a static pack: a folder of HTML pages that any static host, an LMS or a USB stick serves.

    python -m deploy.static_pack OUT_DIR [--links FILE] [--app-url URL] [--force] [--lang {en,zh-CN,es}]

writes ``index.html``, one page per lesson (``ui.pages.lessons.LESSONS``), one per hand-built head preset
(``mha_core.presets.PRESET_INITS``) and one per link in the teacher's FILE (one link or query string a
line; blank lines and lines starting with ``#`` are skipped). The numbers are the engine's, computed now;
the heatmaps are the app's own figure builders (``ui.charts.figures``, ``ui.pipeline.panels``), drawn in the
browser by the plotly.js that ships inside the ``plotly`` Python package, one copy in ``assets/``. Nothing is
fetched at view time, and nothing of Streamlit runs at build time.

A link becomes the page it names (``LINK_PAGES``): Heads, Step by step, FlashAttention, Compare A/B and a
lesson are built as static pages of that view (a Heads page shows each head's maps as its kernel makes them,
in the kernel record's words, as the live page does: ``ui.charts.head_panels``; a Step by step page prints the
numbers in the cells as the link's ``nums`` says, by the app's rule, and says so: ``cell_numbers``); Decoding, Seed notebooks,
Real model and About are refused with the reason. A line that is not a link, names no page of the app, carries a parameter the page does not
read, or a value the app would repair (the app's own message) is reported as ``FILE:LINE: not built:
REASON`` and left out; the rest is built, and the exit status is 1 when a line was left out.

Each page has a grid layout (one column on a phone) and a presentation layout (button, ``P`` key or
``#present``: one panel large at 1280x720, the arrow keys step the panels), states the app version and
the configuration it was built from, and links to the same view of the live app (its page and every
parameter) when ``--app-url`` is given. An existing OUT_DIR is replaced only with ``--force``, and only when
it is empty or a pack this command wrote (it holds ``PACK_MARKER``).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np
import plotly
from plotly.utils import PlotlyJSONEncoder

from mha_core.config import MHAConfig, RunResult, run
from mha_core.flash import PAPER_FORMULA, flash_of_run, kernel_problem
from mha_core.kernels import attention_kernel
from mha_core.presets import PRESET_INITS, PRESETS
from ui.charts.chart_image import chart_settings, svg_button_options
from ui.charts.colour_ranges import largest_weight, offered_ranges
from ui.charts.figures import attention_grid, matrix_heatmap, signed_range
from ui.charts.head_panels import (
    missing_view,
    panel_titles,
    shown_matrices,
    shown_view,
    unoffered_colours,
    view_caption,
    with_averages,
)
from ui.charts.kernels import view_kind, weights_signed
from ui.charts.numbers import count
from ui.charts.views import kernel_views, matrix_view
from ui.i18n import DEFAULT_LANGUAGE, LANGUAGES, N_, _, current_language, sentences, using_language
from ui.pages import compare
from ui.pages.flash import (
    FLASH_SETTINGS,
    config_note,
    engine_handed_on,
    live_check,
    not_stored,
    sram_sentence,
    state_table,
    step_sentence,
    tile_map,
    tile_panels,
    traffic_table,
)
from ui.pages.heads.kernel_tables import gate_frame, head_index, sink_frame
from ui.pages.lessons import LESSONS, Lesson
from ui.pipeline.panels import panel_figure
from ui.pipeline.records import Panel as StepPanel
from ui.pipeline.records import Step, dim_labels, step_inputs
from ui.pipeline.steps import FULLY_MASKED_POLICY, build_steps, row_sums_heading, row_sums_table
from ui.state.settings import (
    COLOUR_RANGE_LABELS,
    NUMBERS_MAX_TOKENS,
    VIEW_SETTINGS,
    Setting,
    model_settings,
    numbers_shown,
    values_of,
)
from ui.state.urlstate import (
    config_from_params,
    explorer_params,
    params_from_config,
    read_settings,
    view_from_params,
    view_params,
    write_settings,
)

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).with_name("pack_assets")  # pack.css and pack.js, copied as they are
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PACK_MARKER = ".mha-explorer-pack"  # written into every pack: --force replaces only such a folder (or an empty one)
PANEL_PX = 300
STEP_PANEL_PX = 420  # a step's matrix: the width its cells get on a page, as a third of the app's column


# ---- what a page shows ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """One heatmap of a page: its plotly figure (the app's builder) and the engine array it shows (for checks)."""

    title: str
    figure: dict  # plotly's dictionary, arrays in its typed-array form
    values: np.ndarray  # (R, K) what the heatmap shows, before plotly's float32; -inf where masked


@dataclass(frozen=True)
class Section:
    """A part of a page: its text (HTML), then its heatmaps."""

    text: str
    panels: tuple[Panel, ...] = ()


@dataclass
class Page:
    """One HTML page of the pack: its sections in order (a lesson: the question and its heatmaps, then the claims;
    Step by step: one section per step)."""

    file: str
    title: str
    sections: list[Section] = field(default_factory=list)
    configuration: str = ""  # what it was built from, in words
    live_url: str = ""  # the same view in the live app ("" without --app-url)

    @property
    def panels(self) -> list[Panel]:
        """Every heatmap of the page, in page order (pack.js numbers them so)."""
        return [panel for section in self.sections for panel in section.panels]


def app_version() -> str:
    """'0.1.0 (commit 1a2b3c4)': the project's version and, in a git checkout, its commit."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{version} (commit {commit})" if commit else version


def describe(config: MHAConfig) -> str:
    """The configuration in one line, as its link parameters (every model setting, defaults included)."""
    return " · ".join(f"{k}={v}" for k, v in params_from_config(config).items())


def live_link(app_url: str, page: str, params: dict[str, str]) -> str:
    """The live app's URL of ``page`` with ``params`` ('' when no app URL was given)."""
    if not app_url:
        return ""
    path = "" if page == "heads" else page
    return f"{app_url.rstrip('/')}/{path}" + (f"?{urlencode(params)}" if params else "")


def of_heads(title: str, n_heads: int) -> str:
    """'head 2 · L₁' -> 'head 2 of 4 · L₁': a pack page shows one panel at a time in presentation, so its title
    says how many heads there are."""
    return re.sub(r"^head (\d+)", lambda m: f"head {m.group(1)} of {n_heads}", title)


def _figure_dict(figure, stem: str) -> dict:
    """The figure as the browser gets it, minus the template (one copy per page, set by pack.js) and the fixed width."""
    spec = figure.to_dict()
    layout = dict(spec["layout"])
    layout.pop("template", None)
    layout.pop("width", None)  # the page's width decides (a phone, a projector)
    return {"data": spec["data"], "layout": layout, "stem": stem}


def head_panels(result: RunResult, view: str, stem: str, *, average: bool = False,
                colours: str = "fixed") -> list[Panel]:
    """One heatmap per panel of the Heads figure: each head's maps of ``view`` as the kernel makes them (weights,
    the maps they are made from, scores; ``ui.charts.head_panels``), on one colour range as in the app; with
    ``average``, the heads' average of each map last (the Heads page's toggle); ``colours``: the weights' colour
    range."""
    trace = result.trace
    shown = shown_view(trace, view)
    matrices, titles = shown_matrices(trace, view), panel_titles(trace, view)  # (nh * maps, Tq, Tk)
    if average:
        matrices, titles = with_averages(matrices, titles, shown.panel_names)
    kind = view_kind(trace, view)  # signed weights (differential attention) diverging; the kernel's own maps
    record = matrix_view(kind)
    panels = []
    for h, title in enumerate(titles):
        figure = attention_grid(matrices[h : h + 1], result.query_labels, result.key_labels, kind=kind,
                                titles=[of_heads(title, trace.n_heads)], max_cols=1, panel_px=PANEL_PX, square=True,
                                mask=result.mask,
                                colour_range=colours)
        spec = _figure_dict(figure, f"{stem}_head{h}")
        if not record.sequential:  # a diverging range shared by all panels, as the app's one figure has
            bound = signed_range(matrices)
            spec["layout"]["coloraxis"] = {**spec["layout"]["coloraxis"], "cmin": -bound, "cmax": bound}
        elif colours == "max" or record.top is None:  # 0..the largest value over every panel of the app's figure
            spec["layout"]["coloraxis"] = {**spec["layout"]["coloraxis"], "cmin": 0.0,
                                           "cmax": largest_weight(matrices)}
        panels.append(Panel(title, spec, np.asarray(matrices[h])))
    return panels


def grid_panels(grid, stem: str) -> list[Panel]:
    """A lesson's grid (every panel on one colour scale) as one heatmap per panel."""
    panels = []
    bound = signed_range(grid.matrices)
    for i, title in enumerate(grid.titles):
        mask = None if grid.mask is None else np.broadcast_to(grid.mask, grid.matrices.shape)[i]
        figure = attention_grid(grid.matrices[i : i + 1], grid.row_labels, grid.col_labels, kind=grid.kind,
                                titles=[title], max_cols=1, panel_px=PANEL_PX, square=True, mask=mask)
        spec = _figure_dict(figure, f"{stem}_{i}")
        if grid.kind != "weights":
            spec["layout"]["coloraxis"] = {**spec["layout"]["coloraxis"], "cmin": -bound, "cmax": bound}
        panels.append(Panel(title, spec, np.asarray(grid.matrices[i])))
    return panels


def heatmap_panel(heat, stem: str) -> Panel:
    """A lesson's single heatmap on the fixed 0..1 range, as the Lessons page draws it."""
    figure = matrix_heatmap(heat.matrix, heat.row_labels, heat.col_labels, title=heat.title, value_name=heat.value_name,
                            signed=False, zmin=0.0, zmax=1.0, height=340, row_name=heat.row_name,
                            col_name=heat.col_name)
    return Panel(heat.title, _figure_dict(figure, stem), np.asarray(heat.matrix))


def _table_html(caption: str, table, index: bool = False) -> str:
    """A table in the pack's language: column and index names that are marked English keys (``N_``) are shown
    translated, as the app's pages show them; the values are untouched."""
    table = table.rename(columns={column: _(column) for column in table.columns if isinstance(column, str)})
    if isinstance(table.index.name, str):
        table.index.name = _(table.index.name)
    body = table.to_html(index=index, float_format=lambda x: f"{x:.4g}", border=0, classes="numbers")
    return f"<figure class='table'><figcaption>{html.escape(caption)}</figcaption>{body}</figure>"


def lesson_page(number: int, lesson: Lesson, app_url: str) -> Page:
    """A lesson: the confusion, the heatmaps and tables its findings compute, the claims, the explanation."""
    findings = lesson.findings(lesson.panels)
    panels: list[Panel] = []
    for i, shown in enumerate(findings.figures):
        stem = f"lesson_{lesson.key}_{i}"
        panels += grid_panels(shown, stem) if hasattr(shown, "matrices") else [heatmap_panel(shown, stem)]
    source = html.escape(lesson.source)
    if lesson.source_url:
        source = f"<a href='{html.escape(lesson.source_url)}'>{source}</a>"
    intro = f"<p class='question'>“{html.escape(lesson.question)}” — {source}</p>"
    claims = "".join(f"<li>{'✓' if c.holds else '✗'} {html.escape(c.text)}</li>" for c in findings.claims)
    after = (f"<p class='note'>{html.escape(findings.note)}</p>" if findings.note else "") + f"<ul class='claims'>{claims}</ul>"
    after += f"<p class='explanation'>{html.escape(lesson.explanation)}</p>"
    after += "".join(_table_html(caption, table) for caption, table in findings.tables)
    links = []
    for panel in lesson.panels:
        params = {**params_from_config(panel.config), **view_params(panel.view)}
        target = live_link(app_url, "heads", params)
        shown = f"<a href='{html.escape(target)}'>{html.escape(panel.caption)}</a>" if target else html.escape(panel.caption)
        links.append(f"<li>{shown}: <code>{html.escape(describe(panel.config))}</code></li>")
    configurations = _text(_("Configurations"))
    after += f"<h2>{configurations}</h2><ul class='configs'>{''.join(links)}</ul>"
    configuration = " | ".join(f"{p.caption}: {describe(p.config)}" for p in lesson.panels)
    return Page(f"lesson-{lesson.key}.html", f"{number}. {lesson.title}", [Section(intro, tuple(panels)), Section(after)],
                configuration, live_link(app_url, "lessons", {"lesson": lesson.key}))


def heads_by_queries(result: RunResult, matrix: np.ndarray, title: str, value_name: str, stem: str) -> Panel:
    """A (nh, Tq) matrix of the run as the Heads page draws a kernel's own view: heads down, queries across, 0..1."""
    figure = matrix_heatmap(matrix, list(head_index(matrix.shape[0])), result.query_labels, title=title,
                            value_name=value_name, signed=False, zmin=0.0, zmax=1.0, row_name=_("head"),
                            col_name=_("query"))
    return Panel(title, _figure_dict(figure, stem), np.asarray(matrix))


def gate_opening_sections(result: RunResult, stem: str) -> list[Section]:
    """Gated attention's view on Heads: how far each head's gate opens per token, and the first token's table."""
    parts = result.trace.kernel_parts
    heading = _text(_("How far each head's gate opens"))
    words = _("Qwen3-Next's gate is elementwise: each head has {hv} gates per token, one per value feature; the "
              "colour is their mean, 0 = the head hands on nothing for this token, 1 = all of A·V.").format(
        hv=parts.gate.shape[-1])
    heat = heads_by_queries(result, parts.opening, _("Mean gate σ(X W_θ) per head and token"), _("mean gate"), stem)
    return [Section(f"<h2>{heading}</h2><p class='note'>{_markdown(words)}</p>", (heat,)),
            Section(_table_html("", gate_frame(result), index=True))]


def sink_share_sections(result: RunResult, stem: str) -> list[Section]:
    """Learned sinks' view on Heads: the share of every row each head's sink takes, and each head's s_h."""
    heading = _text(_("What each head's sink takes"))
    words = _("Each head has one learned logit s_h, appended to every row before the softmax and dropped after "
              "it: the share it takes is what the row's keys do not get. A larger s_h, or a row whose logits are "
              "all low, gives the sink more. s_h = 0 for every head is the null key.")
    heat = heads_by_queries(result, result.trace.kernel_parts.sink_share,
                            _("Sink share 1 − Σ_j A_ij per head and token"), _("sink share"), stem)
    return [Section(f"<h2>{heading}</h2><p class='note'>{_markdown(words)}</p>", (heat,)),
            Section(_table_html("", sink_frame(result), index=True))]


# A kernel's own Heads sections by the slugs its record names (``Kernel.heads_sections``), as the Heads page finds
# them (ui/pages/heads/kernel_sections.py). A slug without one here (sparse selection's per-head ``sparse_keep``,
# drawn for the head a reader picks) is left to the live page.
PACK_KERNEL_SECTIONS: dict[str, Callable[[RunResult, str], list[Section]]] = {
    "gate_opening": gate_opening_sections,
    "sink_share": sink_share_sections,
}


def kernel_sections(result: RunResult, stem: str) -> list[Section]:
    """The pack's sections for the slugs ``result``'s kernel names, in its order."""
    return [section for slug in result.config.attention_kernel.heads_sections if slug in PACK_KERNEL_SECTIONS
            for section in PACK_KERNEL_SECTIONS[slug](result, f"{stem}_{slug}")]


def heads_page(file: str, title: str, intro: str, config: MHAConfig, view: Mapping[str, object], app_url: str,
               live_params: dict[str, str]) -> Page:
    """Every head of one configuration, as on the Heads page (the view's matrix, average and colour range)."""
    result = run(config)
    stem = file.removesuffix(".html")
    shown, colours = str(view.get("view", "weights")), str(view.get("colours", "fixed"))
    caption = view_caption(result.trace, shown, colours, None)  # None: the pack has no colour-range switch to name
    showing = _("Showing: {view}. Rows = queries, columns = keys; grey cells are masked.").format(
        view=_(shown_view(result.trace, shown).label))
    view_line = f"<p class='view'>{_text(showing)}</p><p class='note'>{_markdown(caption)}</p>"
    panels = head_panels(result, shown, stem, average=bool(view.get("avg")), colours=colours)
    return Page(file, title, [Section(intro + view_line, tuple(panels)), *kernel_sections(result, stem)],
                describe(config), live_link(app_url, "heads", live_params))


def preset_page(init: str, app_url: str) -> Page:
    """A hand-built head preset on the app's default sentence."""
    config = MHAConfig(init=init)
    intro = f"<p>{html.escape(_(PRESETS[init].description))}</p>"
    return heads_page(f"preset-{init}.html", _("Hand-built head: {init}").format(init=init), intro, config, {}, app_url,
                      params_from_config(config))


# ---- the teacher's links -------------------------------------------------------------------------


class NotBuilt(ValueError):
    """A line of the teacher's file that cannot become a page: the reasons (the app's own messages where it has them)."""

    def __init__(self, *messages: str):
        super().__init__(" ".join(messages))
        self.messages = tuple(messages)


@dataclass(frozen=True)
class Skipped:
    """A line of the teacher's file that was not built, and why."""

    line: int
    text: str
    messages: tuple[str, ...]


@dataclass(frozen=True)
class Link:
    """One line of the teacher's file read as a link: its number, its text, the page it names, its parameters."""

    number: int
    text: str
    page: str
    params: dict[str, str]  # the last value of each name wins, as in the app

    @property
    def file(self) -> str:
        return f"link-{self.number}.html"

    @property
    def intro(self) -> str:
        line = _text(_("Line {number} of the teacher's list: {link}"))
        return f"<p>{line.format(number=self.number, link=f'<code>{html.escape(self.text)}</code>')}</p>"


def read_link(number: int, text: str) -> Link:
    """A line as a link: a full address (``https://host/flash?tokens=...``), a page and its query
    (``flash?tokens=...``), a bare query (``?tokens=...``, ``tokens=...``: the Heads page) or a page's name alone.

    Raises ``NotBuilt`` for text that is none of these and for a page the app does not have.
    """
    parts = urlsplit(text)
    if parts.scheme in ("http", "https") and parts.netloc:
        path, query = parts.path, parts.query
    elif "?" in text:
        path, query = text.split("?", 1)
    elif "=" in text:
        path, query = "", text
    elif text.strip("/") in LINK_PAGES:
        path, query = text, ""
    else:
        raise NotBuilt(_("not a link: write an address of the app (https://host/step_by_step?tokens=the+cat+sat), "
                         "a page and its query (flash?tokens=a+b+c&tile=2) or a query string (?tokens=the+cat+sat)."))
    page = path.strip("/").rsplit("/", 1)[-1] or DEFAULT_LINK_PAGE
    if page not in LINK_PAGES:
        raise NotBuilt(_("'{name}' is not a page of the app (its pages: {pages}).").format(
            name=page, pages=", ".join(LINK_PAGES)))
    return Link(number, text, page, dict(parse_qsl(query, keep_blank_values=True)))


def check_names(link: Link, known: set[str]) -> None:
    """Refuse a parameter the page does not read: the app would drop it without a word (a typo, ``token=``)."""
    unknown = [name for name in link.params if name not in known]
    if unknown:
        title = _(LINK_PAGES[link.page].title)
        raise NotBuilt(*(_("`{name}` is not a parameter of the {page} page (the app would ignore it).").format(
            name=name, page=title) for name in unknown))


SIDEBAR_PARAMS = frozenset(row.param for row in (*model_settings(), *VIEW_SETTINGS))


@dataclass(frozen=True)
class Settings:
    """A sidebar page's link as the app reads it: the configuration, the view, and the page's own settings."""

    config: MHAConfig
    view: dict[str, object]
    own: dict[str, object]

    def live_params(self, rows: Sequence[Setting] = ()) -> dict[str, str]:
        """Every parameter the app writes for this view: the model's, the view's, then the page's own."""
        return {**explorer_params(self.config, self.view), **write_settings(rows, self.own)}


def read_settings_of(link: Link, rows: Sequence[Setting] = (), extra: frozenset[str] = frozenset()) -> Settings:
    """The link's model, view and page settings read by the app's own readers; any message refuses the line."""
    check_names(link, SIDEBAR_PARAMS | {row.param for row in rows} | extra)
    config, messages = config_from_params(link.params)
    view, view_messages = view_from_params(link.params, config)
    own_messages: list[str] = []
    own = read_settings(link.params, rows, values_of(config), own_messages)
    if messages or view_messages or own_messages:
        raise NotBuilt(*messages, *view_messages, *own_messages)
    return Settings(config, view, {row.name: own[row.name] for row in rows})


def _text(text: str) -> str:
    """A translated sentence as HTML text (its apostrophes kept as they are); ``{fields}`` are filled in after."""
    return html.escape(text, quote=False)


def _markdown(text: str) -> str:
    """The app's short Markdown (bold, italics, code spans, line breaks) as HTML."""
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"<em>\1</em>", out)
    return out.replace("  \n", "<br>")


def panel_of(panel: StepPanel, stem: str, width_px: float = STEP_PANEL_PX, numbers: bool = True,
             phone_numbers: bool = True) -> Panel:
    """A step's matrix as the app draws it (``ui.pipeline.panels.panel_figure``), its numbers in the cells when
    ``numbers``; ``phone_numbers`` False: pack.js leaves them out on a phone (``nums=auto``, as the app does)."""
    figure = _figure_dict(panel_figure(panel, width_px=width_px, numbers=numbers), stem)
    if not phone_numbers and panel.kind != "mask" and "text" in figure["data"][0]:  # a mask's ✓/✗: its key
        figure["phone_numbers"] = False
    return Panel(panel.title, figure, np.asarray(panel.matrix))


def cell_numbers(config: MHAConfig, choice: str) -> tuple[bool, str]:
    """Step by step's ``nums`` in the pack: whether the cells print their numbers (the app's rule, on a screen that
    is not a phone's; pack.js hides auto's on a phone) and the sentence that says so on the page."""
    tokens = max(len(config.tokens), len(config.key_tokens))
    shown = numbers_shown(choice, tokens, phone=False)
    if choice == "1":
        return shown, _("Numbers in the cells: on (nums=1 in the link), on every screen.")
    if choice == "0":
        return shown, _("Numbers in the cells: off (nums=0 in the link).")
    if shown:
        return shown, _("Numbers in the cells: auto, printed for sentences of up to {n} tokens (this one has {t}); a "
                        "phone leaves them out, as the app does.").format(n=NUMBERS_MAX_TOKENS, t=tokens)
    return shown, _("Numbers in the cells: auto, left out for sentences of more than {n} tokens (this one has {t}); "
                    "nums=1 in the link prints them.").format(n=NUMBERS_MAX_TOKENS, t=tokens)


def step_section(number: int, step: Step, stem: str, extra: str = "", numbers: bool = True,
                 phone_numbers: bool = True) -> Section:
    """A step as the Step-by-step page shows it: title, why, formula (its LaTeX source), shapes, note, matrices
    (their numbers in the cells as ``panel_of`` says)."""
    parts = [f"<h2 id='{step.slug}'>{number}. {html.escape(step.title)}</h2>"]
    if step.why:
        parts.append(f"<p>{_markdown(step.why)}</p>")
    if step.formula:
        parts.append(f"<pre class='formula'>{html.escape(step.formula)}</pre>")
    if step.shapes:
        shapes = _text(_("Shapes: {shapes}")).format(shapes=f"<code>{html.escape(step.shapes)}</code>")
        parts.append(f"<p>{shapes}</p>")
    if step.note:
        parts.append(f"<p>{_markdown(step.note)}</p>")
    panels = tuple(panel_of(p, f"{stem}_{step.slug}_{i}", numbers=numbers, phone_numbers=phone_numbers)
                   for i, p in enumerate(step.panels))
    return Section("".join(parts) + extra, panels)


def heads_link(link: Link, app_url: str) -> Page:
    """A Heads link: every head of its configuration in its view."""
    s = read_settings_of(link)
    kernel, view, colours = s.config.kernel, str(s.view["view"]), str(s.view["colours"])
    if view not in kernel_views(kernel):  # the app shows the weights instead, with this message
        raise NotBuilt(missing_view(kernel, view))
    if view == "weights" and colours not in ("fixed", *offered_ranges(attention_kernel(kernel).signed)):
        raise NotBuilt(unoffered_colours(kernel, colours, _(COLOUR_RANGE_LABELS[colours])))  # the app: fixed, this message
    title = _("Link {number}: {sentence}").format(number=link.number, sentence=" ".join(s.config.tokens))
    drawn = ("view", "avg", "colours")  # the rest (chosen head, cell, knock-out, presentation) is the live page's
    kept = {name: value for name, value in view_params(s.view).items() if name not in drawn}
    kept_line = _text(_("Kept for the live app: {params} (this page shows every head)."))
    intro = link.intro + (f"<p class='note'>{kept_line.format(params=f'<code>{html.escape(urlencode(kept))}</code>')}</p>"
                          if kept else "")
    return heads_page(link.file, title, intro, s.config, s.view, app_url, s.live_params())


def step_by_step_link(link: Link, app_url: str) -> Page:
    """A Step-by-step link: every step of its head from the embeddings to the output, the row sums of the weights."""
    s = read_settings_of(link)
    result = run(s.config)
    inputs = step_inputs(result)
    head, cell = int(s.view["head"]), (int(s.view["qi"]), int(s.view["kj"]))
    stem = link.file.removesuffix(".html")
    followed = _("Head {head} followed from the embeddings to the output; the drill-down's cell (query {query}, "
                 "key {key}) is outlined.").format(head=head, query=cell[0], key=cell[1])
    choice = str(s.view["nums"])
    numbers, said = cell_numbers(s.config, choice)
    sections = [Section(link.intro + f"<p class='view'>{_text(followed)}</p><p class='view nums'>{_text(said)}</p>")]
    for number, step in enumerate(build_steps(inputs, head, cell), start=1):
        extra = ""
        if step.slug == "softmax":
            extra = _table_html(row_sums_heading(inputs.trace).replace("**", ""), row_sums_table(inputs, head),
                                index=True)
            if inputs.trace.fully_masked[head].any():
                extra += "<p class='note'>" + _markdown(_(FULLY_MASKED_POLICY)) + "</p>"
        sections.append(step_section(number, step, stem, extra, numbers=numbers, phone_numbers=choice != "auto"))
    return Page(link.file, _("Link {number}: step by step, head {head}").format(number=link.number, head=head),
                sections, describe(s.config),
                live_link(app_url, link.page, s.live_params()))


def flash_link(link: Link, app_url: str) -> Page:
    """A FlashAttention link: its tile (``tile=``) of head ``head=`` with blocks ``br`` x ``bc``, the running state,
    the output so far beside the engine's, the tile map and the memory traffic."""
    s = read_settings_of(link, FLASH_SETTINGS)
    problem = kernel_problem(s.config)
    if problem is not None:
        raise NotBuilt(_("The tiled kernel cannot run these settings: {problem}.").format(problem=problem))
    result = run(s.config)
    head, index = int(s.view["head"]), int(s.own["tile"])
    kernel = flash_of_run(result, head, int(s.own["br"]), int(s.own["bc"]))
    step = kernel.steps[index]
    q_labels, k_labels = result.query_labels, result.key_labels
    stem = link.file.removesuffix(".html")
    check = live_check(kernel, index, result.trace)
    numbers = "<p>" + _("Step {step} of {steps} · tiles skipped so far {skipped} of {skipped_all} · max |Δ| O vs "
                        "engine {output_gap} (over the {finished} of {rows} rows finished) · max |Δ| m + log ℓ vs "
                        "log-sum-exp {lse_gap}").format(
        step=index + 1, steps=len(kernel.steps), skipped=sum(t.skipped for t in kernel.steps[: index + 1]),
        skipped_all=kernel.traffic.tiles_skipped, output_gap="—" if check.output is None else f"{check.output:.1e}",
        finished=check.rows_finished, rows=check.rows, lse_gap="—" if check.lse is None else f"{check.lse:.1e}") + "</p>"
    tiled = _text(_("The layer's attention tile by tile with the online softmax: {settings}; head {head}, B_r = {br}, "
                    "B_c = {bc}.")).format(settings=html.escape(config_note(s.config)), head=head, br=s.own["br"],
                                           bc=s.own["bc"])
    intro = (link.intro + f"<p>{tiled}</p>"
             f"<p>{_markdown(step_sentence(kernel, index, q_labels, k_labels))}</p>" + numbers)
    tile = tile_panels(step, q_labels, k_labels)
    hv = kernel.output.shape[1]
    outputs = (
        StepPanel(_("O after step {step} (head {head})").format(step=index + 1, head=head), kernel.output_after(index),
                  q_labels,
                  dim_labels(hv, head * hv), "output", row_block=step.rows),
        StepPanel(_("softmax(S) V from the engine (head {head})").format(head=head), np.asarray(result.trace.heads[head]),
                  q_labels,
                  dim_labels(hv, head * hv), "output", row_block=step.rows),
    )
    if kernel.after is not None:  # gated attention: the gate on O after the kernel, beside the engine's concatenation
        intro += f"<p>{_markdown(_(s.config.attention_kernel.after_tiles_words))}</p>"
        outputs += (
            StepPanel(_("O after step {step}, after the kernel (head {head})").format(step=index + 1, head=head),
                      kernel.handed_on_after(index), q_labels, dim_labels(hv, head * hv), "output", row_block=step.rows),
            StepPanel(_("Head {head}'s columns of the engine's concatenation").format(head=head),
                      engine_handed_on(result.trace, head), q_labels, dim_labels(hv, head * hv), "output",
                      row_block=step.rows),
        )
    point = not_stored(kernel, result)
    sections = [
        Section(intro, tuple(panel_of(p, f"{stem}_tile_{i}") for i, p in enumerate(tile))),
        Section(_table_html(_("The running state of this tile's rows"), state_table(step, q_labels), index=True),
                tuple(panel_of(p, f"{stem}_output_{i}") for i, p in enumerate(outputs))),
        Section("<p class='note'>" + _("Rows not started yet are blank. A row is finished once its last tile is done.")
                + "</p>"
                + _table_html(_("The tiles in the kernel's order (query blocks one after another; within one, the key "
                                "blocks)"), tile_map(kernel, index, q_labels, k_labels), index=True)
                + "<h2>" + _text(_("Memory traffic")) + "</h2>" + _table_html(_(PAPER_FORMULA), traffic_table(kernel.traffic), index=True)
                + f"<p>{_markdown(sram_sentence(kernel.traffic))}</p>"
                + "<h2>" + _text(_("The weights were never stored")) + "</h2><p>"
                + _markdown(_("The kernel wrote **{written}** numbers for head {head}: its output O and one log-sum-exp "
                              "per row; returning the weights would write **{weights}** more. Rebuilt from the saved "
                              "log-sum-exp: max |Δ| against the engine's weights = **{gap:.1e}**.").format(
                    written=count(point.written), head=head, weights=count(point.weights), gap=point.recomputed_gap)) + "</p>"),
    ]
    return Page(link.file, _("Link {number}: FlashAttention, tile {tile} of {tiles}").format(
        number=link.number, tile=index + 1, tiles=len(kernel.steps)), sections,
                describe(s.config) + f" · br={s.own['br']} · bc={s.own['bc']} · tile={index}",
                live_link(app_url, link.page, s.live_params(FLASH_SETTINGS)))


COMPARE_PARAMS = frozenset(f"{compare.B_PREFIX}{row.param}" for row in model_settings())


def compare_link(link: Link, app_url: str) -> Page:
    """A Compare link: head by head, A's weights, B's, and B − A (A: the link's settings; B: A with its ``b_`` ones)."""
    s = read_settings_of(link, extra=COMPARE_PARAMS)
    config_b, messages = compare.config_b(s.config, compare.b_overrides(link.params))
    if messages:
        raise NotBuilt(*messages)
    result_a, result_b = run(s.config), run(config_b)
    comparison = compare.compare(result_a, result_b)
    if isinstance(comparison, str):
        raise NotBuilt(comparison)
    labels = (result_a.query_labels, result_a.key_labels)
    kind = "signed_weights" if weights_signed(result_a.trace) or weights_signed(result_b.trace) else "weights"
    stem = link.file.removesuffix(".html")
    panels = []
    for h in range(comparison.n_heads):
        for name, matrix, mask, shown in (("A", comparison.weights_a[h], result_a.mask, kind),
                                          ("B", comparison.weights_b[h], result_b.mask, kind),
                                          ("B − A", comparison.delta[h], None, "difference")):
            title = _("{name}: head {head}").format(name=name, head=h)
            figure = attention_grid(matrix[None], *labels, kind=shown, titles=[title], max_cols=1,
                                    panel_px=PANEL_PX, square=True, mask=mask)
            spec = _figure_dict(figure, f"{stem}_{name.replace(' − ', '_minus_')}_head{h}")
            if shown == "difference":  # one scale centred on 0 for every head, as the app's one figure has
                bound = signed_range(comparison.delta)
                spec["layout"]["coloraxis"] = {**spec["layout"]["coloraxis"], "cmin": -bound, "cmax": bound}
            panels.append(Panel(title, spec, np.asarray(matrix)))
    changed = compare.differences(s.config, config_b)
    said = "; ".join(f"<strong>{html.escape(label)}</strong> {html.escape(str(a))} → {html.escape(str(b))}"
                     for label, a, b in changed) or html.escape(_("nothing (B is A)"))
    heads = compare.head_changes(comparison, *labels)
    differs = _text(_("B differs from A in: {changes}.")).format(changes=said)
    intro = (link.intro + f"<p>{differs} {html.escape(comparison.note)}</p><ul>"
             + "".join(f"<li>{html.escape(compare.summary_line(row))}</li>" for _index, row in heads.iterrows()) + "</ul>")
    live = {**s.live_params(), **compare.b_params(s.config, config_b)}
    return Page(link.file, _("Link {number}: compare A and B").format(number=link.number), [Section(intro, tuple(panels))],
                f"A: {describe(s.config)} | B: {describe(config_b)}", live_link(app_url, link.page, live))


LESSON_ROWS = tuple(row for row in VIEW_SETTINGS if row.name == "present")  # the presentation flag, read as a flag


def lesson_link(link: Link, app_url: str) -> Page:
    """A Lessons link that names a lesson (``lesson=``): that lesson's page."""
    check_names(link, {"lesson"} | {row.param for row in LESSON_ROWS})
    key = link.params.get("lesson")
    if key is None:
        raise NotBuilt(_("the Lessons overview is this pack's index: name a lesson (lessons?lesson=causal)."))
    if key not in LESSONS:
        raise NotBuilt(_("There is no lesson called '{key}'. Choose one of: {lessons}.").format(
            key=key, lessons=", ".join(LESSONS)))
    messages: list[str] = []
    present = read_settings(link.params, LESSON_ROWS, {}, messages)["present"]
    if messages:
        raise NotBuilt(*messages)
    number = list(LESSONS).index(key) + 1
    page = lesson_page(number, LESSONS[key], app_url)
    page.file, page.title = link.file, _("Link {number}: {sentence}").format(number=link.number, sentence=page.title)
    page.sections = [Section(link.intro), *page.sections]
    page.live_url = live_link(app_url, "lessons", {"lesson": key, **({"present": "1"} if present else {})})
    return page


@dataclass(frozen=True)
class LinkPage:
    """How the pack treats a link to one page of the app: the builder of its static page, or why there is none."""

    title: str
    build: Callable[[Link, str], Page] | None = None  # (link, app URL) -> the page; raises NotBuilt
    refusal: str = ""  # why the page cannot be made static (when ``build`` is None)


# One row per page of the app (ui/state/navigation.py PAGES, in its order; a test holds the two together).
LINK_PAGES = {
    "heads": LinkPage(N_("Heads"), heads_link),
    "step_by_step": LinkPage(N_("Step by step"), step_by_step_link),
    "decoding": LinkPage(N_("Decoding"), refusal=N_(
        "the Decoding page is a stepper: the token being generated and the head are chosen on the page, not in the "
        "link, so a static page could show only its first step; open it in the live app, or link the same "
        "settings with mask=causal on Heads or Step by step.")),
    "flash": LinkPage(N_("FlashAttention"), flash_link),
    "lessons": LinkPage(N_("Lessons"), lesson_link),
    "seeds": LinkPage(N_("Seed notebooks"), refusal=N_(
        "the Seed notebooks page recomputes the five seed documents, the same for every link: it has no view of "
        "a link's settings to freeze.")),
    "compare": LinkPage(N_("Compare A/B"), compare_link),
    "real_model": LinkPage(N_("Real model"), refusal=N_(
        "the Real model page runs a pretrained checkpoint on the server; the pack holds only the toy engine's "
        "numbers.")),
    "about": LinkPage(N_("About"), refusal=N_("the About page shows no numbers of a configuration.")),
}
DEFAULT_LINK_PAGE = "heads"


def link_page(number: int, text: str, app_url: str) -> Page:
    """The page of one line of the teacher's file; raises ``NotBuilt`` with the reason when there is none."""
    link = read_link(number, text)
    row = LINK_PAGES[link.page]
    if row.build is None:
        raise NotBuilt(_("{page} pages are not built: {reason}").format(page=_(row.title), reason=_(row.refusal)))
    return row.build(link, app_url)


def link_pages(lines: list[str], app_url: str) -> tuple[list[Page], list[Skipped]]:
    """A page per usable line of the teacher's file; a line that cannot be one is reported, not built."""
    pages, skipped = [], []
    for number, text in enumerate(lines, start=1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        try:
            pages.append(link_page(number, text, app_url))
        except NotBuilt as refusal:
            skipped.append(Skipped(number, text, refusal.messages))
    return pages, skipped


# ---- writing the folder --------------------------------------------------------------------------


def _script_json(value) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value, cls=PlotlyJSONEncoder, separators=(",", ":")).replace("</", "<\\/")


def render(page: Page, version: str, template: dict, nav: list[tuple[str, str]]) -> str:
    """The HTML of one page."""
    figures = [{**panel.figure, "title": panel.title,
                "config": chart_settings({"responsive": True, "displayModeBar": "hover",
                                          "toImageButtonOptions": svg_button_options("pack", panel.figure["stem"])})}
               for panel in page.panels]
    sections, i = [], 0
    for section in page.sections:
        figures_html = "".join(f"<figure class='panel' data-index='{i + k}'><div class='plot' id='plot-{i + k}'></div>"
                               f"</figure>" for k in range(len(section.panels)))
        i += len(section.panels)
        text = f"<section class='text'>{section.text}</section>" if section.text else ""
        grid = f"<section class='panels' data-count='{len(section.panels)}'>{figures_html}</section>" if figures_html else ""
        sections.append(text + grid)
    open_live = _text(_("Open this view in the live app"))
    live = f" · <a class='live' href='{html.escape(page.live_url)}'>{open_live}</a>" if page.live_url else ""
    previous, following = html.escape(_("previous panel")), html.escape(_("next panel"))
    present_hint, present = html.escape(_("P, or add #present to the address")), _text(_("Presentation"))
    more = _text(_("More pages"))
    menu = "".join(f"<a href='{html.escape(f)}'>{html.escape(t)}</a>" for f, t in nav)
    built = _text(_("Built from MHA Explorer {version}. Configuration: {configuration}")).format(
        version=html.escape(version), configuration=f"<code>{html.escape(page.configuration)}</code>")
    hover = _text(_("The numbers were computed by the app's engine when this pack was built; hover a cell for its "
                    "value.\n← → step through the panels, P switches the presentation layout."))
    return f"""<!doctype html>
<html lang="{current_language()}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(page.title)} · MHA Explorer</title>
<link rel="stylesheet" href="assets/pack.css">
</head>
<body>
<header>
<a class="home" href="index.html">MHA Explorer</a>
<h1>{html.escape(page.title)}</h1>
<nav class="controls">
<button id="prev" type="button" aria-label="{previous}">◀</button>
<span id="position"></span>
<button id="next" type="button" aria-label="{following}">▶</button>
<button id="present" type="button" title="{present_hint}">{present}</button>
</nav>
</header>
<main>
{"".join(sections)}
</main>
<footer>
<p>{built}{live}</p>
<p>{hover}</p>
<details><summary>{more}</summary><p class="menu">{menu}</p></details>
</footer>
<script src="assets/plotly.min.js"></script>
<script>window.PACK = {_script_json({"figures": figures, "template": template})};</script>
<script src="assets/pack.js"></script>
</body>
</html>
"""


def render_index(pages: list[tuple[str, list[Page]]], skipped: list[Skipped], version: str, app_url: str) -> str:
    """The index: every page by group, the lines not built and why, the version."""
    groups = "".join(
        f"<h2>{html.escape(name)}</h2><ul>"
        + "".join(f"<li><a href='{html.escape(p.file)}'>{html.escape(p.title)}</a></li>" for p in group) + "</ul>"
        for name, group in pages if group)
    problems = ""
    if skipped:
        line = _text(_("line {line} ({link}): {reasons}"))
        items = "".join("<li>" + line.format(line=s.line, link=f"<code>{html.escape(s.text)}</code>",
                                             reasons=html.escape(sentences(*s.messages))) + "</li>" for s in skipped)
        problems = "<h2>" + _text(_("Links not built")) + f"</h2><ul class='skipped'>{items}</ul>"
    live_app = _text(_("The live app:"))
    live = f"<p>{live_app} <a href='{html.escape(app_url)}'>{html.escape(app_url)}</a></p>" if app_url else ""
    built = _text(_("Built from MHA Explorer {version}.")).format(version=html.escape(version))
    pack = _text(_("lesson pack"))
    about = _text(_("Multi-head attention, every number of it: the lessons and hand-built heads of MHA Explorer, "
                    "computed when this\npack was built. No server and no network needed: open any page in a browser."))
    return f"""<!doctype html>
<html lang="{current_language()}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>MHA Explorer · {pack}</title>
<link rel="stylesheet" href="assets/pack.css">
</head>
<body class="index">
<header><h1>MHA Explorer · {pack}</h1></header>
<main>
<p>{about}</p>
{live}{groups}{problems}
</main>
<footer><p>{built}</p></footer>
</body>
</html>
"""


@dataclass(frozen=True)
class BuildReport:
    """What a build wrote and what it left out."""

    out_dir: Path
    pages: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    total_bytes: int
    seconds: float


def prepare_output(out_dir: Path, force: bool) -> None:
    """Refuse to overwrite a folder unless asked; even then only an empty one or a pack of ours."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a folder: choose another OUT_DIR")
    if not any(out_dir.iterdir()):
        return
    if not force:
        raise FileExistsError(f"{out_dir} exists and is not empty: choose another OUT_DIR, or pass --force to replace it")
    if not (out_dir / PACK_MARKER).exists():
        raise FileExistsError(f"{out_dir} is not a pack written by this command (no {PACK_MARKER}): "
                              "not deleting it even with --force; choose another OUT_DIR")


def build_pack(out_dir: Path, links: list[str] | None = None, app_url: str = "", force: bool = False,
               lang: str = DEFAULT_LANGUAGE, lessons: Sequence[str] | None = None) -> BuildReport:
    """Write the pack into ``out_dir`` (built in a temporary folder beside it, then moved into place), its prose in
    ``lang`` (a code of ``ui.i18n.LANGUAGES``; the numbers are the engine's in every language), with the lessons
    whose keys ``lessons`` names (None: every lesson; each keeps its number in the app's list)."""
    unknown = sorted(set(lessons or ()) - set(LESSONS))
    if unknown:
        raise KeyError(f"no lesson {', '.join(unknown)}; the lessons are {', '.join(LESSONS)}")
    with using_language(lang):
        return _build_pack(out_dir, links, app_url, force, lessons)


def _build_pack(out_dir: Path, links: list[str] | None, app_url: str, force: bool,
                chosen: Sequence[str] | None) -> BuildReport:
    start = time.perf_counter()
    out_dir = Path(out_dir)
    prepare_output(out_dir, force)
    version = app_version()
    lessons = [lesson_page(n, lesson, app_url) for n, (key, lesson) in enumerate(LESSONS.items(), start=1)
               if chosen is None or key in chosen]
    presets = [preset_page(init, app_url) for init in PRESET_INITS]
    linked, skipped = link_pages(links or [], app_url)
    groups = [(_("Lessons"), lessons), (_("Hand-built heads"), presets), (_("The teacher's links"), linked)]
    every = [p for _name, group in groups for p in group]
    nav = [("index.html", _("Index"))] + [(p.file, p.title) for p in every]
    template = plotly.io.templates[plotly.io.templates.default].to_plotly_json()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; a static host must read it
        (staging / "assets").mkdir()
        shutil.copyfile(PLOTLY_JS, staging / "assets" / "plotly.min.js")
        for asset in ("pack.css", "pack.js"):
            shutil.copyfile(ASSETS / asset, staging / "assets" / asset)
        for page in every:
            (staging / page.file).write_text(render(page, version, template, nav), encoding="utf-8")
        (staging / "index.html").write_text(render_index(groups, skipped, version, app_url), encoding="utf-8")
        (staging / PACK_MARKER).write_text(f"MHA Explorer {version}\n", encoding="utf-8")
        if out_dir.exists():
            shutil.rmtree(out_dir)  # prepare_output allowed it: empty, or a pack of ours with --force
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    size = sum(f.stat().st_size for f in out_dir.rglob("*") if f.is_file())
    return BuildReport(out_dir, tuple(["index.html"] + [p.file for p in every]), tuple(skipped), size,
                       time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.static_pack", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="the folder to write (must not exist, or be empty)")
    parser.add_argument("--links", type=Path, help="a text file with one app link or query string per line")
    parser.add_argument("--app-url", default="", help="the live app's address, e.g. https://mha.example.org")
    parser.add_argument("--force", action="store_true", help="replace OUT_DIR when it is a pack written earlier")
    parser.add_argument("--lang", default=DEFAULT_LANGUAGE, choices=list(LANGUAGES),
                        help=f"the pack's language (default: {DEFAULT_LANGUAGE}); the numbers are the same in each")
    parser.add_argument("--lessons", help="only these lessons, their keys joined by commas (e.g. causal,rope; "
                                              "default: every lesson)")
    args = parser.parse_args(argv)
    lines = args.links.read_text(encoding="utf-8").splitlines() if args.links else []
    chosen = [key.strip() for key in args.lessons.split(",") if key.strip()] if args.lessons is not None else None
    try:
        report = build_pack(args.out_dir, lines, args.app_url, args.force, args.lang, chosen)
    except (FileExistsError, KeyError) as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return 2
    for skip in report.skipped:
        print(f"{args.links}:{skip.line}: not built: {' '.join(skip.messages)}", file=sys.stderr)
    print(f"wrote {len(report.pages)} pages to {report.out_dir} ({report.total_bytes / 1e6:.1f} MB, "
          f"{report.seconds:.1f} s)" + (f"; {len(report.skipped)} link(s) not built" if report.skipped else ""))
    return 1 if report.skipped else 0


if __name__ == "__main__":
    raise SystemExit(main())
