"""Each kind managed natively, as the cluster stores it (suspended, defaulted by the API
server and the kind's own webhook), translates as its author's manifest does with `submit
-f`; its adapter finds every pod template and reads its status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from phalanx.compute.kubernetes.patches import add_ops, merge_diff
from phalanx.errors import SpecError
from phalanx.spec.manifests import translate
from phalanx.spec.manifests.native import CLUSTER_SET, NATIVE_LABEL, as_authored, job_name
from phalanx.spec.manifests.native_kinds import (
    FAILED,
    NATIVE_KINDS,
    SUCCEEDED,
    at,
    kind_of,
    owned_by_managed,
)

IMAGE = "registry.example.com/train:1"
QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}


def pod(gpus: int = 1, **container: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "image": IMAGE, "command": ["train"],
                                     "resources": {"requests": {"nvidia.com/gpu": str(gpus)}},
                                     **container}]}}


def obj(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "train", "namespace": "team-a", "labels": dict(QUEUE)},
            "spec": spec}


def ray_pod() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "ray", "image": IMAGE,
                                     "resources": {"requests": {"cpu": "1"}}}]}}


RAY_CLUSTER = {"headGroupSpec": {"template": ray_pod()},
               "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": ray_pod()}]}
PYTORCH = obj("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": {
    "Master": {"replicas": 1, "template": pod(2)},
    "Worker": {"replicas": 3, "template": pod(2)}}})
AUTHORED = {
    "JobSet": obj("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": [
        {"name": name, "replicas": 2, "template": {"spec": {
            "parallelism": 2, "completions": 2, "template": pod()}}}
        for name in ("leader", "workers")]}),
    "PyTorchJob": PYTORCH,
    "MPIJob": obj("kubeflow.org/v2beta1", "MPIJob", {"mpiReplicaSpecs": {
        "Launcher": {"replicas": 1, "template": pod(0)},
        "Worker": {"replicas": 2, "template": {"spec": {"containers": [{
            "name": "w", "image": IMAGE, "resources": {"requests": {"cpu": "1"}}}]}}}}}),
    "RayCluster": obj("ray.io/v1", "RayCluster", copy.deepcopy(RAY_CLUSTER)),
    "RayJob": obj("ray.io/v1", "RayJob", {"entrypoint": "python train.py",
                                          "shutdownAfterJobFinishes": True,
                                          "rayClusterSpec": copy.deepcopy(RAY_CLUSTER)}),
    "AppWrapper": obj("workload.codeflare.dev/v1beta2", "AppWrapper", {"components": [
        {"template": {k: v for k, v in PYTORCH.items() if k != "metadata"}}]}),
}
# What each kind's template paths are, in the object above.
TEMPLATES = {
    "JobSet": [("spec", "replicatedJobs", 0, "template", "spec", "template"),
               ("spec", "replicatedJobs", 1, "template", "spec", "template")],
    "PyTorchJob": [("spec", "pytorchReplicaSpecs", "Master", "template"),
                   ("spec", "pytorchReplicaSpecs", "Worker", "template")],
    "MPIJob": [("spec", "mpiReplicaSpecs", "Launcher", "template"),
               ("spec", "mpiReplicaSpecs", "Worker", "template")],
    "RayCluster": [("spec", "headGroupSpec", "template"),
                   ("spec", "workerGroupSpecs", 0, "template")],
    "RayJob": [("spec", "rayClusterSpec", "headGroupSpec", "template"),
               ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template")],
    "AppWrapper": [("spec", "components", 0, "template", "spec", "pytorchReplicaSpecs",
                    "Master", "template"),
                   ("spec", "components", 0, "template", "spec", "pytorchReplicaSpecs",
                    "Worker", "template")],
}


def stored(kind: str) -> dict[str, Any]:
    """The object as the API server keeps it: suspended by Phalanx, defaulted."""
    found = copy.deepcopy(AUTHORED[kind])
    adapter = kind_of(found)
    assert adapter is not None
    spec = found["spec"]
    node = found
    for step in adapter.suspend[:-1]:
        node = node.setdefault(str(step), {})
    node[str(adapter.suspend[-1])] = True
    found["metadata"].update(uid="u-1", resourceVersion="7", generation=1)
    found["status"] = {"conditions": []}
    if kind == "JobSet":  # JobSet's webhook defaults
        spec["network"] = {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
        for replicated in spec["replicatedJobs"]:
            replicated["template"]["spec"]["podReplacementPolicy"] = "Failed"
    if kind == "PyTorchJob":  # the training operator's default port
        for replica in spec["pytorchReplicaSpecs"].values():
            replica["template"]["spec"]["containers"][0]["ports"] = [
                {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
    return found


@pytest.mark.parametrize("kind", sorted(AUTHORED))
def test_a_stored_object_translates_as_its_author_wrote_it(kind: str) -> None:
    manifest = as_authored(stored(kind), None)
    authored = copy.deepcopy(AUTHORED[kind])
    authored["metadata"]["name"] = job_name("team-a", "train", kind)
    authored["metadata"]["labels"][NATIVE_LABEL] = "true"
    expected = translate(authored).spec
    made = translate(manifest).spec
    assert made.name == job_name("team-a", "train", kind) == expected.name
    assert made.to_dict() == expected.to_dict()
    assert made.queue == "team-a"


def test_the_job_name_tells_kinds_apart_but_keeps_the_jobs_own() -> None:
    assert job_name("a", "x") == job_name("a", "x", "Job")
    assert len({job_name("a", "x", k) for k in ("Job", "JobSet", "PyTorchJob")}) == 3


@pytest.mark.parametrize("kind", sorted(AUTHORED))
def test_every_pod_template_is_found(kind: str) -> None:
    adapter = kind_of(AUTHORED[kind])
    assert adapter is not None
    paths = adapter.templates(AUTHORED[kind])
    assert paths == TEMPLATES[kind]
    assert all("containers" in at(AUTHORED[kind], path)["spec"] for path in paths)


# The Phalanx pod set each template becomes, in the order of TEMPLATES.
POD_SETS = {"JobSet": ["leader", "workers"], "PyTorchJob": ["master", "worker"],
            "MPIJob": ["launcher", "worker"], "RayCluster": ["head", "gpu"],
            "RayJob": ["head", "gpu"], "AppWrapper": ["master", "worker"]}


@pytest.mark.parametrize("kind", sorted(AUTHORED))
def test_each_template_names_the_pod_set_the_translation_makes_of_it(kind: str) -> None:
    adapter = kind_of(AUTHORED[kind])
    assert adapter is not None
    names = adapter.pod_sets(AUTHORED[kind])
    assert names == POD_SETS[kind]
    authored = copy.deepcopy(AUTHORED[kind])
    authored["metadata"]["name"] = "train"
    assert sorted(names) == sorted(p.name for p in translate(authored).spec.pod_sets)


def test_the_table_is_every_adapter_once() -> None:
    assert set(CLUSTER_SET) == set(NATIVE_KINDS)
    assert {k for _, k in NATIVE_KINDS} == {"Job", *AUTHORED}
    assert len({(a.group, a.plural) for a in NATIVE_KINDS.values()}) == len(NATIVE_KINDS)


@pytest.mark.parametrize(("kind", "status", "finished", "running", "everyone"), [
    ("JobSet", {"conditions": [{"type": "Completed", "status": "True"}]}, SUCCEEDED, 0, False),
    ("JobSet", {"conditions": [{"type": "Failed", "status": "True", "reason": "x"}]},
     FAILED, 0, False),
    ("JobSet", {"replicatedJobsStatus": [{"name": "leader", "ready": 1},
                                         {"name": "workers", "ready": 2}]}, None, 6, False),
    ("PyTorchJob", {"replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2}}},
     None, 3, False),
    ("PyTorchJob", {"conditions": [{"type": "Succeeded", "status": "True"}]}, SUCCEEDED, 0,
     False),
    ("MPIJob", {"conditions": [{"type": "Failed", "status": "True"}]}, FAILED, 0, False),
    ("RayCluster", {"state": "ready"}, None, 0, True),
    ("RayCluster", {"readyWorkerReplicas": 1}, None, 1, False),
    ("RayJob", {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, SUCCEEDED, 0,
     False),
    ("RayJob", {"jobDeploymentStatus": "Failed"}, FAILED, 0, False),
    ("RayJob", {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, None, 0, True),
    ("AppWrapper", {"phase": "Running"}, None, 0, True),
    ("AppWrapper", {"phase": "Succeeded"}, SUCCEEDED, 0, False),
])
def test_each_kind_reads_its_status(kind: str, status: dict[str, Any], finished: str | None,
                                    running: int, everyone: bool) -> None:
    found = {**AUTHORED[kind], "status": status}
    adapter = kind_of(found)
    assert adapter is not None
    progress = adapter.progress(found)
    assert (progress.finished, progress.running, progress.all_running) == (
        finished, running, everyone)


def test_an_object_a_managed_kind_controls_is_not_queued_of_its_own() -> None:
    child = {"metadata": {"ownerReferences": [{
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "t",
        "uid": "u", "controller": True}]}}
    assert owned_by_managed(child)
    child["metadata"]["ownerReferences"][0]["kind"] = "CronJob"
    assert not owned_by_managed(child)


def test_suspend_is_added_with_the_parents_jsonpatch_lacks() -> None:
    adapter = kind_of(PYTORCH)
    assert adapter is not None
    assert add_ops(PYTORCH, adapter.suspend, True) == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]
    with_policy = {**PYTORCH, "spec": {**PYTORCH["spec"], "runPolicy": {}}}
    assert add_ops(with_policy, adapter.suspend, True) == [
        {"op": "add", "path": "/spec/runPolicy/suspend", "value": True}]


def test_a_merge_diff_removes_what_is_gone_and_replaces_lists_whole() -> None:
    old = {"a": {"b": 1, "c": 2}, "l": [1, 2], "same": {"x": 1}}
    new = {"a": {"b": 1}, "l": [1, 3], "same": {"x": 1}, "n": {"y": 1}}
    assert merge_diff(old, new) == {"a": {"c": None}, "l": [1, 3], "n": {"y": 1}}


def test_a_managed_mpijob_whose_launcher_waits_for_its_workers_is_refused() -> None:
    """Its workers stay gated until the whole gang exists, launcher included: a launcher
    made only once the workers run would never be made."""
    adapter = kind_of(AUTHORED["MPIJob"])
    assert adapter is not None
    adapter.check(AUTHORED["MPIJob"])  # the default policy: accepted
    waiting = copy.deepcopy(AUTHORED["MPIJob"])
    waiting["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    with pytest.raises(SpecError) as caught:
        adapter.check(waiting)
    assert caught.value.field == "spec.launcherCreationPolicy"
    assert "AtStartup" in (caught.value.fix or "")
    for other in AUTHORED.values():  # no other kind refuses what it was given here
        found = kind_of(other)
        assert found is not None
        found.check(other)
