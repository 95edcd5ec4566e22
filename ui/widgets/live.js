// MHA Explorer's live plotly chart (ui/widgets/live.py): one graph div per element, redrawn with
// Plotly.react, so a rerun with new data updates the chart in place instead of mounting a new one.
// Streamlit calls this function on mount and again with the same parentElement whenever the data or
// the theme changes. `data` is the payload bytes: a JSON line of settings, "\n", the figure's JSON.

// plotly.js, loaded once per page from the app's static files (<base>/app/static/), found next to
// Streamlit's own bundle (<base>/static/js/index.*.js) so that a proxy's path prefix is kept.
function plotlyReady(file) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__mhaPlotly) {
    const bundle = [...document.querySelectorAll("script[src]")].find(s => /\/static\/js\/index[^/]*\.js/.test(s.src));
    const src = new URL(`../../app/static/${file}`, bundle ? bundle.src : document.baseURI).href;
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

// Streamlit's theme, read from the CSS custom properties it puts around the component.
function themeOf(element) {
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

// The width a chart may take: its column's or row's (a "content" chart's own box is as wide as what it drew).
function roomOf(root) {
  const block = root.closest('[data-testid="stVerticalBlock"], [data-testid="stHorizontalBlock"]');
  return (block || root).clientWidth;
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
  plotlyReady(head.plotly).then(Plotly => {
    if (root.__mhaWanted !== wanted) return;  // a newer figure came while plotly.js loaded
    Plotly.react(plot, figure.data, themed(figure.layout || {}, theme, head.width, roomOf(root)), config);
  }).catch(error => { alt.textContent = `Chart not drawn: ${error.message}`; });
  // Called when Streamlit unmounts the element (or at once when a newer call overtook this one, the graph
  // still on the page): free plotly's listeners only once the graph has left the page.
  return () => setTimeout(() => { if (!plot.isConnected && window.Plotly) window.Plotly.purge(plot); }, 0);
}
