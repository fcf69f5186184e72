"""Limits over real HTTP: bad values answer 400 in the envelope (never 500), whole jobs that
could never fit are refused, and the operator's limits (body size, batch size, pending jobs
per queue, idempotent submits) hold. The control plane runs on the simulated compute plane
(conftest.py: two nodes of 8 CPUs)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app as cli
from tests.sdk.live_server import LiveServer
from tests.server.envelope import error as envelope_error

pytestmark = pytest.mark.slow



def error(response: httpx.Response, status: int) -> tuple[str | None, str, str]:
    """(field, message, fix) of an error answer: the declared envelope, with a fix."""
    field, message, fix = envelope_error(response, status)
    assert fix, response.text
    return field, message, fix


def job(name: str, *pod_sets: dict[str, Any], **fields: Any) -> dict[str, Any]:
    sets = pod_sets or ({},)
    return {"name": name, **fields, "podSets": [
        {"name": f"p{i}", "command": ["x"], "env": {"PHALANX_SIM_DURATION": "50ms"}, **ps}
        for i, ps in enumerate(sets)]}


def stored(api: httpx.Client, name: str) -> bool:
    return api.get(f"/v1/jobs/{name}").status_code == 200


# --------------------------------------------------------------------------- finding 5
@pytest.mark.parametrize(
    ("path", "field"),
    [("/v1/jobs?limit=9223372036854775808", "limit"), ("/v1/jobs?limit=0", "limit"),
     ("/v1/jobs?status=Bogus", "status[0]")],
)
def test_a_bad_query_parameter_is_a_400_that_speaks_of_the_query(
    api: httpx.Client, path: str, field: str
) -> None:
    got, _, fix = error(api.get(path), 400)
    assert got == field
    assert "JSON body" not in fix


@pytest.mark.parametrize("cohort", ["", "Team_A"])
def test_a_bad_cohort_name_is_a_400(api: httpx.Client, cohort: str) -> None:
    doc = {"kind": "ClusterQueue", "name": "bad-cohort", "cohort": cohort}
    field, message, _ = error(api.post("/v1/config/apply", json={"documents": [doc]}), 400)
    assert field is not None and field.endswith(".cohort") and "not a valid name" in message


@pytest.mark.parametrize("priority", [2**63, 2**31, -(2**31) - 1])
def test_a_priority_beyond_32_bits_is_refused(api: httpx.Client, priority: int) -> None:
    name = f"prio-{abs(priority) % 1000}"
    field, message, fix = error(api.post("/v1/jobs", json=job(name, priority=priority)), 400)
    assert field == "priority" and "32-bit" in message and "2147483647" in fix
    assert not stored(api, name)


def test_a_priority_class_beyond_32_bits_is_refused(api: httpx.Client) -> None:
    doc = {"kind": "PriorityClass", "name": "enormous", "value": 2**63}
    field, message, _ = error(api.post("/v1/config/apply", json={"documents": [doc]}), 400)
    assert field is not None and field.endswith(".value") and "2147483647" in message
    assert "enormous" not in api.get("/v1/config").text


@pytest.mark.parametrize(
    ("change", "field"),
    [({"restart": {"maxRestarts": 2**64}}, "restart.maxRestarts"),
     ({"podSets": [{"name": "w", "command": ["x"], "resources": {"cpu": "1e30"}}]},
      "podSets[0].resources.cpu")],
)
def test_counts_and_quantities_are_bounded(
    api: httpx.Client, change: dict[str, Any], field: str
) -> None:
    got, _, _ = error(api.post("/v1/jobs", json={**job("bounded"), **change}), 400)
    assert got == field
    assert not stored(api, "bounded")


# --------------------------------------------------------------------------- finding 6
def test_a_job_whose_pod_sets_never_fit_together_is_refused(
    api: httpx.Client, sim_server: LiveServer, tmp_path: Any
) -> None:
    # Each pod set fits one 8-CPU node; together they ask 18 of the queue's 16.
    three = job("three-sets", *[{"resources": {"cpu": 6}}] * 3)
    field, message, fix = error(api.post("/v1/jobs", json=three), 400)
    assert "smaller" in fix
    assert field == "podSets" and "18 cpu" in message and "16" in message
    assert not stored(api, "three-sets")
    spec = tmp_path / "job.yaml"
    spec.write_text("name: three-sets\npodSets:\n" + "".join(
        f"- {{name: p{i}, command: [x], resources: {{cpu: 6}}}}\n" for i in range(3)))
    env = {"PHALANX_URL": sim_server.url, "PHALANX_TOKEN": sim_server.token,
           "PHALANX_HOME": str(sim_server.home), "COLUMNS": "200"}
    result = CliRunner().invoke(cli, ["submit", "-f", str(spec)], env=env)
    assert result.exit_code == 2, result.output
    assert "podSets" in result.stderr and "18 cpu" in result.stderr
    assert not stored(api, "three-sets")


# --------------------------------------------------------------------------- finding 7
def test_a_body_over_the_cap_is_a_413_in_the_envelope(api: httpx.Client) -> None:
    big = job("big", labels={"padding": "x" * (17 * 2**20)})
    field, message, fix = error(api.post("/v1/jobs:batch", json={"items": [big]}), 413)
    assert field == "body" and str(16 * 2**20) in message and "--max-body-bytes" in fix
    chunked = api.post("/v1/jobs:batch", content=iter([b"{" + b" " * 2**20] * 17),
                       headers={"content-type": "application/json"})
    assert error(chunked, 413)[0] == "body"
    assert not stored(api, "big")


def test_a_batch_over_the_cap_is_refused_naming_items(api: httpx.Client) -> None:
    items = [job(f"cap-{i}") for i in range(5_001)]
    field, message, fix = error(api.post("/v1/jobs:batch", json={"items": items}), 400)
    assert field == "items" and "5001" in message and "5000" in fix
    assert not stored(api, "cap-0")


def test_a_queue_refuses_jobs_beyond_its_max_pending(api: httpx.Client) -> None:
    docs = [
        {"kind": "ClusterQueue", "name": "capped", "maxPendingJobs": 2, "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]},
        {"kind": "LocalQueue", "name": "capped", "clusterQueue": "capped"},
    ]
    assert api.post("/v1/config/apply", json={"documents": docs}).status_code == 200
    # Each job holds the queue's one CPU for a while, so the ones behind it stay pending.
    hold = {"resources": {"cpu": 1}, "env": {"PHALANX_SIM_DURATION": "1h"}}
    assert api.post("/v1/jobs", json=job("capped-0", hold, queue="capped")).is_success
    deadline = time.monotonic() + 20
    while api.get("/v1/jobs/capped-0").json()["status"] == "Queued":
        assert time.monotonic() < deadline, "capped-0 was never admitted"
        time.sleep(0.05)
    for i in (1, 2):  # these two wait behind it: the queue's limit
        assert api.post("/v1/jobs", json=job(f"capped-{i}", hold, queue="capped")).is_success
    field, message, fix = error(
        api.post("/v1/jobs", json=job("capped-3", hold, queue="capped")), 429)
    assert field == "queue" and "ClusterQueue capped" in message and "maxPendingJobs" in fix
    assert not stored(api, "capped-3")
    batch = {"items": [job(f"capped-b{i}", hold, queue="capped") for i in range(2)]}
    field, _, _ = error(api.post("/v1/jobs:batch", json=batch), 429)
    assert field == "items[0].queue" and not stored(api, "capped-b1")
    for i in range(3):
        api.post(f"/v1/jobs/capped-{i}/cancel")


def test_a_retried_submit_with_the_same_key_makes_one_job(api: httpx.Client) -> None:
    key = {"Idempotency-Key": "retry-0001"}
    first = api.post("/v1/jobs", json=job("keyed"), headers=key)
    assert first.status_code == 201, first.text
    again = api.post("/v1/jobs", json=job("keyed"), headers=key)
    assert again.status_code == 200, again.text
    assert again.json()["name"] == "keyed"
    assert again.json()["submittedAt"] == first.json()["submittedAt"]
    names = [j["name"] for j in api.get("/v1/jobs").json()["items"]]
    assert names.count("keyed") == 1
    other = api.post("/v1/jobs", json=job("keyed-other"), headers=key)
    field, message, fix = error(other, 409)
    assert field == "Idempotency-Key" and "different request" in message and "new key" in fix
    assert not stored(api, "keyed-other")


def test_a_submit_answers_the_whole_record_in_the_declared_form(api: httpx.Client) -> None:
    # The answer is written by the route itself (not checked again by FastAPI): every field
    # of JobRecord, camelCase, nulls included, as /openapi.json declares it.
    from phalanx.spec.api import JobList
    from phalanx.spec.status import JobRecord

    one = api.post("/v1/jobs", json=job("answered"))
    assert one.status_code == 201 and one.headers["content-type"] == "application/json"
    body = one.json()
    assert body == JobRecord.model_validate(body).model_dump(mode="json", by_alias=True)
    assert body["name"] == "answered" and body["finishedAt"] is None
    assert body["spec"]["podSets"][0]["command"] == ["x"]
    many = api.post("/v1/jobs:batch", json={"items": [job("answered-0"), job("answered-1")]})
    assert many.status_code == 201
    listed = many.json()
    assert listed == JobList.model_validate(listed).model_dump(mode="json", by_alias=True)
    assert [j["name"] for j in listed["items"]] == ["answered-0", "answered-1"]


def test_a_retried_batch_with_the_same_key_makes_its_jobs_once(api: httpx.Client) -> None:
    key = {"Idempotency-Key": "batch-0001"}
    batch = {"items": [job("kb-0"), job("kb-1")]}
    assert api.post("/v1/jobs:batch", json=batch, headers=key).status_code == 201
    again = api.post("/v1/jobs:batch", json=batch, headers=key)
    assert again.status_code == 200
    assert [j["name"] for j in again.json()["items"]] == ["kb-0", "kb-1"]
    assert error(api.post("/v1/jobs:batch", json={"items": [job("kb-2")]}, headers=key),
                 409)[0] == "Idempotency-Key"


def test_a_rejected_submit_does_not_store_its_key(api: httpx.Client) -> None:
    key = {"Idempotency-Key": "refused-0001"}
    error(api.post("/v1/jobs", json=job("Bad_Name"), headers=key), 400)
    assert api.post("/v1/jobs", json=job("good-after-refusal"), headers=key).status_code == 201
