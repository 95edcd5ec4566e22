"""The smallest Streamlit Community Cloud host, reproduced: one app process, 690 MB, half a core.

    python bench/smallest_host.py            # every page, then the load ladder (~3 minutes)
    python bench/smallest_host.py --quick    # every page and one tiny rung (~30 s)

The limits come from a control group made for the run (needs root and a writable cgroup
file system), in the first form this machine offers:

* cgroup v2: ``memory.max`` 690M, ``cpu.max`` "50000 100000"; peak from ``memory.peak``;
* cgroup v1 (this machine: v2 is mounted but has no controllers): ``memory.limit_in_bytes`` and
  ``cpu.cfs_quota_us``/``cpu.cfs_period_us``; peak from ``memory.max_usage_in_bytes``;
* neither writable: ``prlimit --as`` (address space, a cruder limit than resident memory) and
  ``taskset`` to one core (a whole core, not half); peak from the process's VmHWM. Said in the output.

Then it opens every page (the real model included) with the protocol clients of
bench/st_client.py, runs the capacity ladder of bench/bench_capacity.py against the server,
and prints the peak memory, whether the kernel killed anything for memory, and the students
served (the highest change rate with p95 <= 1 s and 0 errors, times 5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_capacity import PERIOD_S, capacity_row, ladder, server_command  # noqa: E402
from bench.processes import status_kb  # noqa: E402
from bench.report import text_table  # noqa: E402
from bench.st_client import StreamlitClient  # noqa: E402
from tools.launch import free_port, running_server  # noqa: E402

MEMORY_MAX = 690 * 1024 * 1024  # Community Cloud's smallest host: 690 MB
CPU_QUOTA_US, CPU_PERIOD_US = 50_000, 100_000  # half a core
PAGES = ("", "step_by_step", "lessons", "seeds", "real_model", "real_model?model=smollm2", "about")  # URL paths
# (and a query string); "" is Heads
FULL_RUNGS = (5, 10, 20, 30, 40, 60)
QUICK_RUNGS = (2,)
FULL_DURATION_S, QUICK_DURATION_S = 20.0, 3.0
CGROUP = Path("/sys/fs/cgroup")


@dataclass
class Limits:
    """How the limits are applied: the group folders to join, how to read the peak, what it is."""

    kind: str  # "cgroup v2", "cgroup v1" or "prlimit + taskset"
    join: tuple[Path, ...]  # cgroup.procs files the child writes its pid into
    peak_file: Path | None  # the group's peak memory in bytes
    oom_file: Path | None  # where the kernel counts its kills for memory
    folders: tuple[Path, ...]  # made here, removed at the end
    prefix: tuple[str, ...] = ()  # command prefix (prlimit/taskset fallback)

    def peak_mb(self, pid: int) -> float | None:
        if self.peak_file is not None:
            with contextlib.suppress(OSError, ValueError):
                return int(self.peak_file.read_text()) / 2**20
        hwm = status_kb(pid, "VmHWM")
        return None if hwm is None else hwm / 1024

    def oom_kills(self) -> int | None:
        if self.oom_file is None:
            return None
        with contextlib.suppress(OSError):
            for line in self.oom_file.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
        return None


def cgroup_v2(name: str) -> Limits | None:
    """A cgroup v2 group with memory.max and cpu.max, or None where v2 has no such controllers here."""
    with contextlib.suppress(OSError):
        if not {"memory", "cpu"} <= set((CGROUP / "cgroup.controllers").read_text().split()):
            return None
        group = CGROUP / name
        group.mkdir(exist_ok=True)
        (group / "memory.max").write_text(str(MEMORY_MAX))
        (group / "memory.swap.max").write_text("0")
        (group / "cpu.max").write_text(f"{CPU_QUOTA_US} {CPU_PERIOD_US}")
        return Limits("cgroup v2", (group / "cgroup.procs",), group / "memory.peak", group / "memory.events", (group,))
    return None


def cgroup_v1(name: str) -> Limits | None:
    """cgroup v1 memory and cpu groups with the same limits, or None where they cannot be made."""
    memory, cpu = CGROUP / "memory" / name, CGROUP / "cpu" / name
    try:
        memory.mkdir(exist_ok=True)
        cpu.mkdir(exist_ok=True)
        (memory / "memory.limit_in_bytes").write_text(str(MEMORY_MAX))
        with contextlib.suppress(OSError):  # only where swap accounting is on
            (memory / "memory.memsw.limit_in_bytes").write_text(str(MEMORY_MAX))
        (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(CPU_QUOTA_US))
    except OSError:
        for folder in (memory, cpu):
            with contextlib.suppress(OSError):
                folder.rmdir()
        return None
    return Limits("cgroup v1", (memory / "cgroup.procs", cpu / "cgroup.procs"),
                  memory / "memory.max_usage_in_bytes", memory / "memory.oom_control", (memory, cpu))


def fallback() -> Limits:
    """No writable cgroup: an address-space limit and one core (both cruder than the real host's)."""
    return Limits("prlimit --as + taskset -c 1 (no writable cgroup)", (), None, None, (),
                  ("prlimit", f"--as={MEMORY_MAX}", "taskset", "-c", "1"))


def make_limits() -> Limits:
    name = f"mha-smallest-host-{os.getpid()}"
    return cgroup_v2(name) or cgroup_v1(name) or fallback()


def remove_groups(limits: Limits) -> None:
    for folder in limits.folders:
        for _ in range(50):  # the group empties a moment after its last process exits
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@contextlib.contextmanager
def limited_server(directory: Path, limits: Limits):
    """The app server in the group (it joins before exec, so all it allocates counts); always stopped."""
    port = free_port()
    log = directory / "server.log"

    def join_group() -> None:
        for procs in limits.join:
            procs.write_text(str(os.getpid()))

    command = [*limits.prefix, *server_command(port, None)]
    with running_server(command, port, log, 120, preexec_fn=join_group) as (server, process):
        yield server, process


async def open_every_page(url: str) -> list[dict]:
    """One session opens each page in turn, as a student clicking through the menu does; a page with a
    query string is a shared link, opened in a session of its own (a page reads its link on its first visit)."""
    client = StreamlitClient(url)
    await client.connect()
    rows = []
    try:
        for page in PAGES:
            name, _, query = page.partition("?")
            if query:
                link = StreamlitClient(url)
                await link.connect()
                try:
                    run = await link.open_page(query, name)
                finally:
                    await link.close()
            else:
                run = await client.open_page("", name)
            rows.append({"page": page or "heads", "first_run_ms": run.ms, "kb": run.bytes / 1024,
                         "exceptions": len(run.exceptions), "note": "; ".join(run.exceptions)[:200] or None})
    finally:
        await client.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one tiny load rung (CI smoke test)")
    args = parser.parse_args()
    rungs, duration, period = (QUICK_RUNGS, QUICK_DURATION_S, 1.0) if args.quick else \
        (FULL_RUNGS, FULL_DURATION_S, PERIOD_S)
    limits = make_limits()
    print(f"limits: {limits.kind}; memory {MEMORY_MAX / 2**20:.0f} MiB, cpu {CPU_QUOTA_US / CPU_PERIOD_US:g} core; "
          f"load average {os.getloadavg()[0]:.2f}")
    try:
        with tempfile.TemporaryDirectory(prefix="mha-smallest-host-") as directory, \
                limited_server(Path(directory), limits) as (server, process):
            pages = asyncio.run(open_every_page(server.url))
            print(text_table(pages))
            after_pages = limits.peak_mb(server.pid)
            rows = ladder(server.url, rungs, period, duration, [server.pid])
            rows.append(capacity_row(rows, None))
            print(text_table(rows))
            peak = limits.peak_mb(server.pid)
            hwm = (status_kb(server.pid, "VmHWM") or 0) / 1024  # resident peak, shared library pages included
            alive = process.poll() is None
            kills = limits.oom_kills()
    finally:
        remove_groups(limits)
    print(f"peak memory: {after_pages or 0:.0f} MiB after every page, {peak or 0:.0f} MiB at the end "
          f"(limit {MEMORY_MAX / 2**20:.0f}); process VmHWM {hwm:.0f} MiB; server alive: {alive}; kernel kills for memory: {kills}")
    print(f"students served at one change per {PERIOD_S:.0f} s: {rows[-1]['students_at_5s']:.0f} "
          f"(load average {os.getloadavg()[0]:.2f})")
    failed = not alive or bool(kills) or any(page["exceptions"] for page in pages)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
