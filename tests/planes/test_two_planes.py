"""One control plane, two local compute planes behind workers: gangs land on both, a gang
too big for either stays pending, quotas count across clusters, bad keys change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.planes.harness import Federation, job_spec, wait_until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    # Quota of 3 CPUs in all: two 1.5-CPU gangs fit it, not three.
    with Federation(tmp_path_factory.mktemp("two"), cpu="3") as federation:
        federation.start_worker("east", "--fence-after", "4s")
        federation.start_worker("west", "--fence-after", "4s")
        yield federation


def test_gangs_land_on_both_planes_and_quota_counts_across(two: Federation) -> None:
    # Each machine-sized plane has 2 CPUs: a 1.5-CPU gang leaves no room for a second.
    hold = "import time; time.sleep(60)"
    for name in ("g1", "g2", "g3"):
        two.submit(job_spec(name, hold, replicas=3, cpu="500m"))
    first = two.wait_status("g1", "Running")
    second = two.wait_status("g2", "Running")
    planes = {first["admission"]["podSets"][0]["nodes"][0].split(".")[0],
              second["admission"]["podSets"][0]["nodes"][0].split(".")[0]}
    assert planes == {"east", "west"}  # one gang on each, none split across them
    for job in (first, second):
        nodes = {n.split(".")[0] for n in job["admission"]["podSets"][0]["nodes"]}
        assert len(nodes) == 1
    # The third fits a plane's nodes nowhere and the team's quota (3 CPUs) is used up
    # across both clusters.
    third = wait_until(lambda: (j := two.job("g3"))["pendingMessage"] and j,
                       what="g3's pending reason")
    assert third["status"] == "Queued"
    listed = {p["name"]: p for p in two.api().get("/v1/planes").json()["planes"]}
    assert listed["east"]["jobs"] and listed["west"]["jobs"]
    for name in ("g1", "g2", "g3"):
        two.api().post(f"/v1/jobs/{name}/cancel")
    for name in ("g1", "g2", "g3"):
        two.wait_status(name, "Cancelled")


def test_gang_too_big_for_either_plane_stays_pending_with_the_reason(two: Federation) -> None:
    # 3 CPUs in all: fits both planes together (4 CPUs), never one (2 CPUs).
    two.submit(job_spec("wide", "print(1)", replicas=3, cpu="1"))
    job = wait_until(lambda: "compute plane" in ((j := two.job("wide"))["pendingMessage"]
                                                 or "") and j, what="wide's pending reason")
    assert job["status"] == "Queued"
    assert "within one compute plane" in job["pendingMessage"]
    assert "cluster" in job["pendingMessage"]
    two.api().post("/v1/jobs/wide/cancel")


def test_logs_and_exit_codes_come_through_the_worker(two: Federation) -> None:
    two.submit(job_spec("echo", "import os; print('epoch', os.environ['PHALANX_EPOCH'])"))
    done = two.wait_status("echo", "Succeeded")
    assert done["attempt"] == 1
    logs = two.api().get("/v1/jobs/echo/logs").text
    assert "epoch 1" in logs
    two.submit(job_spec("fails", "raise SystemExit(3)"))
    failed = two.wait_status("fails", "Failed")
    assert failed["exitCode"] == 3


def test_wrong_and_foreign_and_revoked_keys_are_refused(two: Federation,
                                                       tmp_path: Path) -> None:
    url = two.server.url
    assert httpx.post(f"{url}/v1/auth/token", json={"key": "phx_000000000000_" + "x" * 40}
                      ).status_code == 401
    east_key = (two.root / "east.key").read_text().strip()
    token = httpx.post(f"{url}/v1/auth/token", json={"key": east_key}).json()["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    before = two.plane("west")
    report = {"worker": "intruder", "nodes": [], "pods": []}
    assert httpx.post(f"{url}/v1/planes/west/report", json=report,
                      headers=bearer).status_code == 403
    assert httpx.get(f"{url}/v1/jobs", headers=bearer).status_code == 403
    assert httpx.get(f"{url}/v1/planes", headers=bearer).status_code == 403
    after = two.plane("west")
    assert after["nodes"] == before["nodes"] and after["worker"] == before["worker"]
    # A revoked key: its token is refused at once, and nothing it reports is taken.
    key_file = two.add_plane("spare")
    spare = key_file.read_text().strip()
    spare_token = httpx.post(f"{url}/v1/auth/token", json={"key": spare}).json()["token"]
    spare_id = spare.split("_")[1]
    with two.api() as api:
        assert api.delete(f"/v1/keys/{spare_id}").status_code == 200
    answer = httpx.post(f"{url}/v1/planes/spare/report", json=report,
                        headers={"Authorization": f"Bearer {spare_token}"})
    assert answer.status_code == 401
    assert two.plane("spare")["nodes"] == 0
    assert httpx.post(f"{url}/v1/auth/token", json={"key": spare}).status_code == 401


def test_metrics_and_node_list_show_each_nodes_plane(two: Federation) -> None:
    metrics = httpx.get(f"{two.server.url}/metrics").text
    assert 'phalanx_node_plane{node="east.' in metrics
    assert 'plane="west"' in metrics
    with two.api() as api:
        nodes = api.get("/v1/nodes").json()
    items = nodes["items"] if isinstance(nodes, dict) else nodes
    planes = {n["labels"]["phalanx.dev/plane"] for n in items}
    assert planes == {"east", "west"}


def test_a_worker_whose_fence_leaves_no_margin_is_refused(two: Federation,
                                                          tmp_path: Path) -> None:
    # 7 s of fence, 0.5 + 0.7 s for the pods' supervisors to stop the pods and 1.4 s of
    # margin come to 9.6 s: not shorter than the control plane's 8 s --worker-lost-after.
    from tests.planes.harness import WorkerProcess

    key = two.workers["east"].key_file
    late = WorkerProcess(tmp_path, "east", key, ["--fence-after", "7s"]).start(two.server.url)
    try:
        assert late.proc is not None
        assert late.proc.wait(timeout=60) != 0
        said = " ".join(late.log().split())  # (a long line may be wrapped)
        assert "--fence-after (7s)" in said and "9.6s" in said, said
        assert "--worker-lost-after (8s)" in said, said
    finally:
        late.stop()
    # The plane's own worker still drives it.
    assert two.plane("east")["state"] == "connected"
    assert two.plane("east")["lostAfter"] == 8
