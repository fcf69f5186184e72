"""Kubernetes-native admission: `phalanx up --compute kubernetes --manage-namespaces SELECTOR`
against the fake API server, with the fake Job controller making Jobs' pods and the fake
kubelet running them. Jobs are created as kubectl creates them: straight in the API."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from phalanx.sdk import Client
from phalanx.spec.manifests.native import ADMITTED_ANNOTATION, JOB_ANNOTATION, job_name
from phalanx.spec.status import JobStatus
from tests.k8s_plane.conftest import wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.fake_jobs import JOB_NAME, FakeJobController
from tests.k8s_plane.helpers import IMAGE
from tests.k8s_plane.test_end_to_end import _control_plane, _up, _wait_for_server
from tests.leftovers import stop_process

pytestmark = pytest.mark.slow

MANAGED = "team-a"
UNMANAGED = "team-b"
SELECTOR = "phalanx.dev/managed=true"


@pytest.fixture
def controller(api: FakeAPIServer) -> Iterator[FakeJobController]:
    api.add("namespaces", {"metadata": {"name": MANAGED,
                                        "labels": {"phalanx.dev/managed": "true"}}})
    api.add("namespaces", {"metadata": {"name": UNMANAGED}})
    for name in ("gpu-1", "gpu-2"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=4)
    made = FakeJobController(api).start()
    try:
        yield made
    finally:
        made.stop()


def batch_job(name: str, *, replicas: int = 2, gpus: int = 4, queue: str | None = "default",
              seconds: str = "1") -> dict[str, Any]:
    """A Job as `kubectl create -f` sends it: not suspended, naming its Kueue queue."""
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"parallelism": replicas, "completions": replicas,
                 "completionMode": "Indexed", "backoffLimit": 0,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [{
                     "name": "main", "image": IMAGE, "command": ["sleep", seconds],
                     "resources": {"requests": {"cpu": "2", "memory": "4Gi",
                                                "nvidia.com/gpu": str(gpus)}}}]}}},
    }


def job_pods(api: FakeAPIServer, namespace: str, name: str) -> list[dict[str, Any]]:
    return [p for p in api.list("pods", namespace)
            if p["metadata"]["labels"].get(JOB_NAME) == name]


def conditions(api: FakeAPIServer, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    found = api.get("jobs", name, namespace) or {}
    return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}


def state(client: Client, name: str) -> JobStatus | None:
    found = [j for j in client.list() if j.name == name]
    return found[0].status if found else None


def test_a_job_created_while_down_is_held_admitted_and_run_to_success(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controller: FakeJobController,
) -> None:
    # Before Phalanx runs: the Job controller makes the pods of both (no kubelet runs them).
    api.add("jobs", batch_job("train"), MANAGED)
    api.add("jobs", batch_job("theirs"), UNMANAGED)
    wait_until(lambda: len(job_pods(api, MANAGED, "train")) == 2, what="pods made while down")
    api.autopilot = {"start_after": 0.1, "run_for": 0.3}  # runs the pods made from now on
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        managed = job_name(MANAGED, "train")
        # Adopted: suspended (its pods deleted), and queued as a Phalanx job, stored first.
        wait_until(lambda: state(client, managed) is not None, what="the job made")
        found = client.get(managed)
        assert found.spec.pod_sets[0].replicas == 2
        assert found.spec.queue == "default"
        # Admitted: unsuspended, pinned to the placed nodes; the controller's pods succeed.
        wait_until(lambda: state(client, managed) is JobStatus.SUCCEEDED, timeout=30,
                   what="the managed Job's job to succeed")
        obj = api.get("jobs", "train", MANAGED)
        assert obj is not None
        assert obj["metadata"]["annotations"][JOB_ANNOTATION] == managed
        assert obj["metadata"]["annotations"][ADMITTED_ANNOTATION] == "1"
        assert obj["spec"]["suspend"] is False
        pinned = obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
            "matchFields"][0]
        assert pinned["key"] == "metadata.name"
        assert sorted(pinned["values"]) == ["gpu-1", "gpu-2"]
        found_conditions = conditions(api, MANAGED, "train")
        assert found_conditions["Complete"]["status"] == "True"
        assert found_conditions["Admitted"]["status"] == "True"
        assert "ClusterQueue default" in found_conditions["QuotaReserved"]["message"]
        # Both pods made since the adoption ran on nodes Phalanx placed the gang on (which
        # of them each takes is the kube-scheduler's choice: no scheduling gates yet).
        ran = [p for p in job_pods(api, MANAGED, "train")
               if p["status"].get("phase") == "Succeeded"]
        assert len(ran) == 2
        assert {p["spec"]["nodeName"] for p in ran} <= {"gpu-1", "gpu-2"}
        reasons = [e["reason"] for e in api.list("events", MANAGED)
                   if e["involvedObject"]["name"] == "train"]
        assert "Suspended" in reasons and "Admitted" in reasons
        # The unmanaged namespace's Job was left to its controller: never suspended, no job.
        theirs = api.get("jobs", "theirs", UNMANAGED)
        assert theirs is not None
        assert not theirs["spec"].get("suspend")
        assert JOB_ANNOTATION not in (theirs["metadata"].get("annotations") or {})
        assert state(client, job_name(UNMANAGED, "theirs")) is None
        assert not any(e["involvedObject"]["name"] == "theirs"
                       for e in api.list("events", UNMANAGED))


def test_a_job_is_held_suspended_while_the_quota_is_used(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controller: FakeJobController,
) -> None:
    api.autopilot = {"start_after": 0.1, "run_for": 1.5}
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        api.add("jobs", batch_job("first"), MANAGED)
        wait_until(lambda: len([p for p in job_pods(api, MANAGED, "first")
                                if p["status"].get("phase") == "Running"]) == 2,
                   what="the first Job's pods running")
        api.add("jobs", batch_job("second"), MANAGED)  # kubectl: not suspended
        second = job_name(MANAGED, "second")
        wait_until(lambda: state(client, second) is JobStatus.QUEUED, what="second queued")
        held = api.get("jobs", "second", MANAGED)
        assert held is not None and held["spec"]["suspend"] is True
        # Its pods (made before the suspension landed, if any) are gone, none running.
        assert not [p for p in job_pods(api, MANAGED, "second")
                    if p["status"].get("phase") == "Running"]
        assert client.get(second).pending_message
        wait_until(lambda: state(client, second) is JobStatus.SUCCEEDED, timeout=30,
                   what="the second Job run once the first is done")
        assert state(client, job_name(MANAGED, "first")) is JobStatus.SUCCEEDED


def test_cancel_suspends_the_job_again_and_deleting_the_job_ends_its_job(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controller: FakeJobController,
) -> None:
    api.autopilot = {"start_after": 0.1, "run_for": 60}
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        api.add("jobs", batch_job("long"), MANAGED)
        long = job_name(MANAGED, "long")
        wait_until(lambda: state(client, long) is JobStatus.RUNNING, timeout=30,
                   what="the Job's job running")
        # A Job waiting for the quota "long" holds: deleting it ends its job.
        api.add("jobs", batch_job("waiting"), MANAGED)
        waiting = job_name(MANAGED, "waiting")
        wait_until(lambda: state(client, waiting) is JobStatus.QUEUED, what="waiting queued")
        api.remove("jobs", "waiting", MANAGED)
        wait_until(lambda: state(client, waiting) is JobStatus.CANCELLED,
                   what="the deleted Job's job cancelled")
        # Stopping a running job suspends its Job again, its template as it was written.
        client.cancel(long)
        wait_until(lambda: (api.get("jobs", "long", MANAGED) or {})["spec"].get("suspend"),
                   what="the Job suspended again")
        wait_until(lambda: not [p for p in job_pods(api, MANAGED, "long")
                                if p["status"].get("phase") == "Running"],
                   what="its pods deleted by its controller")
        wait_until(lambda: conditions(api, MANAGED, "long").get("Evicted", {}).get("status")
                   == "True", what="the Evicted condition")
        evicted = conditions(api, MANAGED, "long")
        assert "Phalanx stopped job" in evicted["Evicted"]["message"]
        assert evicted["Admitted"]["status"] == "False"
        obj = api.get("jobs", "long", MANAGED)
        assert obj is not None and ADMITTED_ANNOTATION not in obj["metadata"]["annotations"]
        assert "affinity" not in obj["spec"]["template"]["spec"]  # the template restored
        wait_until(lambda: state(client, long) is JobStatus.CANCELLED, what="long cancelled")


def review(namespace: str, obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    """What the API server sends a mutating webhook as `kubectl create` makes ``obj``."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "operation": operation,
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "namespace": namespace, "userInfo": {"username": "alice@example.com"},
        "object": obj, "dryRun": False}}


def test_the_webhook_holds_managed_jobs_and_a_job_phalanx_refuses_says_why(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controller: FakeJobController,
) -> None:
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        url = client.url + "/admission/batch-jobs"
        answer = httpx.post(url, json=review(MANAGED, batch_job("hooked"))).json()
        response = answer["response"]
        assert answer["kind"] == "AdmissionReview"
        assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
        assert response["allowed"] is True and response["patchType"] == "JSONPatch"
        patch = json.loads(base64.b64decode(response["patch"]))
        assert {"op": "add", "path": "/spec/suspend", "value": True} in patch
        assert {"op": "add", "path": "/metadata/annotations", "value": {
            JOB_ANNOTATION: job_name(MANAGED, "hooked"),
            "phalanx.dev/owner": "alice@example.com"}} in patch
        # Another namespace's Job, an update, a Job without a queue: allowed as they are.
        for other in (review(UNMANAGED, batch_job("x")),
                      review(MANAGED, batch_job("x"), operation="UPDATE"),
                      review(MANAGED, batch_job("x", queue=None))):
            response = httpx.post(url, json=other).json()["response"]
            assert response == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                                "allowed": True}
        refused = httpx.post(url, json={"kind": "Pod"})
        assert refused.status_code == 400
        assert refused.json()["error"]["field"] == "body"
        # A Job Phalanx cannot queue stays suspended, saying why where kubectl shows it.
        api.add("jobs", batch_job("lost", queue="nosuch"), MANAGED)
        wait_until(lambda: conditions(api, MANAGED, "lost").get("QuotaReserved"),
                   what="the refusal on the Job")
        said = conditions(api, MANAGED, "lost")["QuotaReserved"]
        assert said["status"] == "False" and said["reason"] == "Inadmissible"
        assert "nosuch" in said["message"]
        assert (api.get("jobs", "lost", MANAGED) or {})["spec"]["suspend"] is True
        assert state(client, job_name(MANAGED, "lost")) is None
        wait_until(lambda: any(e["reason"] == "Inadmissible" and e["type"] == "Warning"
                               for e in api.list("events", MANAGED)), what="a Warning event")


GPU_QUEUE = [
    {"kind": "ClusterQueue", "name": "gpus",
     "preemption": {"withinClusterQueue": "LowerPriority"},
     "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
         {"name": "default", "resources": [
             {"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "128Gi"},
             {"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]},
    {"kind": "LocalQueue", "name": "gpus", "clusterQueue": "gpus"},
]


def test_a_preempted_job_is_suspended_again_and_later_finishes(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controller: FakeJobController,
) -> None:
    api.autopilot = {"start_after": 0.1, "run_for": 60}  # the first attempt runs until stopped
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        client.apply(GPU_QUEUE)
        low_job = batch_job("low", queue="gpus")
        low_job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
        api.add("jobs", low_job, MANAGED)
        low = job_name(MANAGED, "low")
        wait_until(lambda: state(client, low) is JobStatus.RUNNING, timeout=30,
                   what="the low-priority Job running")
        api.autopilot = {"start_after": 0.1, "run_for": 0.5}
        high_job = batch_job("high", queue="gpus")
        high_job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
        api.add("jobs", high_job, MANAGED)
        # Preempted, as Kueue evicts: suspended again, its pods deleted, Evicted on it.
        wait_until(lambda: conditions(api, MANAGED, "low").get("Evicted", {}).get("status")
                   == "True", timeout=30, what="the low Job evicted")
        assert (api.get("jobs", "low", MANAGED) or {})["spec"]["suspend"] is True
        wait_until(lambda: state(client, job_name(MANAGED, "high")) is JobStatus.SUCCEEDED,
                   timeout=30, what="the high-priority Job run")
        # Admitted again once the quota is free, and run to its end this time.
        wait_until(lambda: state(client, low) is JobStatus.SUCCEEDED, timeout=30,
                   what="the preempted Job finished")
        assert client.get(low).attempt == 2
        obj = api.get("jobs", "low", MANAGED)
        assert obj is not None and obj["metadata"]["annotations"][ADMITTED_ANNOTATION] == "2"
        assert conditions(api, MANAGED, "low")["Complete"]["status"] == "True"


def test_a_job_deleted_while_the_control_plane_was_down_ends_its_job(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controller: FakeJobController,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    flags = ("--manage-namespaces", SELECTOR)
    proc = _up(home, kubeconfig, *flags)
    try:
        client = _wait_for_server(proc, home)
        api.autopilot = {"start_after": 0.1, "run_for": 60}
        api.add("jobs", batch_job("blocker"), MANAGED)  # holds every GPU
        wait_until(lambda: state(client, job_name(MANAGED, "blocker")) is JobStatus.RUNNING,
                   timeout=30, what="the blocker running")
        api.add("jobs", batch_job("huge"), MANAGED)
        huge = job_name(MANAGED, "huge")
        wait_until(lambda: state(client, huge) is JobStatus.QUEUED, what="huge queued")
    finally:
        stop_process(proc)
    api.remove("jobs", "huge", MANAGED)  # while no control plane runs
    proc = _up(home, kubeconfig, *flags)
    try:
        client = _wait_for_server(proc, home)
        wait_until(lambda: state(client, huge) is JobStatus.CANCELLED, timeout=20,
                   what="the job of the deleted Job cancelled after the restart")
    finally:
        stop_process(proc)
