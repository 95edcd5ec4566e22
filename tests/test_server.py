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
