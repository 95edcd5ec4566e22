"""The static pack's live links open the view whose numbers the pack page shows (issue 32, item 8).

Small on purpose, and only through the public ``build_pack`` (deploy/static_pack.py is being rewritten): every
link of a pack page into the live app is read with the app's own link reader, that configuration is run by the
engine, and the page's heatmaps must be its matrices (link pages, presets); a lesson page's links must open each of
the lesson's configurations.
"""

from __future__ import annotations

import base64
import html
import json
import re
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from deploy import static_pack
from mha_core.config import run
from ui.pages.lessons import LESSONS
from ui.state.urlstate import config_from_params


def query_of(link: str) -> dict[str, str]:
    """A live link's parameters, as the app reads its address (the notebook's reader refuses non-notebook pages)."""
    return dict(parse_qsl(urlsplit(link).query, keep_blank_values=True))

APP = "https://mha.example.org"
LINKS = ["?tokens=a+b+c+d+e&heads=4&kv_heads=2&d_model=16&pe=rope&mask=causal&view=logits",
         "?tokens=x+y+z&kv_tokens=p+q+r+s&kernel=differential&heads=2&d_model=16",
         "?tokens=the+cat+sat&pe=alibi&mask=window&window=1&null=1&view=scores"]


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    out = tmp_path_factory.mktemp("stated_pack") / "pack"
    static_pack.build_pack(out, LINKS, APP)
    return out


def live_links(text: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r"href='([^']*)'", text) if html.unescape(h).startswith(APP + "/")]


def figures(text: str) -> list[np.ndarray]:
    found = re.search(r"window\.PACK = (.*?);</script>", text, re.S)
    shown = []
    for figure in json.loads(found.group(1).replace("<\\/", "</"))["figures"]:
        z = figure["data"][0]["z"]
        if isinstance(z, dict):
            shape = [int(n) for n in str(z["shape"]).split(",")]
            shown.append(np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape).astype(np.float64))
        else:
            shown.append(np.array(z, dtype=np.float64))
    return shown


def test_each_link_pages_live_link_opens_the_configuration_whose_numbers_it_shows(pack):
    pages = sorted(pack.glob("link-*.html")) + sorted(pack.glob("preset-*.html"))
    assert len(pages) >= len(LINKS)
    for path in pages:
        text = path.read_text(encoding="utf-8")
        (link,) = set(live_links(text))
        params = query_of(link)
        config, messages = config_from_params(params)
        assert not messages, (path.name, messages)
        result = run(config)
        trace = result.trace
        visible = np.ones(trace.weights.shape[1:], dtype=bool) if result.mask is None else result.mask
        matrices = {"weights": trace.weights, "logits": trace.logits, "scores": trace.scores}[params.get("view",
                                                                                                        "weights")]
        shown = figures(text)
        assert len(shown) == len(matrices), path.name
        for h, z in enumerate(shown):
            expected = matrices[h].astype(np.float32).astype(np.float64)
            drawn = np.isfinite(z)
            assert np.array_equal(drawn, visible), f"{path.name} {h}: the masked cells are not the link's mask"
            np.testing.assert_allclose(z[drawn], expected[drawn], rtol=1e-6, atol=1e-6, err_msg=f"{path.name} {h}")


def test_each_lesson_pages_links_open_its_configurations(pack):
    for key, lesson in LESSONS.items():
        text = (pack / f"lesson-{key}.html").read_text(encoding="utf-8")
        links = live_links(text)
        explorer = [query_of(link) for link in links if "/lessons" not in link]
        assert [config_from_params(params)[0] for params in explorer] == [p.config for p in lesson.panels], key
        assert any(query_of(link).get("lesson") == key for link in links), key
