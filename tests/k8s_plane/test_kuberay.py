"""Ray jobs as KubeRay RayClusters (``ray.useKubeRay``), over the API mock with a small
KubeRay operator (``fake_kuberay.py``) making the pods."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from phalanx.compute.kubernetes import objects
from phalanx.compute.kubernetes.settings import USE_KUBERAY_ENV, settings_from_env
from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobStatus
from tests.k8s_plane.conftest import RUNS, PlaneFactory, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.fake_kuberay import FakeKubeRay
from tests.k8s_plane.helpers import env_of, pods
from tests.k8s_plane.test_lifecycle import Loop, loops, start
from tests.k8s_plane.test_ray import RAY_IMAGE, admission, container, ray_job

__all__ = ["loops", "start"]

CLUSTERS = f"/apis/ray.io/v1/namespaces/{RUNS}/rayclusters"


@pytest.fixture
def operator(api: FakeAPIServer) -> Iterator[FakeKubeRay]:
    api.kuberay = True  # KubeRay's CRDs are installed
    running = FakeKubeRay(api, RUNS).start()
    yield running
    running.stop()


def node_of(template: dict[str, Any]) -> str:
    terms = template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    node: str = terms[0]["matchFields"][0]["values"][0]
    return node


def _start_all(api: FakeAPIServer, job: str, count: int, loop: Loop | None = None) -> list[str]:
    made = lambda: len(pods(api, job)) == count  # noqa: E731
    what = f"{count} pods from KubeRay"
    loop.until(made, what) if loop is not None else wait_until(made, what=what)
    names = [p["metadata"]["name"] for p in pods(api, job)]
    for name in names:
        api.start_pod(RUNS, name)
    return names


def test_the_ray_cluster_is_made_at_admission_with_one_group_per_placed_pod(
    api: FakeAPIServer, operator: FakeKubeRay, start: Callable[..., Loop],
) -> None:
    loop = start(use_kuberay="auto")
    loop.controller.submit(ray_job("rc", workers=2))
    loop.until(lambda: api.list("rayclusters", RUNS), "a RayCluster")
    # Every GPU of both nodes, two of which rc holds: it queues, and nothing exists for it.
    loop.controller.submit(JobSpec.model_validate({"name": "big", "kind": "ray", "podSets": [
        {"name": "head", "image": RAY_IMAGE, "resources": {"cpu": "1"}},
        {"name": "worker", "replicas": 2, "image": RAY_IMAGE,
         "resources": {"cpu": "1", "nvidia.com/gpu": 8}}]}))
    for _ in range(3):
        loop.controller.step()
    assert loop.status("big") is JobStatus.QUEUED
    [cluster] = api.list("rayclusters", RUNS)  # the admitted job's only
    assert cluster["metadata"]["name"] == objects.attempt_name("rc", 1)
    assert cluster["metadata"]["annotations"] == {"ray.io/overwrite-container-cmd": "true"}
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "ConfigMap"  # the anchor
    assert cluster["spec"]["enableInTreeAutoscaling"] is False
    head = cluster["spec"]["headGroupSpec"]["template"]
    groups = cluster["spec"]["workerGroupSpecs"]
    assert [(g["groupName"], g["replicas"], g["minReplicas"], g["maxReplicas"])
            for g in groups] == [("worker-0", 1, 1, 1), ("worker-1", 1, 1, 1)]
    record = loop.controller.get("rc")
    assert record.admission is not None
    placed = [n for p in record.admission.pod_sets for n in p.nodes]
    assert [node_of(head), *(node_of(g["template"]) for g in groups)] == placed
    for rank, template in enumerate([head, *(g["template"] for g in groups)]):
        labels = template["metadata"]["labels"]
        assert labels[objects.JOB] == "rc" and labels[objects.RANK] == str(rank)
        assert labels[objects.MANAGED_BY] == "phalanx"
    assert container(head)["command"][:3] == ["ray", "start", "--head"]
    assert container(head)["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
    worker = groups[0]["template"]
    assert container(worker)["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "ray start --address=" in container(worker)["command"][2]

    names = _start_all(api, "rc", 3, loop)  # KubeRay's pods, under KubeRay's names
    assert all(n.startswith("rc-1-") and n not in ("rc-1-head-0",) for n in names)
    assert [p["metadata"]["labels"]["ray.io/group"] for p in pods(api, "rc")] == [
        "headgroup", "worker-0", "worker-1"]
    loop.until(lambda: loop.status("rc") is JobStatus.RUNNING, "running")
    # The dashboard is KubeRay's head Service, as the RayCluster's status names it.
    loop.until(lambda: loop.controller.get("rc").endpoints.get("dashboard")
               == f"http://rc-1-head-svc.{RUNS}.svc:8265", "the dashboard's URL")
    assert api.count("POST", f"/api/v1/namespaces/{RUNS}/pods") == 0  # none of Phalanx's

    loop.controller.cancel("rc")
    loop.until(lambda: loop.status("rc") is JobStatus.CANCELLED, "cancelled")
    loop.until(lambda: api.get("rayclusters", "rc-1", RUNS) is None and not pods(api, "rc"),
               "the RayCluster and its pods deleted")
    # What rc held is free again: big is admitted, and only now gets its RayCluster.
    loop.until(lambda: api.get("rayclusters", "big-1", RUNS), "big's RayCluster")


def test_a_ray_job_on_kuberay_ends_with_its_head(
    api: FakeAPIServer, operator: FakeKubeRay, start: Callable[..., Loop],
) -> None:
    loop = start(use_kuberay="always")
    loop.controller.submit(ray_job("rj", entrypoint="python train.py", workers=1, small=True))
    head, worker = _start_all(api, "rj", 2, loop)
    sh, flag, script, *_ = container(pods(api, "rj")[0])["command"]  # Phalanx's, kept
    assert (sh, flag) == ("sh", "-c") and "ray start --head" in script
    assert env_of(pods(api, "rj")[0])["PHALANX_RAY_ENTRYPOINT"] == "python train.py"
    loop.until(lambda: loop.status("rj") is JobStatus.RUNNING, "running")
    api.finish_pod(RUNS, head, exit_code=0)  # the entrypoint succeeded; the worker runs
    loop.until(lambda: loop.status("rj") is JobStatus.SUCCEEDED, "succeeded")
    loop.until(lambda: not api.list("rayclusters", RUNS) and not pods(api, "rj"),
               "the cluster taken down")
    assert api.count("DELETE", f"{CLUSTERS}/rj-1") >= 1
    assert api.count("DELETE", f"/api/v1/namespaces/{RUNS}/pods/{worker}") >= 1


def test_a_failed_pod_fails_the_gang_though_kuberay_replaces_it(
    api: FakeAPIServer, operator: FakeKubeRay, start: Callable[..., Loop],
) -> None:
    loop = start(use_kuberay="auto")
    loop.controller.submit(ray_job("rc", workers=1, small=True))
    _head, worker = _start_all(api, "rc", 2, loop)
    loop.until(lambda: loop.status("rc") is JobStatus.RUNNING, "running")
    api.finish_pod(RUNS, worker, exit_code=3)
    loop.until(lambda: loop.status("rc") is JobStatus.FAILED, "failed")
    record = loop.controller.get("rc")
    assert "rc-worker-0" in record.message and record.exit_code == 3
    assert len(operator.made) >= 3  # KubeRay made the worker again; the gang did not wait


def test_a_restarted_plane_adopts_the_ray_cluster_and_its_pods(
    api: FakeAPIServer, operator: FakeKubeRay, make_plane: PlaneFactory,
) -> None:
    for name in ("gpu-1", "gpu-2"):
        api.add_node(name, cpu="32", memory="256Gi", gpus=8)
    first = make_plane(use_kuberay="auto")
    job = ray_job("rc", workers=2, small=True)
    first.launch(job, 1, admission(job, ["gpu-1", "gpu-1", "gpu-2"]))
    names = _start_all(api, "rc", 3)
    first.close()
    second = make_plane(use_kuberay="auto")
    states = wait_until(lambda: [s for s in second.observe() if s.ref.job == "rc"
                                 and s.phase.name == "RUNNING"] or None, what="adopted pods")
    assert len(states) == 3
    assert api.count("POST", CLUSTERS, 201) == 1  # one RayCluster, adopted
    second.terminate("rc", 1, grace_seconds=5)
    wait_until(lambda: not api.list("rayclusters", RUNS), what="the RayCluster deleted")
    for name in names:
        assert api.count("DELETE", f"/api/v1/namespaces/{RUNS}/pods/{name}") == 1


def test_always_without_kuberay_refuses_to_start(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    with pytest.raises(SpecError) as refused:
        make_plane(use_kuberay="always")
    assert refused.value.field == "ray.useKubeRay" and "install KubeRay" in refused.value.fix


def test_auto_without_kuberay_makes_the_pods_itself(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane(use_kuberay="auto")
    job = ray_job("rc", workers=1, small=True)
    plane.launch(job, 1, admission(job, ["gpu-1", "gpu-1"]))
    assert [p["metadata"]["name"] for p in pods(api, "rc")] == ["rc-1-head-0", "rc-1-worker-0"]
    assert api.count("POST", CLUSTERS) == 0


def test_the_switch_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(USE_KUBERAY_ENV, "sometimes")
    with pytest.raises(SpecError) as refused:
        settings_from_env()
    assert refused.value.field == USE_KUBERAY_ENV and "auto, always or never" in \
        refused.value.message
    monkeypatch.setenv(USE_KUBERAY_ENV, "Always")
    assert settings_from_env().use_kuberay == "always"


def test_a_ray_cluster_deleted_by_someone_else_is_a_system_failure(
    api: FakeAPIServer, operator: FakeKubeRay, start: Callable[..., Loop],
) -> None:
    loop = start(use_kuberay="auto")
    loop.controller.submit(ray_job("rc", workers=1, small=True))
    _start_all(api, "rc", 2, loop)
    loop.until(lambda: loop.status("rc") is JobStatus.RUNNING, "running")
    api.remove("rayclusters", "rc-1", RUNS)  # kubectl delete raycluster: its pods go too
    loop.until(lambda: loop.status("rc") is JobStatus.QUEUED, "requeued")
    record = loop.controller.get("rc")
    assert "Deleted" in record.message and "system failure" in record.message
    assert record.system_restarts == 1 and record.user_restarts == 0


def test_a_ray_cluster_deleted_before_kuberay_made_its_pods_fails_them(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    api.kuberay = True  # served, but no operator runs: the pods are never made
    api.add_node("gpu-1", cpu="32", memory="256Gi", gpus=8)
    plane = make_plane(use_kuberay="auto")
    job = ray_job("rc", workers=1, small=True)
    plane.launch(job, 1, admission(job, ["gpu-1", "gpu-1"]))
    assert {s.phase.name for s in plane.observe()} == {"PENDING"}  # waiting for KubeRay
    wait_until(lambda: plane.ray_clusters.get("rc-1"), what="the RayCluster seen")
    api.remove("rayclusters", "rc-1", RUNS)
    states = wait_until(lambda: [s for s in plane.observe() if s.phase.name == "FAILED"]
                        or None, what="the pods failed")
    assert {(s.reason, s.failure) for s in states} == {("Deleted", "system")}
