"""`phalanx up --compute kubernetes --kubeconfig FILE` in a subprocess, against the fake API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from phalanx.sdk import Client
from phalanx.spec.status import JobStatus
from tests.k8s_plane.conftest import RUNS
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import IMAGE, pods
from tests.leftovers import STARTUP_SECONDS, stop_process

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


PHALANX = [sys.executable, "-c", "from phalanx.cli.main import app; app()"]
DEFAULT_IMAGE = "registry.example.com/ml/base:2024.1"
# Refusing at submit needs the controller to ask the plane: in Controller._new_job, right
# after `self.scheduler.check_feasible(spec)`, the line `self.plane.check_job(spec)`.

def _up(home: Path, kubeconfig: Path, *extra: str) -> subprocess.Popen[bytes]:
    log = open(home / "server.log", "ab")  # noqa: SIM115 - the child writes it
    return subprocess.Popen(
        [*PHALANX, "up", "--port", "0", "--compute", "kubernetes", "--kubeconfig",
         str(kubeconfig), "--namespace", RUNS, *extra],
        cwd=REPO, stdout=log, stderr=log, env={**os.environ, "PHALANX_HOME": str(home)},
    )


def _wait_for_server(proc: subprocess.Popen[bytes], home: Path) -> Client:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("server died:\n" + (home / "server.log").read_text())
        info = home / "server.json"
        if info.exists():
            client = Client(json.loads(info.read_text())["url"],
                            (home / "token").read_text().strip())
            if client.healthy():
                return client
        time.sleep(0.1)
    raise AssertionError("server did not start:\n" + (home / "server.log").read_text())


@contextmanager
def _control_plane(tmp_path: Path, kubeconfig: Path, *extra: str) -> Iterator[Client]:
    """`phalanx up` against the fake API, stopped with SIGTERM however the test ends."""
    home = tmp_path / "home"
    home.mkdir()
    proc = _up(home, kubeconfig, *extra)
    try:
        yield _wait_for_server(proc, home)
    finally:
        stop_process(proc)


def test_up_runs_a_job_as_pods(api: FakeAPIServer, kubeconfig: Path, tmp_path: Path) -> None:
    for name in ("gpu-1", "gpu-2"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=4)
    api.autopilot = {"start_after": 0.2, "run_for": 0.5}
    with _control_plane(tmp_path, kubeconfig) as client:
        assert {n.name for n in client.nodes()} == {"gpu-1", "gpu-2"}
        client.submit({"name": "e2e", "podSets": [{
            "name": "worker", "replicas": 2, "image": IMAGE,
            "resources": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 4},
            "command": ["python", "train.py"],
        }]})
        record = client.wait("e2e", timeout=30)
        assert record.status is JobStatus.SUCCEEDED, record
        # one pod per node (the gang needs all four GPUs of each), created once each
        assert api.count("POST", f"/api/v1/namespaces/{RUNS}/pods", 201) == 2
        bound = {c.new["spec"].get("nodeName") for c in api.history
                 if c.plural == "pods" and c.new and c.new["spec"].get("nodeName")}
        assert bound == {"gpu-1", "gpu-2"}
        # the attempt is cleaned up once the job is done
        deadline = time.monotonic() + 10
        while pods(api, "e2e") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pods(api, "e2e") and not api.list("services", RUNS)
        lines = list(client.logs("e2e"))
        assert any("hello from e2e-1-worker-0" in line for line in lines), lines
        assert any("hello from e2e-1-worker-1" in line for line in lines), lines


def test_describe_shows_the_clusters_events_for_the_pods(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path
) -> None:
    api.add_node("gpu-1", cpu="16", memory="64Gi", gpus=4)
    api.autopilot = {"start_after": 0.1, "run_for": 60}
    with _control_plane(tmp_path, kubeconfig) as client:
        client.submit({"name": "ev", "podSets": [{
            "name": "worker", "replicas": 1, "image": IMAGE,
            "resources": {"cpu": "1", "nvidia.com/gpu": 1}, "command": ["python", "train.py"],
        }]})
        deadline = time.monotonic() + 20
        while client.get("ev").status is not JobStatus.RUNNING and time.monotonic() < deadline:
            time.sleep(0.1)
        pod = pods(api, "ev")[0]["metadata"]["name"]
        api.add("events", {
            "metadata": {"name": f"{pod}.1"}, "type": "Warning", "reason": "BackOff",
            "message": "Back-off pulling image", "count": 3,
            "involvedObject": {"kind": "Pod", "name": pod, "namespace": RUNS},
            "lastTimestamp": "2030-01-01T00:00:00Z",
        }, RUNS)
        api.add("events", {  # about another pod: not this job's
            "metadata": {"name": "other.1"}, "reason": "Scheduled", "message": "x",
            "involvedObject": {"kind": "Pod", "name": "other", "namespace": RUNS},
        }, RUNS)
        events = client.get("ev").events
        mine = [e for e in events if e.reason == "BackOff"]
        assert len(mine) == 1 and mine[0].type == "Warning"
        assert pod in mine[0].message and "(x3)" in mine[0].message
        assert events[-1].reason == "BackOff"  # merged in time order with the job's own
        assert "Submitted" in [e.reason for e in events]
        assert not [e for e in events if "other" in e.message]
        client.cancel("ev")


def _imageless(name: str) -> dict[str, Any]:
    return {"name": name, "podSets": [{
        "name": "worker", "replicas": 1, "resources": {"cpu": "1"},
        "command": ["python", "train.py"],
    }]}


def test_pod_sets_without_an_image_run_on_the_default_image(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path
) -> None:
    api.add_node("cpu-1", cpu="8", memory="32Gi")
    api.autopilot = {"start_after": 0.1, "run_for": 0.2}
    with _control_plane(tmp_path, kubeconfig, "--default-image", DEFAULT_IMAGE) as client:
        client.submit(_imageless("plain"))
        record = client.wait("plain", timeout=30)
        assert record.status is JobStatus.SUCCEEDED, record
        created = [c.new for c in api.history if c.plural == "pods" and c.old is None and c.new]
        assert [p["spec"]["containers"][0]["image"] for p in created] == [DEFAULT_IMAGE]


def test_without_a_default_image_submit_refuses_a_pod_set_without_one(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path
) -> None:
    api.add_node("cpu-1", cpu="8", memory="32Gi")
    with _control_plane(tmp_path, kubeconfig) as client:
        answer = httpx.post(f"{client.url}/v1/jobs", json=_imageless("api"),
                            headers={"Authorization": f"Bearer {client.endpoint.token}"})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["field"] == "podSets[0].image"
        assert "--default-image" in error["fix"]

        job_file = tmp_path / "job.yaml"
        job_file.write_text(yaml.safe_dump(_imageless("cli")))
        done = subprocess.run(
            [*PHALANX, "--url", client.url, "--token", str(client.endpoint.token), "submit", "-f",
             str(job_file)], capture_output=True, text=True, timeout=60,
            env={**os.environ, "COLUMNS": "400"},
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "podSets[0].image" in done.stderr and "--default-image" in done.stderr

        assert client.list() == []  # nothing was queued
        assert not pods(api)
