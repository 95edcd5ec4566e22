// The settings' controls as one element (ui/widgets/controls.py): real HTML controls drawn from the run's data.
// A control is built once and kept while its shape (kind, label, options, bounds) stays the same, so the focus
// stays on it across runs; its value and the lines under it follow each run's data, except a text box the reader
// is typing in. A change sends one trigger, {key, value}; Python checks it, stores it and draws the element again.

let serial = 0;

function shapeOf(item) {
  const {value, notes, ...shape} = item;
  return JSON.stringify(shape);
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// The label row: the label (for the control) and, when the control has help, a "?" that shows it on hover; the
// help is also the control's description (aria-describedby), read with it by a screen reader.
function labelRow(item, forId, tipId, tag = "label") {
  const row = el("div", "mha-ctl-label");
  const label = el(tag, "", item.label);
  if (tag === "label") label.htmlFor = forId;
  row.append(label);
  if (item.help) {
    const mark = el("span", "mha-ctl-help", "?");
    mark.setAttribute("aria-hidden", "true");
    const tip = el("span", "mha-ctl-tip", item.help);
    tip.id = tipId;
    tip.setAttribute("role", "tooltip");
    mark.append(tip);
    row.append(mark);
  }
  return row;
}

function describe(input, item, tipId) {
  if (item.help) input.setAttribute("aria-describedby", tipId);
  input.disabled = Boolean(item.disabled);
}

function numberBox(item, send, id, tipId) {
  const input = el("input", "mha-ctl-input");
  input.type = "number";
  input.id = id;
  input.inputMode = item.integer ? "numeric" : "decimal";
  Object.assign(input, {min: item.min, max: item.max, step: item.step});
  input.addEventListener("change", () => send(item.key, input.value === "" ? "" : Number(input.value)));
  describe(input, item, tipId);
  const box = el("div", "mha-ctl-box");
  box.append(input);
  for (const [sign, testid, text] of [[-1, "mhaStepDown", "\u2212"], [1, "mhaStepUp", "+"]]) {
    const button = el("button", "mha-ctl-step", text);
    button.type = "button";
    button.dataset.testid = testid;
    button.setAttribute("aria-label", `${sign < 0 ? "\u2212" : "+"} ${item.label}`);
    button.disabled = Boolean(item.disabled);
    button.addEventListener("click", () => {
      const now = Number(input.value), next = now + sign * item.step;
      if (Number.isNaN(now) || next < item.min || next > item.max) return;
      input.value = item.integer ? String(Math.round(next)) : String(Math.round(next * 1e6) / 1e6);
      send(item.key, Number(input.value));
    });
    box.append(button);
  }
  return [labelRow(item, id, tipId), box];
}

function sliderBox(item, send, id, tipId) {
  const input = el("input", "mha-ctl-range");
  input.type = "range";
  input.id = id;
  Object.assign(input, {min: item.min, max: item.max, step: item.step});
  const shown = el("output", "mha-ctl-range-value");
  shown.htmlFor = id;
  input.addEventListener("input", () => { shown.textContent = input.value; });
  input.addEventListener("change", () => send(item.key, Number(input.value)));
  describe(input, item, tipId);
  const row = labelRow(item, id, tipId);
  row.append(shown);
  return [row, input];
}

// A field in Streamlit's box, under its label.
function boxed(field, item, id, tipId) {
  describe(field, item, tipId);
  const box = el("div", "mha-ctl-box");
  box.append(field);
  return [labelRow(item, id, tipId), box];
}

function selectBox(item, send, id, tipId) {
  const select = el("select", "mha-ctl-input");
  select.id = id;
  item.options.forEach(([, text], i) => select.append(new Option(text, String(i))));
  select.addEventListener("change", () => send(item.key, item.options[Number(select.value)][0]));
  return boxed(select, item, id, tipId);
}

function textBox(item, send, id, tipId) {
  const input = el("input", "mha-ctl-input");
  input.type = "text";
  input.id = id;
  input.autocomplete = "off";
  input.spellcheck = false;
  input.addEventListener("change", () => send(item.key, input.value));
  return boxed(input, item, id, tipId);
}

function toggleBox(item, send, id, tipId) {
  const input = el("input", "mha-ctl-switch");
  input.type = "checkbox";
  input.id = id;
  input.setAttribute("role", "switch");
  input.addEventListener("change", () => send(item.key, input.checked));
  describe(input, item, tipId);
  const row = labelRow(item, id, tipId);
  row.classList.add("mha-ctl-toggle-row");
  row.prepend(input);
  return [row];
}

function segmentedBox(item, send, id, tipId) {
  const group = el("fieldset", "mha-ctl-segments");
  const legend = el("legend");
  legend.append(labelRow(item, id, tipId, "span"));
  group.append(legend);
  if (item.help) group.setAttribute("aria-describedby", tipId);
  item.options.forEach(([value, text], i) => {
    const label = el("label", "mha-ctl-segment");
    const radio = el("input");
    radio.type = "radio";
    radio.name = id;
    radio.value = String(i);
    radio.disabled = Boolean(item.disabled);
    radio.addEventListener("change", () => send(item.key, value));
    label.append(radio, el("span", "", text));
    group.append(label);
  });
  return [group];
}

const BUILDERS = {number: numberBox, slider: sliderBox, select: selectBox, text: textBox, toggle: toggleBox,
                  segmented: segmentedBox};

function build(item, send) {
  const node = el("div", `mha-ctl-item mha-ctl-${item.kind}`);
  node.dataset.key = item.key;
  node.dataset.shape = shapeOf(item);
  if (item.kind === "heading") {
    node.append(el("h2", "mha-ctl-heading", item.label));
    return node;
  }
  if (BUILDERS[item.kind]) {
    const id = `mha-ctl-${++serial}`;
    node.append(...BUILDERS[item.kind](item, send, id, `${id}-help`));
  }
  node.append(el("div", "mha-ctl-notes"));
  return node;
}

// Write a property only when it changes: a run sends every control again, and each write makes the browser restyle
// the sidebar (and rebuilt lines with role "alert" are read out again).
function put(target, name, value) {
  if (target[name] !== value) target[name] = value;
}

// This run's value and lines into a kept control (never into a text box the reader is typing in).
function show(node, item) {
  if (item.kind === "heading") return;
  const notes = node.querySelector(":scope > .mha-ctl-notes");
  const lines = JSON.stringify(item.notes);
  if (notes.dataset.lines !== lines) {
    notes.dataset.lines = lines;
    notes.replaceChildren(...item.notes.map(([kind, text]) => {
      const line = el("p", `mha-ctl-note mha-ctl-note-${kind}`, text);
      if (kind === "warning" || kind === "error") line.setAttribute("role", "alert");
      return line;
    }));
  }
  const typing = node.contains(document.activeElement) && item.kind === "text";
  if (!BUILDERS[item.kind] || typing) return;
  if (item.kind === "toggle") {
    put(node.querySelector("input"), "checked", item.value);
  } else if (item.kind === "segmented") {
    node.querySelectorAll("input").forEach((radio, i) => put(radio, "checked", item.options[i][0] === item.value));
  } else if (item.kind === "select") {
    put(node.querySelector("select"), "value", String(item.options.findIndex(([value]) => value === item.value)));
  } else {
    put(node.querySelector("input"), "value", String(item.value));
    const shown = node.querySelector("output");
    if (shown) put(shown, "textContent", String(item.value));
  }
}

// Light text is the dark theme's: then the browser's own parts of the controls (a select's open list, its arrow,
// the caret) are drawn dark too (color-scheme), where a page without it gets them light on the dark sidebar.
function followTheme(root) {
  const [r, g, b] = (getComputedStyle(root).color.match(/[\d.]+/g) || [0, 0, 0]).map(Number);
  root.style.colorScheme = 0.2126 * r + 0.7152 * g + 0.0722 * b > 128 ? "dark" : "light";
}

export default function ({data, parentElement, setTriggerValue}) {
  const root = parentElement.querySelector(".mha-ctl");
  root.classList.toggle("mha-ctl-row", Boolean(data.row));  // a page's controls side by side, wrapping
  requestAnimationFrame(() => followTheme(root));  // at the frame: read mid-run, the page's styles are brought up to date
  root.mhaSend = (key, value) => setTriggerValue("change", {key, value});  // this render's function
  const send = (key, value) => root.mhaSend(key, value);
  const kept = new Map([...root.children].map(node => [node.dataset.key, node]));
  const nodes = data.items.map(item => {
    let node = kept.get(item.key);
    if (!node || node.dataset.shape !== shapeOf(item)) node = build(item, send);
    show(node, item);
    return node;
  });
  // in place: a node that stays is never moved (moving it would take the focus from its control)
  nodes.forEach((node, i) => { if (root.children[i] !== node) root.insertBefore(node, root.children[i] ?? null); });
  while (root.children.length > nodes.length) root.lastElementChild.remove();
}
