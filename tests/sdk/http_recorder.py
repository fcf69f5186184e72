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


@dataclass
class Recorder:
    url: str = ""
    requests: list[tuple[str, str]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    status: int = 500
    body: bytes = b'{"error": {"type": "ServerError", "message": "boom"}}'
    content_type: str = "application/json"

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
            if length:
                self.rfile.read(length)
            rec.requests.append((self.command, self.path))
            rec.authorizations.append(self.headers.get("Authorization"))
            self.send_response(rec.status)
            self.send_header("Content-Type", rec.content_type)
            self.send_header("Content-Length", str(len(rec.body)))
            self.end_headers()
            self.wfile.write(rec.body)

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
