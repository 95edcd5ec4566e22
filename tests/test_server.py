"""The once-per-server settings: one BLAS thread, imported objects frozen out of the collector."""

import gc

from threadpoolctl import threadpool_info

from ui.run.server import tune_server


def test_tune_server_limits_blas_to_one_thread_and_freezes_the_imports():
    tune_server.clear()
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
