"""The client's HTTP behaviour against a real loopback server: errors, auth header, no-send."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from phalanx import (
    AuthError,
    Client,
    Conflict,
    ConnectionFailed,
    NotFound,
    ServerError,
    SpecError,
)
from phalanx.errors import PhalanxError, TooManyRequests
from tests.sdk.http_recorder import Recorder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("status", "kind", "cls"),
    [
        (400, "SpecError", SpecError),
        (401, "AuthError", AuthError),
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (500, "ServerError", ServerError),
    ],
)
def test_error_bodies_map_to_their_classes_with_field_and_fix(
    recorder: Recorder, status: int, kind: str, cls: type[PhalanxError]
) -> None:
    recorder.answer(
        status, {"error": {"type": kind, "message": "went wrong", "field": "podSets[0].replicas",
                           "fix": "do it right"}}
    )
    with Client(recorder.url, "tok") as client, pytest.raises(cls) as info:
        client.get("job-a")
    assert type(info.value) is cls
    assert info.value.message == "went wrong"
    assert info.value.field == "podSets[0].replicas"
    assert info.value.fix == "do it right"
    # A 401 is tried once more with a freshly exchanged token (the first may have expired).
    assert recorder.requests == [("GET", "/v1/jobs/job-a")] * (2 if status == 401 else 1)
    assert recorder.exchanged == ["tok"] * (2 if status == 401 else 1)


@pytest.mark.parametrize(
    ("status", "cls"), [(404, NotFound), (409, Conflict), (401, AuthError), (502, ServerError)]
)
def test_error_without_a_phalanx_body_maps_by_status(
    recorder: Recorder, status: int, cls: type[PhalanxError]
) -> None:
    recorder.answer(status, b"<html>proxy says no</html>", content_type="text/html")
    with Client(recorder.url) as client, pytest.raises(cls) as info:
        client.version()
    assert f"HTTP {status}" in info.value.message
    assert "proxy says no" in info.value.message


def test_unknown_error_type_falls_back_to_the_status(recorder: Recorder) -> None:
    recorder.answer(409, {"error": {"type": "Mystery", "message": "taken"}})
    with Client(recorder.url) as client, pytest.raises(Conflict, match="taken"):
        client.cancel("x")


def test_errors_in_a_log_stream_are_mapped_too(recorder: Recorder) -> None:
    recorder.answer(404, {"error": {"type": "NotFound", "message": "no job 'x'", "field": "name"}})
    with Client(recorder.url) as client, pytest.raises(NotFound, match="no job"):
        list(client.logs("x", pod=1, follow=True))
    assert recorder.requests == [("GET", "/v1/jobs/x/logs?follow=true&pod=1")]


def test_log_bounds_go_as_query_parameters(recorder: Recorder) -> None:
    recorder.answer(404, {"error": {"type": "NotFound", "message": "no job 'x'"}})
    with Client(recorder.url) as client:
        for since in ("10m", timedelta(minutes=90),
                      datetime(2025, 1, 31, 12, 0, tzinfo=UTC)):
            with pytest.raises(NotFound):
                list(client.logs("x", tail=5, since=since))
    assert recorder.requests == [
        ("GET", "/v1/jobs/x/logs?follow=false&tail=5&since=10m"),
        ("GET", "/v1/jobs/x/logs?follow=false&tail=5&since=5400s"),
        ("GET", "/v1/jobs/x/logs?follow=false&tail=5&since=2025-01-31T12%3A00%3A00%2B00%3A00"),
    ]


def test_too_many_followers_is_its_own_error(recorder: Recorder) -> None:
    recorder.answer(429, {"error": {"type": "TooManyRequests", "message": "job x already has "
                                    "32 log followers", "field": "follow", "fix": "stop one"}})
    with Client(recorder.url) as client, pytest.raises(TooManyRequests) as info:
        list(client.logs("x", follow=True))
    assert info.value.field == "follow" and info.value.fix == "stop one"


def test_unreachable_server_says_how_to_start_one() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, "tok", timeout=2) as client:
        with pytest.raises(ConnectionFailed) as info:
            client.status()
        assert info.value.message == f"no Phalanx control plane at {url}"
        assert info.value.fix is not None and "phalanx up -d" in info.value.fix
        with pytest.raises(ConnectionFailed):
            list(client.logs("x"))
        assert client.healthy() is False


def test_bad_job_is_refused_before_any_request(recorder: Recorder, tmp_path: Path) -> None:
    bad = tmp_path / "job.yaml"
    bad.write_text("name: j\npodSets:\n- name: w\n  resources: {memory: lots}\n")
    with Client(recorder.url, "tok") as client:
        with pytest.raises(SpecError) as info:
            client.submit(bad)
        assert info.value.field == "podSets[0].resources.memory"
        with pytest.raises(SpecError, match="unknown field"):
            client.submit({"name": "j", "podSets": [{"name": "w"}], "gpus": 2})
        with pytest.raises(SpecError) as missing:
            client.submit(tmp_path / "missing.yaml")
        assert missing.value.field == str(tmp_path / "missing.yaml")
        with pytest.raises(SpecError, match="unknown kind"):
            client.apply([{"kind": "Queue", "name": "q"}])
        with pytest.raises(SpecError, match="unknown job status"):
            client.list(status="Sleeping")
    assert recorder.requests == []


def test_token_is_sent_as_bearer_and_status_filters_repeat(recorder: Recorder) -> None:
    recorder.answer(200, {"items": []})
    with Client(recorder.url, "s3cret") as client:
        assert client.list(status=["running", "Queued"], queue="team-a", limit=5) == []
    assert recorder.requests == [
        ("GET", "/v1/jobs?status=Running&status=Queued&queue=team-a&limit=5")
    ]


def test_job_names_are_quoted_in_paths(recorder: Recorder) -> None:
    recorder.answer(404, {"error": {"type": "NotFound", "message": "nope"}})
    with Client(recorder.url) as client, pytest.raises(NotFound):
        client.events("../config")
    assert recorder.requests == [("GET", "/v1/jobs/..%2Fconfig/events")]
