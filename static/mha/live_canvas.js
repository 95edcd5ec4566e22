// Canvas first, plotly after (issue 38; imported by live.js, served from static/ as ui/widgets/live.py says): a figure whose traces are all heatmaps is drawn at once on a <canvas>,
// cell by cell, from the figure's own JSON (its typed arrays, colour scales, ranges and axis domains), while
// plotly.js is still loading (a shared link) or before Plotly.react redraws it (a control change). plotly then
// draws as always and the canvas is hidden, kept for the chart's next figure (live.js). Figures with any other trace go straight to plotly.
//
// Two layouts:
// - "exact": plotly has drawn this graph already: each subplot's cells go where plotly's own axes put its plot
//   area (_fullLayout's x/y axis _offset and _length), over plotly's old cells.
// - "estimated": plotly.js has not run yet: the plot areas come from the layout (height, margins, axis domains,
//   scaleanchor) with plotly's automargin guessed from the tick labels' measured widths and the colour bar's
//   size; the tick labels and the panel titles (paper annotations) written around them. What may differ until
//   plotly takes over: the plot areas by a few pixels (plotly measures its labels and colour bar exactly), every
//   category label written (plotly thins them where they would overlap), and no axis titles, tick marks, shapes (the
//   drill-down's outlined cell) or colour bar.

const TYPED_ARRAYS = {f4: Float32Array, f8: Float64Array, i1: Int8Array, u1: Uint8Array, i2: Int16Array,
                      u2: Uint16Array, i4: Int32Array, u4: Uint32Array};
const PLOTLY_MARGIN = {l: 80, r: 80, t: 100, b: 80};  // plotly's defaults when the figure sets none
export const PLOTLY_HEIGHT = 450;  // plotly's height for a figure that sets none (and live.js' room for a chart off screen)
const COLOURBAR_GAP = 0.02;  // a vertical colour bar's default x: 1.02 of the plot area, left-anchored

// A heatmap's z as {rows, cols, at(i, j)}: plotly's typed-array spec {dtype, bdata, shape} or nested lists;
// null for anything else (a 1-D z with x/y lists is drawn by plotly only).
function matrixOf(z) {
  if (z && typeof z.bdata === "string") {
    const shape = String(z.shape).split(",").map(Number);
    const Typed = TYPED_ARRAYS[String(z.dtype).replace(/^[<|=]/, "")];
    if (!Typed || shape.length !== 2) return null;
    const bytes = Uint8Array.from(atob(z.bdata), c => c.charCodeAt(0));
    const values = new Typed(bytes.buffer, 0, shape[0] * shape[1]);
    return {rows: shape[0], cols: shape[1], at: (i, j) => values[i * shape[1] + j]};
  }
  if (Array.isArray(z) && z.every(Array.isArray)) {
    const cols = Math.max(0, ...z.map(row => row.length));
    return {rows: z.length, cols, at: (i, j) => (z[i][j] === null || z[i][j] === undefined ? NaN : Number(z[i][j]))};
  }
  return null;
}

// A CSS colour as [r, g, b, a] (0-255, alpha 0-1), read back through a canvas context; null if not a colour.
function rgbaOf(colour, ctx) {
  ctx.fillStyle = "#010203";
  ctx.fillStyle = String(colour);
  const text = ctx.fillStyle;
  if (text === "#010203" && String(colour).replace(/\s/g, "").toLowerCase() !== "#010203") return null;
  if (text.startsWith("#")) return [1, 3, 5].map(k => parseInt(text.slice(k, k + 2), 16)).concat(1);
  const parts = text.match(/[\d.]+/g).map(Number);
  return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
}

// The colour of value v on a scale [[position, colour], ...] over [low, high]: channels interpolated linearly,
// clamped at the ends, as plotly's makeColorScaleFunc does.
function scaleFunction(scale, low, high, reverse, ctx) {
  let stops = scale.map(([at, colour]) => [Number(at), rgbaOf(colour, ctx)]);
  if (stops.some(([at, rgba]) => !Number.isFinite(at) || !rgba)) return null;
  if (reverse) stops = stops.map(([at, rgba]) => [1 - at, rgba]).reverse();
  const span = high - low;
  return v => {
    const t = span > 0 ? Math.min(1, Math.max(0, (v - low) / span)) : 0;
    let k = 1;
    while (k < stops.length - 1 && stops[k][0] < t) k++;
    const [a0, c0] = stops[k - 1], [a1, c1] = stops[k];
    const f = a1 > a0 ? Math.min(1, Math.max(0, (t - a0) / (a1 - a0))) : 1;
    return c0.map((c, n) => c + (c1[n] - c) * f);
  };
}

// [low, high] of a colour range: the figure's if set, else the data's (centred on mid when the figure says so).
function colourRange(low, high, mid, matrices) {
  if (Number.isFinite(low) && Number.isFinite(high)) return [low, high];
  let lo = Infinity, hi = -Infinity;
  for (const m of matrices) {
    for (let i = 0; i < m.rows; i++) for (let j = 0; j < m.cols; j++) {
      const v = m.at(i, j);
      if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    }
  }
  if (Number.isFinite(low)) lo = low;
  if (Number.isFinite(high)) hi = high;
  if (Number.isFinite(mid) && lo <= hi) { const d = Math.max(hi - mid, mid - lo); lo = mid - d; hi = mid + d; }
  if (!(lo < hi)) { lo = (Number.isFinite(lo) ? lo : 0) - 0.5; hi = lo + 1; }
  return [lo, hi];
}

// Each trace's colour function (its own scale and range, or its colour axis') with its range and colour bar (the
// first trace of a colour axis carries the axis' bar), or null when one cannot be read.
function colourFunctions(traces, matrices, layout, ctx) {
  const functions = [];
  for (let k = 0; k < traces.length; k++) {
    const trace = traces[k];
    const axis = trace.coloraxis ? layout[trace.coloraxis] : null;
    if (trace.coloraxis && !axis) return null;
    const own = axis || trace;
    const [lowKey, highKey, midKey] = axis ? ["cmin", "cmax", "cmid"] : ["zmin", "zmax", "zmid"];
    const shared = axis ? matrices.filter((m, n) => traces[n].coloraxis === trace.coloraxis) : [matrices[k]];
    const [low, high] = colourRange(own[lowKey], own[highKey], own[midKey], shared);
    if (!Array.isArray(own.colorscale)) return null;  // a named scale: left to plotly
    const colour = scaleFunction(own.colorscale, low, high, !!own.reversescale, ctx);
    if (!colour) return null;
    const bar = own.showscale !== false && (!axis || functions.every(f => f.axis !== trace.coloraxis));
    functions.push({colour, low, high, axis: trace.coloraxis, bar: bar ? own.colorbar || {} : null});
  }
  return functions;
}

function axisName(ref, letter) {
  return `${letter}axis${String(ref || letter).slice(1)}`;
}

// The centres of a trace's cells along x or y: category positions (labels in the order the traces give them),
// numbers, or x0 + k·dx; the cells' edges halfway between centres.
function cellEdges(trace, letter, count, categories) {
  const labels = trace[letter];
  let centres;
  if (Array.isArray(labels) && labels.some(v => typeof v !== "number")) {
    centres = labels.slice(0, count).map(v => categories.indexOf(String(v)));
  } else if (Array.isArray(labels)) {
    centres = labels.slice(0, count).map(Number);
  } else {
    const start = Number(trace[`${letter}0`] ?? 0), step = Number(trace[`d${letter}`] ?? 1);
    centres = Array.from({length: count}, (_unused, k) => start + k * step);
  }
  if (centres.length < count || centres.some(c => !Number.isFinite(c) || c < -1e12)) return null;
  const edges = [];
  for (let k = 0; k <= count; k++) {
    if (k === 0) edges.push(centres[0] - (count > 1 ? (centres[1] - centres[0]) / 2 : 0.5));
    else if (k === count) edges.push(centres[count - 1] + (count > 1 ? (centres[count - 1] - centres[count - 2]) / 2 : 0.5));
    else edges.push((centres[k - 1] + centres[k]) / 2);
  }
  return edges;
}

// Every subplot's axes as the figure states them: name, categories, range, domain, and what constrains it.
function figureAxes(traces, layout) {
  const axes = {};
  for (const trace of traces) {
    for (const letter of ["x", "y"]) {
      const name = axisName(trace[`${letter}axis`], letter);
      const spec = layout[name] || {};
      if (spec.type && !["category", "linear", "-"].includes(spec.type)) return null;  // log, date: plotly only
      const axis = axes[name] ??= {name, letter, spec, categories: []};
      const labels = Array.isArray(trace[letter]) ? trace[letter] : [];
      if (!labels.some(v => typeof v !== "number")) continue;  // numbers: a position each, no categories
      for (const label of labels) if (!axis.categories.includes(String(label))) axis.categories.push(String(label));
    }
  }
  return axes;
}

// An axis' range [start, end] (start at the left or the bottom): the figure's, else its cells' edges.
function axisRange(axis, edges) {
  const range = axis.spec.range;
  if (Array.isArray(range) && range.length === 2 && range.every(Number.isFinite)) return range;
  const all = edges.flat();
  const span = [Math.min(...all), Math.max(...all)];
  return axis.spec.autorange === "reversed" ? span.reverse() : span;
}

// The widest text of a list in a font, in pixels.
function widest(texts, size, family, ctx) {
  ctx.font = `${size}px ${family}`;
  return Math.max(0, ...texts.map(text => ctx.measureText(String(text).replace(/<[^>]*>/g, "")).width));
}

function tickTexts(axis) {
  return Array.isArray(axis.spec.ticktext) ? axis.spec.ticktext : axis.categories;
}

function fontSize(spec, layout) {
  return Number(spec && spec.size) || Number(layout.font && layout.font.size) || 12;
}

// The plot area's margins as plotly's automargin would set them, estimated: the left margin holds the first
// column's y tick labels and title, the bottom one the lowest row's x labels (tilted as the axis says) and title,
// the right one a vertical colour bar (ticks of its range, its title written along it).
function estimatedMargins(layout, axes, colourbars, family, ctx) {
  const base = {...PLOTLY_MARGIN, ...((layout.template || {}).layout || {}).margin, ...(layout.margin || {})};
  let {l, r, b} = base;
  for (const axis of Object.values(axes)) {
    const spec = axis.spec, other = layout[axisName(spec.anchor, axis.letter === "x" ? "y" : "x")] || {};
    const atEdge = ((other.domain || [0, 1])[0] || 0) < 0.01;
    if (!atEdge || spec.showticklabels === false) continue;
    const size = fontSize(spec.tickfont, layout), labels = widest(tickTexts(axis), size, family, ctx);
    const title = spec.title && spec.title.text ? fontSize(spec.title.font, layout) + 8 : 0;
    if (axis.letter === "y") l = Math.max(l, labels + (title ? title + 10 : 18));  // measured against plotly's
    else {
      const turn = Math.abs(Number(spec.tickangle) || 0) * Math.PI / 180;
      b = Math.max(b, labels * Math.sin(turn) + size * Math.cos(turn) + title + 8);
    }
  }
  let bar = 0;
  for (const {spec, low, high} of colourbars) {
    if (spec.orientation === "h") continue;
    const size = fontSize(spec.tickfont, layout);
    const ticks = widest([low, high, (low + high) / 2].map(v => v.toPrecision(2)), size, family, ctx);
    const title = spec.title && spec.title.text ? fontSize(spec.title.font, layout) + 6 : 0;
    bar = Math.max(bar, (Number(spec.thickness) || 30) + 2 * (Number(spec.xpad) || 10) + ticks + 6 + title);
  }
  return {l, r: bar ? Math.max(r, bar) : r, t: base.t, b, bar};
}

// Keep a subplot's cells at the figure's aspect ratio (scaleanchor + constrain "domain"): the longer side shrinks
// around its middle, as plotly does.
function constrained(box, xAxis, yAxis) {
  const anchor = yAxis.spec.scaleanchor, ratio = Number(yAxis.spec.scaleratio) || 1;
  if (!anchor || anchor !== String(xAxis.name).replace("axis", "")) return box;
  const perX = box.w / Math.abs(xAxis.range[1] - xAxis.range[0]), perY = box.h / Math.abs(yAxis.range[1] - yAxis.range[0]);
  const unit = Math.min(perX, perY / ratio);
  const w = unit * Math.abs(xAxis.range[1] - xAxis.range[0]), h = unit * ratio * Math.abs(yAxis.range[1] - yAxis.range[0]);
  return {x: box.x + (box.w - w) / 2, y: box.y + (box.h - h) / 2, w, h};
}

// Whether plotly's graph on the page has the figure's subplots where the figure puts them (same height, every
// axis there with the same domain): then its plot areas are the figure's.
function sameSubplots(full, pairs, axes, layout) {
  const same = (a, b) => Array.isArray(a) && Array.isArray(b) && Math.abs(a[0] - b[0]) < 1e-9 && Math.abs(a[1] - b[1]) < 1e-9;
  return !!full && (!layout.height || full.height === Number(layout.height))
    && pairs.flat().every(name => full[name] && full[name]._length > 0 && same(full[name].domain, axes[name].spec.domain || [0, 1]));
}

// Each subplot's plot area in CSS pixels from the graph's top left, and the graph's size.
function plotAreas(plot, pairs, axes, layout, widthOf, colourbars, family, ctx) {
  const full = plot._fullLayout;
  if (sameSubplots(full, pairs, axes, layout)) {
    const boxes = pairs.map(([x, y]) => ({x: full[x]._offset, y: full[y]._offset, w: full[x]._length,
                                           h: full[y]._length}));
    return {mode: "exact", width: full.width, height: full.height, boxes};
  }
  const height = Number(layout.height) || PLOTLY_HEIGHT, width = widthOf();
  if (!(width > 0)) return null;
  const m = estimatedMargins(layout, axes, colourbars, family, ctx);
  const right = m.bar ? Math.max(m.r, (COLOURBAR_GAP * (width - m.l) + m.bar) / (1 + COLOURBAR_GAP)) : m.r;
  const W = width - m.l - right, H = height - m.t - m.b;
  if (!(W > 0 && H > 0)) return null;
  const boxes = pairs.map(([x, y]) => {
    const xd = axes[x].spec.domain || [0, 1], yd = axes[y].spec.domain || [0, 1];
    const box = {x: m.l + W * xd[0], w: W * (xd[1] - xd[0]), y: m.t + H * (1 - yd[1]), h: H * (yd[1] - yd[0])};
    return constrained(box, axes[x], axes[y]);
  });
  return {mode: "estimated", width, height, boxes, paper: {x: m.l, y: m.t, w: W, h: H}};
}

// plotly's text colour on a cell (Color.contrast): white on a dark cell, its dark grey on a light one, "dark"
// meaning closer in WCAG contrast to white than to #444.
const LIGHT_TEXT = [255, 255, 255], DARK_TEXT = [68, 68, 68];
function luminance(rgba) {
  const linear = c => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
  return 0.2126 * linear(rgba[0]) + 0.7152 * linear(rgba[1]) + 0.0722 * linear(rgba[2]);
}
function contrast(a, b) {
  const [high, low] = [luminance(a), luminance(b)].sort((p, q) => q - p);
  return (high + 0.05) / (low + 0.05);
}
function textColour(rgba) {
  const text = contrast(rgba, LIGHT_TEXT) > contrast(rgba, DARK_TEXT) ? LIGHT_TEXT : DARK_TEXT;
  return `rgb(${text.join(",")})`;
}

// What a trace prints in its cells: its text when its template is "%{text}" (the pages' `nums` numbers and the
// masked cells' ×), nothing without a template; undefined for another template (the figure is left to plotly).
function cellTexts(trace) {
  if (!trace.texttemplate) return null;
  if (trace.texttemplate !== "%{text}" || !Array.isArray(trace.text)) return undefined;
  return trace.text;
}

function rgbaText(rgba) {
  return `rgba(${Math.round(rgba[0])},${Math.round(rgba[1])},${Math.round(rgba[2])},${rgba[3]})`;
}

// One trace's cells (and their text) into its plot area; NaN cells left as they are (the plot background).
function paintTrace(ctx, scale, box, xAxis, yAxis, trace, matrix, colour, texts, layout, family, cells = true) {
  const xe = cellEdges(trace, "x", matrix.cols, xAxis.categories), ye = cellEdges(trace, "y", matrix.rows, yAxis.categories);
  const [x0, x1] = xAxis.range, [y0, y1] = yAxis.range;
  const px = v => Math.round((box.x + box.w * (v - x0) / (x1 - x0)) * scale);
  const py = v => Math.round((box.y + box.h * (y1 - v) / (y1 - y0)) * scale);  // y0 at the bottom of the area
  ctx.save();
  ctx.beginPath();
  ctx.rect(box.x * scale, box.y * scale, box.w * scale, box.h * scale);
  ctx.clip();
  if (cells && !(evenlySpaced(xe) && evenlySpaced(ye) && paintImage(ctx, matrix, colour, px, py, xe, ye))) {
    paintCells(ctx, matrix, colour, px, py, xe, ye);
  }
  if (texts) paintTexts(ctx, scale, trace, matrix, colour, texts, px, py, xe, ye, layout, family);
  ctx.restore();
}

// Whether a trace's cells are all as wide (the pages' heatmaps: one cell per category).
function evenlySpaced(edges) {
  const step = edges[1] - edges[0];
  return edges.every((edge, k) => k === 0 || Math.abs(edge - edges[k - 1] - step) <= 1e-9 * Math.abs(step));
}

// The cells as one image, one pixel a cell, drawn over the cells' span without smoothing: one drawImage for the
// panel instead of a fillRect (and a colour parsed from text) per cell, ~2,000 cells on a Step by step Seed +
// (issue 38). A cell's edge may fall one device pixel off the fillRect one. False when the span is empty.
function paintImage(ctx, matrix, colour, px, py, xe, ye) {
  const left = px(xe[0]), right = px(xe[matrix.cols]), top = py(ye[0]), bottom = py(ye[matrix.rows]);
  if (left === right || top === bottom) return false;
  const image = new ImageData(matrix.cols, matrix.rows);  // row 0 at the top, column 0 at the left, as on screen
  const flipRows = top > bottom, flipCols = left > right;
  for (let i = 0; i < matrix.rows; i++) {
    const r = flipRows ? matrix.rows - 1 - i : i;
    for (let j = 0; j < matrix.cols; j++) {
      const v = matrix.at(i, j);
      if (!Number.isFinite(v)) continue;  // transparent: the plot's background shows
      const rgba = colour(v), at = 4 * (r * matrix.cols + (flipCols ? matrix.cols - 1 - j : j));
      image.data[at] = rgba[0];
      image.data[at + 1] = rgba[1];
      image.data[at + 2] = rgba[2];
      image.data[at + 3] = rgba[3] * 255;
    }
  }
  const cells = window.__mhaCellCanvas ??= document.createElement("canvas");
  cells.width = matrix.cols;
  cells.height = matrix.rows;
  cells.getContext("2d").putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(cells, Math.min(left, right), Math.min(top, bottom), Math.abs(right - left), Math.abs(bottom - top));
  return true;
}

// The cells one rectangle each (cells of different widths).
function paintCells(ctx, matrix, colour, px, py, xe, ye) {
  for (let i = 0; i < matrix.rows; i++) {
    const top = Math.min(py(ye[i]), py(ye[i + 1])), bottom = Math.max(py(ye[i]), py(ye[i + 1]));
    for (let j = 0; j < matrix.cols; j++) {
      const v = matrix.at(i, j);
      if (!Number.isFinite(v)) continue;
      const left = Math.min(px(xe[j]), px(xe[j + 1])), right = Math.max(px(xe[j]), px(xe[j + 1]));
      ctx.fillStyle = rgbaText(colour(v));
      ctx.fillRect(left, top, right - left, bottom - top);
    }
  }
}

// The text a page prints in the cells (its numbers, a masked cell's ×), centred, in plotly's contrasting colour.
function paintTexts(ctx, scale, trace, matrix, colour, texts, px, py, xe, ye, layout, family) {
  const size = fontSize(trace.textfont, layout) * scale;
  ctx.font = `${size}px ${family}`;
  ctx.textAlign = "center";
  for (let i = 0; i < matrix.rows; i++) {
    const middle = (py(ye[i]) + py(ye[i + 1])) / 2;
    for (let j = 0; j < matrix.cols; j++) {
      const v = matrix.at(i, j), text = texts[i] ? texts[i][j] : "";
      if (!Number.isFinite(v) || text === "" || text === null || text === undefined) continue;
      ctx.fillStyle = (trace.textfont && trace.textfont.color) || textColour(colour(v));
      const lines = String(text).split(/<br\s*\/?>/i).map(line => line.replace(/<[^>]*>/g, ""));
      lines.forEach((line, n) => ctx.fillText(line, (px(xe[j]) + px(xe[j + 1])) / 2,
                                              middle + size * (0.35 + 1.3 * (n - (lines.length - 1) / 2))));
    }
  }
}

// The figure's heatmaps drawn on the chart's canvas (made when needed, laid over the plot div): true when drawn;
// false (and no canvas) when the figure holds another trace type or something the canvas cannot read.
export function drawHeatmaps(root, plot, figure, layout, theme, widthOf) {
  const traces = (figure.data || []).filter(trace => trace.visible !== false);
  if (!traces.length || traces.some(t => t.type !== "heatmap" || (t.zsmooth && t.zsmooth !== false))) return false;
  const matrices = traces.map(trace => matrixOf(trace.z));
  const texts = traces.map(cellTexts);
  const axes = figureAxes(traces, layout);
  if (matrices.some(m => !m) || texts.includes(undefined) || !axes) return false;
  const canvas = root.__mhaCanvas || document.createElement("canvas");
  const ctx = canvas.getContext("2d");
  const colours = colourFunctions(traces, matrices, layout, ctx);
  if (!colours) return false;
  const pairs = traces.map(t => [axisName(t.xaxis, "x"), axisName(t.yaxis, "y")]);
  traces.forEach((trace, k) => {
    for (const [n, letter, count] of [[0, "x", matrices[k].cols], [1, "y", matrices[k].rows]]) {
      const axis = axes[pairs[k][n]];
      axis.range ??= axisRange(axis, [cellEdges(trace, letter, count, axis.categories) || [0, 1]]);
    }
  });
  const family = theme.font, bars = colours.filter(c => c.bar).map(c => ({spec: c.bar, low: c.low, high: c.high}));
  const areas = plotAreas(plot, pairs, axes, layout, widthOf, bars, family, ctx);
  if (!areas) return false;
  const scale = window.devicePixelRatio || 1;
  canvas.className = "mha-live-canvas";
  canvas.setAttribute("aria-hidden", "true");  // the chart's alt text names what it shows
  sized(canvas, ctx, Math.round(areas.width * scale), Math.round(areas.height * scale));
  Object.assign(canvas.style, {width: `${areas.width}px`, height: `${areas.height}px`, top: `${root.__mhaPlotTop ??= plot.offsetTop}px`});
  canvas.hidden = false;
  const background = layout.plot_bgcolor || ((layout.template || {}).layout || {}).plot_bgcolor || theme.background;
  if (areas.mode === "estimated" && plot._fullLayout) {  // plotly's graph of another layout: hidden under the canvas
    ctx.fillStyle = theme.background;
    ctx.fillRect(0, 0, canvas.width, canvas.height);
  }
  ctx.fillStyle = over(background, theme.background, ctx);  // the plot's background on the page's: a NaN cell's
  for (const box of areas.boxes) ctx.fillRect(box.x * scale, box.y * scale, box.w * scale, box.h * scale);
  const paint = (cells, words) => traces.forEach((trace, k) => paintTrace(
    ctx, scale, areas.boxes[k], axes[pairs[k][0]], axes[pairs[k][1]], trace, matrices[k], colours[k].colour,
    words ? texts[k] : null, layout, family, cells));
  const wordsLater = root.__mhaNear === false && texts.some(Boolean);
  paint(true, !wordsLater);
  if (areas.mode === "estimated") drawLabels(ctx, scale, layout, areas, pairs, axes, theme);
  if (!canvas.isConnected) root.appendChild(canvas);
  root.__mhaCanvas = canvas;
  const draws = root.__mhaCanvasDraws = (root.__mhaCanvasDraws || 0) + 1;
  root.__mhaWordsLater = wordsLater ? () => { if (root.__mhaCanvasDraws === draws && !canvas.hidden) paint(false, true); } : null;
  watchNearness(root);
  root.__mhaCanvasAreas = {mode: areas.mode, boxes: Object.fromEntries(pairs.map((p, k) => [p.join("").replace(/axis/g, ""), areas.boxes[k]]))};
  if (areas.mode === "estimated") plot.style.minHeight = `${areas.height}px`;  // the room plotly will take
  return true;
}

// The numbers in the cells of a chart far from the screen are written when it comes near (half a screen away): a
// chart's words cost more than its cells (a fillText each, ~1,500 on a Step by step Seed +, issue 38), and a chart
// off screen is not seen until then. A chart is near until the observer has said otherwise.
function watchNearness(root) {
  const observer = window.__mhaNearness ??= new IntersectionObserver(entries => {
    for (const {target, isIntersecting} of entries) {
      target.__mhaNear = isIntersecting;
      const later = target.__mhaWordsLater;
      if (!isIntersecting || !later) continue;
      target.__mhaWordsLater = null;
      later();
    }
  }, {rootMargin: "50% 0px"});
  if (!root.__mhaWatched) {
    root.__mhaWatched = true;
    observer.observe(root);
  }
}

// Before plotly.js has run: the tick labels beside the panels that show them, the paper annotations (panel titles)
// and the figure's title (centred in the top margin, plotly's default), in the theme's text colour.
function drawLabels(ctx, scale, layout, areas, pairs, axes, theme) {
  ctx.save();
  ctx.scale(scale, scale);
  ctx.fillStyle = theme.text;
  const done = new Set();
  pairs.forEach(([x, y], k) => {
    for (const axis of [axes[x], axes[y]]) {
      const box = areas.boxes[k];
      if (axis.spec.showticklabels === false || done.has(axis.name) || !axis.categories.length) continue;
      done.add(axis.name);
      const labels = Array.isArray(axis.spec.tickvals) ? axis.spec.tickvals.map(String) : axis.categories;
      const texts = Array.isArray(axis.spec.ticktext) ? axis.spec.ticktext : labels;
      const [r0, r1] = axis.range, size = fontSize(axis.spec.tickfont, layout), turn = Number(axis.spec.tickangle) || 0;
      ctx.font = `${size}px ${theme.font}`;
      labels.forEach((label, n) => {
        const at = axis.categories.indexOf(label), text = String(texts[n] ?? label).replace(/<[^>]*>/g, "");
        if (at < 0) return;
        if (axis.letter === "y") {
          ctx.textAlign = "right";
          ctx.fillText(text, box.x - 6, box.y + box.h * (r1 - at) / (r1 - r0) + size * 0.35);
          return;
        }
        ctx.save();
        ctx.translate(box.x + box.w * (at - r0) / (r1 - r0), box.y + box.h + 6 + size * 0.7);
        ctx.rotate(turn * Math.PI / 180);
        ctx.textAlign = turn ? "right" : "center";
        ctx.fillText(text, 0, size * (turn ? 0.35 : 0.3));
        ctx.restore();
      });
    }
  });
  const title = layout.title && (typeof layout.title === "string" ? layout.title : layout.title.text);
  if (title) {
    const size = Number(layout.title.font && layout.title.font.size) || 1.4 * fontSize(null, layout);
    ctx.font = `${size}px ${theme.font}`;
    ctx.textAlign = "center";
    ctx.fillText(String(title).replace(/<[^>]*>/g, ""), areas.width / 2, areas.paper.y / 2 + size * 0.35);
  }
  for (const note of layout.annotations || []) {
    if (note.xref !== "paper" || note.yref !== "paper" || !note.text) continue;
    const size = fontSize(note.font, layout);
    ctx.font = `${size}px ${theme.font}`;
    ctx.textAlign = {left: "left", right: "right"}[note.xanchor] || "center";
    const y = areas.paper.y + areas.paper.h * (1 - Number(note.y));
    const shift = {bottom: -size * 0.15, top: size * 1.1}[note.yanchor] ?? size * 0.35;
    ctx.fillText(String(note.text).replace(/<[^>]*>/g, ""), areas.paper.x + areas.paper.w * Number(note.x), y + shift);
  }
  ctx.restore();
}

// The canvas hidden once plotly has drawn the figure (its heatmap images decoded, so no frame goes blank); kept for
// the next figure, whose drawing then needs no new canvas, nor a new pixel buffer when its size is the same (a new
// buffer for every chart made most of the canvas' time on a Step by step Seed +, issue 38).
export function hideCanvas(root, plot) {
  const canvas = root.__mhaCanvas, draws = root.__mhaCanvasDraws;
  if (!canvas) return Promise.resolve();
  const images = [...plot.querySelectorAll(".hm image")].map(image => (image.decode ? image.decode().catch(() => null) : null));
  return Promise.all(images).then(() => {
    if (root.__mhaCanvasDraws !== draws) return;  // a newer figure is on the canvas, its plotly draw still to come
    canvas.hidden = true;
    plot.style.minHeight = "";
  });
}

// The canvas at this size in device pixels, cleared: its buffer made again only when the size changes.
function sized(canvas, ctx, width, height) {
  if (canvas.width !== width || canvas.height !== height) {
    canvas.width = width;  // (setting either clears the canvas too)
    canvas.height = height;
  } else {
    ctx.clearRect(0, 0, width, height);
  }
}

// A translucent colour over an opaque one, as the browser would paint it: one fill instead of two.
function over(top, under, ctx) {
  const a = rgbaOf(top, ctx), b = rgbaOf(under, ctx);
  if (!a || !b) return top;
  return rgbaText([0, 1, 2].map(n => a[n] * a[3] + b[n] * (1 - a[3])).concat(1));
}
