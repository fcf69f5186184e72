"""A real HTTP server on loopback that records requests and answers as told.

It stands in for the control plane only where the tests need a precise answer
(an error body of a given shape) or proof that no request was made at all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln"  # what exchanging any key answers


@dataclass
class Recorder:
    url: str = ""
    requests: list[tuple[str, str]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    status: int = 500
    body: bytes = b'{"error": {"type": "ServerError", "message": "boom"}}'
    content_type: str = "application/json"
    # Keys the client exchanged for a token (answered with TOKEN, not recorded as requests).
    exchanged: list[str] = field(default_factory=list)

    def answer(self, status: int, body: object, content_type: str = "application/json") -> None:
        self.status = status
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.content_type = content_type


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.path == "/v1/auth/token":
                rec.exchanged.append(json.loads(body)["key"])
                self._send(200, json.dumps(
                    {"token": TOKEN, "expiresAt": 0, "expiresIn": 300, "user": "u",
                     "role": "admin"}).encode(), "application/json")
                return
            rec.requests.append((self.command, self.path))
            rec.authorizations.append(self.headers.get("Authorization"))
            self._send(rec.status, rec.body, rec.content_type)

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
