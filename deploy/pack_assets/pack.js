// MHA Explorer lesson pack: draws each page's heatmaps from window.PACK with the bundled plotly.js,
// and switches between the grid layout and the presentation layout (one panel at a time, arrow keys).
(function () {
  "use strict";
  var pack = window.PACK;
  var panels = Array.prototype.slice.call(document.querySelectorAll(".panel"));
  var position = document.getElementById("position");
  var n = panels.length;
  var current = 0;

  function presenting() {
    return document.body.classList.contains("present");
  }

  function plot(i) {
    return document.getElementById("plot-" + i);
  }

  var PRESENT_FONT = 18; // legible from the back of a room at 1280x720

  // The figure's layout, in the grid or, larger, in the presentation layout.
  function layoutFor(i) {
    var figure = pack.figures[i];
    var layout = JSON.parse(JSON.stringify(figure.layout));
    layout.template = pack.template;
    layout.autosize = true;
    if (!presenting()) return layout;
    var header = document.querySelector("header").offsetHeight;
    layout.height = Math.max(320, window.innerHeight - header - 24);
    layout.width = Math.min(window.innerWidth - 32, Math.round(layout.height * 1.6));
    layout.font = Object.assign({}, layout.font, { size: PRESENT_FONT });
    Object.keys(layout).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        layout[key].tickfont = Object.assign({}, layout[key].tickfont, { size: PRESENT_FONT });
        layout[key].automargin = true; // larger labels: the axis title moves out of their way
        if (layout[key].title) layout[key].title = Object.assign({}, layout[key].title, { font: { size: PRESENT_FONT }, standoff: 12 });
      }
    });
    (layout.annotations || []).forEach(function (a) { a.font = Object.assign({}, a.font, { size: PRESENT_FONT + 4 }); });
    if (layout.title) layout.title.font = { size: PRESENT_FONT + 4 };
    if (layout.coloraxis && layout.coloraxis.colorbar) {
      var bar = layout.coloraxis.colorbar;
      bar.tickfont = Object.assign({}, bar.tickfont, { size: PRESENT_FONT - 2 });
      if (bar.title) bar.title.font = { size: PRESENT_FONT - 2 };
    }
    return layout;
  }

  // Step by step's nums=auto prints no numbers on a phone, as the app does (deploy/static_pack.cell_numbers).
  var phone = window.matchMedia("(max-width: 640px)");

  function dataFor(i) {
    var figure = pack.figures[i];
    if (figure.phone_numbers !== false || !phone.matches) return figure.data;
    return figure.data.map(function (trace) {
      var plain = Object.assign({}, trace);
      delete plain.text;
      delete plain.texttemplate;
      return plain;
    });
  }

  function draw(i) {
    // The app's chart settings (ui/charts/chart_image.chart_settings): the camera saves an SVG named after the page
    // and panel, and no button uploads the chart anywhere.
    return Plotly.react(plot(i), dataFor(i), layoutFor(i), pack.figures[i].config);
  }

  function show(i, scroll) {
    if (!n) return;
    current = ((i % n) + n) % n;
    panels.forEach(function (panel, k) { panel.classList.toggle("current", k === current); });
    position.textContent = pack.figures[current].title + " (" + (current + 1) + " of " + n + ")";
    if (presenting()) draw(current);
    else if (scroll) panels[current].scrollIntoView({ block: "nearest" });
  }

  function setPresenting(on) {
    document.body.classList.toggle("present", on);
    document.getElementById("present").textContent = on ? "Grid" : "Presentation";
    show(current, false);
    if (!on) for (var i = 0; i < n; i++) draw(i);
  }

  document.getElementById("prev").addEventListener("click", function () { show(current - 1, true); });
  document.getElementById("next").addEventListener("click", function () { show(current + 1, true); });
  document.getElementById("present").addEventListener("click", function () { setPresenting(!presenting()); });
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "ArrowRight" || event.key === "PageDown") { show(current + 1, true); event.preventDefault(); }
    else if (event.key === "ArrowLeft" || event.key === "PageUp") { show(current - 1, true); event.preventDefault(); }
    else if (event.key === "p" || event.key === "P") setPresenting(!presenting());
    else if (event.key === "Escape" && presenting()) setPresenting(false);
  });

  var drawn = [];
  for (var i = 0; i < n; i++) drawn.push(draw(i));
  window.PACK_READY = Promise.all(drawn).then(function () {
    if (location.hash === "#present") setPresenting(true);
    show(0, false);
    document.body.dataset.ready = "1";
  });
})();
