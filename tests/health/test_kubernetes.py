"""Node health on Kubernetes, over the fake API server (real HTTP): the doctor writes its
report on its own Node; the control plane reads it back, and requeues the gangs of
unhealthy and lost nodes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from phalanx.spec.resources import NodeHealth
from tests.health.conftest import FakeNVML
from tests.k8s_plane.conftest import PlaneFactory, api, kubeconfig, make_plane, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import IMAGE
from tests.k8s_plane.test_end_to_end import _control_plane

__all__ = ["api", "kubeconfig", "make_plane"]


def _doctor(nvml: FakeNVML, kubeconfig: Path, node: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "phalanx.cli", "doctor", "--once", "--json", "--node", node,
         "--report", "kubernetes", "--kubeconfig", str(kubeconfig),
         "--site-dir", str(nvml.config.parent / "no-site")],
        env=nvml.env(), capture_output=True, text=True, timeout=60)


def test_the_doctor_reports_on_its_node_and_the_plane_reads_it(
    api: FakeAPIServer, kubeconfig: Path, make_plane: PlaneFactory, nvml: FakeNVML,
) -> None:
    api.add_node("gpu-1", gpus=2)
    nvml.add(2)
    done = _doctor(nvml, kubeconfig, "gpu-1")
    assert done.returncode == 0, done.stderr
    obj = api.get("nodes", "gpu-1")
    assert obj is not None
    assert obj["metadata"]["labels"]["phalanx.dev/health"] == "PASS"
    conditions = {c["type"]: c for c in obj["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "True"  # merged by type, not replaced
    assert (conditions["PhalanxHealthy"]["status"],
            conditions["PhalanxHealthy"]["reason"]) == ("True", "ChecksPassed")
    checks = json.loads(obj["metadata"]["annotations"]["phalanx.dev/checks"])
    assert {c["name"]: c["status"] for c in checks}["gpu-count"] == "PASS"

    plane = make_plane()
    assert plane.inventory()[0].health is NodeHealth.HEALTHY
    nvml.gpus[1].settings["ecc_volatile"] = 3
    done = _doctor(nvml, kubeconfig, "gpu-1")
    assert done.returncode == 1
    node = wait_until(lambda: (n := plane.inventory()[0]).health is NodeHealth.UNHEALTHY and n)
    assert node.health_reasons == [
        "gpu-ecc: GPU 1: 3 uncorrectable ECC error(s) since the last reset"]
    assert {c.name: c.status.value for c in node.checks}["gpu-ecc"] == "ERR"
    condition = next(c for c in api.get("nodes", "gpu-1")["status"]["conditions"]
                     if c["type"] == "PhalanxHealthy")
    assert (condition["status"], condition["reason"]) == ("False", "ChecksFailed")
    # What the doctor did to the API is exactly what its RBAC grants: nodes get and patch,
    # nodes/status patch.
    assert {(m, p) for m, p, _ in api.requests if "/nodes/gpu-1" in p} == {
        ("GET", "/api/v1/nodes/gpu-1"), ("PATCH", "/api/v1/nodes/gpu-1"),
        ("PATCH", "/api/v1/nodes/gpu-1/status")}


def test_the_doctor_expects_the_gpus_the_node_advertises(
    api: FakeAPIServer, kubeconfig: Path, nvml: FakeNVML,
) -> None:
    api.add_node("gpu-1", gpus=8)
    nvml.add(7)
    done = _doctor(nvml, kubeconfig, "gpu-1")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    count = next(c for c in report["checks"] if c["name"] == "gpu-count")
    assert count["message"] == "7 of 8 GPU(s) visible"
    assert api.get("nodes", "gpu-1")["metadata"]["labels"]["phalanx.dev/health"] == "ERR"


def _job(name: str) -> dict:
    return {"name": name, "podSets": [{"name": "worker", "replicas": 1, "image": IMAGE,
                                       "command": ["train"], "resources": {"cpu": "6"}}]}


def test_a_lost_node_requeues_its_gang_onto_a_healthy_one(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path,
) -> None:
    api.add_node("node-a")
    api.add_node("node-b")
    api.autopilot = {"start_after": 0.1, "run_for": 600}
    with _control_plane(tmp_path, kubeconfig, "--node-lost-grace", "1s") as client:
        client.submit(_job("ddp"))
        first = wait_until(lambda: (j := client.get("ddp")).status.value == "Running" and j,
                           timeout=30)
        node = first.admission.pod_sets[0].nodes[0]
        other = "node-b" if node == "node-a" else "node-a"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        api.update("nodes", node, {"status": {"conditions": [{
            "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.", "lastTransitionTime": now}]}})
        again = wait_until(lambda: (j := client.get("ddp")).attempt == 2
                           and j.status.value == "Running" and j, timeout=30)
        assert again.admission.pod_sets[0].nodes == [other]
        assert (again.system_restarts, again.user_restarts) == (1, 0)
        stop = next(e for e in again.events if e.reason == "NodeUnhealthy")
        assert f"node {node} is unhealthy (NodeLost: NodeStatusUnknown" in stop.message
        lost = {n.name: n for n in client.nodes()}[node]
        assert lost.lost and lost.health.value == "unhealthy"
        # The pods on the lost node were deleted (with grace 0: its kubelet cannot stop them).
        assert api.count("DELETE", r"/api/v1/namespaces/runs/pods/ddp-.*") >= 1
