// MHA Explorer's live plotly chart (ui/widgets/live.py): one graph div per element, redrawn with
// Plotly.react, so a rerun with new data updates the chart in place instead of mounting a new one.
// Streamlit calls this function on mount and again with the same parentElement whenever the data or
// the theme changes. `data` is the payload bytes: a JSON line of settings, "\n", the figure's JSON.
//
// This module is served from the app's static files (<base>/app/static/mha/live.js?v=<digest>) and imported once per
// page by the element's few lines of loader (ui/widgets/served.py): its code is not in every element a run sends.
// The canvas' half comes from beside it, under the same digest, so a new version never meets an old one.
const VERSION = new URL(import.meta.url).search;
const {PLOTLY_HEIGHT, drawHeatmaps, hideCanvas} = await import(`./live_canvas.js${VERSION}`);

// plotly.js, loaded once per page from the app's static files (<base>/app/static/), next to this module.
function plotlyReady(file) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__mhaPlotly) {
    const src = new URL(`../${file}`, import.meta.url).href;
    window.__mhaPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.async = true;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => { window.__mhaPlotly = null; reject(new Error(`could not load ${src}`)); };
      document.head.appendChild(script);
    });
  }
  return window.__mhaPlotly;
}

// Streamlit's theme, read from the CSS custom properties it puts around the component; read once a frame for every
// chart drawn in it (reading computed styles makes the browser bring every style of the page up to date).
// (The sidebar has a theme of its own: one reading for it, one for the main area.)
function themeOf(element) {
  const area = element.closest('[data-testid="stSidebar"]') ? "sidebar" : "main";
  const kept = window.__mhaThemes ??= new Map();
  if (!kept.size) requestAnimationFrame(() => kept.clear());
  if (!kept.has(area)) kept.set(area, readTheme(element));
  return kept.get(area);
}
function readTheme(element) {
  const style = getComputedStyle(element);
  const read = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  const list = name => read(name, "").split(",").map(c => c.trim()).filter(Boolean);
  return {text: read("--st-text-color", "#31333f"), background: read("--st-background-color", "#ffffff"),
          border: read("--st-border-color", "rgba(49, 51, 63, 0.2)"), font: read("--st-font", "sans-serif"),
          categorical: list("--st-chart-categorical-colors"), sequential: list("--st-chart-sequential-colors"),
          diverging: list("--st-chart-diverging-colors")};
}

// The figure in the app's theme. Streamlit's plotly template (the figures' default) holds placeholder
// colours #000001-#000030 that its own chart element swaps for the theme's chart colours; the same is
// done here, and the theme's text, grid and hover colours go into the template's layout, so they apply
// only where the figure sets nothing itself (the masked cells' plot background, sizes, colour scales).
function themed(layout, theme, width, room) {
  const palette = [...theme.categorical.slice(0, 10), ...theme.sequential.slice(0, 10), ...theme.diverging.slice(0, 10)];
  let template = JSON.stringify(layout.template || {});
  if (palette.length === 30) {
    template = template.replace(/#0000([0-2][0-9]|30)\b/g, (match, n) => palette[Number(n) - 1] || match);
  }
  template = JSON.parse(template);
  const axis = {gridcolor: theme.border, zerolinecolor: theme.border, linecolor: theme.border, tickcolor: theme.border,
                automargin: true};
  template.layout = {
    ...(template.layout || {}),
    font: {color: theme.text, family: theme.font},
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: theme.background,
    xaxis: axis, yaxis: axis,
    margin: {pad: 6, r: 0, l: 0},
    hoverlabel: {bgcolor: theme.background, bordercolor: theme.border, font: {color: theme.text, family: theme.font}},
    coloraxis: {...((template.layout || {}).coloraxis || {}), colorbar: {thickness: 16, outlinewidth: 0,
                tickfont: {color: theme.text}, title: {font: {color: theme.text}}}},
  };
  const out = {...layout, template};
  if (width !== "content") {
    delete out.width;
    out.autosize = true;
  } else if (room > 0 && !(layout.width <= room)) {
    out.width = room;  // "content": the figure's own width, never wider than its column (or the column's, if none)
  }
  return out;
}

// A chart off screen costs the browser nothing while it is off screen (content-visibility: auto): a Seed + on a long
// page (Step by step: seven charts, two on screen) redraws the page many times while Streamlit adds its elements, and
// each of those frames laid out and painted every chart's plotly graph, a few thousand SVG nodes (issue 38). Its
// size while skipped is the figure's height, the height plotly draws it at, so the page's length does not change.
function skipWhileOffScreen(root, layout) {
  root.style.contentVisibility = "auto";
  root.style.containIntrinsicSize = `auto ${Number(layout.height) || PLOTLY_HEIGHT}px`;
}

// The width a chart may take: its column's or row's (a "content" chart's own box is as wide as what it drew).
function roomOf(root) {
  const block = root.closest('[data-testid="stVerticalBlock"], [data-testid="stHorizontalBlock"]');
  return (block || root).clientWidth;
}

// Plotly's redraws of canvas-drawn charts wait until the page is idle: the app's script has finished its run, every
// element of the run is drawn (a chart's canvas with it), a frame has gone and the browser has an idle moment; then
// one chart at a time, each in an idle moment; a new run pauses them. (Started at the frame after the script's end,
// plotly's first redraw, up to 40 ms, held up the last canvases of a Step by step Seed +: React draws a run's last
// elements after the page shows the run as finished.)
const RUN_LIMIT_MS = 3000;  // a run longer than this (a slow page) does not keep plotly waiting
function scriptRunning() {
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.dataset.testScriptState !== "notRunning";
}
function scriptFinished() {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!scriptRunning()) return Promise.resolve();
  return new Promise(resolve => {
    const done = () => { observer.disconnect(); clearTimeout(timer); resolve(); };
    const observer = new MutationObserver(() => { if (!scriptRunning()) done(); });
    observer.observe(app, {attributes: true, attributeFilter: ["data-test-script-state"]});
    const timer = setTimeout(done, RUN_LIMIT_MS);
  });
}
const IDLE_LIMIT_MS = 1000;  // a redraw waits for an idle moment at most this long
const idle = () => new Promise(resolve => (window.requestIdleCallback
  ? requestIdleCallback(() => resolve(), {timeout: IDLE_LIMIT_MS}) : setTimeout(resolve, 0)));
// Streamlit marks each element of the last run stale until this run's copy is drawn: the run's elements are all on
// the page once none is (checked once a frame, for at most RUN_LIMIT_MS).
function elementsCurrent() {
  const until = performance.now() + RUN_LIMIT_MS;
  return new Promise(resolve => {
    const check = () => {
      if (!document.querySelector('[data-testid="stElementContainer"][data-stale="true"]') || performance.now() > until) resolve();
      else requestAnimationFrame(check);
    };
    check();
  });
}
const afterPaint = () => new Promise(resolve => requestAnimationFrame(() => resolve())).then(idle);
function whenPageIdle(root, job) {
  const jobs = window.__mhaIdleJobs ??= new Map();
  jobs.delete(root);
  jobs.set(root, job);  // the newest figure of a chart, in the order the canvases were drawn
  if (window.__mhaIdleWait) return;
  window.__mhaIdleWait = scriptFinished().then(elementsCurrent).then(afterPaint).then(async () => {
    window.__mhaIdleWait = null;
    while (jobs.size) {
      if (scriptRunning()) { whenPageIdle(...jobs.entries().next().value); return; }
      const [element, next] = jobs.entries().next().value;
      jobs.delete(element);
      await next();
      await idle();  // input and Streamlit's messages between charts
    }
  });
}

// What the bench and the tests read: data-mha-shown is the digest of the figure on screen (its canvas or plotly's
// drawing), data-mha-plotly the digest of the figure plotly has drawn.
function mark(root, name, sig) {
  root.setAttribute(`data-mha-${name}`, sig);
}

export default function ({data, parentElement}) {
  const root = parentElement.querySelector(".mha-live");
  const plot = root.querySelector(".mha-live-plot");
  const cut = data.indexOf(10);  // "\n": the settings line ends, the figure's JSON starts
  const head = JSON.parse(new TextDecoder().decode(data.subarray(0, cut)));
  const theme = themeOf(root);
  const wanted = `${head.sig}|${head.width}|${JSON.stringify(head.config)}|${JSON.stringify(theme)}`;
  if (root.__mhaWanted === wanted) return;  // the same figure in the same theme: nothing to redraw
  root.__mhaWanted = wanted;
  const alt = root.querySelector(".mha-live-alt");
  alt.textContent = head.alt;
  if (head.alt) plot.setAttribute("aria-label", head.alt); else plot.removeAttribute("aria-label");
  plot.setAttribute("role", head.alt ? "figure" : "presentation");  // figure: its mode bar and hover stay reachable
  const figure = JSON.parse(new TextDecoder().decode(data.subarray(cut + 1)));
  const config = {displaylogo: false, responsive: head.width !== "content",
                  toImageButtonOptions: {format: "svg", filename: "mha-explorer-chart"}, ...head.config};
  const ready = plotlyReady(head.plotly);  // plotly.js starts loading before anything is drawn
  // The chart's width, read only when the canvas lays the figure out itself (a first drawing, or other subplots):
  // a redraw over plotly's own plot areas forces no layout of the page while Streamlit is still adding elements.
  const widthOf = () => {
    const room = roomOf(root);
    return head.width === "content" ? Math.min(Number((figure.layout || {}).width) || room, room) : plot.clientWidth || room;
  };
  skipWhileOffScreen(root, figure.layout || {});
  let canvas = false;
  try {
    const layout = themed(figure.layout || {}, theme, head.width, 0);  // the room matters only to plotly (below)
    canvas = !!head.canvas && drawHeatmaps(root, plot, figure, layout, theme, widthOf);
  } catch (error) {
    canvas = false;  // the canvas is a head start only: whatever it cannot read, plotly draws
  }
  if (canvas) mark(root, "shown", head.sig);
  const draw = () => ready.then(Plotly => {
    if (root.__mhaWanted !== wanted) return null;  // a newer figure came while plotly.js loaded
    return Plotly.react(plot, figure.data, themed(figure.layout || {}, theme, head.width, roomOf(root)), config)
      .then(() => {
        if (root.__mhaWanted !== wanted) return null;
        mark(root, "shown", head.sig);
        mark(root, "plotly", head.sig);
        return hideCanvas(root, plot);
      });
  }).catch(error => { alt.textContent = head.failed.replace("{reason}", error.message); });
  if (canvas) whenPageIdle(root, draw); else draw();
  // Called when Streamlit unmounts the element (or at once when a newer call overtook this one, the graph
  // still on the page): free plotly's listeners only once the graph has left the page.
  return () => setTimeout(() => { if (!plot.isConnected && window.Plotly) window.Plotly.purge(plot); }, 0);
}
