"""A client given several replicas' URLs reaches the leader: past an unreachable one,
through a follower's redirect (keeping its token), and across an election. Real HTTP
servers on loopback play the replicas."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from phalanx.errors import ConnectionFailed, SpecError
from phalanx.sdk import Client
from phalanx.sdk.failover import split_urls

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0In0.c2ln"  # sent as it is, not exchanged
# What a replica answers: (status, headers, body) for (method, path, headers).
Answer = Callable[[str, str, dict[str, str]], tuple[int, dict[str, str], bytes]]
VERSION = json.dumps({"version": "9.9", "api": "v1"}).encode()
NOT_LEADER = json.dumps({"error": {"type": "NotLeader", "message": "an election is under way",
                                   "field": "leader", "fix": "retry"}}).encode()


@contextmanager
def replica(answer: Answer) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            status, headers, body = answer(self.command, self.path, dict(self.headers))
            self.send_response(status)
            for name, value in {**headers, "content-length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _any

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _closed_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def leader(seen: list[dict[str, str]]) -> Answer:
    def answer(method: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str],
                                                                         bytes]:
        seen.append({"path": path, **{k.lower(): v for k, v in headers.items()}})
        return 200, {"content-type": "application/json"}, VERSION
    return answer


def test_an_unreachable_replica_is_passed_over() -> None:
    seen: list[dict[str, str]] = []
    with replica(leader(seen)) as up, Client(url=f"{_closed_url()},{up}", token=TOKEN) as client:
        assert client.version() == "9.9"
    assert len(seen) == 1


def test_a_followers_redirect_is_followed_with_the_token() -> None:
    seen: list[dict[str, str]] = []
    with replica(leader(seen)) as lead:
        def follower(method: str, path: str, _h: dict[str, str]) -> tuple[int, dict[str, str],
                                                                           bytes]:
            return 307, {"location": lead + path}, b"{}"

        with replica(follower) as follows, Client(url=follows, token=TOKEN) as client:
            assert client.version() == "9.9"
    assert seen[0]["path"] == "/v1/version"
    assert seen[0]["authorization"] == f"Bearer {TOKEN}"
    assert seen[0]["host"] == lead.removeprefix("http://")


def test_an_election_under_way_is_waited_out() -> None:
    answers = iter([503, 503, 503])

    def electing(method: str, path: str, _h: dict[str, str]) -> tuple[int, dict[str, str],
                                                                      bytes]:
        status = next(answers, 200)
        if status == 503:
            return 503, {"content-type": "application/json", "retry-after": "1"}, NOT_LEADER
        return 200, {"content-type": "application/json"}, VERSION

    with replica(electing) as url, Client(url=url, token=TOKEN) as client:
        assert client.version() == "9.9"
    assert next(answers, None) is None  # every 503 was answered, and waited past


def test_one_unreachable_url_fails_at_once_as_before() -> None:
    with Client(url=_closed_url(), token=TOKEN) as client, pytest.raises(ConnectionFailed):
        client.version()


@pytest.mark.parametrize("value", ["", " , ", "http://a:1,ftp://b", "a:7780"])
def test_a_bad_url_list_names_the_variable(value: str) -> None:
    with pytest.raises(SpecError) as caught:
        split_urls(value)
    assert caught.value.field == "PHALANX_URL"


def test_a_url_list_is_trimmed() -> None:
    assert split_urls(" http://a:1/ , https://b:2") == ["http://a:1", "https://b:2"]


def test_replicas_redirecting_in_a_loop_are_waited_out_until_one_leads() -> None:
    """While the lead changes hands two replicas may each name the other; the client waits
    (it used to hand back the closed answer of the last redirect, read as StreamClosed)."""
    loops = iter(range(6))
    seen: list[dict[str, str]] = []
    urls: list[str] = []

    def a(method: str, path: str, _h: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if next(loops, None) is not None:
            return 307, {"location": urls[1] + path}, b""
        return leader(seen)(method, path, _h)

    def b(method: str, path: str, _h: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        return 307, {"location": urls[0] + path}, b""

    with replica(a) as first, replica(b) as second, \
            Client(url=f"{first},{second}", token=TOKEN) as client:
        urls += [first, second]
        assert client.version() == "9.9"
    assert next(loops, None) is None  # every looping answer was waited past
    assert len(seen) == 1
