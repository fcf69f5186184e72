"""Replicas that follow answer reads from the store themselves, with the leader's own
routes, and send writes and reads that need the leader's planes or loop to the leader."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import py_job
from tests.e2e.test_replicas import Replica, replicas

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _get(replica: Replica, path: str, token: str, **params: Any) -> httpx.Response:
    # No redirect followed: a 200 is the replica's own answer.
    return httpx.get(f"{replica.url}{path}", params=params, timeout=30,
                     headers={"Authorization": f"Bearer {token}"})


def _answered_by(replica: Replica, path: str, token: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        answer = _get(replica, path, token)
        if answer.status_code == 200:
            body: dict[str, Any] = answer.json()
            return body
        assert answer.status_code == 307, answer.text  # not serving reads yet
        assert time.monotonic() < deadline, "the follower never answered reads itself"
        time.sleep(0.2)


def test_a_follower_answers_store_reads_and_redirects_the_rest(tmp_path: Path) -> None:
    with replicas(tmp_path) as group:
        leader = group.leader()
        follower = next(r for r in group.members if r is not leader)
        token = (group.home / "token").read_text().strip()
        with group.client() as client:
            client.submit(py_job("done", "print('hi')"))
            client.submit(py_job("long", "import time; time.sleep(600)"))
            assert client.wait("done", timeout=120).status.value == "Succeeded"
            deadline = time.monotonic() + 60
            while client.get("long").status.value != "Running":
                assert time.monotonic() < deadline, "long never ran"
                time.sleep(0.1)

        # The list and a finished job's description: the follower's own, and the leader's.
        listed = _answered_by(follower, "/v1/jobs", token)
        assert listed == _get(leader, "/v1/jobs", token).json()
        assert {item["name"] for item in listed["items"]} == {"done", "long"}
        described = _answered_by(follower, "/v1/jobs/done", token)
        assert described == _get(leader, "/v1/jobs/done", token).json()
        assert described["status"] == "Succeeded" and described["events"]
        assert _get(follower, "/v1/jobs", token, status="Running").json()["items"][0][
            "name"] == "long"
        # A job that does not exist answers as on the leader.
        missing = _get(follower, "/v1/jobs/nope", token)
        assert missing.status_code == 404
        assert missing.json() == _get(leader, "/v1/jobs/nope", token).json()
        assert _get(follower, "/v1/jobs", "not-a-token").status_code == 401

        # What needs the leader's planes or loop is redirected there: a live job's pods,
        # its logs, the queues' usage.
        for path in ("/v1/jobs/long", "/v1/jobs/done/logs", "/v1/queues", "/v1/status"):
            answer = _get(follower, path, token)
            assert answer.status_code == 307, (path, answer.text)
            assert answer.headers["location"] == f"{leader.url}{path}"
        assert _get(leader, "/v1/jobs/long", token).json()["pods"]

        # A write is redirected, method and body kept by the client.
        posted = httpx.post(f"{follower.url}/v1/jobs", json=py_job("sent", "pass"),
                            headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert posted.status_code == 307
        assert posted.headers["location"] == f"{leader.url}/v1/jobs"
        assert "sent" not in {r["name"] for r in _get(leader, "/v1/jobs", token).json()["items"]}
        with group.client() as client:  # the SDK follows it to the leader
            assert client.submit(py_job("sent", "pass")).name == "sent"
