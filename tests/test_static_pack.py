"""The static lesson pack (deploy/static_pack.py), without a browser: what is written, what is refused, what is reported.

The browser half (every page drawn from file:// with the network blocked) is tests/browser/test_static_pack_browser.py.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deploy import static_pack
from mha_core.config import MHAConfig, run
from mha_core.presets import PRESET_INITS
from ui.pages.lessons import LESSONS
from ui.state.notebook_link import parse_link
from ui.state.urlstate import config_from_params

ROOT = Path(__file__).resolve().parents[1]
TOO_LONG = "+".join(["word"] * 70)
LINK_LINES = [
    "# the teacher's list",
    "http://127.0.0.1:8501/step_by_step?tokens=a+b+c+d&mask=causal&heads=2&d_model=8",
    "",
    "?tokens=a+b&heads=3&d_model=8",  # line 4: not a divisor, the app would fall back
    f"?tokens={TOO_LONG}",  # line 5: over the token limit
    "?tokens=the+cat+sat&pe=alibi&view=logits",  # line 6
    "?tokens=a+b+c&d_model=100000",  # line 7: over the d_model limit
]


def page_data(path: Path) -> dict:
    """The PACK object a page hands to pack.js."""
    text = path.read_text(encoding="utf-8")
    found = re.search(r"<script>window\.PACK = (.*?);</script>", text, re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def decode(z) -> np.ndarray:
    """plotly's typed-array form (or plain lists) as an array; null -> NaN."""
    if isinstance(z, dict):
        array = np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"])
        shape = z.get("shape")
        shape = [int(n) for n in shape.split(",")] if isinstance(shape, str) else shape
        return array.reshape(shape) if shape else array
    return np.array(z, dtype=np.float64)


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    out = tmp_path_factory.mktemp("packs") / "pack"
    report = static_pack.build_pack(out, LINK_LINES, "https://mha.example.org")
    return out, report


def test_the_pack_has_an_index_a_page_per_lesson_preset_and_good_link(pack):
    out, report = pack
    expected = {"index.html", *(f"lesson-{k}.html" for k in LESSONS), *(f"preset-{i}.html" for i in PRESET_INITS),
                "link-2.html", "link-6.html"}
    assert {p.name for p in out.glob("*.html")} == expected
    index = (out / "index.html").read_text()
    for name in expected - {"index.html"}:
        assert f"href='{name}'" in index


def test_bad_links_are_reported_by_line_with_the_apps_own_message(pack):
    out, report = pack
    assert [s.line for s in report.skipped] == [4, 5, 7]
    index = (out / "index.html").read_text()
    for skipped in report.skipped:
        _, messages = config_from_params(parse_link(LINK_LINES[skipped.line - 1]).params)
        assert messages and list(skipped.messages) == messages
        assert f"line {skipped.line} " in index
        for message in messages:
            assert message.replace("`", "").split(":")[0][:30] in index.replace("`", "").replace("&#x27;", "'")


def test_one_copy_of_plotly_js_and_nothing_fetched_from_elsewhere(pack):
    out, _ = pack
    scripts = [p for p in out.rglob("*.js")]
    assert sorted(p.name for p in scripts) == ["pack.js", "plotly.min.js"]
    assert (out / "assets" / "plotly.min.js").read_bytes() == static_pack.PLOTLY_JS.read_bytes()
    for page in out.glob("*.html"):
        text = page.read_text()
        assert not re.search(r"<script[^>]+src=['\"]?(https?:)?//", text), page.name
        assert not re.search(r"<link[^>]+href=['\"]?(https?:)?//", text), page.name
        assert "MHA Explorer 0.1.0" in text


def test_each_page_states_its_configuration_and_links_to_the_live_view(pack):
    out, _ = pack
    text = (out / "link-2.html").read_text()
    assert "https://mha.example.org/step_by_step?" in text and "mask=causal" in text
    assert "tokens=a b c d" in text  # the configuration it was built from, in its footer
    assert "https://mha.example.org/lessons?lesson=rope" in (out / "lesson-rope.html").read_text()


def test_the_heatmaps_hold_the_engines_numbers(pack):
    out, _ = pack
    result = run(MHAConfig(init="previous"))
    figures = page_data(out / "preset-previous.html")["figures"]
    assert len(figures) == result.config.n_heads
    for h, figure in enumerate(figures):
        shown = decode(figure["data"][0]["z"])
        assert np.array_equal(shown, result.trace.weights[h].astype(np.float32))
    config, _ = config_from_params(parse_link(LINK_LINES[5]).params)  # a Heads link in the logits view, ALiBi
    result = run(config)
    figures = page_data(out / "link-6.html")["figures"]
    assert len(figures) == config.n_heads
    for h, figure in enumerate(figures):
        shown = decode(figure["data"][0]["z"])  # masked cells are NaN here, drawn grey by a layer of their own
        logits = result.trace.logits[h]
        assert np.array_equal(np.isnan(shown), np.isneginf(logits))
        assert np.array_equal(shown[np.isfinite(logits)], logits[np.isfinite(logits)].astype(np.float32))
    # the Step-by-step link (line 2) and every other page kind: tests/test_static_pack_links.py


def test_an_existing_folder_is_never_deleted_without_being_asked(tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("a teacher's file")
    with pytest.raises(FileExistsError, match="--force"):
        static_pack.build_pack(mine)
    with pytest.raises(FileExistsError, match="not a pack"):
        static_pack.build_pack(mine, force=True)  # not ours: kept even with --force
    assert (mine / "keep.txt").read_text() == "a teacher's file"
    done = subprocess.run([sys.executable, "-m", "deploy.static_pack", str(mine)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "--force" in done.stderr
    assert (mine / "keep.txt").exists()
    pack = tmp_path / "pack"
    static_pack.build_pack(pack, lessons=())  # the folders are what this test reads: no lesson pages
    (pack / "old.html").write_text("from the last build")
    with pytest.raises(FileExistsError):
        static_pack.build_pack(pack, lessons=())
    static_pack.build_pack(pack, force=True, lessons=())  # a pack of ours, and asked: replaced
    assert not (pack / "old.html").exists() and (pack / "index.html").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".pack-")]  # no staging folder left behind


def test_the_command_line_reports_bad_lines_and_builds_the_rest(tmp_path):
    links = tmp_path / "links.txt"
    links.write_text("\n".join(LINK_LINES))
    done = subprocess.run([sys.executable, "-m", "deploy.static_pack", str(tmp_path / "out"), "--links", str(links),
                           "--lessons", "causal"], cwd=ROOT, capture_output=True, text=True, timeout=300)  # one lesson:
    assert done.returncode == 1  # built, but some lines were left out (the links are what this test reads)
    assert f"{links}:4: not built: " in done.stderr and f"{links}:7: not built: " in done.stderr
    assert (tmp_path / "out" / "link-6.html").exists()
