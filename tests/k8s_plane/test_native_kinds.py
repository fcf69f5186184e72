"""Kubernetes-native admission of the kinds beyond Jobs: a JobSet (played by the fake JobSet
controller, whose child Jobs the fake Job controller runs), a PyTorchJob (played by the
fake training operator) and a RayCluster (played by the fake KubeRay), created as kubectl creates them, against `phalanx up --compute
kubernetes --manage-namespaces SELECTOR`."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from phalanx.spec.manifests.native import ADMITTED_ANNOTATION, JOB_ANNOTATION, job_name
from phalanx.spec.status import JobStatus
from tests.k8s_plane.conftest import wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.fake_jobs import (
    FakeJobController,
    FakeJobSetController,
    FakeTrainingOperator,
)
from tests.k8s_plane.fake_kuberay import FakeKubeRay
from tests.k8s_plane.helpers import IMAGE
from tests.k8s_plane.test_end_to_end import _control_plane
from tests.k8s_plane.test_native import (
    GPU_QUEUE,
    MANAGED,
    SELECTOR,
    UNMANAGED,
    add_namespaces_and_nodes,
    batch_job,
    review,
    state,
)

pytestmark = pytest.mark.slow

POD_LABEL = "phalanx.dev/admitted-job"
PIN = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass
class Fakes:
    jobs: FakeJobController
    jobsets: FakeJobSetController
    training: FakeTrainingOperator


@pytest.fixture
def fakes(api: FakeAPIServer) -> Iterator[Fakes]:
    add_namespaces_and_nodes(api)
    made = Fakes(FakeJobController(api).start(), FakeJobSetController(api).start(),
                 FakeTrainingOperator(api).start())
    try:
        yield made
    finally:
        for controller in (made.jobs, made.jobsets, made.training):
            controller.stop()


@pytest.fixture
def controllers(fakes: Fakes) -> None:
    return None


# The cap of a wait for the control plane and the fake controllers (each ends as soon as
# its condition holds): generous, for a suite run in parallel on a loaded machine.
WAIT = 120.0


def pod_template(gpus: int, seconds: str = "1") -> dict[str, Any]:
    return {"spec": {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": IMAGE, "command": ["sleep", seconds],
        "resources": {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": str(gpus)}}}]}}


def jobset(name: str, queue: str = "default", priority: str | None = None,
           workers: int = 1) -> dict[str, Any]:
    """A JobSet as `kubectl create -f` sends it: a leader Job and ``workers`` worker Jobs of
    one pod each, 4 GPUs a pod (a node's 4)."""
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicatedJobs": [
            {"name": rj, "replicas": replicas, "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 0,
                "completionMode": "Indexed", "template": pod_template(4)}}}
            for rj, replicas in (("leader", 1), ("workers", workers))]},
    }


def pytorchjob(name: str, gpus: int = 2) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {"replicas": count, "template": {"spec": {"containers": [{
            "name": "pytorch", "image": IMAGE, "command": ["python", "train.py"],
            "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}}}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(3)}}}


def templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a JobSet, each replicated Job's."""
    return [r["template"]["spec"]["template"] for r in obj["spec"]["replicatedJobs"]]


def pinned_nodes(template: dict[str, Any]) -> list[str]:
    terms = template["spec"]["affinity"]["nodeAffinity"][PIN]["nodeSelectorTerms"]
    return sorted(terms[0]["matchFields"][0]["values"])


def conditions(api: FakeAPIServer, plural: str, name: str) -> dict[str, dict[str, Any]]:
    found = api.get(plural, name, MANAGED) or {}
    return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}


def child_pods(api: FakeAPIServer, jobset_name: str, phase: str) -> list[dict[str, Any]]:
    children = {j["metadata"]["name"] for j in api.list("jobs", MANAGED)
                if j["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == jobset_name}
    return [p for p in api.list("pods", MANAGED)
            if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") in children
            and p["status"].get("phase") == phase]


def test_a_jobset_is_held_admitted_and_run_to_success(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controllers: None,
) -> None:
    api.autopilot = {"start_after": 0.1, "run_for": 0.5}
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        api.add("jobsets", jobset("train"), MANAGED)
        api.add("jobsets", jobset("theirs"), UNMANAGED)
        managed = job_name(MANAGED, "train", "JobSet")
        wait_until(lambda: state(client, managed) is not None, what="the JobSet's job")
        found = client.get(managed)
        assert [(p.name, p.replicas) for p in found.spec.pod_sets] == [("leader", 1),
                                                                       ("workers", 1)]
        wait_until(lambda: state(client, managed) is JobStatus.SUCCEEDED, timeout=WAIT,
                   what="the JobSet's job to succeed")
        obj = api.get("jobsets", "train", MANAGED)
        assert obj is not None and obj["spec"]["suspend"] is False
        assert obj["metadata"]["annotations"][JOB_ANNOTATION] == managed
        assert obj["metadata"]["annotations"][ADMITTED_ANNOTATION] == "1"
        for template in templates(obj):  # each replicated Job's pods pinned and counted
            assert pinned_nodes(template) == ["gpu-1", "gpu-2"]
            assert template["metadata"]["labels"][POD_LABEL] == managed
        said = conditions(api, "jobsets", "train")
        assert said["Completed"]["status"] == "True"
        assert said["Admitted"]["status"] == "True"
        ran = child_pods(api, "train", "Succeeded")
        assert len(ran) == 2 and {p["spec"]["nodeName"] for p in ran} <= {"gpu-1", "gpu-2"}
        reasons = {e["reason"] for e in api.list("events", MANAGED)
                   if e["involvedObject"]["kind"] == "JobSet"}
        assert {"Suspended", "Admitted"} <= reasons
        # Its child Jobs are the JobSet's: never queued of their own.
        assert {j.name for j in client.list()} == {managed}
        # The unmanaged namespace's JobSet ran as its controller ran it, untouched.
        theirs = api.get("jobsets", "theirs", UNMANAGED)
        assert theirs is not None and not theirs["spec"].get("suspend")
        assert JOB_ANNOTATION not in (theirs["metadata"].get("annotations") or {})
        assert not any(POD_LABEL in (t.get("metadata") or {}).get("labels", {})
                       for t in templates(theirs))
        assert not api.list("events", UNMANAGED)


def test_a_preempted_jobset_is_suspended_with_its_templates_restored_and_later_finishes(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controllers: None,
) -> None:
    api.autopilot = {"start_after": 0.1, "run_for": 60}  # the first attempt runs until stopped
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        client.apply(GPU_QUEUE)
        api.add("jobsets", jobset("low", queue="gpus", priority="low"), MANAGED)
        low = job_name(MANAGED, "low", "JobSet")
        wait_until(lambda: state(client, low) is JobStatus.RUNNING, timeout=WAIT,
                   what="the low-priority JobSet running")
        assert len(child_pods(api, "low", "Running")) == 2
        api.autopilot = {"start_after": 0.1, "run_for": 0.5}
        high_job = batch_job("high", queue="gpus")
        high_job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
        api.add("jobs", high_job, MANAGED)
        wait_until(lambda: conditions(api, "jobsets", "low").get("Evicted", {}).get("status")
                   == "True", timeout=WAIT, what="the low JobSet evicted")
        held = api.get("jobsets", "low", MANAGED)
        assert held is not None and held["spec"]["suspend"] is True
        assert ADMITTED_ANNOTATION not in held["metadata"]["annotations"]
        for template in templates(held):  # as it was written
            assert template == pod_template(4)
        wait_until(lambda: state(client, job_name(MANAGED, "high")) is JobStatus.SUCCEEDED,
                   timeout=WAIT, what="the high-priority Job run")
        wait_until(lambda: state(client, low) is JobStatus.SUCCEEDED, timeout=WAIT,
                   what="the preempted JobSet finished")
        assert client.get(low).attempt == 2
        done = api.get("jobsets", "low", MANAGED)
        assert done is not None and done["metadata"]["annotations"][ADMITTED_ANNOTATION] == "2"


def test_a_pytorchjob_is_held_admitted_with_each_template_pinned_cancelled_and_rerun(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controllers: None,
) -> None:
    api.autopilot = {"start_after": 0.1, "run_for": 60}
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        url = client.url + "/admission/workloads"
        for obj, plural, suspend in (
                (pytorchjob("hooked"), "pytorchjobs",
                 {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}),
                (jobset("hooked"), "jobsets",
                 {"op": "add", "path": "/spec/suspend", "value": True})):
            request = review(MANAGED, obj)
            group, version = obj["apiVersion"].split("/")
            request["request"]["kind"] = {"group": group, "version": version,
                                          "kind": obj["kind"]}
            request["request"]["resource"] = {"group": group, "version": version,
                                              "resource": plural}
            del request["request"]["object"]["apiVersion"]  # the review's kind says it
            response = httpx.post(url, json=request).json()["response"]
            patch = json.loads(base64.b64decode(response["patch"]))
            assert suspend in patch
            assert {"op": "add", "path": "/metadata/annotations", "value": {
                JOB_ANNOTATION: job_name(MANAGED, "hooked", obj["kind"]),
                "phalanx.dev/owner": "alice@example.com"}} in patch
        # Created without the webhook: suspended by the watch, queued, admitted.
        api.add("pytorchjobs", pytorchjob("ddp"), MANAGED)
        managed = job_name(MANAGED, "ddp", "PyTorchJob")
        wait_until(lambda: (api.get("pytorchjobs", "ddp", MANAGED) or {}).get(
            "metadata", {}).get("annotations", {}).get(ADMITTED_ANNOTATION) == "1",
            timeout=WAIT, what="the PyTorchJob admitted")
        found = client.get(managed)
        assert found.spec.kind == "torch"
        assert [(p.name, p.replicas) for p in found.spec.pod_sets] == [("master", 1),
                                                                       ("worker", 3)]
        obj = api.get("pytorchjobs", "ddp", MANAGED)
        assert obj is not None and obj["spec"]["runPolicy"]["suspend"] is False
        for role in ("Master", "Worker"):
            template = obj["spec"]["pytorchReplicaSpecs"][role]["template"]
            assert pinned_nodes(template) == ["gpu-1", "gpu-2"]
            assert template["metadata"]["labels"][POD_LABEL] == managed
        wait_until(lambda: conditions(api, "pytorchjobs", "ddp").get("Admitted", {}).get(
            "status") == "True", what="the Admitted condition")
        # The operator's pods, made from the pinned templates, run: read from its status.
        wait_until(lambda: state(client, managed) is JobStatus.RUNNING, timeout=WAIT,
                   what="the PyTorchJob's job running")
        pods = [p for p in operator_pods(api, "ddp") if p["status"]["phase"] == "Running"]
        assert len(pods) == 4 and {p["spec"]["nodeName"] for p in pods} <= {"gpu-1", "gpu-2"}
        # Cancelled: suspended again (the operator deletes its pods), each template as it
        # was written.
        client.cancel(managed)
        wait_until(lambda: (api.get("pytorchjobs", "ddp", MANAGED) or {})["spec"][
            "runPolicy"]["suspend"] is True, what="the PyTorchJob suspended again")
        obj = api.get("pytorchjobs", "ddp", MANAGED)
        assert obj is not None
        assert obj["spec"]["pytorchReplicaSpecs"] == pytorchjob("ddp")["spec"][
            "pytorchReplicaSpecs"]
        wait_until(lambda: state(client, managed) is JobStatus.CANCELLED, timeout=20,
                   what="the job cancelled")
        wait_until(lambda: not operator_pods(api, "ddp"), what="its pods deleted")
        # Another, on the freed GPUs, runs to its end.
        api.autopilot = {"start_after": 0.1, "run_for": 0.3}
        api.add("pytorchjobs", pytorchjob("quick"), MANAGED)
        quick = job_name(MANAGED, "quick", "PyTorchJob")
        wait_until(lambda: state(client, quick) is JobStatus.SUCCEEDED, timeout=WAIT,
                   what="the second PyTorchJob's job to succeed")
        assert conditions(api, "pytorchjobs", "quick")["Succeeded"]["status"] == "True"


def operator_pods(api: FakeAPIServer, name: str) -> list[dict[str, Any]]:
    return [p for p in api.list("pods", MANAGED)
            if p["metadata"]["labels"].get("training.kubeflow.org/job-name") == name
            and p["status"].get("phase") in ("Pending", "Running")]


def raycluster(name: str) -> dict[str, Any]:
    """A RayCluster as `kubectl create -f` sends it: a head and a group of two GPU workers
    (KubeRay starts Ray in them)."""
    def template(gpus: int) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": "ray", "image": IMAGE, "resources": {
            "requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": str(gpus)}}}]}}

    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": template(0)},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2,
                                           "rayStartParams": {}, "template": template(4)}]}}


def test_a_raycluster_is_held_admitted_with_its_groups_pinned_and_deleting_it_ends_its_job(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controllers: None,
) -> None:
    api.kuberay = True  # KubeRay's CRDs installed; its operator plays the managed namespace
    operator = FakeKubeRay(api, MANAGED).start()
    api.autopilot = {"start_after": 0.1, "run_for": 60}
    try:
        with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
            api.add("rayclusters", raycluster("ray"), MANAGED)
            managed = job_name(MANAGED, "ray", "RayCluster")
            wait_until(lambda: state(client, managed) is JobStatus.RUNNING, timeout=WAIT,
                       what="the RayCluster's job running (its state ready)")
            found = client.get(managed)
            assert found.spec.kind == "ray"
            assert [(p.name, p.replicas) for p in found.spec.pod_sets] == [("head", 1),
                                                                           ("gpu", 2)]
            obj = api.get("rayclusters", "ray", MANAGED)
            assert obj is not None and obj["spec"]["suspend"] is False
            for template in (obj["spec"]["headGroupSpec"]["template"],
                             obj["spec"]["workerGroupSpecs"][0]["template"]):
                assert pinned_nodes(template) == ["gpu-1", "gpu-2"]
                assert template["metadata"]["labels"][POD_LABEL] == managed
            assert len([p for p in api.list("pods", MANAGED)
                        if p["metadata"]["labels"].get("ray.io/cluster") == "ray"]) == 3
            # A RayCluster never finishes: deleting it ends its job.
            api.remove("rayclusters", "ray", MANAGED)
            wait_until(lambda: state(client, managed) is JobStatus.CANCELLED, timeout=20,
                       what="the deleted RayCluster's job cancelled")
    finally:
        operator.stop()


def test_an_appwrapper_is_admitted_through_its_pod_set_infos_its_component_untouched(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controllers: None,
) -> None:
    wrapped = {k: v for k, v in pytorchjob("inner").items() if k != "metadata"}
    appwrapper = {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
                  "metadata": {"name": "aw",
                               "labels": {"kueue.x-k8s.io/queue-name": "default"}},
                  "spec": {"components": [{"template": wrapped}]}}
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        api.add("appwrappers", appwrapper, MANAGED)
        managed = job_name(MANAGED, "aw", "AppWrapper")
        wait_until(lambda: (api.get("appwrappers", "aw", MANAGED) or {}).get(
            "metadata", {}).get("annotations", {}).get(ADMITTED_ANNOTATION) == "1",
            timeout=WAIT, what="the AppWrapper admitted")
        assert client.get(managed).spec.kind == "torch"
        obj = api.get("appwrappers", "aw", MANAGED)
        assert obj is not None and obj["spec"]["suspend"] is False
        component = obj["spec"]["components"][0]
        assert component["template"] == wrapped  # immutable: what its webhook enforces
        assert [info["labels"] for info in component["podSetInfos"]] == [
            {POD_LABEL: managed}, {POD_LABEL: managed}]  # Master's pods, Worker's
        client.cancel(managed)
        wait_until(lambda: (api.get("appwrappers", "aw", MANAGED) or {})["spec"].get(
            "suspend") is True, what="the AppWrapper suspended again")
        obj = api.get("appwrappers", "aw", MANAGED)
        assert obj is not None and "podSetInfos" not in obj["spec"]["components"][0]


GATE = "phalanx.dev/gang"
POD_SET = "phalanx.dev/pod-set"


def gang_waiting(api: FakeAPIServer, name: str) -> bool:
    return any(e["reason"] == "GangWaiting" and e["involvedObject"]["name"] == name
               for e in api.list("events", MANAGED))


def assert_each_on_its_own_placed_node(pods: list[dict[str, Any]],
                                       placed: dict[str, list[str]]) -> None:
    """Every pod un-gated, pinned to one node of its pod set's and run there; no two pods
    on one node."""
    for pod in pods:
        assert not pod["spec"].get("schedulingGates")
        pin = _own_pin(pod)
        assert pod["spec"]["nodeName"] == pin
        assert pin in placed[pod["metadata"]["labels"][POD_SET]]
    nodes = [p["spec"]["nodeName"] for p in pods]
    assert len(set(nodes)) == len(nodes)


def _own_pin(pod: dict[str, Any]) -> str:
    """The one node the release narrowed the pod's affinity to (the last requirement)."""
    terms = pod["spec"]["affinity"]["nodeAffinity"][PIN]["nodeSelectorTerms"]
    (node,) = terms[0]["matchFields"][-1]["values"]
    return str(node)


def add_gpu_nodes(api: FakeAPIServer) -> None:
    """Two more 4-GPU nodes: four in all, one a pod of 4 GPUs."""
    for name in ("gpu-3", "gpu-4"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=4)


def placed_nodes(client: Any, job: str) -> dict[str, list[str]]:
    admission = client.get(job).admission
    assert admission is not None
    return {p.name: list(p.nodes) for p in admission.pod_sets}


def test_a_jobset_stays_gated_until_all_its_pods_exist_then_each_runs_on_its_placed_node(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, fakes: Fakes,
) -> None:
    add_gpu_nodes(api)
    api.autopilot = {"start_after": 0.1, "run_for": 0.5}
    fakes.jobsets.limit = 3  # three child Jobs of the four, for now
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        api.add("jobsets", jobset("gang", workers=3), MANAGED)
        managed = job_name(MANAGED, "gang", "JobSet")
        wait_until(lambda: gang_waiting(api, "gang"), timeout=WAIT,
                   what="Phalanx to see the JobSet's gang incomplete")
        obj = api.get("jobsets", "gang", MANAGED)
        assert obj is not None
        for template, pod_set in zip(templates(obj), ("leader", "workers"), strict=True):
            assert template["spec"]["schedulingGates"] == [{"name": GATE}]
            assert template["metadata"]["labels"][POD_SET] == pod_set
        wait_until(lambda: len(child_pods(api, "gang", "Pending")) == 3, timeout=WAIT,
                   what="three child Jobs' pods")
        # Created gated, and left so while the fourth does not exist.
        for pod in child_pods(api, "gang", "Pending"):
            assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
            assert not pod["spec"].get("nodeName")
        assert state(client, managed) is not JobStatus.RUNNING
        fakes.jobsets.limit = None  # the last child Job: the whole gang is released
        wait_until(lambda: state(client, managed) is JobStatus.SUCCEEDED, timeout=WAIT,
                   what="the JobSet run once whole")
        pods = child_pods(api, "gang", "Succeeded")
        assert len(pods) == 4
        placed = placed_nodes(client, managed)
        assert sorted(n for nodes in placed.values() for n in nodes) == [
            "gpu-1", "gpu-2", "gpu-3", "gpu-4"]
        assert_each_on_its_own_placed_node(pods, placed)
        # The workers' pods in their Job index order on the workers' nodes in order.
        workers = sorted((p for p in pods if p["metadata"]["labels"][POD_SET] == "workers"),
                         key=lambda p: int(p["metadata"]["labels"][
                             "jobset.sigs.k8s.io/job-index"]))
        assert [p["spec"]["nodeName"] for p in workers] == placed["workers"]
        assert any(e["reason"] == "GangReleased" for e in api.list("events", MANAGED))


def test_a_pytorchjob_stays_gated_until_all_its_pods_exist_then_each_runs_on_its_placed_node(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, fakes: Fakes,
) -> None:
    add_gpu_nodes(api)
    api.autopilot = {"start_after": 0.1, "run_for": 0.5}
    fakes.training.limit = 2  # two pods of the four, for now
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        api.add("pytorchjobs", pytorchjob("gang", gpus=4), MANAGED)
        managed = job_name(MANAGED, "gang", "PyTorchJob")
        wait_until(lambda: gang_waiting(api, "gang"), timeout=WAIT,
                   what="Phalanx to see the PyTorchJob's gang incomplete")
        obj = api.get("pytorchjobs", "gang", MANAGED)
        assert obj is not None
        for role in ("Master", "Worker"):
            template = obj["spec"]["pytorchReplicaSpecs"][role]["template"]
            assert template["spec"]["schedulingGates"] == [{"name": GATE}]
            assert template["metadata"]["labels"][POD_SET] == role.lower()
        held = operator_pods(api, "gang")
        assert len(held) == 2
        for pod in held:
            assert pod["spec"]["schedulingGates"] == [{"name": GATE}]
            assert not pod["spec"].get("nodeName")
        assert state(client, managed) is not JobStatus.RUNNING
        fakes.training.limit = None  # the last pods: the whole gang is released
        wait_until(lambda: state(client, managed) is JobStatus.SUCCEEDED, timeout=WAIT,
                   what="the PyTorchJob run once whole")
        pods = [p for p in api.list("pods", MANAGED)
                if p["metadata"]["labels"].get("training.kubeflow.org/job-name") == "gang"]
        assert len(pods) == 4 and {p["status"]["phase"] for p in pods} == {"Succeeded"}
        placed = placed_nodes(client, managed)
        assert [len(placed["master"]), len(placed["worker"])] == [1, 3]
        assert_each_on_its_own_placed_node(pods, placed)
