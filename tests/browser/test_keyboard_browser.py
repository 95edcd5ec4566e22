"""Keyboard only (issue 23, item 13): every control, the head switch, the drill-down's cell and the custom-mask
editor reached and used without a mouse, in Chromium at 1440x900.

The tests press keys only (Tab, Shift+Tab, Enter, Space, the arrows; ``page.keyboard``): no click, no ``fill``.
The page is read, never driven, through the DOM: which element has the focus, the list a select box has opened,
the link in the address bar, the live figure's numbers. What a figure or the drill-down shows is compared with
the engine's arrays computed here from ``mha_core``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from conftest import (
    CONTROL_ITEMS_JS,
    CONTROL_KEY_OF_JS,
    exceptions_on_page,
    open_app,
    screenshot,
    wait_drawn,
    wait_idle,
)
from shown_charts import decode

from mha_core.config import MHAConfig, run
from ui.state.navigation import PAGES

VIEWPORT = {"width": 1440, "height": 900}
# After a key, until what it does is on the screen: two animation frames (the first draws the new focus or value,
# the second comes once it is painted), then every transition of a focus ring (outline, box-shadow: what RING_JS
# reads) that runs has ended. A condition in place of a fixed 120 ms per key. (Fields fade their border colour over 200 ms and a help button's
# tooltip fades in over 170 ms: nothing here reads them, so they are not waited for.)
KEY_DONE_JS = """async () => {
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  const ring = document.getAnimations().filter(a => a.playState === 'running' && a instanceof CSSTransition
    && /^(outline|box-shadow)/.test(a.transitionProperty));
  await Promise.all(ring.map(a => a.finished.catch(() => null)));
}"""

# What has the focus: its tag, role, type, data-testid, accessible name, text, its key: the setting's key when it is
# a control of the settings element (conftest's CONTROL_KEY_OF_JS), else the widget key of the Streamlit element
# around it (its ``st-key-<key>`` class); whether it is in the sidebar, and the mark ``data-kb`` a test may have put
# on it; a checkbox's or radio's state (aria-checked, or its ``checked``).
ACTIVE_JS = f"""() => {{
  const e = document.activeElement;
  if (!e || e === document.body) return {{tag: 'BODY'}};
  const keyed = e.closest('[class*="st-key-"]');
  return {{tag: e.tagName, role: e.getAttribute('role'), type: e.type ?? null, testid: e.dataset.testid ?? null,
          label: e.getAttribute('aria-label') || '', text: (e.innerText || '').trim().slice(0, 80),
          key: ({CONTROL_KEY_OF_JS})(e) ?? (keyed ? [...keyed.classList].find(c => c.startsWith('st-key-')).slice(7) : null),
          sidebar: !!e.closest('[data-testid="stSidebar"]'), kb: e.closest('[data-kb]')?.dataset.kb ?? null,
          checked: e.getAttribute('aria-checked') ?? (e.type === 'checkbox' || e.type === 'radio' ? String(e.checked) : null),
          value: e.tagName === 'SELECT' ? e.selectedOptions[0]?.text ?? '' : e.value ?? null}};
}}"""

# The focus ring of an element: the first of it and its four nearest ancestors that draws an outline or a
# box-shadow, and is large enough to be seen (at least 8x8 px, and not inside a box smaller than 4x4 px: the
# switch's real <input> sits, with Chromium's own ring, in a 1-pixel clipped span). "" when none.
RING_JS = """e => {
  const big = n => { const r = n.getBoundingClientRect(); return r.width >= 8 && r.height >= 8; };
  const clipped = n => { for (let a = n.parentElement, d = 0; a && d < 3; a = a.parentElement, d++) {
    const r = a.getBoundingClientRect(); if (r.width < 4 || r.height < 4) return true; } return false; };
  for (let n = e, d = 0; n && d < 5 && n !== document.body; n = n.parentElement, d++) {
    const s = getComputedStyle(n);
    const outline = s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0;
    const shadow = s.boxShadow !== 'none';
    if ((outline || shadow) && big(n) && !clipped(n))
      return `${d}:${n.tagName}:` + (outline ? `outline ${s.outlineStyle} ${s.outlineColor}` : `shadow ${s.boxShadow}`);
  }
  return '';
}"""

# Every control of the sidebar, counted by Streamlit element (a switch, a field, a select box, a button group, ...),
# each link of the page menu (one element of nine links) and each control of the settings element (one element of
# ~17 controls: a number's box and its -/+ count as one control, as Streamlit's number input did): each innermost
# element container that holds something a mouse can use, each menu link and each settings control that does, is
# marked data-kb = 0, 1, ... in page order, whatever its tabindex says (a control made mouse-only still counts).
MARK_SIDEBAR_JS = f"""() => {{
  const bar = document.querySelector('[data-testid="stSidebar"]');
  const usable = 'a[href], button, input, select, textarea, summary, [role="slider"], [role="radio"]';
  const live = c => c.getClientRects().length > 0 &&
    [...c.querySelectorAll(usable)].some(e => !e.disabled && getComputedStyle(e).visibility !== 'hidden');
  const boxes = [...bar.querySelectorAll('[data-testid="stElementContainer"]')].filter(c =>
    !c.querySelector('[data-testid="stElementContainer"]') && live(c))
    .flatMap(c => c.querySelector('[data-testid="mhaPageMenu"]') ? [...c.querySelectorAll('a')]
                : c.querySelector('[data-testid="mhaControls"]') ? ({CONTROL_ITEMS_JS})(c).filter(live) : [c]);
  boxes.forEach((c, i) => {{ c.dataset.kb = String(i); }});
  return boxes.map(c => {{ const k = [...c.classList].find(n => n.startsWith('st-key-'));
    return c.dataset.key || (k ? k.slice(7) : (c.innerText || '').trim().slice(0, 40)); }});
}}"""

OPTIONS_JS = """() => [...document.querySelectorAll('[role="option"]')].map(
  o => ({text: (o.innerText || '').trim(), focused: o.hasAttribute('data-focused')}))"""

PANELS_JS = """key => {
  const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
  return el && el.data ? el.data.filter(t => t.coloraxis).map(t => t.z) : null;
}"""

TEX_JS = """() => [...document.querySelectorAll('annotation[encoding="application/x-tex"]')].map(a => a.textContent)"""


@pytest.fixture
def page(app_page):
    app_page.set_viewport_size(VIEWPORT)
    return app_page


def active(page) -> dict:
    return page.evaluate(ACTIVE_JS)


def press(page, key: str, times: int = 1) -> None:
    for _ in range(times):
        page.keyboard.press(key)
        page.evaluate(KEY_DONE_JS)


def tab_to(page, wanted: Callable[[dict], bool], what: str, limit: int = 250, key: str = "Tab") -> dict:
    """Press Tab (or ``key``) until the focused element is ``wanted``; fail, listing the stops seen, if never."""
    seen = []
    for _ in range(limit):
        press(page, key)
        now = active(page)
        if wanted(now):
            return now
        seen.append(now.get("label") or now.get("text") or now.get("tag"))
    raise AssertionError(f"{what} was never reached with {key} in {limit} presses; stops: {seen[:60]}")


def on_widget(key: str) -> Callable[[dict], bool]:
    return lambda now: now.get("key") == key and now.get("tag") in ("INPUT", "BUTTON", "CANVAS", "SELECT")


def on_control(key: str, tag: str, **expected) -> Callable[[dict], bool]:
    """The focus is on a settings control's ``tag`` element, with ``expected`` fields (type, testid, role...)."""
    return lambda now: (now.get("key") == key and now.get("tag") == tag
                        and all(now.get(name) == value for name, value in expected.items()))


def choose_in_select(page, text: str, limit: int = 30) -> None:
    """In a focused native <select> (a settings control): ArrowDown or ArrowUp until it shows ``text``. Each arrow
    is one change and one run (Chromium on Linux changes a closed select's choice with the arrows, as Windows does);
    each run is waited for, so the next arrow starts from the value the run drew."""
    for _ in range(limit):
        now = active(page)
        assert now.get("tag") == "SELECT", f"the focus left the select box: {now}"
        if now.get("value") == text:
            return
        texts = page.evaluate("() => [...document.activeElement.options].map(o => o.text)")
        assert text in texts, f"{text!r} is not among the options {texts}"
        press(page, "ArrowDown" if texts.index(text) > texts.index(now.get("value")) else "ArrowUp")
        wait_drawn(page)
    raise AssertionError(f"the arrows never reached {text!r}")


def choose_option(page, text: str) -> None:
    """In a focused select box: open its list (ArrowDown), move with the arrows to ``text``, Enter."""
    press(page, "ArrowDown")
    for poll in range(1, 51):  # seen empty once on a busy machine: the key came while a rerun redrew the box
        if page.evaluate(OPTIONS_JS):
            break
        page.wait_for_timeout(100)
        if poll % 10 == 0:
            press(page, "ArrowDown")  # a key lost in the redraw: open the list again (still keys only)
    for _ in range(80):
        options = page.evaluate(OPTIONS_JS)
        texts = [o["text"] for o in options]
        assert text in texts, f"{text!r} is not among the options {texts}"
        focused = next((o["text"] for o in options if o["focused"]), None)
        if focused == text:
            press(page, "Enter")
            return
        press(page, "ArrowDown" if focused is None or texts.index(text) > texts.index(focused) else "ArrowUp")
    raise AssertionError(f"the arrows never reached {text!r}")


def wait_for_link(page, *parts: str) -> None:
    """Wait until the address bar carries every ``name=value`` in ``parts``, then for the run to end."""
    try:
        page.wait_for_function("parts => parts.every(p => new URLSearchParams(location.search).toString()"
                               ".split('&').includes(p))", arg=list(parts))
    except Exception as error:  # say what the link reads instead
        raise AssertionError(f"the link never carried {parts}: it reads {page.url}") from error
    wait_idle(page)


def assert_focus_stays(page, key: str) -> None:
    """After the rerun a change started, the focus is still on the control (a remounted one loses it, and the
    keyboard user starts again from the top of the page): read once the page has stayed the same for 0.3 s."""
    wait_drawn(page)
    now = active(page)
    assert now.get("key") == key, f"the focus left {key} after its change: now on {now}"


def live_panels(page, key: str = "heads_grid") -> list[np.ndarray]:
    return [decode(z) for z in page.wait_for_function(PANELS_JS, arg=key).json_value()]


def wait_for_panels(page, expected: np.ndarray, key: str = "heads_grid", atol: float = 1e-6) -> np.ndarray:
    """Wait until the live figure draws ``expected`` (n, Tq, Tk), then check it does (a rerun may redraw it late).

    A masked cell is drawn blank (NaN, under a grey layer) where the engine's weight is 0. Returns what is drawn.
    """
    def drawn() -> np.ndarray:
        shown = live_panels(page, key)
        return np.stack(shown) if shown else np.zeros((0,))

    for _ in range(100):
        shown = drawn()
        if shown.shape == expected.shape and np.allclose(np.nan_to_num(shown, nan=0.0), expected, atol=atol):
            break
        page.wait_for_timeout(200)
    shown = drawn()
    assert shown.shape == expected.shape, (shown.shape, expected.shape)
    np.testing.assert_allclose(np.nan_to_num(shown, nan=0.0), expected, atol=atol)
    return shown


# (a) every sidebar control is reached by Tab from the top, with a ring that shows only while it has the focus.
@pytest.mark.parametrize("query", ["", "?tokens=the+cat+sat&mask=custom&cmask=100.110.111&pe=rope"])
def test_tab_from_the_top_reaches_every_sidebar_control_with_a_visible_ring(page, app_url, query):
    open_app(page, app_url, query)
    page.wait_for_function(  # the page menu's links (one element, drawn when its script has run)
        "n => document.querySelectorAll('[data-testid=\"stSidebar\"] [data-testid=\"mhaPageMenu\"] a').length >= n",
        arg=len(PAGES))
    wait_idle(page)
    # the settings come after the menu, and under load some are drawn a moment after the run reads finished
    page.wait_for_function(f"n => ({MARK_SIDEBAR_JS})().length >= n", arg=len(PAGES) + 15)
    controls = page.evaluate(MARK_SIDEBAR_JS)
    assert len(controls) >= len(PAGES) + 15, controls  # the page links, the presentation switch, the settings
    reached: set[int] = set()  # data-kb of the controls the focus has been in
    rings: list[tuple[str, str, str]] = []  # each stop in the sidebar: its name, its ring focused, and after
    for stop in range(len(controls) * 3):
        press(page, "Tab")
        if rings:  # the stop just left: its ring must have gone with the focus
            name, ring, _ = rings[-1]
            rings[-1] = (name, ring, page.evaluate(f"() => ({RING_JS})(document.querySelector('[data-stop=\"{stop - 1}\"]'))"))
        now = active(page)
        if not now.get("sidebar"):
            if reached:
                break  # out of the sidebar again, into the page
            continue
        page.evaluate(f"() => {{ document.activeElement.dataset.stop = '{stop}'; }}")
        if now.get("kb") is not None:
            reached.add(int(now["kb"]))
        name = f"{now.get('key') or ''} {now.get('label') or now.get('text') or now.get('tag')}"
        rings.append((name, page.evaluate(f"() => ({RING_JS})(document.activeElement)"), ""))
    missing = [controls[i] for i in range(len(controls)) if i not in reached]
    assert not missing, f"never reached with Tab: {missing}"
    no_ring = [name for name, ring, _ in rings if not ring]
    assert not no_ring, f"no visible focus ring (outline or box-shadow): {no_ring}"
    stays = [name for name, ring, after in rings if ring == after]
    assert not stays, f"the ring does not tell the focus: it is there without it too: {stays}"
    # Shift+Tab walks back through the same controls.
    back = tab_to(page, lambda now: now.get("kb") == "0", "the first sidebar control, backwards", key="Shift+Tab")
    assert back["sidebar"]
    assert not exceptions_on_page(page)


# (b) Heads, Seed and Mask changed from the keyboard: the link and the figure follow, with the engine's numbers.
def test_heads_seed_and_mask_change_from_the_keyboard(page, app_url):
    open_app(page, app_url)
    wait_for_panels(page, run(MHAConfig()).trace.weights)

    tab_to(page, on_widget("w_heads"), "the Heads select box")
    choose_in_select(page, "2")
    wait_for_link(page, "heads=2")
    assert_focus_stays(page, "w_heads")
    wait_for_panels(page, run(MHAConfig(n_heads=2)).trace.weights)

    tab_to(page, on_widget("w_seed"), "the Seed field")
    press(page, "ArrowUp", 2)
    press(page, "Enter")
    wait_for_link(page, "heads=2", "seed=2")
    assert_focus_stays(page, "w_seed")
    wait_for_panels(page, run(MHAConfig(n_heads=2, seed=2)).trace.weights)

    tab_to(page, on_widget("w_mask"), "the Mask select box")
    choose_in_select(page, "causal (no peeking ahead)")
    wait_for_link(page, "heads=2", "seed=2", "mask=causal")
    assert_focus_stays(page, "w_mask")
    expected = run(MHAConfig(n_heads=2, seed=2, mask="causal")).trace.weights
    wait_for_panels(page, expected)
    assert np.all(np.triu(expected[0], k=1) == 0)  # the causal figure really differs: nothing above the diagonal
    screenshot(page, "keyboard_heads_seed_mask")
    assert not exceptions_on_page(page)


# (f) Inside the settings element (ONE components-v2 element of real HTML controls, static/mha/controls.js): Tab from
# the language select box reaches the Sentence box, the heads <select>, the Seed's box and its "+", a switch and the
# key/value-heads radio group; each used by its keys changes the link and the figure to the engine's numbers, and the
# focus stays on the control through the run (the element keeps its nodes across runs).
def test_the_settings_elements_controls_by_keyboard(page, app_url):
    open_app(page, app_url)
    wait_for_panels(page, run(MHAConfig()).trace.weights)
    tab_to(page, on_widget("w_lang"), "the language select box")

    tab_to(page, on_control("w_tokens", "INPUT", type="text"), "the Sentence box", limit=5)
    press(page, "Control+A")
    page.keyboard.type("a b a c")  # typed, as a reader types (no fill)
    press(page, "Enter")  # sent on Enter, as Streamlit's text input
    wait_for_link(page, "tokens=a+b+a+c")
    config = MHAConfig(tokens=("a", "b", "a", "c"))
    wait_for_panels(page, run(config).trace.weights)
    assert_focus_stays(page, "w_tokens")  # Enter sends the sentence and leaves the caret in its box

    tab_to(page, on_control("w_heads", "SELECT"), "the Heads select box", limit=10)
    press(page, "ArrowDown")  # 4 -> 8 heads (d_model 16: 1, 2, 4, 8, 16)
    wait_for_link(page, "heads=8")
    assert_focus_stays(page, "w_heads")
    assert active(page)["tag"] == "SELECT" and active(page)["value"] == "8"
    config = MHAConfig(tokens=config.tokens, n_heads=8)
    wait_for_panels(page, run(config).trace.weights)

    tab_to(page, on_control("w_seed", "INPUT", type="number"), "the Seed's number box", limit=5)
    plus = tab_to(page, on_control("w_seed", "BUTTON", testid="mhaStepUp"), "the Seed's +", limit=3)
    assert plus["label"].startswith("+")  # named for a screen reader: "+ Seed"
    for seed, key in ((1, "Enter"), (2, "Space")):
        before = live_panels(page)
        press(page, key)
        wait_for_link(page, f"seed={seed}", "heads=8")
        now = active(page)
        assert now.get("testid") == "mhaStepUp" and now.get("key") == "w_seed", f"the focus left Seed's +: {now}"
        config = MHAConfig(tokens=config.tokens, n_heads=8, seed=seed)
        shown = wait_for_panels(page, run(config).trace.weights)
        assert not np.allclose(np.stack(before), shown), f"seed {seed}: the panels kept their numbers"
    assert_focus_stays(page, "w_seed")
    assert active(page)["testid"] == "mhaStepUp"

    switch = tab_to(page, on_control("w_bias", "INPUT", role="switch"), "the Biases switch", limit=10)
    assert switch["checked"] == "false"
    press(page, "Space")
    wait_for_link(page, "bias=1", "seed=2")
    assert_focus_stays(page, "w_bias")
    assert active(page)["checked"] == "true"
    config = MHAConfig(tokens=config.tokens, n_heads=8, seed=2, bias=True)
    wait_for_panels(page, run(config).trace.weights)

    radio = tab_to(page, on_control("w_kv_heads", "INPUT", type="radio"), "the key/value-heads radio group", limit=5)
    assert radio["checked"] == "true" and radio["value"] == "3"  # the group's one stop: the chosen 8 (of 1, 2, 4, 8)
    press(page, "ArrowLeft")  # 4 key/value heads: grouped-query attention
    wait_for_link(page, "kv_heads=4", "bias=1")
    assert_focus_stays(page, "w_kv_heads")
    assert active(page)["checked"] == "true" and active(page)["value"] == "2"
    wait_for_panels(page, run(MHAConfig(tokens=config.tokens, n_heads=8, seed=2, bias=True, kv_heads=4)).trace.weights)
    screenshot(page, "keyboard_settings_element")
    assert not exceptions_on_page(page)


# (c) Presentation mode's head switch: the arrows move inside the head buttons, Space chooses; Next by Enter.
def test_head_switch_by_keyboard_shows_the_chosen_heads_weights(page, app_url):
    open_app(page, app_url, "?present=1&mask=causal")
    weights = run(MHAConfig(mask="causal")).trace.weights  # (nh, T, T)
    wait_for_panels(page, weights[0:1])
    tab_to(page, lambda now: now.get("role") == "radio" and now.get("text") == "head 0", "the head buttons")
    press(page, "ArrowRight", 2)
    assert active(page)["text"] == "head 2"
    press(page, "Space")
    wait_for_link(page, "head=2")
    assert_focus_stays(page, "w_head")
    wait_for_panels(page, weights[2:3])

    tab_to(page, lambda now: now.get("key") == "head_next", "the Next button")
    press(page, "Enter")
    wait_for_link(page, "head=3")
    assert_focus_stays(page, "head_next")
    wait_for_panels(page, weights[3:4])
    screenshot(page, "keyboard_head_switch")
    assert not exceptions_on_page(page)


def test_head_select_box_of_many_heads_by_keyboard(page, app_url):
    open_app(page, app_url, "?present=1&heads=8")
    weights = run(MHAConfig(n_heads=8)).trace.weights
    wait_for_panels(page, weights[0:1])
    tab_to(page, on_widget("w_head"), "the head select box")
    choose_option(page, "head 5")
    wait_for_link(page, "head=5")
    assert_focus_stays(page, "w_head")
    wait_for_panels(page, weights[5:6])
    assert not exceptions_on_page(page)


def shown_weight(page, i: int, j: int) -> float:
    """A_ij as the drill-down's softmax formula writes it (its last number)."""
    prefix = f"A_{{{i},{j}}}"
    for _ in range(100):
        formulas = [t for t in page.evaluate(TEX_JS) if t.strip().startswith(prefix)]
        if formulas:
            return float(re.findall(r"=\s*(-?\d+\.\d+)\s*$", formulas[-1].strip())[0])
        page.wait_for_timeout(200)
    raise AssertionError(f"no formula for {prefix} on the page")


# (d) Step by step's drill-down: the "Drill-down" jump link, Enter opens it, the query and key chosen by arrows.
def test_drill_down_cell_chosen_by_keyboard_shows_the_engines_weight(page, app_url):
    open_app(page, app_url, "step_by_step?mask=causal&head=1")
    tab_to(page, lambda now: now.get("tag") == "A" and now.get("text") == "Drill-down", "the Drill-down jump link")
    press(page, "Enter")
    tab_to(page, lambda now: now.get("tag") == "SUMMARY" and "Open the drill-down" in now.get("text", ""),
           "the drill-down's expander", limit=20)
    press(page, "Enter")
    # Opening it starts a run that draws the drill-down; a key pressed before that run has ended lands on a control
    # it then replaces (the focus falls back to the page's top, or a select box's list closes under the arrows).
    page.wait_for_selector(".st-key-w_qi input", state="visible")
    wait_drawn(page)
    tab_to(page, on_widget("w_qi"), "the query select box", limit=20)
    choose_option(page, "3:on")
    wait_for_link(page, "qi=3")
    assert_focus_stays(page, "w_qi")
    tab_to(page, on_widget("w_kj"), "the key select box", limit=20)
    choose_option(page, "1:cat")
    wait_for_link(page, "qi=3", "kj=1")
    assert_focus_stays(page, "w_kj")
    weights = run(MHAConfig(mask="causal")).trace.weights
    assert shown_weight(page, 3, 1) == pytest.approx(weights[1, 3, 1], abs=5e-5)  # written with 4 decimals
    assert not np.isclose(weights[1, 3, 1], weights[0, 3, 1], atol=1e-3)  # head 1's cell, not head 0's
    screenshot(page, "keyboard_drill_down")
    assert not exceptions_on_page(page)


def custom_config(rows: str) -> MHAConfig:
    grid = tuple(tuple(c == "1" for c in row) for row in rows.split("."))
    return MHAConfig(tokens=("the", "cat", "sat"), mask="custom", custom_mask=grid)


# (e) The custom-mask editor: Tab into its grid, the arrows to a cell, Space toggles it.
def test_mask_editor_cell_toggled_by_keyboard(page, app_url):
    open_app(page, app_url, "?tokens=the+cat+sat&mask=custom&cmask=111.111.111")
    wait_for_panels(page, run(custom_config("111.111.111")).trace.weights)
    tab_to(page, lambda now: now.get("tag") == "CANVAS" and (now.get("key") or "").startswith("grid_"),
           "the custom mask's grid")
    press(page, "ArrowRight")  # into the first key column (the grid starts on the query labels)
    press(page, "ArrowDown")  # query 1
    press(page, "ArrowRight", 2)  # key 2
    press(page, "Space")
    wait_for_link(page, "mask=custom", "cmask=111.110.111")
    grid_key = active(page)["key"]
    assert grid_key and grid_key.startswith("grid_"), active(page)
    expected = run(custom_config("111.110.111")).trace.weights
    shown = wait_for_panels(page, expected)
    assert np.all(expected[:, 1, 2] == 0) and np.all(expected[:, 1, :2].sum(axis=-1) > 0.999)
    assert np.isnan(shown[:, 1, 2]).all() and np.isnan(shown).sum() == shown.shape[0]  # that cell alone is masked
    press(page, "Space")  # and back
    wait_for_link(page, "mask=custom", "cmask=111.111.111")
    wait_for_panels(page, run(custom_config("111.111.111")).trace.weights)
    screenshot(page, "keyboard_mask_editor")
    assert not exceptions_on_page(page)
