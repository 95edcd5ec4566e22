"""Processes read from /proc: memory and CPU time of a server, of a browser and of their children."""

from __future__ import annotations

import contextlib
import os


def status_kb(pid: int, key: str) -> int | None:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after "pid (name)": field 3 (state) is [0], ppid [1], utime [11], stime [12]."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants_cpu_seconds(root: int, exclude: int) -> float:
    """CPU seconds of every living process descended from ``root``, leaving out ``exclude`` and its descendants."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):  # a process may end while we read
                parents[int(entry)] = int(stat_fields(int(entry))[1])
    total = 0.0
    for pid in parents:
        ancestor = pid
        while ancestor in parents and ancestor not in (root, exclude):
            ancestor = parents[ancestor]
        if ancestor == root and pid != root:
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += cpu_seconds(pid)
    return total
