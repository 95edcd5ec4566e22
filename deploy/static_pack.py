"""The lessons as a static pack: a folder of HTML pages that any static host, an LMS or a USB stick serves.

    python -m deploy.static_pack OUT_DIR [--links FILE] [--app-url URL] [--force]

writes ``index.html``, one page per lesson (``ui.pages.lessons.LESSONS``), one per hand-built head preset
(``mha_core.presets.PRESET_INITS``) and one per link in the teacher's FILE (one link or query string a
line; blank lines and lines starting with ``#`` are skipped). The numbers are the engine's, computed now;
the heatmaps are the app's own figure builders (``ui.charts.figures``), drawn in the browser by the plotly.js that
ships inside the ``plotly`` Python package, one copy in ``assets/``. Nothing is fetched at view time.

Each page has a grid layout (one column on a phone) and a presentation layout (button, ``P`` key or
``#present``: one panel large at 1280x720, the arrow keys step the heads), states the app version and
the configuration it was built from, and links to the same view of the live app when ``--app-url`` is
given. A link in FILE that the app would repair (invalid or over the limits) is reported by its line
number with the app's own message and left out; the rest is built. An existing OUT_DIR is replaced only
with ``--force``, and only when it is empty or a pack this command wrote (it holds ``PACK_MARKER``).
"""

from __future__ import annotations

import argparse
import html
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import plotly
from plotly.utils import PlotlyJSONEncoder

from mha_core.config import MHAConfig, RunResult, run
from mha_core.presets import PRESET_INITS, PRESETS
from ui.charts.chart_image import svg_button_options
from ui.charts.figures import attention_grid, matrix_heatmap, signed_range
from ui.charts.kernels import grid_kind
from ui.charts.notebook import parse_link
from ui.charts.views import MATRIX_VIEWS, matrix_view
from ui.pages.lessons import LESSONS, Lesson
from ui.state.urlstate import config_from_params, params_from_config, view_from_params, view_params

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).with_name("pack_assets")  # pack.css and pack.js, copied as they are
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PACK_MARKER = ".mha-explorer-pack"  # written into every pack: --force replaces only such a folder (or an empty one)
PANEL_PX = 300


# ---- what a page shows ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """One heatmap of a page: its plotly figure (the app's builder) and the engine array it shows (for checks)."""

    title: str
    figure: dict  # plotly's dictionary, arrays in its typed-array form
    values: np.ndarray  # (R, K) what the heatmap shows, before plotly's float32; -inf where masked


@dataclass
class Page:
    """One HTML page of the pack."""

    file: str
    title: str
    intro: str  # HTML
    panels: list[Panel] = field(default_factory=list)
    after: str = ""  # HTML under the heatmaps
    configuration: str = ""  # what it was built from, in words
    live_url: str = ""  # the same view in the live app ("" without --app-url)


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


def _figure_dict(figure, stem: str) -> dict:
    """The figure as the browser gets it, minus the template (one copy per page, set by pack.js) and the fixed width."""
    spec = figure.to_dict()
    layout = dict(spec["layout"])
    layout.pop("template", None)
    layout.pop("width", None)  # the page's width decides (a phone, a projector)
    return {"data": spec["data"], "layout": layout, "stem": stem}


def head_panels(result: RunResult, view: str, stem: str) -> list[Panel]:
    """One heatmap per head of ``view`` (weights, logits or scores), on one colour range as in the app."""
    trace = result.trace
    matrices = MATRIX_VIEWS[view].take(trace)  # (nh, Tq, Tk)
    kind = grid_kind(trace, view)  # signed weights (differential attention) on a diverging scale
    panels = []
    for h in range(trace.n_heads):
        figure = attention_grid(matrices[h : h + 1], result.query_labels, result.key_labels, kind=kind,
                                titles=[f"head {h} of {trace.n_heads}"], max_cols=1, panel_px=PANEL_PX,
                                square=True, mask=result.mask)
        spec = _figure_dict(figure, f"{stem}_head{h}")
        if not matrix_view(kind).sequential:  # a diverging range shared by all heads, as the app's one figure has
            bound = signed_range(matrices)
            spec["layout"]["coloraxis"] = {**spec["layout"]["coloraxis"], "cmin": -bound, "cmax": bound}
        panels.append(Panel(f"head {h}", spec, np.asarray(matrices[h])))
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


def _table_html(caption: str, table) -> str:
    body = table.to_html(index=False, float_format=lambda x: f"{x:.4g}", border=0, classes="numbers")
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
    after += f"<h2>Configurations</h2><ul class='configs'>{''.join(links)}</ul>"
    configuration = " | ".join(f"{p.caption}: {describe(p.config)}" for p in lesson.panels)
    return Page(f"lesson-{lesson.key}.html", f"{number}. {lesson.title}", intro, panels, after, configuration,
                live_link(app_url, "lessons", {"lesson": lesson.key}))


def heads_page(file: str, title: str, intro: str, config: MHAConfig, view: str, app_url: str, page: str,
               extra_params: dict[str, str] | None = None) -> Page:
    """Every head of one configuration, as on the Heads page."""
    result = run(config)
    stem = file.removesuffix(".html")
    params = {**params_from_config(config), **(extra_params or {})}
    view_line = f"<p class='view'>Showing: {html.escape(MATRIX_VIEWS[view].label)}. Rows = queries, columns = keys; grey cells are masked.</p>"
    return Page(file, title, intro + view_line, head_panels(result, view, stem), "", describe(config),
                live_link(app_url, page, params))


def preset_page(init: str, app_url: str) -> Page:
    """A hand-built head preset on the app's default sentence."""
    config = MHAConfig(init=init)
    intro = f"<p>{html.escape(PRESETS[init].description)}</p>"
    return heads_page(f"preset-{init}.html", f"Hand-built head: {init}", intro, config, "weights", app_url, "heads")


@dataclass(frozen=True)
class Skipped:
    """A line of the teacher's file that was not built, and the app's messages for it."""

    line: int
    text: str
    messages: tuple[str, ...]


def link_pages(lines: list[str], app_url: str) -> tuple[list[Page], list[Skipped]]:
    """A page per usable line of the teacher's file; a line the app would repair is reported, not built."""
    pages, skipped = [], []
    for number, text in enumerate(lines, start=1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        link = parse_link(text)
        config, messages = config_from_params(link.params)
        view, view_messages = view_from_params(link.params, config)
        if messages or view_messages:
            skipped.append(Skipped(number, text, tuple(messages + view_messages)))
            continue
        intro = f"<p>Line {number} of the teacher's list: <code>{html.escape(text)}</code></p>"
        extra = view_params({"view": view["view"]}) if "view" in view else {}
        pages.append(heads_page(f"link-{number}.html", f"Link {number}: {' '.join(config.tokens)}", intro, config,
                                view.get("view", "weights"), app_url, link.page, extra))
    return pages, skipped


# ---- writing the folder --------------------------------------------------------------------------


def _script_json(value) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value, cls=PlotlyJSONEncoder, separators=(",", ":")).replace("</", "<\\/")


def render(page: Page, version: str, template: dict, nav: list[tuple[str, str]]) -> str:
    """The HTML of one page."""
    figures = [{**panel.figure, "title": panel.title,
                "image": svg_button_options("pack", panel.figure["stem"])} for panel in page.panels]
    panels = "".join(
        f"<figure class='panel' data-index='{i}'><div class='plot' id='plot-{i}'></div></figure>"
        for i in range(len(page.panels)))
    live = f" · <a class='live' href='{html.escape(page.live_url)}'>Open this view in the live app</a>" if page.live_url else ""
    menu = "".join(f"<a href='{html.escape(f)}'>{html.escape(t)}</a>" for f, t in nav)
    return f"""<!doctype html>
<html lang="en">
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
<button id="prev" type="button" aria-label="previous head">◀</button>
<span id="position"></span>
<button id="next" type="button" aria-label="next head">▶</button>
<button id="present" type="button" title="P, or add #present to the address">Presentation</button>
</nav>
</header>
<main>
<section class="intro">{page.intro}</section>
<section class="panels" data-count="{len(page.panels)}">{panels}</section>
<section class="after">{page.after}</section>
</main>
<footer>
<p>Built from MHA Explorer {html.escape(version)}. Configuration: <code>{html.escape(page.configuration)}</code>{live}</p>
<p>The numbers were computed by the app's engine when this pack was built; hover a cell for its value.
← → step through the heads, P switches the presentation layout.</p>
<details><summary>More pages</summary><p class="menu">{menu}</p></details>
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
        items = "".join(f"<li>line {s.line} (<code>{html.escape(s.text)}</code>): "
                        f"{html.escape(' '.join(s.messages))}</li>" for s in skipped)
        problems = f"<h2>Links not built</h2><ul class='skipped'>{items}</ul>"
    live = f"<p>The live app: <a href='{html.escape(app_url)}'>{html.escape(app_url)}</a></p>" if app_url else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>MHA Explorer · lesson pack</title>
<link rel="stylesheet" href="assets/pack.css">
</head>
<body class="index">
<header><h1>MHA Explorer · lesson pack</h1></header>
<main>
<p>Multi-head attention, every number of it: the lessons and hand-built heads of MHA Explorer, computed when this
pack was built. No server and no network needed: open any page in a browser.</p>
{live}{groups}{problems}
</main>
<footer><p>Built from MHA Explorer {html.escape(version)}.</p></footer>
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


def build_pack(out_dir: Path, links: list[str] | None = None, app_url: str = "", force: bool = False) -> BuildReport:
    """Write the pack into ``out_dir`` (built in a temporary folder beside it, then moved into place)."""
    start = time.perf_counter()
    out_dir = Path(out_dir)
    prepare_output(out_dir, force)
    version = app_version()
    lessons = [lesson_page(n, lesson, app_url) for n, lesson in enumerate(LESSONS.values(), start=1)]
    presets = [preset_page(init, app_url) for init in PRESET_INITS]
    linked, skipped = link_pages(links or [], app_url)
    groups = [("Lessons", lessons), ("Hand-built heads", presets), ("The teacher's links", linked)]
    every = [p for _, group in groups for p in group]
    nav = [("index.html", "Index")] + [(p.file, p.title) for p in every]
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
    args = parser.parse_args(argv)
    lines = args.links.read_text(encoding="utf-8").splitlines() if args.links else []
    try:
        report = build_pack(args.out_dir, lines, args.app_url, args.force)
    except FileExistsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for skip in report.skipped:
        print(f"{args.links}:{skip.line}: not built: {' '.join(skip.messages)}", file=sys.stderr)
    print(f"wrote {len(report.pages)} pages to {report.out_dir} ({report.total_bytes / 1e6:.1f} MB, "
          f"{report.seconds:.1f} s)" + (f"; {len(report.skipped)} link(s) not built" if report.skipped else ""))
    return 1 if report.skipped else 0


if __name__ == "__main__":
    raise SystemExit(main())
