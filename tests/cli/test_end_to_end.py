"""The CLI against a real control plane (``phalanx up``) over real HTTP."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from typer.testing import CliRunner, Result

from phalanx import Client, JobStatus
from phalanx.cli.main import app
from phalanx.scheduler import COMPILED
from phalanx.spec import format_amount, parse_quantity
from tests.sdk.live_server import LiveServer, live_server

__all__ = ["live_server"]

pytestmark = pytest.mark.slow
runner = CliRunner()

QUEUES = """
kind: ClusterQueue
name: cli-team
cohort: cli-research
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: default
    resources:
    - {name: cpu, nominalQuota: 1500m, borrowingLimit: 500m}
    - {name: memory, nominalQuota: 24684084Ki}  # as /proc/meminfo says it
---
kind: LocalQueue
name: cli-team
clusterQueue: cli-team
"""


def cli(server: LiveServer, *args: str) -> Result:
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    return runner.invoke(app, list(args), env=env)


def job_file(tmp_path: Path, name: str, code: str, replicas: int = 1) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "podSets": [{"name": "worker", "replicas": replicas, "resources": {"cpu": "100m"},
                     "command": [sys.executable, "-c", code]}],
    }))
    return path


def test_submit_wait_success_then_logs(live_server: LiveServer, tmp_path: Path) -> None:
    result = cli(live_server, "submit", "-f", str(job_file(tmp_path, "hi", "print('hi')")),
                 "--wait")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["hi"]  # the job's name, alone: scripts capture it
    assert "Succeeded" in result.stderr
    logs = cli(live_server, "logs", "hi")
    assert logs.exit_code == 0
    assert logs.stdout == "hi\n"


def test_failing_job_exits_1(live_server: LiveServer, tmp_path: Path) -> None:
    path = job_file(tmp_path, "boom", "import sys; print('oops'); sys.exit(3)")
    result = cli(live_server, "submit", "-f", str(path), "--wait")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == ["boom"]
    assert "Failed" in result.stderr


def test_follow_streams_logs_then_exits_like_wait(live_server: LiveServer, tmp_path: Path) -> None:
    code = "import os\nfor i in range(3): print('rank', os.environ['PHALANX_JOB'], i)"
    path = job_file(tmp_path, "chatty", code, replicas=2)
    result = cli(live_server, "submit", "-f", str(path), "--follow", "--name", "chatty-2",
                 "--priority", "high")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "chatty-2"
    for pod in ("chatty-2-worker-0", "chatty-2-worker-1"):
        assert [line for line in lines if line.startswith(f"[{pod}]")] == [
            f"[{pod}] rank chatty-2 {i}" for i in range(3)
        ]
    one = cli(live_server, "logs", "chatty-2", "--pod", "1")
    assert one.stdout.splitlines() == [f"rank chatty-2 {i}" for i in range(3)]
    last = cli(live_server, "logs", "chatty-2", "--tail", "1", "--since", "1h")
    assert last.exit_code == 0, last.output
    assert last.stdout.splitlines() == [f"[chatty-2-worker-{r}] rank chatty-2 2" for r in (0, 1)]
    bad = cli(live_server, "logs", "chatty-2", "--since", "last week")
    assert bad.exit_code == 2 and "since" in bad.output


def test_jobs_and_describe(live_server: LiveServer, tmp_path: Path) -> None:
    assert cli(live_server, "submit", "-f", str(job_file(tmp_path, "desc", "pass")),
               "--wait").exit_code == 0
    listed = cli(live_server, "jobs", "--json")
    assert listed.exit_code == 0
    by_name = {job["name"]: job for job in json.loads(listed.stdout)}
    assert by_name["desc"]["status"] == "Succeeded"
    table = cli(live_server, "jobs", "--status", "succeeded")
    assert table.exit_code == 0
    assert table.stdout.split()[:10] == [
        "NAME", "QUEUE", "USER", "STATUS", "PRIORITY", "PODS", "AGE", "DURATION", "STARTS",
        "REASON/MESSAGE",
    ]
    assert "desc" in table.stdout and "Failed" not in table.stdout

    shown = cli(live_server, "describe", "desc")
    assert shown.exit_code == 0, shown.output
    assert "Placement on ClusterQueue default" in shown.stdout
    assert "Succeeded" in shown.stdout and "Events" in shown.stdout
    detail = json.loads(cli(live_server, "describe", "desc", "--json").stdout)
    node = detail["admission"]["podSets"][0]["nodes"][0]
    placement = shown.stdout[shown.stdout.index("Placement"):]
    assert node in placement
    assert detail["events"][0]["reason"] == "Submitted"
    assert cli(live_server, "describe", "no-such-job").exit_code == 2


def running_pid(client: Client, name: str, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = client.get(name).pods
        if pods and pods[0].pid and pods[0].phase == "Running":
            return pods[0].pid
        time.sleep(0.1)
    raise AssertionError(f"{name} did not start: {client.get(name)}")


def test_cancel_of_a_sleeping_job(live_server: LiveServer, tmp_path: Path) -> None:
    path = job_file(tmp_path, "sleeper", "import time; time.sleep(300)")
    assert cli(live_server, "submit", "-f", str(path)).exit_code == 0
    with Client(home=live_server.home) as client:
        pid = running_pid(client, "sleeper")
        assert psutil.pid_exists(pid)
        shown = cli(live_server, "describe", "sleeper")
        pods = shown.stdout[shown.stdout.index("Pods"):]
        assert "sleeper-worker-0" in pods and str(pid) in pods and "Running" in pods
        result = cli(live_server, "cancel", "sleeper", "--wait")
        assert result.exit_code == 0, result.output
        assert "job sleeper cancelled" in result.stderr
        assert client.get("sleeper").status is JobStatus.CANCELLED
    with contextlib.suppress(psutil.NoSuchProcess):
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    again = cli(live_server, "cancel", "sleeper")
    assert again.exit_code == 0


def test_apply_then_queues(live_server: LiveServer, tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    result = cli(live_server, "apply", "-f", str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["clusterqueue/cli-team created",
                                          "localqueue/cli-team created"]
    again = cli(live_server, "apply", "-f", str(path))
    assert "clusterqueue/cli-team unchanged" in again.stdout
    data = json.loads(cli(live_server, "queues", "--json").stdout)
    team = next(cq for cq in data["clusterQueues"] if cq["name"] == "cli-team")
    assert team["cohort"] == "cli-research"
    cpu = next(u for u in team["usage"] if u["resource"] == "cpu")
    assert cpu["nominal"] == "1500m"
    assert {"name": "cli-team", "clusterQueue": "cli-team"}.items() <= next(
        lq for lq in data["localQueues"] if lq["name"] == "cli-team").items()
    memory = next(u for u in team["usage"] if u["resource"] == "memory")
    assert parse_quantity(memory["nominal"]) == parse_quantity("24684084Ki")  # exact on the wire
    table = cli(live_server, "queues")
    assert table.exit_code == 0
    rows = [line.split() for line in table.stdout.splitlines()]
    assert any(row[:2] == ["cli-team", "cli-research"] for row in rows)
    # People read quantities as they write them: 23.5Gi, not 24684084Ki or 25276502016.
    assert any(row[-6:-3] == ["default", "memory", "23.5Gi"] for row in rows), table.stdout
    # So does a Python user printing the SDK's record; code keeps the exact milli-units.
    with Client(home=live_server.home) as client:
        usage = next(u for cq in client.queues().cluster_queues if cq.name == "cli-team"
                     for u in cq.usage if u.resource == "memory")
    assert usage.nominal == parse_quantity("24684084Ki")
    assert "nominal='23.5Gi'" in repr(usage) and str(usage.nominal) not in repr(usage)
    # A job to a queue that does not exist is refused by the server: bad input, nothing stored.
    path = job_file(tmp_path, "lost", "pass")
    refused = cli(live_server, "submit", "-f", str(path), "--queue", "no-queue")
    assert refused.exit_code == 2
    assert "queue" in refused.stderr
    assert cli(live_server, "describe", "lost").exit_code == 2


def test_nodes_status_version(live_server: LiveServer) -> None:
    nodes = json.loads(cli(live_server, "nodes", "--json").stdout)
    assert nodes and nodes[0]["allocatable"]["cpu"]
    table = cli(live_server, "nodes")
    assert nodes[0]["name"] in table.stdout and "CPU USED/ALLOC" in table.stdout
    # This machine's memory, as a person writes it (a few digits and a binary suffix).
    memory = format_amount(parse_quantity(nodes[0]["allocatable"]["memory"]), "memory")
    assert len(memory) <= 7 and f"/{memory}" in table.stdout, table.stdout
    status = cli(live_server, "status")
    assert status.exit_code == 0 and live_server.url in status.stdout
    version = cli(live_server, "version", "--json")
    assert json.loads(version.stdout) == {"client": "0.1.0", "server": "0.1.0",
                                          "url": live_server.url,
                                          "schedulerCore": "compiled" if COMPILED else "python"}
