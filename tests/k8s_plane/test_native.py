"""Kubernetes-native admission: `phalanx up --compute kubernetes --manage-namespaces SELECTOR`
against the fake API server, with the fake Job controller making Jobs' pods and the fake
kubelet running them. Jobs are created as kubectl creates them: straight in the API."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from phalanx.compute.kubernetes.gates import GATE
from phalanx.deploy import load_values
from phalanx.deploy.rbac import native_rules, worker_cluster_rules, worker_namespace_rules
from phalanx.deploy.webhook import make_certificate
from phalanx.sdk import Client
from phalanx.spec.manifests.native import ADMITTED_ANNOTATION, JOB_ANNOTATION, job_name
from phalanx.spec.status import JobStatus
from tests.k8s_plane.audit import Access, grants
from tests.k8s_plane.conftest import RUNS, wait_until
from tests.k8s_plane.fake_apiserver import FakeAPIServer
from tests.k8s_plane.fake_jobs import JOB_NAME, FakeJobController
from tests.k8s_plane.helpers import IMAGE
from tests.k8s_plane.test_end_to_end import _control_plane, _up, _wait_for_server
from tests.leftovers import stop_process

pytestmark = pytest.mark.slow

MANAGED = "team-a"
UNMANAGED = "team-b"
SELECTOR = "phalanx.dev/managed=true"


# The values `phalanx k8s render --manage-namespaces` renders for a control plane like the
# tests' (`phalanx up --compute kubernetes --namespace runs --manage-namespaces ...`).
RENDERED = load_values({"manageNamespaces": SELECTOR})
# The plane reads its own namespace as it starts, and carries on when that is forbidden.
NAMESPACE_CHECK = Access("get", "", "namespaces", None)


def add_namespaces_and_nodes(api: FakeAPIServer) -> None:
    """The managed and the unmanaged namespace, and two 4-GPU nodes."""
    api.add("namespaces", {"metadata": {"name": MANAGED,
                                        "labels": {"phalanx.dev/managed": "true"}}})
    api.add("namespaces", {"metadata": {"name": UNMANAGED}})
    for name in ("gpu-1", "gpu-2"):
        api.add_node(name, cpu="16", memory="64Gi", gpus=4)


@pytest.fixture
def controller(api: FakeAPIServer) -> Iterator[FakeJobController]:
    add_namespaces_and_nodes(api)
    made = FakeJobController(api).start()
    try:
        yield made
    finally:
        made.stop()
    # Whatever the test did, the control plane asked nothing the render does not grant.
    cluster = grants(worker_cluster_rules(RENDERED))
    in_runs = cluster | grants(worker_namespace_rules(RENDERED))
    refused = {a for a in api.accesses if a != NAMESPACE_CHECK and
               (a.group, a.resource, a.verb) not in (in_runs if a.namespace == RUNS else cluster)}
    assert not refused, f"requests the rendered RBAC does not allow: {sorted(refused, key=str)}"
    assert not any(a.namespace == UNMANAGED for a in api.accesses)


def native_use(api: FakeAPIServer) -> set[tuple[str, str, str]]:
    """What the control plane did to the resources native admission's rules are about,
    outside its own runs namespace."""
    resources = {(group, resource) for group, resource, _ in grants(native_rules(RENDERED))}
    return {(a.group, a.resource, a.verb) for a in api.accesses
            if a.namespace != RUNS and a != NAMESPACE_CHECK
            and (a.group, a.resource) in resources}


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
        # Both pods made since the adoption ran, each on the node Phalanx placed it on (its
        # gate removed once both existed, its affinity narrowed to that node).
        ran = [p for p in job_pods(api, MANAGED, "train")
               if p["status"].get("phase") == "Succeeded"]
        assert len(ran) == 2
        assert sorted(p["spec"]["nodeName"] for p in ran) == ["gpu-1", "gpu-2"]
        assert not any(p["spec"].get("schedulingGates") for p in ran)
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
    # Adopting, admitting, gang-releasing and reporting a Job used every verb the render
    # grants native admission on Jobs, namespaces, pods and events, and no other (the
    # fixture checks the rest is granted). The other kinds' rules are the same verbs,
    # from the same adapters' code (tests/k8s_plane/test_native_kinds.py runs them).
    exercised = {"batch", ""}
    assert {use for use in native_use(api) if use[0] in exercised} == {
        grant for grant in grants(native_rules(RENDERED)) if grant[0] in exercised}


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
        assert "schedulingGates" not in obj["spec"]["template"]["spec"]
        wait_until(lambda: state(client, long) is JobStatus.CANCELLED, what="long cancelled")


def reasons(api: FakeAPIServer, namespace: str, name: str) -> list[str]:
    return [e["reason"] for e in api.list("events", namespace)
            if e["involvedObject"]["name"] == name]


def test_a_gang_stays_gated_until_its_last_pod_exists(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controller: FakeJobController,
) -> None:
    api.autopilot = {"start_after": 0.1, "run_for": 0.3}
    controller.limit = 1  # the Job controller makes one pod of the two, for now
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        api.add("jobs", batch_job("gang"), MANAGED)
        gang = job_name(MANAGED, "gang")
        wait_until(lambda: "GangWaiting" in reasons(api, MANAGED, "gang"), timeout=30,
                   what="Phalanx to see the gang incomplete")
        template = (api.get("jobs", "gang", MANAGED) or {})["spec"]["template"]
        assert template["spec"]["schedulingGates"] == [{"name": GATE}]
        (first,) = job_pods(api, MANAGED, "gang")
        # Created gated, and left so: neither bound nor run while its mate does not exist.
        assert first["spec"]["schedulingGates"] == [{"name": GATE}]
        assert not first["spec"].get("nodeName")
        assert first["status"]["phase"] == "Pending"
        assert state(client, gang) is not JobStatus.RUNNING
        controller.limit = None  # the last pod is made: the whole gang is released
        wait_until(lambda: state(client, gang) is JobStatus.SUCCEEDED, timeout=30,
                   what="the gang run once whole")
        pods = job_pods(api, MANAGED, "gang")
        assert len(pods) == 2 and {p["status"]["phase"] for p in pods} == {"Succeeded"}
        assert not any(p["spec"].get("schedulingGates") for p in pods)
        admission = client.get(gang).admission
        assert admission is not None
        placed = list(admission.pod_sets[0].nodes)
        assert sorted(placed) == ["gpu-1", "gpu-2"]
        # Each pod ran on the node placed for its completion index.
        for pod in pods:
            index = int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
            assert pod["spec"]["nodeName"] == placed[index]
        assert "GangReleased" in reasons(api, MANAGED, "gang")


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
    # The certificate the render would make, here for the loopback address.
    tls = make_certificate(["127.0.0.1"])
    certs = tmp_path / "tls"
    certs.mkdir()
    (certs / "tls.crt").write_bytes(tls.cert)
    (certs / "tls.key").write_bytes(tls.key)
    (certs / "ca.crt").write_bytes(tls.ca)
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR,
                        "--webhook-cert-dir", str(certs), "--webhook-port", "0") as client:
        served = json.loads((tmp_path / "home" / "server.json").read_text())["webhook"]
        assert served.startswith("https://")
        # The API server's side: TLS checked against the caBundle.
        https = httpx.Client(verify=ssl.create_default_context(cafile=certs / "ca.crt"))
        url = served + "/admission/workloads"
        assert https.get(served + "/v1/jobs").status_code == 404  # only the webhook there
        with pytest.raises(httpx.ConnectError):  # a client that does not trust the CA
            httpx.post(url, json=review(MANAGED, batch_job("hooked")))
        answer = https.post(url, json=review(MANAGED, batch_job("hooked"))).json()
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
            response = https.post(url, json=other).json()["response"]
            assert response == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                                "allowed": True}
        refused = https.post(url, json={"kind": "Pod"})
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
        evicted = api.get("jobs", "low", MANAGED) or {}
        assert evicted["spec"]["suspend"] is True
        assert "schedulingGates" not in evicted["spec"]["template"]["spec"]
        wait_until(lambda: state(client, job_name(MANAGED, "high")) is JobStatus.SUCCEEDED,
                   timeout=30, what="the high-priority Job run")
        # Admitted again once the quota is free, and run to its end this time.
        wait_until(lambda: state(client, low) is JobStatus.SUCCEEDED, timeout=30,
                   what="the preempted Job finished")
        assert client.get(low).attempt == 2
        obj = api.get("jobs", "low", MANAGED)
        assert obj is not None and obj["metadata"]["annotations"][ADMITTED_ANNOTATION] == "2"
        assert conditions(api, MANAGED, "low")["Complete"]["status"] == "True"


def team_queue(team: str) -> dict[str, Any]:
    """A team's ClusterQueue: one node's worth of GPUs, lent to and borrowed from its
    cohort, reclaimed from borrowers when the team needs it."""
    return {"kind": "ClusterQueue", "name": team, "cohort": "research",
            "preemption": {"reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                "flavors": [{"name": "default", "resources": [
                                    {"name": "cpu", "nominalQuota": "16"},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}]}


def test_two_teams_borrow_and_reclaim_within_their_cohort(
    api: FakeAPIServer, kubeconfig: Path, tmp_path: Path, controller: FakeJobController,
) -> None:
    # Two namespaces, each mapped to its team's queue (no queue label on the Jobs).
    for team in ("ml-a", "ml-b"):
        api.add("namespaces", {"metadata": {
            "name": team, "labels": {"phalanx.dev/managed": "true"},
            "annotations": {"phalanx.dev/default-queue": team}}})
    api.autopilot = {"start_after": 0.1, "run_for": 60}  # B runs until stopped
    with _control_plane(tmp_path, kubeconfig, "--manage-namespaces", SELECTOR) as client:
        client.apply([team_queue("ml-a"), team_queue("ml-b"),
                      {"kind": "LocalQueue", "name": "ml-a", "clusterQueue": "ml-a"},
                      {"kind": "LocalQueue", "name": "ml-b", "clusterQueue": "ml-b"}])
        # B's Job needs both nodes: half of it borrowed from A's idle quota.
        api.add("jobs", batch_job("wide", queue=None), "ml-b")
        wide = job_name("ml-b", "wide")
        wait_until(lambda: state(client, wide) is JobStatus.RUNNING, timeout=30,
                   what="B's Job running on borrowed quota")
        assert client.get(wide).spec.queue == "ml-b"
        assert "borrowing" in conditions(api, "ml-b", "wide")["Admitted"]["message"]
        # A's Job needs A's own quota back: B's Job is preempted to return it.
        api.autopilot = {"start_after": 0.1, "run_for": 0.5}
        api.add("jobs", batch_job("own", replicas=1, queue=None), "ml-a")
        own = job_name("ml-a", "own")
        wait_until(lambda: conditions(api, "ml-b", "wide").get("Evicted", {}).get("status")
                   == "True", timeout=30, what="B's Job evicted")
        evicted = api.get("jobs", "wide", "ml-b") or {}
        assert evicted["spec"]["suspend"] is True
        template = evicted["spec"]["template"]["spec"]
        assert "affinity" not in template and "schedulingGates" not in template
        assert conditions(api, "ml-b", "wide")["Admitted"]["status"] == "False"
        wait_until(lambda: state(client, own) is JobStatus.SUCCEEDED, timeout=30,
                   what="A's Job run on its reclaimed quota")
        assert client.get(own).spec.queue == "ml-a"
        # Then B's Job is admitted again and runs to its end.
        wait_until(lambda: state(client, wide) is JobStatus.SUCCEEDED, timeout=30,
                   what="B's Job re-admitted and finished")
        assert client.get(wide).attempt == 2
        assert conditions(api, "ml-b", "wide")["Complete"]["status"] == "True"
        assert "Evicted" in reasons(api, "ml-b", "wide")


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
