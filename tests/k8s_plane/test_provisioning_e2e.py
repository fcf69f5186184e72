"""`phalanx up --compute kubernetes` in a subprocess buys node pools for gangs through
ProvisioningRequests, served by a small fake cluster autoscaler in the test process."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.sdk import Client
from phalanx.spec.status import JobStatus
from tests.k8s_plane.conftest import RUNS, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.fake_autoscaler import FakeAutoscaler, NodeGroup
from tests.k8s_plane.helpers import IMAGE, pods
from tests.k8s_plane.test_end_to_end import _up, _wait_for_server
from tests.leftovers import stop_process

pytestmark = pytest.mark.slow

CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"


def _config(timeout: str = "15m") -> list[dict[str, Any]]:
    """Two flavors whose pools are asked of the autoscaler, burst first, then spare."""
    text = f"""
kind: ResourceFlavor
name: burst
nodeLabels: {{pool: burst}}
provisioning:
  provider: kubernetes-provisioningrequest
  node: {{cpu: "8", memory: 32Gi}}
  timeout: {timeout}
  options: {{className: best-effort-atomic-scale-up.autoscaling.x-k8s.io}}
---
kind: ResourceFlavor
name: spare
nodeLabels: {{pool: spare}}
provisioning:
  provider: kubernetes-provisioningrequest
  node: {{cpu: "8", memory: 32Gi}}
---
kind: ClusterQueue
name: cloud
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: burst
    resources: [{{name: cpu, nominalQuota: "64"}}, {{name: memory, nominalQuota: 256Gi}}]
  - name: spare
    resources: [{{name: cpu, nominalQuota: "64"}}, {{name: memory, nominalQuota: 256Gi}}]
---
kind: LocalQueue
name: cloud
clusterQueue: cloud
---
kind: ProvisioningPolicy
name: default
deletionCheckDelay: 1s
retryBackoff: 1s
retryBackoffMax: 2s
stockoutBlock: 10m
"""
    return list(yaml.safe_load_all(text))


def _gang(name: str = "train") -> dict[str, Any]:
    """Four pods of 4 CPUs: two 8-CPU nodes hold them, and there is no node at all."""
    return {"name": name, "queue": "cloud", "podSets": [{
        "name": "worker", "replicas": 4, "image": IMAGE,
        "resources": {"cpu": "4", "memory": "8Gi"}, "command": ["python", "train.py"]}]}


class Cluster:
    """The control plane in a subprocess, restartable (kill -9 included)."""

    def __init__(self, api: FakeAPIServer, kubeconfig: Path, home: Path) -> None:
        self.api, self.kubeconfig, self.home = api, kubeconfig, home
        home.mkdir(exist_ok=True)
        self.client: Client
        self.start()

    def kill(self) -> None:
        stop_process(self.proc, signal.SIGKILL)
        (self.home / "server.json").unlink(missing_ok=True)

    def start(self) -> None:
        self.proc = _up(self.home, self.kubeconfig)
        try:
            self.client = _wait_for_server(self.proc, self.home)
        except BaseException:
            stop_process(self.proc)  # a start that failed leaves nothing running
            raise

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture
def cluster(api: FakeAPIServer, kubeconfig: Path, tmp_path: Path) -> Iterator[Cluster]:
    found = Cluster(api, kubeconfig, tmp_path / "home")
    try:
        found.client.apply(_config())
        yield found
    finally:
        found.stop()


def _requests(api: FakeAPIServer) -> list[str]:
    return [r["metadata"]["name"] for r in api.list("provisioningrequests", RUNS)]


def _pending(client: Client, name: str) -> str:
    record = client.get(name)
    return f"{record.pending_code}: {record.pending_message}"


def test_a_gang_that_fits_no_node_gets_its_request_runs_and_the_request_goes(
    api: FakeAPIServer, cluster: Cluster
) -> None:
    api.autopilot = {"start_after": 0.2, "run_for": 0.5}
    scaler = FakeAutoscaler(api, RUNS, NodeGroup(cpu="8", memory="32Gi"), delay=0.5).start()
    try:
        cluster.client.submit(_gang())
        wait_until(lambda: "Provisioning" in _pending(cluster.client, "train"), 20,
                   "the job to show Provisioning")
        record = cluster.client.wait("train", timeout=60)
        assert record.status is JobStatus.SUCCEEDED, record
        made = [c.new for c in api.history if c.plural == "pods" and c.old is None and c.new]
        assert len(made) == 4
        assert {p["metadata"]["annotations"][CONSUME] for p in made} == {"train-1"}
        assert {p["spec"]["nodeName"] for p in made if p["spec"].get("nodeName")} <= \
            {"train-1-node-0", "train-1-node-1"}
        # The request (and its templates) are deleted once the job ended, and the
        # autoscaler scales the nodes down.
        wait_until(lambda: not _requests(api), 30, "the request's deletion")
        assert not api.list("podtemplates", RUNS)
        wait_until(lambda: not api.list("nodes"), 10, "the scale-down")
        assert scaler.created == 1
    finally:
        scaler.stop()


def test_a_failed_request_is_retried_with_a_new_request(
    api: FakeAPIServer, cluster: Cluster
) -> None:
    api.autopilot = {"start_after": 0.2, "run_for": 0.3}
    scaler = FakeAutoscaler(api, RUNS, NodeGroup(), delay=0.3,
                            decide=lambda name, _: "fail" if name == "train-1" else "provision")
    scaler.start()
    try:
        cluster.client.submit(_gang())
        record = cluster.client.wait("train", timeout=60)
        assert record.status is JobStatus.SUCCEEDED, record
        assert {p["metadata"]["annotations"][CONSUME] for p in pods(api, "train")} <= {"train-2"}
        events = [e.message for e in cluster.client.events("train")]
        assert any("the cloud refused to create the VMs" in m for m in events), events
        assert sorted(scaler.seen) == ["train-1", "train-2"]  # the failed one, one retry
    finally:
        scaler.stop()


def test_capacity_not_found_waits_then_times_out_and_fails_over(
    api: FakeAPIServer, cluster: Cluster
) -> None:
    cluster.client.apply(_config(timeout="4s"))
    api.autopilot = {"start_after": 0.2, "run_for": 0.3}
    scaler = FakeAutoscaler(
        api, RUNS, NodeGroup(), delay=0.2,
        decide=lambda _, selector: "stockout" if selector.get("pool") == "burst" else "provision")
    scaler.start()
    try:
        cluster.client.submit(_gang())
        # Provisioned=False with CapacityIsNotFound is still trying: the job waits on it.
        wait_until(lambda: "CapacityIsNotFound" in _pending(cluster.client, "train"), 20,
                   "the autoscaler's answer in the pending reason")
        assert _requests(api) == ["train-1"]
        record = cluster.client.wait("train", timeout=60)
        assert record.status is JobStatus.SUCCEEDED, record
        assert sorted(scaler.seen) == ["train-1", "train-2"]
        spare = api.get("provisioningrequests", "train-2", RUNS)
        assert spare is None or spare["metadata"]["labels"]["phalanx.dev/job"] == "train"
        events = [e.message for e in cluster.client.events("train")]
        assert any("Timeout" in m and "train-1" in m for m in events), events
    finally:
        scaler.stop()


@pytest.mark.parametrize("nodes_up_while_down", [False, True])
def test_kill_9_mid_provisioning_leaves_no_duplicate_request(
    api: FakeAPIServer, cluster: Cluster, nodes_up_while_down: bool
) -> None:
    """Killed right after its request was created. Restarted before the nodes come up, the
    control plane adopts the request; restarted after, it may place the gang on the new
    nodes before it adopts the request, and must then keep the request, not collect it."""
    api.autopilot = {"start_after": 0.2, "run_for": 0.3}
    scaler = FakeAutoscaler(api, RUNS, NodeGroup(), delay=1.0 if nodes_up_while_down else 4.0)
    scaler.start()
    try:
        cluster.client.submit(_gang())
        wait_until(lambda: _requests(api) == ["train-1"], 20, "the request")
        cluster.kill()
        if nodes_up_while_down:
            wait_until(lambda: len([n for n in api.list("nodes") if all(
                c["status"] == "True" for c in n["status"]["conditions"])]) == 2, 20,
                "the nodes Ready")
        cluster.start()
        record = cluster.client.wait("train", timeout=60)
        assert record.status is JobStatus.SUCCEEDED, record
        assert record.attempt == 1  # ran once, on the pool's nodes, with no node lost
        assert scaler.created == 1  # the restarted control plane kept its request
        assert api.count("POST", f"/apis/autoscaling.x-k8s.io/v1/namespaces/{RUNS}/"
                         "provisioningrequests", 201) == 1
        wait_until(lambda: not _requests(api), 30, "the request's deletion")
        wait_until(lambda: not api.list("nodes"), 10, "the scale-down")
    finally:
        scaler.stop()


def test_capacity_revoked_evicts_a_running_job(api: FakeAPIServer, cluster: Cluster) -> None:
    api.autopilot = {"start_after": 0.2, "run_for": 120}
    scaler = FakeAutoscaler(api, RUNS, NodeGroup(), delay=0.3).start()
    try:
        cluster.client.submit(_gang())
        wait_until(lambda: cluster.client.get("train").status is JobStatus.RUNNING, 60,
                   "the job to run")
        api.autopilot = {"start_after": 0.2, "run_for": 0.3}  # the next attempt finishes
        scaler.revoke("train-1")
        record = cluster.client.wait("train", timeout=60)
        assert record.status is JobStatus.SUCCEEDED, record
        events = [e.message for e in cluster.client.events("train")]
        assert any("evicted" in m and "capacity revoked" in m for m in events), events
        assert "train-2" in scaler.seen  # a new pool for the next attempt
        assert record.attempt >= 2
    finally:
        scaler.stop()

