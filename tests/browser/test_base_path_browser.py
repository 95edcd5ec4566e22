"""The app under a path prefix (``--server.baseUrlPath``, as behind a proxy that serves it at /course/mha/): the
elements' served modules (ui/widgets/served.py) and plotly.js are fetched from below the prefix, the settings
element and the charts are drawn, and Seed + redraws a heatmap with the engine's numbers at the new seed."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    ELEMENTS_DRAWN_JS,
    exceptions_on_page,
    press_seed_plus,
    wait_drawn,
    wait_idle,
)
from shown_charts import decode

from mha_core.config import MHAConfig, run
from tools.launch import app_command, free_port, running_server

BASE_PATH = "/course/mha"
FIRST_PANEL_Z_JS = """() => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
    const panel = el && el.data ? el.data.find(t => t.coloraxis) : null; return panel ? panel.z : null; }"""


@pytest.fixture(scope="module")
def prefixed_url(tmp_path_factory):
    port = free_port()
    command = [*app_command(port), "--server.baseUrlPath", BASE_PATH.strip("/")]
    log = tmp_path_factory.mktemp("prefixed") / "server.log"
    with running_server(command, port, log, base_path=BASE_PATH) as (server, _):
        yield server.url


def test_under_a_path_prefix_the_served_modules_load_and_seed_plus_redraws(app_page, prefixed_url):
    requests = []
    app_page.on("request", lambda request: requests.append(request.url))
    app_page.goto(f"{prefixed_url}/?seed=3")
    wait_idle(app_page)
    app_page.wait_for_function(ELEMENTS_DRAWN_JS, timeout=30_000)
    wait_drawn(app_page)
    served = [url for url in requests if "/app/static/" in url]
    assert served, requests
    assert all(url.startswith(f"{prefixed_url}/app/static/") for url in served), served
    names = {url.split("/app/static/", 1)[1].split("?", 1)[0] for url in served}
    assert {"mha/live.js", "mha/live_canvas.js", "mha/controls.js", "mha/page_menu.js"} <= names, names
    assert any(name.startswith("plotly-") for name in names), names
    shown = decode(app_page.wait_for_function(FIRST_PANEL_Z_JS).json_value())
    np.testing.assert_allclose(shown, run(MHAConfig(seed=3)).trace.weights[0], atol=1e-6)
    app_page.hover('[data-testid="mhaPageMenu"] a[data-path="step_by_step"]')  # a link takes the address on hover
    hrefs = app_page.evaluate("() => [...document.querySelectorAll('[data-testid=\"mhaPageMenu\"] a')].map(a => a.href)")
    step = [href for href in hrefs if href.startswith(f"{prefixed_url}/step_by_step?")]  # the menu keeps the prefix
    assert len(step) == 1 and "seed=3" in step[0].split("?")[1].split("&"), hrefs
    assert all(href.startswith(f"{prefixed_url}/") for href in hrefs), hrefs
    press_seed_plus(app_page)
    app_page.wait_for_function("() => new URLSearchParams(location.search).get('seed') === '4'", timeout=30_000)
    wait_idle(app_page)
    wait_drawn(app_page)
    shown = decode(app_page.wait_for_function(FIRST_PANEL_Z_JS).json_value())
    np.testing.assert_allclose(shown, run(MHAConfig(seed=4)).trace.weights[0], atol=1e-6)
    assert not exceptions_on_page(app_page)
