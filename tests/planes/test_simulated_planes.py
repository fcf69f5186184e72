"""Simulated planes behind workers, for larger shapes; the plane commands; key rotation."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.planes.harness import Federation, wait_until

pytestmark = pytest.mark.timeout(180)

NODES = "nodes:\n" + "".join(
    f"  - {{name: n{i}, allocatable: {{cpu: 8, memory: 64Gi, pods: 110}}}}\n"
    for i in range(16))


def sim_job(name: str, replicas: int, cpu: str = "8", seconds: str = "") -> dict[str, object]:
    env = {"PHALANX_SIM_DURATION": seconds} if seconds else {}
    return {"name": name, "queue": "default", "podSets": [{
        "name": "main", "replicas": replicas, "resources": {"cpu": cpu}, "env": env}]}


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    root = tmp_path_factory.mktemp("sims")
    (root / "nodes.yaml").write_text(NODES)
    # 16 nodes x 8 CPUs a plane; the team's quota, 200 CPUs, is less than both (256).
    with Federation(root, cpu="200", extra=["--token-ttl", "3s"]) as federation:
        for name in ("gcp-a", "onprem"):
            federation.start_worker(name, "--fence-after", "5s", compute=[
                "--compute", "simulated", "--nodes", str(root / "nodes.yaml")])
        yield federation


def test_gangs_land_on_both_and_quota_spans_the_clusters(sims: Federation) -> None:
    for i in range(3):  # 12 nodes each: two fit, one per plane; a third fits neither
        sims.submit(sim_job(f"big-{i}", 12))
    first, second = (sims.wait_status(f"big-{i}", "Running") for i in range(2))
    used = {first["admission"]["podSets"][0]["nodes"][0].split(".")[0],
            second["admission"]["podSets"][0]["nodes"][0].split(".")[0]}
    assert used == {"gcp-a", "onprem"}
    waiting = wait_until(lambda: (j := sims.job("big-2"))["pendingMessage"] and j,
                         what="big-2's reason")
    assert waiting["status"] == "Queued"
    # 192 of 200 CPUs are used across the two clusters: the quota, not the nodes, stops
    # a 2-node job although each plane still has 4 free nodes.
    sims.submit(sim_job("small", 2))
    small = wait_until(lambda: "free of" in ((j := sims.job("small"))["pendingMessage"]
                                             or "") and j, what="small's reason")
    assert small["status"] == "Queued" and "8 free of 200 cpu" in small["pendingMessage"]
    for name in ("big-0", "big-1", "big-2", "small"):
        sims.api().post(f"/v1/jobs/{name}/cancel")
    for name in ("big-0", "big-1", "big-2", "small"):
        sims.wait_status(name, "Cancelled")


def test_gang_larger_than_any_cluster_names_the_clusters(sims: Federation) -> None:
    sims.submit(sim_job("huge", 20))  # 20 nodes: both clusters together have 32
    job = wait_until(lambda: "compute plane" in ((j := sims.job("huge"))["pendingMessage"]
                                                 or "") and j, what="huge's reason")
    assert "within one compute plane" in job["pendingMessage"]
    assert "cluster gcp-a" in job["pendingMessage"] or "cluster onprem" in \
        job["pendingMessage"]
    sims.api().post("/v1/jobs/huge/cancel")


def test_a_ray_dashboard_behind_a_worker_is_refused_saying_why(sims: Federation) -> None:
    """The worker only dials out: the control plane cannot reach a Ray head there, and
    says so (501) rather than answering as if the cluster had no dashboard."""
    sims.submit({"name": "far-ray", "queue": "default", "kind": "ray", "podSets": [
        {"name": "head", "replicas": 1, "resources": {"cpu": "1"}}]})
    sims.wait_status("far-ray", "Running")
    with sims.api() as api:
        for method in ("GET", "POST"):
            refused = api.request(method, "/v1/jobs/far-ray/ray/api/version")
            assert refused.status_code == 501, refused.text
            error = refused.json()["error"]
            assert error["type"] == "NotSupported" and error["field"] == "name"
            assert "behind a worker" in error["message"] and "phalanx exec" in error["fix"]
        api.post("/v1/jobs/far-ray/cancel")
    sims.wait_status("far-ray", "Cancelled")


def test_plane_commands(sims: Federation) -> None:
    env = sims.server.env

    def phalanx(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "phalanx.cli.main", *args], env=env,
                              capture_output=True, text=True, timeout=60)

    key_file = sims.root / "spare.key"
    assert phalanx("plane", "add", "spare", "--key-file", str(key_file)).returncode == 0
    assert key_file.stat().st_mode & 0o777 == 0o600
    listed = {p["name"]: p for p in json.loads(phalanx("plane", "list", "--json").stdout)}
    assert listed["spare"]["state"].startswith("waiting for its worker")
    assert listed["gcp-a"]["state"] == "connected" and listed["gcp-a"]["nodes"] == 16
    # A running job on onprem: remove is refused without --force; drain --move requeues it.
    sims.api().post("/v1/planes/gcp-a/cordon", json={"cordoned": True})
    sims.submit(sim_job("pinned", 1))
    running = sims.wait_status("pinned", "Running")
    assert running["admission"]["podSets"][0]["nodes"][0].startswith("onprem.")
    refused = phalanx("plane", "remove", "onprem")
    assert refused.returncode != 0 and "pinned" in refused.stderr + refused.stdout
    phalanx("plane", "uncordon", "gcp-a")
    drained = phalanx("plane", "drain", "onprem", "--move")
    assert drained.returncode == 0, drained.stderr
    moved = wait_until(lambda: (j := sims.job("pinned"))["attempt"] == 2 and
                       j["status"] == "Running" and j, timeout=60, what="pinned to move")
    assert moved["admission"]["podSets"][0]["nodes"][0].startswith("gcp-a.")
    phalanx("plane", "uncordon", "onprem")
    assert phalanx("plane", "remove", "spare").returncode == 0
    sims.api().post("/v1/jobs/pinned/cancel")


def test_key_rotation_without_restart(sims: Federation) -> None:
    with sims.api() as api:
        new = api.post("/v1/planes/gcp-a/keys").json()
        old_id = (sims.root / "gcp-a.key").read_text().strip().split("_")[1]
        (sims.root / "gcp-a.key").write_text(new["key"] + "\n")
        assert api.delete(f"/v1/keys/{old_id}").status_code == 200
    # Tokens live 3 s: the worker exchanges its (new) key again and keeps reporting.
    time.sleep(5)
    seen = sims.plane("gcp-a")["lastSeen"]
    time.sleep(1.5)
    assert sims.plane("gcp-a")["state"] == "connected"
    assert sims.plane("gcp-a")["lastSeen"] is not None and seen is not None
