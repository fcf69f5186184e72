"""Limits over real HTTP: bad values answer 400 in the envelope (never 500), whole jobs that
could never fit are refused, and the operator's limits (body size, batch size, pending jobs
per queue, idempotent submits) hold. The control plane runs on the simulated compute plane
(conftest.py: two nodes of 8 CPUs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app as cli
from phalanx.spec.api import ErrorResponse
from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(sim_server: LiveServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {sim_server.token}"}
    with httpx.Client(base_url=sim_server.url, headers=headers, timeout=30) as client:
        yield client


def error(response: httpx.Response, status: int) -> tuple[str | None, str, str]:
    """(field, message, fix) of an error answer, which must be the declared envelope."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = ErrorResponse.model_validate(response.json()).error
    assert body.fix, response.text
    return body.field, body.message, body.fix


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
