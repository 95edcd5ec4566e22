// MHA Explorer's page menu (ui/widgets/page_menu.py): the pages as real links, drawn once per run as one element.
// A link's address is the page's path plus the address bar's parameters read when it is pointed at, focused,
// pressed or clicked, so the element need not change when a page rewrites its address. A plain left click opens the
// page inside the app as Streamlit's own Back/Forward does (one history entry, then a `popstate`); a click with a
// modifier key or the middle button is left to the browser (a new tab or window, with the parameters).

// The app's base path (a proxy's prefix kept), from this module's own address: <base>/app/static/mha/page_menu.js
// (the element's loader found the base from Streamlit's bundle; ui/widgets/served.py).
function appBase() {
  return new URL("../../../", import.meta.url).pathname;
}

function link(page, current) {
  const a = document.createElement("a");
  a.dataset.path = page.path;
  a.dataset.testid = "mhaPageLink";
  if (page.path === current) a.setAttribute("aria-current", "page");
  const icon = document.createElement("span");
  icon.className = "mha-pages-icon";
  icon.setAttribute("aria-hidden", "true");
  icon.translate = false;
  icon.textContent = page.icon;
  const title = document.createElement("span");
  title.textContent = page.title;
  a.append(icon, title);
  return a;
}

export default function ({data, parentElement}) {
  const nav = parentElement.querySelector(".mha-pages");
  const drawn = JSON.stringify(data);
  if (nav.dataset.drawn !== drawn) {  // every run sends the menu again, nearly always the same: redrawn when not
    nav.dataset.drawn = drawn;
    nav.setAttribute("aria-label", data.label);
    nav.replaceChildren(...data.pages.map(page => link(page, data.current)));
  }
  const base = appBase();
  const refresh = () => {
    for (const a of nav.querySelectorAll("a")) {
      const href = base + a.dataset.path + window.location.search;
      if (a.getAttribute("href") !== href) a.setAttribute("href", href);
    }
  };
  refresh();
  if (nav.dataset.ready) return;  // the listeners once per element; the links above are redrawn with new data
  nav.dataset.ready = "1";
  for (const kind of ["pointerover", "focusin", "mousedown", "contextmenu"]) nav.addEventListener(kind, refresh);
  nav.addEventListener("click", event => {
    const a = event.target.closest("a");
    if (!a) return;
    refresh();
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    const target = new URL(a.href);
    if (target.pathname === window.location.pathname && target.search === window.location.search) return;  // shown
    window.history.pushState({}, "", target.pathname + target.search);
    window.dispatchEvent(new PopStateEvent("popstate", {state: {}}));
  });
}
