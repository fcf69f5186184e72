"""A real control plane on the simulated compute plane, over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.errors import Conflict, SpecError
from phalanx.sdk import Client
from tests.e2e.conftest import REPO, ControlPlane

pytestmark = pytest.mark.slow

NODES = """\
nodes:
  - name: sim-a
    labels: {rack: r1}
    allocatable: {cpu: 4, memory: 16Gi}
  - name: sim-b
    labels: {rack: r2}
    allocatable: {cpu: 4, memory: 16Gi}
"""


class SimulatedControlPlane(ControlPlane):
    """``serve(compute="simulated")`` in a subprocess, waited for as the base class does."""

    def __init__(self, home: Path, nodes_file: Path) -> None:
        super().__init__(home)
        self.nodes_file = nodes_file

    def serve_args(self) -> str:
        return f"compute='simulated', nodes_file=Path({str(self.nodes_file)!r})"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimulatedControlPlane]:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    cp = SimulatedControlPlane(tmp_path / "home", nodes)
    cp.home.mkdir()
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


def sim_job(name: str, replicas: int, cpu: str, duration: str, **env: str) -> dict[str, Any]:
    return {
        "name": name,
        "podSets": [{
            "name": "worker", "replicas": replicas, "resources": {"cpu": cpu},
            "env": {"PHALANX_SIM_DURATION": duration, **env},
        }],
    }


def test_nodes_come_from_the_file(sim: SimulatedControlPlane) -> None:
    status = sim.api.get("/v1/status").json()
    assert status["compute"] == "simulated" and status["nodes"] == 2
    nodes = {n["name"]: n for n in sim.api.get("/v1/nodes").json()["items"]}
    assert set(nodes) == {"sim-a", "sim-b"}
    # Every node carries its compute plane (the embedded one is "local").
    assert nodes["sim-b"]["labels"] == {"rack": "r2", "phalanx.dev/plane": "local"}


def test_job_succeeds_after_its_duration(sim: SimulatedControlPlane) -> None:
    sim.submit(sim_job("ok", 2, "1", "400ms"))
    job = sim.wait_for("ok", "Succeeded", "Failed")
    assert job["status"] == "Succeeded" and job["exitCode"] == 0
    # It cannot have ended before its pods' time was up.
    assert job["finishedAt"] - job["admittedAt"] >= 0.4
    reasons = [e["reason"] for e in job["events"]]
    for expected in ("Submitted", "Admitted", "Starting", "Running", "Succeeded"):
        assert expected in reasons
    assert "on the simulated compute plane" in json.dumps(job["events"])
    logs = sim.logs("ok")
    assert "[ok-worker-0] simulated pod ok-worker-0 (attempt 1) started on node" in logs
    assert "[ok-worker-1] exited with code 0 after 0.400s" in logs


def test_failing_job_fails_with_its_exit_code(sim: SimulatedControlPlane) -> None:
    sim.submit(sim_job("bad", 1, "1", "200ms", PHALANX_SIM_EXIT_CODE="5"))
    job = sim.wait_for("bad", "Failed", "Succeeded")
    assert job["status"] == "Failed" and job["exitCode"] == 5
    assert "exit code 5" in job["message"] and job["userRestarts"] == 0
    assert "exited with code 5" in sim.logs("bad")


def test_bad_sim_env_fails_the_attempt_with_the_field(sim: SimulatedControlPlane) -> None:
    spec = sim_job("typo", 1, "1", "soon")
    spec["restart"] = {"maxSystemRestarts": 0}
    sim.submit(spec)
    job = sim.wait_for("typo", "Failed", "Succeeded")
    assert job["status"] == "Failed"
    assert "PHALANX_SIM_DURATION" in job["message"] and "not a duration" in job["message"]


def test_gang_is_placed_on_the_declared_nodes_and_waits_its_turn(
    sim: SimulatedControlPlane,
) -> None:
    # 4 pods of 2 CPU fill both 4-CPU nodes: two pods each, and nothing else fits meanwhile.
    sim.submit(sim_job("first", 4, "2", "1500ms"))
    running = sim.wait_for("first", "Running")
    placed = sorted(p["node"] for p in running["pods"])
    assert placed == ["sim-a", "sim-a", "sim-b", "sim-b"]
    assert sorted(running["admission"]["podSets"][0]["nodes"]) == placed
    admitted = next(e for e in running["events"] if e["reason"] == "Admitted")
    assert "4 pod(s)" in admitted["message"] and "sim-a,sim-b" in admitted["message"]

    sim.submit(sim_job("second", 4, "2", "200ms"))
    waiting = sim.wait_for("second", "Queued")
    deadline = time.time() + 10
    while waiting["pendingCode"] in (None, "Queued") and time.time() < deadline:
        time.sleep(0.05)
        waiting = sim.job("second")
    assert waiting["status"] == "Queued" and waiting["pendingCode"] not in (None, "Queued")

    first = sim.wait_for("first", "Succeeded")
    second = sim.wait_for("second", "Succeeded")
    ended = next(e["time"] for e in first["events"] if e["reason"] == "Succeeded")
    assert next(e["time"] for e in second["events"] if e["reason"] == "Admitted") >= ended
    assert sorted(second["admission"]["podSets"][0]["nodes"]) == placed


def test_cancel_stops_a_pod_that_would_run_forever(sim: SimulatedControlPlane) -> None:
    spec = sim_job("forever", 1, "1", "1s")
    del spec["podSets"][0]["env"]["PHALANX_SIM_DURATION"]
    sim.submit(spec)
    sim.wait_for("forever", "Running")
    assert sim.api.post("/v1/jobs/forever/cancel").status_code == 200
    job = sim.wait_for("forever", "Cancelled")
    assert "terminated after" in sim.logs("forever")
    assert job["finishedAt"] >= job["admittedAt"]


@pytest.mark.parametrize(("text", "expected"), [
    ("- {name: a, allocatable: {cpu: lots}}\n", "nodes.yaml[0].allocatable.cpu"),
    ("- {name: a, cpus: 4}\n", "nodes.yaml[0].cpus: unknown field"),
    ("[]\n", "declares no nodes"),
])
def test_bad_nodes_file_is_a_clear_error(tmp_path: Path, text: str, expected: str) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(text)
    home = tmp_path / "home"
    result = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "up", "--compute", "simulated",
         "--nodes", str(nodes), "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PHALANX_HOME": str(home), "COLUMNS": "400"},
    )
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr and "fix:" in result.stderr
    assert not (home / "server.json").exists()


def test_simulated_plane_without_nodes_is_a_clear_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "up", "--compute", "simulated",
         "--port", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PHALANX_HOME": str(tmp_path / "home"), "COLUMNS": "400"},
    )
    assert result.returncode == 2
    assert "--nodes" in result.stderr and "fix:" in result.stderr


def test_batch_submission_is_all_or_nothing(sim: SimulatedControlPlane) -> None:
    url = json.loads((sim.home / "server.json").read_text())["url"]
    token = (sim.home / "token").read_text().strip()
    with Client(url, token) as client:
        created = client.submit_many([sim_job(f"b{i}", 1, "1", "100ms") for i in range(3)])
        assert [r.name for r in created] == ["b0", "b1", "b2"]
        assert {r.status.value for r in created} == {"Queued"}
        assert len({r.submitted_at for r in created}) == 1  # one transaction, one instant
        for i in range(3):
            sim.wait_for(f"b{i}", "Succeeded")

        bad = [sim_job("c0", 1, "1", "100ms"), {**sim_job("c1", 1, "1", "100ms"),
                                                "queue": "nope"}]
        with pytest.raises(SpecError) as unknown_queue:
            client.submit_many(bad)
        assert unknown_queue.value.field == "items[1].queue"
        with pytest.raises(SpecError) as too_big:
            client.submit_many([sim_job("c0", 1, "1", "100ms"), sim_job("c2", 1, "64", "1s")])
        assert too_big.value.field is not None and too_big.value.field.startswith("items[1]")
        with pytest.raises(Conflict) as taken:
            client.submit_many([sim_job("c0", 1, "1", "100ms"), sim_job("b1", 1, "1", "1s")])
        assert taken.value.field == "items[1].name"
        with pytest.raises(SpecError) as local:
            client.submit_many([sim_job("c0", 1, "1", "100ms"), {"name": "c3"}])
        assert local.value.field == "items[1].podSets"
    # Nothing of a rejected batch was created.
    assert sim.api.get("/v1/jobs/c0").status_code == 404
    response = sim.api.post("/v1/jobs:batch", json={"items": []})
    assert response.status_code == 400 and response.json()["error"]["field"] == "items"
