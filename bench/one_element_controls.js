// Issue 38's prototype (bench/one_element_controls.py): the sidebar's controls as real HTML controls in one element.
// Each control is built once and kept while its shape (kind, label, options, bounds) stays the same, so focus and a
// half-typed text survive a run; its value and caption follow the run's data unless it has the focus. A change
// sends one trigger, {name, value}, with the value as a link spells it; Python reads it and draws the element again.

let serial = 0;

function shapeOf(control) {
  const {value, note, ...shape} = control;
  return JSON.stringify(shape);
}

function helpMark(control, id) {
  const mark = document.createElement("span");
  mark.className = "mha-one-help";
  mark.tabIndex = 0;
  mark.id = id;
  mark.setAttribute("role", "note");
  mark.setAttribute("aria-label", control.help);
  mark.dataset.help = control.help;
  mark.textContent = "?";
  return mark;
}

function labelRow(control, forId, helpId) {
  const row = document.createElement("div");
  row.className = "mha-one-label";
  const label = document.createElement("label");
  label.htmlFor = forId;
  label.textContent = control.label;
  row.append(label);
  if (control.help) row.append(helpMark(control, helpId));
  return row;
}

function field(control, send) {
  const id = `mha-one-${++serial}`, helpId = `${id}-help`;
  let input;
  if (control.kind === "select") {
    input = document.createElement("select");
    for (const [value, text] of control.options) input.append(new Option(text, value));
    input.addEventListener("change", () => send(control.name, input.value));
  } else {
    input = document.createElement("input");
    input.type = control.kind === "number" ? "number" : "text";
    input.addEventListener("change", () => send(control.name, input.value));
  }
  input.id = id;
  input.dataset.value = "1";
  if (control.help) input.setAttribute("aria-describedby", helpId);
  const box = document.createElement("div");
  box.className = "mha-one-box";
  box.append(input);
  if (control.kind === "number") {
    for (const min of ["min", "max", "step"]) input[min] = control[min];
    for (const [sign, testid, word] of [[-1, "mhaOneStepDown", "Decrease"], [1, "mhaOneStepUp", "Increase"]]) {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.testid = testid;
      button.setAttribute("aria-label", `${word} ${control.label}`);
      button.textContent = sign < 0 ? "\u2212" : "+";
      button.addEventListener("click", () => {
        if (sign < 0) input.stepDown(); else input.stepUp();
        send(control.name, input.value);
      });
      box.append(button);
    }
  }
  return [labelRow(control, id, helpId), box];
}

function checkbox(control, send) {
  const id = `mha-one-${++serial}`;
  const input = document.createElement("input");
  input.type = "checkbox";
  input.id = id;
  input.setAttribute("role", "switch");
  input.dataset.value = "1";
  input.addEventListener("change", () => send(control.name, input.checked ? "1" : "0"));
  const row = labelRow(control, id, `${id}-help`);
  row.classList.add("mha-one-check");
  if (control.help) input.setAttribute("aria-describedby", `${id}-help`);
  row.prepend(input);
  return [row];
}

function segmented(control, send) {
  const set = document.createElement("fieldset");
  const legend = document.createElement("legend");
  legend.textContent = control.label;
  set.append(legend);
  const group = `mha-one-${++serial}`;
  for (const [value, text] of control.options) {
    const label = document.createElement("label");
    const radio = document.createElement("input");
    radio.type = "radio";
    radio.name = group;
    radio.value = value;
    radio.addEventListener("change", () => send(control.name, value));
    label.append(radio, text);
    set.append(label);
  }
  if (control.help) { legend.append(helpMark(control, `${group}-help`)); set.setAttribute("aria-describedby", `${group}-help`); }
  return [set];
}

function build(control, send) {
  const node = document.createElement("div");
  node.className = `mha-one-control mha-one-${control.kind}`;
  node.dataset.name = control.name;
  node.dataset.shape = shapeOf(control);
  if (control.kind === "heading") {
    const heading = document.createElement("h3");
    heading.textContent = control.label;
    node.append(heading);
    return node;
  }
  const parts = control.kind === "checkbox" ? checkbox(control, send)
    : control.kind === "segmented" ? segmented(control, send) : field(control, send);
  const note = document.createElement("p");
  note.className = "mha-one-note";
  node.append(...parts, note);
  return node;
}

function show(node, control) {
  if (control.kind === "heading") return;
  node.querySelector(".mha-one-note").textContent = control.note || "";
  if (node.contains(document.activeElement) && control.kind === "text") return;  // the reader is typing
  if (control.kind === "segmented") {
    for (const radio of node.querySelectorAll("input")) radio.checked = radio.value === control.value;
  } else if (control.kind === "checkbox") {
    node.querySelector("input").checked = control.value === "1";
  } else {
    node.querySelector("[data-value]").value = control.value;
  }
}

export default function ({data, parentElement, setTriggerValue}) {
  const root = parentElement.querySelector(".mha-one");
  root.mhaSend = (name, value) => setTriggerValue("change", {name, value});  // this render's function
  const send = (name, value) => root.mhaSend(name, value);
  const kept = new Map([...root.querySelectorAll(":scope > .mha-one-control")].map(node => [node.dataset.name, node]));
  const nodes = data.controls.map(control => {
    let node = kept.get(control.name);
    if (!node || node.dataset.shape !== shapeOf(control)) node = build(control, send);
    show(node, control);
    return node;
  });
  let alert = root.querySelector(":scope > .mha-one-messages");
  if (!alert) {
    alert = document.createElement("div");
    alert.className = "mha-one-messages";
    alert.setAttribute("role", "alert");
  }
  alert.replaceChildren(...data.messages.map(text => Object.assign(document.createElement("p"), {textContent: text})));
  // in place: a node that stays is never moved (moving it would take the focus from its control)
  [alert, ...nodes].forEach((node, i) => { if (root.children[i] !== node) root.insertBefore(node, root.children[i] ?? null); });
  while (root.children.length > nodes.length + 1) root.lastElementChild.remove();
}
