"""The admission webhook's TLS listener: the admission routes of an app, over TLS with the
mounted certificate, and nothing else; a missing or mismatched certificate is refused at
start, naming the flag."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from phalanx.deploy.webhook import make_certificate
from phalanx.errors import SpecError
from phalanx.server.main import listen
from phalanx.server.webhook import WebhookListener


def _write(directory: Path, names: list[str]) -> Path:
    made = make_certificate(names)
    directory.mkdir()
    (directory / "tls.crt").write_bytes(made.cert)
    (directory / "tls.key").write_bytes(made.key)
    (directory / "ca.crt").write_bytes(made.ca)
    return directory


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"answered {request.url.path}")


APP = Starlette(routes=[Route("/admission/workloads", _hello, methods=["POST"]),
                        Route("/v1/jobs", _hello)])


def test_it_serves_the_admission_routes_over_tls_and_nothing_else(tmp_path: Path) -> None:
    certs = _write(tmp_path / "tls", ["127.0.0.1"])
    listener = WebhookListener(certs, listen("127.0.0.1", 0))
    listener.start(APP)
    try:
        base = f"https://127.0.0.1:{listener.port}"
        trusted = httpx.Client(verify=ssl.create_default_context(cafile=certs / "ca.crt"))
        answer = trusted.post(base + "/admission/workloads")
        assert answer.status_code == 200 and answer.text == "answered /admission/workloads"
        assert trusted.get(base + "/v1/jobs").status_code == 404
        with pytest.raises(httpx.ConnectError):  # its CA is not the system's
            httpx.post(base + "/admission/workloads")
        with pytest.raises(httpx.RemoteProtocolError):  # TLS only
            httpx.post(f"http://127.0.0.1:{listener.port}/admission/workloads")
    finally:
        listener.stop()


def _refusal(cert_dir: Path) -> SpecError:
    """What a listener over ``cert_dir``'s certificate refuses with."""
    sock = listen("127.0.0.1", 0)
    try:
        with pytest.raises(SpecError) as refused:
            WebhookListener(cert_dir, sock)
    finally:
        sock.close()
    return refused.value


def test_a_missing_certificate_names_the_flag(tmp_path: Path) -> None:
    tmp_path.joinpath("tls.crt").write_text("")
    refused = _refusal(tmp_path)
    assert refused.field == "--webhook-cert-dir"
    assert "tls.key" in refused.message


def test_a_key_of_another_certificate_is_refused(tmp_path: Path) -> None:
    one = _write(tmp_path / "one", ["localhost"])
    other = _write(tmp_path / "other", ["localhost"])
    (one / "tls.key").write_bytes((other / "tls.key").read_bytes())
    refused = _refusal(one)
    assert refused.field == "--webhook-cert-dir"
    assert "matching" in (refused.fix or "")
