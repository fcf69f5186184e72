"""A small batch Job controller for the fake API server: a thread that makes each
unsuspended Job's pods from its template and keeps its status, as Kubernetes' Job
controller does.

What it does, as the Job controller does it: ``parallelism`` pods, named
``<job>-<index>-<suffix>``, labelled ``batch.kubernetes.io/job-name`` and
``batch.kubernetes.io/controller-uid``, owned by the Job (deleting it deletes them), with the
``batch.kubernetes.io/job-completion-index`` annotation when ``completionMode: Indexed``;
nothing for a suspended Job, whose running pods it deletes (condition ``Suspended``); the
counts ``active``, ``ready``, ``succeeded`` and ``failed``; ``Complete`` once
``completions`` pods succeeded, ``Failed`` once more than ``backoffLimit`` failed (a failed
pod is replaced meanwhile). The fake kubelet (``autopilot``) runs the pods, once ungated.
``limit`` holds the controller back (at most that many pods per Job), as a slow controller
or a quota on pods would: a test sees a gang whose pods do not all exist yet.

``FakeJobSetController`` plays JobSet's controller the same way: while a JobSet is not
suspended, ``replicas`` child Jobs per replicated Job, ``<jobset>-<replicatedJob>-<index>``,
made from that replicated Job's template and owned by the JobSet (the Job controller above
makes their pods); while it is suspended, none (its child Jobs deleted, so resuming makes
them afresh from the templates as they are then); ``replicatedJobsStatus`` (``ready``: Jobs
whose pods all run or succeeded, ``succeeded``, ``failed``, ``active``) and the conditions
``Completed`` (every child Job complete) and ``Failed`` (one failed); each child Job and its
pods labelled ``jobset.sigs.k8s.io/job-index``. Its ``limit`` is the most child Jobs a
JobSet gets, the training operator's the most pods a PyTorchJob gets.
``FakeTrainingOperator`` plays Kubeflow's training operator for PyTorchJobs likewise.
"""

from __future__ import annotations

import copy
import itertools
import threading
from typing import Any

from tests.k8s_plane.fake_apiserver import FakeAPIServer, now_iso

Object = dict[str, Any]
_suffix = itertools.count(10000)
JOB_NAME = "batch.kubernetes.io/job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
INDEX = "batch.kubernetes.io/job-completion-index"


class FakeJobController:
    def __init__(self, api: FakeAPIServer) -> None:
        self.api = api
        self.made: list[str] = []  # every pod made, in order
        self.limit: int | None = None  # the most live pods a Job gets (None: parallelism)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-job-controller",
                                        daemon=True)

    def start(self) -> FakeJobController:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with self.api.lock:
                for job in self.api.list("jobs"):
                    self._reconcile(job)

    def _reconcile(self, job: Object) -> None:
        meta, spec = job["metadata"], job.get("spec") or {}
        status = copy.deepcopy(job.get("status") or {})
        conditions = status.get("conditions") or []
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
               for c in conditions) or meta.get("deletionTimestamp"):
            return
        ns, uid = meta["namespace"], meta["uid"]
        owned = [p for p in self.api.list("pods", ns)
                 if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]
        parallelism = int(spec.get("parallelism", 1))
        completions = int(spec.get("completions") or parallelism)
        if spec.get("suspend"):
            for pod in owned:
                if pod["status"].get("phase") not in ("Succeeded", "Failed"):
                    self.api.remove("pods", pod["metadata"]["name"], ns)
            status.update(active=0, ready=0)
            _condition(status, "Suspended", "True", "JobSuspended", "Job suspended")
            return self._write(job, status)
        _condition(status, "Suspended", "False", "JobResumed", "Job resumed")
        status.setdefault("startTime", now_iso())
        phases = [p["status"].get("phase") for p in owned]
        succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
        live = [p for p in owned if p["status"].get("phase") not in ("Succeeded", "Failed")]
        done_indexes = {p["metadata"]["annotations"].get(INDEX) for p in owned
                        if p["status"].get("phase") == "Succeeded"}
        live_indexes = {p["metadata"]["annotations"].get(INDEX) for p in live}
        if succeeded < completions and failed <= int(spec.get("backoffLimit", 6)):
            most = parallelism if self.limit is None else min(parallelism, self.limit)
            for index in range(parallelism):
                if len(live) >= most - succeeded:
                    break
                if str(index) in done_indexes or str(index) in live_indexes:
                    continue
                live.append(self._make_pod(job, index))
                live_indexes.add(str(index))
        status.update(active=len(live), succeeded=succeeded, failed=failed,
                      ready=sum(1 for p in live if p["status"].get("phase") == "Running"))
        if succeeded >= completions:
            status.update(active=0, ready=0, completionTime=now_iso())
            _condition(status, "Complete", "True", "CompletionsReached", "Reached expected "
                       "number of succeeded pods")
        elif failed > int(spec.get("backoffLimit", 6)):
            status.update(active=0, ready=0)
            _condition(status, "Failed", "True", "BackoffLimitExceeded",
                       "Job has reached the specified backoff limit")
        return self._write(job, status)

    def _make_pod(self, job: Object, index: int) -> Object:
        meta, template = job["metadata"], copy.deepcopy(job["spec"]["template"])
        pod_meta = template.get("metadata") or {}
        name = f"{meta['name']}-{index}-{next(_suffix)}"
        labels = {**(pod_meta.get("labels") or {}), JOB_NAME: meta["name"],
                  CONTROLLER_UID: meta["uid"]}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": meta["namespace"], "labels": labels,
            "annotations": {**(pod_meta.get("annotations") or {}), INDEX: str(index)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                 "uid": meta["uid"], "controller": True}],
        }, "spec": template.get("spec") or {}}
        self.made.append(name)
        return self.api.add("pods", pod, meta["namespace"])

    def _write(self, job: Object, status: Object) -> None:
        if status != (job.get("status") or {}):
            self.api.update("jobs", job["metadata"]["name"], {"status": status},
                            job["metadata"]["namespace"])


class FakeJobSetController(FakeJobController):
    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with self.api.lock:
                for jobset in self.api.list("jobsets"):
                    self._reconcile_set(jobset)

    def _reconcile_set(self, jobset: Object) -> None:
        meta, spec = jobset["metadata"], jobset.get("spec") or {}
        status = copy.deepcopy(jobset.get("status") or {})
        if any(c["type"] in ("Completed", "Failed") and c["status"] == "True"
               for c in status.get("conditions") or []) or meta.get("deletionTimestamp"):
            return
        ns = meta["namespace"]
        children = {j["metadata"]["name"]: j for j in self.api.list("jobs", ns)
                    if any(o.get("uid") == meta["uid"]
                           for o in j["metadata"].get("ownerReferences") or [])}
        if spec.get("suspend"):
            for name in children:
                self.api.remove("jobs", name, ns)
            children = {}
            _condition(status, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
        else:
            _condition(status, "Suspended", "False", "ResumeJobs", "jobset is resumed")
        counts = []
        done = failed = 0
        total = 0
        made = len(children)
        for replicated in spec.get("replicatedJobs") or []:
            ready = succeeded = broken = active = 0
            for index in range(int(replicated.get("replicas", 1))):
                total += 1
                name = f"{meta['name']}-{replicated['name']}-{index}"
                child = children.get(name)
                if child is None and not spec.get("suspend") and (
                        self.limit is None or made < self.limit):
                    child = self._make_job(jobset, replicated, name, index)
                    made += 1
                if child is None:
                    continue
                held = {c["type"] for c in (child.get("status") or {}).get("conditions") or []
                        if c["status"] == "True"}
                counts_of = child.get("status") or {}
                parallelism = int(child["spec"].get("parallelism", 1))
                if "Complete" in held:
                    succeeded += 1
                elif "Failed" in held:
                    broken += 1
                else:
                    active += 1
                    if int(counts_of.get("ready") or 0) + int(counts_of.get("succeeded") or 0) \
                            >= parallelism:
                        ready += 1
            done += succeeded
            failed += broken
            counts.append({"name": replicated["name"], "ready": ready, "succeeded": succeeded,
                           "failed": broken, "active": active, "suspended": 0})
        status["replicatedJobsStatus"] = counts
        if failed:
            _condition(status, "Failed", "True", "FailedJobs", "a child Job failed")
        elif total and done == total:
            _condition(status, "Completed", "True", "AllJobsCompleted", "jobset completed")
        if status != (jobset.get("status") or {}):
            self.api.update("jobsets", meta["name"], {"status": status}, ns)

    def _make_job(self, jobset: Object, replicated: Object, name: str, index: int) -> Object:
        meta = jobset["metadata"]
        template = copy.deepcopy(replicated["template"])
        labels = {**((template.get("metadata") or {}).get("labels") or {}),
                  "jobset.sigs.k8s.io/jobset-name": meta["name"],
                  "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
                  "jobset.sigs.k8s.io/job-index": str(index)}
        pod_meta = template["spec"]["template"].setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}),
                              "jobset.sigs.k8s.io/job-index": str(index)}
        return self.api.add("jobs", {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                         "ownerReferences": [{
                             "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                             "name": meta["name"], "uid": meta["uid"], "controller": True}]},
            "spec": template["spec"]}, meta["namespace"])


def _condition(status: Object, kind: str, value: str, reason: str, message: str) -> None:
    conditions = status.setdefault("conditions", [])
    for condition in conditions:
        if condition["type"] == kind:
            if condition["status"] != value:
                condition.update(status=value, reason=reason, message=message,
                                 lastTransitionTime=now_iso())
            return
    if value == "True":  # a condition that never held is not written
        conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                           "lastTransitionTime": now_iso()})


class FakeTrainingOperator(FakeJobController):
    """Kubeflow's training operator for PyTorchJobs, as far as the tests need it: while a
    PyTorchJob is not suspended (``runPolicy.suspend``), one pod per replica of each
    replica spec, ``<job>-<type>-<index>``, made from that spec's template and owned by the
    PyTorchJob; while it is suspended, none (its running pods deleted);
    ``replicaStatuses`` (``active``: running, ``succeeded``, ``failed`` per replica type)
    and the conditions ``Running`` (every pod running), ``Succeeded`` (every pod succeeded) and ``Failed`` (one failed)."""

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with self.api.lock:
                for job in self.api.list("pytorchjobs"):
                    self._reconcile_training(job)

    def _reconcile_training(self, job: Object) -> None:
        meta, spec = job["metadata"], job.get("spec") or {}
        status = copy.deepcopy(job.get("status") or {})
        if any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
               for c in status.get("conditions") or []) or meta.get("deletionTimestamp"):
            return
        ns = meta["namespace"]
        owned = {p["metadata"]["name"]: p for p in self.api.list("pods", ns)
                 if any(o.get("uid") == meta["uid"]
                        for o in p["metadata"].get("ownerReferences") or [])}
        suspended = bool((spec.get("runPolicy") or {}).get("suspend"))
        replicas: dict[str, Object] = {}
        phases: list[str] = []
        made = len(owned)
        for role, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
            counts = {"active": 0, "succeeded": 0, "failed": 0}
            for index in range(int(replica.get("replicas", 1))):
                name = f"{meta['name']}-{role.lower()}-{index}"
                pod = owned.get(name)
                phase = (pod or {}).get("status", {}).get("phase")
                if suspended:
                    if pod is not None and phase not in ("Succeeded", "Failed"):
                        self.api.remove("pods", name, ns)
                    continue
                if pod is None and self.limit is not None and made >= self.limit:
                    continue
                if pod is None:
                    pod = self._make_replica(job, role, index, replica["template"], name)
                    made += 1
                    phase = "Pending"
                phases.append(str(phase))
                key = {"Succeeded": "succeeded", "Failed": "failed", "Running": "active"}.get(
                    str(phase))
                if key is not None:  # (as the operator counts: a pending pod is none)
                    counts[key] += 1
            replicas[role] = counts
        status["replicaStatuses"] = replicas
        if suspended:
            _condition(status, "Suspended", "True", "PyTorchJobSuspended", "suspended")
            _condition(status, "Running", "False", "PyTorchJobSuspended", "suspended")
        else:
            _condition(status, "Suspended", "False", "PyTorchJobResumed", "resumed")
            status.setdefault("startTime", now_iso())
        if "Failed" in phases:
            _condition(status, "Failed", "True", "PyTorchJobFailed", "a replica failed")
        elif phases and all(p == "Succeeded" for p in phases):
            _condition(status, "Succeeded", "True", "PyTorchJobSucceeded", "all succeeded")
        elif phases and all(p == "Running" for p in phases):
            _condition(status, "Running", "True", "PyTorchJobRunning", "all running")
        if status != (job.get("status") or {}):
            self.api.update("pytorchjobs", meta["name"], {"status": status}, ns)

    def _make_replica(self, job: Object, role: str, index: int, template: Object,
                      name: str) -> Object:
        meta, template = job["metadata"], copy.deepcopy(template)
        labels = {**((template.get("metadata") or {}).get("labels") or {}),
                  "training.kubeflow.org/job-name": meta["name"],
                  "training.kubeflow.org/replica-type": role.lower(),
                  "training.kubeflow.org/replica-index": str(index)}
        return self.api.add("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": meta["namespace"], "labels": labels,
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                 "name": meta["name"], "uid": meta["uid"],
                                 "controller": True}],
        }, "spec": template.get("spec") or {}}, meta["namespace"])
