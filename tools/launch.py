"""Start the app's Streamlit server and Debian's Chromium: one launcher for tests, benchmarks and deploy.

    with streamlit_server(folder) as server:            # app.py on a free loopback port, healthy
        context = chromium_context(playwright, folder)  # Chromium, fresh profile (sync or async API)

    python -m tools.launch PORT                         # the same server from a shell (deploy/replicas.sh)

A server runs on 127.0.0.1 only (without ``--server.address`` Streamlit looks up an external IP), on
a port free right now, its output in a log file (a pipe could fill and stall it); it counts as up
once ``/_stcore/health`` answers ok, and it is always stopped on the way out. Chromium is
``/usr/bin/chromium`` with flags that keep it quiet on a closed network (never ``playwright
install``). Facts behind the flags: ``/work/shared/TESTING.md``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
SERVER_START_S = 60.0  # a cold server imports streamlit, numpy, pandas and plotly first
HEALTH = "/_stcore/health"
CHROMIUM = Path("/usr/bin/chromium")
# Without the networking flags Chromium floods a closed network with refused connections.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 720}


# --- the server -----------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def app_command(port: int, script: Path = APP) -> list[str]:
    """``streamlit run app.py`` (or ``script``) on loopback, with the flags every test and benchmark server uses."""
    return [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
            "--server.headless", "true", "--server.address", "127.0.0.1",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]


@dataclass(frozen=True)
class Server:
    """A running Streamlit server: where to reach it, its process id, its log file."""

    url: str
    pid: int
    log: Path


def wait_healthy(server: Server, process: subprocess.Popen, timeout: float) -> None:
    """Poll /_stcore/health until it answers ok; RuntimeError (with the log's tail) when the server dies or is late."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {process.returncode}:\n{server.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{server.url}{HEALTH}", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"streamlit was not healthy within {timeout:.0f} s:\n{server.log.read_text()[-3000:]}")


@contextlib.contextmanager
def running_server(command: list[str], port: int, log: Path, start_s: float = SERVER_START_S, cwd: Path = ROOT,
                   base_path: str = "", **popen) -> Iterator[tuple[Server, subprocess.Popen]]:
    """Start ``command`` (a server on ``port``) in ``cwd``, its output in ``log``; wait until healthy; always stopped.

    ``base_path``: the server's ``--server.baseUrlPath`` ("/course/mha"), part of its URL. ``popen``: more
    ``subprocess.Popen`` arguments (``env``, ``preexec_fn``).
    """
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, **popen)
    server = Server(f"http://127.0.0.1:{port}{base_path}", process.pid, log)
    try:
        wait_healthy(server, process, start_s)
        yield server, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def streamlit_server(directory: Path, script: Path = APP) -> Iterator[Server]:
    """``streamlit run app.py`` on a free loopback port, its output in ``directory``/server.log; always stopped."""
    port = free_port()
    with running_server(app_command(port, script), port, directory / "server.log", env={**os.environ}) as (server, _):
        yield server


# --- the browser ----------------------------------------------------------------------------


def missing_browser() -> str | None:
    """Why Chromium cannot be driven here (no /usr/bin/chromium, no playwright package), or None when it can."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install chromium; .ci/run does it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (pip install -r requirements-dev.txt)"
    return None


def chromium_context(playwright, directory: Path):
    """Chromium with a fresh profile in ``directory``/profile, 1280x720.

    Works with either Playwright API: the sync API returns the browser context, the async API a
    coroutine to await. A temporary profile goes through ``launch_persistent_context``, not a
    ``--user-data-dir`` flag.
    """
    return playwright.chromium.launch_persistent_context(
        str(directory / "profile"), executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True,
        viewport=VIEWPORT,
    )


def chromium_browser(playwright):
    """Chromium without a profile, for many separate contexts (sync API: the browser; async: a coroutine)."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)


def run_coroutine(coroutine):
    """``asyncio.run`` that also works where this thread already runs an event loop.

    Playwright's sync API (the browser tests' session fixture) keeps a loop running in the main
    thread; there the coroutine (a protocol client, an async browser) runs in a thread of its own.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def serve(port: int) -> None:
    """Become ``streamlit run app.py`` on ``port`` (same process id): deploy/replicas.sh starts its replicas so."""
    command = app_command(port)
    os.chdir(ROOT)
    os.execv(command[0], command)


if __name__ == "__main__":  # python -m tools.launch PORT
    serve(int(sys.argv[1]))
