"""Long links against a real server: where the web server refuses them, and what the app shows below that.

Streamlit serves HTTP with uvicorn and h11. h11 keeps at most 16 KiB (16,384 bytes) of a request
head that has not arrived completely; past that it fails the request and uvicorn answers
``400 Invalid HTTP request received.`` before the app runs. A head that arrives in one piece is
not limited that way, which is why longer links may open from a browser on the same machine. The
README's "Limits" says so and supports links up to 8,000 characters.

The raw-socket tests send a request head in two pieces with a pause between them, so the server
sees the first piece alone: the boundary is exact and does not depend on how a network splits
packets.
"""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.parse

from tests.browser.conftest import open_app

H11_INCOMPLETE_HEAD_LIMIT = 16 * 1024  # bytes: h11's DEFAULT_MAX_INCOMPLETE_EVENT_SIZE, used by uvicorn
SUPPORTED_LINK_CHARS = 8_000


def status_of_head_sent_in_two_pieces(app_url: str, first_piece_bytes: int) -> int:
    """Send a GET whose head, all but its closing CRLF, is ``first_piece_bytes`` long; then the CRLF. Its status."""
    host, port = urllib.parse.urlsplit(app_url).netloc.split(":")
    start = "GET /?tokens="
    rest = f" HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    head = start + "a" * (first_piece_bytes - len(start) - len(rest)) + rest
    assert len(head.encode()) == first_piece_bytes
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(head.encode())
        time.sleep(0.5)  # the server reads the first piece on its own
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it may answer and close first
            connection.sendall(b"\r\n")
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
            if b"\r\n" in reply:
                break
    return int(reply.split(b" ", 2)[1])


def test_the_server_accepts_a_head_of_16_kib_in_pieces_and_refuses_one_byte_more(app_url):
    assert status_of_head_sent_in_two_pieces(app_url, H11_INCOMPLETE_HEAD_LIMIT) == 200
    assert status_of_head_sent_in_two_pieces(app_url, H11_INCOMPLETE_HEAD_LIMIT + 1) == 400


def test_a_link_at_the_supported_length_opens_in_chromium_with_the_apps_message(app_page, app_url):
    query = "?tokens=" + "+".join(["a"] * 3_990)
    assert len(f"/{query}") <= SUPPORTED_LINK_CHARS
    open_app(app_page, app_url, query)
    app_page.wait_for_selector('[data-testid="stAlert"]:has-text("has 3990 tokens; the limit is 64")')
    assert not app_page.locator('[data-testid="stException"]').count()
