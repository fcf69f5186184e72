"""A control plane with no plane of its own (``--no-local-plane``) and no queues applied:
the built-in default queue's quota follows the nodes of the workers that join, so a job
submitted to it runs once a worker with room has joined; once queues are applied, they are
the user's and stay as applied. A flavor whose pools it cannot buy is refused up front."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.planes.harness import Federation, wait_until

pytestmark = pytest.mark.timeout(180)

NODES = "nodes:\n" + "".join(
    f"  - {{name: n{i}, allocatable: {{cpu: 8, memory: 64Gi, pods: 110}}}}\n"
    for i in range(2))


def default_quota(fed: Federation) -> dict[str, str]:
    """The nominal quota of ClusterQueue default, by resource."""
    documents = fed.api().get("/v1/config").json()["documents"]
    cq = next(d for d in documents if d["kind"] == "ClusterQueue" and d["name"] == "default")
    return {r["name"]: r["nominalQuota"] for group in cq["resourceGroups"]
            for flavor in group["flavors"] for r in flavor["resources"]}


def test_the_default_queue_follows_the_nodes_of_joining_workers(tmp_path: Path) -> None:
    (tmp_path / "nodes.yaml").write_text(NODES)
    compute = ["--compute", "simulated", "--nodes", str(tmp_path / "nodes.yaml")]
    job: dict[str, Any] = {"name": "early", "queue": "default", "podSets": [{
        "name": "main", "replicas": 2, "resources": {"cpu": "8"}}]}
    with Federation(tmp_path, queues=False) as fed:
        assert default_quota(fed)["cpu"] == "0"  # no nodes yet
        # Accepted: a worker may bring the nodes.
        fed.submit(job)
        waiting = wait_until(lambda: (j := fed.job("early"))["pendingMessage"] and j,
                             what="early's pending reason")
        assert waiting["status"] == "Queued"
        # A resource no node has yet: accepted too, and it waits with a reason.
        fed.submit({"name": "gpus", "queue": "default", "podSets": [{
            "name": "main", "replicas": 1, "resources": {"cpu": "1", "nvidia.com/gpu": "1"}}]})
        wait_until(lambda: fed.job("gpus")["pendingMessage"], what="gpus' pending reason")

        fed.start_worker("gcp-a", "--fence-after", "5s", compute=compute)
        running = fed.wait_status("early", "Running")
        assert running["plane"] == "gcp-a"
        assert default_quota(fed)["cpu"] == "16"
        assert default_quota(fed)["pods"] == "220"
        gpus = fed.job("gpus")
        assert gpus["status"] == "Queued" and gpus["pendingMessage"]  # still no GPU node
        fed.start_worker("onprem", "--fence-after", "5s", compute=compute)
        wait_until(lambda: default_quota(fed)["cpu"] == "32", what="the quota to follow onprem")

        # Applied queues are the user's: a plane leaving changes them no more.
        applied = fed.api().post("/v1/config/apply", json={"documents": [{
            "kind": "ClusterQueue", "name": "default", "resourceGroups": [{
                "coveredResources": ["cpu", "memory", "pods"], "flavors": [{
                    "name": "default", "resources": [
                        {"name": "cpu", "nominalQuota": "20"},
                        {"name": "memory", "nominalQuota": "1Ti"},
                        {"name": "pods", "nominalQuota": "100"}]}]}]}]})
        assert applied.status_code == 200, applied.text
        fed.api().post("/v1/planes/onprem/cordon", json={"cordoned": True})
        assert fed.api().delete("/v1/planes/onprem").status_code == 200
        wait_until(lambda: len(fed.api().get("/v1/nodes").json()["items"]) == 2,
                   what="onprem's nodes to leave")
        assert default_quota(fed)["cpu"] == "20"
        for name in ("early", "gpus"):
            fed.api().post(f"/v1/jobs/{name}/cancel")


def test_no_plane_of_its_own_buys_no_pools_and_apply_says_so(tmp_path: Path) -> None:
    flavor = {"kind": "ResourceFlavor", "name": "burst", "nodeLabels": {"pool": "burst"},
              "provisioning": {"provider": "local", "node": {"cpu": "2"}}}
    with Federation(tmp_path) as fed:
        before = fed.api().get("/v1/config").json()
        refused = fed.api().post("/v1/config/apply", json={"documents": [
            {"kind": "LocalQueue", "name": "other", "clusterQueue": "default"}, flavor]})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["field"] == "documents[1] (ResourceFlavor burst).provisioning.provider"
        assert "--no-local-plane" in error["message"]
        assert "the providers this control plane has: none" in error["message"]
        assert error["fix"].startswith("remove provisioning from the flavor")
        assert fed.api().get("/v1/config").json() == before  # the LocalQueue was not applied
