"""Section "capacity": how many students one server process on one core serves.

The students are light protocol clients (bench/st_client.py) in this one process, pinned to
core 0; the server is one ``streamlit run`` pinned to core 1 with ``taskset -c 1``. So the
server's core is the server's alone, except for what other programs on the machine take (the
load average beside every row says how busy the machine was).

A ladder of classrooms on one warm server: N students open the Heads page from a shared link,
each at a random moment of the first period, then each changes the seed every ~5 s (period +-20 %),
each in a seed range of its own so the cache cannot answer. N grows until p95 > 1 s or an error;
the last rung that held is the capacity.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.processes import cpu_seconds, status_kb
from bench.report import skipped_row
from bench.st_client import run_classroom
from tools.launch import ROOT, Server, app_command, free_port, running_server

PERIOD_S = 5.0  # one change per student every 5 s
FULL_LADDER = (2, 5, 10, 25, 50, 100, 125, 150, 200, 300)  # students per rung
QUICK_LADDER = (3,)
FULL_DURATION_S = 30.0
QUICK_DURATION_S = 3.0
QUICK_PERIOD_S = 1.0
GOAL_P95_MS = 1000.0
GOAL_RATE = 30.0  # changes per second on one core (issue 11: >= 150 students at one change per 5 s)
SERVER_CPU = "1"  # the core the server runs on; the clients take core 0
CLIENT_CPU = {0}


def server_command(port: int, cpus: str | None, script: Path = ROOT / "app.py") -> list[str]:
    """The command line of one app server on loopback, pinned to ``cpus`` when given and taskset exists."""
    command = app_command(port, script)
    if cpus is not None and shutil.which("taskset"):
        return ["taskset", "-c", cpus, *command]
    return command


@contextlib.contextmanager
def pinned_server(directory: Path, cpus: str | None = SERVER_CPU, port: int | None = None,
                  script: Path = ROOT / "app.py") -> Iterator[Server]:
    """One app server (taskset execs it: the pid is streamlit's), its log in ``directory``; always stopped."""
    port = port or free_port()
    with running_server(server_command(port, cpus, script), port, directory / f"server-{port}.log") as (server, _):
        yield server


@contextlib.contextmanager
def clients_on(cpus: set[int]) -> Iterator[None]:
    """Run this process (the clients) on ``cpus`` while inside; the old affinity afterwards."""
    if not hasattr(os, "sched_setaffinity") or not cpus <= os.sched_getaffinity(0):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def held(row: dict) -> bool:
    """A rung holds with no error and p95 within the goal."""
    return row["errors"] == 0 and row["p95_ms"] is not None and row["p95_ms"] <= GOAL_P95_MS


def ladder(url: str, rungs: tuple[int, ...], period_s: float, duration_s: float, server_pids: list[int]) -> list[dict]:
    """One classroom per rung on the running server(s), up to the first rung that does not hold."""
    rows = []
    for students in rungs:
        cpu_start = sum(cpu_seconds(pid) for pid in server_pids)
        row = {"offered_per_s": students / period_s} | run_classroom(url, students, period_s, duration_s)
        runs = row["changes"] + row["students"]
        row["server_cpu_ms_per_run"] = (sum(cpu_seconds(pid) for pid in server_pids) - cpu_start) * 1e3 / max(runs, 1)
        row["rss_mb"] = sum(status_kb(pid, "VmRSS") or 0 for pid in server_pids) / 1024
        row["load_avg_1m"] = os.getloadavg()[0]
        row["held"] = held(row)
        rows.append(row)
        if not row["held"]:
            break
    return rows


def capacity_row(rows: list[dict], goal_rate: float | None) -> dict:
    """The summary: the highest offered change rate that held, and the students that is at one change per 5 s."""
    best = max((row["offered_per_s"] for row in rows if row["held"]), default=0.0)
    row = {"students": "capacity", "offered_per_s": best, "students_at_5s": best * PERIOD_S,
           "load_avg_1m": os.getloadavg()[0]}
    if goal_rate is not None:
        row["goal"] = f">= {goal_rate:.0f} changes/s (>= {goal_rate * PERIOD_S:.0f} students)"
        row["met"] = best >= goal_rate
    if rows and rows[-1]["held"]:
        row["note"] = "the ladder ended before the server did: capacity is at least this"
    return row


def run(quick: bool) -> list[dict]:
    """Students one server process on one core serves: change rate with p95 <= 1 s and 0 errors.

    Light protocol clients (bench/st_client.py) on core 0, one server on core 1 (``taskset -c 1``).
    Each rung: N students open the Heads page, then change the seed every ~5 s for 30 s (quick: 3
    students, one change per second, 3 s). ``offered_per_s``: students / period, the rate asked
    for; ``rate_per_s``: changes answered per second over the whole rung (lower: the students
    join during the first period and the last pause ends the rung);
    ``p50_ms``/``p95_ms``: BackMsg sent to script_finished received; ``errors``: exception
    elements, timeouts (30 s) and dropped connections; ``server_cpu_ms_per_run``: the server's CPU
    time per script run (opens included); ``load_avg_1m``: the machine's 1-minute load average
    (other programs share these cores). The ladder stops at the first rung that does not hold.
    ``capacity``: the highest offered rate that held; ``students_at_5s``: that rate times 5 s.
    """
    if not shutil.which("taskset") or len(os.sched_getaffinity(0)) < 2:
        return [skipped_row("needs taskset and 2 cores (server on core 1, clients on core 0)")]
    rungs, duration, period = (QUICK_LADDER, QUICK_DURATION_S, QUICK_PERIOD_S) if quick else \
        (FULL_LADDER, FULL_DURATION_S, PERIOD_S)
    with tempfile.TemporaryDirectory(prefix="mha-bench-capacity-") as directory, \
            pinned_server(Path(directory)) as server, clients_on(CLIENT_CPU):
        run_classroom(server.url, 1, period, 0.0)  # warm the server: imports and the first run
        time.sleep(0.5)
        rows = ladder(server.url, rungs, period, duration, [server.pid])
    return rows + [capacity_row(rows, None if quick else GOAL_RATE)]


REPLICA_COUNTS = (1, 2)
GOAL_SPEEDUP = 1.7
WARM_STUDENTS = 6  # enough keys that both replicas see a first run before the ladder


@contextlib.contextmanager
def replicas_behind_nginx(count: int, directory: Path) -> Iterator[tuple[str, list[int]]]:
    """deploy/replicas.sh with ``count`` replicas (replica i on core i): the proxy URL and the replicas' pids."""
    env = {**os.environ, "MHA_PREFIX": str(directory), "MHA_PROXY_PORT": str(free_port()),
           "MHA_BASE_PORT": str(free_port()), "MHA_PIN": "1", "PYTHON": sys.executable}
    script = ["bash", str(ROOT / "deploy" / "replicas.sh")]
    try:
        subprocess.run([*script, "start", str(count)], env=env, check=True, timeout=180, capture_output=True)
        pids = [int(path.read_text()) for path in sorted(directory.glob("replica-*.pid"))]
        yield f"http://127.0.0.1:{env['MHA_PROXY_PORT']}", pids
    finally:
        subprocess.run([*script, "stop"], env=env, timeout=60, capture_output=True)


def run_replicas(quick: bool) -> list[dict]:
    """1 replica against 2 replicas behind nginx (deploy/replicas.sh): the sustained change rate of each.

    Replica i runs on core i (taskset); nginx and the protocol clients are not pinned, so on this
    2-core machine they share the replicas' cores (a real proxy and real students would not). The
    same ladder as the "capacity" section per replica count (quick: 3 students, 1 change/s, 3 s);
    ``speedup``: the highest offered rate that held with 2 replicas over that with 1 (goal >= 1.7).
    ``load_avg_1m`` beside every row: other programs share these cores.
    """
    if shutil.which("nginx") is None:
        return [skipped_row("nginx is missing (apt-get install nginx)")]
    rungs, duration, period = (QUICK_LADDER, QUICK_DURATION_S, QUICK_PERIOD_S) if quick else \
        (FULL_LADDER, FULL_DURATION_S, PERIOD_S)
    rows, best = [], {}
    for count in REPLICA_COUNTS:
        with tempfile.TemporaryDirectory(prefix=f"mha-bench-replicas-{count}-") as directory, \
                replicas_behind_nginx(count, Path(directory)) as (url, pids):
            run_classroom(url, WARM_STUDENTS, period, 0.0)
            ladder_rows = ladder(url, rungs, period, duration, pids)
            summary = capacity_row(ladder_rows, None)
            best[count] = summary["offered_per_s"]
            rows += [{"replicas": count} | row for row in [*ladder_rows, summary]]
    speedup = best[2] / best[1] if best[1] else None
    rows.append({"replicas": "2 vs 1", "students": "speedup", "speedup": speedup,
                 "goal": f">= {GOAL_SPEEDUP}x", "met": None if quick else (speedup or 0) >= GOAL_SPEEDUP,
                 "load_avg_1m": os.getloadavg()[0]})
    return rows
