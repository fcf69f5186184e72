"""A local Ray cluster listens on the plane's pod network only: real Ray nodes, real sockets.

The local plane gives its pods loopback addresses; every port the head and worker nodes
open (GCS, raylets, client server, dashboard and its agents, runtime-env agents) must be
on loopback, never on 0.0.0.0/:: or the machine's external address.
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from phalanx.compute.base import PodPhase, PodState
from phalanx.compute.local import LocalPlane
from phalanx.spec.resources import JobSpec
from tests.compute.conftest import NODE, admit, wait_pods

pytest.importorskip("ray")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
READY_SECONDS = 240.0


def loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def listeners(sessions: set[int]) -> dict[tuple[str, str, int], str]:
    """(ip, port) of every listening socket of the processes of ``sessions``, by process."""
    found: dict[tuple[str, str, int], str] = {}
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) not in sessions:
                continue
            for conn in process.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found[(process.name(), conn.laddr.ip, conn.laddr.port)] = process.name()
        except (psutil.Error, ProcessLookupError):
            continue
    return found


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[LocalPlane]:
    local = LocalPlane(tmp_path / "home", node_name=NODE, gpus=[])
    try:
        yield local
    finally:
        for pod in local.observe():
            local.terminate(pod.ref.job, pod.ref.attempt, grace_seconds=15)
        wait_pods(local, lambda pods: all(p.phase.done for p in pods), timeout=60)
        local.close()


def test_every_port_of_a_local_ray_cluster_is_on_loopback(plane: LocalPlane) -> None:
    job = JobSpec.model_validate({"name": "raynet", "kind": "ray", "podSets": [
        {"name": "head", "replicas": 1, "resources": {"cpu": "1", "memory": "1Gi"}},
        {"name": "worker", "replicas": 1, "resources": {"cpu": "1", "memory": "1Gi"}}]})
    plane.launch(job, 1, admit(job))

    def up(pods: list[PodState]) -> bool:
        assert not any(p.phase.done for p in pods), pods
        return len(pods) == 2 and all(p.phase is PodPhase.RUNNING for p in pods)

    pods = wait_pods(plane, up)
    sessions = {os.getsid(p.pid) for p in pods if p.pid is not None}
    # Both nodes are up once each has its raylet listening (the worker's joined the head).
    deadline = time.monotonic() + READY_SECONDS
    while True:
        found = listeners(sessions)
        raylets = {os.getsid(p.pid) for p in psutil.process_iter(["name"])
                   if p.info.get("name") == "raylet" and _in(p, sessions)}
        if {name for name, _, _ in found} >= {"gcs_server", "raylet"} and raylets == sessions:
            break
        assert time.monotonic() < deadline, f"the Ray nodes never came up: {found}"
        time.sleep(1)
    time.sleep(5)  # the agents the raylets start open their ports a little later
    found = listeners(sessions)
    outside = sorted(key for key in found if not loopback(key[1]))
    assert not outside, f"listening beyond loopback: {outside}"
    assert len(found) >= 10, found  # the GCS, raylets, agents, dashboard, client server


def _in(process: psutil.Process, sessions: set[int]) -> bool:
    try:
        return os.getsid(process.pid) in sessions
    except ProcessLookupError:
        return False
