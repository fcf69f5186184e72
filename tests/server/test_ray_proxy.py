"""The Ray dashboard proxy's refusals over real HTTP (the simulated plane runs no Ray: a
Ray job there has no dashboard), and what it forwards and returns of the headers.
Proxying a real dashboard is ``tests/e2e/test_ray_dashboard.py``."""

from __future__ import annotations

import httpx
from starlette.requests import Request

from phalanx.server.routes.ray import SANDBOX, forwarded_headers, returned_headers
from tests.sdk.live_server import LiveServer


def _submitted(api: httpx.Client, spec: dict[str, object]) -> None:
    answer = api.post("/v1/jobs", json=spec)
    assert answer.status_code == 201, answer.text


def test_what_has_no_dashboard_answers_404_naming_why(
        api: httpx.Client, sim_server: LiveServer) -> None:
    _submitted(api, {"name": "plain", "queue": "default", "podSets": [
        {"name": "main", "replicas": 1, "resources": {"cpu": "1"}, "command": ["true"]}]})
    _submitted(api, {"name": "simray", "queue": "default", "kind": "ray", "podSets": [
        {"name": "head", "replicas": 1, "resources": {"cpu": "1"}}]})
    missing = api.get("/v1/jobs/nosuch/ray/api/version")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "job 'nosuch' does not exist"
    plain = api.get("/v1/jobs/plain/ray/api/version")
    assert plain.status_code == 404 and "no Ray dashboard" in plain.json()["error"]["message"]
    simray = api.post("/v1/jobs/simray/ray/api/jobs/", json={"entrypoint": "true"})
    assert simray.status_code == 404, simray.text
    assert "has no Ray dashboard now" in simray.json()["error"]["message"]
    anonymous = httpx.get(f"{sim_server.url}/v1/jobs/simray/ray/api/version", timeout=30)
    assert anonymous.status_code == 401


def _request(headers: list[tuple[bytes, bytes]]) -> Request:
    return Request({"type": "http", "method": "POST", "path": "/v1/jobs/x/ray/api/jobs/",
                    "headers": headers, "query_string": b""})


def test_the_callers_credentials_and_hop_by_hop_headers_stay_behind() -> None:
    sent = _request([
        (b"authorization", b"Bearer secret"), (b"cookie", b"phalanx_session=abc"),
        (b"host", b"control-plane:8080"), (b"x-phalanx-act-as", b"bob"),
        (b"connection", b"keep-alive, x-private"), (b"x-private", b"for this hop"),
        (b"keep-alive", b"timeout=5"), (b"transfer-encoding", b"chunked"),
        (b"content-type", b"application/json"), (b"x-ray-thing", b"kept")])
    assert forwarded_headers(sent) == [("content-type", "application/json"),
                                       ("x-ray-thing", "kept")]


def test_the_dashboards_answer_comes_back_under_the_proxied_path() -> None:
    answer = httpx.Response(302, headers=[
        ("Location", "/#/jobs"), ("Set-Cookie", "a=b"), ("Transfer-Encoding", "chunked"),
        ("Content-Type", "text/html"), ("Vary", "Accept"), ("Vary", "Origin")])
    assert returned_headers(answer, "my job") == [
        (b"location", b"/v1/jobs/my%20job/ray/#/jobs"), (b"content-type", b"text/html"),
        (b"vary", b"Accept"), (b"vary", b"Origin"), SANDBOX]
    elsewhere = httpx.Response(302, headers={"Location": "https://ray.example/x"})
    assert returned_headers(elsewhere, "j") == [(b"location", b"https://ray.example/x"),
                                                SANDBOX]
    assert SANDBOX[1].startswith(b"sandbox ") and b"allow-same-origin" not in SANDBOX[1]
