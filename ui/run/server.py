"""Settings made once per server process, for many small sessions on few cores."""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import socket
import sys
import threading
import time

import streamlit as st
from threadpoolctl import threadpool_limits


@st.cache_resource(show_spinner=False)
def tune_server() -> dict:
    """Limit BLAS to one thread, send each websocket message when written, and freeze the imported objects out of
    the garbage collector.

    One BLAS thread: with many sessions on 1-2 cores, a second thread per matrix product only
    fights the other sessions for the same cores (measured: the real model's 32-piece forward
    pass took 20-45 ms with one thread and 0.3-1 s with two on a busy machine).
    gc.freeze: a full collection (``collect_garbage``) walks every tracked object; freezing the tens of
    thousands of objects the imports made keeps that collection from walking them each time
    (measured with py-spy: it was about a third of the server's CPU per rerun).
    """
    limits = threadpool_limits(limits=1, user_api="blas")
    fixed_mmap = fix_mmap_threshold()
    sockets = send_without_delay()
    gc.collect()
    gc.freeze()
    return {"blas_threads": 1, "frozen_objects": gc.get_freeze_count(), "limits": repr(limits),
            "mmap_threshold": MMAP_THRESHOLD_BYTES if fixed_mmap else None, "no_delay_sockets": sockets}


# Memory that Python frees goes back to glibc's malloc, which keeps it unless told otherwise. Measured
# (python -m bench --only memory, issue 38): a server with both real models held 163 MB free inside malloc's
# arenas (mallinfo2 fordblks) beside 276 MB in use; malloc_trim(0) gave 130 MB of it back. Two causes:
# glibc raises its mmap threshold to the size of each freed mmapped block (up to 32 MB), so after SmolLM2's
# 25 MB logits every array below that comes from the arenas and stays there when freed; and each script
# thread may get an arena of its own. Fixing the threshold keeps large arrays mmapped (returned on free);
# a trim after each full collection returns the free pages of every arena.
MMAP_THRESHOLD_BYTES = 256 * 1024  # arrays from this size are mmapped: at the caps a head stack is 512 KB
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc malloc.h)


@functools.cache
def _glibc():
    """glibc's C library (its mallopt and malloc_trim), or None where there is none (macOS, musl)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def fix_mmap_threshold() -> bool:
    """Serve every allocation of MMAP_THRESHOLD_BYTES or more with mmap, for good; True when glibc took it."""
    libc = _glibc()
    return bool(libc and libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def trim_malloc() -> bool:
    """Give the free pages inside malloc's arenas back to the system; True when glibc released some."""
    libc = _glibc()
    return bool(libc and libc.malloc_trim(0))


# A full collection at most this often (seconds), at the end of a script run. Streamlit's own one after
# every run (runner.postScriptGC, off in .streamlit/config.toml) took ~24 of ~65 ms of a Heads rerun.
# Python's own collector alone reaches the oldest generation rarely, so reference cycles left by closed
# sessions could wait there long; this bounds the wait to a second. `python -m bench --only memory`
# measures the result.
GC_INTERVAL_S = 1.0
_last_collection = [0.0]
_modules_at_freeze = [0]
_collection_lock = threading.Lock()


def collect_garbage(now: float | None = None) -> bool:
    """A full garbage collection if none ran in the last ``GC_INTERVAL_S`` seconds; True when it ran.

    When modules were imported since the last freeze (a page's first visit imports pandas, the real
    model...), what survives the collection is frozen too, as ``tune_server`` does for the first
    imports: those ~50,000 functions and classes made each full collection take ~30-50 ms. Frozen
    objects are still freed when nothing refers to them; only a reference cycle among them would
    stay, and the few freezes (one per page that imports something new) bound that.
    """
    now = time.monotonic() if now is None else now
    if now - _last_collection[0] < GC_INTERVAL_S or not _collection_lock.acquire(blocking=False):
        return False
    try:
        _last_collection[0] = now
        gc.collect()
        trim_malloc()  # what the collection freed, and what finished runs left in the arenas
        if len(sys.modules) != _modules_at_freeze[0]:
            _modules_at_freeze[0] = len(sys.modules)
            gc.freeze()
    finally:
        _collection_lock.release()
    return True


# Streamlit 1.67 serves its websocket with uvicorn from a listening socket made as ``socket.socket(family)``, protocol
# 0, and asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP: every connection kept Nagle's
# algorithm. A run's messages are many small writes; with Nagle the kernel holds a small write back until the
# browser has acknowledged the last one, which a browser may delay by 40 ms (delayed ACK). Measured with the bench's
# protocol client, a Heads Seed +: its 26 messages came in two bursts 40-41 ms apart, in every run, when the server
# had written them all within 7 ms (strace).
def send_without_delay() -> int:
    """TCP_NODELAY on every TCP socket of this process: the server's listening socket (on Linux, a socket it accepts
    inherits the setting) and the connections it has; how many sockets were set. Linux only (``/proc/self/fd``);
    0 elsewhere. Each socket is reached through a duplicate of its descriptor, closed after."""
    try:
        descriptors = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return 0
    return sum(_no_delay(fd) for fd in descriptors)


def _no_delay(fd: int) -> bool:
    """TCP_NODELAY on descriptor ``fd`` if it is a TCP socket; True when set."""
    try:
        duplicate = os.dup(fd)
    except OSError:  # closed meanwhile
        return False
    try:
        sock = socket.socket(fileno=duplicate)  # family and type read from the descriptor
    except OSError:  # not a socket
        os.close(duplicate)
        return False
    with sock:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            return False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            return False
        return True
