"""The HTTP API's promises: bad input names the field and the fix, every error is the
envelope, the token guards /v1 only, and a failure inside the server is a logged 500."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.server.app import create_app
from phalanx.server.auth import Authenticator
from phalanx.spec import Node
from phalanx.spec.api import ErrorResponse, JobList
from phalanx.spec.status import JobDetail, JobRecord, JobStatus
from phalanx.store import IdentityStore, LogStore, Store
from tests.sdk.live_server import LiveServer
from tests.server.envelope import error

pytestmark = pytest.mark.slow


def job(name: str, **pod_set: Any) -> dict[str, Any]:
    return {"name": name, "podSets": [{"name": "w", "resources": {"cpu": "100m"},
                                       "env": {"PHALANX_SIM_DURATION": "100ms"}, **pod_set}]}



@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (job("bad", replicas=0), "podSets[0].replicas", "greater than or equal to 1"),
        ({**job("bad"), "gpus": 2}, "gpus", "unknown field"),
        ({"name": "bad"}, "podSets", "is required"),
        ({"name": "Bad_Name", "podSets": [{}]}, "name", "is not a valid name"),
        (job("bad", resources={"memory": "2GB"}), "podSets[0].resources.memory",
         "not a quantity"),
        ([1, 2], None, "valid dictionary"),
    ],
)
def test_a_bad_job_names_the_field_and_the_fix(
    api: httpx.Client, body: object, field: str | None, words: str
) -> None:
    got_field, message, fix = error(api.post("/v1/jobs", json=body), 400)
    assert got_field == field
    assert words in message
    assert fix


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"items": []}, "items", "must be a non-empty list of jobs"),
        ({}, "items", "must be a non-empty list of jobs"),
        ({"items": "x"}, "items", "must be a non-empty list of jobs"),
        ({"items": [job("b0"), job("b1", replicas=0)]}, "items[1].podSets[0].replicas",
         "greater than or equal to 1"),
        ({"items": [job("b0")], "dryRun": True}, "dryRun", "unknown field"),
    ],
)
def test_a_bad_batch_names_the_item_and_field(
    api: httpx.Client, body: object, field: str, words: str
) -> None:
    got_field, message, fix = error(api.post("/v1/jobs:batch", json=body), 400)
    assert (got_field, words in message) == (field, True), message
    assert fix
    assert error(api.get("/v1/jobs/b0"), 404)[0] == "name"  # nothing of the batch was made


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"documents": "queues.yaml"}, "documents", "must be a list of documents"),
        ({"documents": [{"kind": "Queue", "name": "q"}]}, "documents[0].kind", "unknown kind"),
        ({"documents": [{"kind": "LocalQueue", "name": "q", "clusterQueue": "nowhere"}]},
         "LocalQueue q.clusterQueue", "does not exist"),
        ({"documents": [{"kind": "ClusterQueue", "name": "q", "cohort": ""}]},
         "documents[0] (ClusterQueue q).cohort", "is not a valid name"),
    ],
)
def test_a_bad_config_names_the_document_and_field(
    api: httpx.Client, body: object, field: str, words: str
) -> None:
    got_field, message, fix = error(api.post("/v1/config/apply", json=body), 400)
    assert (got_field, words in message) == (field, True), message
    assert fix


def test_bad_query_parameters_and_bodies_are_400_not_422(api: httpx.Client) -> None:
    assert error(api.get("/v1/jobs", params={"limit": 0}), 400)[0] == "limit"
    field, _, fix = error(api.get("/v1/jobs", params={"status": "Sleeping"}), 400)
    assert field == "status[0]" and fix and "Queued" in fix
    field, message, fix = error(
        api.post("/v1/jobs", content=b"{not json", headers={"content-type": "application/json"}),
        400,
    )
    assert field == "body" and "JSON" in message and fix


def test_a_manifest_sent_as_a_job_is_pointed_at_its_route(api: httpx.Client) -> None:
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "m"},
                "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}
    field, _, fix = error(api.post("/v1/jobs", json=manifest), 400)
    assert field == "apiVersion" and fix and "/v1/manifests" in fix


def test_the_token_guards_v1_only(sim_server: LiveServer) -> None:
    with httpx.Client(base_url=sim_server.url, timeout=10) as anonymous:
        field, _, fix = error(anonymous.get("/v1/jobs"), 401)
        assert field == "Authorization" and fix and "token" in fix
        error(anonymous.get("/v1/jobs", headers={"Authorization": "Bearer wrong"}), 401)
        for open_path in ("/healthz", "/openapi.json", "/docs", "/metrics"):
            assert anonymous.get(open_path).status_code == 200, open_path


def test_unknown_routes_and_methods_answer_the_envelope(api: httpx.Client) -> None:
    assert error(api.get("/v1/nothing-here"), 404)[1] == "Not Found"
    assert error(api.get("/v1/jobs/a/b/c"), 404)[1] == "Not Found"
    error(api.delete("/v1/jobs"), 405)


def test_typed_round_trip_and_a_followed_log_is_text(api: httpx.Client) -> None:
    created = api.post("/v1/jobs", json=job("typed", replicas=2))
    assert created.status_code == 201
    record = JobRecord.model_validate(created.json())
    assert record.status is JobStatus.QUEUED and record.admission is None
    with api.stream("GET", "/v1/jobs/typed/logs", params={"follow": "true"}) as followed:
        assert followed.status_code == 200
        assert followed.headers["content-type"].startswith("text/plain")
        lines = list(followed.iter_lines())  # ends once the job has finished
    assert any("typed-w-1" in line for line in lines)
    detail = JobDetail.model_validate(api.get("/v1/jobs/typed").json())
    assert detail.status is JobStatus.SUCCEEDED
    assert detail.admission is not None and detail.admission.cluster_queue == "default"
    assert [(p.name, p.count) for p in detail.admission.pod_sets] == [("w", 2)]
    assert len(detail.admission.pod_sets[0].nodes) == 2
    assert detail.stop_reason is None
    listed = JobList.model_validate(api.get("/v1/jobs", params={"status": "Succeeded"}).json())
    assert "typed" in [r.name for r in listed.items]


# --------------------------------------------------------------------------- failures inside
NODE = Node(name="n1", allocatable={"cpu": "4", "memory": "8Gi"})


@pytest.fixture
def in_process(tmp_path: Path) -> Iterator[tuple[TestClient, Store, Path]]:
    """The app over a real store and simulated plane, called in-process so that a test can
    break the store underneath it."""
    store = Store.for_home(tmp_path)
    plane = SimulatedPlane([NODE])
    controller = Controller(store, plane)
    app = create_app(controller, Authenticator(tmp_path, IdentityStore(controller.store), bootstrap_key="tok"),
                     LogStore(tmp_path / "logs"), db_label="sqlite")
    with TestClient(app, raise_server_exceptions=False,
                    headers={"Authorization": "Bearer tok"}) as client:
        yield client, store, tmp_path
    plane.close()
    store.close()


def test_an_unhandled_failure_is_a_logged_500_without_the_traceback(
    in_process: tuple[TestClient, Store, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client, store, _ = in_process
    assert client.post("/v1/jobs", json=job("victim")).status_code == 201
    with store.engine.begin() as connection:
        connection.execute(text("DROP TABLE job_events"))
    with caplog.at_level(logging.ERROR, logger="phalanx.api"):
        response = client.get("/v1/jobs/victim/events")
    assert response.status_code == 500
    body = ErrorResponse.model_validate(response.json()).error
    assert body.type == "InternalError" and body.fix and "log" in body.fix
    assert "Traceback" not in response.text and "job_events" not in response.text
    logged = [r for r in caplog.records if r.name == "phalanx.api"]
    assert logged and logged[0].exc_info is not None  # the traceback went to the log
    assert "GET /v1/jobs/victim/events" in logged[0].getMessage()


def test_a_stored_job_that_no_longer_loads_is_an_internal_error(
    in_process: tuple[TestClient, Store, Path], caplog: pytest.LogCaptureFixture
) -> None:
    client, _, home = in_process
    assert client.post("/v1/jobs", json=job("corrupt")).status_code == 201
    client.post("/v1/jobs/corrupt/cancel")  # finished: now read from the store
    deadline = time.monotonic() + 10
    while client.get("/v1/jobs/corrupt").json()["status"] != "Cancelled":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    database = next(home.glob("*.db"))
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE jobs SET record = json_set(record, '$.spec', 'broken') "
                           "WHERE name = 'corrupt'")
    with caplog.at_level(logging.ERROR):
        response = client.get("/v1/jobs/corrupt")
    assert response.status_code == 500  # not the caller's fault: never a 400
    body = ErrorResponse.model_validate(response.json()).error
    assert body.type == "InternalError" and "stored job corrupt" in body.message
    assert any("does not load" in r.getMessage() for r in caplog.records)
