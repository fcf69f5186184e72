"""A real control plane in a subprocess, over real HTTP, for end-to-end tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml

from tests.leftovers import STARTUP_SECONDS, kill_pods_under, stop_process

REPO = Path(__file__).resolve().parents[2]
RUN_PODS_AS = str(os.geteuid())


def example_job(file: str) -> dict[str, Any]:
    """The job of ``examples/<file>`` as these tests post it, as JSON without an upload:
    its ``workdir`` (examples/) becomes the pods' absolute workingDir."""
    spec: dict[str, Any] = yaml.safe_load((REPO / "examples" / file).read_text())
    assert spec.pop("workdir", None) == "."
    for pod_set in spec["podSets"]:
        pod_set["workingDir"] = str(REPO / "examples")
    return spec


class ControlPlane:
    def __init__(self, home: Path, db: str | None = None, grace: float = 2.0) -> None:
        self.home = home
        self.db = db
        self.grace = grace
        self.proc: subprocess.Popen[bytes] | None = None
        self.http: httpx.Client | None = None

    def serve_args(self) -> str:
        """What this control plane passes ``serve`` besides its home, port and grace.

        Pods run as the test's own user, root included (said explicitly: a control
        plane running as root refuses to start pods as root otherwise).
        """
        return f"db={self.db!r}, run_as_user={RUN_PODS_AS!r}"

    def start(self) -> ControlPlane:
        (self.home / "server.json").unlink(missing_ok=True)
        code = (
            "from pathlib import Path; from phalanx.server import serve; "
            f"serve(home=Path({str(self.home)!r}), port=0, {self.serve_args()}, "
            f"grace_seconds={self.grace})"
        )
        log = open(self.home / "server.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=REPO, stdout=log, stderr=log,
            env={**os.environ, "PHALANX_HOME": str(self.home)},
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server died:\n" + (self.home / "server.log").read_text())
            info = self.home / "server.json"
            if info.exists():
                url = json.loads(info.read_text())["url"]
                token = (self.home / "token").read_text().strip()
                self.http = httpx.Client(
                    base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
                )
                try:
                    if self.http.get("/healthz").status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
            time.sleep(0.1)
        raise RuntimeError("server did not start:\n" + (self.home / "server.log").read_text())

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None
        if self.proc is not None:
            stop_process(self.proc, sig)
        self.proc = None

    # ------------------------------------------------------------------ helpers
    @property
    def api(self) -> httpx.Client:
        assert self.http is not None
        return self.http

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        response = self.api.post("/v1/jobs", json=spec)
        assert response.status_code == 201, response.text
        return response.json()

    def job(self, name: str) -> dict[str, Any]:
        response = self.api.get(f"/v1/jobs/{name}")
        assert response.status_code == 200, response.text
        return response.json()

    def wait_for(self, name: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.time() + timeout
        job = self.job(name)
        while time.time() < deadline:
            job = self.job(name)
            if job["status"] in statuses:
                return job
            time.sleep(0.1)
        # The pods' own output says where a job that never ended got stuck.
        response = self.api.get(f"/v1/jobs/{name}/logs", params={"tail": 40})
        raise AssertionError(f"{name} is {job['status']}, not {statuses}: {job}\n"
                             f"its logs:\n{response.text[-4000:]}")

    def logs(self, name: str, **params: Any) -> str:
        response = self.api.get(f"/v1/jobs/{name}/logs", params=params)
        assert response.status_code == 200, response.text
        return response.text


Plane = TypeVar("Plane", bound=ControlPlane)


@contextmanager
def running(cp: Plane) -> Iterator[Plane]:
    """``cp`` started in its home; stopped, with any pods it left killed, however the test
    ends."""
    cp.home.mkdir(parents=True, exist_ok=True)
    try:
        cp.start()
        yield cp
    finally:
        try:
            cp.stop()
        finally:
            kill_pods_under(cp.home)


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    with running(ControlPlane(tmp_path / "home")) as cp:
        yield cp


@pytest.fixture(scope="module")
def shared_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane for a module's tests whose jobs have names of their own and change
    nothing else (no configuration, no restart of the plane): the module starts one instead
    of one per test."""
    with running(ControlPlane(tmp_path_factory.mktemp("shared") / "home")) as cp:
        yield cp


@pytest.fixture(scope="module")
def refusing_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane for a module's tests whose every request is refused (or only
    reads): nothing is ever accepted on it, so each of them finds it as fresh as its own,
    and the module starts one instead of one per test. A test that submits a job that is
    accepted takes ``plane``."""
    with running(ControlPlane(tmp_path_factory.mktemp("refusing") / "home")) as cp:
        yield cp


def py_job(name: str, code: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    """A job whose pods run a Python snippet."""
    pod_set = {
        "name": "worker", "replicas": replicas, "resources": {"cpu": "100m"},
        "command": [sys.executable, "-c", code],
    }
    pod_set.update(extra.pop("pod_set", {}))
    return {"name": name, "podSets": [pod_set], **extra}


ONE_CPU_QUEUE = """
kind: ClusterQueue
name: small
preemption: {withinClusterQueue: LowerPriority}
resourceGroups:
- coveredResources: [cpu]
  flavors:
  - name: default
    resources: [{name: cpu, nominalQuota: "1"}]
---
kind: LocalQueue
name: small
clusterQueue: small
"""
"""A queue of one CPU whose higher-priority jobs preempt lower ones: room for one small job."""


def apply_one_cpu_queue(plane: ControlPlane) -> None:
    applied = plane.api.post("/v1/config/apply", json={"documents": list(yaml.safe_load_all(
        ONE_CPU_QUEUE))})
    assert applied.status_code == 200, applied.text
