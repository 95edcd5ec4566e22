"""The once-per-server settings: one BLAS thread, imported objects frozen out of the collector."""

import gc

from threadpoolctl import threadpool_info

from ui.server import tune_server


def test_tune_server_limits_blas_to_one_thread_and_freezes_the_imports():
    tune_server.clear()
    settings = tune_server()
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas, "numpy's BLAS was not found by threadpoolctl"
    assert all(pool["num_threads"] == 1 for pool in blas), blas
    assert settings["frozen_objects"] > 1000
    assert gc.get_freeze_count() > 1000  # still frozen after the call (a few may since be freed)


def test_garbage_is_collected_at_most_once_per_interval():
    from ui import server

    class Cycle:
        pass

    start = server._last_collection[0] + 10 * server.GC_INTERVAL_S
    assert server.collect_garbage(now=start)
    cycle = Cycle()
    cycle.me = cycle  # only a full collection frees a reference cycle
    del cycle
    collected_before = gc.get_stats()[2]["collections"]
    assert not server.collect_garbage(now=start + server.GC_INTERVAL_S / 2)  # too soon: nothing runs
    assert gc.get_stats()[2]["collections"] == collected_before
    assert server.collect_garbage(now=start + server.GC_INTERVAL_S)
    assert gc.get_stats()[2]["collections"] == collected_before + 1


def test_the_app_turns_streamlits_collection_after_every_run_off():
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
