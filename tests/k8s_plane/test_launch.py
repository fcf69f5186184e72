"""Materialising an admitted gang: anchor, headless Service, pods, PodGroup; idempotence."""

from __future__ import annotations

import pytest

from phalanx.compute.base import PodPhase
from phalanx.compute.kubernetes.objects import dns_label, pod_name
from phalanx.errors import Conflict, SpecError
from tests.k8s_plane.conftest import RUNS, PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.helpers import IMAGE, admit, env_of, gang, pods

kubernetes_validate = pytest.importorskip("kubernetes_validate")
VERSIONS = [kubernetes_validate.utils.all_versions()[0],
            kubernetes_validate.utils.latest_version()]


def _validate(obj: dict) -> None:
    # What the API server adds (uid, resourceVersion, status...) is not part of a request.
    request = {k: v for k, v in obj.items() if k != "status"}
    request["metadata"] = {k: v for k, v in obj["metadata"].items()
                           if k not in ("uid", "resourceVersion", "creationTimestamp")}
    for version in VERSIONS:
        kubernetes_validate.validate(request, version, strict=True)


def _nodes(api: FakeAPIServer) -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    for name in ("gpu-1", "gpu-2"):
        api.add_node(name, cpu="32", memory="256Gi", gpus=8, taints=[taint])


def test_four_pod_gang(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    _nodes(api)
    plane = make_plane(service_account="phalanx-run", priority_classes={"high": "ml-high"})
    job = gang(tolerations=[{"key": "dedicated", "operator": "Exists"}])
    job = job.model_copy(update={"priority": "high"})
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1", "gpu-2", "gpu-2"]))

    [anchor] = api.list("configmaps", RUNS)
    [service] = api.list("services", RUNS)
    created = pods(api, "ddp")
    assert len(created) == 4
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": anchor["metadata"]["name"],
             "uid": anchor["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    assert service["metadata"]["ownerReferences"] == [owner]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    subdomain = service["metadata"]["name"]
    master = f"worker-0.{subdomain}.{RUNS}.svc"
    for rank, (pod, node) in enumerate(zip(created, ["gpu-1", "gpu-1", "gpu-2", "gpu-2"],
                                           strict=True)):
        spec = pod["spec"]
        assert pod["metadata"]["ownerReferences"] == [owner]
        assert pod["metadata"]["labels"]["phalanx.dev/rank"] == str(rank)
        assert spec["restartPolicy"] == "Never"
        assert spec["hostname"] == f"worker-{rank}"
        assert spec["subdomain"] == subdomain
        assert spec["serviceAccountName"] == "phalanx-run"
        assert spec["priorityClassName"] == "ml-high"
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                "effect": "NoSchedule"} in spec["tolerations"]
        assert {"key": "dedicated", "operator": "Exists"} in spec["tolerations"]
        container = spec["containers"][0]
        assert container["image"] == IMAGE
        assert container["command"] == ["torchrun", "train.py"]
        want = {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}
        assert container["resources"] == {"requests": want, "limits": want}
        env = env_of(pod)
        assert env["MASTER_ADDR"] == master
        assert env["RANK"] == env["NODE_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == "4"
        assert env["PHALANX_NODE_IPS"].split(",") == [
            f"worker-{i}.{subdomain}.{RUNS}.svc" for i in range(4)]
        assert "scheduling.x-k8s.io/pod-group" not in pod["metadata"]["labels"]
        _validate(pod)
    _validate(service)
    _validate(anchor)
    assert not api.list("podgroups", RUNS)
    states = plane.observe()
    assert [s.phase for s in states] == [PodPhase.PENDING] * 4
    assert [s.ref.rank for s in states] == [0, 1, 2, 3]

    # Launching again (a retried call) creates nothing more.
    posts = api.count("POST", f"/api/v1/namespaces/{RUNS}/pods")
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-1", "gpu-2", "gpu-2"]))
    assert api.count("POST", f"/api/v1/namespaces/{RUNS}/pods") == posts == 4


def test_pod_group_when_the_api_is_served(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    api.pod_groups = True
    _nodes(api)
    plane = make_plane()
    assert plane.pod_groups
    job = gang(replicas=2)
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-2"]))
    [group] = api.list("podgroups", RUNS)
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["spec"] == {"minMember": 2}
    assert {p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] for p in pods(api)} == {
        group["metadata"]["name"]}


def test_bad_job_creates_nothing(api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    _nodes(api)
    plane = make_plane()
    job = gang(replicas=2, image=None)
    with pytest.raises(SpecError) as err:
        plane.launch(job, 1, admit(job, ["gpu-1", "gpu-2"]))
    assert err.value.field == "podSets[0].image"
    job = gang(replicas=1, resources={"nvidia.com/gpu": "500m"})
    with pytest.raises(SpecError) as err:
        plane.launch(job, 1, admit(job, ["gpu-1"]))
    assert err.value.field == "podSets[0].resources.nvidia.com/gpu"
    assert not api.list("configmaps", RUNS) and not api.list("pods", RUNS)


def test_conflicts_and_transient_errors_adopt_and_retry(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    _nodes(api)
    plane = make_plane()
    job = gang(replicas=3)
    admission = admit(job, ["gpu-1", "gpu-1", "gpu-2"])
    # A pod left by an interrupted launch (same deterministic name) is adopted on 409.
    from phalanx.compute.kubernetes import objects

    plan = objects.plan_attempt(job, 1, admission, RUNS, b"key")
    leftover = objects.pod(plan, plan.pods[1], job, {"apiVersion": "v1", "kind": "ConfigMap",
                                                    "name": plan.name, "uid": "old"})
    api.add("pods", leftover, RUNS)
    api.inject(r"/pods$", 500, count=1, method="POST")
    api.inject(r"/services$", 429, count=2, method="POST", retry_after="0")
    api.inject(r"/configmaps$", 503, count=1, method="POST")
    plane.launch(job, 1, admission)
    assert len(pods(api)) == 3
    assert api.count("POST", f"/api/v1/namespaces/{RUNS}/pods", 409) == 1
    assert api.count("POST", f"/api/v1/namespaces/{RUNS}/pods", 500) == 1
    assert api.count("POST", f"/api/v1/namespaces/{RUNS}/services", 429) == 2
    assert api.count("POST", f"/api/v1/namespaces/{RUNS}/services", 201) == 1

    # An object of the same name that belongs to another job is not adopted.
    other = gang(name="other", replicas=1)
    clash = objects.plan_attempt(other, 1, admit(other, ["gpu-1"]), RUNS, b"key")
    api.add("services", {"metadata": {"name": clash.name, "labels": {}},
                         "spec": {"clusterIP": "None"}}, RUNS)
    with pytest.raises(Conflict, match="belongs to another job"):
        plane.launch(other, 1, admit(other, ["gpu-1"]))


def test_names_are_dns_labels() -> None:
    long = "a" * 63
    assert dns_label(long) == long
    shortened = dns_label(long + "-7")
    assert len(shortened) <= 63 and shortened != dns_label(long + "-8")
    assert dns_label("7up", letter_first=True)[0].isalpha()
    from phalanx.compute.base import PodRef

    name = pod_name(PodRef(job=long, attempt=12, pod_set=long, index=3, rank=3))
    assert len(name) <= 63


def test_pinned_pods_are_guaranteed_with_integer_cpus(
    api: FakeAPIServer, make_plane: PlaneFactory,
) -> None:
    _nodes(api)
    plane = make_plane()
    job = gang(replicas=2, cpuPinning="exclusive",
               tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    plane.check_job(job)
    plane.launch(job, 1, admit(job, ["gpu-1", "gpu-2"]))
    for pod in pods(api, "ddp"):
        resources = pod["spec"]["containers"][0]["resources"]
        # Guaranteed QoS: every resource's limit equals its request, cpu a whole number.
        assert resources["requests"] == resources["limits"]
        assert resources["requests"]["cpu"] == "2" and resources["requests"]["memory"] == "4Gi"
        assert pod["metadata"]["annotations"]["phalanx.dev/cpu-pinning"] == "exclusive"
        _validate(pod)
    no_memory = gang(name="nomem", cpuPinning="exclusive", resources={"cpu": "2"})
    with pytest.raises(SpecError) as refused:
        plane.check_job(no_memory)
    assert refused.value.field == "podSets[0].resources.memory"
