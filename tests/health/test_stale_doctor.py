"""A doctor that stops reporting leaves its node degraded (WARN) until it reports again:
on the local plane (its doctor hangs in a site check) and on Kubernetes (the heartbeat
the node's doctor writes grows old)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from phalanx.compute.kubernetes.nodes import node_from
from phalanx.compute.local.plane import LocalPlane
from phalanx.spec.resources import NodeHealth


def _until(condition: Any, timeout: float = 20.0) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_local_doctor_stuck_in_a_check_turns_the_node_degraded_then_back(
        tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    release = tmp_path / "release"
    check = site / "slow"
    check.write_text(f"#!/bin/sh\nwhile [ ! -e {release} ]; do sleep 0.05; done\n"
                     "echo fabric fine\n")
    check.chmod(0o755)
    plane = LocalPlane(tmp_path / "home", gpus=[])
    try:
        plane.start_doctor(0.1, site_dir=site, stale_after=0.5)

        def node_health() -> tuple[NodeHealth, list[str]]:
            plane.observe()  # the control loop's step: where silence is noticed
            [node] = plane.inventory()
            return node.health, node.health_reasons

        _, reasons = _until(lambda: (h := node_health())[0] is NodeHealth.DEGRADED and h)
        assert reasons[0].startswith("DoctorSilent: the node doctor last reported")
        release.touch()  # the check returns; the doctor reports again
        _until(lambda: node_health()[0] is NodeHealth.HEALTHY)
    finally:
        release.touch()
        plane.close()


def _k8s_node(heartbeat: str, label: str = "PASS") -> dict[str, Any]:
    return {
        "metadata": {"name": "gpu-1", "labels": {"phalanx.dev/health": label}},
        "status": {"allocatable": {"cpu": "8"}, "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PhalanxHealthy", "status": "True", "reason": "ChecksPassed",
             "lastHeartbeatTime": heartbeat}]},
    }


def test_a_kubernetes_node_whose_doctor_heartbeat_is_old_is_degraded() -> None:
    now = 1_800_000_000.0
    heartbeat = 1_799_999_900.0  # 100 s before now
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(heartbeat))
    fresh = _k8s_node(stamp)
    assert node_from(fresh, now=now, stale_after=300).health is NodeHealth.HEALTHY
    old = node_from(fresh, now=now + 400, stale_after=300)
    assert old.health is NodeHealth.DEGRADED
    assert old.health_reasons[0].startswith("DoctorSilent: the node doctor last reported 500s")
    # An unhealthy node stays unhealthy; a node without a doctor is never stale.
    sick = _k8s_node(stamp, label="ERR")
    assert node_from(sick, now=now + 400, stale_after=300).health is NodeHealth.UNHEALTHY
    plain = {"metadata": {"name": "cpu-1"}, "status": {"allocatable": {"cpu": "8"},
             "conditions": [{"type": "Ready", "status": "True"}]}}
    assert node_from(plain, now=now + 10**6, stale_after=300).health is NodeHealth.HEALTHY
