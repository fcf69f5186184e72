"""Node pools bought for a plane behind a worker: a `phalanx worker --compute local` offers
the local provider, a flavor pinned to its plane buys a pool there for a pending gang, the
gang runs on the pool's nodes, and the pool is deleted once its idle TTL passes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.planes.harness import Federation, job_spec, wait_until

pytestmark = pytest.mark.timeout(180)

CONFIG = """
kind: ResourceFlavor
name: east-burst
nodeLabels: {phalanx.dev/plane: east, pool: burst}
provisioning:
  provider: local
  node: {cpu: "1", memory: 1Gi}
  idleTTL: 3s
  options: {delay: 1s}
---
kind: ClusterQueue
name: default
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: east-burst
    resources: [{name: cpu, nominalQuota: "4"}, {name: memory, nominalQuota: 8Gi}]
---
kind: LocalQueue
name: default
clusterQueue: default
---
kind: ProvisioningPolicy
name: default
deletionCheckDelay: 1s
"""


@pytest.fixture(scope="module")
def east(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    with Federation(tmp_path_factory.mktemp("pools"), queues=False) as federation:
        federation.start_worker("east", "--fence-after", "4s")
        yield federation


def apply(federation: Federation, text: str) -> tuple[int, dict[str, Any]]:
    with federation.api() as api:
        answer = api.post("/v1/config/apply",
                          json={"documents": list(yaml.safe_load_all(text))})
        return answer.status_code, answer.json()


@pytest.mark.parametrize(("plane", "provider", "says"), [
    ("west", "local", "there is no compute plane west"),
    ("east", "kubernetes-provisioningrequest",
     "the worker of compute plane east does not offer provider kubernetes-provisioningrequest"),
])
def test_a_flavor_whose_plane_cannot_buy_its_pools_is_refused_whole(
        east: Federation, plane: str, provider: str, says: str) -> None:
    text = CONFIG.replace("phalanx.dev/plane: east", f"phalanx.dev/plane: {plane}").replace(
        "provider: local", f"provider: {provider}").replace("  options: {delay: 1s}\n", "")
    status, body = apply(east, text)
    assert status == 400, body
    assert says in body["error"]["message"] and "nothing was applied" in body["error"]["message"]
    assert body["error"]["field"] == ("documents[0] (ResourceFlavor east-burst)"
                                      ".provisioning.provider")


def test_a_gang_gets_a_pool_on_the_workers_plane_runs_there_and_the_pool_goes(
        east: Federation) -> None:
    federation, worker = east, east.workers["east"]
    status, body = apply(federation, CONFIG)
    assert status == 200, body
    # Two pods of one CPU each: the worker's machine node is not of the flavor.
    federation.submit(job_spec("train", "import time; time.sleep(3)", replicas=2,
                               cpu="1", selector={"pool": "burst"}))
    pool_dir = worker.state_dir / "pools"
    # The worker's local provider made the pool, in the worker's own state directory.
    wait_until(lambda: (pool_dir / "train-1.json").exists(), timeout=60,
               what="the worker to make the pool:\n" + worker.log())
    job = federation.wait_status("train", "Succeeded", timeout=90)
    nodes = {n for ps in job["admission"]["podSets"] for n in ps["nodes"]}
    assert nodes == {"east.train-1-0", "east.train-1-1"}, worker.log()
    with federation.api() as api:
        def pools() -> dict[str, str]:
            items = api.get("/v1/pools").json()["items"]
            return {p["name"]: p["state"] for p in items}
        assert pools()["train-1"] in ("Ready", "Idle")
        wait_until(lambda: pools().get("train-1") == "Idle", timeout=30,
                   what="the pool to be kept idle")
        # Idle for its TTL, then deleted on the worker, and its nodes leave the plane.
        wait_until(lambda: not list(pool_dir.glob("*.json")), timeout=60,
                   what="the worker to delete the pool:\n" + worker.log())
        wait_until(lambda: not any(n["name"].startswith("east.train-1")
                                   for n in api.get("/v1/nodes").json()["items"]),
                   timeout=30, what="the pool's nodes to go")
        wait_until(lambda: pools().get("train-1") in (None, "Deleted"), timeout=30,
                   what="the pool's record to read Deleted")
