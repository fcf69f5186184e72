"""The API's edge over real HTTP: JSON's types are taken as they are (no ``true`` for a
number, no ``"10"`` for an integer), one job's spec is bounded, names are names, and
the answers around the routes (405's ``Allow``, revoked keys, the SDK's errors) say
what is so. The control plane runs on the simulated compute plane (conftest.py) unless
a test needs the local one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from phalanx import errors
from phalanx.errors import ERROR_TYPES, PhalanxError, Unavailable
from phalanx.sdk.client import error_from_response
from tests.sdk.live_server import LiveServer
from tests.server.envelope import error

pytestmark = pytest.mark.slow


def job(name: str, **pod_set: Any) -> dict[str, Any]:
    return {"name": name, "podSets": [{"command": ["x"], **pod_set}]}


def refused(response: httpx.Response, field: str, status: int = 400) -> str:
    """The message of a refusal naming ``field``, with a fix."""
    got, message, fix = error(response, status)
    assert got == field, response.text
    assert fix, response.text
    return message


def stored(api: httpx.Client, name: str) -> bool:
    return api.get(f"/v1/jobs/{name}").status_code == 200


# --------------------------------------------------------------------------- job specs
def test_a_boolean_priority_is_refused(api: httpx.Client) -> None:
    refused(api.post("/v1/jobs", json={**job("prio-bool"), "priority": True}), "priority")
    assert not stored(api, "prio-bool")


def test_an_empty_program_is_refused(api: httpx.Client) -> None:
    message = refused(api.post("/v1/jobs", json=job("empty-program", command=[""])),
                      "podSets[0].command")
    assert "command[0]" in message
    assert not stored(api, "empty-program")


def test_a_boolean_replica_count_is_refused(api: httpx.Client) -> None:
    refused(api.post("/v1/jobs", json=job("replicas-bool", replicas=True)),
            "podSets[0].replicas")


def test_a_string_restart_count_is_refused(api: httpx.Client) -> None:
    body = {**job("restarts-text"), "restart": {"maxRestarts": "3"}}
    refused(api.post("/v1/jobs", json=body), "restart.maxRestarts")


def test_a_large_env_value_is_refused_naming_it(api: httpx.Client) -> None:
    body = job("env-big", env={"DATA": "x" * (300 * 1024)})
    refused(api.post("/v1/jobs", json=body), "podSets[0].env.DATA")
    assert not stored(api, "env-big")


def test_an_env_spread_over_many_values_is_refused(api: httpx.Client) -> None:
    env = {f"V{i}": "x" * 1000 for i in range(300)}
    message = refused(api.post("/v1/jobs", json=job("env-wide", env=env)), "podSets[0].env")
    assert "262144" in message


def test_one_job_over_its_body_limit_is_a_413_naming_the_limit(api: httpx.Client) -> None:
    """The 15 MB env of old: within the server's body cap, beyond one job's."""
    body = job("env-huge", env={f"V{i}": "x" * 100_000 for i in range(150)})
    message = refused(api.post("/v1/jobs", json=body), "body", 413)
    assert str(2 * 1024 * 1024) in message
    assert not stored(api, "env-huge")
    # The page of jobs stays small: nothing of it was kept.
    assert len(api.get("/v1/jobs", params={"limit": 10}).content) < 1024 * 1024


def test_a_job_whose_parts_add_up_past_the_limit_is_refused(api: httpx.Client) -> None:
    sets = [{"name": f"p{i}", "command": ["x"], "env": {"A": "x" * 200_000}}
            for i in range(6)]
    message = refused(api.post("/v1/jobs:batch", json={"items": [
        {"name": "sum-big", "podSets": sets}]}), "items[0].podSets[0].env")
    assert str(1024 * 1024) in message


# --------------------------------------------------------------------------- other bodies
@pytest.mark.parametrize("expires", [True, "10", 1e23])
def test_a_key_lifetime_that_is_no_number_of_seconds_is_refused(
    api: httpx.Client, expires: object
) -> None:
    refused(api.post("/v1/keys", json={"expiresIn": expires}), "expiresIn")


def test_an_infinite_key_lifetime_is_refused(api: httpx.Client) -> None:
    # JSON has no Infinity; Python's json module writes and reads it all the same.
    response = api.post("/v1/keys", content=b'{"expiresIn": Infinity}',
                        headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text


@pytest.mark.parametrize("queue", ["", "\u00e9quipe", "Team_A"])
def test_a_team_queue_that_is_no_name_is_refused(api: httpx.Client, queue: str) -> None:
    refused(api.put("/v1/teams/edge-team", json={"queues": [queue]}), "queues[0]")
    assert all(t["name"] != "edge-team" for t in api.get("/v1/teams").json()["items"])


def test_a_boolean_grace_is_refused(api: httpx.Client) -> None:
    refused(api.post("/v1/nodes/sim-a:drain", json={"graceSeconds": False}), "graceSeconds")
    assert not api.get("/v1/nodes/sim-a").json()["unschedulable"]


def test_a_number_for_cordoned_is_refused(api: httpx.Client) -> None:
    assert api.post("/v1/planes", json={"name": "edge-plane"}).status_code == 201
    refused(api.post("/v1/planes/edge-plane/cordon", json={"cordoned": 0.0}), "cordoned")
    assert api.get("/v1/planes/edge-plane").json()["cordoned"] is False


# --------------------------------------------------------------------------- keys
def test_revoked_keys_are_listed_only_when_asked_for(api: httpx.Client) -> None:
    created = api.post("/v1/keys", json={"description": "to revoke"}).json()
    assert api.delete(f"/v1/keys/{created['id']}").status_code == 200
    listed = [k["id"] for k in api.get("/v1/keys").json()["items"]]
    assert created["id"] not in listed
    everything = api.get("/v1/keys", params={"revoked": "true"}).json()["items"]
    assert created["id"] in [k["id"] for k in everything]


# --------------------------------------------------------------------------- answers
def test_a_405_allows_every_method_of_the_path(api: httpx.Client) -> None:
    response = api.patch("/v1/jobs")
    assert response.status_code == 405
    assert set(response.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    response = api.post("/v1/keys/some-key")
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE"


def test_every_error_class_is_known_by_name_and_a_503_is_unavailable() -> None:
    def every(cls: type[PhalanxError]) -> Iterator[type[PhalanxError]]:
        yield cls
        for sub in cls.__subclasses__():
            yield from every(sub)

    for cls in every(PhalanxError):
        # A name is the first class's that took it (the wire's): errors.py's first.
        assert cls.__name__ in ERROR_TYPES
        if cls.__module__ == errors.__name__:
            assert ERROR_TYPES[cls.__name__] is cls
    request = httpx.Request("GET", "http://phalanx.invalid/healthz")
    enveloped = httpx.Response(503, json={"error": {"type": "Unavailable", "message": "stuck",
                                                    "field": None, "fix": None}},
                               request=request)
    assert type(error_from_response(enveloped)) is Unavailable
    bare = httpx.Response(503, text="upstream unavailable", request=request)
    assert type(error_from_response(bare)) is Unavailable


# --------------------------------------------------------------------------- no command
@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(tmp_path_factory.mktemp("phalanx-local"),
                    ["--run-as-user", str(os.geteuid())]) as server:
        yield server


def test_a_pod_set_without_command_is_refused_with_a_worker_plane_registered(
    local_server: LiveServer, tmp_path: Path
) -> None:
    with local_server.client() as api:
        assert api.post("/v1/planes", json={"name": "later"}).status_code == 201
        body = {"name": "bare", "podSets": [{"name": "w"}]}
        refused(api.post("/v1/jobs", json=body), "podSets[0].command")
        assert not stored(api, "bare")
