"""The static pack builds the page a teacher's link names (deploy/static_pack.py ``LINK_PAGES``), or says why not.

The heatmaps of each built page are decoded from the written HTML and compared with the engine's arrays for that
link (read here with the app's own URL reader); the refused lines are checked with their line numbers and the app's
own messages; each page's "open in the live app" link is read back as the app reads it.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from deploy import static_pack
from mha_core.config import run
from tests.test_static_pack import decode, page_data
from ui.pages import compare
from ui.pages.flash import FLASH_SETTINGS
from ui.pages.lessons import LESSONS
from ui.state.settings import values_of
from ui.state.urlstate import config_from_params, read_settings, view_from_params

ROOT = Path(__file__).resolve().parents[1]
APP = "https://mha.example.org"
LINES = [
    "?tokens=the+cat+sat+on+the+mat&pe=alibi&view=logits&avg=1&head=2&knock=1&colours=head",  # 1 Heads
    "http://127.0.0.1:8501/step_by_step?tokens=a+b+c+d&mask=causal&heads=2&d_model=8&head=1&qi=2&kj=1",  # 2
    "flash?tokens=the+cat+sat+on+the+mat&mask=causal&head=1&br=2&bc=3&tile=4",  # 3: tile (2, 0), rows 4-5
    "lessons?lesson=rope&present=1",  # 4
    "compare?tokens=a+b+c&mask=causal&b_scale=none&b_mask=none",  # 5
    "not a link",  # 6
    "fash?tokens=a+b&tile=2",  # 7: no such page
    "decoding?tokens=a+b",  # 8
    "http://127.0.0.1:8501/real_model",  # 9
    "?tokens=a+b&token=x",  # 10: a parameter no page reads
    "flash?tokens=a+b&tile=9",  # 11: a bad value of the page's own
    "step_by_step?tokens=a+b&head=5",  # 12: a bad view value
    "lessons?lesson=nope",  # 13
    "compare?tokens=a+b&b_tokens=c+d+e",  # 14: A and B on other tokens
    "flash?tokens=a+b+c&kernel=linear",  # 15: the tiled kernel refuses
    "?tokens=a+b&heads=3&d_model=8",  # 16: a model value the app repairs
    "# a comment",
    "",
    "seeds",  # 19
    "about?tokens=a",  # 20
]
BUILT = [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """The links' pages, no lesson pages (every lesson is built by test_the_build_runs_no_streamlit below)."""
    out = tmp_path_factory.mktemp("links") / "pack"
    return out, static_pack.build_pack(out, LINES, APP, lessons=())


def settings(number: int):
    """The link's page, parameters, configuration and view, as the app reads them."""
    link = static_pack.read_link(number, LINES[number - 1])
    config, messages = config_from_params(link.params)
    view, view_messages = view_from_params(link.params, config)
    assert not messages and not view_messages
    return link, config, view


def shown(out: Path, number: int) -> list[tuple[str, np.ndarray]]:
    """(title, values) of every heatmap of link ``number``'s page, decoded from its HTML (NaN = blank or masked)."""
    return [(f["title"], decode(f["data"][0]["z"]).astype(np.float64))
            for f in page_data(out / f"link-{number}.html")["figures"]]


def same(z: np.ndarray, expected: np.ndarray) -> bool:
    """The heatmap shows ``expected`` (float32, as plotly gets it): blank exactly where it is not finite."""
    expected = np.asarray(expected, dtype=np.float64)
    finite = np.isfinite(expected)
    return (z.shape == expected.shape and np.array_equal(np.isnan(z), ~finite)
            and np.array_equal(z[finite], expected.astype(np.float32)[finite].astype(np.float64)))


def test_only_the_good_links_are_built(pack):
    out, report = pack
    assert sorted(p.name for p in out.glob("link-*.html")) == sorted(f"link-{n}.html" for n in BUILT)
    assert [s.line for s in report.skipped] == [6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 20]


def test_each_refusal_says_why_with_the_apps_own_message(pack):
    _, report = pack
    why = {s.line: " ".join(s.messages) for s in report.skipped}
    assert why[6].startswith("not a link")
    assert "'fash' is not a page of the app" in why[7] and "flash" in why[7]
    assert why[8].startswith("Decoding pages are not built: ") and "stepper" in why[8]
    assert why[9].startswith("Real model pages are not built: ")
    assert why[10] == "`token` is not a parameter of the Heads page (the app would ignore it)."
    config, _ = config_from_params({"tokens": "a b"})
    flash_messages: list[str] = []
    read_settings({"tile": "9"}, FLASH_SETTINGS, values_of(config), flash_messages)
    assert flash_messages and why[11] == " ".join(flash_messages)  # "`tile=9` is outside 0..0: using 0."
    _, view_messages = view_from_params({"head": "5"}, config)
    assert view_messages and why[12] == " ".join(view_messages)
    assert why[13].startswith("There is no lesson called 'nope'. Choose one of: wo, causal")
    a, b = run(config), run(compare.config_b(config, {"tokens": "c d e"})[0])
    assert why[14] == compare.compare(a, b)
    assert why[15].startswith("The tiled kernel cannot run these settings: the linear kernel")
    _, repaired = config_from_params(dict(parse_qsl("tokens=a+b&heads=3&d_model=8")))
    assert repaired and why[16] == " ".join(repaired)
    assert why[19].startswith("Seed notebooks pages are not built: ")
    assert why[20].startswith("About pages are not built: ")


def test_the_command_line_names_file_and_line_and_exits_1(tmp_path):
    links = tmp_path / "links.txt"
    links.write_text("\n".join(LINES[5:16]))  # the refused lines 6..16, as lines 1..11 of this file
    few = ["--lessons", "causal"]  # the links are what is checked here; one lesson keeps the build short
    done = subprocess.run([sys.executable, "-m", "deploy.static_pack", str(tmp_path / "out"), "--links", str(links),
                           *few], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert [re.match(rf"{re.escape(str(links))}:(\d+): not built: ", line).group(1) for line in lines] == \
        [str(n) for n in range(1, 12)]
    assert lines[0].endswith("not built: not a link: write an address of the app "
                             "(https://host/step_by_step?tokens=the+cat+sat), a page and its query "
                             "(flash?tokens=a+b+c&tile=2) or a query string (?tokens=the+cat+sat).")
    good = tmp_path / "good.txt"
    good.write_text("\n".join(LINES[:5]))
    done = subprocess.run([sys.executable, "-m", "deploy.static_pack", str(tmp_path / "out2"), "--links", str(good),
                           *few], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == ""


def test_a_heads_link_shows_every_head_of_its_view_and_their_average(pack):
    out, _ = pack
    _, config, view = settings(1)
    assert view["view"] == "logits" and view["avg"]
    logits = run(config).trace.logits  # (nh, T, T), ALiBi's bias in them
    panels = shown(out, 1)
    assert [t for t, _ in panels] == [f"head {h}" for h in range(config.n_heads)] + ["average of heads"]
    for h in range(config.n_heads):
        assert same(panels[h][1], logits[h])
    assert same(panels[-1][1], logits.mean(axis=0))


def test_a_step_by_step_link_shows_its_heads_steps(pack):
    out, _ = pack
    _, config, view = settings(2)
    result = run(config)
    t, h = result.trace, view["head"]
    assert h == 1
    panels = shown(out, 2)
    expected = {"E": result.embeddings, "W_Q": result.weights.w_q, "W_O": result.weights.w_o, "Q_h": t.q[h],
                "K_h": t.k[t.kv_head_of(h)], "V_h": t.v[t.kv_head_of(h)], "scores": t.scores[h],
                "mask": result.mask.astype(float), "logits": t.logits[h], "weights": t.weights[h], "head": t.heads[h],
                "concat": t.concat, "Y": t.output}
    for name, array in expected.items():
        assert any(same(z, array) for _, z in panels), name
    assert not any(same(z, t.weights[1 - h]) for _, z in panels)  # the other head is not followed
    spec = page_data(out / "link-2.html")["figures"]
    weights_figure = next(f for f in spec if same(decode(f["data"][0]["z"]).astype(np.float64), t.weights[h]))
    (cell,) = [s for s in weights_figure["layout"]["shapes"] if s["line"]["color"] == "magenta"]
    assert (cell["x0"] + 0.5, cell["y0"] + 0.5) == (view["kj"], view["qi"])  # the link's cell, outlined


def test_a_flash_link_shows_its_tile_and_the_output_so_far(pack):
    out, _ = pack
    link, config, view = settings(3)
    result = run(config)
    t, h = result.trace, view["head"]
    g = t.kv_head_of(h)
    # br=2, bc=3 on 6 tokens: query blocks 0-1, 2-3, 4-5 and key blocks 0-2, 3-5; step 4 (0-based) is block (2, 0)
    rows, cols = slice(4, 6), slice(0, 3)
    logits = t.logits[h][rows, cols]  # (2, 3) the tile, masked cells -inf
    m_new = logits.max(axis=1, keepdims=True)  # the row block's first tile: the running max is the tile's
    panels = dict(shown(out, 3))
    assert same(panels["S tile (2, 0) = Q_i K_jᵀ · scale (masked)"], logits)
    assert np.allclose(panels["P̃ = exp(S − m_new)"], np.exp(logits - m_new), rtol=1e-6, atol=0)
    assert same(panels["softmax(S) V from the engine (head 1)"], t.heads[h])
    so_far = panels["O after step 5 (head 1)"]
    assert np.allclose(so_far[:4], t.heads[h][:4], rtol=0, atol=1e-6)  # row blocks 0 and 1 are finished
    partial = np.exp(logits - m_new) / np.exp(logits - m_new).sum(axis=1, keepdims=True)  # keys 0..2 seen so far
    assert np.allclose(so_far[4:], partial @ t.v[g][cols], rtol=0, atol=1e-6)
    assert not np.allclose(so_far[4:], t.heads[h][4:], atol=1e-3)  # not the finished rows yet


def test_a_lesson_link_is_that_lesson(pack):
    out, _ = pack
    lesson = LESSONS["rope"]
    expected = []
    for figure in lesson.findings(lesson.panels).figures:
        expected += list(figure.matrices) if hasattr(figure, "matrices") else [figure.matrix]
    panels = shown(out, 4)
    assert len(panels) == len(expected)
    for (_, z), matrix in zip(panels, expected, strict=True):
        assert np.array_equal(z[np.isfinite(z)], np.asarray(matrix, dtype=np.float32)[np.isfinite(z)])


def test_a_compare_link_shows_a_b_and_their_difference_per_head(pack):
    out, _ = pack
    link, config_a, _ = settings(5)
    config_b, messages = compare.config_b(config_a, compare.b_overrides(link.params))
    assert not messages and config_b.scale_rule == "none" and config_b.mask == "none"
    a, b = run(config_a), run(config_b)
    panels = dict(shown(out, 5))
    assert len(panels) == 3 * config_a.n_heads
    for h in range(config_a.n_heads):
        visible = a.mask  # A's masked cells are grey in A's panel; B has no mask
        assert same(panels[f"A: head {h}"], np.where(visible, a.trace.weights[h], -np.inf))
        assert same(panels[f"B: head {h}"], b.trace.weights[h])
        assert same(panels[f"B − A: head {h}"], b.trace.weights[h] - a.trace.weights[h])


def live_link(out: Path, number: int) -> tuple[str, dict[str, str]]:
    """The page and the parameters of a page's "open in the live app" link."""
    text = (out / f"link-{number}.html").read_text(encoding="utf-8")
    (href,) = re.findall(r"<a class='live' href='([^']*)'>", text)
    parts = urlsplit(unescape(href))
    assert f"{parts.scheme}://{parts.netloc}" == APP
    return parts.path.strip("/") or "heads", dict(parse_qsl(parts.query, keep_blank_values=True))


@pytest.mark.parametrize("number", BUILT)
def test_the_live_link_opens_exactly_that_view(pack, number):
    out, _ = pack
    link = static_pack.read_link(number, LINES[number - 1])
    page, params = live_link(out, number)
    assert page == link.page
    assert set(link.params) <= set(params)  # every parameter of the teacher's link travels
    if page == "lessons":
        assert params == {"lesson": link.params["lesson"], "present": link.params["present"]}
        return
    config, messages = config_from_params(params)
    assert not messages and config == config_from_params(link.params)[0]
    view, view_messages = view_from_params(params, config)
    assert not view_messages and view == view_from_params(link.params, config)[0]
    if page == "flash":
        own = [read_settings(p, FLASH_SETTINGS, values_of(config), []) for p in (params, link.params)]
        assert [{r.name: o[r.name] for r in FLASH_SETTINGS} for o in own] == [{"br": 2, "bc": 3, "tile": 4}] * 2
    if page == "compare":
        for_b = [compare.config_b(config, compare.b_overrides(p)) for p in (params, link.params)]
        assert for_b[0] == for_b[1] and not for_b[0][1]


def test_every_page_of_the_app_has_a_row():
    from ui.state.navigation import PAGES  # streamlit is imported here only, never by the pack

    assert list(static_pack.LINK_PAGES) == [info.name for info in PAGES]
    for name, row in static_pack.LINK_PAGES.items():
        assert (row.build is None) == bool(row.refusal), name


def test_the_build_runs_no_streamlit(tmp_path):
    """Every lesson and five links built in a process of their own (the one whole build in a new process: the
    command-line tests build one lesson), with no Streamlit imported and nothing said on stderr."""
    code = ("import sys; from deploy import static_pack; "
            f"static_pack.build_pack({str(tmp_path / 'p')!r}, {LINES[:5]!r}); print('streamlit' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "False", done.stderr
    assert done.returncode == 0 and done.stderr == ""
    assert {f"lesson-{key}.html" for key in LESSONS} <= {p.name for p in (tmp_path / "p").glob("*.html")}


def test_the_command_line_builds_the_lessons_it_is_given_and_refuses_an_unknown_one(tmp_path):
    command = [sys.executable, "-m", "deploy.static_pack"]
    done = subprocess.run([*command, str(tmp_path / "out"), "--lessons", "causal, rope"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == ""
    built = sorted(p.name for p in (tmp_path / "out").glob("lesson-*.html"))
    assert built == ["lesson-causal.html", "lesson-rope.html"]
    numbers = [list(LESSONS).index(key) + 1 for key in ("causal", "rope")]
    index = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert all(html.escape(f"{n}. {LESSONS[key].title}") in index
               for n, key in zip(numbers, ("causal", "rope"), strict=True))  # each keeps its number in the app's list
    done = subprocess.run([*command, str(tmp_path / "out2"), "--lessons", "causal,nosuch"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "no lesson nosuch" in done.stderr and "causal" in done.stderr
    assert not (tmp_path / "out2").exists()
