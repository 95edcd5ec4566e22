"""What machine the numbers come from: cores, CPU, BLAS and its threads, library versions."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import sys

import numpy as np


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def blas_pools() -> list[dict]:
    """The BLAS/OpenMP thread pools loaded in this process, from threadpoolctl when installed."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keys = ("user_api", "internal_api", "version", "num_threads", "architecture", "threading_layer")
    return [{key: pool.get(key) for key in keys} for pool in threadpool_info()]


def numpy_blas() -> dict:
    """NumPy's BLAS as built (name, version, configuration), from ``np.show_config``."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except (TypeError, KeyError):  # an older NumPy without mode="dicts"
        return {}
    return {key: blas.get(key) for key in ("name", "version", "openblas configuration") if blas.get(key)}


def blas_threads() -> int:
    """The number of threads NumPy's BLAS uses for one matmul.

    threadpoolctl reports it exactly; without it, the environment variables OpenBLAS reads,
    and failing those the usable cores (OpenBLAS's default).
    """
    for pool in blas_pools():
        if pool["user_api"] == "blas" and pool["internal_api"] in ("openblas", "mkl", "blis"):
            return int(pool["num_threads"])
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return usable_cores()


def torch_version() -> str | None:
    """torch's installed version, or None (read from the package metadata, without importing torch)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict:
    """Everything the tables depend on, as plain values for the JSON file."""
    blas = numpy_blas()
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": usable_cores(),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "blas": blas,
        "blas_threads": blas_threads(),
        "thread_pools": blas_pools(),
        "torch": torch_version(),
        "executable": sys.executable,
    }


def machine_line(info: dict) -> str:
    """One line for the top of a table: cores, CPU, BLAS, versions, load."""
    blas = info.get("blas") or {}
    blas_name = " ".join(str(blas[key]) for key in ("name", "version") if key in blas) or "unknown BLAS"
    arch = next((pool["architecture"] for pool in info.get("thread_pools", []) if pool.get("architecture")), None)
    parts = [
        f"{info['cores']} cores ({info['cpu']})",
        f"numpy {info['numpy']} with {blas_name}" + (f" ({arch} kernels)" if arch else "")
        + f", {info['blas_threads']} BLAS threads",
        f"torch {info['torch']}" if info.get("torch") else "torch not installed",
        f"Python {info['python']}",
    ]
    if info.get("load_average"):
        parts.append(f"load average {info['load_average'][0]} at the start")
    return "; ".join(parts) + f"; {info['date']}"
