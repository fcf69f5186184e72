"""A worker for Kubernetes beside a local one, under one control plane.

Real processes over real HTTP: ``phalanx up --no-local-plane``, a ``phalanx worker
--compute local`` and a ``phalanx worker --compute kubernetes`` against the
Kubernetes API mock (its built-in kubelet plays the pods).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.kubernetes import KubernetesPlane, Settings, fence, fencing
from phalanx.compute.kubernetes.lease import expiry_of
from phalanx.compute.kubernetes.objects import CONTROL_PLANE, JOB, PLANE
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec
from phalanx.worker.agent import IDENTITY_FILE
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.planes.harness import Federation, job_spec, wait_until

pytestmark = pytest.mark.timeout(240)
RUNS = "runs"
IMAGE = "registry.example.com/ml/trainer:1"
FENCE_IMAGE = "registry.example.com/phalanx:1"


@pytest.fixture(scope="module")
def kube() -> Iterator[FakeAPIServer]:
    api = FakeAPIServer(namespaces=("default", RUNS)).start()
    api.add_node("k8s-1", cpu="4", memory="16Gi")
    api.add_node("k8s-2", cpu="4", memory="16Gi")
    api.autopilot = {"start_after": 0.1, "run_for": 120}
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, kube: FakeAPIServer) -> Iterator[Federation]:
    root = tmp_path_factory.mktemp("mixed")
    kubeconfig = root / "kubeconfig"
    kubeconfig.write_text(kube.kubeconfig())
    with Federation(root, cpu="100", lost_after="15s") as federation:
        federation.start_worker("laptop", "--fence-after", "4s")
        federation.start_worker(
            "gke", "--fence-after", "4s",
            compute=["--compute", "kubernetes", "--kubeconfig", str(kubeconfig),
                     "--namespace", RUNS, "--fence-image", FENCE_IMAGE])
        yield federation


def _pods(kube: FakeAPIServer, job: str) -> list[dict[str, Any]]:
    return [p for p in kube.list("pods", RUNS) if p["metadata"]["labels"].get(JOB) == job]


def _planes_of(job: dict[str, Any]) -> set[str]:
    return {n.split(".")[0] for ps in job["admission"]["podSets"] for n in ps["nodes"]}


def test_a_gang_lands_on_the_kubernetes_plane_with_identity_and_fence(
    mixed: Federation, kube: FakeAPIServer,
) -> None:
    spec = job_spec("k8s-gang", "import time; time.sleep(600)", replicas=2, cpu="3",
                    selector={"phalanx.dev/plane": "gke"})
    spec["podSets"][0]["image"] = IMAGE
    mixed.submit(spec)
    running = mixed.wait_status("k8s-gang", "Running", timeout=90)
    # The first attempt runs: the time the worker takes to create the pods is not "gone".
    assert running["attempt"] == 1
    assert _planes_of(running) == {"gke"}
    # 3 CPUs each: one pod per 4-CPU node, both on the Kubernetes plane.
    assert sorted(running["admission"]["podSets"][0]["nodes"]) == ["gke.k8s-1", "gke.k8s-2"]
    pods = wait_until(lambda: len(_pods(kube, "k8s-gang")) == 2 and _pods(kube, "k8s-gang"),
                      what="the gang's pods in the cluster")
    identity = json.loads((mixed.workers["gke"].state_dir / IDENTITY_FILE).read_text())
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels[PLANE] == "gke"
        assert labels[CONTROL_PLANE] == identity["controlPlane"]
        container = pod["spec"]["containers"][0]
        # Every rank runs under the fence of the plane's Lease.
        assert container["command"][:3] == ["python3", fencing.SCRIPT, "--"]
        assert container["command"][3:] == [sys.executable, "-c", "import time; time.sleep(600)"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env[fence.LEASE_ENV] == f"{RUNS}/phalanx-plane-gke"
        # Scaled to the worker's 4 s fence (reads once a second at most): it acts well within
        # the control plane's margin.
        assert (env[fence.POLL_ENV], env[fence.GRACE_ENV]) == ("1", "0.4")
        assert env["PHALANX_EPOCH"] == str(running["attempt"])
        assert pod["spec"]["initContainers"][0]["image"] == FENCE_IMAGE
    # The worker renews the Lease while the control plane answers it: its expiry advances.
    first = expiry_of(wait_until(lambda: kube.get("leases", "phalanx-plane-gke", RUNS),
                                 what="the plane's Lease"))
    assert first is not None
    later = wait_until(lambda: (e := expiry_of(kube.get("leases", "phalanx-plane-gke", RUNS)
                                               or {})) and e > first and e,
                       what="the Lease to be renewed")
    assert later > first
    # Cancel: the worker removes the gang's pods from the cluster.
    with mixed.api() as api:
        assert api.post("/v1/jobs/k8s-gang/cancel").status_code in (200, 202)
    mixed.wait_status("k8s-gang", "Cancelled", timeout=60)
    wait_until(lambda: not _pods(kube, "k8s-gang"), timeout=60, what="the pods to be deleted")


def test_exec_reaches_a_pod_of_the_kubernetes_plane(mixed: Federation) -> None:
    spec = job_spec("k8s-exec", "import time; time.sleep(600)", selector={
        "phalanx.dev/plane": "gke"})
    spec["podSets"][0]["image"] = IMAGE
    mixed.submit(spec)
    mixed.wait_status("k8s-exec", "Running", timeout=90)
    # Through the worker, to the cluster's pods/exec (the mock's kubelet runs it).
    done = mixed.cli("exec", "k8s-exec", "--", "sh", "-c", "echo $PHALANX_JOB; exit 3")
    assert done.returncode == 3, done.stderr
    assert done.stdout == b"k8s-exec\n"
    with mixed.api() as api:
        api.post("/v1/jobs/k8s-exec/cancel")


def test_the_local_plane_runs_beside_it(mixed: Federation, kube: FakeAPIServer) -> None:
    local = job_spec("on-laptop", "print('hello from the laptop')",
                     selector={"phalanx.dev/plane": "laptop"})
    mixed.submit(local)
    done = mixed.wait_status("on-laptop", "Succeeded", timeout=90)
    assert _planes_of(done) == {"laptop"}
    assert not _pods(kube, "on-laptop")  # nothing of it reached the cluster
    # Both planes report; on a loaded machine a report may come a beat late (the fixture's
    # --worker-lost-after is short), so the state is read until both say connected.
    deadline = time.monotonic() + 30
    with mixed.api() as api:
        while True:
            listed = {p["name"]: p for p in api.get("/v1/planes").json()["planes"]}
            states = {name: plane["state"] for name, plane in listed.items()}
            if states.get("gke") == "connected" and states.get("laptop") == "connected":
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.5)
        nodes = api.get("/v1/nodes").json()
    names = {n["name"] for n in nodes["items"]}
    assert {"gke.k8s-1", "gke.k8s-2"} <= names
    assert any(name.startswith("laptop.") for name in names)


def test_another_planes_attempt_is_left_alone(mixed: Federation, kube: FakeAPIServer,
                                             tmp_path: Path) -> None:
    """Another plane's attempt in the same namespace (made by a real plane, labelled with its
    own identity) is not adopted by this plane's worker, even across a restart."""
    other = KubernetesPlane.connect(
        home=tmp_path / "other", kubeconfig=_kubeconfig(kube, tmp_path), namespace=RUNS,
        settings=Settings(namespace=RUNS, fence_image=FENCE_IMAGE), plane="other",
        control_plane="someone-else")
    try:
        job = JobSpec.model_validate({"name": "stray", "podSets": [{
            "name": "main", "replicas": 1, "image": IMAGE, "command": ["sleep", "600"],
            "resources": {"cpu": "100m", "memory": "16Mi"}}]})
        other.launch(job, 1, Admission(job="stray", cluster_queue="default", pod_sets=(
            PodSetAssignment(name="main", count=1, flavors={"cpu": "default"},
                             nodes=("k8s-1",)),)))
        wait_until(lambda: _pods(kube, "stray"), what="the other plane's pod")
    finally:
        other.close()
    gke = mixed.workers["gke"]
    gke.stop()  # a restart adopts what the plane finds: only its own objects
    gke.start(mixed.server.url)
    mixed.wait_connected("gke")
    mixed.submit(job_spec("marker", "print(1)", selector={"phalanx.dev/plane": "laptop"}))
    mixed.wait_status("marker", "Succeeded", timeout=90)
    time.sleep(2.0)  # several report intervals of the restarted worker
    assert [p["metadata"]["labels"][PLANE] for p in _pods(kube, "stray")] == ["other"]
    anchors = [c for c in kube.list("configmaps", RUNS)
               if c["metadata"]["labels"].get(JOB) == "stray"]
    assert len(anchors) == 1
    with mixed.api() as api:
        assert api.get("/v1/jobs/stray").status_code == 404
        assert not [p for p in api.get("/v1/planes/gke").json().get("jobs") or []
                    if "stray" in str(p)]


def _kubeconfig(kube: FakeAPIServer, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(kube.kubeconfig())
    return path
