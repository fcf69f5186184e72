"""Volumes through a worker: the job's volumes travel in the desired state, the worker's own
plane applies its rules at launch, and a volume it cannot honour is refused as a user error
whose reason names the field (a worker's plane first sees the job at launch)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.local import LocalPlane
from phalanx.spec.planes import DesiredAttempt, DesiredState, PlacementRefusal
from phalanx.spec.status import JobAdmission
from phalanx.worker.agent import Worker, WorkerOptions
from phalanx.worker.client import PlaneClient
from tests.compute.conftest import all_done, stop_everything, wait_pods

NODE = "worker-node"


def wanted(spec: dict[str, Any]) -> DesiredAttempt:
    return DesiredAttempt(
        job=spec["name"], attempt=1, epoch=1, spec=spec,
        admission=JobAdmission.model_validate({
            "clusterQueue": "default", "podSets": [{
                "name": "w", "count": 1, "flavors": {"cpu": "default"}, "nodes": [NODE]}]}))


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[Worker, LocalPlane]]:
    home = tmp_path / "home"
    plane = LocalPlane(home, node_name=NODE, gpus=[])
    key = tmp_path / "key"
    key.write_text("unused")  # (converge never calls the control plane)
    client = PlaneClient("http://127.0.0.1:9", "east", key)
    try:
        yield Worker(plane, client, tmp_path, WorkerOptions(compute="local")), plane
    finally:
        stop_everything(home)
        plane.close()


def refusals(worker: Worker) -> list[PlacementRefusal]:
    taken, worker._refusals = worker._refusals, []
    return taken


def test_a_volume_the_workers_plane_cannot_honour_is_refused_naming_the_field(
        worker: tuple[Worker, LocalPlane]) -> None:
    agent, plane = worker
    spec = {"name": "conf", "volumes": [{"name": "c", "configMap": {"name": "train"}}],
            "podSets": [{"name": "w", "command": ["true"],
                         "mounts": [{"name": "c", "mountPath": "/mnt"}]}]}
    agent.converge(DesiredState(version=1, attempts=[wanted(spec)]))
    [refusal] = refusals(agent)
    assert (refusal.job, refusal.error, refusal.failure) == ("conf", True, "user")
    assert "volumes[0].configMap" in refusal.reason
    assert "a ConfigMap is a Kubernetes object" in refusal.reason
    assert plane.observe() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a pod's own mount namespace needs root")
def test_the_volumes_travel_to_the_workers_pods(worker: tuple[Worker, LocalPlane],
                                                tmp_path: Path) -> None:
    agent, plane = worker
    host, data = tmp_path / "host", tmp_path / "data"
    host.mkdir()
    data.mkdir()
    (host / "in.txt").write_text("via the worker")
    code = ("import json, os, sys; s = os.statvfs('/dev/shm'); "
            "json.dump({'shm': s.f_blocks * s.f_frsize, 'in': open(sys.argv[1]).read()}, "
            "open(sys.argv[2], 'w'))")
    spec = {"name": "vols", "volumes": [{"name": "d", "hostPath": {"path": str(host)}}],
            "podSets": [{"name": "w", "shm": "256Mi",
                         "command": [sys.executable, "-c", code, str(data / "in.txt"),
                                     str(data / "out.json")],
                         "mounts": [{"name": "d", "mountPath": str(data)}]}]}
    agent.converge(DesiredState(version=1, attempts=[wanted(spec)]))
    assert refusals(agent) == []
    [pod] = wait_pods(plane, all_done)
    assert pod.exit_code == 0, plane.logs.path("vols", pod.ref.name).read_text()
    # Written through the mount, so it is in the host's directory, not at the mountPath.
    assert json.loads((host / "out.json").read_text()) == {"shm": 256 * 2**20,
                                                           "in": "via the worker"}
    assert list(data.iterdir()) == []
