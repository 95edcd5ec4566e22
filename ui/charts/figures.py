"""Pure figure builders: arrays + labels in, a plotly Figure out. No streamlit in here.

Token labels carry their position ("0:the", "4:the") because plotly merges repeated
category labels. Matrices are sent as float32 (half the bytes of float64, the same picture).
Masked logits (-inf) are sent as NaN, which plotly leaves blank; the plot background behind
them is grey so that a blank cell cannot be mistaken for a value near 0.

The figures are written as plain plotly dictionaries and wrapped by ``ui.charts.sent.figure``,
which skips plotly's per-property validation (tests/test_figures.py validates every builder's output).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.colors
import plotly.graph_objects as go
from plotly.colors import make_colorscale

from ui.charts.colour_ranges import largest_weight, panel_titles
from ui.charts.labels import concat_columns, said
from ui.charts.sent import figure
from ui.charts.views import MatrixView, matrix_view
from ui.i18n import N_, _

# Colour scales that survive colour blindness: sequential for weights, diverging for signed values.
# Written out as [position, colour] lists: plotly.js knows no "_r" names, and unvalidated figures
# (see ``figure``) would otherwise reach the browser with a name it ignores.
WEIGHT_SCALE = make_colorscale(plotly.colors.sequential.Viridis)
SIGNED_SCALE = make_colorscale(plotly.colors.diverging.RdBu_r)
# What a blank (masked, -inf) cell shows: a mid grey, readable on light and dark themes.
MASKED_COLOUR = "rgba(128, 128, 128, 0.45)"
# Masked cells are drawn by a layer of their own in this solid grey (outside viridis and RdBu), with a
# cross in each cell when the cells are large enough to hold one, so they never pass for small weights.
MASKED_SOLID = "rgb(170, 170, 170)"  # light enough to stay apart from viridis' teal middle under CVD
MASKED_MARK = "rgb(30, 30, 30)"  # the × in a masked cell: 7:1 on that grey
MASKED_HOVER = N_("masked (−∞ → weight 0)")  # translated where drawn
CROSS_MAX_TOKENS = 24  # above this many tokens a cell is too small for its cross
# How wide a heatmap's cells are drawn when it spans the ~820 px main column of a 1280 px screen,
# its row labels and colour bar taken off: the column labels are thinned to fit this by default.
FULL_WIDTH_PX = 700
# Too big to draw every head: a stack of matrices with more cells than this is drawn for the chosen head only
# (the page says so, and its CSV keeps all). One number for every page, so the pages agree on "too big".
MAX_DRAWN_CELLS = 20_000
MODEBAR_PX = 24  # room above the panel titles for plotly's mode bar, so that it never covers them
# The words a single heatmap names its values, rows and columns with unless a page says otherwise (translated there).
VALUE, ROW, COLUMN = N_("value"), N_("row"), N_("column")
CONCAT_TITLE = N_("Concatenated head outputs")


def plot_text(label: str) -> str:
    """``label`` as plotly shows it literally: plotly reads ``<b>``, ``<br>`` and ``&...;`` as markup, so escape them."""
    return label.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plot_texts(labels) -> list[str]:
    """Every label through ``plot_text``."""
    return [plot_text(str(label)) for label in labels]


def for_plotly(matrix: np.ndarray) -> np.ndarray:
    """float32 copy with +-inf turned into NaN (drawn blank)."""
    out = np.asarray(matrix, dtype=np.float32).copy()
    out[~np.isfinite(out)] = np.nan
    return out


SIGNED_FLOOR = 1e-9  # the smallest half-width of a signed colour range; a matrix within it reads as all 0


def signed_range(matrix: np.ndarray) -> float:
    """Half-width of a colour range centred on 0 that covers every finite value (at least ``SIGNED_FLOOR``)."""
    finite = np.asarray(matrix)[np.isfinite(matrix)]
    return float(max(np.abs(finite).max(), SIGNED_FLOOR)) if finite.size else 1.0


def head_average(matrices: np.ndarray) -> np.ndarray:
    """Mean over the head axis: (nh, Tq, Tk) -> (Tq, Tk). A cell masked (-inf) in any head stays -inf."""
    return np.asarray(matrices, dtype=np.float64).mean(axis=0)  # (Tq, Tk)


def with_average(matrices: np.ndarray, titles: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """The heads plus one extra panel, their average: (nh, Tq, Tk) -> (nh + 1, Tq, Tk), with titles."""
    titles = titles or head_names(matrices.shape[0])
    stacked = np.concatenate([matrices, head_average(matrices)[None]], axis=0)  # (nh+1, Tq, Tk)
    return stacked, [*titles, _("average of heads")]


def head_names(n: int) -> list[str]:
    """'head 0', 'head 1', ... in the current language: the default titles of a grid's panels."""
    return [_("head {h}").format(h=h) for h in range(n)]


def _grid_shape(n_panels: int, max_cols: int) -> tuple[int, int]:
    cols = min(n_panels, max_cols)
    return -(-n_panels // cols), cols


def _domains(n: int, gap: float) -> list[tuple[float, float]]:
    """``n`` equal intervals of [0, 1] separated by ``gap``, in order."""
    size = (1.0 - gap * (n - 1)) / n
    return [(i * (size + gap), i * (size + gap) + size) for i in range(n)]


def _tick_step(n_labels: int, axis_px: float, font_size: int) -> int:
    """Show every k-th token label so that labels about one line apart do not overlap."""
    per_label = axis_px / max(n_labels, 1)
    return max(1, int(np.ceil(1.5 * font_size / max(per_label, 1e-9))))


def _category_axis(labels: list[str], axis_px: float, font_size: int, **extra) -> dict:
    """A category axis that keeps every cell but prints only every k-th label when they would overlap."""
    shown = list(labels[:: _tick_step(len(labels), axis_px, font_size)])
    return dict(
        type="category",
        tickmode="array",
        tickvals=shown,
        ticktext=shown,
        showgrid=False,
        zeroline=False,
        automargin=True,
        tickfont=dict(size=font_size),
        **extra,
    )


def _colorbar(title: str, font_size: int, height_px: int) -> dict:
    return dict(
        title=dict(text=title, side="right"),
        thickness=12 + font_size // 2,
        tickfont=dict(size=font_size),
        lenmode="pixels",
        len=min(height_px, 320),
        y=1.0,
        yanchor="top",
    )


def _colour_axis(view: MatrixView, matrices: np.ndarray, font_size: int, height_px: int,
                 colour_range: str = "fixed") -> dict:
    """A shared colour axis: sequential (0..1, or 0..the largest value shown), or diverging around 0.

    The colour bar's title says which range is in force.
    """
    value = _(view.value_name)
    if view.sequential:
        if colour_range == "max" or view.top is None:
            top = largest_weight(matrices)
            title = _("{value}, 0..{top} (largest shown)").format(value=value, top=f"{top:.3g}")
        else:
            top, title = view.top, _("{value}, fixed 0..{top}").format(value=value, top=f"{view.top:g}")
        return dict(colorscale=WEIGHT_SCALE, cmin=0.0, cmax=top, colorbar=_colorbar(title, font_size, height_px))
    bound = signed_range(matrices)
    colorbar = _colorbar(value, font_size, height_px)
    if bound <= SIGNED_FLOOR:  # nothing to tell apart (B = A): one tick, 0, not plotly's "1n, 0.5n, …, −1n"
        everywhere = _("{value}: 0 everywhere (|x| < {floor})").format(value=value, floor=f"{SIGNED_FLOOR:g}")
        colorbar.update(tickmode="array", tickvals=[0.0], ticktext=["0"], title=dict(text=everywhere, side="right"))
    return dict(colorscale=SIGNED_SCALE, cmin=-bound, cmax=bound, cmid=0.0, colorbar=colorbar)


def _per_head_axes(view: MatrixView, matrices: np.ndarray, font_size: int, height_px: int) -> dict:
    """One colour axis per panel, each 0..that panel's largest value; one colour bar, read as 0 … each head's
    max (the number is in each panel's title, ``colour_ranges.panel_titles``)."""
    axes = {}
    for h in range(matrices.shape[0]):
        name = "coloraxis" if h == 0 else f"coloraxis{h + 1}"
        axes[name] = dict(colorscale=WEIGHT_SCALE, cmin=0.0, cmax=largest_weight(matrices[h]), showscale=h == 0)
    bar = _colorbar(_("{value}: 0 … each head's max (in its title)").format(value=_(view.value_name)), font_size,
                    height_px)
    bar.update(tickmode="array", tickvals=[0.0, axes["coloraxis"]["cmax"]], ticktext=["0", _("its max")])
    axes["coloraxis"]["colorbar"] = bar
    return axes


def masked_cells(matrices: np.ndarray, kind: str, mask: np.ndarray | None) -> np.ndarray:
    """(n, Tq, Tk) booleans, True where the cell is masked: from ``mask`` (True = may attend), and -inf values
    of a view whose masked cells are -inf (logits)."""
    neginf = matrix_view(kind).masked_is_neginf
    masked = np.isneginf(matrices) if neginf else np.zeros(matrices.shape, dtype=bool)  # (n, Tq, Tk)
    if mask is not None:
        masked = masked | ~np.broadcast_to(np.asarray(mask, dtype=bool), matrices.shape)
    return masked


def masked_layer(values: np.ndarray, masked: np.ndarray, axes: dict, *, title: str = "",
                 view: MatrixView | None = None, hover: str = MASKED_HOVER) -> dict:
    """A heatmap over the masked cells only, solid grey with a × when the cells are large enough, whose hover says
    what masking does (``hover``, a marked text translated here; with the cell's value when the ``view`` says so).
    ``axes``: x, y and the axis names of the heatmap it covers."""
    z = np.where(masked, np.nan_to_num(values, neginf=0.0, posinf=0.0), np.nan).astype(np.float32)  # (Tq, Tk)
    number = f"{_(view.value_name)} %{{z:.4f}}<br>" if view is not None and view.hover_masked_value else ""
    layer = dict(
        type="heatmap", z=z, colorscale=[[0.0, MASKED_SOLID], [1.0, MASKED_SOLID]], showscale=False, hoverongaps=False,
        hovertemplate=f"{_('query')} %{{y}}<br>{_('key')} %{{x}}<br>{number}{said(hover)}<extra>{title}</extra>",
        **axes,
    )
    if max(masked.shape) <= CROSS_MAX_TOKENS:  # plotly writes a text template into gaps too: text per cell instead
        layer.update(text=np.where(masked, "×", "").tolist(), texttemplate="%{text}", textfont=dict(color=MASKED_MARK))
    return layer


@dataclass(frozen=True)
class GridGeometry:
    """Where the panels of an attention grid sit, in pixels and in paper fractions."""

    rows: int
    cols: int
    panel_px: int  # a panel's height
    plot_px: int  # the panels' area, the [0, 1] paper domain, in pixels
    title_px: int  # room for a panel's title above it
    label_px: int  # room for the key labels and axis title under it
    tick_font: int
    col_domains: list[tuple[float, float]]
    row_domains: list[tuple[float, float]]  # first row on top

    def place(self, h: int) -> tuple[int, int]:
        """Panel ``h``'s (row, column)."""
        return divmod(h, self.cols)


def grid_geometry(n: int, key_labels: list[str], *, max_cols: int, panel_px: int, font_size: int,
                  fit_height: int | None) -> GridGeometry:
    """The layout of ``n`` panels, at most ``max_cols`` a row; ``fit_height`` sizes them to a total height."""
    rows, cols = _grid_shape(n, max_cols)
    tick_font = max(font_size - 1, 11)
    title_px = 2 * font_size + 8
    label_px = int(0.55 * tick_font * max(map(len, key_labels))) + 12  # x labels at -45 degrees
    label_px += font_size + 12  # the axis title under them
    if fit_height is not None:
        panel_px = max(120, (fit_height - rows * (title_px + label_px)) // rows)
    plot_px = rows * panel_px + (rows - 1) * (title_px + label_px)
    return GridGeometry(
        rows, cols, panel_px, plot_px, title_px, label_px, tick_font,
        col_domains=_domains(cols, 0.025 if cols > 1 else 0.0),
        row_domains=_domains(rows, (title_px + label_px) / plot_px)[::-1],
    )


def _panel_axes(h: int, n: int, g: GridGeometry, query_labels, key_labels, *, square: bool,
                font_size: int) -> tuple[dict, dict]:
    """Panel ``h``'s x axis (keys, named under the lowest panel of a column) and y axis (queries, reversed:
    query 0 on top; named and labelled on the first panel of a row, whose labels the row shares)."""
    r, c = g.place(h)
    suffix = "" if h == 0 else str(h + 1)
    x = _category_axis(key_labels, g.panel_px * 0.9, g.tick_font, domain=g.col_domains[c], anchor=f"y{suffix}",
                       tickangle=-45, range=[-0.5, len(key_labels) - 0.5], constrain="domain")
    if h + g.cols >= n:
        x["title"] = dict(text=_("key (looked at) →"), font=dict(size=font_size))
    if square:  # few, large panels
        shared = {"scaleanchor": f"x{suffix}", "scaleratio": 1, "constrain": "domain", "showticklabels": c == 0}
    else:
        row_anchor = "y" if r == 0 else f"y{r * g.cols + 1}"
        shared = {"showticklabels": c == 0, **({} if c == 0 else {"matches": row_anchor})}
    if c == 0:
        shared["title"] = dict(text=_("query (looking) ↓"), font=dict(size=font_size))
    y = _category_axis(query_labels, g.panel_px, g.tick_font, domain=g.row_domains[r], anchor=f"x{suffix}",
                       range=[len(query_labels) - 0.5, -0.5], **shared)
    return x, y


def _panel_title(h: int, g: GridGeometry, title: str, font_size: int) -> dict:
    """Panel ``h``'s title, centred above it."""
    r, c = g.place(h)
    return dict(text=title, showarrow=False, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                x=sum(g.col_domains[c]) / 2, y=g.row_domains[r][1], font=dict(size=font_size + 2))


def _square_width(g: GridGeometry, query_labels, key_labels, font_size: int) -> int:
    """A figure width that keeps square cells at the panels' height, labels and colour bar included."""
    label_w = int(0.6 * g.tick_font * max(map(len, query_labels))) + 32 + font_size  # labels + axis title
    panel_w = g.panel_px * len(key_labels) / len(query_labels)
    return int(g.cols * panel_w / (1 - 0.025 * (g.cols - 1)) + label_w + 120)


def _colorbar_below(colorbar: dict, g: GridGeometry, font_size: int) -> int:
    """Lay ``colorbar`` flat under the panels' key labels; the pixels it needs below them."""
    colorbar.update(orientation="h", lenmode="fraction", len=1.0, x=0.5, xanchor="center", yanchor="top",
                    y=-(g.label_px + 4) / g.plot_px, title=dict(colorbar["title"], side="top"))
    return 3 * font_size + 30


def attention_grid(
    matrices: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    *,
    kind: str = "weights",
    titles: list[str] | None = None,
    max_cols: int = 4,
    panel_px: int = 260,
    font_size: int = 12,
    square: bool = False,
    fit_height: int | None = None,
    mask: np.ndarray | None = None,
    colour_range: str = "fixed",
    colorbar_below: bool = False,
) -> go.Figure:
    """One heatmap per head, all on one shared colour axis. ``matrices`` has shape (nh, Tq, Tk);
    ``kind`` names a ``ui.charts.views`` record: its scale (sequential weights fixed 0..1 by default so
    heads are comparable, ``colour_range`` "max": 0..the largest shown, "head": each panel 0..its own;
    diverging around 0 for signed values) and the word for a cell. Masked cells (``mask`` False,
    broadcastable to (nh, Tq, Tk), and -inf logits) are a solid grey layer whose hover says so.
    Labels are shown literally. ``font_size`` scales every text; ``square`` keeps cells square (a few
    large panels); ``fit_height`` (pixels) makes the whole figure that tall, labels included;
    ``colorbar_below`` lays the colour bar under the panels (a phone: the panels keep the width).
    """
    view, n = matrix_view(kind), matrices.shape[0]
    per_head = view.sequential and colour_range == "head"
    titles = panel_titles(titles, matrices, per_head)
    g = grid_geometry(n, key_labels, max_cols=max_cols, panel_px=panel_px, font_size=font_size, fit_height=fit_height)
    masked = masked_cells(matrices, kind, mask)  # (n, Tq, Tk)
    query_labels, key_labels = plot_texts(query_labels), plot_texts(key_labels)
    z_all = for_plotly(matrices)
    z_all[masked] = np.nan  # drawn by the masked layer instead
    data, masked_layers, layout = [], [], {}
    query, key, value = _("query"), _("key"), _(view.value_name)  # the hover's words
    for h in range(n):
        suffix = "" if h == 0 else str(h + 1)
        axes = dict(x=key_labels, y=query_labels, xaxis=f"x{suffix}", yaxis=f"y{suffix}")
        hover = f"{query} %{{y}}<br>{key} %{{x}}<br>{value} %{{z:.4f}}<extra>{titles[h]}</extra>"
        colour = f"coloraxis{suffix}" if per_head else "coloraxis"
        data.append(dict(type="heatmap", z=z_all[h], coloraxis=colour, hoverongaps=False, hovertemplate=hover, **axes))
        if masked[h].any():
            masked_layers.append(masked_layer(matrices[h], masked[h], axes, title=titles[h], view=view))
        layout[f"xaxis{suffix}"], layout[f"yaxis{suffix}"] = _panel_axes(
            h, n, g, query_labels, key_labels, square=square, font_size=font_size)
    if square:  # a natural width, so the page can set text beside the figure
        layout["width"] = _square_width(g, query_labels, key_labels, font_size)
    if per_head:
        layout.update(_per_head_axes(view, matrices, g.tick_font, g.plot_px))
    else:
        layout["coloraxis"] = _colour_axis(view, matrices, g.tick_font, g.plot_px, colour_range)
    bar_px = _colorbar_below(layout["coloraxis"]["colorbar"], g, font_size) if colorbar_below else 0
    layout.update(
        annotations=[_panel_title(h, g, titles[h], font_size) for h in range(n)],
        height=g.plot_px + g.title_px + MODEBAR_PX + g.label_px + bar_px,
        margin=dict(l=10, r=10, t=g.title_px + MODEBAR_PX, b=g.label_px + bar_px, pad=0),
        font=dict(size=font_size),
        plot_bgcolor=MASKED_COLOUR,
    )
    return figure(data + masked_layers, layout)


def matrix_heatmap(matrix: np.ndarray, row_labels: list[str], col_labels: list[str], *,
                   allowed: np.ndarray | None = None, masked_hover: str = MASKED_HOVER, **options) -> go.Figure:
    """A single labelled heatmap of a (R, C) matrix (options: ``matrix_heatmap_parts``); cells where ``allowed``
    (R, C) is False are drawn as masked cells are everywhere (``cover_masked``)."""
    trace, layout = matrix_heatmap_parts(matrix, row_labels, col_labels, **options)
    return figure([trace, *cover_masked(trace, matrix, allowed, masked_hover)], layout)


def cover_masked(trace: dict, matrix: np.ndarray, allowed: np.ndarray | None, hover: str = MASKED_HOVER) -> list[dict]:
    """Blank the cells of a heatmap trace where ``allowed`` (R, C) is False (their colour and printed number) and
    return the grey layer with a × that covers them, as every attention figure draws a masked cell; [] when none.

    For weights that are 0 because the row cannot see the key (masked, or evicted from a cache): a dark "0.00"
    would pass for a small weight."""
    if allowed is None or np.all(allowed):
        return []
    masked = ~np.broadcast_to(np.asarray(allowed, dtype=bool), matrix.shape)  # (R, C)
    z = np.array(trace["z"], dtype=np.float32)  # (R, C), a copy
    z[masked] = np.nan
    trace["z"] = z
    if "text" in trace:
        trace["text"] = [["" if hidden else text for text, hidden in zip(row, hide, strict=True)]
                         for row, hide in zip(trace["text"], masked, strict=True)]
    axes = {name: trace[name] for name in ("x", "y", "xaxis", "yaxis") if name in trace}
    return [masked_layer(matrix, masked, axes, hover=hover)]


def matrix_heatmap_parts(
    matrix: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    *,
    title: str = "",
    value_name: str = VALUE,
    signed: bool = True,
    zmin: float | None = None,
    zmax: float | None = None,
    height: int | None = None,
    font_size: int = 12,
    row_name: str = ROW,
    col_name: str = COLUMN,
    width_px: float = FULL_WIDTH_PX,
    width: int | None = None,
) -> tuple[dict, dict]:
    """The trace and layout of ``matrix_heatmap``, as dictionaries for builders that add to them.

    A (R, C) matrix, diverging and centred on 0 when ``signed``.

    Hover reads "<row_name> <row label> / <col_name> <col label> / <value_name> <number>"; the three names are
    shown through ``_`` (a marked word such as the defaults, or a page's text already translated).
    ``width_px``: how wide the cells are drawn on the page (the figure's column minus its row
    labels and colour bar); every k-th column label is printed so that they do not overlap there.
    ``width``: the figure's own width in pixels (drawn with width="content"), None to fill its column.
    """
    if signed:
        bound = signed_range(matrix)
        zmin, zmax, scale = -bound, bound, SIGNED_SCALE
    else:
        scale = WEIGHT_SCALE
    tick_font = max(font_size - 1, 11)
    row_labels, col_labels = plot_texts(row_labels), plot_texts(col_labels)
    height = height or int(np.clip(22 * len(row_labels) + 110, 220, 560))
    value_name, row_name, col_name = said(value_name), said(row_name), said(col_name)
    row_part = f"{row_name} %{{y}}" if row_name else "%{y}"
    trace = dict(
        type="heatmap", z=for_plotly(matrix), x=col_labels, y=row_labels, zmin=zmin, zmax=zmax, colorscale=scale,
        colorbar=dict(title=dict(text=value_name, side="right"), tickfont=dict(size=tick_font)),
        hoverongaps=False, hovertemplate=f"{row_part}<br>{col_name} %{{x}}<br>{value_name} %{{z:.4f}}<extra></extra>",
    )
    layout = dict(
        height=height,
        margin=dict(l=10, r=10, t=30 + 2 * font_size if title else 10, b=10, pad=0),
        font=dict(size=font_size),
        plot_bgcolor=MASKED_COLOUR,
        xaxis=_category_axis(col_labels, width_px, tick_font, tickangle=-45, range=[-0.5, len(col_labels) - 0.5]),
        yaxis=_category_axis(row_labels, height - 100, tick_font, range=[len(row_labels) - 0.5, -0.5]),
    )
    if title:
        layout["title"] = dict(text=title, font=dict(size=font_size + 2))
    if width is not None:
        layout["width"] = width
    return trace, layout


def concat_heatmap_parts(
    concat: np.ndarray,
    query_labels: list[str],
    n_heads: int,
    *,
    title: str = CONCAT_TITLE,
    font_size: int = 12,
    width_px: float = FULL_WIDTH_PX,
) -> tuple[dict, dict]:
    """The trace and layout of ``concat_heatmap``: a line at every head boundary and the head's name above its
    block, drawn against the heatmap's own axes ("x", "y domain"), so ``heatmap_panels`` can move them."""
    width = concat.shape[1]
    hv = width // n_heads
    columns = concat_columns(width, n_heads)  # head h, its column j
    trace, layout = matrix_heatmap_parts(
        concat,
        query_labels,
        columns,
        title=said(title),
        value_name=VALUE,
        font_size=font_size,
        row_name=N_("query"),
        col_name=COLUMN,
        width_px=width_px,
    )
    lines = [
        dict(type="line", xref="x", yref="y domain", x0=h * hv - 0.5, x1=h * hv - 0.5, y0=0, y1=1,
             line=dict(color="black", width=3))
        for h in range(1, n_heads)
    ]
    step = max(1, -(-n_heads * 7 * font_size // int(width_px * 9 / 7)))  # name every k-th head when blocks are narrow
    names = [
        dict(x=h * hv + (hv - 1) / 2, xref="x", y=1.0, yref="y domain", yanchor="bottom",
             text=_("head {h}").format(h=h), showarrow=False, font=dict(size=font_size))
        for h in range(0, n_heads, step)
    ]
    layout.update(shapes=lines, annotations=names, margin={**layout["margin"], "t": 50 + 2 * font_size, "pad": 0})
    return trace, layout


def concat_heatmap(concat: np.ndarray, query_labels: list[str], n_heads: int, **options) -> go.Figure:
    """The (Tq, nh*hv) concatenation with a line at every head boundary and the head's name above its block."""
    trace, layout = concat_heatmap_parts(concat, query_labels, n_heads, **options)
    return figure([trace], layout)




def similarity_heatmap(similarity: np.ndarray, *, font_size: int = 12) -> go.Figure:
    """Cosine similarity of the heads' weight matrices, (nh, nh), on a fixed 0..1 scale."""
    names = head_names(similarity.shape[0])
    height = int(np.clip(28 * len(names) + 140, 240, 520))
    return matrix_heatmap(
        similarity,
        names,
        names,
        value_name=N_("cosine"),
        signed=False,
        zmin=0.0,
        zmax=1.0,
        font_size=font_size,
        row_name="",
        col_name=N_("and"),
        height=height,
    )
