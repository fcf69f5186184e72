"""Ray on the local plane, for real: clusters of real Ray nodes, jobs through Ray's own
client, the CLI and the SDK over real HTTP.

Ray is slow to start (about ten seconds a node on two cores), so one control plane serves
the module and one long-lived cluster serves every test that reads it; the RayJob tests
bring up the smallest clusters that show what they test.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
import yaml
from typer.testing import CliRunner, Result

from phalanx import Client
from phalanx.cli.main import app
from phalanx.ray import Cluster, ClusterConfiguration, ClusterStatus, get_cluster
from tests.e2e.conftest import REPO, ControlPlane, example_job, running

pytest.importorskip("ray")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
runner = CliRunner()
READY_SECONDS = 240
CLUSTER = "raytest"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    # A grace long enough for Ray to stop by itself: each pod then removes its temp dir.
    with running(ControlPlane(tmp_path_factory.mktemp("ray") / "home", grace=15)) as cp:
        yield cp


@pytest.fixture(scope="module")
def client(plane: ControlPlane) -> Iterator[Client]:
    with Client(home=plane.home) as c:
        yield c


@pytest.fixture(scope="module")
def cluster(plane: ControlPlane, client: Client) -> Iterator[Cluster]:
    """One head and two workers, brought up through the SDK: shared by the tests that read
    it; the last test takes it down."""
    config = ClusterConfiguration(
        name=CLUSTER, num_workers=2, head_cpu_requests="250m", head_memory_requests="1Gi",
        worker_cpu_requests="250m", worker_memory_requests=1,
        # A machine busy with other work may take Ray's nodes more than their default
        # minute to register.
        envs={"RAY_raylet_start_wait_time_s": "300"},
    )
    up = Cluster(config, client)
    began = time.monotonic()
    up.up()
    up.wait_ready(timeout=READY_SECONDS)
    print(f"\na 1-head, 2-worker Ray cluster was ready {time.monotonic() - began:.1f} s "
          "after up()")  # the README's figure (pytest -s)
    yield up
    with contextlib.suppress(Exception):
        up.down()


def cli(plane: ControlPlane, *args: str) -> Result:
    env = {"PHALANX_HOME": str(plane.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    return runner.invoke(app, list(args), env=env)


def wait_ray_job(cluster: Cluster, submission: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = cluster.job_status(submission)
        if status.is_terminal():
            return str(status)
        time.sleep(0.5)
    raise AssertionError(f"ray job {submission} still {status} after {timeout}s")


# --------------------------------------------------------------------------- a cluster
def test_cluster_nodes_through_the_job_client(cluster: Cluster) -> None:
    code = ("import ray; ray.init(); "
            "print('alive', sorted(n['NodeName'] for n in ray.nodes() if n['Alive']))")
    submission = cluster.job_client.submit_job(entrypoint=f'python -c "{code}"')
    assert wait_ray_job(cluster, submission) == "SUCCEEDED", cluster.job_logs(submission)
    line = next(x for x in cluster.job_logs(submission).splitlines() if x.startswith("alive"))
    assert line == (f"alive ['{CLUSTER}-head-0', '{CLUSTER}-worker-0', "
                    f"'{CLUSTER}-worker-1']")
    assert cluster.status() == (ClusterStatus.READY, True)


def test_a_ray_job_runs_tasks_on_more_than_one_node(cluster: Cluster) -> None:
    submission = cluster.job_client.submit_job(
        entrypoint="python ray_spread.py", runtime_env={"working_dir": str(REPO / "examples")})
    assert wait_ray_job(cluster, submission) == "SUCCEEDED", cluster.job_logs(submission)
    logs = cluster.job_logs(submission)
    nodes = {line.split(" ran on node ")[1].split()[0]
             for line in logs.splitlines() if " ran on node " in line}
    assert len(nodes) > 1, logs
    assert nodes <= {f"{CLUSTER}-head-0", f"{CLUSTER}-worker-0", f"{CLUSTER}-worker-1"}


def test_the_dashboard_is_recorded_and_the_cli_reads_it(
    plane: ControlPlane, cluster: Cluster,
) -> None:
    job = plane.job(CLUSTER)
    assert job["endpoints"]["dashboard"].startswith("http://127.0.0.1:")  # the head's own
    assert job["endpoints"]["client"].startswith("ray://127.0.0.1:")
    # What users are given is the control plane's proxy of it, behind their token.
    dashboard = cluster.dashboard_uri()
    assert dashboard == f"{str(plane.api.base_url).rstrip('/')}/v1/jobs/{CLUSTER}/ray"
    result = cli(plane, "cluster", "dashboard", CLUSTER)
    assert result.exit_code == 0 and result.stdout.strip() == dashboard, result.output
    headers = cli(plane, "cluster", "dashboard", CLUSTER, "--headers")
    assert headers.exit_code == 0, headers.output
    version = httpx.get(f"{dashboard}/api/version", headers=json.loads(headers.stdout))
    assert version.status_code == 200 and "ray_version" in version.json()
    listed = cli(plane, "cluster", "list")
    assert listed.exit_code == 0
    row = next(line for line in listed.stdout.splitlines() if line.startswith(CLUSTER))
    assert row.split()[:4] == [CLUSTER, "ready", "default", "2"] and dashboard in row
    details = get_cluster(CLUSTER, Client(home=plane.home)).details()
    assert (details.num_workers, details.head_cpu) == (2, "250m")
    assert (details.head_memory, details.worker_memory) == ("1Gi", "1G")  # CodeFlare's GB
    assert "Dashboard" in cli(plane, "describe", CLUSTER).stdout
    status = cli(plane, "cluster", "status", CLUSTER, "--json")
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["status"] == "ready"
    assert cli(plane, "cluster", "status", "nosuch").exit_code == 2  # NotFound: bad input


def test_two_clusters_share_the_machine_and_a_failing_entrypoint_fails_its_job(
    plane: ControlPlane, cluster: Cluster,
) -> None:
    """A second cluster (a head alone) runs beside the first: every port is its own."""
    plane.submit({
        "name": "ray-fails", "kind": "ray",
        "ray": {"entrypoint": "python -c 'import sys; print(\"giving up\"); sys.exit(3)'"},
        "podSets": [{"name": "head", "resources": {"cpu": "250m", "memory": "1Gi"}}],
    })
    job = plane.wait_for("ray-fails", "Succeeded", "Failed", timeout=READY_SECONDS)
    assert job["status"] == "Failed" and job["exitCode"] == 3, job
    assert "entrypoint" in job["message"]
    logs = plane.logs("ray-fails")
    assert "giving up" in logs and "ray job ray-fails-1 FAILED" in logs
    assert "Ray runtime started" not in logs  # the log is the entrypoint's, not ray start's
    assert cluster.status() == (ClusterStatus.READY, True)  # the first cluster never noticed


def _sessions(plane: ControlPlane, job: str) -> set[int]:
    """The sessions the job's pods lead (each pod's supervisor starts one)."""
    return {os.getsid(p["pid"]) for p in plane.job(job)["pods"] if p.get("pid")}


def _members(sessions: set[int]) -> list[psutil.Process]:
    """Live processes of those sessions (a zombie has ended: it waits only to be reaped by
    the init process, which adopted it)."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getsid(proc.pid) in sessions and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def test_down_cancels_the_cluster_and_leaves_no_process(
    plane: ControlPlane, cluster: Cluster,
) -> None:
    sessions = _sessions(plane, CLUSTER)
    assert len(sessions) == 3
    members = _members(sessions)
    assert len(members) > 6  # each Ray node runs several processes
    temp_dirs = {arg.split("=", 1)[1] for proc in members for arg in proc.cmdline()
                 if arg.startswith("--temp-dir=")}
    assert len(temp_dirs) == 3 and all(Path(d).is_dir() for d in temp_dirs)
    result = cli(plane, "cluster", "down", CLUSTER, "--wait")
    assert result.exit_code == 0, result.output
    assert plane.job(CLUSTER)["status"] == "Cancelled"
    assert cluster.status() == (ClusterStatus.DOWN, False)
    assert _members(sessions) == []
    assert not any(Path(d).exists() for d in temp_dirs)  # each pod removed its Ray temp dir
    assert cli(plane, "cluster", "list").stdout.strip() == ""


# --------------------------------------------------------------------------- a Ray job
def test_the_ray_job_example_spreads_over_both_workers(plane: ControlPlane) -> None:
    spec = example_job("ray-job.yaml")
    for pod_set in spec["podSets"]:
        pod_set["resources"]["cpu"] = "250m"
    plane.submit(spec)
    job = plane.wait_for("ray-spread", "Succeeded", "Failed", timeout=READY_SECONDS)
    logs = plane.logs("ray-spread")
    assert job["status"] == "Succeeded", logs
    assert job["message"] == "the Ray job's entrypoint succeeded"
    assert "cluster of 3 nodes" in logs
    ran = {line.split(" ran on node ")[1].split()[0]
           for line in logs.splitlines() if " ran on node " in line}
    assert {"ray-spread-worker-0", "ray-spread-worker-1"} <= ran, logs
    # the job's logs are the entrypoint's: the workers' pods printed nothing
    assert plane.logs("ray-spread", pod="1").strip() == ""


def test_up_refuses_what_is_not_a_ray_cluster(plane: ControlPlane, tmp_path: Path) -> None:
    path = tmp_path / "no-head.yaml"
    path.write_text(yaml.safe_dump({"name": "nohead", "kind": "ray", "podSets": [
        {"name": "worker", "replicas": 2, "resources": {"cpu": "100m"}}]}))
    result = cli(plane, "cluster", "up", "-f", str(path))
    assert result.exit_code == 2
    assert "podSets" in result.output and 'named "head"' in result.output
    generic = tmp_path / "generic.yaml"
    generic.write_text(yaml.safe_dump({"name": "gen", "podSets": [
        {"name": "worker", "command": ["true"]}]}))
    result = cli(plane, "cluster", "up", "-f", str(generic))
    assert result.exit_code == 2 and "kind: ray" in result.output
