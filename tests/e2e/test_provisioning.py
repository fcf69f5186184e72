"""Node pools bought for pending gangs, with the local provider: a real control plane in a
subprocess, real pods, real HTTP, a kill -9 in the middle."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import ControlPlane, py_job

pytestmark = pytest.mark.slow


def cloud_config(delay: str = "1s", first_stockout: object = False) -> str:
    """Two provisionable flavors (burst, then spare) of 1-CPU nodes, and a queue over them."""
    return f"""
kind: ResourceFlavor
name: burst
nodeLabels: {{pool: burst}}
provisioning:
  provider: local
  node: {{cpu: "1", memory: 1Gi}}
  maxNodes: 8
  pricePerNodeHour: 1.2
  options: {{delay: {delay}, stockout: {json.dumps(first_stockout)}}}
---
kind: ResourceFlavor
name: spare
nodeLabels: {{pool: spare}}
provisioning:
  provider: local
  node: {{cpu: "1", memory: 1Gi}}
  options: {{delay: {delay}}}
---
kind: ClusterQueue
name: cloud
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: burst
    resources: [{{name: cpu, nominalQuota: "8"}}, {{name: memory, nominalQuota: 16Gi}}]
  - name: spare
    resources: [{{name: cpu, nominalQuota: "8"}}, {{name: memory, nominalQuota: 16Gi}}]
---
kind: LocalQueue
name: cloud
clusterQueue: cloud
---
kind: ProvisioningPolicy
name: default
deletionCheckDelay: 1s
stockoutBlock: 10m
"""


def apply(plane: ControlPlane, text: str) -> None:
    applied = plane.api.post("/v1/config/apply",
                             json={"documents": list(yaml.safe_load_all(text))})
    assert applied.status_code == 200, applied.text


def gang(name: str, code: str = "pass") -> dict[str, Any]:
    """Four pods of one CPU each: no existing node of the queue's flavors holds them."""
    return py_job(name, code, replicas=4, queue="cloud",
                  pod_set={"resources": {"cpu": "1", "memory": "100Mi"}})


def pool_files(home: Path) -> list[str]:
    return sorted(p.stem for p in (home / "pools").glob("*.json"))


def node_names(plane: ControlPlane) -> set[str]:
    response = plane.api.get("/v1/nodes")
    assert response.status_code == 200, response.text
    body = response.json()
    items = body["items"] if isinstance(body, dict) else body
    return {n["name"] for n in items}


def wait_until(check: Any, timeout: float = 60, what: str = "") -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what or check}")


def admitted_nodes(job: dict[str, Any]) -> set[str]:
    return {n for ps in job["admission"]["podSets"] for n in ps["nodes"]}


def test_a_gang_that_fits_no_node_gets_a_pool_runs_and_the_pool_goes(plane: ControlPlane
                                                                    ) -> None:
    apply(plane, cloud_config())
    plane.submit(gang("train"))
    provisioning = wait_until(
        lambda: (j := plane.job("train")).get("pendingCode") == "Provisioning"
        and "node pool train-1" in j["pendingMessage"] and j, what="a Provisioning job")
    assert provisioning["status"] == "Queued"
    assert "node pool train-1 (burst, local): " in provisioning["pendingMessage"]
    job = plane.wait_for("train", "Succeeded", timeout=60)
    assert admitted_nodes(job) == {f"train-1-{i}" for i in range(4)}
    # Given back once the job ended and the deletion check passed twice.
    wait_until(lambda: not pool_files(plane.home), what="the pool's deletion")
    wait_until(lambda: not any(n.startswith("train-") for n in node_names(plane)),
               what="the pool's nodes to go")


def test_a_stockout_fails_over_to_the_next_flavor(plane: ControlPlane) -> None:
    apply(plane, cloud_config(first_stockout=True))
    plane.submit(gang("train"))
    job = plane.wait_for("train", "Succeeded", timeout=60)
    assert admitted_nodes(job) == {f"train-2-{i}" for i in range(4)}  # spare, attempt 2
    flavors = {f for ps in job["admission"]["podSets"] for f in ps["flavors"].values()}
    assert flavors == {"spare"}
    failed = [e for e in job["events"] if e["reason"] == "ProvisioningFailed"]
    assert len(failed) == 1 and "train-1 (burst) failed: Stockout" in failed[0]["message"]
    wait_until(lambda: not pool_files(plane.home), what="the pools' deletion")
    tried = plane.api.get("/v1/pools", params={"job": "train"}).json()["items"]
    assert [(p["name"], p["flavor"], p["error"], p["state"]) for p in tried] == [
        ("train-1", "burst", "Stockout", "Deleted"), ("train-2", "spare", "", "Deleted")]
    assert plane.api.get("/v1/pools").json()["items"] == []  # none live


def test_a_kill_9_while_provisioning_leaks_and_duplicates_no_pool(plane: ControlPlane) -> None:
    apply(plane, cloud_config(delay="4s"))
    plane.submit(gang("train", "import time; time.sleep(1)"))
    wait_until(lambda: pool_files(plane.home) == ["train-1"], what="the pool's request")
    plane.stop(signal.SIGKILL)  # mid-provisioning: the pool asked for, not Ready yet
    plane.start()
    job = plane.wait_for("train", "Succeeded", timeout=90)
    assert admitted_nodes(job) == {f"train-1-{i}" for i in range(4)}  # the same pool, adopted
    assert job["attempt"] == 1
    wait_until(lambda: not pool_files(plane.home), what="the pool's deletion")
    # The nodes leave the scheduler's inventory at the loop's next step after the pool's file.
    wait_until(lambda: not any(n.startswith("train-") for n in node_names(plane)),
               timeout=15, what="the pool's nodes gone from the inventory")


def one_flavor(options: str, policy: str = "", flavor_extra: str = "") -> str:
    return f"""
kind: ResourceFlavor
name: burst
nodeLabels: {{pool: burst}}
provisioning:
  provider: local
  node: {{cpu: "2", memory: 2Gi}}
  options: {options}
{flavor_extra}
---
kind: ClusterQueue
name: cloud
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: burst
    resources: [{{name: cpu, nominalQuota: "8"}}, {{name: memory, nominalQuota: 16Gi}}]
---
kind: LocalQueue
name: cloud
clusterQueue: cloud
---
kind: ProvisioningPolicy
name: default
deletionCheckDelay: 1s
retryBackoff: 1s
{policy}
"""


def test_a_configuration_error_fails_the_job_at_once_with_the_providers_message(
    plane: ControlPlane,
) -> None:
    apply(plane, one_flavor("{error: configuration}"))
    plane.submit(gang("train"))
    job = plane.wait_for("train", "Failed", timeout=30)
    assert "train-1 (burst) failed: ConfigurationError" in job["message"]
    assert "is refused for flavor burst" in job["message"]
    assert job["attempt"] == 0  # never placed
    wait_until(lambda: not pool_files(plane.home), what="no pool left")


def test_a_transient_error_is_retried_at_the_same_flavor_after_a_backoff(
    plane: ControlPlane,
) -> None:
    apply(plane, one_flavor("{error: transient, errorAttempts: [1]}"))
    plane.submit(gang("train"))
    job = plane.wait_for("train", "Succeeded", timeout=60)
    assert admitted_nodes(job) == {"train-2-0", "train-2-1"}  # burst again, attempt 2
    failed = [e["message"] for e in job["events"] if e["reason"] == "ProvisioningFailed"]
    assert len(failed) == 1 and "TransientError" in failed[0]
    wait_until(lambda: not pool_files(plane.home), what="the pool's deletion")


def test_a_request_over_the_operators_limit_waits_with_that_reason(plane: ControlPlane,
                                                                  tmp_path: Path) -> None:
    go = tmp_path / "go"
    apply(plane, one_flavor("{delay: 0s}", flavor_extra="  maxPools: 1"))
    wait = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
    plane.submit(gang("first", wait))
    plane.wait_for("first", "Running", timeout=30)
    plane.submit(gang("second"))
    waiting = wait_until(
        lambda: "maxPools" in ((j := plane.job("second")).get("pendingMessage") or "") and j,
        timeout=30, what="second to wait for the limit")
    assert waiting["status"] == "Queued"
    assert pool_files(plane.home) == ["first-1"]
    go.touch()
    job = plane.wait_for("second", "Succeeded", timeout=60)
    assert admitted_nodes(job) <= {f"second-{a}-{i}" for a in range(1, 9) for i in range(2)}
    wait_until(lambda: not pool_files(plane.home), what="the pools' deletion")


def test_a_pool_no_record_accounts_for_is_found_from_the_provider_and_deleted(
    plane: ControlPlane,
) -> None:
    apply(plane, cloud_config())
    plane.stop()
    # A pool the provider has (Ready, with nodes) that the store never heard of.
    request = {"name": "ghost-1", "job": "ghost", "attempt": 1, "flavor": "burst",
               "provider": "local", "nodeCount": 2, "node": {"cpu": 1000},
               "nodeLabels": {"pool": "burst"}, "nodeTaints": [], "podSets": [],
               "sliceSize": None, "pricePerNodeHour": 1.0, "options": {}}
    (plane.home / "pools").mkdir(exist_ok=True)
    (plane.home / "pools" / "ghost-1.json").write_text(json.dumps(
        {"request": request, "hash": "x", "createdAt": 0, "state": "Ready"}))
    plane.start()
    wait_until(lambda: not pool_files(plane.home), what="the leaked pool's deletion")
    assert not any(n.startswith("ghost-") for n in node_names(plane))


def pools_api(plane: ControlPlane) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = plane.api.get("/v1/pools").json()["items"]
    return items


def test_an_idle_pool_waits_its_ttl_for_the_next_job_of_the_same_shape(plane: ControlPlane
                                                                       ) -> None:
    apply(plane, one_flavor("{delay: 0s}", flavor_extra="  idleTTL: 3s"))
    plane.submit(gang("first"))
    plane.wait_for("first", "Succeeded", timeout=60)
    wait_until(lambda: [p["state"] for p in pools_api(plane)] == ["Idle"], timeout=30,
               what="the pool to wait, idle")
    plane.submit(gang("second"))
    job = plane.wait_for("second", "Succeeded", timeout=60)
    assert admitted_nodes(job) == {"first-1-0", "first-1-1"}  # the same pool, reused
    assert "PoolReused" in [e["reason"] for e in job["events"]]
    wait_until(lambda: not pool_files(plane.home), timeout=30, what="deletion after the TTL")
    assert [p["job"] for p in plane.api.get("/v1/pools", params={"job": "second"}).json()[
        "items"]] == ["second"]


def test_a_cleanup_that_keeps_failing_stops_failover_and_says_so(plane: ControlPlane) -> None:
    text = cloud_config().replace(
        "  options: {delay: 1s, stockout: false}",
        "  timeout: 1s\n  options: {delay: 10m, failDeletion: true}")
    apply(plane, text)
    plane.submit(gang("train"))
    job = wait_until(
        lambda: "keeps failing" in ((j := plane.job("train")).get("pendingMessage") or "") and j,
        timeout=60, what="the job to say its cleanup keeps failing")
    assert job["status"] == "Queued"
    assert "no further node pool is bought for this job" in job["pendingMessage"]
    assert pool_files(plane.home) == ["train-1"]  # the one that cannot go; no second pool
    reasons = [e["reason"] for e in job["events"]]
    assert "PoolCleanupFailing" in reasons and "ProvisioningFailed" in reasons
    time.sleep(2)
    assert pool_files(plane.home) == ["train-1"]
    tried = plane.api.get("/v1/pools", params={"job": "train"}).json()["items"]
    assert [(p["name"], p["error"], p["state"]) for p in tried] == [
        ("train-1", "Timeout", "Deleting")]


def test_a_provider_this_plane_cannot_drive_is_refused_at_apply_and_nothing_is_applied(
    plane: ControlPlane,
) -> None:
    before = plane.api.get("/v1/config").json()
    for provider in ("kubernetes-provisioningrequest", "simulated"):
        text = one_flavor("{}").replace("provider: local", f"provider: {provider}")
        refused = plane.api.post("/v1/config/apply",
                                 json={"documents": list(yaml.safe_load_all(text))})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["field"] == "documents[0] (ResourceFlavor burst).provisioning.provider"
        assert "the providers this control plane has: local" in error["message"]
        assert "nothing was applied" in error["message"]
        assert "local" in error["fix"]
        # All or nothing: the queue and the policy of the same request are not there either.
        assert plane.api.get("/v1/config").json() == before
    # The provider of the local plane is taken.
    apply(plane, one_flavor("{}"))
    kinds = {(d["kind"], d["name"]) for d in plane.api.get("/v1/config").json()["documents"]}
    assert {("ResourceFlavor", "burst"), ("ClusterQueue", "cloud")} <= kinds
