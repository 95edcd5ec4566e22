"""Through nginx in front of 2 replicas (deploy/replicas.sh): one browser session stays on one replica.

Streamlit keeps a session's widgets, uploaded files and download media in the process that holds
its websocket; without affinity an upload or a download lands on the other replica and fails.
The test changes controls, uploads a matrix and downloads the CSV through the proxy, then reads
nginx's access log (deploy/nginx.conf logs the affinity key and the upstream of every request):
every request carrying this browser's key went to one replica. The CSV is compared with the
engine's weights for the uploaded matrix.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import choose_setting, exceptions_on_page, open_app, press_seed_plus, wait_for_charts, wait_idle

from mha_core import run
from tools.launch import free_port
from ui.state.urlstate import config_from_params

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
LOG_LINE = re.compile(r'"(?P<request>[^"]*)" (?P<status>\d+) \d+ route=(?P<route>\S+) upstream=(?P<upstream>\S+)')

pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is missing (apt-get install nginx; .ci/run does it)")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """Two replicas behind nginx on free loopback ports: (proxy URL, prefix folder); stopped at the end."""
    prefix = tmp_path_factory.mktemp("replicas")
    env = {**os.environ, "MHA_PREFIX": str(prefix), "MHA_PROXY_PORT": str(free_port()),
           "MHA_BASE_PORT": str(free_port()), "MHA_PIN": "0", "PYTHON": sys.executable}
    script = ["bash", str(ROOT / "deploy" / "replicas.sh")]
    try:
        subprocess.run([*script, "start", "2"], env=env, check=True, timeout=180, capture_output=True)
        yield f"http://127.0.0.1:{env['MHA_PROXY_PORT']}", prefix
    finally:
        subprocess.run([*script, "stop"], env=env, timeout=60)


def wait_for_new_figure(page, before: str) -> None:
    """Wait until the heads figure's data differs from ``before`` (a JSON string of its z values)."""
    page.wait_for_function(
        """before => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
                       return !!el && !!el.data && JSON.stringify(el.data.map(t => t.z)) !== before; }""",
        arg=before,
        timeout=30_000,
    )
    wait_idle(page)


def figure_z(page) -> str:
    """The heads figure's z values as JSON, once that figure is drawn (the page's other figures may come first)."""
    handle = page.wait_for_function(
        """() => { const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
                   return !!el && !!el.data && JSON.stringify(el.data.map(t => t.z)); }""",
        timeout=30_000,
    )
    return handle.json_value()


def requests_by_route(log: Path) -> dict[str, list[tuple[str, str]]]:
    """Access-log lines grouped by affinity key: (request line, upstream) pairs."""
    routes: dict[str, list[tuple[str, str]]] = {}
    for line in log.read_text().splitlines():
        match = LOG_LINE.search(line)
        if match:
            routes.setdefault(match["route"], []).append((match["request"], match["upstream"]))
    return routes


def test_controls_upload_and_download_of_one_session_reach_one_replica(app_page, browser_context, proxy):
    url, prefix = proxy
    page = app_page
    open_app(page, url, "?seed=3&tokens=the+cat+sat+on+the+mat&d_model=16")
    wait_for_charts(page)

    before = figure_z(page)  # a control change: the seed's "+" button
    press_seed_plus(page)
    wait_for_new_figure(page, before)

    before = figure_z(page)  # an upload: a 6 x 16 matrix as CSV
    choose_setting(page, "w_embedding", "uploaded matrix")
    wait_idle(page)
    table = np.random.default_rng(11).standard_normal((6, 16)).round(4)  # (T, C)
    csv = "\n".join(",".join(f"{v:.4f}" for v in row) for row in table).encode()
    page.locator(".st-key-upload_embedding input[type='file']").set_input_files(
        {"name": "matrix.csv", "mimeType": "text/csv", "buffer": csv})
    wait_for_new_figure(page, before)
    assert exceptions_on_page(page) == []
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0

    page.locator(".st-key-heads_downloads summary").click()  # the downloads, drawn only while their section is open
    with page.expect_download() as download_info:  # a download: the heads figure's CSV
        page.locator(".st-key-dl_grid button").click()
    data = Path(download_info.value.path()).read_bytes()

    # The CSV shows the engine's weights for the uploaded matrix at the page's settings.
    query = page.evaluate("() => window.location.search").lstrip("?")
    params = dict(pair.split("=", 1) for pair in query.split("&") if "=" in pair)
    params = {k: v.replace("+", " ") for k, v in params.items()}
    config, _ = config_from_params(params)
    assert config.seed == 4
    trace = run(replace(config, embedding="custom", custom_embedding=tuple(map(tuple, table)))).trace
    frame = pd.read_csv(io.BytesIO(data), index_col=[0, 1])
    shown = frame.to_numpy().reshape(trace.weights.shape)  # (nh, T, T)
    np.testing.assert_allclose(shown, trace.weights, rtol=0, atol=1e-6)

    # Every request this browser sent with its affinity key went to one replica. nginx logs the
    # websocket when it closes: leave the page, then wait for its line.
    cookie = {c["name"]: c["value"] for c in browser_context.cookies(url)}["mha_route"]
    page.goto("about:blank")
    log = prefix / "logs" / "access.log"
    for _ in range(100):
        ours = requests_by_route(log).get(cookie, [])
        if any(request.startswith("GET /_stcore/stream") for request, _ in ours):
            break
        time.sleep(0.1)
    requests = " ".join(request for request, _ in ours)
    for kind in ("GET /_stcore/stream", "/_stcore/upload_file/", "GET /media/"):
        assert kind in requests, f"no {kind} request went through the proxy with this session's key"
    assert len({upstream for _, upstream in ours}) == 1, ours
