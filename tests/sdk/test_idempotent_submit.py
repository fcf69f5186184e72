"""The SDK's submit carries an Idempotency-Key and sends it again when the answer is lost,
so a retry never makes a second job. Real HTTP: a proxy in front of a live control plane
forwards the first request and then drops the connection before the answer."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from phalanx.sdk.client import Client
from tests.sdk.live_server import LiveServer
from tests.server.conftest import sim_server

__all__ = ["sim_server"]  # the live control plane (simulated plane) this module uses

pytestmark = pytest.mark.slow


class LosesFirstAnswer:
    """A TCP proxy that forwards every request but cuts the first connection after its
    request reached the server: as a network that drops an answer."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with client, socket.create_connection(self.upstream) as server:
            request = _message(client)
            # Exchanging the key for a token goes through; the first submit's answer is lost.
            submit = request.startswith(b"POST /v1/jobs ")
            first = submit and not self.requests
            if submit:
                self.requests.append(request)
            server.sendall(request)
            answer = _message(server)  # the server has handled the request by now
            if not first:
                client.sendall(answer)

    def close(self) -> None:
        self.listener.close()


def _message(sock: socket.socket) -> bytes:
    """One HTTP/1.1 message with a Content-Length body, read whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


@pytest.fixture
def proxy(sim_server: LiveServer) -> Iterator[LosesFirstAnswer]:
    host, port = sim_server.url.removeprefix("http://").rsplit(":", 1)
    proxy = LosesFirstAnswer((host, int(port)))
    try:
        yield proxy
    finally:
        proxy.close()


def test_a_submit_whose_answer_was_lost_is_retried_with_its_key(
    proxy: LosesFirstAnswer, sim_server: LiveServer
) -> None:
    job = {"name": "lost-answer", "podSets": [
        {"command": ["x"], "env": {"PHALANX_SIM_DURATION": "50ms"}}]}
    with Client(proxy.url, sim_server.token) as client:
        record = client.submit(job)
    assert record.name == "lost-answer"
    assert len(proxy.requests) == 2
    keys = [line for r in proxy.requests for line in r.split(b"\r\n")
            if line.lower().startswith(b"idempotency-key:")]
    assert len(keys) == 2 and keys[0] == keys[1]
    with Client(sim_server.url, sim_server.token) as client:
        assert [j.name for j in client.list()].count("lost-answer") == 1
