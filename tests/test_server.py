"""The once-per-server settings: one BLAS thread, imported objects frozen out of the collector."""

import gc

from threadpoolctl import threadpool_info, threadpool_limits

from ui.run.server import tune_server


def test_tune_server_limits_blas_to_one_thread_and_freezes_the_imports():
    tune_server.clear()
    threadpool_limits(limits=2, user_api="blas")  # tests/conftest.py set one thread: undo it, tune_server must
    settings = tune_server()
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas, "numpy's BLAS was not found by threadpoolctl"
    assert all(pool["num_threads"] == 1 for pool in blas), blas
    assert settings["frozen_objects"] > 1000
    assert gc.get_freeze_count() > 1000  # still frozen after the call (a few may since be freed)


def test_garbage_is_collected_at_most_once_per_interval():
    from ui.run import server

    start = server._last_collection[0] + 10 * server.GC_INTERVAL_S
    assert server.collect_garbage(now=start)
    collected_before = gc.get_stats()[2]["collections"]
    assert not server.collect_garbage(now=start + server.GC_INTERVAL_S / 2)  # too soon: nothing runs
    assert gc.get_stats()[2]["collections"] == collected_before
    assert server.collect_garbage(now=start + server.GC_INTERVAL_S)
    assert gc.get_stats()[2]["collections"] == collected_before + 1


def test_a_collection_after_new_imports_freezes_what_survives():
    import importlib
    import sys

    from ui.run import server

    start = server._last_collection[0] + 10 * server.GC_INTERVAL_S
    server.collect_garbage(now=start)
    frozen = gc.get_freeze_count()
    kept = []  # made after the last freeze: tracked by the collector
    kept.extend([object()] for _ in range(1000))
    assert server.collect_garbage(now=start + server.GC_INTERVAL_S)  # no new module: nothing more frozen
    # (a frozen object can still die meanwhile, another thread's, so the count may fall; a freeze would add `kept`)
    assert gc.get_freeze_count() <= frozen
    new_module = next(name for name in ("wave", "sndhdr", "mailbox", "tabnanny", "netrc") if name not in sys.modules)
    importlib.import_module(new_module)
    assert server.collect_garbage(now=start + 2 * server.GC_INTERVAL_S)
    assert gc.get_freeze_count() >= frozen + 1000  # the new module's objects and what was alive with them
    del kept


def test_the_app_turns_streamlits_collection_after_every_run_off():
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False


# Memory handed back to the system (issue 38): run in a fresh interpreter, whose malloc state is known.
FREE_HALF = r"""
import sys
import numpy as np
from ui.run import server

def rss_mb():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS")) / 1024

if sys.argv[1] == "fixed":
    server.fix_mmap_threshold()
warm = np.ones(8 * 2**20 // 8)  # an 8 MB array, mmapped and freed: glibc's own threshold then rises to 8 MB
del warm
arrays = [np.ones(2**20 // 8) for _ in range(128)]  # 128 arrays of 1 MB, touched
before = rss_mb()
del arrays[::2]  # every other one freed: 1 MB holes between arrays still in use
if sys.argv[1] == "trimmed":
    server.trim_malloc()
print(before - rss_mb())
"""


def released_mb(mode: str) -> float:
    """MB the fresh interpreter gave back after freeing 64 of 128 arrays of 1 MB (``mode``: fixed, trimmed, neither)."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", FREE_HALF, mode], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=60, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def needs_glibc():
    import pytest

    from ui.run import server

    if server._glibc() is None:
        pytest.skip("no glibc here: malloc is not tuned")


def test_without_either_setting_freed_arrays_stay_in_the_process():
    needs_glibc()
    assert released_mb("neither") < 10  # the control: the holes are kept by malloc (the 64 MB below are not given)


def test_with_the_mmap_threshold_fixed_freed_arrays_go_back_at_once():
    needs_glibc()
    assert released_mb("fixed") > 48  # 64 MB freed, less what the kernel counts late


def test_a_trim_gives_the_free_pages_of_the_arenas_back():
    needs_glibc()
    assert released_mb("trimmed") > 48


def test_every_collection_also_trims_malloc(monkeypatch):
    from ui.run import server

    trims = []
    monkeypatch.setattr(server, "trim_malloc", lambda: trims.append(1) or True)
    start = server._last_collection[0] + 10 * server.GC_INTERVAL_S
    assert server.collect_garbage(now=start)
    assert not server.collect_garbage(now=start + server.GC_INTERVAL_S / 2)  # no collection, no trim
    assert server.collect_garbage(now=start + server.GC_INTERVAL_S)
    assert len(trims) == 2


def test_each_tcp_socket_of_the_process_sends_without_delay_and_a_new_connection_inherits_it():
    import socket

    from ui.run.server import send_without_delay

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # protocol 0, as Streamlit makes its own
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    early = socket.create_connection(listener.getsockname())
    accepted_early, _ = listener.accept()
    other, unix = socket.socketpair()  # not TCP: left alone
    try:
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # what asyncio leaves it at
        assert send_without_delay() >= 3  # the listener and both ends of the early connection
        for sock in (listener, early, accepted_early):
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        later = socket.create_connection(listener.getsockname())
        accepted_later, _ = listener.accept()  # made after the call: the listener passes the setting on
        assert accepted_later.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        for sock in (later, accepted_later):
            sock.close()
        assert other.fileno() >= 0 and unix.fileno() >= 0  # the duplicates were closed, the sockets are not
        other.sendall(b"x")
        assert unix.recv(1) == b"x"
    finally:
        for sock in (listener, early, accepted_early, other, unix):
            sock.close()


def test_tune_server_reports_the_sockets_it_set():
    import socket

    from ui.run.server import tune_server

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        tune_server.clear()
        assert tune_server()["no_delay_sockets"] >= 1
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        listener.close()
