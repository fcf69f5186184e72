"""A live control plane gives a job that waits behind a run of known maxRuntime its place
and an estimated start, shown by the SDK, `phalanx jobs`, `describe`, the dashboard and
/metrics."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from phalanx.sdk import Client
from phalanx.spec import GPU, JobSpec
from phalanx.spec.status import EstimateBasis, JobStatus, StartEstimate
from tests.sdk.live_server import LiveServer

NODES = """\
nodes:
  - name: sim-a
    allocatable: {cpu: 8, memory: 32Gi, nvidia.com/gpu: 4}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-estimates"), NODES) as live:
        yield live


def _gang(name: str, max_runtime: str | None = None) -> JobSpec:
    return JobSpec.model_validate({
        "name": name, "queue": "default", "maxRuntime": max_runtime,
        "podSets": [{"name": "w", "replicas": 1, "resources": {GPU: 4},
                     "command": ["sleep", "infinity"]}]})


def _cli(server: LiveServer, *args: str) -> str:
    env = {**server.env, "COLUMNS": "250"}
    done = subprocess.run([sys.executable, "-m", "phalanx.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=60, cwd=server.home)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_job_behind_a_run_of_known_max_runtime_gets_its_place_and_start(
        server: LiveServer) -> None:
    client = Client(server.url, token=server.token)
    client.submit(_gang("long-run-1", "1h"))
    deadline = time.monotonic() + 30
    while client.get("long-run-1").status is JobStatus.QUEUED:
        assert time.monotonic() < deadline, "the first job was never admitted"
        time.sleep(0.1)
    running = client.get("long-run-1")
    client.submit(_gang("behind-1"))
    estimate: StartEstimate | None = None
    while estimate is None:  # the forecaster runs every few seconds
        assert time.monotonic() < deadline + 30, "no estimate came"
        time.sleep(0.2)
        estimate = client.get("behind-1").estimate
    assert isinstance(estimate, StartEstimate)  # a typed field of the SDK's record
    assert estimate.position == 1
    assert estimate.basis is EstimateBasis.MAX_RUNTIME and not estimate.guess
    began = running.admitted_at
    assert began is not None and estimate.starts_at is not None
    # The running job's remaining time: its maxRuntime from its admission (within the
    # forecaster's and the loop's few seconds).
    assert estimate.starts_at == pytest.approx(began + 3600, abs=30)

    listed = {r.name: r for r in client.list()}
    assert listed["behind-1"].estimate is not None

    table = _cli(server, "jobs")
    header = next(line for line in table.splitlines() if "STARTS" in line)
    row = next(line for line in table.splitlines() if line.startswith("behind-1"))
    starts = header.index("STARTS")
    assert row[starts:].split()[0] in ("~1h", "~59m", "~60m")

    described = _cli(server, "describe", "behind-1")
    assert "#1 in default" in described
    assert "MaxRuntime" in described

    with httpx.Client(base_url=server.url, timeout=30) as ui:  # the dashboard's job page
        assert ui.post("/ui/login", data={"key": server.token}).status_code == 303
        page = ui.get("/ui/jobs/behind-1").text
    assert 'id="job-estimate"' in page and "Position 1 in default" in page
    assert "estimated start" in page and "MaxRuntime" in page

    metrics = httpx.get(server.url + "/metrics", timeout=10,
                        headers={"Authorization": f"Bearer {server.token}"}).text
    line = next(line for line in metrics.splitlines()
                if line.startswith('phalanx_estimated_wait_seconds{cluster_queue="default",'
                                   'job="next"}'))
    assert 3000 < float(line.split()[-1]) <= 3600


def test_a_job_that_runs_carries_no_estimate(server: LiveServer) -> None:
    client = Client(server.url, token=server.token)
    for name in ("long-run-1", "behind-1"):
        client.cancel(name)
    client.submit(_gang("quick-1", "10m"))
    deadline = time.monotonic() + 30
    while (record := client.get("quick-1")).status is JobStatus.QUEUED:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert record.estimate is None  # only queued jobs carry one
